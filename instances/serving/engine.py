"""The local model server's engine: continuous batching over a ``transformers`` causal LM with a KV cache.

One thread (:meth:`Engine.run`) owns the model. Requests (:class:`Request`, a prompt as token ids and its
:class:`SamplingParams`) are submitted from any thread and join the running batch at the next step: new
requests are prefilled (their prompts in one forward pass, which gives their key/value caches and first
tokens), then their caches are merged into the batch's. Every decode step feeds the last token of every running
request in one forward pass ``[B, 1]`` over the batch's cache, so B requests cost about one request's step on a
small model — the point of batching. Requests that arrive together are prefilled together, their prompts
left-padded to the longest in one forward pass. The batch's cache is kept left-padded: per layer one key and one value
tensor ``[B, heads, T, head_dim]`` and an attention mask ``[B, T]`` (0 on padding); position ids are each
request's own, so padding changes nothing a request sees. A request leaves the batch when it ends (end of
sequence, ``max_tokens``, a stop string, the context's end) or is cancelled; columns that only padding uses
are cut.

Each request gets its events on its own queue (:class:`Event`: the text produced since the previous event and
the completion tokens so far, one event per generated token), so a server thread streams them as they come.
Cancelling (:meth:`Engine.cancel`, called when the client goes away) takes the request out before the next
step: at most the one step already under way generates a token for it (``Request.tokens_after_cancel``).

Sampling per request: greedy when ``temperature`` is 0, else temperature and nucleus (``top_p``) sampling from
a ``torch.Generator`` seeded with ``seed`` (the same seed gives the same tokens); the CTRL repetition penalty
(Keskar et al., 2019) as Hugging Face's ``RepetitionPenaltyLogitsProcessor`` applies it (over prompt and
output). Text is decoded incrementally: a token that ends inside a multi-byte character, or text that may be
the beginning of a stop string, is held back until it is complete, so the concatenated events equal the
whole completion (streamed = not streamed). The end-of-sequence token counts as a completion token (as vLLM
counts it) but adds no text. Torch only, no Django.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

FINISH_STOP, FINISH_LENGTH, FINISH_CANCELLED, FINISH_ERROR = "stop", "length", "cancelled", "error"


@dataclass(frozen=True)
class SamplingParams:
    """What one request asks for. ``max_tokens`` ≥ 1 (the context's end also ends it); ``temperature`` 0 = greedy;
    ``top_p`` in (0, 1]; ``stop``: strings that end the completion (not included in its text); ``min_tokens``:
    the end-of-sequence token is suppressed before that many tokens."""

    max_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    repetition_penalty: float = 1.0
    min_tokens: int = 0


@dataclass(frozen=True)
class Event:
    """One step's outcome for a request: ``text`` produced since the previous event (may be "" while a character or a
    possible stop string is incomplete), ``completion_tokens`` generated so far, ``finish_reason`` on the last
    event (``stop``, ``length``, ``cancelled``, ``error``; ``error`` carries ``error``)."""

    text: str
    completion_tokens: int
    finish_reason: str | None = None
    error: str = ""


@dataclass(eq=False)
class Request:
    """A submitted generation (made by :meth:`Engine.submit`). Read ``events`` until an event has a
    ``finish_reason``."""

    id: str
    prompt_ids: list[int]
    params: SamplingParams
    events: queue.SimpleQueue[Event] = field(default_factory=queue.SimpleQueue)
    generated: list[int] = field(default_factory=list)
    submitted_at: float = field(default_factory=time.monotonic)
    first_token_at: float | None = None
    finished_at: float | None = None
    finish_reason: str | None = None
    cancelled_at_tokens: int | None = None  # completion tokens when cancel() was called
    text: str = ""  # the completion's text as far as it was decoded and released
    _cancel: threading.Event = field(default_factory=threading.Event)
    _generator: Any = None
    _seen: Any = None  # bool tensor [vocab]: ids in prompt or output (repetition penalty)

    @property
    def tokens_after_cancel(self) -> int:
        """Tokens generated after :meth:`Engine.cancel` (0 when never cancelled): at most one batch step's."""
        if self.cancelled_at_tokens is None:
            return 0
        return len(self.generated) - self.cancelled_at_tokens

    def summary(self) -> dict[str, Any]:
        """JSON-ready facts of the request (the server's ``GET /stats``)."""
        return {
            "id": self.id,
            "prompt_tokens": len(self.prompt_ids),
            "completion_tokens": len(self.generated),
            "finish_reason": self.finish_reason,
            "cancelled_at_tokens": self.cancelled_at_tokens,
            "tokens_after_cancel": self.tokens_after_cancel,
        }


