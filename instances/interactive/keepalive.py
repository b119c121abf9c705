"""The command of an interactive instance launched without one: ``python -m instances.interactive.keepalive``.

It does nothing until it is told to stop (SIGTERM, SIGINT), so the instance stays up for its JupyterLab and
SSH until the user stops it or idle autostop does (it uses no CPU: an instance whose only process is this one
is idle unless a session or a kernel is open). It exits with ``128 + N`` for signal N, as a shell reports a death
by that signal, so the backend reads a stop exactly as it reads a stopped ``sleep``. It handles the signals
itself instead of leaving them to their default action because a container's first process (PID 1 of its
namespace) is not ended by a signal it does not handle. No Django, nothing heavy imported.
"""

from __future__ import annotations

import signal
import sys

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def main() -> int:
    """Wait for SIGTERM or SIGINT; returns ``128 + N`` for the first signal N received.

    The signals are blocked first (one sent from then on stays pending) and taken with ``sigwait``, so none
    is missed in between; the no-op handler makes them "handled" for the kernel's rule on PID 1 as well."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda signum, frame: None)
    return 128 + int(signal.sigwait(STOP_SIGNALS))


if __name__ == "__main__":
    sys.exit(main())
