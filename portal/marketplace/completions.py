"""OpenAI-compatible completions of published models, billed per token in and out (issue 29).

A model app (an app whose active version is a model served from a checkpoint) is called by its slug as the
``model`` of ``POST /api/v1/openai/v1/completions`` or ``…/chat/completions`` (``portal.marketplace.openai_api``).
A call goes through the app-call billing of ``portal.marketplace.calls`` — one ``AppCall`` row, one ledger path:

1. :func:`completion_prepare` (nothing written): the caller's role, the model (404 ``model_not_found`` for an app
   the organization cannot see or that is not a model), the prompt rendered and tokenized with the export's own
   tokenizer and chat template (``instances.serving.prompting``: the same token ids the model server then gets),
   the context length (400 ``context_length_exceeded``), ``max_tokens`` (default: what the context leaves, at most
   ``APP_MAX_BILLED_TOKENS``, the app's limit: 400 ``max_tokens_too_large`` above it) and the hold:
   ``token_price_micros(prompt tokens, max_tokens)``.
2. :func:`completion_open`: ``call_reserve`` holds that price under the wallet lock — the balance (402
   ``insufficient_funds``: lower ``max_tokens`` or top up), the monthly cap on app calls (402
   ``monthly_cap_reached``) and the ``Idempotency-Key`` (a succeeded call is replayed, 409 while it runs or for
   another request) are checked there — *before the first byte* of the answer; then the model server's stream is
   opened (``instances.serving.client.stream_completion``); a server that refuses or cannot be reached releases
   the reservation (502 / 504, nothing charged).
3. :func:`completion_finish` when the stream ends — normally, because the client went away, or because the model
   server failed: the call is settled on the completion tokens that reached the client (``call_settle``: the
   caller's grants then paid balance, the publisher's share credited in the same ledger transaction, posting key
   ``app-call:<id>``, statement lines as for every app call) at ``token_price_micros(prompt tokens, completion
   tokens)`` — exactly usage × prices, rounded up once to the micro-CNY; a call that produced no token is released
   and costs nothing, whatever its price per call.

Errors raised before anything is reserved are :class:`CompletionRefused` (OpenAI's ``param`` beside the product's
``code`` and ``status``) or the marketplace's own (``CallRefused`` …); none writes anything.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _

from portal.marketplace import calls
from portal.marketplace.calls import CallResult, token_price_micros
from portal.marketplace.choices import AppState, CallStatus, ServingKind, VersionStatus
from portal.marketplace.models import App, AppCall, AppVersion
from portal.marketplace.selectors import apps_visible_to
from portal.marketplace.services import MAX_KEY_LENGTH, CallFailed, MarketplaceError, request_hash
from portal.models import Organization, User
from portal.permissions import Action, authorize

NO_OUTPUT = "no_output"  # error code of a released call that produced no token


class CompletionRefused(MarketplaceError):
    """A completion request refused before anything is reserved: ``code``, ``status`` and OpenAI's ``param``."""

    def __init__(self, message: str, *, code: str, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.code, self.status, self.param = code, status, param


def model_apps(organization: Organization) -> list[tuple[App, AppVersion]]:
    """The apps ``organization`` may call as models, by slug: visible to it (``apps_visible_to``), published (or
    its own in draft or review: publishers try their app first), whose active version is a ready checkpoint
    model with a model server record."""
    out = []
    apps = apps_visible_to(organization).order_by("slug").prefetch_related("versions")
    for app in apps:
        if not _callable(app, organization):
            continue
        version = _model_version(app)
        if version is not None:
            out.append((app, version))
    return out


def _callable(app: App, organization: Organization) -> bool:
    own_trial = app.publisher_id == organization.pk and app.state in (AppState.DRAFT, AppState.IN_REVIEW)
    return app.state == AppState.PUBLISHED or own_trial


def _model_version(app: App) -> AppVersion | None:
    for version in app.versions.all():
        if version.active and version.kind == ServingKind.CHECKPOINT and version.status == VersionStatus.READY:
            return version if version.artifact_path else None
    return None


def model_for(organization: Organization, model: Any) -> tuple[App, AppVersion]:
    """The app and model version named ``model`` (an app's slug) for ``organization``. Raises
    ``CompletionRefused`` 404 ``model_not_found`` for a name it cannot see or an app that is not a model, 403
    ``model_not_callable`` for its own app that is suspended."""
    if not isinstance(model, str) or not model:
        raise CompletionRefused(
            _("'model' is required: the slug of a model app."), code="invalid_request", param="model"
        )
    app = apps_visible_to(organization).filter(slug=model).prefetch_related("versions").first()
    version = _model_version(app) if app is not None else None
    if app is None or version is None:
        raise CompletionRefused(
            _("The model `%(m)s` does not exist or you do not have access to it.") % {"m": model[:100]},
            code="model_not_found",
            status=404,
            param="model",
        )
    if not _callable(app, organization):
        raise CompletionRefused(
            _("The model `%(m)s` cannot be called now (the app is %(s)s).")
            % {"m": app.slug, "s": AppState(app.state).label},
            code="model_not_callable",
            status=403,
            param="model",
        )
    return app, version


def max_tokens_limit(app: App) -> int:
    """The most completion tokens one call of ``app`` may ask for (``APP_MAX_BILLED_TOKENS``)."""
    return int(settings.APP_MAX_BILLED_TOKENS)


@dataclass
class Prepared:
    """A checked completion request, ready to reserve: the prompt's token ids, the completion's bound, the hold
    (micro-CNY), the body the model server gets and what the answer looks like."""

    app: App
    version: AppVersion
    caller: Organization
    user: User | None
    chat: bool
    prompt_ids: list[int]
    max_tokens: int
    hold_micros: int
    upstream: dict[str, Any]
    stream: bool
    include_usage: bool
    request_sha256: str

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt_ids)


