"""The database sessions of a process: which sessions belong to which OS process
(:func:`session_owners`), and what the sessions of a stopped (frozen) process were doing
once they settled (:func:`classify_frozen`, :class:`FrozenSessions`)."""

from __future__ import annotations

import os
import socket
import struct
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError

# Which database sessions belong to which OS process. application_name is the same for
# every replica of a service, so it cannot tell two summarisers apart; their sockets can.
# The embedded server listens on a Unix socket only: a backend's socket is the peer of one
# of the client's (the kernel's sock_diag netlink interface names each Unix socket's peer).
# Over TCP, a backend's client_port is the local port of one of the client's sockets.
# Linux only; elsewhere (or without the permissions) the mapping raises OSError and the
# callers say the sessions are unknown.

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 0x1
_NLM_F_DUMP = 0x300
_NLMSG_ERROR = 2
_NLMSG_DONE = 3
_UDIAG_SHOW_PEER = 0x4
_UNIX_DIAG_PEER = 2


def _socket_inodes(pid: int) -> set[int]:
    """The inodes of the sockets process ``pid`` has open (its ``/proc/<pid>/fd`` links);
    OSError when the process is gone or not ours to look at."""
    fd_dir = f"/proc/{pid}/fd"
    inodes: set[int] = set()
    for fd in os.listdir(fd_dir):
        try:
            link = os.readlink(f"{fd_dir}/{fd}")
        except OSError:  # closed meanwhile
            continue
        if link.startswith("socket:[") and link.endswith("]"):
            inodes.add(int(link[8:-1]))
    return inodes


def _unix_peers() -> dict[int, int]:
    """Every connected Unix socket's inode -> its peer's inode (NETLINK_SOCK_DIAG dump)."""
    request = struct.pack(
        "=BBHIII2I",
        socket.AF_UNIX,
        0,  # protocol
        0,  # pad
        0xFFFFFFFF,  # every state
        0,  # any inode
        _UDIAG_SHOW_PEER,
        0xFFFFFFFF,  # no cookie
        0xFFFFFFFF,
    )
    header = struct.pack(
        "=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0
    )
    netlink = getattr(socket, "AF_NETLINK", None)
    if netlink is None:
        raise OSError("no netlink sockets here")
    peers: dict[int, int] = {}
    with socket.socket(netlink, socket.SOCK_RAW, _NETLINK_SOCK_DIAG) as sock:
        sock.settimeout(5.0)
        sock.sendto(header + request, (0, 0))
        while True:
            data = sock.recv(1 << 17)
            offset = 0
            while offset + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, offset)
                if kind == _NLMSG_DONE or length < 16:
                    return peers
                if kind == _NLMSG_ERROR:
                    raise OSError("sock_diag refused the dump of Unix sockets")
                body = data[offset + 16 : offset + length]
                (inode,) = struct.unpack_from("=I", body, 4)  # unix_diag_msg: 16 bytes
                attr = 16
                while attr + 4 <= len(body):
                    attr_length, attr_type = struct.unpack_from("=HH", body, attr)
                    if attr_length < 4:
                        break
                    if attr_type == _UNIX_DIAG_PEER:
                        peers[inode] = struct.unpack_from("=I", body, attr + 4)[0]
                    attr += (attr_length + 3) & ~3
                offset += (length + 3) & ~3
            if not data:
                return peers


def _tcp_ports(pid: int, inodes: set[int]) -> set[int]:
    """The local ports of the TCP sockets among ``inodes`` (``/proc/<pid>/net/tcp{,6}``)."""
    ports: set[int] = set()
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and int(fields[9]) in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def session_owners(
    processes: Iterable[int], backends: Iterable[tuple[int, int | None]]
) -> dict[int, int]:
    """Which of ``backends`` ((backend pid, pg_stat_activity.client_port)) belong to which
    of ``processes`` (OS pids): backend pid -> OS pid, for those found. OSError when the
    sockets cannot be looked at."""
    if not os.path.isdir("/proc/self/fd"):
        raise OSError("no /proc to find sockets in")
    owner_of: dict[int, int] = {}  # the clients' socket inodes
    ports: dict[int, int] = {}
    backends = list(backends)
    tcp = any(port is not None and port > 0 for _, port in backends)
    for pid in processes:
        try:
            inodes = _socket_inodes(pid)
        except FileNotFoundError:  # exited meanwhile
            continue
        owner_of.update(dict.fromkeys(inodes, pid))
        if tcp:
            ports.update(dict.fromkeys(_tcp_ports(pid, inodes), pid))
    found: dict[int, int] = {}
    peers: dict[int, int] | None = None
    for backend, port in backends:
        if port is not None and port > 0:
            if port in ports:
                found[backend] = ports[port]
            continue
        if peers is None:
            peers = _unix_peers()
        try:
            theirs = _socket_inodes(backend)
        except FileNotFoundError:  # the session ended meanwhile
            continue
        for inode in theirs:
            owner = owner_of.get(peers.get(inode, -1))
            if owner is not None:
                found[backend] = owner
                break
    return found


