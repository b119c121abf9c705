"""The OpenAI-compatible API of model apps, called with the official ``openai`` package over real HTTP.

The portal runs as pytest-django's ``live_server``: Django's ``LiveServerThread`` (a threaded WSGI server,
``django.core.servers.basehttp``), which writes every item of a streaming response to the socket and flushes it,
so server-sent events reach the client token by token, and a client that goes away makes the next write fail, as
gunicorn's does. Behind it a real local model server (``instances.serving.server``, a process started by
``LocalDeployments``) serves a tiny model trained by the runtime on the legal corpus (``conftest.tiny_model``).
Nothing is replaced: the client, both servers, the tokenizer, the billing and the ledger are the product's.
A real deployment adds TLS, gunicorn workers, a GPU and vLLM in a pod (``test_vllm_deployments.py``).
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import openai
import pytest

from billing.models import LedgerEntry, LedgerTransaction
from billing.selectors import wallet_balance
from billing.services import wallet_top_up
from instances.serving.prompting import load_model_text
from portal.choices import TokenScope
from portal.marketplace import services
from portal.marketplace.choices import AppState, AppVisibility, CallStatus, ServingKind, VersionStatus
from portal.marketplace.models import AppCall, AppVersion
from portal.marketplace.publishing import TEXT_INPUT_SCHEMA, TEXT_OUTPUT_SCHEMA
from portal.services import api_token_create

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PER_CALL, PER_1K_PROMPT, PER_1K_COMPLETION = 1_000, 2_345, 7_777  # micro-CNY: rounding shows
PROMPT = "第一条 为了规范合同行为"
FUNDS = 10_000_000


@pytest.fixture(scope="module")
def servers(tiny_model: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Two real model servers of the tiny model: ``fast`` (as fast as it goes) and ``paced`` (every batch step
    lasts at least 500 ms, so a test can act between two tokens)."""
    from instances.serving import LocalDeployments

    root = tmp_path_factory.mktemp("model-servers")
    fast, paced = LocalDeployments(root / "fast"), LocalDeployments(root / "paced", min_step_ms=500)
    started = {"fast": fast.start(name="legal-fast", model_dir=tiny_model["export"])}
    try:
        started["paced"] = paced.start(name="legal-paced", model_dir=tiny_model["export"])
        yield started
    finally:
        fast.stop(started["fast"])
        if "paced" in started:
            paced.stop(started["paced"])


def model_app(alice: Any, alice_org: Any, deployment: dict[str, Any], export: Path, **kw: Any) -> Any:
    """A published model app of alice's organization served by ``deployment`` (public and reviewed by staff unless
    ``visibility`` says private), priced ``PER_CALL`` + ``PER_1K_PROMPT`` / ``PER_1K_COMPLETION``."""
    visibility = kw.pop("visibility", AppVisibility.PUBLIC)
    app = services.app_create(
        publisher=alice_org,
        user=alice,
        name=kw.pop("name", "Legal drafting"),
        category="legal",
        description="",
        input_schema=TEXT_INPUT_SCHEMA,
        output_schema=TEXT_OUTPUT_SCHEMA,
        price_per_call_micros=kw.pop("per_call", PER_CALL),
        price_per_1k_tokens_micros=kw.pop("per_1k_completion", PER_1K_COMPLETION),
        price_per_1k_prompt_tokens_micros=kw.pop("per_1k_prompt", PER_1K_PROMPT),
        visibility=visibility,
    )
    AppVersion.objects.create(
        app=app,
        number=1,
        kind=ServingKind.CHECKPOINT,
        artifact_path=str(export),
        deployment={**deployment, "stage": "serving"},
        status=VersionStatus.READY,
        active=True,
    )
    if visibility == AppVisibility.PUBLIC:
        services.app_transition(app=app, to=AppState.IN_REVIEW, acting_user=alice)
        return services.app_transition(app=app, to=AppState.PUBLISHED, acting_user=None, staff=True)
    return services.app_transition(app=app, to=AppState.PUBLISHED, acting_user=alice)


def price(prompt_tokens: int, completion_tokens: int) -> int:
    """The price the issue asks for, computed here on its own: per call + (prompt × p + completion × c) / 1000,
    rounded up to the micro-CNY."""
    per_tokens = prompt_tokens * PER_1K_PROMPT + completion_tokens * PER_1K_COMPLETION
    return PER_CALL + (per_tokens + 999) // 1000


