"""Recall at scale: many normal datasets and one heavy one, exact ranking vs the approximate
candidate path, side by side in one run.

    .venv/bin/python -m bench.recall_scale [--episodes 1000000] [--datasets 10000]
        [--heavy 100000] [--queries 300] [--keep DIR]

Builds a synthetic store directly in SQL (no model, no messages: Recall never reads them):
``--episodes`` completed episodes spread over ``--datasets`` normal datasets, plus one heavy
dataset of ``--heavy`` episodes; each episode has a random summary vector, a lexical
document of 60 Zipf-distributed words and 3 message chunks (20 words each, random vectors)
— the rows ``index_episode`` writes. The HNSW indexes are dropped during the load and built
afterwards (with a generous ``maintenance_work_mem``), as a bulk import would.

Then, for random 3-word queries (query vectors from the hashing embedder: random-looking,
as the stored ones are), sequentially on one connection:

- ``normal exact``: Recall's statement on a random normal dataset (the exact formula over
  every candidate), timed in-process (``episodic.store.recall_queries.rank``: the SQL plus
  the row handling), and the bare statement through psycopg for the ratio;
- ``heavy exact`` and ``heavy approximate``: the same on the heavy dataset, the approximate
  path forced (``approximate_above`` 0) against the exact one forced (``approximate_above``
  above any size), and the bare statements of both;
- recall@5 and recall@10 of the approximate top N against the exact top N, over the same
  queries on the heavy dataset.

Prints the load average, p50/p99 per path and the ratios.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import psycopg
from pgvector.psycopg import register_vector

REPO = Path(__file__).resolve().parents[1]
HEAVY = "heavy-0000"
DIM = 384


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _words(count: int, seed_column: str) -> str:
    """SQL: ``count`` Zipf-distributed words (a few common, most rare), as text."""
    return (
        f"(SELECT string_agg('w' || (1 + floor(5000 * power(random(), 3)))::int, ' ') "
        f"FROM generate_series(1, {count}) k WHERE {seed_column} IS NOT NULL)"
    )


def _vector(seed_column: str) -> str:
    """SQL: a random unit vector (the correlated WHERE makes it one per row)."""
    return (
        f"(SELECT l2_normalize(array_agg(random() - 0.5)::vector) "
        f"FROM generate_series(1, {DIM}) d WHERE {seed_column} IS NOT NULL)"
    )


def load(conn: psycopg.Connection, *, first: int, count: int, dataset_sql: str) -> None:
    """``count`` threads, episodes and chunks numbered from ``first``; ``dataset_sql`` gives
    episode ``i``'s dataset."""
    params = {"first": first, "last": first + count - 1}
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
               '\\x00'::bytea || convert_to('summary of thread ' || i, 'UTF8'), {_vector("i")},
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
        SELECT md5('t' || i)::uuid, c.s, 0, c.s + 3, {dataset_sql}, {_vector("c.s + i")},
               tv.v, (SELECT sum(coalesce(array_length(x.positions, 1), 1)) FROM unnest(tv.v) x)
        FROM generate_series(%(first)s::bigint, %(last)s::bigint) i
        CROSS JOIN (VALUES (1), (3), (5)) c(s)
        CROSS JOIN LATERAL (SELECT to_tsvector('english', {_words(20, "c.s + i")}) AS v) tv
        """,
        params,
    )


def build(conn: psycopg.Connection, episodes: int, datasets: int, heavy: int) -> dict[str, float]:
    """The store (see the module docstring); returns seconds per phase."""
    timings: dict[str, float] = {}
    started = time.monotonic()
    # Indexes that slow a bulk load down by an order of magnitude are built afterwards.
    indexes = conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN "
        "('episodes', 'message_chunks') AND (indexdef ILIKE '%%USING hnsw%%' "
        "OR indexname IN ('episodes_search_vector_idx', 'message_chunks_search_vector_idx'))"
    ).fetchall()
    for name, _ in indexes:
        conn.execute(f"DROP INDEX {name}")
    conn.execute(
        "INSERT INTO datasets (dataset) SELECT 'ds-' || lpad(g::text, 5, '0') "
        "FROM generate_series(0, %(n)s - 1) g",
        {"n": datasets},
    )
    conn.execute("INSERT INTO datasets (dataset) VALUES (%s)", (HEAVY,))
    normal = f"'ds-' || lpad(mod(i, {datasets})::text, 5, '0')"
    step = 100_000
    for first in range(1, episodes + 1, step):
        load(conn, first=first, count=min(step, episodes + 1 - first), dataset_sql=normal)
        log(
            f"  normal episodes {min(first + step - 1, episodes)} ({time.monotonic() - started:.0f}s)"
        )
    for first in range(episodes + 1, episodes + heavy + 1, step):
        load(
            conn,
            first=first,
            count=min(step, episodes + heavy + 1 - first),
            dataset_sql=f"'{HEAVY}'",
        )
        log(f"  heavy episodes {first + step - 1 - episodes} ({time.monotonic() - started:.0f}s)")
    timings["load"] = time.monotonic() - started
    conn.execute("SET maintenance_work_mem = '1GB'")
    conn.execute("SET max_parallel_maintenance_workers = 2")
    for name, definition in indexes:
        t = time.monotonic()
        # pg_indexes shows a partitioned table's index as ON ONLY (the parent alone).
        conn.execute(definition.replace(" ON ONLY ", " ON "))
        log(f"  {name} {time.monotonic() - t:.0f}s")
    timings["hnsw"] = time.monotonic() - started - timings["load"]
    conn.execute("VACUUM ANALYZE")
    timings["total"] = time.monotonic() - started
    return timings


def recall_at(approximate: list[object], exact: list[object], n: int) -> float:
    """The share of the exact top ``n`` that the approximate top ``n`` holds."""
    want = exact[:n]
    return len(set(approximate[:n]) & set(want)) / len(want) if want else 1.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=1_000_000)
    parser.add_argument("--datasets", type=int, default=10_000)
    parser.add_argument("--heavy", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300, help="timed queries per path")
    parser.add_argument(
        "--exact-queries",
        type=int,
        default=50,
        help="queries ranked exactly on the heavy dataset (seconds each) for recall@N",
    )
    parser.add_argument("--database-url", help="admin URL of a PostgreSQL with pgvector")
    parser.add_argument("--url", help="an already built database (skips the build)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--before",
        help="an older store/recall_queries.py: its approximate statement is run on the same "
        "queries for recall@N and latency (before/after in one run)",
    )
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO))
    from bench.recall_speed import LEXEMES_SQL, percentiles, psycopg_sql
    from episodic.client import EpisodicClient
    from episodic.config import RecallSettings
    from episodic.providers import HashingEmbedder
    from episodic.store.recall_queries import Approximation, recall_statement
    from episodic.testing.database import scratch_database
    from episodic.testing.processes import start_service

    rng = random.Random(args.seed)
    defaults = RecallSettings()
    with ExitStack() as stack:
        url = args.url
        if url is None:
            url = stack.enter_context(scratch_database(args.database_url, "episodic-scale-"))
            with psycopg.connect(url, autocommit=True) as conn:
                log(
                    f"building {args.episodes} episodes over {args.datasets} datasets "
                    f"and {args.heavy} in {HEAVY} …"
                )
                built = build(conn, args.episodes, args.datasets, args.heavy)
                log(f"built: {', '.join(f'{k} {v:.0f}s' for k, v in built.items())}")
        service = start_service("recall", url, {"EPISODIC_LOG_LEVEL": "WARNING"}, timeout=120)
        stack.callback(service.terminate)
        client = stack.enter_context(EpisodicClient(recall=service.address, timeout=60))
        sql = stack.enter_context(psycopg.connect(url, autocommit=True))
        register_vector(sql)
        # The Recall service's session settings (services/recall/__main__.py).
        sql.execute("SET hnsw.iterative_scan = relaxed_order")
        sql.execute(f"SET hnsw.ef_search = {max(40, defaults.recall_approximate_candidates)}")
        hasher = HashingEmbedder(DIM)
        vocab = [f"w{i}" for i in range(1, 5001)]

        def words() -> str:
            return " ".join(vocab[int(5000 * rng.random() ** 3)] for _ in range(3))

        exact_sql = psycopg_sql(recall_statement(with_query=True, with_vector=True))
        before_sql = None
        if args.before:
            import importlib.util

            spec = importlib.util.spec_from_file_location("recall_queries_before", args.before)
            assert spec is not None and spec.loader is not None
            older = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = older  # dataclasses look their module up
            spec.loader.exec_module(older)
            before_sql = psycopg_sql(
                older.recall_statement(with_query=True, with_vector=True, approximate=True)
            )
        approx_sql = psycopg_sql(
            recall_statement(with_query=True, with_vector=True, approximate=True)
        )

        def params(dataset: str, query: str, limit: int) -> dict[str, object]:
            p: dict[str, object] = {
                "dataset": dataset,
                "query": query,
                "qvec": hasher.embed_query(query),
                "since": None,
                "until": None,
                "thread_ids": None,
                "entities": None,
                "entity_any": None,
                "entity_groups": None,
                "event_type": None,
                "min_relevance": 0.0,
                "as_of": None,
                "ws": 0.7,
                "wr": 0.3,
                "limit": limit,
                "approx_candidates": defaults.recall_approximate_candidates,
                "approx_recent": defaults.recall_approximate_recent,
                "approx_per_lexeme": Approximation().per_lexeme,
                "approx_selective_df": Approximation().selective_df,
            }
            p["lexemes"] = sql.execute(LEXEMES_SQL, p).fetchone()[0]  # type: ignore[index]
            return p

        def bare(statement: str, dataset: str, query: str, limit: int = 3) -> list[object]:
            # What Recall sends: the query's lexemes, then the ranking statement.
            rows = sql.execute(statement, params(dataset, query, limit)).fetchall()
            return [r[2] for r in rows if r[2] is not None]  # episode_id

        times: dict[str, list[float]] = {
            k: [] for k in ("normal grpc", "normal sql", "heavy grpc", "heavy sql")
        }
        for _ in range(20):  # warm-up: the service learns the heavy dataset's size
            client.recall(HEAVY, words())
            client.recall(f"ds-{rng.randrange(args.datasets):05d}", words())
        log(f"measuring {args.queries} queries per path …")
        for i in range(args.queries):
            normal = f"ds-{rng.randrange(args.datasets):05d}"
            query = words()
            bare(exact_sql, normal, query)  # untimed first read of the dataset's pages
            paths: list[tuple[str, object]] = [
                ("normal grpc", lambda d=normal, q=query: client.recall(d, q)),
                ("normal sql", lambda d=normal, q=query: bare(exact_sql, d, q)),
                ("heavy grpc", lambda q=query: client.recall(HEAVY, q)),
                ("heavy sql", lambda q=query: bare(approx_sql, HEAVY, q)),
            ]
            rng.shuffle(paths)
            for key, run in paths:
                t = time.perf_counter()
                run()  # type: ignore[operator]
                times[key].append(time.perf_counter() - t)
            if (i + 1) % 100 == 0:
                log(f"  {i + 1}")
        log(f"ranking {args.exact_queries} queries exactly on {HEAVY} …")
        exact_times: list[float] = []
        approx_times: list[float] = []
        at5: list[float] = []
        at10: list[float] = []
        before_times: list[float] = []
        before5: list[float] = []
        before10: list[float] = []
        for i in range(args.exact_queries):
            query = words()
            t = time.perf_counter()
            exact = bare(exact_sql, HEAVY, query, limit=10)
            exact_times.append(time.perf_counter() - t)
            t = time.perf_counter()
            approximate = bare(approx_sql, HEAVY, query, limit=10)
            approx_times.append(time.perf_counter() - t)
            at5.append(recall_at(approximate, exact, 5))
            at10.append(recall_at(approximate, exact, 10))
            if before_sql is not None:
                t = time.perf_counter()
                older_ranking = bare(before_sql, HEAVY, query, limit=10)
                before_times.append(time.perf_counter() - t)
                before5.append(recall_at(older_ranking, exact, 5))
                before10.append(recall_at(older_ranking, exact, 10))
            if (i + 1) % 10 == 0:
                log(f"  {i + 1}")

        stats = {k: percentiles(v) for k, v in times.items()}
        stats["heavy sql, exact"] = percentiles(exact_times)
        stats["heavy sql, approximate (same queries)"] = percentiles(approx_times)
        if before_times:
            stats["heavy sql, approximate before (same queries)"] = percentiles(before_times)
        print(f"load average during the run: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(
            f"Recall at scale: {args.episodes} episodes over {args.datasets} datasets "
            f"({args.episodes // max(args.datasets, 1)} each) and {args.heavy} in one heavy "
            f"dataset; approximate path above {defaults.recall_approximate_above} episodes "
            f"({defaults.recall_approximate_candidates} candidates per part, "
            f"{defaults.recall_approximate_recent} recent); top 3, {args.queries} sequential "
            "queries per path (ms):\n"
        )
        print("| path | p50 | p95 | p99 | mean |")
        print("|---|---|---|---|---|")
        for key, s in stats.items():
            print(
                f"| {key} | {1000 * s['p50']:.2f} | {1000 * s['p95']:.2f} | "
                f"{1000 * s['p99']:.2f} | {1000 * s['mean']:.2f} |"
            )
        print()
        for g, s in (("normal grpc", "normal sql"), ("heavy grpc", "heavy sql")):
            a, b = stats[g], stats[s]
            print(f"{g} / {s}: p50 {a['p50'] / b['p50']:.2f}x, p99 {a['p99'] / b['p99']:.2f}x")
        e, a = stats["heavy sql, exact"], stats["heavy sql, approximate (same queries)"]
        print(
            f"heavy approximate / exact ({args.exact_queries} queries, top 10): "
            f"p50 {a['p50'] / e['p50']:.3f}x, p99 {a['p99'] / e['p99']:.3f}x; "
            f"recall@5 {statistics.fmean(at5):.3f} (min {min(at5):.2f}), "
            f"recall@10 {statistics.fmean(at10):.3f} (min {min(at10):.2f})"
        )
        if before_times:
            b = stats["heavy sql, approximate before (same queries)"]
            print(
                f"before ({args.before}): p50 {b['p50'] / e['p50']:.3f}x exact, "
                f"after/before p50 {a['p50'] / b['p50']:.2f}x, p99 {a['p99'] / b['p99']:.2f}x; "
                f"recall@5 {statistics.fmean(before5):.3f} (min {min(before5):.2f}), "
                f"recall@10 {statistics.fmean(before10):.3f} (min {min(before10):.2f})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
