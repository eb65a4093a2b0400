"""Bytes per row, measured on a filled database: the inputs of the capacity model (README,
"Beyond one database"; docs/guides/citus.md, "What a row costs, measured here").

    .venv/bin/python -m bench.scale.capacity [--episodes 20000] [--datasets 200] [--citus]

Fills a scratch database (partitioned schema, 8 partitions) with bench.speed.recall_speed's
synthetic store — per episode one thread of 8 messages (15 Zipf words each), the episode
with its 384-d embedding and lexical document, 3 message chunks with their own embeddings
— then prints, per table: rows, the average row as stored (``pg_column_size`` of the whole
row), and heap + TOAST + indexes per row (``pg_total_relation_size`` summed over the
partitions, divided by the rows), plus the average message content, so the per-message
figure can be scaled to longer messages.

With ``--citus`` the same run also starts a Citus cluster on this machine (a coordinator
and two workers, episodic.testing.citus), makes its database the documented way (``episodic
migrate`` with one partition per table, then k8s/overlays/citus/distribute.sql), fills it
with the very rows of the single PostgreSQL (``COPY`` through the coordinator, table by
table in foreign-key order: bench.speed.recall_speed's ``build`` reads across datasets in one
statement, which Citus refuses), and prints the same figures measured there
(``citus_total_relation_size`` summed over the partitions, i.e. over all shards) beside the
single PostgreSQL's, their ratio, and how rows and bytes spread over the workers.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import psycopg

from bench.harness import REPO
from bench.harness.stores import build

TABLES = ("threads", "messages", "episodes", "message_chunks", "datasets")
#: Foreign-key order: referenced tables first (the order the Citus copy loads them).
LOAD_ORDER = ("datasets", "threads", "messages", "episodes", "message_chunks")
#: Messages, episodes and chunks per message in the bench's shape (8 messages an episode,
#: 3 chunks an episode), for the per-message figure of docs/guides/citus.md.
PER_MESSAGE = {"messages": 1.0, "message_chunks": 3 / 8, "episodes": 1 / 8, "threads": 1 / 8}

Figures = dict[str, tuple[int, int, int]]  # table -> (rows, row bytes, total bytes)


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _partitions(conn: psycopg.Connection, table: str) -> list[str]:
    rows = conn.execute(
        "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = %s::regclass "
        "ORDER BY 1",
        (table,),
    ).fetchall()
    return [r[0] for r in rows] or [table]


def measure(conn: psycopg.Connection, *, citus: bool = False) -> Figures:
    """Per table: rows, average row as stored, heap + TOAST + indexes over all partitions
    (on Citus over all their shards, ``citus_total_relation_size``)."""
    size = "citus_total_relation_size" if citus else "pg_total_relation_size"
    figures: Figures = {}
    for table in TABLES:
        rows, row_bytes = conn.execute(
            f"SELECT count(*), coalesce(avg(pg_column_size(t.*)), 0)::int FROM {table} t"
        ).fetchone()  # type: ignore[misc]
        total = 0
        for part in _partitions(conn, table):
            one = conn.execute(f"SELECT {size}(%s::regclass)", (part,)).fetchone()
            total += int(one[0]) if one else 0
        figures[table] = (int(rows), int(row_bytes), total)
    return figures


def per_message(figures: Figures) -> float:
    return sum(
        share * figures[table][2] / max(figures[table][0], 1)
        for table, share in PER_MESSAGE.items()
    )


def print_single(figures: Figures) -> None:
    print(f"  {'table':15s} {'rows':>9s} {'row bytes':>10s} {'total bytes/row':>16s}")
    for table, (rows, row_bytes, total) in figures.items():
        print(f"  {table:15s} {rows:9d} {row_bytes:10d} {total // max(rows, 1):16d}")


def copy_into(source: psycopg.Connection, target: psycopg.Connection) -> None:
    """The single PostgreSQL's rows into the Citus coordinator's distributed tables, one
    ``COPY`` stream per table (binary; the coordinator routes each row to its shard)."""
    for table in LOAD_ORDER:
        columns = [
            r[0]
            for r in target.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass "
                "AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum",
                (table,),
            ).fetchall()
        ]
        names = ", ".join(f'"{c}"' for c in columns)
        started = time.monotonic()
        with (
            source.cursor().copy(
                f"COPY (SELECT {names} FROM {table}) TO STDOUT (FORMAT binary)"
            ) as out,
            target.cursor().copy(f"COPY {table} ({names}) FROM STDIN (FORMAT binary)") as into,
        ):
            for block in out:
                into.write(block)
        print(f"  copied {table} in {time.monotonic() - started:.0f}s", file=sys.stderr)


def spread(conn: psycopg.Connection) -> list[tuple[str, str, int, int]]:
    """(table, node, rows, bytes) per table and worker: rows counted on each shard
    (``run_command_on_shards``), bytes from ``citus_shards.shard_size`` (heap + TOAST +
    indexes of the shard)."""
    out: list[tuple[str, str, int, int]] = []
    for table in TABLES:
        parts = _partitions(conn, table)
        rows = conn.execute(
            """
            SELECT s.nodename || ':' || s.nodeport, sum(r.result::bigint)::bigint,
                   sum(s.shard_size)::bigint
            FROM unnest(%s::text[]) p(name)
            CROSS JOIN LATERAL run_command_on_shards(p.name, 'SELECT count(*) FROM %%s') r
            JOIN citus_shards s ON s.shardid = r.shardid
            GROUP BY 1 ORDER BY 1
            """,
            (parts,),
        ).fetchall()
        out += [(table, node, int(n), int(b)) for node, n, b in rows]
    return out


def run_citus(source: psycopg.Connection, single: Figures) -> None:
    from episodic.testing.citus import CitusDatabases, citus_cluster

    started = time.monotonic()
    with citus_cluster(workers=2) as cluster:
        url = CitusDatabases(cluster).create()  # migrate (1 partition) + distribute.sql
        print(f"  Citus cluster up and migrated in {time.monotonic() - started:.0f}s",
              file=sys.stderr)  # fmt: skip
        with psycopg.connect(url, autocommit=True) as conn:
            copy_into(source, conn)
            conn.execute("VACUUM ANALYZE")  # the coordinator propagates it to the shards
            figures = measure(conn, citus=True)
            shards = conn.execute(
                "SELECT count(DISTINCT shardid) FROM citus_shards WHERE table_name = "
                "'messages_p0'::regclass"
            ).fetchone()
            workers = [f"{n.name} 127.0.0.1:{n.port}" for n in cluster.nodes[1:]]
            print()
            print(
                "Citus: a coordinator and 2 workers on this machine "
                f"({'; '.join(workers)}), {shards[0] if shards else '?'} shards per table, "
                "1 partition per table (EPISODIC_DATABASE_PARTITIONS=1, as documented); the "
                "single PostgreSQL above has 8 partitions per table. Same rows (copied)."
            )
            print(
                f"  {'table':15s} {'rows':>9s} | {'row bytes':>9s} {'':>9s} | "
                f"{'total bytes/row':>15s} {'':>9s} {'ratio':>6s}"
            )
            print(
                f"  {'':15s} {'':9s} | {'single':>9s} {'Citus':>9s} | "
                f"{'single':>15s} {'Citus':>9s} {'C/s':>6s}"
            )
            for table in TABLES:
                rows, row_bytes, total = single[table]
                c_rows, c_row_bytes, c_total = figures[table]
                per = total / max(rows, 1)
                c_per = c_total / max(c_rows, 1)
                note = "" if c_rows == rows else f"  (Citus rows {c_rows})"
                print(
                    f"  {table:15s} {rows:9d} | {row_bytes:9d} {c_row_bytes:9d} | "
                    f"{per:15.0f} {c_per:9.0f} {c_per / max(per, 1):6.2f}{note}"
                )
            one, other = per_message(single), per_message(figures)
            print(
                "  per message all told (messages + 3/8 chunks + 1/8 episodes + 1/8 threads): "
                f"single {one:,.0f} B, Citus {other:,.0f} B, ratio {other / one:.2f}"
            )
            totals = [sum(f[t][2] for t in TABLES) for f in (single, figures)]
            print(
                f"  these tables in all: single {totals[0] / 2**20:,.1f} MiB, Citus "
                f"{totals[1] / 2**20:,.1f} MiB (coordinator's empty local copies included)"
            )
            print()
            print("How rows and bytes spread over the workers (citus_shards, shard by shard):")
            print(f"  {'table':15s} {'worker':22s} {'rows':>9s} {'share':>6s} {'bytes':>13s} "
                  f"{'share':>6s} {'bytes/row':>10s}")  # fmt: skip
            placement = spread(conn)
            names = {f"127.0.0.1:{n.port}": n.name for n in cluster.nodes}
            for table in TABLES:
                mine = [p for p in placement if p[0] == table]
                all_rows = sum(p[2] for p in mine) or 1
                all_bytes = sum(p[3] for p in mine) or 1
                for _, node, n, b in mine:
                    print(
                        f"  {table:15s} {names.get(node, node):22s} {n:9d} {n / all_rows:6.1%} {b:13,d} "
                        f"{b / all_bytes:6.1%} {b // max(n, 1):10d}"
                    )
            datasets = conn.execute(
                "SELECT s.nodename || ':' || s.nodeport, count(*) FROM datasets d "
                "JOIN citus_shards s ON s.shardid = "
                "get_shard_id_for_distribution_column('datasets', d.dataset) "
                "GROUP BY 1 ORDER BY 1"
            ).fetchall()
            print(
                "  datasets per worker: " + ", ".join(f"{names.get(n, n)} {c}" for n, c in datasets)
            )
    print(f"  Citus part took {time.monotonic() - started:.0f}s", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=20_000)
    parser.add_argument("--datasets", type=int, default=200)
    parser.add_argument("--database-url", help="admin URL of a PostgreSQL with pgvector")
    parser.add_argument(
        "--citus",
        action="store_true",
        help="also fill a local Citus cluster (coordinator + 2 workers) with the same rows "
        "and print its figures beside the single PostgreSQL's, and the spread per worker",
    )
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO))
    from episodic.testing.database import scratch_database

    started = time.monotonic()
    print(f"load average at start: {_load()}")
    with (
        scratch_database(args.database_url, "episodic-capacity-") as url,
        psycopg.connect(url, autocommit=True) as conn,
    ):
        build(conn, args.episodes, args.datasets, 384)
        conn.execute("VACUUM ANALYZE")
        single = measure(conn)
        print(f"{args.episodes} episodes over {args.datasets} datasets, 384-d vectors:")
        print_single(single)
        content = conn.execute("SELECT avg(octet_length(content))::int FROM messages").fetchone()
        print(f"  average message content: {content[0] if content else 0} bytes")  # type: ignore[index]
        print(f"  per message all told: {per_message(single):,.0f} B")
        print(f"load average after the single PostgreSQL: {_load()}")
        if args.citus:
            run_citus(conn, single)
        print(f"load average at the end: {_load()}")
        print(f"wall time: {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
