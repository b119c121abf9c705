"""The training environment in every shell of an instance (no Django: the local launcher and the SSH server use it).

The Python the portal trains with must be the one a user gets in JupyterLab's terminal, its default notebook
kernel and SSH sessions, first on PATH. What resets PATH, and what puts it back:

* **Login shells** run ``/etc/profile``, which on Debian sets PATH afresh (JupyterLab starts its terminals as
  login shells, ``$SHELL -l``, when it was not started from a terminal; sshd starts logins as ``-bash``).
  In the instance image ``training_env.sh`` is installed in ``/etc/profile.d`` and puts
  ``$GPU_PORTAL_TRAINING_BIN`` back in front. The local backend cannot write ``/etc``: its JupyterLab and SSH
  server start interactive shells as ``bash --rcfile <workspace>/.gpu-portal/shellrc -i`` instead
  (:func:`interactive_shell_argv`), a start file that reads the usual ``/etc/bash.bashrc`` and ``~/.bashrc``,
  then ``training_env.sh``.
* **sshd** gives sessions a PATH of its own; in a pod ``instances.interactive.ssh_k8s`` starts it with
  ``SetEnv`` of the container's PATH, so ``ssh host cmd`` runs with the image's Python first too.
* **Everything else** (the command, JupyterLab and its kernels, the local SSH server's ``sh -c`` sessions)
  inherits the job's environment: the local backend puts the training Python's folder first on it
  (:func:`training_environment`); in a pod the image's ENV does.

``GPU_PORTAL_TRAINING_BIN`` names the folder, in the job's environment and in the portal's settings (the
local backend's ``training_bin``; default: the folder of the Python the backend runs).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

TRAINING_BIN_ENV = "GPU_PORTAL_TRAINING_BIN"
PROFILE_SCRIPT = Path(__file__).with_name("training_env.sh")  # /etc/profile.d/gpu-portal-training.sh in the image
SHELL_RC = ".gpu-portal/shellrc"  # under the workspace
_RC_HEAD = """\
# Written by gpu-portal: the start file of this instance's interactive shells (JupyterLab's terminals, SSH
# logins). The usual files first, then the training environment first on PATH.
if [ -n "${BASH_VERSION:-}" ]; then
    [ -r /etc/bash.bashrc ] && . /etc/bash.bashrc
    [ -r "$HOME/.bashrc" ] && . "$HOME/.bashrc"
fi
"""


def path_with_first(bin_dir: str, path: str | None) -> str:
    """``path`` (a PATH value; ``None`` or "" = ``os.defpath``) with ``bin_dir`` first and nowhere else."""
    rest = [p for p in (path or os.defpath).split(os.pathsep) if p and p != bin_dir]
    return os.pathsep.join([bin_dir, *rest])


def venv_of(bin_dir: str) -> str | None:
    """The virtual environment whose ``bin`` folder is ``bin_dir`` (its ``pyvenv.cfg`` is beside), or ``None``."""
    root = Path(bin_dir).parent
    return str(root) if (root / "pyvenv.cfg").is_file() else None


def training_environment(bin_dir: str, path: str | None) -> dict[str, str]:
    """The variables a job gets so that ``python`` is the training Python: ``PATH`` with ``bin_dir`` first,
    ``GPU_PORTAL_TRAINING_BIN`` and, when ``bin_dir`` is a virtual environment's, ``VIRTUAL_ENV`` (what
    ``activate`` sets). ``path``: the PATH to start from."""
    env = {"PATH": path_with_first(bin_dir, path), TRAINING_BIN_ENV: bin_dir}
    venv = venv_of(bin_dir)
    if venv:
        env["VIRTUAL_ENV"] = venv
    return env


def shell_rc_text() -> str:
    """The start file's text: ``/etc/bash.bashrc`` and ``~/.bashrc`` (under bash), then ``training_env.sh``."""
    return _RC_HEAD + PROFILE_SCRIPT.read_text()


def shell_rc_write(workspace: Path) -> Path:
    """Write the start file at ``<workspace>/.gpu-portal/shellrc`` (atomically, 0644); returns its path.
    Raises ``OSError`` when it cannot be written."""
    rc = workspace / SHELL_RC
    rc.parent.mkdir(exist_ok=True)
    tmp = rc.with_name(f".{rc.name}.{os.getpid()}.tmp")
    tmp.write_text(shell_rc_text())
    os.replace(tmp, rc)
    return rc


def interactive_shell_argv(workspace: Path) -> list[str]:
    """The argv of an interactive shell in the instance: ``bash --rcfile <start file> -i`` (not a login shell,
    so ``/etc/profile`` keeps the job's PATH); ``sh -i`` with ``ENV`` naming the start file where there is no
    bash (POSIX sh reads ``$ENV``: see :func:`interactive_shell_env`). Without a start file, ``$SHELL -i``."""
    rc = workspace / SHELL_RC
    if not rc.is_file():
        return [os.environ.get("SHELL") or "/bin/sh", "-i"]
    bash = shutil.which("bash") or ("/bin/bash" if Path("/bin/bash").exists() else "")
    if bash:
        return [bash, "--rcfile", str(rc), "-i"]
    return ["/bin/sh", "-i"]


def interactive_shell_env(workspace: Path) -> dict[str, str]:
    """Variables an interactive shell of :func:`interactive_shell_argv` needs: ``ENV`` (the start file, for a
    POSIX sh) when there is a start file, else nothing."""
    rc = workspace / SHELL_RC
    return {"ENV": str(rc)} if rc.is_file() else {}
