"""Process exit codes of the training runtime, read by the portal's backends (local and Kubernetes).

Values avoid 1 (generic Python error), 2 (argparse usage), 126-165 (shell / signal deaths).

Three classes matter to the portal (``instances.backends.base.state_for_exit_code``):

* **resume without charging the crash budget**: ``EXIT_PREEMPTED``, ``EXIT_RANK_LOST``,
  ``EXIT_STORE_UNAVAILABLE`` (``RESUMABLE_EXIT_CODES``) — the job did nothing wrong;
* **never retry**: ``EXIT_CONFIG_ERROR``, ``EXIT_RESUME_REFUSED`` — a person must change something;
* **crash**: anything else (``EXIT_FAILED``) — resumed with back-off while the crash budget lasts.
"""

EXIT_FINISHED = 0  # reached max steps / max tokens; final checkpoint written
EXIT_CONFIG_ERROR = 64  # EX_USAGE (sysexits.h): config file invalid, nothing trained
EXIT_STORE_UNAVAILABLE = 75  # EX_TEMPFAIL (sysexits.h): the checkpoint store kept failing reads / writes
# (transient I/O errors after retries with back-off); nothing was set aside: retry later like a preemption
EXIT_PREEMPTED = 85  # SIGTERM received, checkpoint saved at the current step, safe to resume
EXIT_STOPPED = 86  # stop requested by the portal, checkpoint saved
EXIT_FAILED = 1  # crash: resume from the newest complete checkpoint (counts against the crash budget)
EXIT_RESUME_REFUSED = 87  # a checkpoint exists but cannot be resumed exactly (other data-parallel degree, other shapes)
EXIT_RANK_LOST = 88  # a rank died without an exit code (SIGKILL, OOM killer, node loss), or this rank's
# collectives failed because a peer vanished: a node failure, resumed like a preemption

RESUMABLE_EXIT_CODES = frozenset({EXIT_PREEMPTED, EXIT_RANK_LOST, EXIT_STORE_UNAVAILABLE})