def share(amount: int) -> int:
    return amount * 7000 // 10_000


@pytest.fixture
def caller(charlie: Any) -> Any:
    org = charlie.organizations.get()
    wallet_top_up(organization=org, amount_micros=FUNDS, idempotency_key="openai-caller")
    return org


def client_for(live_server: Any, user: Any, org: Any, scope: str = TokenScope.WRITE) -> openai.OpenAI:
    token = api_token_create(user=user, organization=org, name="openai", scope=scope).plaintext
    return openai.OpenAI(base_url=f"{live_server.url}/api/v1/openai/v1", api_key=token, max_retries=0, timeout=120)


def balance(org: Any) -> int:
    return wallet_balance(organization=org).total_micros


def stats(deployment: dict[str, Any]) -> dict[str, Any]:
    with urllib.request.urlopen(f"{deployment['url']}/stats", timeout=10) as r:  # noqa: S310 - our own server
        return json.loads(r.read())


def wait_settled(call_id: int, timeout: float = 20.0) -> AppCall:
    deadline = time.monotonic() + timeout
    while True:
        call = AppCall.objects.get(pk=call_id)
        if call.status != CallStatus.RESERVED:
            return call
        if time.monotonic() > deadline:
            raise AssertionError(f"call {call_id} still reserved")
        time.sleep(0.05)


def assert_charged(call: AppCall, caller: Any, alice_org: Any, before: dict[str, int], amount: int) -> None:
    """The call's one ledger transaction took ``amount`` from the caller and credited alice 70 % of it."""
    assert (call.status, call.price_micros, call.publisher_share_micros) == (
        CallStatus.SUCCEEDED,
        amount,
        share(amount),
    )
    txn = LedgerTransaction.objects.get(pk=call.ledger_transaction_id)
    assert txn.idempotency_key == f"app-call:{call.pk}" and txn.kind == "app_call"
    assert txn.metadata["tokens"] == call.billed_tokens and txn.metadata["prompt_tokens"] == call.prompt_tokens
    assert sum(e.amount_micros for e in LedgerEntry.objects.filter(transaction=txn)) == 0
    assert balance(caller) == before["caller"] - amount
    assert balance(alice_org) == before["alice"] + share(amount)


# --- the whole path --------------------------------------------------------------------------------------------


