"""Recall latency through gRPC versus the bare SQL it runs, side by side in one run.

    .venv/bin/python -m bench.speed.recall_speed [--episodes 100000] [--datasets 1000] [--queries 2000]

Builds a synthetic store directly in SQL (default 100k completed episodes over 1k datasets,
each episode a thread of 8 messages of Zipf-distributed words, with its lexical document,
3 message chunks and random unit vectors for the summary and the chunks — what
``index_episode`` would have written), then measures, for random datasets and 3-word
queries, sequentially from one client:

- ``grpc``: ``Recall`` through the SDK, against a Recall service using the hashing embedder
  (embedding costs ~0.1 ms, so this is the service's own overhead plus the SQL);
- ``sql``: the same statement (ranking and count in one) through psycopg on one
  connection in autocommit, as the service runs it, with the query vector computed
  beforehand;
- ``embed``: the default MiniLM embedder's ``embed_query`` alone (what the deployed
  service adds per query), and ``grpc+minilm``: Recall against a second Recall service
  using MiniLM;
- the same for recency-only recall (no query): no embedding, no text search.

Prints p50/p95/p99 per path and the gRPC/SQL ratios at p50 and p99.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import psycopg
from pgvector.psycopg import register_vector

from bench.harness import REPO
from bench.harness.recall_sql import as_recall_sends, psycopg_sql, query_term_params
from bench.harness.report import log, percentiles, print_latency_table
from bench.harness.stores import build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--datasets", type=int, default=1_000)
    parser.add_argument("--queries", type=int, default=2_000)
    parser.add_argument("--database-url", help="admin URL of a PostgreSQL with pgvector")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--before-tree",
        metavar="DIR",
        help="a checkout of older code with its own .venv (e.g. a git worktree of main): its "
        "Recall service (hashing embedder) runs beside this one on the same store and is "
        "timed on the same queries (grpc before): before/after in one run",
    )
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO))
    from episodic.config import EmbeddingSettings
    from episodic.providers import HashingEmbedder, make_embedder
    from episodic.sdk.client import EpisodicClient
    from episodic.store.recall_queries import recall_statement, threshold_params, unfiltered_params
    from episodic.testing.database import scratch_database
    from episodic.testing.processes import start_service

    rng = random.Random(args.seed)
    with ExitStack() as stack:
        url = stack.enter_context(scratch_database(args.database_url, "episodic-speed-"))
        with psycopg.connect(url, autocommit=True) as conn:
            build(conn, args.episodes, args.datasets, 384)

        hashing = start_service("recall", url, {"EPISODIC_LOG_LEVEL": "WARNING"}, timeout=120)
        stack.callback(hashing.terminate)
        minilm = start_service(
            "recall",
            url,
            {"EPISODIC_LOG_LEVEL": "WARNING", "EPISODIC_EMBEDDING_PROVIDER": "minilm"},
            timeout=180,
        )
        stack.callback(minilm.terminate)
        fast = stack.enter_context(EpisodicClient(recall=hashing.address, timeout=30))
        older = None
        if args.before_tree:
            before = start_service(
                "recall",
                url,
                {"EPISODIC_LOG_LEVEL": "WARNING"},
                timeout=120,
                python=str(Path(args.before_tree) / ".venv" / "bin" / "python"),
            )
            stack.callback(before.terminate)
            older = stack.enter_context(EpisodicClient(recall=before.address, timeout=30))
        real = stack.enter_context(EpisodicClient(recall=minilm.address, timeout=30))
        embedder = make_embedder(EmbeddingSettings(embedding_provider="minilm"), 384)
        embedder.check()
        hasher = HashingEmbedder(384)

        vocab = [f"w{i}" for i in range(1, 5001)]
        work = [
            (
                f"ds-{rng.randrange(args.datasets):04d}",
                " ".join(vocab[int(5000 * rng.random() ** 3)] for _ in range(3)),
            )
            for _ in range(args.queries)
        ]
        # Exactly the statement the service runs (ranking and count in one), autocommit.
        rank_query = psycopg_sql(recall_statement(with_query=True, with_vector=True))
        rank_recent = psycopg_sql(recall_statement(with_query=False, with_vector=False))
        base = {
            **unfiltered_params(),
            **threshold_params(0.0, 0.0, None),
            "ws": 0.7,
            "wr": 0.3,
            "limit": 3,
        }
        times: dict[str, list[float]] = {
            k: []
            for k in (
                "grpc",
                "sql",
                "embed",
                "grpc+minilm",
                "grpc recency-only",
                "sql recency-only",
                *(["grpc before", "grpc recency-only before"] if older else []),
            )
        }
        # ``first_reader`` reads each dataset first, untimed, on a backend no timed path
        # uses: a backend that has just run a statement runs it again 0.3-0.5 ms faster
        # than another (docs/benchmarks.md "Recall, sixth pass").
        sql_conn, first_reader = (
            stack.enter_context(psycopg.connect(url, autocommit=True)) for _ in range(2)
        )
        for conn in (sql_conn, first_reader):
            register_vector(conn)  # vectors travel as Recall sends them
        # Warm-up: caches, prepared statements, channels.
        for dataset, query in work[:50]:
            fast.recall(dataset, query)
            real.recall(dataset, query)
            fast.recall(dataset)
            if older is not None:
                older.recall(dataset, query)
                older.recall(dataset)
        log(f"measuring {len(work)} queries per path …")
        for i, (dataset, query) in enumerate(work):
            vector = hasher.embed_query(query)
            params = {**base, "dataset": dataset, "query": query, "qvec": vector}

            def bare_sql(p: dict[str, object] = params, on: object = sql_conn) -> object:
                # What Recall sends: the query's terms (its lexemes and their word forms,
                # in the dataset's configuration; the bench's datasets are in the clear, so
                # a lexeme is its own token), then the ranking statement, as Recall sends
                # it (numbered placeholders).
                conn: psycopg.Connection = on  # type: ignore[assignment]
                terms = query_term_params(conn, str(p["dataset"]), str(p["query"]))
                return as_recall_sends(conn, rank_query, {**p, **terms})

            # Untimed first read of the dataset: every path then finds its pages in shared
            # buffers, and the paths run in a shuffled order, so none pays the cold read.
            bare_sql(on=first_reader)
            paths: list[tuple[str, Callable[[], object]]] = [
                ("grpc", lambda d=dataset, q=query: fast.recall(d, q)),
                ("sql", bare_sql),
                ("embed", lambda q=query: embedder.embed_query(q)),
                ("grpc+minilm", lambda d=dataset, q=query: real.recall(d, q)),
                ("grpc recency-only", lambda d=dataset: fast.recall(d)),
                (
                    "sql recency-only",
                    lambda d=dataset: as_recall_sends(
                        sql_conn, rank_recent, {**base, "dataset": d}
                    ),
                ),
            ]
            if older is not None:
                paths += [
                    ("grpc before", lambda d=dataset, q=query: older.recall(d, q)),
                    ("grpc recency-only before", lambda d=dataset: older.recall(d)),
                ]
            rng.shuffle(paths)
            for key, run in paths:
                t = time.perf_counter()
                run()
                times[key].append(time.perf_counter() - t)
            if (i + 1) % 500 == 0:
                log(f"  {i + 1}")

        stats = {k: percentiles(v) for k, v in times.items()}
        print(f"load average during the run: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(
            f"Recall latency, {args.episodes} episodes over {args.datasets} datasets "
            f"({args.episodes // args.datasets} per dataset), {args.queries} sequential "
            "queries per path, top 3 (ms):\n"
        )
        print_latency_table(stats)
        for grpc_key, sql_key in (
            ("grpc", "sql"),
            ("grpc recency-only", "sql recency-only"),
            ("grpc before", "sql"),
            ("grpc recency-only before", "sql recency-only"),
            ("grpc", "grpc before"),
            ("grpc recency-only", "grpc recency-only before"),
        ):
            if grpc_key not in stats or sql_key not in stats:  # no --before-tree
                continue
            g, s = stats[grpc_key], stats[sql_key]
            print(
                f"{grpc_key} / {sql_key}: p50 {g['p50'] / s['p50']:.2f}x "
                f"(+{1000 * (g['p50'] - s['p50']):.2f} ms), p99 {g['p99'] / s['p99']:.2f}x "
                f"(+{1000 * (g['p99'] - s['p99']):.2f} ms)"
            )
        e = stats["embed"]
        print(
            f"query embedding (MiniLM int8, 1 thread): p50 {1000 * e['p50']:.2f} ms, "
            f"p99 {1000 * e['p99']:.2f} ms — the deployed Recall pays it once per query "
            f"(grpc+minilm p50 {1000 * stats['grpc+minilm']['p50']:.2f} ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
