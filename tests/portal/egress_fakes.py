"""Stand-ins for what an outgoing call meets outside the portal, shared by the webhook and app-endpoint tests
(imported with ``sys.path``, like the other shared test helpers):

- ``Resolver``: DNS at its boundary (``socket.getaddrinfo``): each name answers a list of addresses per lookup
  (the last list again for every later lookup) — a rebinding name answers public first, then loopback;
- ``Jail``: the network boundary (``socket.socket.connect``): every connection attempt is recorded and any
  that is not to loopback fails at once with ENETUNREACH, so a test never sends a packet off this machine;
- real servers on loopback, every one on port 0 and stopped by its test: ``Listener`` (counts the
  connections it accepts, says nothing), ``Trickler`` (reads a request, then answers one byte per
  ``interval_s``, for at most ``max_s``; records how many connections were open at once) and ``tls_server``
  (pytest-httpserver with a certificate from a throwaway CA, trustme).
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PUBLIC = "93.184.215.14"  # a globally routable address (example.com's); the Jail keeps tests off it


class Resolver:
    """``socket.getaddrinfo`` for the names in ``answers`` (``{"name": [[first lookup's addresses], [second
    …], …]}``; an empty list is NXDOMAIN); a literal address resolves to itself, any other name fails.
    ``lookups[name]`` counts the lookups of each name."""

    def __init__(self, answers: dict[str, list[list[str]]]) -> None:
        self.answers = answers
        self.lookups: dict[str, int] = {}

    def __call__(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        name = host.decode() if isinstance(host, bytes) else str(host)
        try:
            addresses = [str(ipaddress.ip_address(name))]
        except ValueError:
            if name not in self.answers:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None
            n = self.lookups.get(name, 0)
            self.lookups[name] = n + 1
            rounds = self.answers[name]
            addresses = rounds[min(n, len(rounds) - 1)]
            if not addresses:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None
        port = int(port or 0)
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (a, port, 0, 0))
            if ":" in a
            else (socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in addresses
        ]


class Jail:
    """Patches ``socket.socket.connect``/``connect_ex``: ``attempts`` lists every (address, port) asked for;
    only loopback is connected, anything else fails with ENETUNREACH."""

    def __init__(self, monkeypatch: Any) -> None:
        self.attempts: list[tuple[str, int]] = []
        real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

        def allowed(address: Any) -> bool:
            if not isinstance(address, tuple):
                return True  # a Unix socket
            self.attempts.append((str(address[0]), int(address[1])))
            return ipaddress.ip_address(str(address[0]).split("%")[0]).is_loopback

        def connect(sock: socket.socket, address: Any) -> None:
            if not allowed(address):
                raise OSError(errno.ENETUNREACH, "Network is unreachable (test jail)")
            real_connect(sock, address)

        def connect_ex(sock: socket.socket, address: Any) -> int:
            return real_connect_ex(sock, address) if allowed(address) else errno.ENETUNREACH

        monkeypatch.setattr(socket.socket, "connect", connect)
        monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)

    def off_loopback(self) -> list[tuple[str, int]]:
        return [a for a in self.attempts if not ipaddress.ip_address(a[0].split("%")[0]).is_loopback]


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class Listener:
    """A TCP server on ``host`` that accepts and counts connections (and closes them): ``connections``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.sock = socket.socket()
        self.sock.bind((host, port))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = int(self.sock.getsockname()[1])
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


class Trickler:
    """An HTTP server on 127.0.0.1 that reads one request per connection, sends ``head`` at once, then
    ``trickle`` one byte per ``interval_s``; it gives up after ``max_s`` and stops when the client has gone.
    ``connections`` (accepted), ``max_open`` (most connections open at once), ``durations`` (seconds each
    connection stayed open, from accept to the client's close or the end)."""

    def __init__(self, *, head: bytes = b"", trickle: bytes, interval_s: float = 1.0, max_s: float = 8.0) -> None:
        self.head, self.trickle, self.interval_s, self.max_s = head, trickle, interval_s, max_s
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = int(self.sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.connections = 0
        self.max_open = 0
        self.durations: list[float] = []
        self.accepted = threading.Event()
        self._open = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._open += 1
                self.max_open = max(self.max_open, self._open)
            self.accepted.set()
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        started = time.monotonic()
        try:
            conn.settimeout(self.max_s)
            data = b""
            while b"\r\n\r\n" not in data:  # the request's head; its body is small and comes with it
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            conn.sendall(self.head)
            conn.setblocking(False)
            for byte in self.trickle:
                if self._stop.wait(self.interval_s) or time.monotonic() - started > self.max_s:
                    break
                try:
                    if conn.recv(1) == b"":
                        break  # the client closed its side
                except BlockingIOError:
                    pass
                conn.sendall(bytes([byte]))
        except OSError:
            pass  # the client went away
        finally:
            with self._lock:
                self._open -= 1
                self.durations.append(time.monotonic() - started)
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for t in self._threads:
            t.join(self.max_s + 2)
        self.sock.close()


@contextmanager
def tls_server(tmp_path: Path, *, host: str, names: list[str]) -> Iterator[tuple[Any, Path, list[str]]]:
    """A pytest-httpserver on ``host`` (port 0) speaking TLS with a certificate for ``names`` from a new CA.
    Yields ``(server, CA bundle path, server names the clients sent in SNI)``."""
    import trustme
    from pytest_httpserver import HTTPServer

    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names).configure_cert(context)
    sni: list[str] = []
    context.sni_callback = lambda _sock, name, _ctx: sni.append(str(name)) or None  # type: ignore[func-returns-value]
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    server = HTTPServer(host=host, port=0, ssl_context=context)
    server.start()
    try:
        yield server, bundle, sni
    finally:
        server.clear()
        if server.is_running():
            server.stop()