def completion_prepare(*, organization: Organization, user: User | None, body: dict[str, Any], chat: bool) -> Prepared:
    """Check a validated request ``body`` (the API's serializer did the shapes and ranges) for ``organization``.

    Raises ``PermissionRefused`` (403: the role may not call apps), ``CompletionRefused`` (404 model, 400
    prompt / messages / context / ``max_tokens``). Writes nothing."""
    from instances.serving.prompting import PromptError, chat_messages, load_model_text

    authorize(user=user, organization=organization, action=Action.APPS_INVOKE)
    app, version = model_for(organization, body.get("model"))
    try:
        text = load_model_text(version.artifact_path)
    except OSError as exc:
        raise CompletionRefused(
            _("The model's files cannot be read now; try again later."), code="model_unavailable", status=503
        ) from exc
    try:
        if chat:
            ids = text.encode(text.render_chat(chat_messages(body.get("messages"))))
        else:
            ids = _prompt_ids(text, body.get("prompt"))
    except PromptError as exc:
        raise CompletionRefused(
            str(exc), code="invalid_messages" if chat else "invalid_prompt", param=exc.param
        ) from exc
    context = text.context_length
    where = "messages" if chat else "prompt"
    if not ids:
        raise CompletionRefused(_("The prompt is empty."), code="invalid_prompt", param=where)
    if len(ids) >= context:
        raise CompletionRefused(
            _("This model's maximum context length is %(c)d tokens; the prompt has %(n)d tokens.")
            % {"c": context, "n": len(ids)},
            code="context_length_exceeded",
            param=where,
        )
    limit = max_tokens_limit(app)
    asked = body.get("max_completion_tokens") if chat else None
    asked = body.get("max_tokens") if asked is None else asked
    if asked is not None and asked > limit:
        raise CompletionRefused(
            _("max_tokens is %(n)d; this model answers at most %(l)d tokens per call.") % {"n": asked, "l": limit},
            code="max_tokens_too_large",
            param="max_tokens",
        )
    room = context - len(ids)
    if asked is not None and asked > room:
        raise CompletionRefused(
            _(
                "This model's maximum context length is %(c)d tokens; the prompt has %(n)d tokens and max_tokens "
                "asks for %(m)d more."
            )
            % {"c": context, "n": len(ids), "m": asked},
            code="context_length_exceeded",
            param="max_tokens",
        )
    max_tokens = int(asked) if asked is not None else min(limit, room)
    upstream: dict[str, Any] = {
        "prompt": ids,
        "max_tokens": max_tokens,
        "temperature": body.get("temperature", 1.0),
        "top_p": body.get("top_p", 1.0),
    }
    for name in ("seed", "stop"):
        if body.get(name) is not None:
            upstream[name] = body[name]
    options = body.get("stream_options") or {}
    return Prepared(
        app=app,
        version=version,
        caller=organization,
        user=user,
        chat=chat,
        prompt_ids=ids,
        max_tokens=max_tokens,
        hold_micros=token_price_micros(app, prompt_tokens=len(ids), completion_tokens=max_tokens, caller=organization),
        upstream=upstream,
        stream=bool(body.get("stream")),
        include_usage=bool(options.get("include_usage")),
        request_sha256=request_hash({"kind": "chat" if chat else "completion", **body}),
    )


