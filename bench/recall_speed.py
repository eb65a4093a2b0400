"""Recall latency through gRPC versus the bare SQL it runs, side by side in one run.

    .venv/bin/python -m bench.recall_speed [--episodes 100000] [--datasets 1000] [--queries 2000]

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
import re
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from functools import lru_cache
from pathlib import Path

import psycopg
from pgvector.psycopg import register_vector

REPO = Path(__file__).resolve().parents[1]


#: The query's distinct lexemes and those of its words' irregular forms, as
#: store.recall_queries.query_terms asks for them (and Recall's opening statement reads
#: them): what the default ranking (``RankingOptions.word_forms``) sends.
TERMS_SQL = """
    WITH cfg AS (SELECT CAST(coalesce((SELECT text_search_config FROM datasets
                                       WHERE dataset = %(dataset)s), 'english') AS regconfig) AS c),
    terms AS (
        SELECT DISTINCT u.lexeme, NULL::text AS word
        FROM cfg, unnest(to_tsvector(cfg.c, %(query)s)) u
        UNION
        SELECT a.lexeme, o.lexeme
        FROM cfg, unnest(CAST(%(forms)s AS text[]), CAST(%(words)s AS text[])) AS f(form, word)
        CROSS JOIN LATERAL unnest(to_tsvector(cfg.c, f.form)) a
        CROSS JOIN LATERAL unnest(to_tsvector(cfg.c, f.word)) o
        WHERE cfg.c = CAST('english' AS regconfig)
    )
    SELECT t.lexeme, t.word,
           (SELECT array_agg(u.lexeme ORDER BY p.position)
            FROM cfg, unnest(to_tsvector(cfg.c, %(query)s)) u
            CROSS JOIN LATERAL unnest(u.positions) AS p(position)) AS ordered
    FROM terms t
