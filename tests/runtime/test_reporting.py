"""Reporting to the portal: batching, retry while the portal is down, seq numbering, requests."""

from __future__ import annotations

import json
import time
from pathlib import Path

from runtime_support import PortalStub, free_port

from instances.runtime.reporting import Reporter, last_seq


def wait_until(predicate, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def test_events_survive_an_outage_and_arrive_once_the_portal_is_back(tmp_path: Path) -> None:
    port = free_port()
    rep = Reporter(
        callback_url=f"http://127.0.0.1:{port}/cb",
        job_token="job-token",
        attempt=3,
        workdir=tmp_path,
        interval_s=0.05,
    )
    rep.emit("started", step=0, world_size=2)
    for step in (1, 2, 3):
        rep.emit("progress", step=step, loss=1.0 / step, lr=0.1, tokens_per_s=10.0, tokens_seen=step * 64)
    wait_until(lambda: rep.failures >= 1)
    assert rep.pending() == 4
    portal = PortalStub(port=port)
    try:
        rep.close(timeout_s=20)
        events = portal.events()
        assert [(e["seq"], e["type"]) for e in events] == [
            (1, "started"),
            (2, "progress"),
            (3, "progress"),
            (4, "progress"),
        ]
        assert {b["attempt"] for b in portal.batches} == {3}
        assert events[3]["step"] == 3 and events[3]["time"].endswith("Z")
    finally:
        portal.close()
    logged = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["seq"] for e in logged] == [1, 2, 3, 4]
    assert last_seq(tmp_path / "events.jsonl", 3) == 4
    assert last_seq(tmp_path / "events.jsonl", 4) == 0


def test_seq_continues_after_a_restart_within_the_same_attempt(tmp_path: Path) -> None:
    first = Reporter(callback_url="", job_token="", attempt=0, workdir=tmp_path)
    first.emit("started", step=0, world_size=1)
    first.emit("exit", reason="failed", exit_code=1, step=0, message="boom")
    first.close()
    second = Reporter(callback_url="", job_token="", attempt=0, workdir=tmp_path)
    assert second.emit("started", step=0, world_size=1)["seq"] == 3
    second.close()


def test_the_portals_answer_becomes_a_request_once(tmp_path: Path) -> None:
    portal = PortalStub()
    portal.answer_once = {"checkpoint_requested": True, "stop_requested": False}
    rep = Reporter(callback_url=portal.url, job_token="job-token", attempt=0, workdir=tmp_path, interval_s=0.05)
    try:
        rep.emit("started", step=0, world_size=1)
        wait_until(lambda: rep.sent == 1)
        assert rep.requests() == (True, False)
        assert rep.requests() == (False, False)
    finally:
        rep.close()
        portal.close()


def test_a_wrong_token_is_retried_not_dropped(tmp_path: Path) -> None:
    portal = PortalStub(token="right")
    rep = Reporter(callback_url=portal.url, job_token="wrong", attempt=0, workdir=tmp_path, interval_s=0.05)
    try:
        rep.emit("started", step=0, world_size=1)
        wait_until(lambda: rep.failures >= 1)
        assert rep.pending() == 1 and portal.events() == []
    finally:
        rep.close(timeout_s=0.2)
        portal.close()