def _prompt_ids(text: Any, prompt: Any) -> list[int]:
    from instances.serving.prompting import PromptError

    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one prompt
    if isinstance(prompt, str):
        return list(text.encode(prompt))
    vocab = int(text.tokenizer.get_vocab_size())
    if isinstance(prompt, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in prompt):
        if any(not 0 <= i < vocab for i in prompt):
            raise PromptError(f"prompt token ids must be in [0, {vocab})", "prompt")
        return list(prompt)
    raise PromptError("'prompt' must be a string or an array of token ids (one prompt: n = 1)", "prompt")


@dataclass
class Opened:
    """A reserved call with its model server stream open (:func:`completion_open`)."""

    prepared: Prepared
    call: AppCall
    stream: Any  # instances.serving.client.CompletionStream
    started: float
    id: str
    created: int
    deadline: float
    finished: bool = False
    text: list[str] = field(default_factory=list)


def completion_open(*, prepared: Prepared, idempotency_key: str | None) -> Opened | CallResult:
    """Reserve the hold and open the model server's stream; returns :class:`Opened`, or the earlier success
    (``CallResult``, ``replayed``) for a known ``Idempotency-Key``.

    Raises what ``call_reserve`` raises (402 ``insufficient_funds`` / ``monthly_cap_reached``, 409) with nothing
    written, and ``CallFailed`` (400 ``upstream_refused`` with the model server's ``param``, 502
    ``backend_error``, 504 ``backend_timeout``) after releasing the reservation.
    """
    from instances.serving.client import UpstreamError, stream_completion

    if idempotency_key is not None and not 1 <= len(idempotency_key) <= MAX_KEY_LENGTH:
        raise CompletionRefused(
            _("An Idempotency-Key has 1 to %(n)d characters.") % {"n": MAX_KEY_LENGTH}, code="invalid_idempotency_key"
        )
    p = prepared
    reserved = calls.call_reserve(
        app=p.app,
        version=p.version,
        caller=p.caller,
        user=p.user,
        idempotency_key=idempotency_key,
        request_sha256=p.request_sha256,
        price_micros=p.hold_micros,
        share_micros=calls.publisher_share_micros(p.app, p.caller, p.hold_micros),
    )
    if isinstance(reserved, CallResult):
        return reserved
    call = reserved
    started = time.perf_counter()
    timeout = float(settings.APP_CALL_TIMEOUT_S)
    try:
        stream = stream_completion(
            deployment=p.version.deployment, body=p.upstream, timeout_s=timeout, request_id=f"portal-call-{call.pk}"
        )
    except UpstreamError as exc:
        calls.call_release(call=call, code="backend_error", message=f"HTTP {exc.status}: {exc}", started=started)
        if 400 <= exc.status < 500:
            refused = CallFailed(_("The model server refused the request: %(e)s; nothing was charged.") % {"e": exc})
            refused.code, refused.status, refused.details = "upstream_refused", 400, {"param": exc.param}
            raise refused from exc
        err = CallFailed(_("The model server failed: %(e)s; nothing was charged.") % {"e": exc})
        err.code = "backend_error"
        raise err from exc
    except TimeoutError as exc:
        calls.call_release(call=call, code="backend_timeout", message=str(exc), started=started)
        err = CallFailed(_("The model server did not answer in time; nothing was charged."))
        err.code, err.status = "backend_timeout", 504
        raise err from exc
    except (OSError, ValueError) as exc:
        calls.call_release(call=call, code="backend_error", message=str(exc), started=started)
        err = CallFailed(_("The model server cannot be reached (%(e)s); nothing was charged.") % {"e": exc})
        err.code = "backend_error"
        raise err from exc
    return Opened(
        prepared=p,
        call=call,
        stream=stream,
        started=started,
        id=("chatcmpl-" if p.chat else "cmpl-") + f"gpp{call.pk}",
        created=int(timezone.now().timestamp()),
        # the whole stream ends before the stale-reservation sweep could release its hold
        deadline=time.monotonic() + timeout + calls.STALE_AFTER.total_seconds() / 2,
    )


