"""The approximate path looked into by ``bench.scale.recall_scale``, on the same queries as
the exact statement: ``--curve`` (recall@5/@10 and latency of approximate variants:
``parse_curve``, ``curve``) and ``--diagnose`` (which exact top-10 episodes the
approximate top 10 misses, and from which pool source they should have come:
``diagnose``)."""

from __future__ import annotations

import os
import random
import statistics
import sys
import time

import psycopg

from bench.harness.recall_sql import KeptStatement, execute
from bench.scale.recall.common import (
    _episode_ids,
    log,
    recall_at,
)

#: The README's curve (--curve default): the pool's size, the HNSW search list and how far
#: an iterative scan may walk, and the recent set, one at a time around the defaults.
DEFAULT_CURVE = (
    "candidates=200,ef=200;candidates=400,ef=400;candidates=800,ef=800;"
    "candidates=200,ef=800;candidates=1000,ef=1000"
)


def parse_curve(spec: str, defaults: object) -> list[dict[str, int]]:
    """``--curve``'s variants, each with every key (the settings' defaults for the rest)."""
    from episodic.services.recall.__main__ import ef_search
    from episodic.store.recall_queries import Approximation

    base = {
        "candidates": defaults.recall_approximate_candidates,  # type: ignore[attr-defined]
        "ef": ef_search(defaults),  # type: ignore[arg-type]
        "scan": 20_000,  # pgvector's default hnsw.max_scan_tuples
        "recent": defaults.recall_approximate_recent,  # type: ignore[attr-defined]
        "per_lexeme": Approximation().per_lexeme,
        "selective_df": Approximation().selective_df,
        "postings": Approximation().postings,
        "words": Approximation().words,
        "nearest": defaults.recall_approximate_nearest or 0,  # type: ignore[attr-defined]
    }
    variants = []
    for part in (DEFAULT_CURVE if spec == "default" else spec).split(";"):
        variant = dict(base)
        for item in filter(None, part.split(",")):
            key, value = item.split("=")
            if key not in base:
                raise SystemExit(f"--curve: unknown key {key!r} (one of {', '.join(base)})")
            variant[key] = int(value)
        variants.append(variant)
    return variants


def _session(sql: psycopg.Connection, variant: dict[str, int]) -> None:
    sql.execute(f"SET hnsw.ef_search = {variant['ef']}")
    sql.execute(f"SET hnsw.max_scan_tuples = {variant['scan']}")


