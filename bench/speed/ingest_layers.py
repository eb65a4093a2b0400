"""What each layer around AddMessages' statement costs: the Ingest rebuilt with its layers
removed one at a time, measured side by side in one run.

Starts its own embedded PostgreSQL and these servers, each a process of its own (one
client calls one thread, batch 1 by default):

- ``service``: the Ingest as deployed (``python -m episodic.services.ingest``);
- ``copy``: this script's copy of it — the same servicer, guard, interceptors, metrics and
  Scheduler notifier, built the way ``episodic.serving.server.serve`` builds them (it should
  measure like ``service``: the copy is faithful when it does);
- ``-notifier``: the copy without the Scheduler notifier (no notice queued, no thread woken);
- ``-interceptors``: also without any server interceptor (no request guard, guard, error
  mapping, call metric, trace propagation);
- ``-metrics``: also without the messages-ingested counters;
- ``raw-psycopg``: also without SQLAlchemy: the handler parses, validates and seals as
  Ingest does and sends the same routed statement on a per-thread psycopg connection in
  autocommit;
- ``echo``: a handler that answers a canned response: the bare gRPC hop (protobuf parsing of
  the request included);
- with ``--undo``, before ``copy``: ``copy+core``, ``copy+counters``, ``copy+uncached``, the
  copy with ONE of the sixth pass's changes undone (the routed statement through
  SQLAlchemy's Core, synchronous counters, a call handler built per call): each row over
  ``copy`` is what that change saved;

and, sent by psycopg from this process, ``sql`` (the routed statement, autocommit),
``plain`` (BEGIN, single-row INSERT, COMMIT: the issue's floor) and ``plain-ac`` (the INSERT
in autocommit). The rounds interleave every method (rotating their order), and each
method's time per call is the median of its rounds' p50s; each server's CPU per call comes
from /proc. Differences between neighbouring rows are what a layer costs.

Not part of pytest:

    .venv/bin/python -m bench.speed.ingest_layers [--batch 1] [--seconds 1.5] [--repeats 7] [--undo]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import grpc
import psycopg

from bench.speed import ingest_bench as bench
from episodic.store.db import make_engine
from episodic.testing.database import test_server
from episodic.testing.keys import test_vault
from episodic.testing.processes import TEST_ENV, ServiceProcess, start_service
from episodic.v1 import ingest_service_pb2 as pb

VARIANTS = ("copy", "-notifier", "-interceptors", "-metrics", "raw-psycopg", "echo")


# --------------------------------------------------------------------------- the servers


class _NoNotices:
    """A notifier that tells nobody."""

    def record_activity(self, thread_id: str) -> None:
        pass

    def record_thread_started(self, thread_id: str) -> None:
        pass

    def close(self) -> None:
        pass


def _raw_add_messages(servicer: Any, url: str) -> Any:
    """AddMessages on a per-thread psycopg connection: the same parsing, checks, sealing
    and routed statement as the service, without SQLAlchemy (known threads only)."""
    from episodic.crypto import seal_json
    from episodic.services.ingest import domain
    from episodic.services.ingest.servicer import _new_messages
    from episodic.validation import parse_uuid

    local = threading.local()
    statement = bench.INSERT_SQL

    def handler(request: pb.AddMessagesRequest, context: grpc.ServicerContext) -> Any:
        thread_id = parse_uuid(request.thread_id, "thread_id")
        messages = _new_messages(request, request.thread_id)
        domain.check_new_messages(messages, servicer.settings)
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = psycopg.connect(url, autocommit=True)
        key = bench.KEY
        last, received_at = conn.execute(
            statement,
            {
                "id": thread_id,
                "n": len(messages),
                "key_id": key.key_id,
                "roles": [m.role for m in messages],
                "contents": [key.seal(m.content, "messages.content") for m in messages],
                "metas": [seal_json(key, m.metadata, "messages.metadata") for m in messages],
                "created": [m.created_at for m in messages],
                "keys": [m.idempotency_key for m in messages],
            },
        ).fetchone()  # type: ignore[misc]
        from episodic import convert

        stamp = convert.ts(received_at)
        first = last - len(messages) + 1
        return pb.AddMessagesResponse(
            stored_count=len(messages),
            thread_id=str(thread_id),
            receipts=[
                pb.MessageReceipt(
                    sequence=first + i, stored=True, created_at=stamp, received_at=stamp
                )
                for i in range(len(messages))
            ],
        )

    return handler


def serve_variant(variant: str, url: str) -> None:
    """Runs the copy of the Ingest with the layers ``variant`` removes (cumulative, in the
    order of VARIANTS) until killed; prints its port."""
    from concurrent import futures

    from episodic import metrics
    from episodic.config import get_settings
    from episodic.services.ingest import __main__ as ingest_main
    from episodic.services.ingest.servicer import IngestServicer, register
    from episodic.serving.guard import Guard
    from episodic.serving.server import (
        GRPC_SERVICES,
        CallInterceptor,
        auth_required,
        setup_logging,
        start_metrics,
    )
    from episodic.serving.transport import EventLoopThread
    from episodic.store.vault import make_vault
    from episodic.telemetry import grpc_server_interceptor

    wait = 0.0
    linger = None
    undo = None
    if variant.startswith("copy+"):  # the copy with one of the sixth pass's changes undone
        undo, variant = variant.split("+", 1)[1], "copy"
    if variant == "copy-linger0":  # the copy, its notices sent as they come (no linger)
        linger, variant = 0.0, "copy"
    if variant.startswith("echo-wait"):  # echo-wait=SECONDS: the canned answer after a sleep
        wait = float(variant.split("=")[1])
        variant = "echo"
    removed = VARIANTS[: VARIANTS.index(variant) + 1]
    settings = get_settings()
    setup_logging("ingest")
    start_metrics("ingest", settings)
    engine = make_engine(
        settings.database.sqlalchemy_url(),
        pool_size=settings.database.db_pool_size,
        application_name="episodic-ingest",
    )
    vault = make_vault(settings.privacy)
    if "-notifier" in removed:
        notifier: Any = _NoNotices()
    else:
        channel = grpc.insecure_channel(
            settings.service.address_of("scheduler"), options=ingest_main.NOTIFY_CHANNEL_OPTIONS
        )
        from episodic.services.ingest.notifier import SchedulerNotifier
        from episodic.telemetry import instrument_grpc_client

        notifier = SchedulerNotifier(
            instrument_grpc_client(channel),
            timeout=settings.ingest.scheduler_notify_timeout.total_seconds(),
            linger=(
                linger
                if linger is not None
                else settings.ingest.scheduler_notify_linger.total_seconds()
            ),
        )
    servicer = IngestServicer(engine, settings.ingest, notifier, vault)
    if undo is not None:
        _undo(undo)
    if "-metrics" in removed:
        metrics.messages_ingested = lambda roles: None  # type: ignore[assignment]
        metrics.messages_deduplicated = lambda count: None  # type: ignore[assignment]
    if "raw-psycopg" in removed:
        servicer.AddMessages = _raw_add_messages(servicer, url)  # type: ignore[method-assign]
    if "echo" in removed:
        canned = pb.AddMessagesResponse(stored_count=1, receipts=[pb.MessageReceipt(sequence=1)])

        def echo(request: pb.AddMessagesRequest, context: grpc.ServicerContext) -> Any:
            if wait:
                time.sleep(wait)
            return canned

        servicer.AddMessages = echo  # type: ignore[method-assign]
    pool = futures.ThreadPoolExecutor(max_workers=settings.service.grpc_workers)
    interceptors: list[grpc.aio.ServerInterceptor] = []
    if "-interceptors" in removed:
        # No guard: every handler runs as the guard's anonymous principal (loopback, no keys).
        import contextvars

        from episodic import access

        access._current = contextvars.ContextVar("principal", default=access.ANONYMOUS)
    else:
        guard = Guard(engine, [GRPC_SERVICES["ingest"]], required=auth_required(settings))
        calls: grpc.aio.ServerInterceptor = CallInterceptor(guard, pool=pool)
        if undo == "uncached":
            calls = _UncachedCallInterceptor(guard, pool)
        interceptors = [grpc_server_interceptor(), calls]
    # As episodic.serving.server.build_server runs it: grpc.aio on a loop thread of its own, the
    # handlers in the pool (without the call interceptor, grpc.aio runs them there itself).
    loop = EventLoopThread("ingest-grpc")

    async def make() -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server(
            migration_thread_pool=pool,
            interceptors=interceptors,
            options=[("grpc.so_reuseport", 0)],
        )
        register(server, servicer)  # type: ignore[arg-type]
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, port

    server, port = loop.run(make())
    sys.stdout.write(f"listening on port {port}\n")
    sys.stdout.flush()
    loop.run(server.wait_for_termination())


# The sixth pass's changes, each undone alone (``--undo``): the copy with one of them as
# it was before, so that each change's cost shows as a step against ``copy`` in one run.
UNDO = ("core", "counters", "uncached")


def _undo(change: str) -> None:
    """Puts back, in this server process, what the sixth pass changed:

    - ``core``: the routed statement through SQLAlchemy's Core (a ``text()`` clause on an
      AUTOCOMMIT connection), as before episodic.store.raw_statement (its values bound as
      text then: ``text()`` has no binary placeholder; ~6 µs at batch 1, bench/speed/ingest_parts.py);
    - ``counters``: the messages-ingested metrics as synchronous OpenTelemetry counters
      (other names: the tallies keep theirs);
    - ``uncached``: the call interceptor builds the wrapped handler on every call (applied
      where the interceptors are built)."""
    import re

    from sqlalchemy import text

    from episodic import metrics
    from episodic.services.ingest import writes

    if change == "core":
        clauses: dict[str, Any] = {}

        def through_core(engine: Any, statement: str, parameters: Any) -> Any:
            clause = clauses.get(statement)
            if clause is None:
                clause = clauses[statement] = text(re.sub(r"%\((\w+)\)[sb]", r":\1", statement))
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                return conn.execute(clause, parameters).first()

        writes.fetch_one_autocommitted = through_core  # type: ignore[assignment]
    elif change == "counters":

        class Synchronous:
            def __init__(self, name: str) -> None:
                self.counter = metrics._meter.create_counter(name + ".synchronous")

            def add(self, n: int, label: str = "") -> None:
                self.counter.add(n, {"role": label} if label else None)

        metrics._messages_ingested = Synchronous(metrics.MESSAGES_INGESTED.name)  # type: ignore[assignment]
        metrics._messages_deduplicated = Synchronous(metrics.MESSAGES_DEDUPLICATED.name)  # type: ignore[assignment]
    elif change != "uncached":
        raise SystemExit(f"unknown change to undo: {change}")


class _UncachedCallInterceptor:
    """The call interceptor as before the sixth pass: a handler built on every call."""

    def __new__(cls, guard: Any, pool: Any) -> Any:
        from episodic.serving.server import CallInterceptor

        class Uncached(CallInterceptor):
            async def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
                handler = await continuation(handler_call_details)
                if handler is None or handler.unary_unary is None:
                    return handler
                return self._wrap(handler_call_details.method, handler)

        return Uncached(guard, pool=pool)


# --------------------------------------------------------------------------- the client


def start_variant(
    variant: str, url: str, scheduler: str | None = None
) -> tuple[subprocess.Popen[str], str]:
    env = {
        **os.environ,
        **TEST_ENV,
        **({"EPISODIC_SCHEDULER_ADDRESS": scheduler} if scheduler else {}),
        "EPISODIC_DATABASE_URL": url,
        "EPISODIC_DB_POOL_SIZE": "10",
        "EPISODIC_LOG_LEVEL": "ERROR",
    }
    from episodic.testing.keys import keyring_file

    env["EPISODIC_MASTER_KEY_FILE"] = str(keyring_file())
    proc = subprocess.Popen(
        [sys.executable, __file__, f"--serve={variant}", "--url", url, "--key-of", "bench"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("listening on port "):
            return proc, f"127.0.0.1:{line.split()[-1]}"
    raise RuntimeError(f"{variant} did not start")


def p50_per_call(call: Any, seconds: float) -> tuple[float, int]:
    times = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6, len(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--scheduler",
        action="store_true",
        help="a real Scheduler receives the notices (else its address points nowhere), and "
        "the copy also runs with notices sent as they come (copy-linger0)",
    )
    parser.add_argument(
        "--undo",
        action="store_true",
        help="also run the copy with each of the sixth pass's changes undone alone "
        "(copy+core, copy+counters, copy+uncached)",
    )
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--key-of", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        # The parent's keyring (EPISODIC_MASTER_KEY_FILE) opens the bench dataset's key.
        from episodic.config import get_settings
        from episodic.store.vault import make_vault

        engine = make_engine(args.url, pool_size=1)
        with engine.begin() as conn:
            bench.KEY = make_vault(get_settings().privacy).for_write(conn, args.key_of)
        engine.dispose()
        serve_variant(args.serve, args.url)
        return

    print(f"load average before: {bench.loadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="ingest-layers-") as tmp, test_server(Path(tmp)) as dbs:
        url = dbs.create()
        engine = make_engine(url, pool_size=1)
        with engine.begin() as conn:
            bench.KEY = test_vault(encrypt=True).for_write(conn, "bench")
        engine.dispose()
        servers: dict[str, tuple[Any, str]] = {}
        service: ServiceProcess | None = None
        scheduler: ServiceProcess | None = None
        try:
            env = {"EPISODIC_DB_POOL_SIZE": "10", "EPISODIC_LOG_LEVEL": "ERROR"}
            if args.scheduler:
                scheduler = start_service(
                    "scheduler", url, {**env, "EPISODIC_SCHEDULER_POLL_INTERVAL": "1"}
                )
                env["EPISODIC_SCHEDULER_ADDRESS"] = scheduler.address
            service = start_service("ingest", url, env)
            servers["service"] = (service.proc, service.address)
            variants = ("copy-linger0", *VARIANTS) if args.scheduler else VARIANTS
            if args.undo:
                variants = (*(f"copy+{change}" for change in UNDO), *variants)
            for variant in variants:
                servers[variant] = start_variant(
                    variant, url, scheduler.address if scheduler else None
                )
            methods = [*servers, "sql", "plain", "plain-ac"]
            calls = {}
            closers = []
            for method in methods:
                thread = bench.make_threads(url, 1)[0]
                if method in servers:
                    call, close = bench.grpc_client(servers[method][1], thread, args.batch)
                elif method == "sql":
                    call, close = bench.sql_client(url, thread, args.batch)
                else:
                    import itertools

                    call, close = bench.plain_client(
                        url, thread, args.batch, itertools.count(1), autocommit=method == "plain-ac"
                    )
                calls[method] = call
                closers.append(close)
                for _ in range(200):  # warm: the route remembered, statements prepared
                    call()
            p50s: dict[str, list[float]] = {m: [] for m in methods}
            cpu: dict[str, list[float]] = {m: [] for m in servers}
            for round_ in range(args.repeats):
                shift = round_ % len(methods)
                for method in methods[shift:] + methods[:shift]:
                    before = bench.process_cpu(servers[method][0].pid) if method in servers else 0
                    p50, n = p50_per_call(calls[method], args.seconds)
                    p50s[method].append(p50)
                    if method in servers:
                        used = bench.process_cpu(servers[method][0].pid) - before
                        cpu[method].append(used * 1e6 / n)
                print(f"round {round_ + 1}/{args.repeats} done", file=sys.stderr, flush=True)
            for close in closers:
                close()
        finally:
            for name, (proc, _) in servers.items():
                if name != "service":
                    proc.kill()
                    proc.wait()
            for each in (service, scheduler):
                if each is not None:
                    each.terminate()
    print(f"load average after: {bench.loadavg()}")
    floor = statistics.median(p50s["plain"])
    print(
        f"\nAddMessages batch {args.batch}, one client, p50 per call (median of {args.repeats} "
        f"rounds of {args.seconds:g} s), server CPU per call:\n"
    )
    if scheduler is not None:
        print("(a real Scheduler received the notices)")
    print(f"{'method':<16} {'p50 µs':>8} {'/ plain':>8} {'step µs':>8} {'CPU µs/call':>12}")
    previous = None
    for method in methods:
        p50 = statistics.median(p50s[method])
        step = f"{previous - p50:8.0f}" if previous is not None and method in servers else ""
        used = f"{statistics.median(cpu[method]):12.0f}" if method in cpu else ""
        print(f"{method:<16} {p50:8.0f} {p50 / floor:7.2f}x {step:>8} {used}")
        if method in servers and not method.startswith("copy+"):
            previous = p50
    undone = [m for m in methods if m.startswith("copy+")]
    if undone:
        copy_p50, copy_cpu = statistics.median(p50s["copy"]), statistics.median(cpu["copy"])
        print("\neach change alone: the copy with it undone, over the copy (what it saved)")
        print(f"{'undone':<16} {'p50 µs':>8} {'CPU µs/call':>12}")
        for method in undone:
            print(
                f"{method:<16} {statistics.median(p50s[method]) - copy_p50:+8.0f} "
                f"{statistics.median(cpu[method]) - copy_cpu:+12.0f}"
            )
        print("per round, the undone copy's p50 over the copy's in that round:")
        for method in undone:
            diffs = [a - b for a, b in zip(p50s[method], p50s["copy"], strict=True)]
            print(f"  {method:<16} " + " ".join(f"{x:+.0f}" for x in diffs))
    print("\np50 in each round:")
    for method in methods:
        print(f"  {method:<16} " + " ".join(f"{x:.0f}" for x in p50s[method]))


if __name__ == "__main__":
    main()
