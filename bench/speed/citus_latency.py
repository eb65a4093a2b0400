"""AddMessages, GetThread and Recall on Citus beside one PostgreSQL, in the same run.

    .venv/bin/python -m bench.speed.citus_latency [--datasets 12] [--threads 2] [--calls 300]

Starts one PostgreSQL (the test harness's) and a Citus cluster (a coordinator and two
workers on this machine, ``episodic.testing.citus``), makes a database on each the
documented way (``migrate``, then on Citus ``distribute.sql``), and runs the four services
against each. It fills ``--datasets`` datasets with ``--threads`` threads of eight messages
each, ends them and waits until every episode is summarised. Then it times, interleaved in
a shuffled order so both see the same machine load:

* AddMessages of one message to a random thread (the thread's route is remembered: one
  statement);
* GetThread of a random thread by id: ``warm`` through the Ingest that created it (the
  remembered route: one shard), ``other`` through a second Ingest replica (its first
  lookup of each id searches every shard, then it remembers the route), and ``missing``,
  an id no dataset holds (never remembered: every shard each time, as before this change
  for every call);
* Recall of a 3-word query in a random dataset.

Prints p50/p95/p99 per backend and the Citus/PostgreSQL ratio at p50 and p95, and the
statement-level cost of the by-id lookup on Citus (every shard against the dataset's own
shard), with the load average: on a shared machine only the ratios mean anything.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import grpc
import psycopg

from episodic.testing.citus import CitusDatabases, citus_cluster
from episodic.testing.database import test_server
from episodic.testing.processes import ServiceProcess, start_service, wait_until
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as ipb
from episodic.v1 import ingest_service_pb2_grpc as ig
from episodic.v1 import recall_service_pb2 as rpb
from episodic.v1 import recall_service_pb2_grpc as rg

WORDS = [
    "trip",
    "kyoto",
    "budget",
    "train",
    "hotel",
    "ramen",
    "museum",
    "flight",
    "passport",
    "visa",
    "garden",
    "temple",
    "river",
    "bike",
    "rain",
    "umbrella",
    "dinner",
    "booking",
    "refund",
    "delay",
]


class Backend:
    """The four services over one database, and what was written through them."""

    def __init__(self, name: str, url: str) -> None:
        self.name = name
        self.url = url
        self.procs: list[ServiceProcess] = []
        scheduler = self._start("scheduler", {"EPISODIC_SCHEDULER_POLL_INTERVAL": "0.2"})
        address = {"EPISODIC_SCHEDULER_ADDRESS": scheduler.address}
        self.ingest = ig.IngestServiceStub(self._start("ingest", address).channel())
        self.cold_ingest = ig.IngestServiceStub(self._start("ingest", address).channel())
        self._start("summariser", {"EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2"})
        self.recall = rg.RecallServiceStub(self._start("recall", {}).channel())
        self.threads: list[tuple[str, str]] = []  # (dataset, thread id)
        self.times: dict[str, list[float]] = {}

    def _start(self, name: str, env: dict[str, str]) -> ServiceProcess:
        proc = start_service(name, self.url, env)
        self.procs.append(proc)
        return proc

    def fill(self, datasets: int, threads: int, rng: random.Random) -> None:
        for d in range(datasets):
            dataset = f"bench{d:02d}"
            for _ in range(threads):
                thread = self.ingest.CreateThread(ipb.CreateThreadRequest(dataset=dataset)).thread
                self.ingest.AddMessages(
                    ipb.AddMessagesRequest(
                        thread_id=thread.thread_id,
                        messages=[
                            ipb.NewMessage(
                                role=e.ROLE_USER if i % 2 == 0 else e.ROLE_ASSISTANT,
                                content=" ".join(rng.choices(WORDS, k=12)),
                            )
                            for i in range(8)
                        ],
                    ),
                    timeout=30,
                )
                self.ingest.EndThread(ipb.EndThreadRequest(thread_id=thread.thread_id), timeout=30)
                self.threads.append((dataset, thread.thread_id))
        want = len(self.threads)

        def summarised() -> bool:
            with psycopg.connect(self.url) as db:
                row = db.execute(
                    "SELECT count(*) FROM episodes WHERE status = 'completed'"
                ).fetchone()
            return bool(row and row[0] >= want)

        wait_until(summarised, timeout=600, message=f"{self.name}: every episode summarised")

    def timed(self, what: str, call: Callable[[], object]) -> None:
        start = time.perf_counter()
        call()
        self.times.setdefault(what, []).append((time.perf_counter() - start) * 1000)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.terminate()


def _calls(backend: Backend, rng: random.Random) -> list[tuple[str, Callable[[], object]]]:
    dataset, thread = rng.choice(backend.threads)
    query = " ".join(rng.sample(WORDS, 3))
    return [
        (
            "AddMessages",
            lambda: backend.ingest.AddMessages(
                ipb.AddMessagesRequest(
                    thread_id=thread,
                    messages=[ipb.NewMessage(role=e.ROLE_USER, content=query)],
                ),
                timeout=30,
            ),
        ),
        (
            "GetThread warm",
            lambda: backend.ingest.GetThread(ipb.GetThreadRequest(thread_id=thread), timeout=30),
        ),
        (
            "GetThread other",
            lambda: backend.cold_ingest.GetThread(
                ipb.GetThreadRequest(thread_id=thread), timeout=30
            ),
        ),
        ("GetThread missing", lambda: _missing(backend)),
        (
            "Recall",
            lambda: backend.recall.Recall(
                rpb.RecallRequest(dataset=dataset, query=query), timeout=30
            ),
        ),
    ]


def _missing(backend: Backend) -> None:
    """GetThread of an id no dataset holds: never remembered, so always the search."""
    try:
        backend.ingest.GetThread(ipb.GetThreadRequest(thread_id=str(uuid.uuid4())), timeout=30)
    except grpc.RpcError as err:
        assert err.code() == grpc.StatusCode.NOT_FOUND, err
    else:
        raise AssertionError("a random thread id was found")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _lookup_cost(url: str, threads: list[tuple[str, str]], n: int, rng: random.Random) -> None:
    """The by-id lookup as a statement on the coordinator: every shard, or the dataset's."""
    every, one = [], []
    with psycopg.connect(url, autocommit=True) as db:
        for _ in range(n):
            dataset, thread = rng.choice(threads)
            for out, sql, params in rng.sample(
                [
                    (every, "SELECT dataset FROM threads WHERE thread_id = %s", (thread,)),
                    (
                        one,
                        "SELECT dataset FROM threads WHERE thread_id = %s "
                        "AND dataset = ANY(%s::text[])",
                        (thread, [dataset]),
                    ),
                ],
                2,
            ):
                start = time.perf_counter()
                db.execute(sql, params).fetchone()
                out.append((time.perf_counter() - start) * 1000)
    print(
        f"by-id lookup statement on Citus, p50: every shard {statistics.median(every):.2f} ms, "
        f"the dataset's shard {statistics.median(one):.2f} ms "
        f"({statistics.median(every) / statistics.median(one):.1f}x)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2, help="threads per dataset")
    parser.add_argument("--calls", type=int, default=300, help="timed rounds")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    print(f"load average at start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")

    with (
        tempfile.TemporaryDirectory(prefix="episodic-bench-pg-") as plain_dir,
        test_server(Path(plain_dir)) as plain_dbs,
        citus_cluster() as cluster,
    ):
        backends = [
            Backend("postgres", plain_dbs.create()),
            Backend("citus", CitusDatabases(cluster).create()),
        ]
        try:
            for b in backends:
                started = time.perf_counter()
                b.fill(args.datasets, args.threads, rng)
                print(f"{b.name}: filled and summarised in {time.perf_counter() - started:.0f} s")
            for round_ in range(args.calls + 20):
                work = [(b, what, call) for b in backends for what, call in _calls(b, rng)]
                rng.shuffle(work)
                for b, what, call in work:
                    if round_ < 20:  # untimed warm-up
                        call()
                    else:
                        b.timed(what, call)
            plain, citus = backends
            print(f"\n{'call':<19}{'backend':<10}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}")
            for what in plain.times:
                for b in backends:
                    t = b.times[what]
                    print(
                        f"{what:<19}{b.name:<10}{_pct(t, 0.5):>9.2f}{_pct(t, 0.95):>9.2f}"
                        f"{_pct(t, 0.99):>9.2f}"
                    )
                ratio50 = _pct(citus.times[what], 0.5) / _pct(plain.times[what], 0.5)
                ratio95 = _pct(citus.times[what], 0.95) / _pct(plain.times[what], 0.95)
                print(f"{'':<19}{'ratio':<10}{ratio50:>8.2f}x{ratio95:>8.2f}x")
            _lookup_cost(citus.url, citus.threads, args.calls, rng)
        finally:
            for b in backends:
                b.stop()
    print(f"load average at end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