def curve(
    sql: psycopg.Connection,
    dataset: str,
    queries: int,
    params: object,
    words: object,
    exact_sql: str,
    variants: list[dict[str, int]],
    before_sql: str | None = None,
) -> None:
    """recall@5/@10 and latency of each approximate variant against the exact statement on
    the same queries (variants in a shuffled order per query); ``before_sql``: an older
    approximate statement, run with the first variant's settings."""
    from bench.harness.report import percentiles

    approx_sql = KeptStatement.of()  # as Recall runs it: the lexical pool chosen first
    names = [",".join(f"{k}={v}" for k, v in variant.items()) for variant in variants]
    statements: list[str | KeptStatement] = [approx_sql] * len(variants)
    if before_sql is not None:
        names.append("before: " + names[0])
        variants = [*variants, variants[0]]
        statements.append(before_sql)
    took: dict[str, list[float]] = {k: [] for k in ["exact", *names]}
    at: dict[str, dict[int, list[float]]] = {k: {5: [], 10: []} for k in names}
    rng = random.Random(len(dataset))
    log(f"curve on {dataset}: {queries} queries, {len(variants)} variants …")
    for i in range(queries):
        p = params(dataset, words(), 10)  # type: ignore[operator]
        t = time.perf_counter()
        exact = _episode_ids(sql.execute(exact_sql, p))
        took["exact"].append(time.perf_counter() - t)
        order = list(zip(names, variants, statements, strict=True))
        rng.shuffle(order)
        for name, variant, statement in order:
            _session(sql, variant)
            q = {
                **p,
                "approx_candidates": variant["candidates"],
                "approx_recent": variant["recent"],
                "approx_per_lexeme": variant["per_lexeme"],
                "approx_selective_df": variant["selective_df"],
                "approx_postings": variant["postings"],
                "approx_words": variant["words"],
                "approx_nearest": variant["nearest"] or variant["candidates"],
            }
            t = time.perf_counter()
            got = _episode_ids(execute(sql, statement, q))
            took[name].append(time.perf_counter() - t)
            for n in (5, 10):
                at[name][n].append(recall_at(got, exact, n))
        if (i + 1) % 10 == 0:
            log(f"  {i + 1}")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    e = percentiles(took["exact"])
    print(f"\n{dataset}: {queries} queries, top 10, load average {load}")
    print(f"exact statement: p50 {1000 * e['p50']:.0f} ms, p99 {1000 * e['p99']:.0f} ms\n")
    print("| variant | recall@5 (min) | recall@10 (min) | p50 ms (x exact) | p99 ms (x exact) |")
    print("|---|---|---|---|---|")
    for name in names:
        a = percentiles(took[name])
        print(
            f"| {name} | {statistics.fmean(at[name][5]):.3f} ({min(at[name][5]):.1f}) | "
            f"{statistics.fmean(at[name][10]):.3f} ({min(at[name][10]):.1f}) | "
            f"{1000 * a['p50']:.0f} ({a['p50'] / e['p50']:.2f}x) | "
            f"{1000 * a['p99']:.0f} ({a['p99'] / e['p99']:.2f}x) |"
        )
    sys.stdout.flush()


