"""Servers the local launcher starts beside an instance's command (no Django, nothing heavy imported: the
launcher calls :func:`sidecars_start` before it starts the command).

The launcher is the instance's process-group and session leader, so a server started here is in the
instance's group and session and inherits its process marker: stopping the instance (SIGTERM to the group,
then SIGKILL to every marked process) ends it, and so does the end of the command (the launcher kills
what is left). Which servers start is decided by the portal, by the files it wrote before the submit:

* JupyterLab: the environment asks for it (``GPU_PORTAL_JUPYTER*`` variables set by
  :func:`instances.interactive.jupyter.jupyter_env`) → :func:`instances.interactive.jupyter_process.jupyter_start`,
  which also removes the secret from the environment before the command (and any kernel) starts.
* SSH: ``<workspace>/../ssh/host_key`` exists (:mod:`instances.interactive.ssh` writes it) → start
  ``python -m instances.interactive.ssh_server --state <that folder> --workspace <workspace>``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from instances.interactive.jupyter_process import jupyter_start
from instances.interactive.shell_env import shell_rc_write

SSH_STATE_DIR = "ssh"  # beside the attempts: <workspace_root>/<job_id>/ssh


def ssh_state_dir(workspace: Path) -> Path:
    """The SSH state folder of the instance whose attempt workspace is ``workspace``."""
    return workspace.parent / SSH_STATE_DIR


def sidecars_start(workspace: Path) -> list[subprocess.Popen[bytes]]:
    """Start the servers the portal asked for (see the module docstring); returns their processes. A
    server that cannot start is reported on stderr (the instance's log) and does not stop the command."""
    started: list[subprocess.Popen[bytes]] = []
    jupyter = jupyter_start(workspace)
    if jupyter is not None:
        started.append(jupyter)
    state = ssh_state_dir(workspace)
    if (state / "host_key").is_file():
        try:
            shell_rc_write(workspace)  # its logins' start file (instances.interactive.shell_env)
        except OSError as exc:
            print(f"local_launcher: cannot write the shells' start file: {exc}", file=sys.stderr, flush=True)
        argv = [sys.executable, "-m", "instances.interactive.ssh_server", "--state", str(state)]
        try:
            started.append(subprocess.Popen([*argv, "--workspace", str(workspace)], stdin=subprocess.DEVNULL))
        except OSError as exc:
            print(f"local_launcher: cannot start the SSH server: {exc}", file=sys.stderr, flush=True)
    return started
