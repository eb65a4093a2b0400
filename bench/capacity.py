"""Bytes per row, measured on a filled database: the inputs of the capacity model (README,
"Beyond one database").

    .venv/bin/python -m bench.capacity [--episodes 20000] [--datasets 200]

Fills a scratch database (partitioned schema, 8 partitions) with bench.recall_speed's
synthetic store — per episode one thread of 8 messages (15 Zipf words each), the episode
with its 384-d embedding and lexical document, 3 message chunks with their own embeddings
— then prints, per table: rows, the average row as stored (``pg_column_size`` of the whole
row), and heap + TOAST + indexes per row (``pg_total_relation_size`` summed over the
partitions, divided by the rows), plus the average message content, so the per-message
figure can be scaled to longer messages.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import psycopg

from bench.recall_speed import build

REPO = Path(__file__).resolve().parents[1]
TABLES = ("threads", "messages", "episodes", "message_chunks", "datasets")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=20_000)
    parser.add_argument("--datasets", type=int, default=200)
    parser.add_argument("--database-url", help="admin URL of a PostgreSQL with pgvector")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO))
    from episodic.testing.database import scratch_database

    print(f"load average at start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with (
        scratch_database(args.database_url, "episodic-capacity-") as url,
        psycopg.connect(url, autocommit=True) as conn,
    ):
        build(conn, args.episodes, args.datasets, 384)
        conn.execute("VACUUM ANALYZE")
        print(f"{args.episodes} episodes over {args.datasets} datasets, 384-d vectors:")
        print(f"  {'table':15s} {'rows':>9s} {'row bytes':>10s} {'total bytes/row':>16s}")
        for table in TABLES:
            rows, row_bytes, total = conn.execute(
                f"SELECT count(*), avg(pg_column_size(t.*))::int, "
                "(SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits "
                f"  WHERE inhparent = '{table}'::regclass) FROM {table} t"
            ).fetchone()  # type: ignore[misc]
            print(f"  {table:15s} {rows:9d} {row_bytes:10d} {int(total) // max(rows, 1):16d}")
        content = conn.execute("SELECT avg(octet_length(content))::int FROM messages").fetchone()
        print(f"  average message content: {content[0] if content else 0} bytes")  # type: ignore[index]
        print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
