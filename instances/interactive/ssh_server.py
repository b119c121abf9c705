"""The SSH server of one local instance: ``python -m instances.interactive.ssh_server --state DIR --workspace WS``.

Started by the instance's launcher (:mod:`instances.interactive.sidecar`), so it lives in the instance's
process group and session and carries its process marker: a stop (SIGTERM to the group, SIGKILL to what is
left) or the end of the instance's command ends it. No Django here: it runs beside the user's command.

Built on asyncssh (``asyncssh.create_server``). Files in the state dir ``DIR`` (written by the portal,
:mod:`instances.interactive.ssh`, all 0600):

* ``host_key``: the instance's host key (OpenSSH private key format);
* ``authorized_keys``: one public key per line (OpenSSH format, the comment names the portal user), read
  again at every authentication, so a key added or revoked in the console counts from the next login; and
  watched (every :data:`ACCESS_POLL_S` seconds): when it changes, every open connection whose key is no
  longer in it is closed and its sessions' processes hung up (SIGHUP to their process groups, SIGKILL after
  :data:`HANGUP_GRACE_S`), so a removed, demoted or deactivated member's open shells end with their access;
* ``config.json``: ``{"username": "<login name>"}``; any other login name is refused.

It writes ``endpoint.json`` (``{"port", "pid", "workspace", "host", "started_at"}``) once it listens on
``127.0.0.1`` at a free port, touches ``last_activity`` at each login, at each session's start and end,
and every :data:`ACTIVITY_EVERY_S` seconds while a session is open, and keeps ``sessions.json``
(``{"open": N, "pid"}``) at the number of open sessions (idle autostop reads both: an open session is not idle).

A session runs ``exec`` commands through ``/bin/sh -c`` (with the instance's environment: the training Python
first on PATH) and interactive shells as ``bash --rcfile <start file> -i``
(:func:`instances.interactive.shell_env.interactive_shell_argv`: not a login shell, whose ``/etc/profile`` would
reset PATH) under a pseudo-terminal when the client asks for one, in ``WS``, each in a process group of its
own (so a hang-up reaches what it started). Port, socket, agent and X11 forwarding are refused. On SIGTERM /
SIGINT / SIGHUP the server hangs up every session (SIGHUP, then SIGKILL, to the sessions' processes) and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import os
import pty
import signal
import struct
import sys
import termios
import time
from pathlib import Path
from typing import Any

import asyncssh

from instances.interactive.shell_env import interactive_shell_argv, interactive_shell_env

HOST_KEY = "host_key"
AUTHORIZED_KEYS = "authorized_keys"
CONFIG = "config.json"
ENDPOINT = "endpoint.json"
ACTIVITY = "last_activity"
SESSIONS = "sessions.json"
ACTIVITY_EVERY_S = 30.0
HANGUP_GRACE_S = 1.0
ACCESS_POLL_S = 0.5
PTY_DRAIN_S = 1.0


def authorized_public_data(path: Path) -> set[bytes]:
    """The key blobs of the authorized keys file (unparseable lines and a missing file give nothing)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return set()
    found = set()
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        with contextlib.suppress(asyncssh.KeyImportError, ValueError):
            found.add(asyncssh.import_public_key(line).public_data)
    return found


