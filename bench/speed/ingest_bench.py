"""Ingest benchmark: AddMessages throughput for batches of 1 and 100 messages, against the
same rows inserted by raw SQL in the same run.

Starts its own embedded PostgreSQL (episodic/testing/database.py), migrates it, and runs the
Ingest service as a real process (``python -m episodic.services.ingest``, production pool and
handler-thread defaults). For every case (batch size x client threads) and every method it
measures messages/s for ``--seconds``, ``--repeats`` times, interleaving the methods (their
order rotates each round, so load from other processes falls on all of them alike), and
prints medians:

- gRPC: ``IngestService.AddMessages`` through the service, one channel per client thread;
- SQL: the statement ``services/ingest/writes.py`` runs for a thread it knows (every call
  after a thread's first), sent by psycopg from this process: one ``WITH bumped AS (UPDATE
  threads …) INSERT … SELECT FROM unnest(…) RETURNING …`` with the route check (one
  message: the same with scalar parameters instead of arrays), in autocommit (as Ingest
  sends it);
- plain: the floor of what the table takes — one plain ``INSERT INTO messages … SELECT FROM
  unnest(…)`` of the same rows with client-chosen sequences (a single-row ``INSERT …
  VALUES`` for batch 1), then commit: no thread lock, no counter, no sealing. psycopg
  sends it as BEGIN, INSERT, COMMIT: three round trips (the issue's floor);
- plain-ac: the same INSERT in autocommit, one round trip: the floor Ingest's own
  autocommitted statement is fairly compared with;
- plain-bin: the issue's floor (BEGIN, INSERT, COMMIT) with the bytea values and arrays
  bound in binary, as Ingest binds its own since the sixth pass: psycopg's text form
  hex-escapes and quotes them in Python, client CPU the plain floor pays and Ingest does not;
- echo: the bare gRPC hop — a Python gRPC server (the same sync server with a thread pool,
  no interceptors) whose AddMessages parses the request and answers a canned response,
  no database: what one call costs before the Ingest does anything. Its ratio over the
  floor, plus the statement's, is as close as a Python gRPC service can get;
- echo-aio: the same canned answer from a ``grpc.aio`` server (``bench/harness/grpc_echo.py``): is
  Python's asyncio gRPC server a cheaper hop than the sync one on this machine?
- echo-sql: the sync echo whose handler first sends the statement ``sql`` sends (the
  routed statement, sealed as Ingest seals, on a per-thread psycopg connection in
  autocommit), then answers the canned response: the bare hop *with* the database work in
  its handler, no service code — the best a Python gRPC service running this statement can
  reach. It is dearer than echo + sql measured apart: a sync-server handler that blocks
  mid-call costs more thread hand-offs than one that answers at once;
- grpc-keyed, sql-keyed: the same with an idempotency key on every message, made as the
  Python SDK makes them (``auto:<uuid4>``, a new one per message and call: the SDK's default
  ``auto_idempotency_keys``): what SDK users get. The keys are made before the timed calls
  (the client's ``uuid4`` is not the service's cost). sql-keyed is the routed statement with
  its check that no key is stored yet;
- before (with ``--before DIR``): AddMessages through the Ingest of another checkout (its
  ``.venv``, e.g. a ``git worktree`` of main) on the same database, in the same rounds;
  before-keyed: the same with the SDK's keys;
- with ``--echo-variants``: the sync echo with the server settings one at a time — a pool of
  4 handler threads (echo-w4), ``GRPC_POLL_STRATEGY=poll`` (echo-poll), ``grpc.so_reuseport``
  off (echo-noreuse), ``grpc.max_concurrent_streams`` 16 (echo-streams).

The summary prints the issue's ratios: time per message of gRPC (and of before) over the
plain INSERT, at batch 1 and batch 100 (one client) — and the same over plain-ac, so that a
gain from sending fewer round trips than the floor is not mistaken for a faster service.

Each client thread writes to its own thread_id, except the hot-row case, where 8 clients
append to the SAME thread (the row lock serialises them). Messages are ~200 characters with
small JSON metadata. Latency is per call (one call = one batch), p50/p99 medians over rounds.

The Scheduler: by default its address points nowhere. Ingest's activity notices are sent
from a background thread, coalesced per thread, and never wait on the write path, so the
ratio measures the service itself (gRPC + Python + SQLAlchemy) against its SQL; the failed
notices cost the ingest process a fast UNAVAILABLE each (logs are quieted). ``--scheduler``
runs a real Scheduler instead, as deployed: every notice then becomes a timer upsert in the
same database (an extra commit per coalesced notice), which the raw SQL does not pay.

The tables are analysed after the warm-up (``ANALYZE``, as autovacuum keeps a running
deployment's statistics; ``--no-analyze`` measures without, as runs before 2026-12-01 did).

Not part of pytest:

    .venv/bin/python -m bench.speed.ingest_bench [--seconds 3] [--repeats 3] [--scheduler]
        [--encryption on|off] [--before DIR] [--quick] [--echo-variants] [--no-analyze]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import grpc
import psycopg
from google.protobuf import struct_pb2

from bench.harness.grpc_echo import echo_process
from episodic.crypto import ClearKey, DatasetKey, LocalKeyring, plain, seal_json
from episodic.store.db import make_engine
from episodic.store.vault import Vault
from episodic.testing.database import test_server
from episodic.testing.keys import keyring_file, test_vault
from episodic.testing.processes import ServiceProcess, start_service
from episodic.v1 import episode_pb2
from episodic.v1 import ingest_service_pb2 as pb
from episodic.v1 import ingest_service_pb2_grpc as pb_grpc

# ~200 characters, like a chat turn.
CONTENT = (
    "I checked the numbers again this morning: the quarterly budget for the Lisbon offsite is "
    "$12,400, flights are booked for the 14th, and I still need to confirm the venue by Friday."
)
METADATA = {"source": "bench", "channel": "web", "lang": "en"}
METADATA_JSON = json.dumps(METADATA, separators=(",", ":"))
# The floor: the same rows as the table stores them in the clear.
PLAIN_CONTENT = plain(CONTENT)
PLAIN_METADATA = plain(METADATA_JSON)
ROLES = ("user", "assistant")
METHODS = (
    "grpc",
    "grpc-keyed",
    "sql",
    "sql-keyed",
    "plain",
    "plain-ac",
    "plain-bin",
    "echo",
    "echo-aio",
    "echo-sql",
)
FLOORS = ("plain", "plain-ac", "plain-bin")
# The sync echo with one server setting changed (--echo-variants): (workers, options, env).
ECHO_VARIANTS: dict[str, tuple[int, dict[str, int | str], dict[str, str]]] = {
    "echo-w4": (4, {}, {}),
    "echo-poll": (16, {}, {"GRPC_POLL_STRATEGY": "poll"}),
    "echo-noreuse": (16, {"grpc.so_reuseport": 0}, {}),
    "echo-streams": (16, {"grpc.max_concurrent_streams": 16}, {}),
}
# Methods that call another method's server process (its CPU is theirs).
SERVER_OF = {"grpc-keyed": "grpc", "before-keyed": "before"}

# What services/ingest/writes.py write_messages runs for a known thread (no idempotency
# keys): the routed statement, in autocommit.
INSERT_SQL = (
    "WITH bumped AS (UPDATE threads SET last_sequence = last_sequence + %(n)s, "
    "last_message_at = now(), last_activity_at = now() "
    "WHERE dataset = 'bench' AND thread_id = %(id)s "
    "AND EXISTS (SELECT 1 FROM datasets d WHERE d.dataset = 'bench' "
    "AND d.key_id IS NOT DISTINCT FROM CAST(%(key_id)s AS uuid)) "
    "RETURNING last_sequence), "
    "inserted AS (INSERT INTO messages (dataset, thread_id, sequence, role, content, metadata, "
    "created_at, received_at, idempotency_key) "
    "SELECT 'bench', %(id)s, b.last_sequence - %(n)s + u.i, u.role, u.content, u.meta, "
    "coalesce(u.created_at, now()), now(), u.ikey "
    "FROM bumped b, unnest(CAST(%(roles)b AS text[]), CAST(%(contents)b AS bytea[]), "
    "CAST(%(metas)b AS bytea[]), CAST(%(created)b AS timestamptz[]), CAST(%(keys)b AS text[])) "
    "WITH ORDINALITY AS u(role, content, meta, created_at, ikey, i)) "
    "SELECT last_sequence, now() AS received_at FROM bumped"
)
# The same for a one-message batch: Ingest binds one message as scalars.
INSERT_ONE_SQL = (
    "WITH bumped AS (UPDATE threads SET last_sequence = last_sequence + 1, "
    "last_message_at = now(), last_activity_at = now() "
    "WHERE dataset = 'bench' AND thread_id = %(id)s "
    "AND EXISTS (SELECT 1 FROM datasets d WHERE d.dataset = 'bench' "
    "AND d.key_id IS NOT DISTINCT FROM CAST(%(key_id)s AS uuid)) "
    "RETURNING last_sequence), "
    "inserted AS (INSERT INTO messages (dataset, thread_id, sequence, role, content, metadata, "
    "created_at, received_at, idempotency_key) "
    "SELECT 'bench', %(id)s, b.last_sequence, CAST(%(role)s AS text), "
    "CAST(%(content)b AS bytea), CAST(%(meta)b AS bytea), "
    "coalesce(CAST(%(created_at)s AS timestamptz), now()), now(), CAST(%(ikey)s AS text) "
    "FROM bumped b) "
    "SELECT last_sequence, now() AS received_at FROM bumped"
)
# The routed statement with idempotency keys: it also requires none of them to be stored.
_NEW_KEYS = (
    "AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.dataset = 'bench' "
    "AND m.thread_id = %(id)s AND m.idempotency_key {}) RETURNING last_sequence), "
)
INSERT_SQL_KEYED = INSERT_SQL.replace(
    "RETURNING last_sequence), ", _NEW_KEYS.format("= ANY(CAST(%(keys)b AS text[]))"), 1
)
INSERT_ONE_SQL_KEYED = INSERT_ONE_SQL.replace(
    "RETURNING last_sequence), ", _NEW_KEYS.format("= CAST(%(ikey)s AS text)"), 1
)
PLAIN_SQL = (
    "INSERT INTO messages (dataset, thread_id, sequence, role, content, metadata, created_at) "
    "VALUES ('bench', %s, %s, %s, %s, %s, now())"
)
PLAIN_UNNEST_SQL = (
    "INSERT INTO messages (dataset, thread_id, sequence, role, content, metadata, created_at) "
    "SELECT 'bench', %s, u.seq, u.role, u.content, u.meta, now() "
    "FROM unnest(CAST(%s AS bigint[]), CAST(%s AS text[]), CAST(%s AS bytea[]), "
    "CAST(%s AS bytea[])) AS u(seq, role, content, meta)"
)
# The floor with its values bound in binary, as Ingest binds its own since the sixth pass:
# as text, psycopg hex-escapes each bytea and quotes each array element (~0.8 ms of client
# CPU at batch 100), a cost the plain floor pays and Ingest no longer does.
PLAIN_SQL_BINARY = PLAIN_SQL.replace("%s, %s)", "%b, %b)")
PLAIN_UNNEST_SQL_BINARY = PLAIN_UNNEST_SQL.replace("%s AS", "%b AS")

#: The bench dataset's key (sealing, as Ingest does; set by main from --encryption).
KEY: DatasetKey = ClearKey("bench")


@dataclass(frozen=True)
class Case:
    name: str
    batch: int
    clients: int
    same_thread: bool = False


CASES = (
    Case("batch 1, 1 client", 1, 1),
    Case("batch 1, 4 clients", 1, 4),
    Case("batch 100, 1 client", 100, 1),
    Case("batch 100, 4 clients", 100, 4),
    Case("batch 1, 8 clients, 1 thread", 1, 8, same_thread=True),
)


@dataclass
class Run:
    rate: float  # messages/s
    p50: float  # ms per call
    p99: float
    calls: int = 0
    seconds: float = 0.0
    service_cpu: float = 0.0  # CPU seconds the ingest process used (gRPC runs only)

    @property
    def cores(self) -> float:
        """Ingest process CPU, in cores busy."""
        return self.service_cpu / self.seconds if self.seconds else 0.0

    @property
    def cpu_ms_per_call(self) -> float:
        return self.service_cpu * 1000 / self.calls if self.calls else 0.0


@dataclass
class Runs:
    runs: list[Run] = field(default_factory=list)

    def median(self, attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in self.runs)


def round_ratios(floor: Runs, method: Runs) -> list[float]:
    """Time per message of ``method`` over ``floor``'s, one ratio per round: the two were
    measured back to back in that round, so they saw the same load."""
    return [f.rate / m.rate for f, m in zip(floor.runs, method.runs, strict=True)]


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a process (and its waited-for children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: int) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def make_threads(url: str, n: int) -> list[uuid.UUID]:
    ids = [uuid.uuid4() for _ in range(n)]
    label = KEY.seal("ingest", "threads.label")
    with psycopg.connect(url) as conn:
        conn.cursor().executemany(
            "INSERT INTO threads (thread_id, dataset, label) VALUES (%s, 'bench', %s)",
            [(i, label) for i in ids],
        )
    return ids


def sdk_keys(count: int) -> list[str]:
    """Idempotency keys as the Python SDK makes them (episodic.sdk.operations)."""
    return [f"auto:{uuid.uuid4()}" for _ in range(count)]


# ---- clients: each returns (call, close); one call stores one batch ----------------------


Client = tuple[Callable[[], None], Callable[[], None]]


def grpc_client(
    address: str, thread_id: uuid.UUID, batch: int, keyed: bool = False, check: bool = True
) -> Client:
    channel = grpc.insecure_channel(address)
    stub = pb_grpc.IngestServiceStub(channel)
    metadata = struct_pb2.Struct()
    metadata.update(METADATA)
    request = pb.AddMessagesRequest(
        thread_id=str(thread_id),
        messages=[
            pb.NewMessage(
                role=episode_pb2.ROLE_USER if i % 2 == 0 else episode_pb2.ROLE_ASSISTANT,
                content=CONTENT,
                metadata=metadata,
            )
            for i in range(batch)
        ],
    )
    # Enough keys for the measurement at a quiet machine's rates, made before it; more are
    # made as needed.
    keys = iter(sdk_keys(max(3_000, 60 * batch * 10)) if keyed else ())

    def call() -> None:
        if keyed:
            for m in request.messages:
                m.idempotency_key = next(keys, None) or sdk_keys(1)[0]
        response = stub.AddMessages(request, timeout=30)
        if check:  # the echo's canned answer is the same for every batch
            assert response.stored_count == batch, response

    return call, channel.close


def echo_statement() -> Callable[[pb.AddMessagesRequest], None]:
    """echo-sql's work (``bench/harness/grpc_echo.py`` ``work``), made once in the echo's process:
    for each request, the statement :func:`sql_client` sends for its thread and batch size,
    on a psycopg connection of the handler thread. The database and the bench's master
    keyring come from ``EPISODIC_BENCH_URL`` and ``EPISODIC_MASTER_KEY_FILE`` (set by
    :func:`main`)."""
    global KEY
    url = os.environ["EPISODIC_BENCH_URL"]
    vault = Vault(LocalKeyring.load(Path(os.environ["EPISODIC_MASTER_KEY_FILE"])), encrypt=False)
    engine = make_engine(url, pool_size=1)
    with engine.begin() as conn:  # the bench dataset's key (made by main), to seal with
        KEY = vault.for_write(conn, "bench")
    engine.dispose()
    local = threading.local()

    def run(request: pb.AddMessagesRequest) -> None:
        clients: dict[tuple[str, int], Callable[[], None]] = local.__dict__.setdefault(
            "clients", {}
        )
        which = (request.thread_id, len(request.messages))
        call = clients.get(which)
        if call is None:
            call = clients[which] = sql_client(url, uuid.UUID(which[0]), which[1])[0]
        call()

    return run


def sql_client(url: str, thread_id: uuid.UUID, batch: int, keyed: bool = False) -> Client:
    conn = psycopg.connect(url, autocommit=True)
    roles = [ROLES[i % 2] for i in range(batch)]
    nones: list[None] = [None] * batch
    keys = iter(sdk_keys(max(3_000, 60 * batch * 10)) if keyed else ())

    def next_keys() -> list[str | None]:
        if not keyed:
            return nones  # type: ignore[return-value]
        return [next(keys, None) or sdk_keys(1)[0] for _ in range(batch)]

    def call() -> None:
        with conn.cursor() as cur:
            if batch == 1:
                cur.execute(
                    INSERT_ONE_SQL_KEYED if keyed else INSERT_ONE_SQL,
                    {
                        "id": thread_id,
                        "key_id": KEY.key_id,
                        "role": roles[0],
                        "content": KEY.seal(CONTENT, "messages.content"),
                        "meta": seal_json(KEY, METADATA, "messages.metadata"),
                        "created_at": None,
                        "ikey": next_keys()[0],
                    },
                    binary=True,  # the row read in binary, as Ingest reads it
                )
                assert cur.fetchone() is not None
                return
            # Sealed per message, as Ingest does (a fresh nonce each).
            contents = [KEY.seal(CONTENT, "messages.content") for _ in range(batch)]
            metas = [seal_json(KEY, METADATA, "messages.metadata") for _ in range(batch)]
            cur.execute(
                INSERT_SQL_KEYED if keyed else INSERT_SQL,
                {
                    "id": thread_id,
                    "n": batch,
                    "key_id": KEY.key_id,
                    "roles": roles,
                    "contents": contents,
                    "metas": metas,
                    "created": nones,
                    "keys": next_keys(),
                },
                binary=True,
            )
            assert cur.fetchone() is not None

    return call, conn.close


def plain_client(
    url: str,
    thread_id: uuid.UUID,
    batch: int,
    sequences: itertools.count[int],
    autocommit: bool = False,
    binary: bool = False,
) -> Client:
    conn = psycopg.connect(url, autocommit=autocommit)
    one, many = (
        (PLAIN_SQL_BINARY, PLAIN_UNNEST_SQL_BINARY) if binary else (PLAIN_SQL, PLAIN_UNNEST_SQL)
    )

    def call() -> None:
        with conn.cursor() as cur:
            if batch == 1:
                cur.execute(
                    one, (thread_id, next(sequences), ROLES[0], PLAIN_CONTENT, PLAIN_METADATA)
                )
            else:
                cur.execute(
                    many,
                    (
                        thread_id,
                        [next(sequences) for _ in range(batch)],
                        [ROLES[i % 2] for i in range(batch)],
                        [PLAIN_CONTENT] * batch,
                        [PLAIN_METADATA] * batch,
                    ),
                )
        if not autocommit:
            conn.commit()

    return call, conn.close


def make_clients(
    method: str, case: Case, url: str, addresses: dict[str, str]
) -> tuple[list[Client], list]:  # type: ignore[type-arg]
    threads = make_threads(url, 1 if case.same_thread else case.clients)
    per_client = [threads[0] if case.same_thread else threads[i] for i in range(case.clients)]
    if method in addresses or method in SERVER_OF:  # grpc, before, the echoes
        address = addresses[SERVER_OF.get(method, method)]
        keyed = method.endswith("-keyed")
        check = not method.startswith("echo")
        return [grpc_client(address, t, case.batch, keyed, check) for t in per_client], threads
    if method in ("sql", "sql-keyed"):
        keyed = method == "sql-keyed"
        return [sql_client(url, t, case.batch, keyed) for t in per_client], threads
    # itertools.count's next() is atomic under the GIL: shared by the hot-row clients.
    counters = {t: itertools.count(1) for t in threads}
    return [
        plain_client(
            url,
            t,
            case.batch,
            counters[t],
            autocommit=method == "plain-ac",
            binary=method == "plain-bin",
        )
        for t in per_client
    ], threads


def drive(clients: list[Client], batch: int, seconds: float) -> Run:
    """Runs every client in its own thread for ``seconds``; messages/s over the wall time."""
    barrier = threading.Barrier(len(clients) + 1)
    counts = [0] * len(clients)
    latencies: list[list[float]] = [[] for _ in clients]
    errors: list[BaseException] = []

    def work(i: int) -> None:
        call = clients[i][0]
        barrier.wait()
        deadline = time.perf_counter() + seconds
        try:
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                call()
                latencies[i].append((time.perf_counter() - t0) * 1000)
                counts[i] += batch
        except BaseException as err:
            errors.append(err)

    workers = [threading.Thread(target=work, args=(i,)) for i in range(len(clients))]
    for w in workers:
        w.start()
    barrier.wait()
    start = time.perf_counter()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    lat = sorted(x for per in latencies for x in per)
    return Run(
        rate=sum(counts) / elapsed,
        p50=pct(lat, 50),
        p99=pct(lat, 99),
        calls=len(lat),
        seconds=elapsed,
    )


def check_hot_thread(url: str, thread_id: uuid.UUID) -> None:
    """Server-assigned sequences of the shared thread: no gaps, no duplicates."""
    with psycopg.connect(url) as conn:
        last, n, top, distinct = conn.execute(
            "SELECT t.last_sequence, count(m.*), coalesce(max(m.sequence), 0), "
            "count(DISTINCT m.sequence) FROM threads t LEFT JOIN messages m USING (thread_id) "
            "WHERE t.thread_id = %s GROUP BY t.last_sequence",
            (thread_id,),
        ).fetchone()  # type: ignore[misc]
    if not (last == n == top == distinct):
        raise AssertionError(f"hot thread {thread_id}: last={last} rows={n} max={top}")


def measure(method: str, case: Case, url: str, ingests: dict[str, Server], seconds: float) -> Run:
    clients, threads = make_clients(
        method, case, url, {name: p.address for name, p in ingests.items()}
    )
    try:
        ingest = ingests.get(SERVER_OF.get(method, method))
        cpu = process_cpu(ingest.pid) if ingest else 0.0
        run = drive(clients, case.batch, seconds)
        if ingest:
            run.service_cpu = process_cpu(ingest.pid) - cpu
    finally:
        for _, close in clients:
            close()
    if case.same_thread and method not in FLOORS and not method.startswith("echo"):
        check_hot_thread(url, threads[0])
    return run


@dataclass(frozen=True)
class Server:
    """A gRPC server the bench calls: where, and which process to charge its CPU to."""

    address: str
    pid: int


def echo(stack: contextlib.ExitStack, **kw) -> Server:  # type: ignore[no-untyped-def]
    """A canned-answer AddMessages server (bench/harness/grpc_echo.py) for the rest of the run."""
    canned = pb.AddMessagesResponse(stored_count=1, receipts=[pb.MessageReceipt(sequence=1)])
    address, pid = stack.enter_context(
        echo_process(
            pb.DESCRIPTOR.services_by_name["IngestService"].full_name,
            "AddMessages",
            pb.AddMessagesRequest,
            canned.SerializeToString(),
            **kw,
        )
    )
    return Server(address, pid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds", type=float, help="length of one measurement (3; 1.5 with --quick)"
    )
    parser.add_argument(
        "--repeats", type=int, help="rounds, medians are reported (3; 7 with --quick)"
    )
    parser.add_argument("--warmup", type=float, default=0.5, help="untimed run per case/method")
    parser.add_argument(
        "--scheduler",
        action="store_true",
        help="run a real Scheduler (each activity notice is then a timer upsert)",
    )
    parser.add_argument(
        "--encryption",
        choices=("on", "off"),
        default="on",
        help="the bench dataset encrypted at rest (on, as `episodic up` runs) or in the clear",
    )
    parser.add_argument(
        "--before", type=Path, help="an older checkout (with .venv): its Ingest, same rounds"
    )
    parser.add_argument(
        "--quick", action="store_true", help="only the one-client cases (batch 1 and 100)"
    )
    parser.add_argument(
        "--no-analyze",
        action="store_true",
        help="measure on tables never analysed (as every run before 2026-12-01 did)",
    )
    parser.add_argument(
        "--echo-variants",
        action="store_true",
        help="also the sync echo with each server setting changed (pool, poller, reuseport, "
        "streams)",
    )
    args = parser.parse_args()
    # --quick: more, shorter rounds (a ratio per round, their median is what varies least).
    if args.seconds is None:
        args.seconds = 1.5 if args.quick else 3.0
    if args.repeats is None:
        args.repeats = 7 if args.quick else 3
    global KEY
    methods = (
        METHODS
        + (tuple(ECHO_VARIANTS) if args.echo_variants else ())
        + (("before", "before-keyed") if args.before else ())
    )
    cases = [c for c in CASES if c.clients == 1] if args.quick else list(CASES)

    service_env = {
        # Production defaults instead of the test harness's smaller pool.
        "EPISODIC_DB_POOL_SIZE": "10",
        "EPISODIC_GRPC_WORKERS": "16",
        "EPISODIC_LOG_LEVEL": "WARNING" if args.scheduler else "ERROR",
    }
    results: dict[tuple[str, str], Runs] = {(c.name, m): Runs() for c in cases for m in methods}
    load_before = loadavg()
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="ingest-bench-") as tmp,
        test_server(Path(tmp)) as dbs,
        contextlib.ExitStack() as stack,
    ):
        url = dbs.create()
        with psycopg.connect(url) as conn:
            sync = conn.execute("SHOW synchronous_commit").fetchone()[0]  # type: ignore[index]
        engine = make_engine(url, pool_size=1)
        with engine.begin() as conn:  # the dataset, with a data key when encrypted
            KEY = test_vault(encrypt=args.encryption == "on").for_write(conn, "bench")
        engine.dispose()
        procs: list[ServiceProcess] = []
        try:
            if args.scheduler:
                scheduler = start_service(
                    "scheduler", url, {**service_env, "EPISODIC_SCHEDULER_POLL_INTERVAL": "1"}
                )
                procs.append(scheduler)
                service_env["EPISODIC_SCHEDULER_ADDRESS"] = scheduler.address
            procs.append(start_service("ingest", url, service_env))
            ingests = {"grpc": Server(procs[-1].address, procs[-1].proc.pid)}
            echoes = {"echo": (16, {}, {}), **(ECHO_VARIANTS if args.echo_variants else {})}
            for name, (workers, options, env) in echoes.items():
                ingests[name] = echo(stack, workers=workers, options=options, env=env)
            ingests["echo-aio"] = echo(stack, aio=True)
            ingests["echo-sql"] = echo(
                stack,
                work="bench.speed.ingest_bench:echo_statement",
                env={"EPISODIC_BENCH_URL": url, "EPISODIC_MASTER_KEY_FILE": str(keyring_file())},
            )
            if args.before:
                procs.append(
                    start_service(
                        "ingest", url, service_env, python=str(args.before / ".venv/bin/python")
                    )
                )
                ingests["before"] = Server(procs[-1].address, procs[-1].proc.pid)

            for case in cases:
                for method in methods:
                    measure(method, case, url, ingests, args.warmup)
            if not args.no_analyze:
                # The tables' statistics, as autovacuum keeps them on a running deployment
                # (this run is over before it would have analysed them). Without any, the
                # floor and every statement ran slower — the plain INSERT at batch 100 at
                # ~0.45x its analysed rate — and by more than the service's own work, which
                # made the service's ratios look better than a deployment's
                # (docs/benchmarks.md "AddMessages, eighth pass").
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute("ANALYZE")
            for round_ in range(args.repeats):
                for case in cases:
                    shift = round_ % len(methods)
                    for method in methods[shift:] + methods[:shift]:
                        run = measure(method, case, url, ingests, args.seconds)
                        results[(case.name, method)].runs.append(run)
                print(f"round {round_ + 1}/{args.repeats} done", file=sys.stderr, flush=True)
        finally:
            for proc in procs:
                proc.terminate()
    load_after = loadavg()

    scheduler_note = (
        "real Scheduler (notices upsert timers)"
        if args.scheduler
        else "Scheduler address points nowhere (notices fail fast, off the write path)"
    )
    print(
        f"\nIngest AddMessages vs raw SQL: medians of {args.repeats} x {args.seconds:g} s; "
        f"embedded PostgreSQL (synchronous_commit {sync}); ingest pool 10, 16 handler "
        f"threads; {scheduler_note}; encryption at rest {args.encryption} (SQL seals like "
        f"Ingest, plain stores the clear form); tables "
        f"{'never analysed' if args.no_analyze else 'analysed after the warm-up'}.\nloadavg before {load_before}, after {load_after}; "
        f"{time.monotonic() - started:.0f} s in all.\n"
    )
    header = (
        f"{'case':<30} | {'gRPC msgs/s':>11} | {'SQL msgs/s':>10} | {'SQL/gRPC':>8} | "
        f"{'plain msgs/s':>12} | {'gRPC p50/p99 ms':>15} | {'SQL p50/p99 ms':>14} | "
        f"{'ingest CPU/call':>15}"
    )
    print(header)
    print("-" * len(header))
    for case in cases:
        g, s, p = (results[(case.name, m)] for m in ("grpc", "sql", "plain"))
        print(
            f"{case.name:<30} | {g.median('rate'):>11.0f} | {s.median('rate'):>10.0f} | "
            f"{s.median('rate') / g.median('rate'):>7.2f}x | {p.median('rate'):>12.0f} | "
            f"{g.median('p50'):>6.1f} / {g.median('p99'):>6.1f} | "
            f"{s.median('p50'):>5.1f} / {s.median('p99'):>6.1f} | "
            f"{g.median('cpu_ms_per_call'):>5.2f} ms ({g.median('cores'):.2f} cores)"
        )
    floor_notes = {
        "plain": "the plain INSERT as BEGIN, INSERT, COMMIT (the issue's floor; goal <= 2.5x "
        "at batch 1, <= 1.5x at batch 100)",
        "plain-ac": "the same INSERT in autocommit, one round trip (the floor for Ingest's "
        "own one-statement autocommit path)",
        "plain-bin": "the issue's floor with its values bound in binary, as Ingest binds its "
        "own (the plain floor's text parameters cost it client CPU Ingest no longer pays)",
    }
    for floor in FLOORS:
        print(
            f"\nTime per message over {floor_notes[floor]}: the median of the rounds' ratios, "
            "each round's ratio from its own back-to-back measurements (so a load swing "
            "between rounds cancels out), then every round's ratio:"
        )
        for case in cases:
            if case.clients != 1:
                continue
            ratio_cells = []
            for m in methods:
                if m in FLOORS:
                    continue
                ratios = round_ratios(results[(case.name, floor)], results[(case.name, m)])
                listed = " ".join(f"{r:.2f}" for r in ratios)
                ratio_cells.append(f"{m} {statistics.median(ratios):.2f}x ({listed})")
            print(f"  {case.name:<30} {', '.join(ratio_cells)}")
    print(
        "\nWhat is left above the bare gRPC hop: time per message of gRPC over echo-sql (the "
        "hop with the statement in its handler, no service code), and over echo + SQL (the "
        "statement alone and the canned-answer hop, measured in the same round), the median "
        "of per-round ratios, then every round's:"
    )
    for case in cases:
        if case.clients != 1:
            continue
        ratios = round_ratios(results[(case.name, "echo-sql")], results[(case.name, "grpc")])
        listed = " ".join(f"{r:.2f}" for r in ratios)
        label = f"{case.name}, grpc over echo-sql"
        print(f"  {label:<50} {statistics.median(ratios):.2f}x ({listed})")
        for served, alone in (("grpc", "sql"), ("grpc-keyed", "sql-keyed")):
            ratios = [
                (1 / g.rate) / (1 / e.rate + 1 / q.rate)
                for g, e, q in zip(
                    results[(case.name, served)].runs,
                    results[(case.name, "echo")].runs,
                    results[(case.name, alone)].runs,
                    strict=True,
                )
            ]
            listed = " ".join(f"{r:.2f}" for r in ratios)
            label = f"{case.name}, {served} over echo + {alone}"
            print(f"  {label:<50} {statistics.median(ratios):.2f}x ({listed})")
    print(
        "\nKeyed (the SDK's idempotency keys) over keyless, and the other hops over the sync "
        "echo, time per message, the median of per-round ratios:"
    )
    pairs = [("grpc-keyed", "grpc"), ("sql-keyed", "sql")]
    pairs += [(m, "echo") for m in methods if m.startswith("echo") and m != "echo"]
    if args.before:
        pairs.append(("before-keyed", "before"))
    for case in cases:
        cells = []
        for top, bottom in pairs:
            ratios = round_ratios(results[(case.name, bottom)], results[(case.name, top)])
            cells.append(f"{top}/{bottom} {statistics.median(ratios):.2f}x")
        print(f"  {case.name:<30} {', '.join(cells)}")
    print("\nServer CPU per call (ms), medians over rounds:")
    for case in cases:
        cells = [
            f"{m} {results[(case.name, m)].median('cpu_ms_per_call'):.3f}"
            for m in methods
            if m not in FLOORS and not m.startswith("sql")
        ]
        print(f"  {case.name:<30} {', '.join(cells)}")
    if args.before:
        print(
            "\nThis checkout over --before, time per message, the median of per-round ratios "
            "(each round measured both back to back), then every round's:"
        )
        for case in cases:
            for this_m, old_m in (("grpc", "before"), ("grpc-keyed", "before-keyed")):
                ratios = round_ratios(results[(case.name, old_m)], results[(case.name, this_m)])
                listed = " ".join(f"{r:.2f}" for r in ratios)
                label = f"{case.name}, {this_m} / {old_m}"
                print(f"  {label:<50} {statistics.median(ratios):.2f}x ({listed})")
        print("\nIngest CPU per call, this checkout vs --before (less noisy than rates):")
        for case in cases:
            for this_m, old_m in (("grpc", "before"), ("grpc-keyed", "before-keyed")):
                cpu_this, cpu_old = (
                    results[(case.name, m)].median("cpu_ms_per_call") for m in (this_m, old_m)
                )
                label = f"{case.name}, {this_m} vs {old_m}"
                print(
                    f"  {label:<50} {cpu_this:.2f} ms vs {cpu_old:.2f} ms = "
                    f"{cpu_this / cpu_old:.2f}x"
                )
    print(f"\nmsgs/s in each round ({' | '.join(methods)}), to judge the noise:")
    for case in cases:
        rates = " | ".join(
            " ".join(f"{r.rate:.0f}" for r in results[(case.name, m)].runs) for m in methods
        )
        print(f"  {case.name:<30} {rates}")
    print(
        "\nSQL: the domain's statement for a known thread by psycopg, in autocommit (bump "
        "counter, INSERT … unnest … RETURNING). plain: INSERT of the same rows, client-chosen "
        "sequences, no lock or counter, BEGIN/INSERT/COMMIT; plain-ac: the same in autocommit; "
        "plain-bin: plain with its values bound in binary. "
        "echo: a bare Python gRPC server's canned AddMessages answer (no database); echo-sql: "
        "the same server sending SQL's statement in its handler before answering. "
        "Latency: one call = one batch. ingest CPU/call: CPU time of the "
        "Ingest process per gRPC call (and cores it kept busy). The hot-row thread's "
        "sequences were checked gap- and duplicate-free after every run."
    )


if __name__ == "__main__":
    main()
