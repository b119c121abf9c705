"""Per-rank wrapper under torchrun: ``-m instances.backends.rank_shim --exit-dir D -m MODULE ARGS…``.

Runs ``MODULE`` in this very process (``runpy``, as ``python -m`` does), so signals sent to the worker reach
the runtime's own handlers, and records the rank's exit code in ``D/rank-<RANK>`` on the way out. torchrun
reports any worker failure as its own exit code 1; the launcher reads these files to recover the runtime's
real code (``EXIT_PREEMPTED``, ``EXIT_CONFIG_ERROR``, …). On start it writes ``D/started-<RANK>`` (its pid):
a rank that started but left no ``rank-<RANK>`` file was killed by a signal it does not handle (SIGKILL, the
OOM killer, a lost node) and the launcher reports it as lost (``EXIT_RANK_LOST``).
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
from pathlib import Path


def _code_of(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    return 1  # sys.exit("message") exits 1


def main(argv: list[str]) -> None:
    """Parse ``--exit-dir D -m MODULE ARGS…`` and run MODULE as ``__main__``; re-raises its exit."""
    if len(argv) < 4 or argv[0] != "--exit-dir" or argv[2] != "-m":
        print("usage: python -m instances.backends.rank_shim --exit-dir D -m MODULE [ARGS…]", file=sys.stderr)
        sys.exit(2)
    exit_dir, module, args = Path(argv[1]), argv[3], argv[4:]
    rank = os.environ.get("RANK", "0")
    sys.argv = [module, *args]
    exit_dir.mkdir(parents=True, exist_ok=True)
    started = exit_dir / f".started-{rank}.tmp"
    started.write_text(f"{os.getpid()}\n")
    os.replace(started, exit_dir / f"started-{rank}")
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        # No handler of the runtime may interrupt this record (a second SIGTERM — the test's and torchrun's
        # — whose handler raises would leave no file, and the rank would count as lost): the signals stay
        # pending while it is written. The code is read from the exception leaving now (a handler that
        # raised again replaced the first one).
        held = {signal.SIGTERM, signal.SIGINT, signal.SIGUSR1}
        signal.pthread_sigmask(signal.SIG_BLOCK, held)
        leaving = sys.exc_info()[1]
        code = 0 if leaving is None else _code_of(leaving) if isinstance(leaving, SystemExit) else 1
        exit_dir.mkdir(parents=True, exist_ok=True)
        tmp = exit_dir / f".rank-{rank}.tmp"
        tmp.write_text(f"{code}\n")
        os.replace(tmp, exit_dir / f"rank-{rank}")
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)  # recorded: the rest of the way out as before


if __name__ == "__main__":
    main(sys.argv[1:])
