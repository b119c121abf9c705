"""How many messages a consumer of the filesystem broker survives: kombu's stock transport vs ``portal.broker``.

    .venv/bin/python benchmarks/broker_race.py [--seconds 20] [--pace-ms 2] [--runs 1]

One producer process puts 2 KB messages on one queue every ``--pace-ms`` for ``--seconds``; one consumer
process gets and acks them (polling interval 10 ms), as Celery's web/beat and worker do in ``manage.py
runportal``. With kombu 5.7's ``filesystem`` transport the consumer can read a message file that is created
but not yet written and dies on ``JSONDecodeError``; ``portal.broker:Transport`` writes under a temporary
name and renames. Prints, per transport and run: crashed or not, messages received, messages sent.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kombu import Connection

TRANSPORTS = {"stock": "filesystem", "portal": "portal.broker:Transport"}


def _options(folder: str) -> dict[str, Any]:
    return {
        "data_folder_in": folder,
        "data_folder_out": folder,
        "control_folder": folder + "/control",
        "polling_interval": 0.01,
        "store_processed": False,
    }


def _produce(transport: str, folder: str, seconds: float, pace_s: float, sent: Any) -> None:
    n = 0
    with Connection("filesystem://", transport=transport, transport_options=_options(folder)) as conn:
        queue = conn.SimpleQueue("t")
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            queue.put({"x": "y" * 2000})
            n += 1
            time.sleep(pace_s)
    sent.put(n)


def _consume(transport: str, folder: str, seconds: float, results: Any) -> None:
    n = 0
    with Connection("filesystem://", transport=transport, transport_options=_options(folder)) as conn:
        queue = conn.SimpleQueue("t")
        end = time.monotonic() + seconds + 2
        while time.monotonic() < end:
            try:
                queue.get(timeout=0.5).ack()
                n += 1
            except queue.Empty:
                pass
            except Exception as exc:
                results.put(f"crashed after {n} msgs: {exc!r}")
                return
    results.put(f"no crash, {n} msgs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--pace-ms", type=float, default=2)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    for label, transport in TRANSPORTS.items():
        for run in range(1, args.runs + 1):
            with tempfile.TemporaryDirectory() as folder:
                results: Any = mp.Queue()
                sent: Any = mp.Queue()
                consumer = mp.Process(target=_consume, args=(transport, folder, args.seconds, results))
                producer = mp.Process(
                    target=_produce, args=(transport, folder, args.seconds, args.pace_ms / 1000, sent)
                )
                consumer.start()
                producer.start()
                producer.join()
                consumer.join()
                print(f"{label:6} run {run}: {results.get()}; {sent.get()} sent")


if __name__ == "__main__":
    main()
