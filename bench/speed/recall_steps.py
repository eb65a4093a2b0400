"""Where one Recall call's time goes, step by step, beside the bare SQL it stands for — the
per-call accounting of docs/benchmarks.md "Recall, sixth pass".

    .venv/bin/python -m bench.speed.recall_steps --url URL [--queries 300] [--datasets 10000]

On a store of ``ds-NNNNN`` datasets (bench/scale/recall_scale.py's), for random datasets and 3-word
queries, interleaved call by call in this process:

- the Recall servicer (``RecallServicer.Recall``, an engine configured as the service's,
  the hashing embedder, the test keyring) with a timer around each of its steps: the
  request's checks, the query's embedding, the connection's checkout and return, the
  opening statement (its execution, and the Python around it), the dataset's key, the
  ranking statement (its execution, and the Python around it: parameters, rows), opening
  the rows, the events' merge, the second look, building the response; what no timer
  covers is ``unattributed``;
- the bare SQL of ``bench.scale.recall_scale`` (``normal sql``): the query's vector, its terms'
  statement, their tokens, the ranking statement (limit 3, numbered placeholders as Recall
  sends it), on a psycopg connection;
- for the differences between the two: the bare ranking statement with Recall's limit
  (the second look's 5), and the opening statement sent bare, with and without its size
  probe.

Each dataset's pages are read first, untimed (as recall_scale does). Prints the load average
and the p50 and mean of every step in µs. Run with an older checkout's interpreter
(``DIR/.venv/bin/python -m bench.speed.recall_steps``) for that checkout's servicer; steps its
code does not have read 0.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the store (e.g. recall_scale's)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--datasets", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args(argv)

    from episodic.testing.processes import TEST_ENV

    os.environ.update(TEST_ENV)  # the settings the benches' services run with
    import psycopg
    from pgvector.psycopg import register_vector
    from sqlalchemy import event

    from bench.harness.recall_sql import as_recall_sends, psycopg_sql, query_term_params
    from episodic import access
    from episodic.config import EmbeddingSettings, PrivacySettings, Settings
    from episodic.providers import make_embedder
    from episodic.services.recall import domain
    from episodic.services.recall import events as recall_events
    from episodic.services.recall import servicer as servicer_module
    from episodic.services.recall.__main__ import engine_options
    from episodic.services.recall.servicer import RecallServicer
    from episodic.store import episode_reads
    from episodic.store import recall_queries as q
    from episodic.store.db import make_engine
    from episodic.store.recall_queries import recall_statement, threshold_params, unfiltered_params
    from episodic.store.vault import Vault, make_vault
    from episodic.testing.keys import keyring_file
    from episodic.v1 import recall_service_pb2 as pb

    settings = Settings()
    engine = make_engine(args.url, pool_size=2, **engine_options(settings))
    embedder = make_embedder(EmbeddingSettings(embedding_provider="hashing"), 384)
    servicer = RecallServicer(
        engine,
        settings.recall,
        embedder,
        make_vault(PrivacySettings(master_key_file=keyring_file())),
    )

    spent: dict[str, float] = collections.defaultdict(float)
    calls: list[dict[str, float]] = []

    def timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return function(*a, **k)
            finally:
                spent[name] += time.perf_counter() - t

        return wrapper

    # The steps, timed where the servicer and the domain look them up.
    servicer.parse_recall = timed("request checks", servicer.parse_recall)  # type: ignore[method-assign]
    raw_embed = embedder.embed_query
    embedder.embed_query = timed("query embedding", embedder.embed_query)  # type: ignore[method-assign]
    domain.recall = timed("domain.recall", domain.recall)  # servicer calls domain.recall
    q.read_opening = timed("opening", q.read_opening)
    q.rank = timed("ranking", q.rank)
    if hasattr(q, "rank_fast"):
        q.rank_fast = timed("ranking", q.rank_fast)
    domain.open_row = timed("opening the rows", domain.open_row)
    recall_events.merge = timed("events' merge", recall_events.merge)
    q.reorder_top = timed("second look", q.reorder_top)
    servicer_module._scored = timed("response: rows", servicer_module._scored)
    Vault.key_of = timed("dataset key", Vault.key_of)  # type: ignore[method-assign]
    reading = servicer_module._reading

    @contextmanager
    def timed_reading(*a: Any, **k: Any) -> Iterator[Any]:
        t = time.perf_counter()
        manager = reading(*a, **k)
        conn = manager.__enter__()
        spent["checkout"] += time.perf_counter() - t
        try:
            yield conn
        finally:
            t = time.perf_counter()
            manager.__exit__(None, None, None)
            spent["return"] += time.perf_counter() - t

    servicer_module._reading = timed_reading

    started: dict[int, float] = {}

    def before(statement: str) -> None:
        started[0] = time.perf_counter()

    def after(statement: str) -> None:
        kind = "ranking" if "episode_count" in statement else "opening"
        spent[f"{kind}: execution"] += time.perf_counter() - started[0]

    @event.listens_for(engine, "before_cursor_execute")
    def _b(conn, cursor, statement, params, context, many):  # type: ignore[no-untyped-def]
        before(statement)

    @event.listens_for(engine, "after_cursor_execute")
    def _a(conn, cursor, statement, params, context, many):  # type: ignore[no-untyped-def]
        after(statement)

    # Statements sent on the psycopg connection directly (episodic.store.raw_statement),
    # when the checkout sends them so: timed around the driver call, rows read included —
    # the ranking's (recall_queries) and the opening's (episode_reads), each read through
    # its own module.
    if hasattr(q, "fetch_all"):
        fetch_all = q.fetch_all

        def timed_fetch(conn: Any, statement: str, *a: Any, **k: Any) -> Any:
            before(statement)
            try:
                return fetch_all(conn, statement, *a, **k)
            finally:
                after(statement)

        q.fetch_all = timed_fetch
        episode_reads.fetch_all = timed_fetch

    class NoDeadline:
        def time_remaining(self) -> None:
            return None

    # ``sql`` runs the bare statements; ``first_reader`` reads each dataset first, untimed,
    # on a backend no timed path uses (a backend that has just run a statement runs it
    # again faster than another one: bench/scale/recall_scale.py).
    # Each timed path has a backend of its own too, for the same reason: the bare
    # statement with Recall's limit (``sql5``) and the bare openings (``openings``).
    sql, sql5, openings, first_reader = (
        psycopg.connect(args.url, autocommit=True) for _ in range(4)
    )
    for conn in (sql, sql5, openings, first_reader):
        register_vector(conn)
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
    exact_sql = psycopg_sql(recall_statement(with_query=True, with_vector=True))
    opening_probe = episode_reads._opening_statement(True, False, True, True, True)
    opening_plain = episode_reads._opening_statement(True, False, False, True, True)
    from episodic.query_focus import word_forms

    def bare(dataset: str, query: str, limit: int, record: bool, on: Any = None) -> None:
        conn = on or sql
        cpu = time.thread_time()
        t0 = time.perf_counter()
        vector = raw_embed(query)
        t1 = time.perf_counter()
        terms = query_term_params(conn, dataset, query)  # one statement, then Python
        t2 = time.perf_counter()
        p = {
            "dataset": dataset,
            "query": query,
            "qvec": vector,
            **unfiltered_params(),
            **threshold_params(0.0, 0.0, None),
            "ws": 0.7,
            "wr": 0.3,
            "limit": limit,
            **terms,
        }
        as_recall_sends(conn, exact_sql, p)  # numbered, as Recall sends it
        t3 = time.perf_counter()
        if record:
            prefix = "bare" if limit == 3 else f"bare, limit {limit}"
            spent[f"{prefix}: query embedding"] += t1 - t0
            spent[f"{prefix}: terms statement and tokens"] += t2 - t1
            spent[f"{prefix}: ranking statement"] += t3 - t2
            spent[f"{prefix}: total"] += t3 - t0
            spent[f"{prefix}: CPU of this process"] += time.thread_time() - cpu

    def bare_opening(dataset: str, query: str, statement: str, name: str) -> None:
        forms = word_forms(query)
        params = {
            "dataset": dataset,
            "q": query,
            "bound": 20001,
            "forms": [f for f, _ in forms],
            "words": [w for _, w in forms],
        }
        t = time.perf_counter()
        openings.execute(statement, params).fetchall()
        spent[name] += time.perf_counter() - t

    rng = random.Random(args.seed)
    vocab = [f"w{i}" for i in range(1, 5001)]

    def words() -> str:
        return " ".join(vocab[int(5000 * rng.random() ** 3)] for _ in range(3))

    include = [pb.RECALL_INCLUDE_EPISODES]
    with access.running_as(access.ANONYMOUS):
        for _ in range(20):  # warm-up: prepared statements, caches
            d, w = f"ds-{rng.randrange(args.datasets):05d}", words()
            servicer.Recall(pb.RecallRequest(dataset=d, query=w, include=include), NoDeadline())
            bare(d, w, 3, False)
            bare(d, w, 5, False, on=sql5)
        spent.clear()
        for i in range(args.queries):
            dataset, query = f"ds-{rng.randrange(args.datasets):05d}", words()
            bare(dataset, query, 3, False, on=first_reader)  # untimed first read

            def recall(dataset: str = dataset, query: str = query) -> None:
                request = pb.RecallRequest(dataset=dataset, query=query, include=include)
                t, cpu = time.perf_counter(), time.thread_time()
                servicer.Recall(request, NoDeadline())  # type: ignore[arg-type]
                spent["Recall in-process: total"] += time.perf_counter() - t
                spent["Recall in-process: CPU of this process"] += time.thread_time() - cpu

            paths: list[Callable[[], None]] = [
                recall,
                lambda d=dataset, w=query: bare(d, w, 3, True),
                lambda d=dataset, w=query: bare(d, w, 5, True, on=sql5),
                lambda d=dataset, w=query: bare_opening(d, w, opening_probe, "bare opening, probe"),
                lambda d=dataset, w=query: bare_opening(
                    d, w, opening_plain, "bare opening, no probe"
                ),
            ]
            rng.shuffle(paths)
            for run in paths:
                run()
            calls.append(dict(spent))
            spent.clear()
            if (i + 1) % 100 == 0:
                print(f"  {i + 1}", file=sys.stderr, flush=True)
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    names = sorted({k for c in calls for k in c})
    print(f"{len(calls)} calls, µs per call (p50 / mean):\n")
    print("| step | p50 | mean |")
    print("|---|---|---|")
    for name in names:
        values = [c.get(name, 0.0) * 1e6 for c in calls]
        print(f"| {name} | {statistics.median(values):.0f} | {statistics.fmean(values):.0f} |")

    # Derived: Python inside the statements' functions, and what no timer covers.
    def per(name: str) -> list[float]:
        return [c.get(name, 0.0) * 1e6 for c in calls]

    derived = {
        "opening: Python around the statement": [
            a - b for a, b in zip(per("opening"), per("opening: execution"), strict=True)
        ],
        "ranking: Python around the statement": [
            a - b for a, b in zip(per("ranking"), per("ranking: execution"), strict=True)
        ],
        "unattributed": [
            c.get("Recall in-process: total", 0) * 1e6
            - sum(
                c.get(k, 0) * 1e6
                for k in (
                    "request checks",
                    "query embedding",
                    "checkout",
                    "return",
                    "opening",
                    "dataset key",
                    "ranking",
                    "opening the rows",
                    "events' merge",
                    "second look",
                    "response: rows",
                )
            )
            for c in calls
        ],
        "Recall in-process over bare": [
            a - b for a, b in zip(per("Recall in-process: total"), per("bare: total"), strict=True)
        ],
    }
    for name, values in derived.items():
        print(f"| {name} | {statistics.median(values):.0f} | {statistics.fmean(values):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
