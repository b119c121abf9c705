"""Runtime -> portal reporting: the HTTP contract and its client (standard library only).

Contract (the portal implements the server side of exactly this)
-----------------------------------------------------------------
Only rank 0 reports. It sends::

    POST {callback_url}/events
    Authorization: Bearer {job_token}
    Content-Type: application/json

    {"attempt": int, "events": [{"seq": int, "type": str, "time": "2025-01-31T12:00:00.123456Z", ...}]}

* ``attempt`` is the config's ``attempt`` (the portal's attempt number for this run of the job).
* ``seq`` starts at 1 and increases by exactly 1 per event within an attempt. When the runtime is
  restarted inside the same attempt it continues after the highest ``seq`` in its local
  ``events.jsonl``. Batches are resent until a 2xx arrives, so the portal must dedupe on
  ``(job, attempt, seq)``: resending is safe, and events of a batch are in ``seq`` order.
* ``time`` is ISO-8601 UTC with a ``Z`` suffix.
* ``events`` may be empty: the runtime polls that way every ``report_interval_s`` seconds when it
  has nothing to send, to pick up requests.

Event types and their fields (besides seq, type, time):

``started``     ``step`` (step resumed from, 0 for a fresh start), ``world_size``, ``flops_per_token``
                (model FLOPs per trained token, 6·N + attention, see ``instances.runtime.mfu``),
                ``peak_flops`` (the device's dense bf16 peak in FLOP/s, null when unknown), ``device``
``progress``    ``step``, ``loss`` (mean over the step's tokens and ranks), ``lr``,
                ``tokens_per_s`` (all ranks, since the previous progress event), ``tokens_seen``,
                ``mfu`` (model FLOPs utilisation, 0..1, or null when the device's peak is unknown, e.g.
                on CPU), ``mfu_note`` (only when ``mfu`` is null: why, in English), ``mfu_note_code``
                (with it: ``cpu`` | ``unknown_device``, ``instances/runtime/mfu.py``) and ``mfu_device``
                (with ``unknown_device``: the GPU's name as CUDA reports it)
``checkpoint``  ``step``, ``path`` (folder or URL of the complete checkpoint), ``bytes``, ``loss``
``checkpoint_pruned``  ``step``, ``path``: keep-last-K deleted this complete checkpoint (it no longer
                exists; a rollback to it is impossible). Sent once per deleted checkpoint, after the
                ``checkpoint`` event of the save that made it surplus, or after ``started`` when a resumed
                run finishes the pruning of a run killed between a commit and its prune. Pinned
                checkpoints are never pruned.
``exit``        ``reason`` (``finished`` | ``preempted`` | ``stopped`` | ``failed``), ``exit_code``
                (see ``instances.runtime.exitcodes``), ``step``, ``message``

The runtime also emits ``warning`` events (``message``) for partial checkpoints it skipped, damaged ones it
set aside, checkpoints it could not verify (no manifest and no hashes: "unverifiable"), manifests it
rebuilt, and transient store errors it retried. Each message names the checkpoint.

Response (any 2xx): JSON ``{"checkpoint_requested": bool, "stop_requested": bool}`` (missing keys mean
false). ``checkpoint_requested`` makes the job save a checkpoint after the current step;
``stop_requested`` makes it save and exit with ``EXIT_STOPPED``. The runtime acts on a request once
per response that carries it; the portal should clear the flag after it sees the matching
``checkpoint`` / ``exit`` event. A non-2xx answer or a network error is retried with exponential
backoff (1 s doubling to 60 s) forever; training never waits for the portal. Every event is also
appended, one JSON object per line, to ``{workdir}/events.jsonl`` before it is sent.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

EVENT_TYPES = ("started", "progress", "checkpoint", "checkpoint_pruned", "exit", "warning")
MAX_BATCH = 500  # events per POST
MAX_QUEUE = 100_000  # oldest progress events are dropped beyond this (they are in events.jsonl)
BACKOFF_START_S = 1.0
BACKOFF_MAX_S = 60.0
HTTP_TIMEOUT_S = 10.0


def utc_now_iso() -> str:
    """Current time as ISO-8601 UTC with ``Z``, microsecond precision."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def last_seq(events_path: Path, attempt: int) -> int:
    """Highest ``seq`` already written for ``attempt`` in an ``events.jsonl`` (0 when none)."""
    best = 0
    try:
        with open(events_path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    ev = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn last line after a crash
                if ev.get("attempt") == attempt:
                    best = max(best, int(ev.get("seq", 0)))
    except FileNotFoundError:
        pass
    return best


class Reporter:
    """Queues events, logs them to ``events.jsonl`` and posts them from a daemon thread.

    ``emit`` never blocks on the network. ``requests()`` returns and clears the flags the portal
    answered with. ``close(timeout_s)`` flushes what it can within ``timeout_s`` seconds and stops.
    With an empty ``callback_url`` nothing is sent (events are only logged).
    """

    def __init__(
        self,
        *,
        callback_url: str,
        job_token: str,
        attempt: int,
        workdir: Path,
        interval_s: float = 5.0,
    ) -> None:
        self.url = callback_url.rstrip("/") + "/events" if callback_url else ""
        self.token = job_token
        self.attempt = attempt
        workdir.mkdir(parents=True, exist_ok=True)
        self.events_path = workdir / "events.jsonl"
        self.interval_s = interval_s
        self._seq = last_seq(self.events_path, attempt)
        self._queue: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._checkpoint_requested = False
        self._stop_requested = False
        self.sent = 0  # events acknowledged by the portal
        self.failures = 0  # failed POSTs so far
        self._log = open(self.events_path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._thread: threading.Thread | None = None
        if self.url:
            self._thread = threading.Thread(target=self._run, name="portal-reporter", daemon=True)
            self._thread.start()

    def emit(self, type_: str, **fields: Any) -> dict[str, Any]:
        """Record one event (see the module docstring for fields). Returns the event dict."""
        if type_ not in EVENT_TYPES:
            raise ValueError(f"unknown event type {type_!r}")
        with self._lock:
            self._seq += 1
            event = {"seq": self._seq, "type": type_, "time": utc_now_iso(), **fields}
            self._log.write(json.dumps({"attempt": self.attempt, **event}) + "\n")
            self._log.flush()
            if self.url:
                self._queue.append(event)
                if len(self._queue) > MAX_QUEUE:
                    self._drop_oldest_progress()
        if type_ != "progress":
            self._wake.set()
        return event

    def _drop_oldest_progress(self) -> None:
        for i, ev in enumerate(self._queue):
            if ev["type"] == "progress":
                del self._queue[i]
                return

    def requests(self) -> tuple[bool, bool]:
        """``(checkpoint_requested, stop_requested)`` seen since the last call; clears them."""
        with self._lock:
            out = (self._checkpoint_requested, self._stop_requested)
            self._checkpoint_requested = self._stop_requested = False
        return out

    def pending(self) -> int:
        """Events not yet acknowledged by the portal."""
        with self._lock:
            return len(self._queue)

    def _post(self, events: list[dict[str, Any]]) -> dict[str, Any]:
        body = json.dumps({"attempt": self.attempt, "events": events}).encode()
        req = urllib.request.Request(  # noqa: S310 - http(s) only, checked by JobConfig.validate
            self.url,
            data=body,
            method="POST",
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S) as resp:  # noqa: S310 - portal URL from config
            raw = resp.read()
        try:
            answer = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            answer = {}
        return answer if isinstance(answer, dict) else {}

    def _send_once(self) -> bool:
        with self._lock:
            batch = [self._queue[i] for i in range(min(MAX_BATCH, len(self._queue)))]
        try:
            answer = self._post(batch)
        except (urllib.error.URLError, OSError, ValueError):
            self.failures += 1
            return False
        with self._lock:
            for _ in batch:
                self._queue.popleft()
            self.sent += len(batch)
            self._checkpoint_requested |= bool(answer.get("checkpoint_requested"))
            self._stop_requested |= bool(answer.get("stop_requested"))
        return True

    def _run(self) -> None:
        backoff = 0.0
        while not self._stop.is_set():
            self._wake.wait(backoff or self.interval_s)
            self._wake.clear()
            if self._stop.is_set():
                break
            if self._send_once():
                backoff = 0.0
                while self.pending() and not self._stop.is_set():  # drain a backlog quickly
                    if not self._send_once():
                        backoff = BACKOFF_START_S
                        break
            else:
                backoff = min(BACKOFF_MAX_S, max(BACKOFF_START_S, backoff * 2))

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the sender after trying to deliver the queue for at most ``timeout_s`` seconds."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            deadline = time.monotonic() + timeout_s
            while self.pending() and time.monotonic() < deadline:
                if not self._send_once():
                    time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        self._log.close()
