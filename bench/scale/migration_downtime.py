"""How long revision 0010 (hash partitions by dataset) holds a filled database, in one run.

    .venv/bin/python -m bench.scale.migration_downtime [--episodes 20000] [--datasets 200]

0010 copies every dataset table into its partitioned form under an exclusive lock, so
Ingest, the Scheduler, the Summariser and Recall wait for it: that time is the downtime to
plan for. This fills a database at head with bench.speed.recall_speed's synthetic store
(threads, 8 messages per episode, episodes with vectors and lexical documents, 3 chunks
per episode), migrates it down to 0009 (the plain layout an older deployment has), then
times the upgrade to 0010 and, for scale, a bare ``CREATE TABLE … AS SELECT`` copy of the
same tables on the same server (the floor of any copying migration, without indexes).
Prints rows, bytes, seconds, rows/s and the ratio, with the load average.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import psycopg

from bench.harness import REPO
from bench.harness.report import log
from bench.harness.stores import build

TABLES = ("datasets", "threads", "messages", "episodes", "message_chunks")


def _sizes(conn: psycopg.Connection) -> tuple[int, int]:
    rows = 0
    for table in TABLES:
        count = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        rows += count[0] if count else 0
    size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return rows, size[0] if size else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=20_000)
    parser.add_argument("--datasets", type=int, default=200)
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO))
    from episodic.store import migrate
    from episodic.testing.database import scratch_database

    print(f"load average at start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with scratch_database(None, "episodic-downtime-") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            build(conn, args.episodes, args.datasets, 384)
        log("migrating down to 0009 (the plain layout) …")
        migrate.downgrade(url, 384, "0009")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
            rows, size = _sizes(conn)
            kinds = conn.execute("SELECT count(*) FROM pg_class WHERE relkind = 'p'").fetchone()
            assert kinds == (0,), "0009 still has partitioned tables"
            log("the floor: CREATE TABLE … AS SELECT of the same tables …")
            started = time.monotonic()
            for table in TABLES:
                conn.execute(f"CREATE TABLE floor_{table} AS SELECT * FROM {table}")
            floor = time.monotonic() - started
            for table in TABLES:
                conn.execute(f"DROP TABLE floor_{table}")
        log("upgrading 0009 → 0010 (the downtime) …")
        started = time.monotonic()
        migrate.upgrade(url, 384, "0010")
        upgrade = time.monotonic() - started
        with psycopg.connect(url, autocommit=True) as conn:
            after_rows, after_size = _sizes(conn)
        assert after_rows == rows, f"rows before {rows}, after {after_rows}"
    print(
        f"{args.episodes} episodes over {args.datasets} datasets: {rows:,} rows in "
        f"{', '.join(TABLES)}; database {size / 2**20:,.0f} MiB before, "
        f"{after_size / 2**20:,.0f} MiB after"
    )
    print(
        f"0009 → 0010: {upgrade:.1f} s ({rows / upgrade:,.0f} rows/s, "
        f"{size / 2**20 / upgrade:,.1f} MiB/s); bare copy without indexes {floor:.1f} s "
        f"({upgrade / floor:.1f}× the floor)"
    )
    print(f"load average at end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