@dataclass(frozen=True)
class Piece:
    """One token's worth of the model server's stream: its ``text`` (may be ""), the completion tokens so far and,
    on the last piece, the ``finish_reason``."""

    text: str
    completion_tokens: int
    finish_reason: str | None


def completion_pieces(opened: Opened) -> Iterator[Piece]:
    """The model server's stream as :class:`Piece` objects, one per generated token. Raises ``TimeoutError``
    (silence longer than ``APP_CALL_TIMEOUT_S``, or the whole stream past its deadline), ``OSError`` (the stream
    broke) and ``instances.serving.client.UpstreamError`` (the model server reported an error)."""
    count = 0
    for chunk in opened.stream:
        if time.monotonic() > opened.deadline:
            raise TimeoutError("the completion ran past its deadline")
        usage = chunk.get("usage") or {}
        for choice in chunk.get("choices") or []:
            count += 1  # one chunk per token, where the server reports no usage so far in its chunks
            tokens = usage.get("completion_tokens")
            tokens = int(tokens) if isinstance(tokens, int) and not isinstance(tokens, bool) else count
            yield Piece(str(choice.get("text") or ""), tokens, choice.get("finish_reason"))


def completion_finish(
    *, opened: Opened, completion_tokens: int, text: str, finish_reason: str, error: str = ""
) -> AppCall:
    """Settle ``opened``'s call on the ``completion_tokens`` that reached the client (at most ``max_tokens``) and
    close the model server's stream; idempotent (a second call returns the row). ``finish_reason``: the model's
    (``stop`` / ``length``), ``client_disconnected`` or ``error`` (with ``error``).

    No token: the reservation is released (``error_code`` ``no_output``, or the failure's), nothing charged.
    Otherwise ``call_settle`` posts ``token_price_micros(prompt tokens, completion tokens)`` and stores the answer
    (``text``, ``finish_reason``, ``usage``) for replays; a wallet that no longer covers it releases the call
    (``CallRefused`` is swallowed here: the stream has already been sent)."""
    from portal.marketplace.services import CallRefused

    opened.stream.close()
    if opened.finished:
        return opened.call
    opened.finished = True
    p, call = opened.prepared, opened.call
    tokens = min(int(completion_tokens), p.max_tokens)
    if tokens <= 0:
        code = NO_OUTPUT if finish_reason != "error" else "backend_error"
        calls.call_release(call=call, code=code, message=error or f"no token was produced ({finish_reason})",
                           started=opened.started)  # fmt: skip
        return call
    usage = {"prompt_tokens": p.prompt_tokens, "completion_tokens": tokens, "total_tokens": p.prompt_tokens + tokens}
    output = {
        "object": "chat.completion" if p.chat else "text_completion",
        "id": opened.id,
        "created": opened.created,
        "text": text,
        "finish_reason": finish_reason,
        "usage": usage,
        **({"error": error[:500]} if error else {}),
    }
    with contextlib.suppress(CallRefused):  # released by call_settle: the wallet no longer covers it
        calls.call_settle(
            call=call, app=p.app, output=output, started=opened.started, billed_tokens=tokens,
            prompt_tokens=p.prompt_tokens,
        )  # fmt: skip
    return call


def replay_output(call: AppCall) -> dict[str, Any]:
    """The stored answer of a succeeded call (what :func:`completion_finish` recorded)."""
    data = call.response or {}
    return data if call.status == CallStatus.SUCCEEDED and isinstance(data, dict) else {}
