"""The synthetic store ``bench.scale.recall_scale`` measures, made inside PostgreSQL: normal
datasets and the heavy ones (random or clustered vectors, Zipf-word documents, three
chunks an episode) loaded with their HNSW and GIN indexes dropped, then the indexes built
(on every partition, or on the heavy datasets' only) and the tables analysed (``build``)."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from bench.scale.recall.common import (
    CENTROIDS,
    CLUSTERED,
    DIM,
    HEAVY,
    NOISE_SCALE,
    TEXT,
    log,
)
from bench.scale.recall.text import load_text


def _words(count: int, seed_column: str) -> str:
    """SQL: ``count`` Zipf-distributed words (a few common, most rare), as text."""
    return (
        f"(SELECT string_agg('w' || (1 + floor(5000 * power(random(), 3)))::int, ' ') "
        f"FROM generate_series(1, {count}) k WHERE {seed_column} IS NOT NULL)"
    )


def _vector(seed_column: str, centroid: str | None = None) -> str:
    """SQL: a random unit vector (the correlated WHERE makes it one per row); with
    ``centroid`` (an SQL expression numbering a row of ``scale_centroids``), that centroid
    plus noise (``NOISE_SCALE``), normalised: a topic's texts, as real embeddings
    cluster."""
    if centroid is None:
        return (
            f"(SELECT l2_normalize(array_agg(random() - 0.5)::vector) "
            f"FROM generate_series(1, {DIM}) d WHERE {seed_column} IS NOT NULL)"
        )
    return (
        f"(SELECT l2_normalize(sc.v + array_agg((random() - 0.5) * {NOISE_SCALE})::vector) "
        f"FROM generate_series(1, {DIM}) d, scale_centroids sc "
        f"WHERE sc.n = {centroid} AND {seed_column} IS NOT NULL GROUP BY sc.v)"
    )


def load(
    conn: psycopg.Connection,
    *,
    first: int,
    count: int,
    dataset_sql: str,
    chunks: int = 3,
    clustered: bool = False,
) -> None:
    """``count`` threads, episodes and ``chunks`` chunks each, numbered from ``first``;
    ``dataset_sql`` gives episode ``i``'s dataset; ``clustered``: vectors around episode
    ``i``'s topic (a centroid) instead of uniformly random."""
    params = {"first": first, "last": first + count - 1}
    topic = f"mod(i * 7919, {CENTROIDS})" if clustered else None
    starts = ", ".join(f"({1 + 2 * k})" for k in range(chunks))
    conn.execute(
        f"""
        INSERT INTO threads (thread_id, dataset, label, last_sequence, captured_sequence,
                             last_message_at, last_activity_at)
        SELECT md5('t' || i)::uuid, {dataset_sql},
               '\\x00'::bytea || convert_to('thread-' || i, 'UTF8'), 8, 8, now(), now()
        FROM generate_series(%(first)s::bigint, %(last)s::bigint) i
        """,
        params,
    )
    conn.execute(
        f"""
        INSERT INTO episodes (episode_id, thread_id, dataset, status, semantic_status, trigger,
                              start_sequence, end_sequence, message_count, started_at, ended_at,
                              summary, embedding, completed_at, search_vector, search_length)
        SELECT md5('e' || i)::uuid, md5('t' || i)::uuid, {dataset_sql}, 'completed',
               'skipped', 'explicit', 1, 8, 8, t.ended - interval '10 minutes', t.ended,
               '\\x00'::bytea || convert_to('summary of thread ' || i, 'UTF8'), {_vector("i", topic)},
               now(), d.v, (SELECT sum(coalesce(array_length(x.positions, 1), 1))
                            FROM unnest(d.v) x)
        FROM generate_series(%(first)s::bigint, %(last)s::bigint) i
        CROSS JOIN LATERAL (
            SELECT now() - interval '1 second' * floor(random() * 365 * 86400) AS ended
            WHERE i IS NOT NULL) t
        CROSS JOIN LATERAL (SELECT to_tsvector('english', {_words(60, "i")}) AS v) d
        """,
        params,
    )
    conn.execute(
        f"""
        INSERT INTO message_chunks (thread_id, start_sequence, start_offset, end_sequence,
                                    dataset, embedding, search_vector, search_length)
        SELECT md5('t' || i)::uuid, c.s, 0, c.s + 3, {dataset_sql}, {_vector("c.s + i", topic)},
               tv.v, (SELECT sum(coalesce(array_length(x.positions, 1), 1)) FROM unnest(tv.v) x)
        FROM generate_series(%(first)s::bigint, %(last)s::bigint) i
        CROSS JOIN (VALUES {starts}) c(s)
        CROSS JOIN LATERAL (SELECT to_tsvector('english', {_words(20, "c.s + i")}) AS v) tv
        """,
        params,
    )


