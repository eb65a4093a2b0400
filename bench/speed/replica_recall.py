"""Recall latency through a streaming standby versus through the primary, in one run.

    .venv/bin/python -m bench.speed.replica_recall [--episodes 20000] [--datasets 200] [--queries 1000]

Starts an embedded primary, fills it with bench.speed.recall_speed's synthetic store (completed
episodes with lexical documents, chunks and 384-d vectors), makes a hot standby with
``pg_basebackup`` (streaming replication, both servers on this machine), waits until it has
replayed everything, then starts two Recall services with the hashing embedder: one reading
the primary, one with EPISODIC_DATABASE_READ_URL pointing at the standby. The same queries
(random dataset, 3 Zipf words) go to both in a shuffled order, sequentially from one client,
after an untimed warm-up read of each dataset on both servers. Prints p50/p95/p99 per path
and the standby/primary ratios. Both servers share this machine's 2 cores, so the standby
shows what the replica path costs, not the capacity a separate replica host adds.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import psycopg

from bench.harness import REPO
from bench.harness.report import log, percentiles
from bench.harness.stores import build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=20_000)
    parser.add_argument("--datasets", type=int, default=200)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO))
    from episodic.ops.runtime import EmbeddedPostgres
    from episodic.sdk.client import EpisodicClient
    from episodic.testing.database import TestDatabases, with_database
    from episodic.testing.processes import start_service
    from episodic.testing.replica import StreamingStandby

    rng = random.Random(args.seed)
    print(f"load average at start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="episodic-replica-")))
        tmp.chmod(0o755)
        primary = EmbeddedPostgres(tmp / "primary")
        admin_url = primary.start()
        stack.callback(primary.stop)
        url = TestDatabases(admin_url).create()
        with psycopg.connect(url, autocommit=True) as conn:
            build(conn, args.episodes, args.datasets, 384)
        standby = StreamingStandby(primary, tmp / "replica" / "data")
        standby.start()
        stack.callback(standby.stop)
        standby.wait_caught_up(admin_url, timeout=600)
        name = url.partition("?")[0].rsplit("/", 1)[1]
        standby_url = with_database(standby.url(), name)
        with psycopg.connect(standby_url, autocommit=True) as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)

        quiet = {"EPISODIC_LOG_LEVEL": "WARNING"}
        on_primary = start_service("recall", url, quiet, timeout=120)
        stack.callback(on_primary.terminate)
        on_standby = start_service(
            "recall", url, {**quiet, "EPISODIC_DATABASE_READ_URL": standby_url}, timeout=120
        )
        stack.callback(on_standby.terminate)
        clients = {
            "primary": stack.enter_context(EpisodicClient(recall=on_primary.address, timeout=30)),
            "standby": stack.enter_context(EpisodicClient(recall=on_standby.address, timeout=30)),
        }
        vocab = [f"w{i}" for i in range(1, 5001)]
        work = [
            (
                f"ds-{rng.randrange(args.datasets):04d}",
                " ".join(vocab[int(5000 * rng.random() ** 3)] for _ in range(3)),
            )
            for _ in range(args.queries)
        ]
        for dataset in {d for d, _ in work}:  # every dataset's pages cached on both servers
            for client in clients.values():
                client.recall(dataset, "warm up")
        times: dict[str, list[float]] = {k: [] for k in clients}
        log(f"measuring {len(work)} queries per path …")
        for dataset, query in work:
            order = list(clients.items())
            rng.shuffle(order)
            for key, client in order:
                started = time.perf_counter()
                client.recall(dataset, query)
                times[key].append(time.perf_counter() - started)

        stats = {k: percentiles(v) for k, v in times.items()}
        print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(
            f"Recall through gRPC, {args.episodes} episodes over {args.datasets} datasets, "
            f"{args.queries} sequential queries per path (hashing embedder):"
        )
        for key, s in stats.items():
            print(
                f"  {key:8s} p50 {s['p50'] * 1000:7.2f} ms  p95 {s['p95'] * 1000:7.2f} ms  "
                f"p99 {s['p99'] * 1000:7.2f} ms"
            )
        for p in ("p50", "p99"):
            print(f"  standby/primary at {p}: {stats['standby'][p] / stats['primary'][p]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