def test_the_openai_client_lists_completes_chats_and_streams_and_each_call_costs_its_usage_times_the_prices(
    live_server: Any, servers: Any, tiny_model: Any, alice: Any, alice_org: Any, charlie: Any, caller: Any
) -> None:
    app = model_app(alice, alice_org, servers["fast"], tiny_model["export"])
    private = model_app(alice, alice_org, servers["fast"], tiny_model["export"], name="In house",
                        visibility=AppVisibility.PRIVATE)  # fmt: skip
    oa = client_for(live_server, charlie, caller)

    models = oa.models.list().data
    assert [m.id for m in models] == [app.slug]  # alice's private app is not charlie's to call
    card = models[0].model_dump()
    assert card["owned_by"] == alice_org.slug and card["max_model_len"] == 2048 and card["max_tokens"] == 4096
    assert card["pricing"] == {
        "currency": "CNY",
        "per_call": "0.001000",
        "per_1k_prompt_tokens": "0.002345",
        "per_1k_completion_tokens": "0.007777",
    }
    assert oa.models.retrieve(app.slug).id == app.slug
    with pytest.raises(openai.NotFoundError) as hidden:
        oa.completions.create(model=private.slug, prompt=PROMPT, max_tokens=4)
    assert hidden.value.body["code"] == "model_not_found" and hidden.value.body["param"] == "model"

    before = {"caller": balance(caller), "alice": balance(alice_org)}
    done = oa.completions.create(model=app.slug, prompt=PROMPT, max_tokens=12, temperature=0)
    text = done.choices[0].text
    assert text and done.usage is not None and done.model == app.slug
    prompt_tokens, completion_tokens = done.usage.prompt_tokens, done.usage.completion_tokens
    assert prompt_tokens > 0 and 1 <= completion_tokens <= 12
    assert done.choices[0].finish_reason == ("length" if completion_tokens == 12 else "stop")
    call = AppCall.objects.get()
    assert (call.prompt_tokens, call.billed_tokens) == (prompt_tokens, completion_tokens)
    assert_charged(call, caller, alice_org, before, price(prompt_tokens, completion_tokens))

    # streamed: the same text token by token, the same usage, the same charge
    before = {"caller": balance(caller), "alice": balance(alice_org)}
    chunks = list(oa.completions.create(model=app.slug, prompt=PROMPT, max_tokens=12, temperature=0, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == text
    assert len(chunks) == completion_tokens  # one chunk per generated token
    assert chunks[-1].usage is not None and chunks[-1].usage.model_dump()["completion_tokens"] == completion_tokens
    streamed = AppCall.objects.order_by("-pk").first()
    assert (streamed.prompt_tokens, streamed.billed_tokens) == (prompt_tokens, completion_tokens)
    assert_charged(streamed, caller, alice_org, before, price(prompt_tokens, completion_tokens))

    # chat, whole and streamed (with stream_options.include_usage: a last chunk without choices)
    messages = [{"role": "system", "content": "你是法律助手。"}, {"role": "user", "content": "合同是什么？"}]
    chat = oa.chat.completions.create(model=app.slug, messages=messages, max_tokens=10, temperature=0)  # type: ignore[arg-type]
    answer = chat.choices[0].message
    assert answer.role == "assistant" and answer.content and chat.usage is not None
    before = {"caller": balance(caller), "alice": balance(alice_org)}
    stream = oa.chat.completions.create(
        model=app.slug, messages=messages, max_tokens=10, temperature=0, stream=True,  # type: ignore[arg-type]
        stream_options={"include_usage": True},
    )  # fmt: skip
    parts = list(stream)
    assert parts[0].choices[0].delta.role == "assistant"
    assert "".join(p.choices[0].delta.content or "" for p in parts if p.choices) == answer.content
    assert parts[-1].choices == [] and parts[-1].usage == chat.usage
    last = AppCall.objects.order_by("-pk").first()
    assert_charged(last, caller, alice_org, before, price(chat.usage.prompt_tokens, chat.usage.completion_tokens))

    # sampling with a seed: streamed and whole agree too
    seeded = {"model": app.slug, "prompt": PROMPT, "max_tokens": 16, "temperature": 0.9, "top_p": 0.95, "seed": 11}
    whole = oa.completions.create(**seeded).choices[0].text  # type: ignore[call-overload]
    assert "".join(c.choices[0].text for c in oa.completions.create(**seeded, stream=True)) == whole  # type: ignore[call-overload]
    assert AppCall.objects.filter(status=CallStatus.SUCCEEDED).count() == 6


def test_a_client_that_disconnects_after_three_tokens_pays_for_three_and_generation_stops_within_one_step(
    live_server: Any, servers: Any, tiny_model: Any, alice: Any, alice_org: Any, charlie: Any, caller: Any
) -> None:
    """The paced server makes a step last 500 ms; the portal's keep-alive comments (every 100 ms) find the closed
    connection before the fourth token exists."""
    app = model_app(alice, alice_org, servers["paced"], tiny_model["export"])
    oa = client_for(live_server, charlie, caller)
    before = {"caller": balance(caller), "alice": balance(alice_org)}
    stream = oa.completions.create(model=app.slug, prompt=PROMPT, max_tokens=60, temperature=0, stream=True)
    received = []
    for chunk in stream:
        received.append(chunk.choices[0].text)
        if len(received) == 3:
            break
    prompt_tokens = len(load_model_text(tiny_model["export"]).encode(PROMPT))
    held = AppCall.objects.get()  # the hold for max_tokens, taken before the first byte
    assert (held.status, held.price_micros) == (CallStatus.RESERVED, price(prompt_tokens, 60))
    stream.close()
    call = wait_settled(held.pk)
    assert (call.billed_tokens, call.prompt_tokens) == (3, prompt_tokens)
    assert call.response["finish_reason"] == "client_disconnected" and call.response["text"] == "".join(received)
    assert_charged(call, caller, alice_org, before, price(call.prompt_tokens, 3))

    deadline = time.monotonic() + 10
    while True:  # the model server's own record of the request (its id is the call's)
        seen = [r for r in stats(servers["paced"])["requests"] if r["id"] == f"portal-call-{call.pk}"]
        if seen or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert len(seen) == 1 and seen[0]["finish_reason"] == "cancelled"
    assert seen[0]["tokens_after_cancel"] <= 1 and seen[0]["completion_tokens"] <= 4  # at most one batch step more


# --- bad input: an OpenAI-shaped 4xx, nothing reserved, nothing charged ------------------------------------------


def test_bad_requests_get_openai_shaped_errors_and_nothing_is_charged(
    live_server: Any, servers: Any, tiny_model: Any, alice: Any, alice_org: Any, charlie: Any, caller: Any
) -> None:
    export = tiny_model["export"]
    app = model_app(alice, alice_org, servers["fast"], export)
    dear = model_app(alice, alice_org, servers["fast"], export, name="Dear model", per_1k_completion=5_000_000)
    private = model_app(alice, alice_org, servers["fast"], export, name="In house", visibility=AppVisibility.PRIVATE)
    endpoint = services.app_create(
        publisher=alice_org, user=alice, name="Echo", category="legal", description="",
        input_schema={"type": "object"}, output_schema={"type": "object"}, price_per_call_micros=0,
        visibility=AppVisibility.PRIVATE,
    )  # fmt: skip
    services.app_version_add(app=endpoint, user=alice, kind=ServingKind.ECHO)
    oa = client_for(live_server, charlie, caller)
    own = client_for(live_server, alice, alice_org)
    before = balance(caller)
    ok = {"role": "user", "content": "合同"}

    def refused(error: type[Exception], call: Any, code: str, param: str | None, status: int) -> None:
        with pytest.raises(error) as caught:
            call()
        exc = caught.value
        assert isinstance(exc, openai.APIStatusError) and exc.status_code == status, exc
        assert set(exc.body) == {"message", "type", "param", "code"} and exc.body["message"], exc.body
        assert (exc.body["code"], exc.body["param"]) == (code, param), exc.body

    complete, chat = oa.completions.create, oa.chat.completions.create
    refused(openai.NotFoundError, lambda: complete(model="no-such-model", prompt="a"), "model_not_found", "model", 404)
    refused(openai.NotFoundError, lambda: complete(model=private.slug, prompt="a"), "model_not_found", "model", 404)
    refused(openai.NotFoundError, lambda: own.completions.create(model=endpoint.slug, prompt="a"), "model_not_found",
            "model", 404)  # fmt: skip  # an app that is not a model
    refused(openai.BadRequestError, lambda: complete(model=app.slug, prompt="a", max_tokens=4097),
            "max_tokens_too_large", "max_tokens", 400)  # fmt: skip
    refused(openai.APIStatusError, lambda: complete(model=dear.slug, prompt="a", max_tokens=2000),
            "insufficient_funds", None, 402)  # fmt: skip  # 2,000 tokens at 5 CNY per 1,000: more than the 10 CNY
    for messages, param in (
        ([], "messages"),
        ([{"role": "robot", "content": "x"}], "messages[0].role"),
        ([ok, {"role": "user", "content": 5}], "messages[1].content"),
        ([ok, "hello"], "messages[1]"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}], "messages[0].content"),
    ):
        refused(openai.BadRequestError, lambda m=messages: chat(model=app.slug, messages=m), "invalid_messages",
                param, 400)  # fmt: skip
    refused(openai.BadRequestError, lambda: complete(model=app.slug, prompt=[5] * 2048), "context_length_exceeded",
            "prompt", 400)  # fmt: skip
    refused(openai.BadRequestError, lambda: complete(model=app.slug, prompt=[5] * 2000, max_tokens=49),
            "context_length_exceeded", "max_tokens", 400)  # fmt: skip
    refused(openai.BadRequestError, lambda: complete(model=app.slug, prompt="a", n=2), "unsupported_parameter", "n",
            400)  # fmt: skip
    refused(openai.BadRequestError, lambda: complete(model=app.slug, prompt="a", temperature=3), "invalid_request",
            "temperature", 400)  # fmt: skip
    refused(openai.BadRequestError, lambda: complete(model=app.slug, prompt="a", logprobs=2), "invalid_request",
            "logprobs", 400)  # fmt: skip
    refused(openai.BadRequestError, lambda: complete(model=app.slug, prompt={"a": 1}), "invalid_prompt", "prompt",
            400)  # fmt: skip  # type: ignore[arg-type]
    caller.app_monthly_cap_micros = 1_500  # below the hold of 100 tokens (1,000 + 778 + the prompt)
    caller.save(update_fields=["app_monthly_cap_micros"])
    refused(openai.APIStatusError, lambda: complete(model=app.slug, prompt="a", max_tokens=100),
            "monthly_cap_reached", None, 402)  # fmt: skip
    bad_key = openai.OpenAI(base_url=f"{live_server.url}/api/v1/openai/v1", api_key="gpp_nope_nope", max_retries=0)
    refused(openai.AuthenticationError, lambda: bad_key.models.list(), "invalid_api_key", None, 401)
    reader = client_for(live_server, charlie, caller, scope=TokenScope.READ)
    refused(openai.PermissionDeniedError, lambda: reader.completions.create(model=app.slug, prompt="a"),
            "permission_denied", None, 403)  # fmt: skip
    assert [m.id for m in reader.models.list().data] == sorted([app.slug, dear.slug])  # reading is allowed

    assert AppCall.objects.count() == 0
    assert not LedgerTransaction.objects.filter(kind="app_call").exists()
    assert balance(caller) == before