def centroids(seed: int) -> list[list[float]]:
    """The clustered dataset's topics: ``CENTROIDS`` random unit vectors (also the queries')."""
    rng = random.Random(seed)
    out = []
    for _ in range(CENTROIDS):
        v = [rng.gauss(0.0, 1.0) for _ in range(DIM)]
        norm = sum(x * x for x in v) ** 0.5
        out.append([x / norm for x in v])
    return out


def build(
    conn: psycopg.Connection,
    episodes: int,
    datasets: int,
    heavy: int,
    *,
    chunks: int = 3,
    clustered: int = 0,
    seed: int = 11,
    heavy_indexes_only: bool = False,
    text: int = 0,
    text_mode: str = "late",
    text_cache: str | None = None,
) -> dict[str, float]:
    """The store (see the module docstring); returns seconds per phase."""
    timings: dict[str, float] = {}
    started = time.monotonic()
    # Indexes that slow a bulk load down by an order of magnitude are built afterwards.
    indexes = conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN "
        "('episodes', 'message_chunks') AND (indexdef ILIKE '%%USING hnsw%%' "
        "OR indexdef ILIKE '%%USING gin%%')"
    ).fetchall()
    for name, _ in indexes:
        conn.execute(f"DROP INDEX {name}")
    conn.execute(
        "CREATE TABLE scale_centroids (n int PRIMARY KEY, v vector(%s))" % DIM  # noqa: UP031
    )
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO scale_centroids (n, v) VALUES (%s, %s::vector)",
            [(n, str(v)) for n, v in enumerate(centroids(seed))],
        )
    conn.execute(
        "INSERT INTO datasets (dataset) SELECT 'ds-' || lpad(g::text, 5, '0') "
        "FROM generate_series(0, %(n)s - 1) g",
        {"n": datasets},
    )
    conn.execute("INSERT INTO datasets (dataset) VALUES (%s), (%s)", (HEAVY, CLUSTERED))
    if text:
        conn.execute("INSERT INTO datasets (dataset) VALUES (%s)", (TEXT,))
    normal = f"'ds-' || lpad(mod(i, {datasets})::text, 5, '0')"
    step = 100_000
    parts = [("normal", 1, episodes, normal, chunks, False)]
    parts.append(("heavy", episodes + 1, heavy, f"'{HEAVY}'", 3, False))
    parts.append(("clustered", episodes + heavy + 1, clustered, f"'{CLUSTERED}'", 3, True))
    for label, start, total, dataset_sql, per_episode, topics in parts:
        for first in range(start, start + total, step):
            n = min(step, start + total - first)
            load(
                conn,
                first=first,
                count=n,
                dataset_sql=dataset_sql,
                chunks=per_episode,
                clustered=topics,
            )
            log(f"  {label} episodes {first + n - start} ({time.monotonic() - started:.0f}s)")
    if text:
        timings.update(
            load_text(
                conn,
                first=episodes + heavy + clustered + 1,
                count=text,
                seed=seed,
                mode=text_mode,
                cache=text_cache,
            )
        )
    timings["load"] = time.monotonic() - started
    timings.update(
        create_indexes(conn, indexes, heavy_partitions(conn) if heavy_indexes_only else None)
    )
    t = time.monotonic()
    conn.execute("VACUUM ANALYZE")
    timings["vacuum analyze"] = time.monotonic() - t
    timings["total"] = time.monotonic() - started
    return timings