def diagnose(
    sql: psycopg.Connection,
    dataset: str,
    queries: int,
    params: object,
    words: object,
    exact_sql: str,
    approx_sql: str | KeptStatement,
) -> None:
    """Which exact top-10 episodes the approximate top 10 misses, and why: scored
    differently although among the candidates, or not among them; then the source that
    should have brought each (its rank by summary cosine, by its best chunk's cosine among
    all chunks, by ts_rank among the lexical matches, by recency) against that part's
    size."""
    from bench.harness.recall_sql import psycopg_sql
    from episodic.store.recall_queries import approximate_parts, recall_sql

    approx_text = recall_sql(with_query=True, with_vector=True, approximate=True)
    head = approx_text[: approx_text.index("pool AS MATERIALIZED (")]  # WITH qv, q, qq,
    parts = {
        name: psycopg_sql(f"{head} part AS ({part}) SELECT DISTINCT episode_id FROM part")
        for name, part in approximate_parts(True).items()
    }
    ranks = psycopg_sql(
        f"""{head} me AS (
            SELECT e.episode_id, e.embedding <=> (SELECT v FROM qv) AS sd, e.ended_at,
                   coalesce(ts_rank(e.search_vector, (SELECT tq FROM qq), 1), 0) AS tr,
                   (SELECT min(m.embedding <=> (SELECT v FROM qv)) FROM message_chunks m
                    WHERE m.dataset = :dataset AND m.thread_id = e.thread_id
                      AND m.end_sequence <= e.end_sequence) AS cd
            FROM episodes e WHERE e.dataset = :dataset AND e.episode_id = :episode)
        SELECT
          (SELECT count(*) FROM episodes e WHERE e.dataset = :dataset
             AND e.status = 'completed' AND e.embedding <=> (SELECT v FROM qv) < me.sd),
          (SELECT count(*) FROM message_chunks m WHERE m.dataset = :dataset
             AND m.embedding <=> (SELECT v FROM qv) < me.cd),
          CASE WHEN me.tr > 0 THEN (SELECT count(*) FROM episodes e WHERE e.dataset = :dataset
             AND e.status = 'completed' AND e.search_vector @@ (SELECT tq FROM qq)
             AND ts_rank(e.search_vector, (SELECT tq FROM qq), 1) > me.tr) END,
          (SELECT count(*) FROM episodes e WHERE e.dataset = :dataset
             AND e.status = 'completed' AND e.ended_at > me.ended_at)
        FROM me"""
    )
    size = {
        "nearest summaries": "approx_nearest",
        "nearest chunks": "approx_nearest",
        "lexical": "approx_candidates",
        "recent": "approx_recent",
    }
    log(f"diagnosing {queries} queries on {dataset} …")
    misses = {5: 0, 10: 0}
    scored_differently = not_in_pool = 0
    by_source: dict[str, int] = {}
    for _ in range(queries):
        p = params(dataset, words(), 10)  # type: ignore[operator]
        exact = _named_rows(sql.execute(exact_sql, p))
        approximate = _named_rows(execute(sql, approx_sql, p))
        got = [r["episode_id"] for r in approximate]
        exact_ids = [r["episode_id"] for r in exact]
        approx_scores: dict[object, tuple[int, dict[str, object]]] | None = None
        members = {name: {r[0] for r in sql.execute(q, p)} for name, q in parts.items()}
        pool = set().union(*members.values())
        for position, episode in enumerate(exact_ids):
            if episode in got[:10]:
                continue
            for n in (5, 10):
                misses[n] += position < n
            if episode in pool:
                scored_differently += 1
                where = (
                    "in the pool (" + ", ".join(n for n, m in members.items() if episode in m) + ")"
                )
                if approx_scores is None:  # the whole pool ranked, for the missing one's place
                    approx_scores = {
                        r["episode_id"]: (k + 1, r)
                        for k, r in enumerate(
                            _named_rows(execute(sql, approx_sql, {**p, "limit": 100_000}))
                        )
                    }
                if episode in approx_scores:
                    k, r = approx_scores[episode]
                    where += f"; approximate #{k}: " + _signals_text(r)
            else:
                not_in_pool += 1
                summary, chunk, lexical, recent = sql.execute(
                    ranks, {**p, "episode": episode}
                ).fetchone()  # type: ignore[misc]
                rank_of = {
                    "nearest summaries": summary,
                    "nearest chunks": chunk,
                    "lexical": lexical,
                    "recent": recent,
                }
                best = min((r / p[size[k]], k) for k, r in rank_of.items() if r is not None)  # type: ignore[index]
                by_source[best[1]] = by_source.get(best[1], 0) + 1
                where = "NOT in the pool; ranks: " + ", ".join(
                    f"{k} {r}" for k, r in rank_of.items()
                )
            print(
                f"{dataset} query {p['query']!r}: exact #{position + 1} {str(episode)[:8]} missing, {where}"
            )  # type: ignore[index]
            print(
                f"    exact: {_signals_text(exact[position])}; exact #10 relevance "
                f"{exact[-1]['relevance']:.4f}, approximate #10 {approximate[-1]['relevance']:.4f}"
            )
    print(
        f"\n{dataset}: {queries} queries; exact top-5 episodes missed {misses[5]}, top-10 "
        f"{misses[10]}; of the top-10 misses {scored_differently} were candidates scored "
        f"differently, {not_in_pool} not candidates; the nearest source of those: {by_source}"
    )
    sys.stdout.flush()


def _named_rows(cursor: psycopg.Cursor) -> list[dict[str, object]]:
    """The ranked rows of a Recall statement as dicts by column name (the count-only row
    left out)."""
    names = [d.name for d in cursor.description or []]
    return [r for r in (dict(zip(names, row, strict=True)) for row in cursor) if r["episode_id"]]


#: A ranked row's signals that diagnose prints (relevance = ws * similarity + wr * recency).
SIGNALS = (
    "relevance",
    "similarity",
    "lexical",
    "semantic",
    "cosine",
    "coverage",
    "passage_coverage",
    "recency",
)


def _signals_text(row: dict[str, object]) -> str:
    return ", ".join(f"{k} {float(row[k]):.4f}" for k in SIGNALS if row.get(k) is not None)  # type: ignore[arg-type]