# --- what the guard refuses, with the exact message people see at registration ------------------------------------
def _address(a: str) -> str:
    return f"The endpoint address {a} is not a public address."


def _name(h: str) -> str:
    return f"The endpoint host {h} does not resolve to a public address."


def _legacy(h: str) -> str:
    return f"The endpoint host {h} is a number in a non-standard form; write an IPv4 address as a.b.c.d."


# Names of the bad URLs below as the Resolver answers them (one lookup each at registration and per call).
BAD_NAMES: dict[str, list[list[str]]] = {
    "localhost": [["::1", "127.0.0.1"]],
    "metadata.example": [["169.254.169.254"]],
    "metadata6.example": [["fd00:ec2::254"]],
    "internal.example": [["10.0.0.5"]],
    "mixed.example": [[PUBLIC, "10.0.0.5"]],  # one bad answer among good ones refuses the name
    "mixed6.example": [[PUBLIC, "::1"]],  # a loopback AAAA beside a public A
    "cgnat.example": [["100.64.0.1"]],
    "multicast.example": [["224.0.0.1"]],
    "mapped.example": [["::ffff:127.0.0.1"]],
    "nat64.example": [["64:ff9b::a9fe:a9fe"]],  # NAT64 of 169.254.169.254
    "nowhere.example": [[]],  # NXDOMAIN: the same answer as a private one (it tells nothing about the network)
}

BAD_URLS: list[tuple[str, str]] = [
    ("https://127.0.0.1/hook", _address("127.0.0.1")),  # loopback
    ("https://127.8.9.10:8443/hook", _address("127.8.9.10")),  # all of 127/8
    ("https://10.1.2.3/hook", _address("10.1.2.3")),  # private
    ("https://172.16.0.1/hook", _address("172.16.0.1")),
    ("https://192.168.1.20:8443/hook", _address("192.168.1.20")),
    ("https://169.254.169.254/latest/meta-data/", _address("169.254.169.254")),  # cloud metadata (link-local)
    ("https://224.0.0.1/", _address("224.0.0.1")),  # multicast (is_global says True)
    ("https://239.255.255.250:1900/", _address("239.255.255.250")),
    ("https://100.64.0.1/", _address("100.64.0.1")),  # carrier-grade NAT
    ("https://0.0.0.0/", _address("0.0.0.0")),  # noqa: S104  (a URL refused, not a bind) unspecified: this machine
    ("https://240.0.0.1/", _address("240.0.0.1")),  # reserved
    ("https://255.255.255.255/", _address("255.255.255.255")),
    ("https://198.18.0.1/", _address("198.18.0.1")),  # benchmarking
    ("https://[::1]/hook", _address("::1")),
    ("https://[::]/hook", _address("::")),
    ("https://[fe80::1]/hook", _address("fe80::1")),
    ("https://[fd00:ec2::254]/latest/meta-data/", _address("fd00:ec2::254")),  # AWS metadata over IPv6
    ("https://[fc00::1]/hook", _address("fc00::1")),
    ("https://[ff02::1]/hook", _address("ff02::1")),
    ("https://[ff0e::1]/hook", _address("ff0e::1")),  # global-scope multicast (is_global says True)
    ("https://[fec0::1]/hook", _address("fec0::1")),  # site-local (is_global says True)
    ("https://[::ffff:127.0.0.1]/hook", _address("::ffff:7f00:1")),  # IPv4-mapped
    ("https://[::ffff:169.254.169.254]/hook", _address("::ffff:a9fe:a9fe")),
    ("https://[::127.0.0.1]/hook", _address("::7f00:1")),  # IPv4-compatible (deprecated)
    ("https://[64:ff9b::127.0.0.1]/hook", _address("64:ff9b::7f00:1")),  # NAT64 (is_global says True)
    ("https://[2002:7f00:1::]/hook", _address("2002:7f00:1::")),  # 6to4 of 127.0.0.1 (is_global says True)
    ("https://[2001:db8::1]/hook", _address("2001:db8::1")),  # documentation
    ("https://2130706433/hook", _legacy("2130706433")),  # decimal
    ("https://0177.0.0.1/hook", _legacy("0177.0.0.1")),  # octal
    ("https://0x7f.0.0.1/hook", _legacy("0x7f.0.0.1")),  # hex
    ("https://0x7f000001/hook", _legacy("0x7f000001")),
    ("https://127.1/hook", _legacy("127.1")),  # short
    ("https://10.1/hook", _legacy("10.1")),
    ("https://localhost/hook", _name("localhost")),
    ("https://metadata.example/latest/meta-data/", _name("metadata.example")),
    ("https://metadata6.example/latest/meta-data/", _name("metadata6.example")),
    ("https://internal.example/hook", _name("internal.example")),
    ("https://mixed.example/hook", _name("mixed.example")),
    ("https://mixed6.example/hook", _name("mixed6.example")),
    ("https://cgnat.example/hook", _name("cgnat.example")),
    ("https://multicast.example/hook", _name("multicast.example")),
    ("https://mapped.example/hook", _name("mapped.example")),
    ("https://nat64.example/hook", _name("nat64.example")),
    ("https://nowhere.example/hook", _name("nowhere.example")),
]