def heavy_partitions(conn: psycopg.Connection) -> dict[str, list[str]]:
    """Per table, the partitions that hold the heavy datasets."""
    return {
        table: sorted(
            {
                str(
                    conn.execute(
                        f"SELECT tableoid::regclass FROM {table} WHERE dataset = %s LIMIT 1", (d,)
                    ).fetchone()[0]
                )  # type: ignore[index]
                for d in (HEAVY, CLUSTERED, TEXT)
                if conn.execute(
                    f"SELECT 1 FROM {table} WHERE dataset = %s LIMIT 1", (d,)
                ).fetchone()
            }
        )
        for table in ("episodes", "message_chunks")
    }


def create_indexes(
    conn: psycopg.Connection,
    indexes: list[tuple[str, str]],
    partitions: dict[str, list[str]] | None = None,
) -> dict[str, float]:
    """Builds the bulk load's dropped indexes (``pg_indexes`` rows of the parents); returns
    seconds per index. ``partitions``: only on these partitions of each table (what the
    heavy datasets' queries read: a statement naming one dataset reads one partition, and
    the normal datasets' exact path reads none of these indexes), not the whole table."""
    # HNSW builds many times faster when the graph fits maintenance_work_mem (per partition:
    # the indexes of a hash-partitioned table are built one partition at a time).
    conn.execute("SET maintenance_work_mem = '6GB'")
    conn.execute("SET max_parallel_maintenance_workers = 2")
    timings: dict[str, float] = {}
    for name, definition in indexes:
        # pg_indexes shows a partitioned table's index as ON ONLY (the parent alone).
        table = (
            "message_chunks" if "message_chunks" in definition.split(" USING ")[0] else "episodes"
        )
        if partitions is None:
            statements = [(name, definition.replace(" ON ONLY ", " ON "))]
        else:
            statements = [
                (
                    f"{name}_{part}",
                    definition.replace(f"INDEX {name} ", f"INDEX {name}_{part} ").replace(
                        f" ON ONLY public.{table} ", f" ON {part} "
                    ),
                )
                for part in partitions[table]
            ]
        for label, statement in statements:
            t = time.monotonic()
            conn.execute(statement)
            timings[label] = time.monotonic() - t
            log(f"  {label} {timings[label]:.0f}s")
    return timings


def keep_statistics(url: str, above: int) -> list[tuple[str, float]]:
    """What the Scheduler's maintenance does for a store's datasets of more than ``above``
    completed episodes before Recall reads their kept statistics and count
    (``episodic.store.kept_statistics``: ``due``, then ``refresh`` each, which seeds the
    count its writers keep): each dataset counted, with its seconds. Nothing for a store
    whose statistics are fresh. Without it the bench would time the approximate path that
    counts the statistics on every call, which a deployment runs only until the
    maintenance's first pass (``EPISODIC_STATISTICS_INTERVAL``)."""
    from episodic.store import kept_statistics
    from episodic.store.db import make_engine

    engine = make_engine(url, pool_size=1)
    try:
        with engine.connect() as conn:
            due = kept_statistics.due(conn, above=above)
        counted = []
        for dataset in due:
            started = time.monotonic()
            kept_statistics.refresh(engine, dataset)
            counted.append((dataset, time.monotonic() - started))
        return counted
    finally:
        engine.dispose()


#: The Citus cluster's settings for a store of a 100k dataset: the plain store's buffers
#: (a node's share), and each worker's memory to build a shard's HNSW index, which a
#: session's SET on the coordinator does not reach (64 MB built the heavy shard's chunk
#: index for over 5 minutes without finishing; 4 GB in 283 s).
CITUS_SETTINGS = {
    "shared_buffers": "2GB",
    "maintenance_work_mem": "4GB",
    "max_parallel_maintenance_workers": "2",
    "max_wal_size": "4GB",
}


@contextmanager
def citus_store() -> Iterator[str]:
    """A new database on a Citus cluster started for it (a coordinator and two workers on
    this machine: :mod:`episodic.testing.citus`), migrated and distributed the documented
    way (``distribute.sql``: 64 shards, one partition per table); its URL on the
    coordinator. The cluster stops, and its files go, afterwards."""
    from episodic.testing.citus import CitusDatabases, citus_cluster

    with citus_cluster(settings=CITUS_SETTINGS) as cluster:
        yield CitusDatabases(cluster).create()
