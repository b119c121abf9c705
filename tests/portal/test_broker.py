"""The embedded broker (``portal.broker``): a consumer never sees a message file before it is written.

kombu's stock filesystem transport creates the message file and then writes it, so a consumer polling the
same folder can read an empty file (a Celery worker then dies on ``JSONDecodeError``). These tests run a
real producer and a real consumer process on the patched transport, as ``manage.py runportal`` does with
its web server, beat and worker. The stock transport is not asserted to fail: the race is probabilistic;
``benchmarks/broker_race.py`` prints how many messages each transport survives.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kombu import Connection

from portal.broker import PARTIAL_SUFFIX, Transport

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = 4000
PACE_S = 0.001  # keeps the consumer caught up, where the race is
TRANSPORT = "portal.broker:Transport"  # the value of CELERY_BROKER_TRANSPORT in portal.settings.base


def _options(folder: str) -> dict[str, Any]:
    return {
        "data_folder_in": folder,
        "data_folder_out": folder,
        "control_folder": folder + "-control",
        "polling_interval": 0.01,
        "store_processed": False,
    }


def _produce(folder: str, count: int) -> None:
    with Connection("filesystem://", transport=TRANSPORT, transport_options=_options(folder)) as conn:
        queue = conn.SimpleQueue("race")
        for i in range(count):
            queue.put({"i": i, "pad": "y" * 2000})
            time.sleep(PACE_S)


def _consume(folder: str, count: int, results: Any) -> None:
    seen: list[int] = []
    with Connection("filesystem://", transport=TRANSPORT, transport_options=_options(folder)) as conn:
        queue = conn.SimpleQueue("race")
        deadline = time.monotonic() + 120  # a stuck consumer fails the test instead of hanging it
        while len(seen) < count and time.monotonic() < deadline:
            try:
                message = queue.get(timeout=0.5)
            except queue.Empty:
                continue
            except Exception as exc:  # the bug: an empty file read as a message
                results.put(("crashed", len(seen), repr(exc)))
                return
            message.ack()
            seen.append(message.payload["i"])
        # anything left over would be a duplicate
        try:
            extra = queue.get(timeout=0.3)
            seen.append(extra.payload["i"])
        except queue.Empty:
            pass
    results.put(("done", len(seen), seen))


def test_a_consumer_receives_every_message_once_and_never_an_empty_one(tmp_path: Path) -> None:
    folder = str(tmp_path / "q")
    os.makedirs(folder)
    ctx = mp.get_context("spawn")  # fresh interpreters, like the web server and the worker
    results = ctx.Queue()
    consumer = ctx.Process(target=_consume, args=(folder, MESSAGES, results))
    producer = ctx.Process(target=_produce, args=(folder, MESSAGES))
    consumer.start()
    producer.start()
    producer.join(120)
    outcome = results.get(timeout=150)
    consumer.join(30)
    assert producer.exitcode == 0
    state, received, seen = outcome
    assert state == "done", f"consumer failed after {received} messages: {seen}"
    assert sorted(seen) == list(range(MESSAGES))  # each exactly once
    assert os.listdir(folder) == []  # no message and no partial file left behind


def test_a_put_leaves_only_the_final_message_file(tmp_path: Path) -> None:
    folder = str(tmp_path / "q")
    os.makedirs(folder)
    with Connection("filesystem://", transport=TRANSPORT, transport_options=_options(folder)) as conn:
        assert isinstance(conn.transport, Transport)
        conn.SimpleQueue("one").put({"hello": "world"})
        [name] = os.listdir(folder)
        assert name.endswith(".one.msg") and not name.endswith(PARTIAL_SUFFIX)
        assert conn.SimpleQueue("one").get(timeout=1).payload == {"hello": "world"}


def test_a_partial_file_is_invisible_to_the_consumer(tmp_path: Path) -> None:
    """A producer that died between write and rename left a ``.part`` file: it is neither read nor counted."""
    folder = str(tmp_path / "q")
    os.makedirs(folder)
    Path(folder, "1_abc.half.msg" + PARTIAL_SUFFIX).write_bytes(b"")
    with Connection("filesystem://", transport=TRANSPORT, transport_options=_options(folder)) as conn:
        queue = conn.SimpleQueue("half")
        assert queue.qsize() == 0
        try:
            queue.get(timeout=0.2)
        except queue.Empty:
            pass
        else:
            raise AssertionError("a partial file was delivered")
    assert os.listdir(folder) == ["1_abc.half.msg.part"]


def test_the_embedded_settings_select_the_atomic_transport_for_celery(tmp_path: Path) -> None:
    """The Celery app under the embedded settings (what runportal's worker, beat and web load) uses it."""
    code = (
        "from portal.celery import app; c = app.connection_for_write(); "
        "print(type(c.transport).__module__, type(c.transport).__name__, c.transport_options['data_folder_in'])"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_URL", "CELERY_"))}
    env.update(DJANGO_SETTINGS_MODULE="portal.settings.base", PORTAL_DATA_DIR=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout.split()
    assert out == ["portal.broker", "Transport", str(tmp_path / "celery" / "out")]
