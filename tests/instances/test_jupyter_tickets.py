"""Jupyter login tickets (pure: no Django, no server): what is accepted and every way one is refused."""

from __future__ import annotations

import pytest

from instances.interactive.tickets import NonceBook, Ticket, TicketRefused, status_token, ticket_mint, ticket_read

SECRET = "a" * 64
NOW = 1_800_000_000.0


def test_a_fresh_ticket_reads_back_once() -> None:
    raw = ticket_mint(secret=SECRET, instance_id="7", username="alice@example.com", ttl_s=60, now=NOW)
    ticket = ticket_read(raw, secret=SECRET, instance_id="7", now=NOW + 59)
    book = NonceBook()
    book.use(ticket, now=NOW + 59)

    assert (ticket.instance_id, ticket.username, ticket.expires_at, len(ticket.nonce)) == (
        "7",
        "alice@example.com",
        int(NOW) + 60,
        32,
    )
    assert "." in raw and SECRET not in raw
    with pytest.raises(TicketRefused, match="already used"):
        book.use(ticket, now=NOW + 59)


@pytest.mark.parametrize(
    ("raw", "secret", "instance", "at", "cause"),
    [
        ("", SECRET, "7", NOW, "malformed ticket"),
        ("no-dot", SECRET, "7", NOW, "malformed ticket"),
        ("!!!.!!!", SECRET, "7", NOW, "malformed ticket"),
        ("x" * 1100 + ".y", SECRET, "7", NOW, "malformed ticket"),
        (None, "b" * 64, "7", NOW, "bad signature"),
        (None, SECRET, "8", NOW, "ticket for another instance"),
        (None, SECRET, "7", NOW + 60, "ticket expired"),
    ],
)
def test_a_bad_ticket_is_refused_with_its_cause(
    raw: str | None, secret: str, instance: str, at: float, cause: str
) -> None:
    good = ticket_mint(secret=SECRET, instance_id="7", username="alice", ttl_s=60, now=NOW)
    with pytest.raises(TicketRefused, match=f"^{cause}$"):
        ticket_read(good if raw is None else raw, secret=secret, instance_id=instance, now=at)


def test_a_tampered_payload_fails_the_signature() -> None:
    good = ticket_mint(secret=SECRET, instance_id="7", username="alice", now=NOW)
    forged_payload = ticket_mint(secret="c" * 64, instance_id="7", username="mallory", now=NOW).split(".")[0]
    with pytest.raises(TicketRefused, match="bad signature"):
        ticket_read(f"{forged_payload}.{good.split('.')[1]}", secret=SECRET, instance_id="7", now=NOW)


def test_used_nonces_are_forgotten_once_their_ticket_expired() -> None:
    book = NonceBook()
    book.use(Ticket("7", "alice", "n1", int(NOW) + 60), now=NOW)
    book.use(Ticket("7", "alice", "n2", int(NOW) + 200), now=NOW + 100)  # n1 expired: pruned
    assert set(book._seen) == {"n2"}


def test_minting_without_a_secret_is_refused_and_the_status_token_is_fixed_per_secret() -> None:
    with pytest.raises(ValueError, match="no secret"):
        ticket_mint(secret="", instance_id="7", username="alice")
    assert status_token(SECRET) == status_token(SECRET) != status_token("b" * 64)
    assert len(status_token(SECRET)) == 64


def test_the_jupyter_server_side_never_imports_django() -> None:
    """The launcher hook, the server's identity provider and the pod objects run where Django is absent."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys, instances.backends.local_launcher, instances.interactive.jupyter_auth, "
        "instances.interactive.jupyter_process, instances.interactive.jupyter_k8s; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'django', 'rest_framework'}))"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
