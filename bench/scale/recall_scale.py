"""Recall at scale: many normal datasets and one heavy one, exact ranking vs the approximate
candidate path, side by side in one run.

    .venv/bin/python -m bench.recall_scale [--episodes 1000000] [--datasets 10000]
        [--heavy 100000] [--queries 300] [--keep DIR]

Builds a synthetic store directly in SQL (no model, no messages: Recall never reads them):
``--episodes`` completed episodes spread over ``--datasets`` normal datasets, plus one heavy
dataset of ``--heavy`` episodes; each episode has a random summary vector, a lexical
document of 60 Zipf-distributed words and 3 message chunks (20 words each, random vectors)
— the rows ``index_episode`` writes. The HNSW indexes are dropped during the load and built
afterwards (with a generous ``maintenance_work_mem``), as a bulk import would. Then the
Scheduler's maintenance pass runs over the store's large datasets, timed and printed (their
kept lexical statistics and the count of completed episodes: ``store/kept_statistics.py``),
as a deployment runs it every ``EPISODIC_STATISTICS_INTERVAL``; a store built before
(``--url``) gets the same pass, which does nothing where they are fresh.

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

``--text-dataset N`` adds one more heavy dataset, ``heavy-text``, of real text and real
vectors: each of its N episodes is a window of 3–8 consecutive LoCoMo turns
(``bench/locomo.py``; every window of the corpus at most once, in a seeded shuffle), its
lexical document ``to_tsvector('english', text)`` and its chunks the store's own
(``make_chunks`` over the window's turns), and its summary and chunk vectors MiniLM's (the
default embedder): by default late-chunked, each LoCoMo session read by the model once and
every window's vector pooled from its tokens (what the Summariser does for chunks by
default, ``EPISODIC_CHUNK_VECTORS=late``; ``--text-vectors separate`` embeds each text on
its own: ~35× the model time, ~70 minutes for 25k episodes on 2 loaded cores). Its queries are LoCoMo's questions, embedded as Recall does
(``embed_query``); recall@N is measured on it beside the other heavy datasets.

``--citus`` builds and measures the same on a Citus cluster started for the run (a
coordinator and two workers on this machine, ``distribute.sql``'s 64 shards), stopped
afterwards: a dataset lives on one shard, so a large one's figures there are its shard's.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from bench.harness import REPO
from bench.scale.recall.approximate import curve, diagnose, parse_curve
from bench.scale.recall.breakdown import BREAKDOWN, breakdown_paths
from bench.scale.recall.common import (
    CLUSTERED,
    DIM,
    HEAVY,
    NOISE_SCALE,
    TEXT,
    TEXT_TURNS,
    _episode_ids,
    log,
    recall_at,
)
from bench.scale.recall.store import build, citus_store, keep_statistics
from bench.scale.recall.text import _shared_turns, text_questions


def _keep_statistics(url: str, above: int) -> None:
    """The Scheduler's maintenance pass over the store's large datasets (their kept
    statistics and count), timed and said: the write side's cost of the approximate path."""
    counted = keep_statistics(url, above)
    for dataset, seconds in counted:
        print(
            f"kept the statistics and count of {dataset} (the maintenance's pass): {seconds:.0f}s"
        )


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
        "--chunks",
        type=int,
        default=3,
        help="chunks per episode of the normal datasets (the heavy ones always have 3)",
    )
    parser.add_argument(
        "--clustered",
        type=int,
        default=0,
        help=f"episodes of a second heavy dataset, {CLUSTERED}, whose vectors cluster "
        "around topics (as real embeddings do); recall@N is measured on it too",
    )
    parser.add_argument(
        "--text-dataset",
        type=int,
        default=0,
        metavar="N",
        help=f"episodes of another heavy dataset, {TEXT}, of real text and vectors: windows "
        f"of {TEXT_TURNS[0]}-{TEXT_TURNS[1]} consecutive LoCoMo turns, MiniLM summary and "
        "chunk vectors; its queries are LoCoMo's questions (MiniLM query vectors); recall@N "
        "is measured on it too",
    )
    parser.add_argument(
        "--text-vectors",
        choices=("late", "separate"),
        default="late",
        help=f"{TEXT}'s vectors: late (each LoCoMo session read by MiniLM once, each "
        "episode's and chunk's vector pooled from its tokens: a few minutes) or separate "
        "(each text embedded on its own: ~0.15 s a text on 2 loaded cores)",
    )
    parser.add_argument(
        "--text-cache",
        metavar="FILE.npz",
        help=f"{TEXT}'s vectors computed before (reused, extended and saved again)",
    )
    parser.add_argument(
        "--heavy-indexes-only",
        action="store_true",
        help="build the HNSW and GIN indexes only on the partitions holding the heavy "
        "datasets (all their queries read; the normal datasets' exact path reads none), "
        "not on all 8: the whole build did not fit a session at 1M episodes",
    )
    parser.add_argument(
        "--normal-only",
        action="store_true",
        help="time the normal datasets' paths only (e.g. while the heavy ones' indexes build)",
    )
    parser.add_argument(
        "--heavy-only",
        action="store_true",
        help=f"time the heavy dataset's paths only ({HEAVY}: gRPC, its bare SQL, and with "
        "--before-tree the older Recall's gRPC); with --exact-queries 0, no recall@N",
    )
    parser.add_argument(
        "--since-days",
        type=float,
        help="with --heavy-only: also time the heavy dataset's Recall through gRPC with a "
        "since filter this many days before its latest episode (and the older Recall's, "
        "with --before-tree)",
    )
    parser.add_argument(
        "--recall-on",
        help=f"comma-separated heavy datasets to measure recall@N on (default {HEAVY}, and "
        f"{CLUSTERED} and {TEXT} when the store has them)",
    )
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="with the normal paths, also time in the same run: Recall through a bare gRPC "
        "stub (no SDK), the service's domain in this process (no gRPC: the service's "
        "statements and Python), and a health check through the same server (the gRPC hop "
        "and the interceptors with no work): where the gRPC path's time over the SQL goes",
    )
    parser.add_argument(
        "--before-tree",
        metavar="DIR",
        help="a checkout of older code with its own .venv (e.g. a git worktree of main): its "
        "Recall service runs beside this one on the same store and is timed on the same "
        "normal-dataset queries (normal grpc before): the hop's before/after in one run",
    )
    parser.add_argument(
        "--citus",
        action="store_true",
        help="build and measure on a Citus cluster started for the run (a coordinator and "
        "two workers on this machine, episodic.testing.citus, the documented 64 shards), "
        "stopped afterwards: a large dataset's figures on one shard",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="with --database-url: build into a new database, print its URL and stop "
        "(measure it later with --url)",
    )
    parser.add_argument(
        "--before",
        help="an older store/recall_queries.py, from before it was split into modules (it "
        "builds its statement alone): its approximate statement is run on the same "
        "queries for recall@N and latency (before/after in one run)",
    )
    parser.add_argument(
        "--diagnose",
        action="store_true",
        help="for --exact-queries queries per heavy dataset: which exact top-10 episodes the "
        "approximate top 10 misses, whether they were among the candidates, and if not, "
        "from which source (nearest summaries or chunks, lexical, recent) they should have "
        "come and at what rank",
    )
    parser.add_argument(
        "--curve",
        help="approximate variants to run on the same --exact-queries queries per heavy "
        "dataset, ';'-separated, each 'candidates=200,ef=200,scan=20000,recent=100' "
        "(also per_lexeme, selective_df, postings; missing keys: the defaults; scan = "
        "hnsw.max_scan_tuples), or 'default' for the "
        "README's curve: recall@5/@10 and latency against the exact statement",
    )
    args = parser.parse_args(argv)
    older_statements = None
    if args.before:
        import importlib.util

        spec = importlib.util.spec_from_file_location("recall_queries_before", args.before)
        assert spec is not None and spec.loader is not None
        older_statements = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = older_statements  # dataclasses look their module up
        spec.loader.exec_module(older_statements)
        # Since the split (store/ranking_sql.py and others), recall_queries.py builds its
        # statement from the installed package's modules: it would time this code again.
        builder = getattr(older_statements, "recall_sql", None)
        if builder is not None and builder.__module__ != spec.name:
            parser.error(
                "--before takes a recall_queries.py from before the split into modules: "
                f"{args.before} builds its statement with {builder.__module__}"
            )

    sys.path.insert(0, str(REPO))
    from bench.harness.recall_sql import (
        KeptStatement,
        execute,
        psycopg_sql,
        query_term_params,
        sent_as_recall_sends,
    )
    from bench.harness.report import percentiles, print_latency_table
    from episodic.config import RecallSettings
    from episodic.providers import HashingEmbedder
    from episodic.sdk.client import EpisodicClient
    from episodic.services.recall.__main__ import ef_search
    from episodic.store.recall_queries import (
        COUNT_STATEMENT,
        CUSTOM_PLANS,
        Approximation,
        approximation_params,
        recall_statement,
        threshold_params,
        unfiltered_params,
    )
    from episodic.testing.database import scratch_database
    from episodic.testing.processes import start_service

    rng = random.Random(args.seed)
    defaults = RecallSettings()
    with ExitStack() as stack:
        url = args.url
        if url is None:
            if args.citus:
                if args.keep or args.database_url or args.heavy_indexes_only:
                    parser.error(
                        "--citus builds on a cluster of its own, stopped after the run "
                        "(no --keep, --database-url or --heavy-indexes-only)"
                    )
                url = stack.enter_context(citus_store())
            elif args.keep:
                from episodic.testing.database import TestDatabases

                if not args.database_url:
                    parser.error("--keep needs --database-url")
                url = TestDatabases(args.database_url).create()
            else:
                url = stack.enter_context(scratch_database(args.database_url, "episodic-scale-"))
            with psycopg.connect(url, autocommit=True) as conn:
                log(
                    f"building {args.episodes} episodes over {args.datasets} datasets "
                    f"({args.chunks} chunks each), {args.heavy} in {HEAVY} and "
                    f"{args.clustered} in {CLUSTERED} (3 chunks each), "
                    f"{args.text_dataset} in {TEXT} …"
                )
                built = build(
                    conn,
                    args.episodes,
                    args.datasets,
                    args.heavy,
                    chunks=args.chunks,
                    clustered=args.clustered,
                    seed=args.seed,
                    heavy_indexes_only=args.heavy_indexes_only,
                    text=args.text_dataset,
                    text_mode=args.text_vectors,
                    text_cache=args.text_cache,
                )
                print(f"load average after the build: {os.getloadavg()}")
                print(f"built: {', '.join(f'{k} {v:.0f}s' for k, v in built.items())}")
            if args.keep:
                _keep_statistics(url, defaults.recall_approximate_above)
                print(f"kept: {url}")
                return 0
        else:
            # A store built before: what it holds, not the build flags' defaults (the
            # header below, and the normal datasets a query picks from).
            with psycopg.connect(url, autocommit=True) as conn:
                args.datasets, args.episodes, args.heavy = conn.execute(
                    "SELECT count(DISTINCT dataset) FILTER (WHERE dataset LIKE 'ds-%%'), "
                    "count(*) FILTER (WHERE dataset LIKE 'ds-%%'), "
                    "count(*) FILTER (WHERE dataset = %s) FROM episodes",
                    (HEAVY,),
                ).fetchone()  # type: ignore[misc]
        _keep_statistics(url, defaults.recall_approximate_above)
        # A loaded machine's first reads of a 100k dataset (cold pages) can exceed the
        # service's 10 s statement ceiling; the ceiling is not what is measured here.
        service = start_service(
            "recall",
            url,
            {"EPISODIC_LOG_LEVEL": "WARNING", "EPISODIC_RECALL_STATEMENT_TIMEOUT": "120"},
            timeout=120,
        )
        stack.callback(service.terminate)
        client = stack.enter_context(EpisodicClient(recall=service.address, timeout=120))
        older_client = None
        if args.before_tree:
            older = start_service(
                "recall",
                url,
                {"EPISODIC_LOG_LEVEL": "WARNING", "EPISODIC_RECALL_STATEMENT_TIMEOUT": "120"},
                timeout=120,
                python=str(Path(args.before_tree) / ".venv" / "bin" / "python"),
            )
            stack.callback(older.terminate)
            older_client = stack.enter_context(EpisodicClient(recall=older.address, timeout=120))
        # ``sql`` times the bare statements; ``first_reader`` reads each normal dataset's
        # pages first, untimed, on a backend of its own: a backend that has just run the
        # same statement runs it again ~0.3-0.5 ms faster than another one (its CPU caches
        # hold the dataset's rows; docs/benchmarks.md "Recall, sixth pass"), which the bare
        # SQL got and Recall's backend never does when the first read went through ``sql``.
        # ``named_sql`` times the bare statement sent in psycopg's named form, on a backend
        # of its own for the same reason.
        sql, first_reader, named_sql = (
            stack.enter_context(psycopg.connect(url, autocommit=True)) for _ in range(3)
        )
        for conn in (sql, first_reader, named_sql):
            register_vector(conn)
            # The Recall service's session settings (services/recall/__main__.py).
            conn.execute("SET hnsw.iterative_scan = relaxed_order")
            conn.execute(f"SET hnsw.ef_search = {ef_search(defaults)}")
        hasher = HashingEmbedder(DIM)
        vocab = [f"w{i}" for i in range(1, 5001)]

        def words() -> str:
            return " ".join(vocab[int(5000 * rng.random() ** 3)] for _ in range(3))

        exact_sql = psycopg_sql(recall_statement(with_query=True, with_vector=True))
        before_sql = None
        if older_statements is not None:
            before_sql = psycopg_sql(
                older_statements.recall_statement(
                    with_query=True, with_vector=True, approximate=True
                )
            )
        # A request without filters reads the dataset's kept statistics when it has them
        # (store/kept_statistics.py: the lexical pool chosen from their postings first), and
        # counts them when it has none, as Recall does.
        approx_sql = KeptStatement.of()
        exact_cosine_sql = KeptStatement.of(exact_cosine=True)
        count_sql = psycopg_sql(COUNT_STATEMENT)
        # What the Recall service sends for the heavy dataset, as configured.
        service_sql = exact_cosine_sql if defaults.recall_approximate_exact_cosine else approx_sql

        topics = [r[0] for r in sql.execute("SELECT v FROM scale_centroids ORDER BY n")]

        heavies = args.recall_on.split(",") if args.recall_on else [HEAVY]
        for extra in (CLUSTERED, TEXT):
            if (
                not args.recall_on
                and sql.execute(
                    "SELECT 1 FROM episodes WHERE dataset = %s LIMIT 1", (extra,)
                ).fetchone()
            ):
                heavies.append(extra)
        questions: list[str] = []
        minilm = None
        question_vectors: dict[str, object] = {}
        if TEXT in heavies:
            from episodic.config import EmbeddingSettings
            from episodic.providers import make_embedder

            questions = text_questions()
            minilm = make_embedder(EmbeddingSettings(embedding_threads=2), DIM)

        def query_for(dataset: str) -> str:
            """A query for ``dataset``: a LoCoMo question on the text dataset, else 3 Zipf
            words."""
            return rng.choice(questions) if dataset == TEXT else words()

        def query_vector(dataset: str, query: str) -> object:
            """A query about one of the clustered dataset's topics (its centroid plus the
            stored vectors' noise); on the text dataset MiniLM's, as Recall embeds it; else
            the hashing embedder's (random-looking, as the stored ones are)."""
            if dataset == TEXT:
                if query not in question_vectors:
                    question_vectors[query] = minilm.embed_query(query)  # type: ignore[union-attr]
                return question_vectors[query]
            if dataset != CLUSTERED:
                return hasher.embed_query(query)
            centre = topics[rng.randrange(len(topics))].to_numpy().astype(np.float32)
            noisy = centre + NOISE_SCALE * (
                np.asarray([rng.random() for _ in range(DIM)], dtype=np.float32) - 0.5
            )
            return (noisy / np.linalg.norm(noisy)).astype(np.float32)

        def params(dataset: str, query: str, limit: int) -> dict[str, object]:
            p: dict[str, object] = {
                "dataset": dataset,
                "query": query,
                "qvec": query_vector(dataset, query),
                **unfiltered_params(),
                **threshold_params(0.0, 0.0, None),
                "ws": 0.7,
                "wr": 0.3,
                "limit": limit,
                **approximation_params(
                    Approximation(
                        candidates=defaults.recall_approximate_candidates,
                        recent=defaults.recall_approximate_recent,
                        nearest=defaults.recall_approximate_nearest,
                    )
                ),
            }
            return {**p, **query_term_params(sql, dataset, query)}

        def bare(
            statement: str | KeptStatement,
            dataset: str,
            query: str,
            limit: int = 3,
            on: object = None,
            named: bool = False,
        ) -> list[object]:
            # What Recall sends: the query's lexemes, then the ranking statement (the
            # approximate one planned for its parameters, as rank() has it planned), in
            # numbered placeholders as Recall sends it (``named``: as psycopg sends a named
            # statement, parsing it on every execute: how the bare SQL was sent before).
            conn: psycopg.Connection = on or sql  # type: ignore[assignment]
            approximate = statement is not exact_sql
            if approximate:
                conn.execute(f"SET plan_cache_mode = {CUSTOM_PLANS}")
            p = params(dataset, query, limit)
            ids = _episode_ids(
                execute(conn, statement, p) if named else sent_as_recall_sends(conn, statement, p)
            )
            if approximate:
                conn.execute("RESET plan_cache_mode")
            return ids

        if args.diagnose or args.curve:
            # The heavy datasets' statements, exact and approximate, are each planned for
            # their parameters (psycopg prepares a statement run five times, and a generic
            # plan of these ran many times longer: docs/benchmarks.md "Recall at scale").
            sql.execute(f"SET plan_cache_mode = {CUSTOM_PLANS}")
        if args.diagnose:
            for dataset in heavies:
                diagnose(
                    sql,
                    dataset,
                    args.exact_queries,
                    params,
                    lambda d=dataset: query_for(d),
                    exact_sql,
                    approx_sql,
                )
            return 0
        if args.curve:
            variants = parse_curve(args.curve, defaults)
            for dataset in heavies:
                curve(
                    sql,
                    dataset,
                    args.exact_queries,
                    params,
                    lambda d=dataset: query_for(d),
                    exact_sql,
                    variants,
                    before_sql,
                )
            return 0

        times: dict[str, list[float]] = {
            k: [] for k in ("normal grpc", "normal sql", "heavy grpc", "heavy sql", *BREAKDOWN)
        }
        timed = {"normal grpc", "normal sql"} if args.normal_only else set(times) - BREAKDOWN
        if args.heavy_only:
            timed = {"heavy grpc", "heavy sql"}
        if older_client is not None:
            before = "heavy grpc before" if args.heavy_only else "normal grpc before"
            timed.add(before)
            times[before] = []
        since_at = None
        if args.heavy_only and args.since_days is not None:
            latest = sql.execute(
                "SELECT max(ended_at) FROM episodes WHERE dataset = %s AND status = 'completed'",
                (HEAVY,),
            ).fetchone()
            since_at = latest[0] - timedelta(days=args.since_days)  # type: ignore[index]
            filtered = ["heavy grpc, since"]
            if older_client is not None:
                filtered.append("heavy grpc before, since")
            for name in filtered:
                timed.add(name)
                times[name] = []
        broken_down: dict[str, object] = {}
        if args.breakdown:
            timed |= BREAKDOWN
            samples = [(f"ds-{rng.randrange(args.datasets):05d}", words()) for _ in range(21)]
            broken_down = breakdown_paths(stack, url, service.address, samples)
        if args.queries == 0:
            timed = set()
        for _ in range(20 if timed else 0):  # warm-up: the service learns the heavy dataset's size
            if not args.normal_only:
                client.recall(HEAVY, words())
            client.recall(f"ds-{rng.randrange(args.datasets):05d}", words())
            if older_client is not None:
                older_client.recall(f"ds-{rng.randrange(args.datasets):05d}", words())
                if args.heavy_only:
                    older_client.recall(HEAVY, words())
        log(f"measuring {args.queries} queries per path …")
        for i in range(args.queries):
            normal = f"ds-{rng.randrange(args.datasets):05d}"
            query = words()
            # Untimed first read of the dataset's pages (into shared buffers), on a backend
            # no timed path uses.
            bare(exact_sql, normal, query, on=first_reader)
            paths: list[tuple[str, object]] = [
                ("normal grpc", lambda d=normal, q=query: client.recall(d, q)),
                ("normal sql", lambda d=normal, q=query: bare(exact_sql, d, q)),
                (
                    "normal sql, first read's backend",
                    lambda d=normal, q=query: bare(exact_sql, d, q, on=first_reader, named=True),
                ),
                (
                    "normal sql, named",
                    lambda d=normal, q=query: bare(exact_sql, d, q, on=named_sql, named=True),
                ),
                ("heavy grpc", lambda q=query: client.recall(HEAVY, q)),
                ("heavy sql", lambda q=query: bare(service_sql, HEAVY, q)),
                (
                    "normal grpc before",
                    lambda d=normal, q=query: older_client.recall(d, q),  # type: ignore[union-attr]
                ),
                (
                    "heavy grpc before",
                    lambda q=query: older_client.recall(HEAVY, q),  # type: ignore[union-attr]
                ),
                ("heavy grpc, since", lambda q=query: client.recall(HEAVY, q, since=since_at)),
                (
                    "heavy grpc before, since",
                    lambda q=query: older_client.recall(  # type: ignore[union-attr]
                        HEAVY, q, since=since_at
                    ),
                ),
                *[
                    (name, lambda d=normal, q=query, run=run: run(d, q))
                    for name, run in broken_down.items()
                ],
            ]
            paths = [(k, run) for k, run in paths if k in timed]
            rng.shuffle(paths)
            for key, run in paths:
                t = time.perf_counter()
                run()  # type: ignore[operator]
                times[key].append(time.perf_counter() - t)
            if (i + 1) % 100 == 0:
                log(f"  {i + 1}")
        stats = {k: percentiles(v) for k, v in times.items() if k in timed}
        if not timed:
            log("no timed paths (--queries 0)")
        print(
            f"load average after the timed paths: {', '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
        print(
            f"Recall at scale: {args.episodes} episodes over {args.datasets} datasets "
            f"({args.episodes // max(args.datasets, 1)} each) and {args.heavy} in one heavy "
            f"dataset; approximate path above {defaults.recall_approximate_above} episodes "
            f"({defaults.recall_approximate_candidates} candidates per lexical part, "
            f"{ef_search(defaults)} per nearest part, "
            f"{defaults.recall_approximate_recent} recent, exact cosine "
            f"{defaults.recall_approximate_exact_cosine}); top 3, {args.queries} sequential "
            "queries per path (ms):\n"
        )
        if stats:
            print_latency_table(stats)
        heavy_size = sql.execute(
            "SELECT count(*) FROM episodes WHERE dataset = %s AND status = 'completed'", (HEAVY,)
        ).fetchone()[0]  # type: ignore[index]
        if "heavy grpc" in stats and heavy_size <= defaults.recall_approximate_above:
            print(
                f"note: {HEAVY} holds {heavy_size} episodes, not above the threshold: Recall "
                "(heavy grpc) ranked it exactly, heavy sql is the approximate statement\n"
            )
        for g, s in (
            ("normal grpc", "normal sql"),
            ("heavy grpc", "heavy sql"),
            ("normal grpc before", "normal sql"),
            ("normal grpc", "normal grpc before"),
            ("heavy grpc before", "heavy sql"),
            ("heavy grpc", "heavy grpc before"),
            ("normal grpc stub", "normal sql"),
            ("normal in-process", "normal sql"),
            ("normal echo", "normal sql"),
            ("normal grpc", "normal sql, named"),
            ("normal grpc", "normal sql, first read's backend"),
            ("normal sql, named", "normal sql"),
            ("normal sql, first read's backend", "normal sql"),
        ):
            if g not in stats or s not in stats:
                continue
            a, b = stats[g], stats[s]
            print(
                f"{g} / {s}: p50 {a['p50'] / b['p50']:.2f}x "
                f"(+{1000 * (a['p50'] - b['p50']):.2f} ms), p99 {a['p99'] / b['p99']:.2f}x "
                f"(+{1000 * (a['p99'] - b['p99']):.2f} ms)"
            )

        # recall@N of the approximate path against the exact ranking, per heavy dataset:
        # the exact statement, the approximate one as configured, the approximate one with
        # the dataset's exact best cosine, and (--before) an older approximate statement.
        variants: dict[str, str | KeptStatement] = {
            "approximate": approx_sql,
            "approximate, exact cosine": exact_cosine_sql,
        }
        if before_sql is not None:
            variants["approximate before"] = before_sql
        if not args.normal_only:
            sql.execute(f"SET plan_cache_mode = {CUSTOM_PLANS}")
        for dataset in [] if args.normal_only or args.exact_queries == 0 else heavies:
            log(f"ranking {args.exact_queries} queries exactly on {dataset} …")
            took: dict[str, list[float]] = {k: [] for k in ["exact", *variants, "count"]}
            at: dict[str, dict[int, list[float]]] = {k: {5: [], 10: []} for k in variants}
            asked: list[str] = []
            shared: list[float] = []
            for i in range(args.exact_queries):
                asked.append(query_for(dataset))
                p = params(dataset, asked[-1], 10)
                t = time.perf_counter()
                exact = _episode_ids(sql.execute(exact_sql, p))
                took["exact"].append(time.perf_counter() - t)
                order = list(variants.items())
                rng.shuffle(order)
                for name, statement in order:
                    t = time.perf_counter()
                    got = _episode_ids(execute(sql, statement, p))
                    took[name].append(time.perf_counter() - t)
                    for n in (5, 10):
                        at[name][n].append(recall_at(got, exact, n))
                # What every Recall statement pays for the dataset's episode count.
                t = time.perf_counter()
                sql.execute(count_sql, p).fetchall()
                took["count"].append(time.perf_counter() - t)
                if dataset == TEXT:  # untimed: how alike the exact top 10 are
                    shared.append(_shared_turns(sql, exact))
                if (i + 1) % 10 == 0:
                    log(f"  {i + 1}")
            print(
                f"\n{dataset}: {args.exact_queries} queries, top 10 (ms; load average "
                f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}):\n"
            )
            heavy_stats = {k: percentiles(v) for k, v in took.items()}
            print_latency_table(heavy_stats)
            e = heavy_stats["exact"]
            for name in variants:
                a = heavy_stats[name]
                print(
                    f"{dataset} {name} / exact: p50 {a['p50'] / e['p50']:.3f}x, "
                    f"p99 {a['p99'] / e['p99']:.3f}x; "
                    f"recall@5 {statistics.fmean(at[name][5]):.3f} (min {min(at[name][5]):.2f}), "
                    f"recall@10 {statistics.fmean(at[name][10]):.3f} "
                    f"(min {min(at[name][10]):.2f})"
                )
            worst = min(range(len(asked)), key=lambda j: (at["approximate"][10][j], j))
            print(
                f"{dataset} approximate: worst query (recall@10 "
                f"{at['approximate'][10][worst]:.2f}): {asked[worst]!r}"
            )
            if shared:
                print(
                    f"{dataset} exact top 10s: {statistics.fmean(shared):.2f} of their episode "
                    "pairs share a LoCoMo turn (overlapping windows of one conversation)"
                )
            a, b = heavy_stats["approximate, exact cosine"], heavy_stats["approximate"]
            print(
                f"{dataset} exact cosine / approximate: p50 {a['p50'] / b['p50']:.2f}x, "
                f"p99 {a['p99'] / b['p99']:.2f}x"
            )
            c = heavy_stats["count"]
            print(
                f"{dataset} episode count alone: p50 {1000 * c['p50']:.1f} ms = "
                f"{c['p50'] / b['p50']:.3f}x the approximate statement's p50"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
