"""Starting an instance's Jupyter server (no Django): the argv, and the local launcher's hook.

Local backend: :func:`jupyter_start` is called by ``instances.backends.local_launcher`` (the instance's
process-group leader) before it starts the instance's command, when the job's environment asks for Jupyter
(``GPU_PORTAL_JUPYTER=1``, set by the portal for interactive instances). The server is a child of the launcher:
same session and process group, and it inherits the job's marker variable, so ``stop`` (SIGTERM to the group,
then SIGKILL to every marked process, kernels and terminals included) ends it, the launcher's leftover sweep
ends it when the command exits, and metering covers it as part of the instance. It listens on loopback, on a
port the kernel picks (``port=0``); the port is read back from the server's info file
``WS/.jupyter/runtime/jpserver-<pid>.json`` (:data:`INFO_GLOB`). The per-instance secret reaches the server
in its environment only (never argv) and is removed from the launcher's environment before the user's command starts.
Its terminals are interactive, not login, shells with the instance's start file (``shell_command`` =
:func:`instances.interactive.shell_env.interactive_shell_argv`: a login shell's ``/etc/profile`` would reset PATH)
and its default kernel (``python3``) is pinned to the Python the server runs with, the training Python, so both
have the training environment first on PATH (:mod:`instances.interactive.shell_env`).

Kubernetes: the same argv (ip ``0.0.0.0``, a fixed port) runs as the pod's Jupyter sidecar
(:mod:`instances.interactive.jupyter_k8s`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from instances.interactive.shell_env import interactive_shell_argv, interactive_shell_env, shell_rc_write
from instances.interactive.tickets import ACCESS_URL_ENV, INSTANCE_ENV, RECHECK_S_ENV, SECRET_ENV

ENABLE_ENV = "GPU_PORTAL_JUPYTER"
BASE_URL_ENV = "GPU_PORTAL_JUPYTER_BASE_URL"
STATE_DIR = ".jupyter"  # under the workspace: runtime files (the server's info file), config, IPython profile
INFO_GLOB = "runtime/jpserver-*.json"  # under STATE_DIR: written by the server once it listens (port, base_url)
# JupyterLab's "get notified about Jupyter news?" prompt would fetch from the internet: off.
PAGE_CONFIG = {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}
IDENTITY_PROVIDER = "instances.interactive.jupyter_auth.PortalIdentityProvider"
DEFAULT_KERNEL = "python3"  # the name of ipykernel's own spec, which JupyterLab opens notebooks with


def jupyter_argv(*, python: str, ip: str, port: int, base_url: str, root_dir: str) -> list[str]:
    """``python -m jupyterlab`` with the portal's identity provider, no browser, no update checks."""
    return [
        python, "-m", "jupyterlab", "--no-browser",
        f"--ServerApp.ip={ip}", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--ServerApp.base_url={base_url}", f"--ServerApp.root_dir={root_dir}",
        "--allow-root",  # containers commonly run as root; the server still refuses everyone without a ticket
        f"--ServerApp.identity_provider_class={IDENTITY_PROVIDER}",
        "--ServerApp.allow_remote_access=True",  # reached through a Service / Ingress in a pod
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.news_url=",
    ]  # fmt: skip


def jupyter_environment(base: dict[str, str], state_dir: str) -> dict[str, str]:
    """``base`` plus Jupyter's and IPython's folders under ``state_dir`` (a POSIX path; nothing is written to
    ``$HOME``)."""
    return {
        **base,
        "JUPYTER_CONFIG_DIR": f"{state_dir}/config",
        "JUPYTER_DATA_DIR": f"{state_dir}/data",
        "JUPYTER_RUNTIME_DIR": f"{state_dir}/runtime",
        "IPYTHONDIR": f"{state_dir}/ipython",
        "JUPYTER_PLATFORM_DIRS": "1",
    }


def kernel_spec(python: str) -> dict[str, object]:
    """The default kernel's spec (``kernel.json``, Jupyter's kernel spec format): ipykernel on ``python``, an
    absolute path, so a notebook runs the training Python whatever else is installed."""
    return {
        "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
        "metadata": {"debugger": True},
    }


def jupyter_start(workspace: Path, *, python: str = sys.executable) -> subprocess.Popen[bytes] | None:
    """Start the instance's Jupyter server if the environment asks for it; see the module docstring.

    Returns the server's ``Popen`` (a child of the caller, in its process group), or ``None`` when Jupyter is
    not wanted. Always removes the secret from ``os.environ`` first, so the caller's later children (the
    user's command) never inherit it. A server that cannot start is reported on stderr (the instance's log)
    and the instance runs on without it.
    """
    secret = os.environ.pop(SECRET_ENV, "")
    instance_id = os.environ.pop(INSTANCE_ENV, "")
    access = {k: os.environ.pop(k, "") for k in (ACCESS_URL_ENV, RECHECK_S_ENV)}  # the server's re-check
    wanted = os.environ.pop(ENABLE_ENV, "") == "1"
    base_url = os.environ.pop(BASE_URL_ENV, "/")
    if not (wanted and secret and instance_id):
        return None
    state_dir = workspace / STATE_DIR
    state_dir.mkdir(mode=0o700, exist_ok=True)
    for stale in state_dir.glob(INFO_GLOB):  # a fresh server writes its own once it listens
        stale.unlink(missing_ok=True)
    env = jupyter_environment(dict(os.environ), str(state_dir))
    labconfig = state_dir / "config" / "labconfig"
    labconfig.mkdir(parents=True, exist_ok=True)
    (labconfig / "page_config.json").write_text(json.dumps(PAGE_CONFIG))
    try:
        shell_rc_write(workspace)
    except OSError as exc:  # terminals then start the user's own shell
        print(f"local_launcher: cannot write the shells' start file: {exc}", file=sys.stderr, flush=True)
    server_config = {"ServerApp": {"terminado_settings": {"shell_command": interactive_shell_argv(workspace)}}}
    (state_dir / "config" / "jupyter_server_config.json").write_text(json.dumps(server_config))
    # JUPYTER_PATH comes first in Jupyter's data path (a virtual environment's own share/jupyter, whose spec
    # says "python", would otherwise win over JUPYTER_DATA_DIR: jupyter_core prefers the environment there).
    kernel = state_dir / "path" / "kernels" / DEFAULT_KERNEL
    kernel.mkdir(parents=True, exist_ok=True)
    (kernel / "kernel.json").write_text(json.dumps(kernel_spec(python)))
    env["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(state_dir / "path"), env.get("JUPYTER_PATH", "")]))
    env.update(interactive_shell_env(workspace))
    env.update({SECRET_ENV: secret, INSTANCE_ENV: instance_id, **access})
    argv = jupyter_argv(python=python, ip="127.0.0.1", port=0, base_url=base_url, root_dir=str(workspace))
    try:
        return subprocess.Popen(argv, cwd=workspace, env=env, stdin=subprocess.DEVNULL)
    except OSError as exc:
        print(f"local_launcher: cannot start Jupyter: {exc}", file=sys.stderr, flush=True)
        return None