class Engine:
    """Continuous batching over ``model`` (a Hugging Face causal LM, eval mode) on ``device``.

    ``decode(ids) -> str`` turns token ids into text; ``eos_id`` ends a sequence (None: only length and stop
    strings do); ``max_context`` is the model's context length (prompt + completion); ``max_batch`` bounds the
    running batch (more requests wait their turn); ``min_step_s`` makes every decode step last at least that
    long (0 = as fast as the model goes; tests and demos use it to watch a stream at a known pace).
    """

    def __init__(
        self,
        *,
        model: Any,
        decode: Callable[[Sequence[int]], str],
        eos_id: int | None,
        max_context: int,
        device: Any = "cpu",
        max_batch: int = 32,
        min_step_s: float = 0.0,
        keep_finished: int = 256,
    ) -> None:
        import torch

        self.torch = torch
        self.model = model
        self.decode = decode
        self.eos_id = eos_id
        self.max_context = max_context
        self.device = torch.device(device)
        self.max_batch = max_batch
        self.min_step_s = min_step_s
        self.vocab = int(model.config.vocab_size)
        self._waiting: deque[Request] = deque()
        self._running: list[Request] = []
        self._cond = threading.Condition()
        self._stopping = False
        self._ids = itertools.count(1)
        self._keys: list[Any] = []  # per layer [B, H, T, D]
        self._values: list[Any] = []
        self._mask: Any = None  # [B, T] long
        self._positions: Any = None  # [B] next position of each running request
        self._last: Any = None  # [B] last sampled token of each running request (not yet in the cache)
        self.finished: deque[Request] = deque(maxlen=keep_finished)
        self.steps = 0
        self.generated_tokens = 0
        self.batch_sizes: deque[int] = deque(maxlen=1000)
        self._thread: threading.Thread | None = None

    # -- public -------------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Run the engine loop in a daemon thread."""
        self._thread = threading.Thread(target=self.run, name="engine", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the loop; running and waiting requests end with ``cancelled``."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def submit(self, prompt_ids: Sequence[int], params: SamplingParams, request_id: str = "") -> Request:
        """Queue a generation; raises ``ValueError`` for an empty prompt, a bad ``max_tokens`` or a prompt that
        leaves no room in the context for one token."""
        ids = [int(i) for i in prompt_ids]
        if not ids:
            raise ValueError("the prompt is empty")
        if any(not 0 <= i < self.vocab for i in ids):
            raise ValueError(f"prompt token ids must be in [0, {self.vocab})")
        if params.max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        if len(ids) >= self.max_context:
            raise ValueError(
                f"the prompt has {len(ids)} tokens; this model's context length is {self.max_context} tokens"
            )
        request = Request(id=request_id or f"req-{next(self._ids)}", prompt_ids=ids, params=params)
        with self._cond:
            if self._stopping:
                raise RuntimeError("the engine is stopping")
            self._waiting.append(request)
            self._cond.notify_all()
        return request

    def cancel(self, request: Request) -> None:
        """Take ``request`` out before the next step (the client went away); its reader gets a last event with
        ``finish_reason`` ``cancelled`` at once. Idempotent."""
        if request.finish_reason is None and not request._cancel.is_set():
            request.cancelled_at_tokens = len(request.generated)
            request._cancel.set()
            request.events.put(Event(text="", completion_tokens=len(request.generated), finish_reason=FINISH_CANCELLED))
            with self._cond:
                self._cond.notify_all()

    def stats(self) -> dict[str, Any]:
        """Counters: steps, generated tokens, running and waiting requests, the mean and largest batch of the
        last 1,000 decode steps, and the last finished requests' summaries."""
        sizes = list(self.batch_sizes)
        return {
            "steps": self.steps,
            "generated_tokens": self.generated_tokens,
            "running": len(self._running),
            "waiting": len(self._waiting),
            "mean_batch": round(sum(sizes) / len(sizes), 2) if sizes else 0.0,
            "largest_batch": max(sizes, default=0),
            "requests": [r.summary() for r in list(self.finished)],
        }

    # -- the loop -----------------------------------------------------------------------------------------------
    def run(self) -> None:
        with self.torch.inference_mode():
            while True:
                with self._cond:
                    while not self._stopping and not self._waiting and not self._running:
                        self._cond.wait()
                    if self._stopping:
                        break
                    admit: list[Request] = []
                    while self._waiting and len(self._running) + len(admit) < self.max_batch:
                        admit.append(self._waiting.popleft())
                started = time.monotonic()
                try:
                    self._drop_cancelled()
                    for request in admit:
                        if request._cancel.is_set():
                            self._finish_out_of_batch(request, FINISH_CANCELLED)
                    fresh = [r for r in admit if r.finish_reason is None]
                    if fresh:
                        self._prefill(fresh)
                    if self._running:
                        self._decode_step()
                except Exception as exc:  # a failed step ends every request of the batch with the error
                    for request in [*self._running, *[r for r in admit if r.finish_reason is None]]:
                        self._finish_out_of_batch(request, FINISH_ERROR, error=f"{type(exc).__name__}: {exc}")
                    self._reset_batch()
                    continue
                if self.min_step_s and self._running:
                    rest = self.min_step_s - (time.monotonic() - started)
                    if rest > 0:
                        time.sleep(rest)
        for request in [*self._running, *self._waiting]:
            self._finish_out_of_batch(request, FINISH_CANCELLED)
        self._reset_batch()

    # -- batch bookkeeping --------------------------------------------------------------------------------------
    def _reset_batch(self) -> None:
        self._running = []
        self._keys, self._values = [], []
        self._mask = self._positions = self._last = None

    def _cache(self) -> Any:
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        for layer, (k, v) in enumerate(zip(self._keys, self._values, strict=True)):
            cache.update(k, v, layer)
        return cache

    @staticmethod
    def _layers(cache: Any) -> tuple[list[Any], list[Any]]:
        return [layer.keys for layer in cache.layers], [layer.values for layer in cache.layers]

    def _prefill(self, requests: list[Request]) -> None:
        """One forward pass over the prompts of ``requests`` (left-padded to the longest), which gives their caches
        and first tokens; their caches join the batch's."""
        torch = self.torch
        lengths = [len(r.prompt_ids) for r in requests]
        width = max(lengths)
        ids = torch.tensor(
            [[0] * (width - len(r.prompt_ids)) + r.prompt_ids for r in requests], dtype=torch.long, device=self.device
        )
        if len(requests) == 1:  # alone: no padding, the very computation of a plain generate()
            out = self.model(input_ids=ids, use_cache=True)
            mask = torch.ones((1, width), dtype=torch.long, device=self.device)
        else:
            mask = torch.tensor([[0] * (width - n) + [1] * n for n in lengths], dtype=torch.long, device=self.device)
            positions = (mask.cumsum(1) - 1).clamp(min=0)
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
        keys, values = self._layers(out.past_key_values)
        for request in requests:
            request._seen = torch.zeros(self.vocab, dtype=torch.bool, device=self.device)
            request._seen[torch.tensor(request.prompt_ids, device=self.device)] = True
            if request.params.temperature > 0:
                request._generator = torch.Generator(device=self.device)
                if request.params.seed is not None:
                    request._generator.manual_seed(int(request.params.seed))
                else:
                    request._generator.seed()
        tokens = self._sample(requests, out.logits[:, -1])
        new_positions = torch.tensor(lengths, dtype=torch.long, device=self.device)
        new_last = torch.tensor(tokens, dtype=torch.long, device=self.device)
        if not self._running:
            self._keys, self._values, self._mask = keys, values, mask
            self._positions, self._last = new_positions, new_last
        else:
            have = self._mask.shape[1]
            if width < have:  # left-pad the newcomers
                pad = have - width
                keys = [torch.nn.functional.pad(k, (0, 0, pad, 0)) for k in keys]
                values = [torch.nn.functional.pad(v, (0, 0, pad, 0)) for v in values]
                mask = torch.nn.functional.pad(mask, (pad, 0))
            elif width > have:  # left-pad the batch
                pad = width - have
                self._keys = [torch.nn.functional.pad(k, (0, 0, pad, 0)) for k in self._keys]
                self._values = [torch.nn.functional.pad(v, (0, 0, pad, 0)) for v in self._values]
                self._mask = torch.nn.functional.pad(self._mask, (pad, 0))
            self._keys = [torch.cat([a, b]) for a, b in zip(self._keys, keys, strict=True)]
            self._values = [torch.cat([a, b]) for a, b in zip(self._values, values, strict=True)]
            self._mask = torch.cat([self._mask, mask])
            self._positions = torch.cat([self._positions, new_positions])
            self._last = torch.cat([self._last, new_last])
        self._running.extend(requests)
        self.steps += 1
        for request, token in zip(requests, tokens, strict=True):
            self._emit(request, token)
        self._sweep()

    def _decode_step(self) -> None:
        torch = self.torch
        self.batch_sizes.append(len(self._running))
        mask = torch.cat([self._mask, torch.ones((len(self._running), 1), dtype=torch.long, device=self.device)], 1)
        out = self.model(
            input_ids=self._last[:, None],
            attention_mask=mask,
            position_ids=self._positions[:, None],
            cache=self._cache(),
            use_cache=True,
        )
        self._keys, self._values = self._layers(out.past_key_values)
        self._mask = mask
        self._positions = self._positions + 1
        logits = out.logits[:, -1]
        tokens = self._sample(self._running, logits)
        self._last = torch.tensor(tokens, dtype=torch.long, device=self.device)
        self.steps += 1
        for request, token in zip(list(self._running), tokens, strict=True):
            self._emit(request, token)
        self._sweep()

    def _sample(self, requests: list[Request], logits: Any) -> list[int]:
        """The next token of each of ``requests`` from its row of ``logits`` ``[k, vocab]``: the repetition penalty and
        the end-of-sequence suppression for the whole batch at once, greedy rows by one ``argmax``, sampled rows
        each from its own generator."""
        torch = self.torch
        logits = logits.float()
        seen = torch.stack([r._seen for r in requests])
        penalty = torch.tensor([[r.params.repetition_penalty] for r in requests], device=self.device)
        logits = torch.where(seen, torch.where(logits > 0, logits / penalty, logits * penalty), logits)
        if self.eos_id is not None:
            early = [row for row, r in enumerate(requests) if len(r.generated) < r.params.min_tokens]
            if early:
                logits[early, self.eos_id] = float("-inf")
        tokens = torch.argmax(logits, dim=-1).tolist()
        for row, request in enumerate(requests):
            p = request.params
            if p.temperature > 0:
                probs = torch.softmax(logits[row] / p.temperature, dim=-1)
                if p.top_p < 1.0:
                    ordered, index = torch.sort(probs, descending=True)
                    keep = torch.cumsum(ordered, 0) - ordered < p.top_p  # the smallest set reaching top_p
                    keep[0] = True
                    ordered = torch.where(keep, ordered, torch.zeros_like(ordered))
                    choice = int(torch.multinomial(ordered / ordered.sum(), 1, generator=request._generator))
                    tokens[row] = int(index[choice])
                else:
                    tokens[row] = int(torch.multinomial(probs, 1, generator=request._generator))
            request._seen[tokens[row]] = True
        return [int(t) for t in tokens]

    def _emit(self, request: Request, token: int) -> None:
        """Record ``token`` for ``request`` and queue its event; marks the request finished when it ends."""
        now = time.monotonic()
        request.generated.append(token)
        self.generated_tokens += 1
        if request.first_token_at is None:
            request.first_token_at = now
        if request._cancel.is_set():
            return  # generated by the step under way when the client left: counted, never sent
        p = request.params
        finish = None
        ids = request.generated
        if self.eos_id is not None and token == self.eos_id:
            finish, ids = FINISH_STOP, ids[:-1]
        text = self.decode(ids)
        stop_at = -1
        for stop in p.stop:
            at = text.find(stop)
            if at >= 0 and (stop_at < 0 or at < stop_at):
                stop_at = at
        if stop_at >= 0:
            text, finish = text[:stop_at], FINISH_STOP
        if finish is None and (
            len(request.generated) >= p.max_tokens
            or len(request.prompt_ids) + len(request.generated) >= self.max_context
        ):
            finish = FINISH_LENGTH
        release = text
        if finish is None:
            release = text.rstrip("\ufffd")  # a character still incomplete
            held = max((k for stop in p.stop for k in range(1, len(stop)) if release.endswith(stop[:k])), default=0)
            release = release[: len(release) - held] if held else release
        if not release.startswith(request.text):  # a decoder that rewrote earlier text: send only what is new
            release = request.text
        delta = release[len(request.text) :]
        request.text = release
        if finish is not None:
            request.finish_reason = finish
        request.events.put(Event(text=delta, completion_tokens=len(request.generated), finish_reason=finish))

    def _sweep(self) -> None:
        """Take finished and cancelled requests out of the batch and cut columns only padding uses."""
        keep = [i for i, r in enumerate(self._running) if r.finish_reason is None and not r._cancel.is_set()]
        gone = [r for i, r in enumerate(self._running) if i not in keep]
        for request in gone:
            if request.finish_reason is None:
                self._mark_cancelled(request)
            request.finished_at = time.monotonic()
            self.finished.append(request)
        if not gone:
            return
        if not keep:
            self._reset_batch()
            return
        index = self.torch.tensor(keep, dtype=self.torch.long, device=self.device)
        self._running = [self._running[i] for i in keep]
        self._keys = [k.index_select(0, index) for k in self._keys]
        self._values = [v.index_select(0, index) for v in self._values]
        self._mask = self._mask.index_select(0, index)
        self._positions = self._positions.index_select(0, index)
        self._last = self._last.index_select(0, index)
        used = self._mask.sum(0) > 0
        first = int(self.torch.nonzero(used)[0]) if bool(used.any()) else 0
        if first:
            self._keys = [k[:, :, first:] for k in self._keys]
            self._values = [v[:, :, first:] for v in self._values]
            self._mask = self._mask[:, first:]

    def _drop_cancelled(self) -> None:
        if any(r._cancel.is_set() for r in self._running):
            self._sweep()

    def _mark_cancelled(self, request: Request) -> None:
        request.finish_reason = FINISH_CANCELLED  # its reader had its last event from cancel()

    def _finish_out_of_batch(self, request: Request, reason: str, error: str = "") -> None:
        if request.finish_reason is not None:
            return
        request.finish_reason = reason
        request.finished_at = time.monotonic()
        if not (reason == FINISH_CANCELLED and request._cancel.is_set()):  # else cancel() sent the last event
            request.events.put(
                Event(text="", completion_tokens=len(request.generated), finish_reason=reason, error=error)
            )
        self.finished.append(request)
