"""A small threaded TCP proxy for fault injection: it listens on ``127.0.0.1:<free port>``
and forwards every connection to one of its targets, until told to :meth:`TcpProxy.cut`
the link (existing connections are dropped, new ones refused or blackholed) and to
:meth:`TcpProxy.heal` it again.

It sits between two services to simulate a network partition, e.g. between Ingest and
the Scheduler (Ingest's ``EPISODIC_SCHEDULER_ADDRESS`` points at :attr:`TcpProxy.address`)::

    with TcpProxy([scheduler.address]) as proxy:
        ingest = start_service("ingest", url, {"EPISODIC_SCHEDULER_ADDRESS": proxy.address})
        proxy.cut()        # Ingest's notices now fail (or hang until their deadline)
        proxy.heal()

With several targets (replicas) each new connection goes to the next target in turn, and a
target that refuses the connection is skipped, like a client-side round robin over a
Kubernetes Service: a killed replica costs the connections it held, nothing more.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import struct
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

log = logging.getLogger(__name__)

CutMode = Literal["refuse", "blackhole"]

_BUFFER = 64 * 1024


@dataclass
class ProxyStats:
    """What the proxy did so far (read with :meth:`TcpProxy.stats`)."""

    accepted: int = 0  # connections accepted from clients
    forwarded: int = 0  # connections that reached a target
    refused: int = 0  # connections reset at once (cut, mode "refuse")
    blackholed: int = 0  # connections held silent (cut, mode "blackhole")
    dropped: int = 0  # live connections closed by cut()
    no_target: int = 0  # connections no target accepted
    bytes_up: int = 0  # client → target
    bytes_down: int = 0  # target → client
    cuts: int = 0


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def _reset(sock: socket.socket) -> None:
    """Closes with an RST (SO_LINGER 0), so the peer fails at once instead of seeing a
    polite end of stream. ``shutdown(SHUT_RD)`` first wakes a pump thread blocked in
    ``recv`` on it (closing alone would not, and its descriptor could be reused) without
    sending a FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RD)
    with contextlib.suppress(OSError):
        sock.close()


class _Link:
    """One client connection and its upstream connection, pumped by two threads."""

    def __init__(self, proxy: TcpProxy, client: socket.socket, upstream: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self._closed = threading.Event()

    def start(self) -> None:
        for src, dst, up in (
            (self.client, self.upstream, True),
            (self.upstream, self.client, False),
        ):
            threading.Thread(
                target=self._pump, args=(src, dst, up), name="proxy-pump", daemon=True
            ).start()

    def _pump(self, src: socket.socket, dst: socket.socket, up: bool) -> None:
        try:
            while not self._closed.is_set():
                data = src.recv(_BUFFER)
                if not data:
                    break
                dst.sendall(data)
                self.proxy._count_bytes(len(data), up)
        except OSError:
            pass
        finally:
            self.close(reset=False)

    def close(self, *, reset: bool) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        for sock in (self.client, self.upstream):
            if reset:
                _reset(sock)
            else:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()
        self.proxy._forget(self)


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``targets`` (``host:port`` strings) until cut.

    Thread-safe; use as a context manager or call :meth:`start` and :meth:`close`.

    Cut modes:

    - ``"blackhole"`` (default): new connections are accepted and then never answered —
      what a client sees behind a dead route or a dropping firewall: its calls hang until
      their deadlines. They are reset when the link heals, so clients reconnect.
    - ``"refuse"``: new connections are reset at once (a refusing firewall, a dead pod's
      IP): calls fail fast with UNAVAILABLE.

    Either way the connections alive at the cut are reset.
    """

    def __init__(self, targets: Iterable[str] = (), *, host: str = "127.0.0.1") -> None:
        self._host = host
        self._targets: list[str] = list(targets)
        self._next = itertools.count()
        self._lock = threading.Lock()
        self._links: set[_Link] = set()
        self._held: list[socket.socket] = []
        self._mode: CutMode | None = None
        self._stats = ProxyStats()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self.port = 0

    # -- lifecycle

    def start(self) -> TcpProxy:
        """Binds a free port on ``host`` and starts accepting; returns self."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self._host, 0))
        listener.listen(128)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept_loop, name="proxy-accept", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stops listening and closes every connection."""
        self._stopped.set()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
            with contextlib.suppress(OSError):
                self._listener.close()
        self._drop_all()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def address(self) -> str:
        """``host:port`` clients connect to."""
        return f"{self._host}:{self.port}"

    # -- control

    @property
    def targets(self) -> list[str]:
        with self._lock:
            return list(self._targets)

    def set_targets(self, targets: Iterable[str]) -> None:
        """Replaces the targets for new connections (existing ones are left alone)."""
        with self._lock:
            self._targets = list(targets)

    @property
    def is_cut(self) -> bool:
        with self._lock:
            return self._mode is not None

    def cut(self, mode: CutMode = "blackhole") -> None:
        """Partitions the link: resets every live connection, then refuses or blackholes
        new ones (see the class docstring) until :meth:`heal`."""
        if mode not in ("refuse", "blackhole"):
            raise ValueError(f"unknown cut mode {mode!r}")
        with self._lock:
            self._mode = mode
            self._stats.cuts += 1
        self._drop_all(count=True)

    def heal(self) -> None:
        """Restores forwarding; connections held by a blackhole are reset so their clients
        reconnect (through the healed link)."""
        with self._lock:
            self._mode = None
            held, self._held = self._held, []
        for sock in held:
            _reset(sock)

    def stats(self) -> ProxyStats:
        """A snapshot of the counters."""
        with self._lock:
            return ProxyStats(**vars(self._stats))

    # -- internals

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                if self._stopped.is_set():
                    return
                continue
            with self._lock:
                self._stats.accepted += 1
                mode = self._mode
                if mode == "blackhole":
                    self._stats.blackholed += 1
                    self._held.append(client)
                    continue
                if mode == "refuse":
                    self._stats.refused += 1
            if mode == "refuse":
                _reset(client)
                continue
            # Connecting may take a moment: not on the accept thread.
            threading.Thread(
                target=self._connect, args=(client,), name="proxy-connect", daemon=True
            ).start()

    def _connect(self, client: socket.socket) -> None:
        with self._lock:
            targets = list(self._targets)
            start = next(self._next)
        for i in range(len(targets)):
            target = targets[(start + i) % len(targets)]
            try:
                upstream = socket.create_connection(_split(target), timeout=2.0)
            except OSError:
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(self, client, upstream)
            with self._lock:
                if self._mode is not None or self._stopped.is_set():
                    # Cut while we were connecting: this connection is part of the cut.
                    self._stats.dropped += 1
                    cut = True
                else:
                    self._stats.forwarded += 1
                    self._links.add(link)
                    cut = False
            if cut:
                _reset(upstream)
                _reset(client)
                return
            link.start()
            return
        with self._lock:
            self._stats.no_target += 1
        _reset(client)

    def _drop_all(self, *, count: bool = False) -> None:
        with self._lock:
            links, self._links = list(self._links), set()
            held: list[socket.socket] = []
            if self._stopped.is_set():
                held, self._held = self._held, []
            if count:
                self._stats.dropped += len(links)
        for link in links:
            link.close(reset=True)
        for sock in held:
            _reset(sock)

    def _forget(self, link: _Link) -> None:
        with self._lock:
            self._links.discard(link)

    def _count_bytes(self, n: int, up: bool) -> None:
        with self._lock:
            if up:
                self._stats.bytes_up += n
            else:
                self._stats.bytes_down += n