@dataclass
class FrozenSessions:
    """What the database sessions of a stopped process were doing once they settled."""

    kind: str  # "idle", "idle in transaction", "mid-statement", "no session" or "unknown"
    backends: list[int] = field(default_factory=list)
    in_flight: bool = False  # a statement was still running at the first look
    settle_seconds: float = 0.0  # from the first look until none was active (or the bound)
    sessions: list[str] = field(default_factory=list)  # one line per session
    locks: list[str] = field(default_factory=list)
    transaction: list[int] = field(default_factory=list)  # sessions in a transaction
    error: str = ""

    def describe(self) -> str:
        if self.error:
            return f"{self.kind} ({self.error})"
        text_ = self.kind
        if self.in_flight:
            text_ += (
                f" (a statement was in flight at SIGSTOP; settled after {self.settle_seconds:.2f}s)"
                if self.kind != "mid-statement"
                else f" (still running after {self.settle_seconds:.1f}s)"
            )
        if self.kind == "no session":
            text_ += " (none open at the SIGSTOP: reconnecting after a database restart?)"
        else:
            text_ += f"; sessions: {'; '.join(self.sessions)}"
        if self.locks:
            text_ += f"; locks: {', '.join(self.locks)}"
        return text_


def session_activity(conn: Connection, pids: list[int]) -> list[Any]:
    """pg_stat_activity of ``pids``: pid, state, wait event, transaction and state ages,
    the statement (comments and runs of blanks squeezed out), and its own line."""
    rows = conn.execute(
        text(
            "SELECT pid, state, wait_event_type, wait_event, "
            "extract(epoch FROM clock_timestamp() - xact_start), "
            "extract(epoch FROM clock_timestamp() - state_change), "
            "left(btrim(regexp_replace(regexp_replace(query, '/\\*.*?\\*/', '', 'g'), "
            "'\\s+', ' ', 'g')), 110), application_name "
            "FROM pg_stat_activity WHERE pid = ANY(:pids) ORDER BY pid"
        ),
        {"pids": pids},
    ).all()
    return list(rows)


def describe_session(row: Any) -> str:
    pid, state, wait_type, wait, xact_age, state_age, query = row[:7]
    line = f"pid {pid} {state or '?'}"
    if state_age is not None:
        line += f" for {float(state_age):.1f}s"
    details = []
    if xact_age is not None:
        details.append(f"transaction open {float(xact_age):.1f}s")
    if wait_type:
        details.append(f"wait {wait_type}/{wait}")
    if details:
        line += f" ({', '.join(details)})"
    if query:
        line += f": {query!r}"
    return line


def session_locks(conn: Connection, pids: list[int]) -> list[str]:
    """The locks ``pids`` hold or wait for, from pg_locks: tables (not their indexes),
    rows waited for, transaction ids and advisory locks; counted when repeated."""
    rows = conn.execute(
        text(
            "SELECT l.granted, l.mode, CASE "
            "WHEN l.locktype = 'relation' THEN coalesce(c.relname, l.relation::text) "
            "WHEN l.locktype = 'tuple' THEN 'row of ' || coalesce(c.relname, l.relation::text) "
            "WHEN l.locktype = 'transactionid' THEN 'xid ' || l.transactionid::text "
            "WHEN l.locktype = 'advisory' THEN 'advisory ' || l.classid || ':' || l.objid "
            "ELSE l.locktype END "
            "FROM pg_locks l LEFT JOIN pg_class c ON c.oid = l.relation "
            "WHERE l.pid = ANY(:pids) AND l.locktype <> 'virtualxid' "
            "AND (NOT l.granted OR l.relation IS NULL OR c.relkind IN ('r', 'p')) "
            "ORDER BY 1 DESC, 3, 2"
        ),
        {"pids": pids},
    ).all()
    counts = Counter(
        f"{'' if granted else 'WAITS FOR '}{what} {mode}" for granted, mode, what in rows
    )
    return [f"{lock} x{n}" if n > 1 else lock for lock, n in counts.items()]


def classify_frozen(engine: Engine, pid: int, settle_timeout: float) -> FrozenSessions:
    """Finds the database sessions of the stopped process ``pid``, waits (polling, at most
    ``settle_timeout``) until none of them is still running a statement it sent before
    the SIGSTOP, then classifies the freeze by its worst session: ``mid-statement`` (one
    still active), ``idle in transaction`` (one holds a transaction open: its locks are
    listed), ``idle``, or ``no session``."""
    try:
        with engine.connect() as conn:
            candidates = conn.execute(
                text(
                    "SELECT pid, client_port FROM pg_stat_activity "
                    "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
                )
            ).all()
        owners = session_owners([pid], [(int(r[0]), r[1]) for r in candidates])
    except (OSError, DBAPIError) as err:
        return FrozenSessions("unknown", error=f"sessions not found: {err}")
    backends = sorted(b for b, owner in owners.items() if owner == pid)
    if not backends:
        return FrozenSessions("no session")
    first_look = time.monotonic()
    in_flight: bool | None = None
    try:
        with engine.connect() as conn:
            while True:
                rows = session_activity(conn, backends)
                active = [r for r in rows if r[1] == "active"]
                if in_flight is None:
                    in_flight = bool(active)
                if not active or time.monotonic() - first_look > settle_timeout:
                    break
                # Statistics are a snapshot per transaction: a new one for the next look.
                conn.rollback()
                time.sleep(0.02)  # polling, bounded by settle_timeout
            settled = time.monotonic() - first_look
            in_transaction = [
                int(r[0]) for r in rows if r[1] == "active" or str(r[1]).startswith("idle in")
            ]
            locks = session_locks(conn, backends)
            conn.rollback()
    except DBAPIError as err:
        return FrozenSessions("unknown", backends=backends, error=f"{type(err).__name__}: {err}")
    if active:
        kind = "mid-statement"
    elif any(str(r[1]).startswith("idle in transaction") for r in rows):
        kind = "idle in transaction"
    else:
        kind = "idle"
    return FrozenSessions(
        kind,
        backends=backends,
        in_flight=bool(in_flight),
        settle_seconds=settled,
        sessions=[describe_session(r) for r in rows],
        locks=locks,
        transaction=in_transaction,
    )
