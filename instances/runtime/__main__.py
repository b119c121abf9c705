"""``python -m instances.runtime --config job.json`` — the training runtime's command line.

Start it under ``torchrun`` (one process per GPU, or per CPU slot locally), e.g.::

    torchrun --nproc-per-node 2 --standalone -m instances.runtime --config job.json

Exit codes are in ``instances.runtime.exitcodes``. torchrun itself turns any non-zero worker exit
into its own exit status 1, so the portal reads the reason from the ``exit`` event (HTTP callback
and ``{workdir}/events.jsonl``) or from ``{workdir}/exit.json`` (rank 0 writes
``{reason, exit_code, step, message, attempt}`` there before exiting).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from typing import Any

from instances.runtime import exitcodes
from instances.runtime.config import ConfigError, load_config


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run one rank of the job, return its exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m instances.runtime",
        description="Distributed training with automatic sharded checkpoints and exact resume. "
        "Run one process per rank under torchrun; all settings come from the JSON config "
        "(see instances/runtime/config.py for the fields).",
        epilog="exit codes: 0 finished, 64 invalid config, 75 checkpoint store unavailable (retry later), "
        "85 preempted (checkpoint saved), 86 stopped by the portal (checkpoint saved), 87 resume refused "
        "(nothing touched), 88 a peer rank was lost (node failure), 1 failed",
    )
    parser.add_argument("--config", required=True, help="path of the job's JSON config file")
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        print(f"invalid config: {exc}", file=sys.stderr)
        return exitcodes.EXIT_CONFIG_ERROR

    from torch.distributed.checkpoint.api import CheckpointException

    from instances.runtime.checkpoint import CheckpointStoreError
    from instances.runtime.train import ResumeRefused, Trainer, is_peer_loss

    trainer = Trainer(cfg)
    code = exitcodes.EXIT_FAILED
    try:
        code = trainer.run()
    except ResumeRefused as exc:  # also NoLoadableCheckpoint: a person must decide, not a retry
        print(f"resume refused: {exc}", file=sys.stderr)
        code = trainer.finish("failed", exitcodes.EXIT_RESUME_REFUSED, str(exc))
    except ConfigError as exc:  # found once the degree is known (global_batch that does not split over it)
        print(f"invalid config: {exc}", file=sys.stderr)
        code = trainer.finish("failed", exitcodes.EXIT_CONFIG_ERROR, f"invalid config: {exc}")
    except CheckpointStoreError as exc:
        print(f"checkpoint store unavailable: {exc}", file=sys.stderr)
        code = trainer.finish("failed", exitcodes.EXIT_STORE_UNAVAILABLE, str(exc))
    except (Exception, CheckpointException) as exc:
        traceback.print_exc()
        if is_peer_loss(exc):  # another rank vanished under a collective: a node failure, not our crash
            code = trainer.finish("failed", exitcodes.EXIT_RANK_LOST, f"peer rank lost: {type(exc).__name__}: {exc}")
        else:
            code = trainer.finish("failed", exitcodes.EXIT_FAILED, f"{type(exc).__name__}: {exc}")
    finally:
        trainer.close()
        _report_threads(cfg)
    return code


# Test hook (never set in production): after close() each rank writes the non-daemon threads still alive
# (other than the main one) to ``{workdir}/threads-rank<R>.json``; a test fails if any is listed (such a
# thread would hold the interpreter, and so the job's GPUs, after the run ended).
THREADS_REPORT_ENV = "RUNTIME_TEST_THREADS_REPORT"


def _report_threads(cfg: Any) -> None:
    import json
    import os
    import threading

    if not os.environ.get(THREADS_REPORT_ENV):
        return
    alive = [
        t.name for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()
    ]
    path = cfg.workdir_path / f"threads-rank{os.environ.get('RANK', '0')}.json"
    path.write_text(json.dumps(alive))


if __name__ == "__main__":
    sys.exit(main())
