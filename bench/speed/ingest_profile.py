"""Where one AddMessages call's time goes: round trips to PostgreSQL, CPU per thread of the
Ingest and of the client, and py-spy samples of the Ingest's handler threads by layer.

Starts its own embedded PostgreSQL and the Ingest as a real process (as
``bench/speed/ingest_bench.py`` does), then, for one client writing batches of ``--batch``
messages to one thread:

1. round trips: the server's ``log_statement = all`` for 10 calls (a transaction shows as
   BEGIN, its statements and COMMIT: three round trips for one statement);
2. CPU per call of every thread of both processes (``/proc/PID/task``), while
3. ``py-spy record`` samples the Ingest and this client for ``--seconds`` (``--native``
   adds C frames), and the handler threads' samples are summed by layer (database wait,
   psycopg, SQLAlchemy, gRPC, sealing, …; the first layer found from the innermost frame
   out). The raw py-spy files are kept in ``--out``.

Not part of pytest:

    .venv/bin/python -m bench.speed.ingest_profile [--batch 1] [--seconds 10] [--native] [--keyed]
        [--out DIR]

``--keyed``: every message carries an idempotency key made as the Python SDK makes them
(``auto:<uuid4>``), as SDK users' calls do.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.speed import ingest_bench as bench
from episodic.store.db import make_engine
from episodic.testing.database import test_server
from episodic.testing.keys import test_vault
from episodic.testing.processes import start_service

#: Layers of a handler thread's stack, tried from the innermost frame out (first match).
LAYERS = [
    ("database round trips (waiting on the socket)", r"Connection\.wait|^poll |^recv"),
    ("idle (no call)", r"concurrent/futures/thread.py:81\)|_queue_SimpleQueue_get"),
    ("psycopg (parameters, results)", r"psycopg"),
    ("SQLAlchemy (execute, results, pool)", r"sqlalchemy"),
    ("sealing", r"crypto\.py|cryptography"),
    ("metrics", r"episodic/metrics\.py|opentelemetry/metrics|metrics/_internal"),
    ("tracing", r"opentelemetry|telemetry\.py"),
    ("access", r"episodic/access\.py|episodic/guard\.py"),
    ("request checks", r"requests\.py|validation\.py|check_new_messages|_new_messages"),
    ("protobuf and responses", r"convert\.py|_message|protobuf"),
    ("Ingest domain and servicer", r"services/ingest/|ingest/domain|ingest/servicer"),
    ("gRPC Python", r"grpc/|cygrpc"),
    ("error interceptor", r"episodic/server\.py"),
    ("thread pool", r"concurrent/futures|threading\.py"),
]


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of each thread of ``pid``, by native thread id."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except FileNotFoundError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        out[task.name] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def thread_names(raw: Path) -> dict[str, str]:
    names = {}
    for line in raw.read_text().splitlines():
        m = re.match(r"thread \((\d+)\): ([^;]+)", line)
        if m:
            names[m.group(1)] = m.group(2)
    return names


def layers(raw: Path, threads: str) -> tuple[Counter[str], int]:
    counts: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        if not re.search(threads, frames[0]):
            continue
        total += int(n)
        for frame in reversed(frames[1:]):
            hit = next((name for name, rx in LAYERS if re.search(rx, frame)), None)
            if hit:
                counts[hit] += int(n)
                break
        else:
            counts["other"] += int(n)
    return counts, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--native", action="store_true", help="py-spy --native")
    parser.add_argument("--keyed", action="store_true", help="the SDK's idempotency keys")
    parser.add_argument("--out", type=Path, default=Path("ingest-profile"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    pyspy = str(Path(sys.executable).parent / "py-spy")
    print(f"load average {bench.loadavg()}")
    with tempfile.TemporaryDirectory() as tmp, test_server(Path(tmp)) as dbs:
        url = dbs.create()
        engine = make_engine(url, pool_size=1)
        with engine.begin() as conn:
            bench.KEY = test_vault(encrypt=True).for_write(conn, "bench")
        engine.dispose()
        env = {"EPISODIC_DB_POOL_SIZE": "10", "EPISODIC_GRPC_WORKERS": "16"}
        ingest = start_service("ingest", url, {**env, "EPISODIC_LOG_LEVEL": "ERROR"})
        try:
            thread_id = bench.make_threads(url, 1)[0]
            call, close = bench.grpc_client(ingest.address, thread_id, args.batch, keyed=args.keyed)
            for _ in range(50):  # the route is remembered, statements are prepared
                call()

            # 1. Round trips of 10 calls, from the server's statement log.
            marker = uuid.uuid4().hex
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute("ALTER SYSTEM SET log_statement = 'all'")
                admin.execute("SELECT pg_reload_conf()")
                admin.execute(f"SELECT 'start-{marker}'")
                time.sleep(0.5)  # the reload reaches the Ingest's backends
                admin.execute(f"SELECT 'begin-{marker}'")
                for _ in range(10):
                    call()
                admin.execute(f"SELECT 'end-{marker}'")
                admin.execute("ALTER SYSTEM RESET log_statement")
                admin.execute("SELECT pg_reload_conf()")
            log = (Path(tmp) / "pgdata" / "log").read_text(errors="replace")
            logged = log.split(f"begin-{marker}")[1].split(f"end-{marker}")[0]
            sent = [
                line.split("LOG:", 1)[1].strip()[:60]
                for line in logged.splitlines()
                # (the last line is the end marker's statement, cut at the marker)
                if "LOG:" in line and not line.rstrip().endswith("SELECT '")
            ]
            print(f"\nround trips for 10 calls: {len(sent)}")
            for text, n in Counter(sent).most_common():
                print(f"  {n:3d} x {text}")

            # 2 and 3. CPU per thread and py-spy samples under a steady one-client load.
            stop = threading.Event()
            calls = [0]

            def loop() -> None:
                while not stop.is_set():
                    call()
                    calls[0] += 1

            worker = threading.Thread(target=loop, name="client")
            worker.start()
            time.sleep(1)
            flags = ["-r", "200", "-d", str(args.seconds), "-f", "raw", "-t"]
            flags += ["--native"] if args.native else []
            spies = [
                subprocess.Popen(
                    [pyspy, "record", *flags, "-p", str(pid), "-o", str(args.out / f"{n}.txt")],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.STDOUT,
                )
                for n, pid in (("ingest", ingest.proc.pid), ("client", os.getpid()))
            ]
            before = {
                n: thread_cpu(p) for n, p in (("ingest", ingest.proc.pid), ("client", os.getpid()))
            }
            started = calls[0]
            for spy in spies:
                spy.wait()
            n_calls = calls[0] - started
            after = {
                n: thread_cpu(p) for n, p in (("ingest", ingest.proc.pid), ("client", os.getpid()))
            }
            stop.set()
            worker.join()
            close()
        finally:
            ingest.terminate()
    print(f"\n{n_calls} calls of batch {args.batch} while sampled ({args.seconds} s)")
    for name in ("ingest", "client"):
        names = thread_names(args.out / f"{name}.txt")
        per: dict[str, float] = {}
        for tid, cpu in after[name].items():
            thread = names.get(tid, "native (gRPC core)")
            per[thread] = per.get(thread, 0.0) + cpu - before[name].get(tid, 0.0)
        total = sum(per.values())
        print(f"{name} CPU per call: {total * 1000 / n_calls:.3f} ms — by thread:")
        for thread, cpu in sorted(per.items(), key=lambda kv: -kv[1]):
            if cpu > 0:
                print(f"  {cpu * 1000 / n_calls:7.3f} ms  {thread}")
    counts, total = layers(args.out / "ingest.txt", r"Service_\d")
    busy = total - counts.pop("idle (no call)", 0)
    print(f"\nIngest handler threads, py-spy samples while busy ({busy}), by layer:")
    for layer, n in counts.most_common():
        print(f"  {n / busy * 100:5.1f} %  {layer}")
    print(f"\nload average {bench.loadavg()}")


if __name__ == "__main__":
    main()