def touch(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.touch()


class InstanceSshServer(asyncssh.SSHServer):
    """One connection: public-key authentication only, against the state dir's ``authorized_keys`` read at
    each attempt; the key that authenticated is registered with :class:`Sessions` for the access watch."""

    def __init__(self, state: Path, username: str, sessions: Sessions | None = None) -> None:
        self.state = state
        self.username = username
        self.sessions = sessions
        self.conn: asyncssh.SSHServerConnection | None = None
        self._key: bytes = b""

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.conn = conn

    def connection_lost(self, exc: Exception | None) -> None:
        if self.sessions is not None and self.conn is not None:
            self.sessions.forget(self.conn)

    def begin_auth(self, username: str) -> bool:
        return True  # authentication is always required

    def password_auth_supported(self) -> bool:
        return False

    def kbdint_auth_supported(self) -> bool:
        return False

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        # No activity is recorded here: this runs before the client proves it holds the key (anyone who knows a
        # member's public key could keep the instance from idling); sessions record it (Sessions.handle).
        ok = username == self.username and key.public_data in authorized_public_data(self.state / AUTHORIZED_KEYS)
        if ok:  # the last key accepted is the one whose signature completes the authentication
            self._key = key.public_data
        return ok

    def auth_completed(self) -> None:
        if self.sessions is not None and self.conn is not None:
            self.sessions.admit(self.conn, self._key)


class Sessions:
    """The sessions' child processes (so a shutdown can hang them up), the key of each open connection (so
    the access watch can close those no longer authorized) and the activity heartbeat."""

    def __init__(self, state: Path, workspace: Path) -> None:
        self.state = state
        self.workspace = workspace
        self.children: set[asyncio.subprocess.Process] = set()
        self.keys: dict[asyncssh.SSHServerConnection, bytes] = {}
        self.by_connection: dict[asyncssh.SSHServerConnection, set[asyncio.subprocess.Process]] = {}
        self.open = 0
        self._count()

    def _count(self) -> None:
        """Write the number of open sessions (atomically, 0600) to ``sessions.json``."""
        with contextlib.suppress(OSError):
            write_private_json(self.state / SESSIONS, {"open": self.open, "pid": os.getpid()})

    def admit(self, conn: asyncssh.SSHServerConnection, key: bytes) -> None:
        self.keys[conn] = key

    def forget(self, conn: asyncssh.SSHServerConnection) -> None:
        self.keys.pop(conn, None)
        self.by_connection.pop(conn, None)

    def _own(self, process: asyncssh.SSHServerProcess[bytes], child: asyncio.subprocess.Process) -> None:
        self.children.add(child)
        conn = process.get_extra_info("connection")
        if conn is not None:
            self.by_connection.setdefault(conn, set()).add(child)

    def _disown(self, process: asyncssh.SSHServerProcess[bytes], child: asyncio.subprocess.Process) -> None:
        self.children.discard(child)
        self.by_connection.get(process.get_extra_info("connection"), set()).discard(child)

    async def watch_access(self) -> None:
        """Close the connections whose key left ``authorized_keys`` (checked when the file changes)."""
        path, seen = self.state / AUTHORIZED_KEYS, None
        while True:
            await asyncio.sleep(ACCESS_POLL_S)
            try:
                st = path.stat()
                stamp: tuple[int, ...] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
            except OSError:
                stamp = None
            if stamp == seen:
                continue
            seen, allowed = stamp, authorized_public_data(path)
            for conn, key in list(self.keys.items()):
                if key not in allowed:
                    await self.close_connection(conn)

    async def close_connection(self, conn: asyncssh.SSHServerConnection) -> None:
        """Hang up a connection's sessions (SIGHUP, then SIGKILL after the grace) and close it."""
        children = list(self.by_connection.get(conn, ()))
        print(
            f"ssh_server: access ended, closing a connection ({len(children)} session(s))", file=sys.stderr, flush=True
        )
        self.keys.pop(conn, None)
        for child in children:
            _signal_group(child, signal.SIGHUP)
        conn.close()
        deadline = time.monotonic() + HANGUP_GRACE_S
        while any(c.returncode is None for c in children) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for child in children:
            if child.returncode is None:
                _signal_group(child, signal.SIGKILL)

    def environment(self, process: asyncssh.SSHServerProcess[bytes]) -> dict[str, str]:
        env = dict(os.environ)
        env.update({k: v for k, v in (process.env or {}).items() if isinstance(k, str) and k in ("LANG", "LC_ALL")})
        env["PWD"] = str(self.workspace)
        if process.term_type:
            env["TERM"] = process.term_type
        return env

    async def heartbeat(self) -> None:
        while True:
            await asyncio.sleep(ACTIVITY_EVERY_S)
            if self.children:
                touch(self.state / ACTIVITY)

    async def handle(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        touch(self.state / ACTIVITY)
        counted = True

        def release(*_: Any) -> None:  # the session is open until its command ends or its client goes away
            nonlocal counted
            if counted:
                counted = False
                self.open -= 1
                self._count()

        self.open += 1
        self._count()
        gone = asyncio.ensure_future(process.channel.wait_closed())
        gone.add_done_callback(release)
        try:
            code = await (self._pty(process) if process.term_type else self._pipes(process))
        except OSError as exc:
            process.stderr.write(f"cannot start the session: {exc}\n".encode())
            code = 1
        finally:
            release()
        touch(self.state / ACTIVITY)
        process.exit(code)

    async def _pipes(self, process: asyncssh.SSHServerProcess[bytes]) -> int:
        argv = ["/bin/sh", "-c", process.command] if process.command else [os.environ.get("SHELL", "/bin/bash")]
        child = await asyncio.create_subprocess_exec(
            *argv,
            cwd=self.workspace,
            env=self.environment(process),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own group: a hang-up reaches what the command started
        )
        self._own(process, child)
        try:
            await process.redirect(stdin=child.stdin)
            assert child.stdout is not None
            assert child.stderr is not None
            # copied by hand (not redirected) so that all output is sent before the exit status
            _, _, code = await asyncio.gather(
                _pump(child.stdout, process.stdout), _pump(child.stderr, process.stderr), child.wait()
            )
            return code
        finally:
            self._disown(process, child)

    async def _pty(self, process: asyncssh.SSHServerProcess[bytes]) -> int:
        master, slave = pty.openpty()
        cols, rows = process.term_size[:2] if process.term_size else (80, 24)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows or 24, cols or 80, 0, 0))
        argv = ["/bin/sh", "-c", process.command] if process.command else interactive_shell_argv(self.workspace)
        env = self.environment(process)
        if not process.command:
            env.update(interactive_shell_env(self.workspace))
        child = await asyncio.create_subprocess_exec(
            *argv,
            cwd=self.workspace,
            env=env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,  # the terminal becomes its controlling terminal
        )
        os.close(slave)
        self._own(process, child)
        pump = asyncio.create_task(_pump_fd(master, process.stdout))
        try:
            await process.redirect(stdin=os.dup(master))
            exited = asyncio.ensure_future(child.wait())
            gone = asyncio.ensure_future(process.channel.wait_closed())
            await asyncio.wait({exited, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not exited.done():  # the client went away: hang up its terminal, as sshd does
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGHUP)
            gone.cancel()
            code = await exited
            with contextlib.suppress(TimeoutError):  # a background job may hold the terminal open
                await asyncio.wait_for(asyncio.shield(pump), PTY_DRAIN_S)
            return code
        finally:
            pump.cancel()
            self._disown(process, child)
            with contextlib.suppress(OSError):
                os.close(master)

    def hang_up(self) -> None:
        for child in list(self.children):
            _signal_group(child, signal.SIGHUP)


async def _pump(reader: asyncio.StreamReader, writer: asyncssh.SSHWriter[bytes]) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()


async def _pump_fd(fd: int, writer: asyncssh.SSHWriter[bytes]) -> None:
    """Copy a pseudo-terminal's output to the channel until the terminal closes (EIO)."""
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[bytes] = asyncio.Queue()

    def readable() -> None:
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        if not data:
            loop.remove_reader(fd)
        chunks.put_nowait(data)

    loop.add_reader(fd, readable)
    try:
        while data := await chunks.get():
            writer.write(data)
            await writer.drain()
    finally:
        loop.remove_reader(fd)


def _signal_group(child: asyncio.subprocess.Process, sig: int) -> None:
    """Signal the child's process group when it leads one (every session's does), else the child."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, sig) if _own_group(child.pid) else child.send_signal(sig)


def _own_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False


def write_private_json(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` atomically with ``data`` as JSON, readable by its owner only."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def write_endpoint(state: Path, data: dict[str, Any]) -> None:
    write_private_json(state / ENDPOINT, data)


async def serve(state: Path, workspace: Path, host: str = "127.0.0.1", port: int = 0) -> None:
    """Listen until SIGTERM / SIGINT / SIGHUP; see the module docstring."""
    config = json.loads((state / CONFIG).read_text())
    username = str(config["username"])
    host_key = asyncssh.read_private_key(state / HOST_KEY)
    sessions = Sessions(state, workspace)
    server = await asyncssh.create_server(
        lambda: InstanceSshServer(state, username, sessions),
        host,
        port,
        server_host_keys=[host_key],
        process_factory=sessions.handle,
        encoding=None,
        line_editor=False,
        allow_scp=False,
        agent_forwarding=False,
        x11_forwarding=False,
    )
    bound = server.sockets[0].getsockname()[1]
    write_endpoint(
        state,
        {"port": bound, "pid": os.getpid(), "workspace": str(workspace), "host": host, "started_at": time.time()},
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    beat = asyncio.create_task(sessions.heartbeat())
    watch = asyncio.create_task(sessions.watch_access())
    await stop.wait()
    beat.cancel()
    watch.cancel()
    server.close()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(server.wait_closed(), HANGUP_GRACE_S)
    sessions.hang_up()
    deadline = time.monotonic() + HANGUP_GRACE_S
    while sessions.children and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    for child in list(sessions.children):
        with contextlib.suppress(ProcessLookupError):
            child.kill()
    with contextlib.suppress(OSError):
        (state / ENDPOINT).unlink()
    with contextlib.suppress(OSError):
        (state / SESSIONS).unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m instances.interactive.ssh_server")
    parser.add_argument("--state", required=True, type=Path)
    parser.add_argument("--workspace", required=True, type=Path)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve(args.state, args.workspace, args.host, args.port))
    except (OSError, KeyError, ValueError, asyncssh.Error) as exc:
        print(f"ssh_server: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