"""


def query_term_params(conn: psycopg.Connection, dataset: str, query: str) -> dict[str, object]:
    """The ranking statement's ``lexemes``, ``weights`` and ``terms`` (and ``phrases``, the
    query's word pairs, under the default's second look) for ``query`` in a dataset stored
    in the clear (a lexeme is its own token), read as Recall reads them: one statement,
    then :func:`episodic.store.recall_queries.query_term_tokens` and ``phrase_pairs``."""
    from episodic.crypto import ClearKey
    from episodic.query_focus import word_forms
    from episodic.store.recall_queries import DEFAULT_RANKING, phrase_pairs, query_term_tokens

    forms = word_forms(query) if DEFAULT_RANKING.word_forms else []
    rows = conn.execute(
        TERMS_SQL,
        {
            "dataset": dataset,
            "query": query,
            "forms": [f for f, _ in forms],
            "words": [w for _, w in forms],
        },
    ).fetchall()
    terms = query_term_tokens(
        ClearKey(dataset),
        [(lexeme, False) for lexeme, word, _ in rows if word is None],
        [(lexeme, word) for lexeme, word, _ in rows if word is not None],
    )
    params: dict[str, object] = {
        "lexemes": [t for t, _, _ in terms],
        "weights": [w for _, w, _ in terms],
        "terms": [term for _, _, term in terms],
    }
    if DEFAULT_RANKING.phrase:  # the query's word pairs, from its lexemes in order
        params["phrases"] = phrase_pairs(ClearKey(dataset), list(rows[0][2] or []) if rows else [])
    return params


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pick(p: float) -> float:
        return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]

    return {
        "p50": pick(0.50),
        "p95": pick(0.95),
        "p99": pick(0.99),
        "mean": statistics.fmean(ordered),
    }


def print_latency_table(stats: dict[str, dict[str, float]]) -> None:
    """One row per path of :func:`percentiles` (seconds), in ms, as a Markdown table."""
    print("| path | p50 | p95 | p99 | mean |")
    print("|---|---|---|---|---|")
    for key, s in stats.items():
        print(
            f"| {key} | {1000 * s['p50']:.2f} | {1000 * s['p95']:.2f} | "
            f"{1000 * s['p99']:.2f} | {1000 * s['mean']:.2f} |"
        )
    print()


def build(conn: psycopg.Connection, episodes: int, datasets: int, dim: int) -> None:
    """Synthetic threads, messages, episodes and chunks, generated inside PostgreSQL."""
    per_message = 15
    log(f"building {episodes} episodes over {datasets} datasets …")
    started = time.monotonic()
    # Datasets in the clear (no data key): the text is stored as 0x00 || UTF-8.
    conn.execute(
        "INSERT INTO datasets (dataset) SELECT 'ds-' || lpad(g::text, 4, '0') "
        "FROM generate_series(0, %(datasets)s - 1) g",
        {"datasets": datasets},
    )
    conn.execute(
        """
        INSERT INTO threads (thread_id, dataset, label, last_sequence, captured_sequence,
                             last_message_at, last_activity_at)
        SELECT md5('t' || i)::uuid, 'ds-' || lpad(mod(i, %(datasets)s)::text, 4, '0'),
               '\\x00'::bytea || convert_to('thread-' || i, 'UTF8'), 8, 8, now(), now()
        FROM generate_series(1, %(n)s) i
        """,
        {"n": episodes, "datasets": datasets},
    )
    log(f"  threads {time.monotonic() - started:.0f}s")
    # Zipf-ish words: a few are common, most are rare (like real text).
    conn.execute(
        f"""
        INSERT INTO messages (dataset, thread_id, sequence, role, content, created_at)
        SELECT 'ds-' || lpad(mod(i, %(datasets)s)::text, 4, '0'), md5('t' || i)::uuid, s, CASE WHEN mod(s, 2) = 1 THEN 'user' ELSE 'assistant' END,
               '\\x00'::bytea || convert_to(
                   (SELECT string_agg('w' || (1 + floor(5000 * power(random(), 3)))::int, ' ')
                    FROM generate_series(1, {per_message}) k WHERE i > 0 AND s > 0), 'UTF8'),
               now() - interval '1 day' * mod(i, 365)
        FROM generate_series(1, %(n)s) i, generate_series(1, 8) s
        """,
        {"n": episodes, "datasets": datasets},
    )
    log(f"  messages {time.monotonic() - started:.0f}s")
    # The lexical document is computed in the same INSERT: a later UPDATE would rewrite
    # every row and its HNSW index entry.
    conn.execute(
        f"""
        INSERT INTO episodes (episode_id, thread_id, dataset, status, semantic_status, trigger,
                              start_sequence, end_sequence, message_count, started_at, ended_at,
                              summary, embedding, completed_at, search_vector, search_length)
        SELECT md5('e' || i)::uuid, md5('t' || i)::uuid,
               'ds-' || lpad(mod(i, %(datasets)s)::text, 4, '0'), 'completed', 'skipped',
               'explicit', 1, 8, 8, ended - interval '10 minutes', ended, d.first,
               (SELECT array_agg(random() - 0.5) FROM generate_series(1, {dim}) d
                WHERE i > 0)::vector,
               now(), d.v,
               (SELECT sum(coalesce(array_length(x.positions, 1), 1)) FROM unnest(d.v) x)
        FROM generate_series(1, %(n)s) i
        CROSS JOIN LATERAL (
            SELECT now() - interval '1 second' * floor(random() * 365 * 86400) AS ended
            WHERE i > 0
        ) t
        CROSS JOIN LATERAL (
            SELECT to_tsvector('english', string_agg(convert_from(substring(m.content FROM 2), 'UTF8'), E'\\n'
                                             ORDER BY m.sequence)) v,
                   min(m.content) FILTER (WHERE m.sequence = 1) AS first
            FROM messages m
            WHERE m.dataset = 'ds-' || lpad(mod(i, %(datasets)s)::text, 4, '0')
              AND m.thread_id = md5('t' || i)::uuid
        ) d
        """,
        {"n": episodes, "datasets": datasets},
    )
    log(f"  episodes and their lexical documents {time.monotonic() - started:.0f}s")
    conn.execute(
        f"""
        INSERT INTO message_chunks (thread_id, start_sequence, start_offset, end_sequence,
                                    dataset, embedding, search_vector, search_length)
        SELECT e.thread_id, c.s, 0, c.s + 3, e.dataset,
               (SELECT array_agg(random() - 0.5) FROM generate_series(1, {dim}) d
                WHERE c.s > 0 AND e.thread_id IS NOT NULL)::vector,
               tv.v, (SELECT sum(coalesce(array_length(x.positions, 1), 1)) FROM unnest(tv.v) x)
        FROM episodes e
        CROSS JOIN (VALUES (1), (3), (5)) c(s)
        CROSS JOIN LATERAL (
            SELECT to_tsvector('english', string_agg(convert_from(substring(m.content FROM 2), 'UTF8'), E'\\n'
                                             ORDER BY m.sequence)) v
            FROM messages m
            WHERE m.dataset = e.dataset AND m.thread_id = e.thread_id
              AND m.sequence BETWEEN c.s AND c.s + 3
        ) tv
        """
    )
    log(f"  chunks {time.monotonic() - started:.0f}s")
    conn.execute("ANALYZE")
    log(f"built in {time.monotonic() - started:.0f}s")


def psycopg_sql(sql: str) -> str:
    """SQLAlchemy's :name parameters as psycopg's %(name)s (casts like ::text untouched)."""
    sql = sql.replace("%", "%%")
    return re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", sql)


def as_recall_sends(
    conn: psycopg.Connection, statement: str, params: dict[str, object]
) -> list[tuple[object, ...]]:
    """The rows of ``statement`` (psycopg's named form) sent as Recall sends it
    (``episodic.store.raw_statement.fetch_all``): in PostgreSQL's numbered placeholders,
    which psycopg does not parse again on every execute as it does a named statement over
    4 KB (~0.25 ms of CPU for the ranking statement), rows read in binary. The numbering
    is the bench's own (the floor does not depend on the checkout measured, which may be
    older than raw_statement.numbered)."""
    return sent_as_recall_sends(conn, statement, params).fetchall()


def sent_as_recall_sends(
    conn: psycopg.Connection, statement: str, params: dict[str, object]
) -> psycopg.RawCursor[tuple[object, ...]]:
    """:func:`as_recall_sends`'s cursor, executed, its rows not yet read (its
    ``description`` names the columns)."""
    sql, names = _numbered(statement)
    cursor = psycopg.RawCursor(conn)
    cursor.execute(sql, [params[name] for name in names], binary=True)
    return cursor


@lru_cache(maxsize=16)
def _numbered(statement: str) -> tuple[str, list[str]]:
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(0) == "%%":
            return "%"
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return re.sub(r"%%|%\((\w+)\)s", number, statement), names


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
    from episodic.client import EpisodicClient
    from episodic.config import EmbeddingSettings
    from episodic.providers import HashingEmbedder, make_embedder
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