def test_a_model_server_failing_mid_stream_charges_the_tokens_sent_and_one_that_is_down_charges_nothing(
    live_server: Any, tiny_model: Any, tmp_path: Path, alice: Any, alice_org: Any, charlie: Any, caller: Any
) -> None:
    import os
    import signal

    from instances.serving import LocalDeployments

    backend = LocalDeployments(tmp_path / "dying", min_step_ms=500)
    deployment = backend.start(name="legal-dying", model_dir=tiny_model["export"])
    try:
        app = model_app(alice, alice_org, deployment, tiny_model["export"])
        oa = client_for(live_server, charlie, caller)
        before = {"caller": balance(caller), "alice": balance(alice_org)}
        received = []
        stream = oa.completions.create(model=app.slug, prompt=PROMPT, max_tokens=40, temperature=0, stream=True)
        with pytest.raises(openai.APIError) as broke:  # noqa: PT012 - the error comes while iterating
            for chunk in stream:
                received.append(chunk.choices[0].text)
                if len(received) == 2:
                    os.killpg(deployment["pid"], signal.SIGKILL)  # the model server dies between two tokens
        assert "model server failed" in str(broke.value)
        call = wait_settled(AppCall.objects.get().pk)
        assert call.billed_tokens == 2 and call.response["finish_reason"] == "error"
        assert_charged(call, caller, alice_org, before, price(call.prompt_tokens or 0, 2))

        before = {"caller": balance(caller), "alice": balance(alice_org)}
        with pytest.raises(openai.InternalServerError) as down:
            oa.completions.create(model=app.slug, prompt=PROMPT, max_tokens=5, stream=True)
        assert down.value.status_code == 502 and down.value.body["code"] == "backend_error"
        failed = AppCall.objects.order_by("-pk").first()
        assert (failed.status, failed.error_code, failed.ledger_transaction_id) == (CallStatus.FAILED, "backend_error",
                                                                                   None)  # fmt: skip
        assert balance(caller) == before["caller"] and balance(alice_org) == before["alice"]
    finally:
        backend.stop(deployment)


