"""Where the CLI finds the portal URL and API token.

Sources, first match wins per value: the environment (``GPU_PORTAL_URL``, ``GPU_PORTAL_TOKEN``), then the
file written by ``gpu-portal login``: ``$XDG_CONFIG_HOME/gpu-portal/config.json`` (``~/.config`` when
``XDG_CONFIG_HOME`` is unset), a JSON object ``{"url": str, "token": str}`` readable by its owner only (0600,
in a 0700 folder), because the token is a credential.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

URL_ENV = "GPU_PORTAL_URL"
TOKEN_ENV = "GPU_PORTAL_TOKEN"  # noqa: S105 - the variable's name, not a secret


class NotLoggedIn(Exception):
    """No URL or token in the environment or the config file."""


@dataclass(frozen=True)
class Credentials:
    url: str
    token: str


def config_path() -> Path:
    """``$XDG_CONFIG_HOME/gpu-portal/config.json`` (XDG Base Directory spec: default ``~/.config``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gpu-portal" / "config.json"


def read_file() -> dict[str, str]:
    """The saved ``{"url", "token"}``, or ``{}`` when there is no (readable, well-formed) file."""
    try:
        data = json.loads(config_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return (
        {k: v for k, v in data.items() if k in ("url", "token") and isinstance(v, str)}
        if isinstance(data, dict)
        else {}
    )


def save(credentials: Credentials) -> Path:
    """Write the config file with mode 0600 (created that way, never world-readable even for a moment)."""
    path = config_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"url": credentials.url, "token": credentials.token}, fh)
        fh.write("\n")
    os.chmod(tmp, 0o600)  # an existing file kept its old mode through O_CREAT
    os.replace(tmp, path)
    return path


def forget() -> bool:
    """Delete the config file; whether there was one."""
    try:
        config_path().unlink()
    except FileNotFoundError:
        return False
    return True


def normalize_url(url: str) -> str:
    """``https://host/`` → ``https://host`` (the client joins ``/api/v1/...`` paths to it)."""
    return url.strip().rstrip("/")


def load(*, url: str | None = None, token: str | None = None) -> Credentials:
    """The credentials to use: explicit arguments, then the environment, then the config file.

    Raises ``NotLoggedIn`` when the URL or the token is missing everywhere.
    """
    saved = read_file()
    url = url or os.environ.get(URL_ENV) or saved.get("url")
    token = token or os.environ.get(TOKEN_ENV) or saved.get("token")
    if not url or not token:
        raise NotLoggedIn(f"not logged in: run `gpu-portal login` (or set {URL_ENV} and {TOKEN_ENV})")
    return Credentials(url=normalize_url(url), token=token.strip())
