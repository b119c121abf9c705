"""Process exit codes of the training runtime, read by the portal's backends (local and Kubernetes).

Values avoid 1 (generic Python error), 2 (argparse usage), 126-165 (shell / signal deaths).
"""

EXIT_FINISHED = 0  # reached max steps / max tokens; final checkpoint written
EXIT_CONFIG_ERROR = 64  # EX_USAGE (sysexits.h): config file invalid, nothing trained
EXIT_PREEMPTED = 85  # SIGTERM received, checkpoint saved at the current step, safe to resume
EXIT_STOPPED = 86  # stop requested by the portal, checkpoint saved
EXIT_FAILED = 1  # crash: resume from the newest complete checkpoint (counts against the crash budget)
EXIT_RESUME_REFUSED = (
    87  # a checkpoint exists but cannot be resumed exactly (e.g. other data-parallel degree)
)