def test_an_idempotency_key_replays_the_first_answer_and_charges_once(
    live_server: Any, servers: Any, tiny_model: Any, alice: Any, alice_org: Any, charlie: Any, caller: Any
) -> None:
    app = model_app(alice, alice_org, servers["fast"], tiny_model["export"])
    oa = client_for(live_server, charlie, caller)
    first = oa.completions.with_raw_response.create(
        model=app.slug, prompt=PROMPT, max_tokens=6, temperature=0, extra_headers={"Idempotency-Key": "k-1"}
    )
    again = oa.completions.with_raw_response.create(
        model=app.slug, prompt=PROMPT, max_tokens=6, temperature=0, extra_headers={"Idempotency-Key": "k-1"}
    )
    assert again.headers.get("X-Replayed") == "true" and first.headers.get("X-Replayed") is None
    one, two = first.parse(), again.parse()
    assert (two.id, two.choices[0].text, two.usage) == (one.id, one.choices[0].text, one.usage)
    call = AppCall.objects.get()
    assert LedgerTransaction.objects.filter(kind="app_call").count() == 1
    assert balance(caller) == FUNDS - price(call.prompt_tokens or 0, call.billed_tokens or 0)
    with pytest.raises(openai.ConflictError) as reused:
        oa.completions.create(model=app.slug, prompt="另一个", max_tokens=6, extra_headers={"Idempotency-Key": "k-1"})
    assert reused.value.body["code"] == "idempotency_key_reused"
    assert AppCall.objects.count() == 1
