"""Where the heavy dataset's Recall time goes, and what the lexical part would cost another
way (issue 50), on a store built by ``bench/recall_scale.py --keep``.

    .venv/bin/python -m bench.heavy_path --url URL [--dataset heavy-0000] [--queries 20]
        [--exact-queries 10] [--textsearch-url ADMIN_URL]

Three measures, same random 3-word Zipf queries as recall_scale, sequentially on one
connection with the Recall service's session settings, the approximate statement planned for
its parameters (as ``rank`` has it):

1. **parts**: the approximate statement with its pool cut down to ``best lexical`` alone
   (what remains is the dataset's BM25 statistics, the best lexical holders and the scoring
   of the candidates: the floor), then that floor plus each other pool part alone, then the
   whole statement; p50/p99 and each part's p50 over the floor;
2. **statistics**: each CTE of the dataset's statistics alone (``ddf``, ``pdf``, the
   documents' and passages' counts and lengths, the selective words' holders and their exact
   BM25), with what it reads before it;
   **kept statistics**: the whole statement with BM25's statistics counted (as before
   migration 0022) and read from the dataset's kept statistics (store/kept_statistics.py,
   counted first if the dataset has none: that count is timed too), interleaved on the same
   queries; p50/p99, and whether the two rank the same top 10;
   **against a revision** (``--against REV``, alone): the ranking statement of an older
   commit against this checkout's, interleaved on the same queries, on the heavy dataset
   and on the normal ones: p50/p95/p99 and whether both rank the same top 10;
3. **recall**: with ``--exact-queries N``, the exact statement's top 10 against the whole
   approximate statement and against it without the ``ts_rank`` parts (``lexical``,
   ``densest documents``, ``densest chunks``): what those parts buy;
4. **lexical top-k**: the 400 best lexical matches of one dataset by ``ts_rank`` over the GIN
   index (the ``lexical`` part) against the exact BM25 ranking (SQL over every holder of a
   query word, the dataset's own statistics): time, and how many of the exact BM25 top 10 and
   top 50 each top 400 holds. With ``--textsearch-url`` (an admin URL of a PostgreSQL that
   has pg_textsearch in ``shared_preload_libraries``, e.g. built from
   ``../shared/vendor/pg_textsearch-1.4.0.tar.gz``), the store's episodes' documents are
   copied into a database there and the same top 400 is also taken from a ``bm25`` index,
   beside ``ts_rank`` on that server (both timed on the same server); and the write cost
   there: single-row inserts of the dataset's documents with the GIN index alone and with the
   ``bm25`` index too, ABBA.

A document is indexed for pg_textsearch as text by ``episodic_bm25_text``
(``episodic.testing.textsearch.BM25_TEXT_FUNCTION``: each lexeme as its md5, repeated as often
as it occurs — the tsvector's term frequencies and length). ``textsearch_server()`` there
starts a server that loads the extension, built from the vendored source.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from pgvector.psycopg import register_vector

from bench.harness import REPO

TS_RANK_PARTS = ("lexical", "densest documents", "densest chunks")

#: The query's lexemes as an OR tsquery (quoted, never re-parsed).
_TSQUERY = (
    r"(SELECT string_agg('''' || replace(replace(l, '\', '\\'), '''', '''''') || '''', ' | ')"
    "::tsquery FROM unnest(%(lex)s::text[]) l)"
)
TS_RANK_TOPK = f"""SELECT episode_id FROM episodes x
    WHERE x.dataset = %(ds)s AND x.status = 'completed' AND x.search_vector @@ {_TSQUERY}
    ORDER BY ts_rank(x.search_vector, {_TSQUERY}, 1) DESC LIMIT %(k)s"""
#: Okapi BM25 (k1 1.2, b 0.75) over every holder of a query word, with the dataset's count,
#: average length and document frequencies: the ranking a lexical top-k should reproduce.
EXACT_BM25 = f"""WITH st AS (
        SELECT count(*)::float8 AS n, avg(search_length)::float8 AS avgdl FROM episodes
        WHERE dataset = %(ds)s AND status = 'completed'),
    t AS (
        SELECT x.episode_id, x.search_length::float8 AS dl, u.lexeme,
               coalesce(array_length(u.positions, 1), 1)::float8 AS tf
        FROM episodes x CROSS JOIN LATERAL unnest(x.search_vector) u
        WHERE x.dataset = %(ds)s AND x.status = 'completed' AND x.search_vector @@ {_TSQUERY}
          AND u.lexeme = ANY(%(lex)s::text[])),
    df AS (SELECT lexeme, count(*)::float8 AS df FROM t GROUP BY lexeme)
    SELECT t.episode_id FROM t JOIN df USING (lexeme) CROSS JOIN st GROUP BY t.episode_id
    ORDER BY sum(ln(1 + (st.n - df.df + 0.5) / (df.df + 0.5)) * t.tf * 2.2
                 / (t.tf + 1.2 * (0.25 + 0.75 * t.dl / st.avgdl))) DESC, t.episode_id
    LIMIT 50"""
BM25_TOPK = """SELECT episode_id FROM episodes x
    WHERE x.dataset = %(ds)s AND x.status = 'completed'
    ORDER BY episodic_bm25_text(x.search_vector) <@> %(bq)s::bm25query LIMIT %(k)s"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def ms(samples: list[float]) -> tuple[float, float]:
    """p50 and p99 of ``samples`` (seconds) in ms."""
    ordered = sorted(samples)
    return (
        1000 * statistics.median(ordered),
        1000 * ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))],
    )


def copy_documents(url: str, admin_url: str) -> str:
    """A database on ``admin_url``'s server holding the store's episodes' documents, with the
    GIN index Recall has and a pg_textsearch ``bm25`` index; its URL. Prints the build
    times."""
    from episodic.testing.database import with_database
    from episodic.testing.textsearch import BM25_TEXT_FUNCTION

    name = f"heavy_path_{os.getpid()}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(f"CREATE DATABASE {name}")
    target = with_database(admin_url, name)
    with psycopg.connect(target, autocommit=True) as dst, psycopg.connect(url) as src:
        dst.execute("CREATE EXTENSION pg_textsearch")
        dst.execute(
            "CREATE TABLE episodes (dataset text, episode_id uuid, status text, "
            "search_vector tsvector, search_length int, PRIMARY KEY (dataset, episode_id))"
        )
        dst.execute(BM25_TEXT_FUNCTION)
        copy_out = (
            "COPY (SELECT dataset, episode_id, status, search_vector, search_length "
            "FROM episodes) TO STDOUT"
        )
        with (
            src.cursor().copy(copy_out) as out,
            dst.cursor().copy("COPY episodes FROM STDIN") as into,
        ):
            for data in out:
                into.write(data)
        dst.execute("SET maintenance_work_mem = '256MB'")
        for index, ddl in (
            (
                "gin",
                "CREATE INDEX episodes_search_vector_idx ON episodes USING gin (search_vector) "
                "WHERE status = 'completed'",
            ),
            (
                "bm25",
                "CREATE INDEX episodes_bm25_idx ON episodes USING bm25 "
                "((episodic_bm25_text(search_vector))) WITH (text_config = 'simple') "
                "WHERE status = 'completed'",
            ),
        ):
            t = time.perf_counter()
            dst.execute(ddl)
            print(f"pg_textsearch server: {index} index built in {time.perf_counter() - t:.1f} s")
        dst.execute("VACUUM ANALYZE episodes")
    return target


#: The CTEs of the approximate statement's dataset statistics, each timed alone.
STATISTICS_CTES = (
    "ddf",
    "pdf",
    "dataset_dstats",
    "dataset_pstats",
    "dataset_dterms",
    "dataset_pterms",
    "dataset_doc_bm25",
    "dataset_passage_bm25",
)


def statistics_ctes(
    conn: psycopg.Connection, dataset: str, queries: int, words: Any, params: Any
) -> None:
    """Each CTE of ``dataset_statistics`` (the floor's statistics) alone, with what it
    reads before it: ``SELECT count(*)`` of it after the query's lexeme CTEs (p50/p99 ms)."""
    from bench.harness.recall_sql import psycopg_sql
    from episodic.store.lexical_statistics import QUOTED_LEXEME, dataset_statistics

    ctes, _, _ = dataset_statistics()
    lexemes = (
        "q AS (SELECT lexeme, max(weight) AS weight, min(term) AS term FROM unnest("
        "CAST(:lexemes AS text[]), CAST(:weights AS float8[]), CAST(:terms AS text[])) "
        "AS u(lexeme, weight, term) GROUP BY lexeme), "
        f"qq AS (SELECT string_agg({QUOTED_LEXEME}, ' | ')::tsquery AS tq, "
        "array_agg(lexeme) AS lexemes FROM q),"
    )
    head = f"WITH {lexemes}{ctes.rstrip().rstrip(',')}"
    sqls = {name: psycopg_sql(f"{head} SELECT count(*) FROM {name}") for name in STATISTICS_CTES}
    times: dict[str, list[float]] = {name: [] for name in sqls}
    log(f"timing the statistics' CTEs × {queries} queries …")
    for _ in range(queries):
        p = params(words(), 3)
        for name, sql in sqls.items():
            t = time.perf_counter()
            conn.execute(sql, p).fetchall()
            times[name].append(time.perf_counter() - t)
    print(f"the dataset's statistics, each CTE alone with what it reads, {dataset} (ms):\n")
    print("| CTE | p50 | p99 |\n|---|---|---|")
    for name, samples in times.items():
        p50, p99 = ms(samples)
        print(f"| {name} | {p50:.1f} | {p99:.1f} |")
    print()


def kept_against_counted(
    url: str,
    conn: psycopg.Connection,
    dataset: str,
    queries: int,
    words: Any,
    params: Any,
    exact_queries: int = 0,
) -> None:
    """The approximate statement with BM25's statistics counted and kept (the dataset's kept
    statistics, counted first when it has none), on the same queries in shuffled order."""
    from sqlalchemy import create_engine

    from bench.harness.recall_sql import psycopg_sql
    from bench.scale.recall_scale import _episode_ids
    from episodic.store import kept_statistics
    from episodic.store.ranking_sql import recall_sql

    has = conn.execute("SELECT 1 FROM kept_statistics WHERE dataset = %s", (dataset,)).fetchone()
    if has is None:
        engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
        t = time.perf_counter()
        kept = kept_statistics.refresh(engine, dataset)
        engine.dispose()
        print(f"kept statistics counted in {time.perf_counter() - t:.1f} s: {kept}\n")
    variants = {
        f"{way} statistics": psycopg_sql(
            recall_sql.__wrapped__(  # type: ignore[attr-defined]
                with_query=True, with_vector=True, approximate=True, kept_statistics=way == "kept"
            )
        )
        for way in ("counted", "kept")
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    same = 0
    log(f"timing counted and kept statistics × {queries} queries …")
    for _ in range(queries):
        p = params(words(), 10)
        order = list(variants.items())
        random.shuffle(order)
        tops: dict[str, list[Any]] = {}
        for name, sql in order:
            t = time.perf_counter()
            tops[name] = _episode_ids(conn.execute(sql, p))
            times[name].append(time.perf_counter() - t)
        same += tops["counted statistics"] == tops["kept statistics"]
    print(f"the approximate statement, top 10, {queries} queries (ms):\n")
    print("| BM25's statistics | p50 | p99 |\n|---|---|---|")
    for name, samples in times.items():
        p50, p99 = ms(samples)
        print(f"| {name} | {p50:.1f} | {p99:.1f} |")
    print(f"\nthe same top 10 in order: {same} of {queries} queries\n")
    if exact_queries:
        from bench.scale.recall_scale import recall_at
        from episodic.store.recall_queries import recall_sql as exact_sql_of

        exact_sql = psycopg_sql(exact_sql_of(with_query=True, with_vector=True))
        at: dict[str, list[float]] = {k: [] for k in variants}
        log(f"ranking {exact_queries} queries exactly …")
        for _ in range(exact_queries):
            p = params(words(), 10)
            exact = _episode_ids(conn.execute(exact_sql, p))
            for name, sql in variants.items():
                at[name].append(recall_at(_episode_ids(conn.execute(sql, p)), exact, 10))
        for name, values in at.items():
            print(
                f"recall@10 against the exact statement, {name}: "
                f"{statistics.fmean(values):.3f} (min {min(values):.2f}, {len(values)} queries)"
            )
        print()


def against_revision(
    conn: psycopg.Connection,
    revision: str,
    heavy: str,
    queries: int,
    words: Any,
    params: Any,
) -> None:
    """The ranking statement of git ``revision`` (its ``store/ranking_sql.py`` and
    ``store/lexical_statistics.py``, the rest this checkout's) against this checkout's,
    alternating which goes first, on the same queries: the approximate statement with kept
    statistics on ``heavy``, and the exact statement on the store's normal datasets (the
    largest 20 below the approximate threshold, 10 queries each per heavy query); p50, p95,
    p99, and in how many queries both rank the same top 10."""
    import importlib.util
    import subprocess
    import tempfile

    import episodic.store.lexical_statistics as lexical_statistics
    import episodic.store.ranking_sql as ranking_sql
    import episodic.store.recall_queries as rq
    from bench.harness.recall_sql import psycopg_sql
    from bench.harness.report import percentiles
    from bench.scale.recall_scale import _episode_ids

    def load(path: str) -> Any:
        """That revision's copy of ``path``, imported under a name of its own."""
        text = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{revision}:{path}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(text)
        name = "before_" + Path(path).stem
        spec = importlib.util.spec_from_file_location(name, f.name)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    # The older ranking_sql must assemble the older statistics: it imports them by name.
    older_statistics = load("shared/episodic/store/lexical_statistics.py")
    sys.modules["episodic.store.lexical_statistics"] = older_statistics
    try:
        older_ranking = load("shared/episodic/store/ranking_sql.py")
    finally:
        sys.modules["episodic.store.lexical_statistics"] = lexical_statistics

    def statement(ranking: Any, approximate: bool) -> str:
        current = rq.recall_sql
        rq.recall_sql = ranking.recall_sql
        try:
            return psycopg_sql(
                rq.recall_statement.__wrapped__(  # type: ignore[attr-defined]
                    with_query=True,
                    with_vector=True,
                    approximate=approximate,
                    kept_statistics=approximate,
                )
            )
        finally:
            rq.recall_sql = current

    normal = [
        r[0]
        for r in conn.execute(
            "SELECT dataset FROM episodes WHERE status = 'completed' GROUP BY dataset "
            "HAVING count(*) <= %s ORDER BY count(*) DESC, dataset LIMIT 20",
            (rq.Approximation().candidates * 50,),
        )
    ]
    runs = [("heavy (approximate)", [heavy], True, 1)]
    if normal:
        runs.append(("normal (exact)", normal, False, 10))
    for label, datasets, approximate, per_query in runs:
        sql = {
            "before": statement(older_ranking, approximate),
            "now": statement(ranking_sql, approximate),
        }
        took: dict[str, list[float]] = {"before": [], "now": []}
        same = total = 0
        log(f"{label}: {revision} against this checkout, {queries * per_query} queries …")
        for i in range(queries * per_query):
            p = {**params(words(), 10), "dataset": datasets[i % len(datasets)]}
            got = {}
            for name in ("before", "now") if i % 2 else ("now", "before"):
                t = time.perf_counter()
                got[name] = _episode_ids(conn.execute(sql[name], p))
                took[name].append(time.perf_counter() - t)
            same += got["before"] == got["now"]
            total += 1

        at = {name: percentiles(samples) for name, samples in took.items()}
        print(f"{label}, top 10, {total} queries (ms):\n")
        print("| statement | p50 | p95 | p99 |\n|---|---|---|---|")
        for name in ("before", "now"):
            print(
                f"| {revision if name == 'before' else 'this checkout'} | "
                + " | ".join(f"{1000 * at[name][q]:.1f}" for q in ("p50", "p95", "p99"))
                + " |"
            )
        print(
            f"\nnow / before: p50 {at['now']['p50'] / at['before']['p50']:.2f}x, "
            f"p99 {at['now']['p99'] / at['before']['p99']:.2f}x; the same top 10 "
            f"in {same} of {total}\n"
        )


def write_cost(url: str, dataset: str, rows: int = 1500) -> None:
    """Single-row inserts (autocommit) of ``dataset``'s documents into a copy of the table
    with its GIN index, and with GIN and the ``bm25`` index, ABBA (ms per row)."""
    with psycopg.connect(url, autocommit=True) as c:
        sample = c.execute(
            "SELECT dataset, episode_id, status, search_vector, search_length FROM episodes "
            "WHERE dataset = %s LIMIT %s",
            (dataset, rows),
        ).fetchall()
        per_row: dict[str, list[float]] = {"gin": [], "gin + bm25": []}
        for variant in ("gin", "gin + bm25", "gin + bm25", "gin"):
            c.execute("DROP TABLE IF EXISTS write_cost")
            c.execute("CREATE TABLE write_cost (LIKE episodes, PRIMARY KEY (dataset, episode_id))")
            c.execute(
                "INSERT INTO write_cost SELECT * FROM episodes WHERE dataset <> %s", (dataset,)
            )
            c.execute(
                "CREATE INDEX ON write_cost USING gin (search_vector) WHERE status = 'completed'"
            )
            if variant != "gin":
                c.execute(
                    "CREATE INDEX write_cost_bm25_idx ON write_cost USING bm25 "
                    "((episodic_bm25_text(search_vector))) WITH (text_config = 'simple') "
                    "WHERE status = 'completed'"
                )
            t = time.perf_counter()
            for row in sample:
                c.execute("INSERT INTO write_cost VALUES (%s, %s, %s, %s, %s)", row)
            per_row[variant].append(1000 * (time.perf_counter() - t) / len(sample))
        c.execute("DROP TABLE write_cost")
    for variant, values in per_row.items():
        print(
            f"write cost, {variant}: {', '.join(f'{v:.2f}' for v in values)} ms per "
            "single-row insert of a document (autocommit)"
        )
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="a store built by recall_scale --keep")
    parser.add_argument("--dataset", default="heavy-0000")
    parser.add_argument("--queries", type=int, default=20, help="timed queries per variant")
    parser.add_argument("--exact-queries", type=int, default=0, help="queries for recall@10")
    parser.add_argument("--topk", type=int, default=400, help="the lexical top-k's k")
    parser.add_argument("--textsearch-url", help="admin URL of a server with pg_textsearch")
    parser.add_argument("--skip-parts", action="store_true", help="only the lexical top-k")
    parser.add_argument(
        "--kept",
        action="store_true",
        help="the parts' statements read the dataset's kept statistics (when it has them)",
    )
    parser.add_argument(
        "--kept-only",
        action="store_true",
        help="only the statement with counted against kept statistics",
    )
    parser.add_argument(
        "--against",
        metavar="REV",
        help="only the ranking statement of git revision REV against this checkout's "
        "(the heavy dataset's approximate one, the normal datasets' exact one)",
    )
    parser.add_argument(
        "--query-words",
        type=int,
        default=3,
        help="words per query (Zipf-distributed; above 3, distinct: a long query's cost)",
    )
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO))
    import episodic.store.ranking_sql as ranking_sql
    import episodic.store.recall_queries as rq
    from bench.harness.recall_sql import psycopg_sql, query_term_params
    from bench.scale.recall_scale import _episode_ids, recall_at
    from episodic.config import RecallSettings
    from episodic.providers import HashingEmbedder
    from episodic.services.recall.__main__ import ef_search

    defaults = RecallSettings()
    approximation = rq.Approximation(
        candidates=defaults.recall_approximate_candidates,
        recent=defaults.recall_approximate_recent,
        nearest=defaults.recall_approximate_nearest,
    )
    conn = psycopg.connect(args.url, autocommit=True)
    register_vector(conn)
    # The Recall service's session settings (services/recall/__main__.py), custom plans.
    conn.execute("SET hnsw.iterative_scan = relaxed_order")
    conn.execute(f"SET hnsw.ef_search = {ef_search(defaults)}")
    conn.execute(f"SET plan_cache_mode = {rq.CUSTOM_PLANS}")
    rng = random.Random(args.seed)
    hasher = HashingEmbedder(384)
    vocab = [f"w{i}" for i in range(1, 5001)]

    def words() -> str:
        if args.query_words <= 3:
            return " ".join(vocab[int(5000 * rng.random() ** 3)] for _ in range(args.query_words))
        picked: dict[str, None] = {}
        while len(picked) < min(args.query_words, len(vocab)):
            picked[vocab[int(5000 * rng.random() ** 3)]] = None
        return " ".join(picked)

    def params(query: str, limit: int) -> dict[str, object]:
        return {
            "dataset": args.dataset,
            "query": query,
            "qvec": hasher.embed_query(query),
            **rq.unfiltered_params(),
            **rq.threshold_params(0.0, 0.0, None),
            "ws": 0.7,
            "wr": 0.3,
            "limit": limit,
            **rq.approximation_params(approximation),
            **query_term_params(conn, args.dataset, query),
        }

    # The pool reads approximate_parts where it is defined (store/ranking_sql.py).
    original = ranking_sql.approximate_parts
    names = list(original(True))

    def statement(keep: set[str]) -> str:
        """The approximate ranking statement with only the pool parts ``keep``."""

        def parts(
            with_vector: bool, kept: bool = False, lexical_pool: bool = False
        ) -> dict[str, str]:
            parts = original(with_vector, kept, lexical_pool)
            return {k: v for k, v in parts.items() if k in keep}

        ranking_sql.approximate_parts = parts  # type: ignore[assignment]
        try:
            return psycopg_sql(
                ranking_sql.recall_sql.__wrapped__(  # type: ignore[attr-defined]
                    with_query=True,
                    with_vector=True,
                    approximate=True,
                    kept_statistics=args.kept,
                )
            )
        finally:
            ranking_sql.approximate_parts = original

    size = conn.execute(
        "SELECT count(*) FROM episodes WHERE dataset = %s AND status = 'completed'",
        (args.dataset,),
    ).fetchone()
    print(
        f"{args.dataset}: {size[0] if size else 0} completed episodes; load average "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}\n"
    )
    if args.against:
        against_revision(conn, args.against, args.dataset, args.queries, words, params)
        return 0
    if args.kept_only:
        kept_against_counted(
            args.url, conn, args.dataset, args.queries, words, params, args.exact_queries
        )
        return 0
    if not args.skip_parts:
        floor = "best lexical only (floor)"
        variants = {floor: statement({"best lexical"})}
        for name in names:
            if name != "best lexical":
                variants[f"floor + {name}"] = statement({"best lexical", name})
        variants["all parts (today)"] = statement(set(names))
        variants["all but the ts_rank parts"] = statement(set(names) - set(TS_RANK_PARTS))
        times: dict[str, list[float]] = {k: [] for k in variants}
        log(f"timing {len(variants)} variants × {args.queries} queries …")
        for _ in range(args.queries):
            p = params(words(), 3)
            order = list(variants.items())
            rng.shuffle(order)
            for name, sql in order:
                t = time.perf_counter()
                conn.execute(sql, p).fetchall()
                times[name].append(time.perf_counter() - t)
        base = ms(times[floor])[0]
        print(f"parts of the approximate statement, top 3, {args.queries} queries (ms):\n")
        print("| variant | p50 | p99 | p50 over the floor |\n|---|---|---|---|")
        for name, samples in times.items():
            p50, p99 = ms(samples)
            print(f"| {name} | {p50:.1f} | {p99:.1f} | {p50 - base:+.1f} |")
        print()
        if args.exact_queries:
            exact_sql = psycopg_sql(rq.recall_sql(with_query=True, with_vector=True))
            compared = {
                "all parts (today)": variants["all parts (today)"],
                "all but the ts_rank parts": variants["all but the ts_rank parts"],
            }
            at: dict[str, list[float]] = {k: [] for k in compared}
            log(f"ranking {args.exact_queries} queries exactly …")
            for _ in range(args.exact_queries):
                p = params(words(), 10)
                exact = _episode_ids(conn.execute(exact_sql, p))
                for name, sql in compared.items():
                    at[name].append(recall_at(_episode_ids(conn.execute(sql, p)), exact, 10))
            for name, values in at.items():
                print(
                    f"recall@10 against the exact statement, {name}: "
                    f"{statistics.fmean(values):.3f} (min {min(values):.2f})"
                )
            print()

    if not args.skip_parts:
        statistics_ctes(conn, args.dataset, args.queries, words, params)
        kept_against_counted(args.url, conn, args.dataset, args.queries, words, params)

    topk_servers = [("store", conn)]
    if args.textsearch_url:
        log("copying the documents to the pg_textsearch server …")
        copied = copy_documents(args.url, args.textsearch_url)
        write_cost(copied, args.dataset)
        other = psycopg.connect(copied, autocommit=True)
        other.execute(f"SET plan_cache_mode = {rq.CUSTOM_PLANS}")
        topk_servers.append(("pg_textsearch server", other))
    runs: dict[str, list[float]] = {}
    holds: dict[str, dict[int, list[float]]] = {}
    log(f"lexical top-{args.topk}, {args.queries} queries …")
    for _ in range(args.queries):
        lexemes = words().split()
        p: dict[str, Any] = {"ds": args.dataset, "lex": lexemes, "k": args.topk}
        t = time.perf_counter()
        exact = [r[0] for r in conn.execute(EXACT_BM25, p)]
        runs.setdefault("exact BM25 (SQL), store", []).append(time.perf_counter() - t)
        for server, c in topk_servers:
            ways = [(f"ts_rank over GIN, {server}", TS_RANK_TOPK)]
            if server != "store":
                p["bq"] = "episodes_bm25_idx:" + " ".join(
                    r[0] for r in c.execute("SELECT md5(l) FROM unnest(%s::text[]) l", (lexemes,))
                )
                ways.append((f"pg_textsearch bm25, {server}", BM25_TOPK))
            for name, sql in ways:
                t = time.perf_counter()
                got = {r[0] for r in c.execute(sql, p)}
                runs.setdefault(name, []).append(time.perf_counter() - t)
                for n in (10, 50):
                    share = len(set(exact[:n]) & got) / max(1, len(exact[:n]))
                    holds.setdefault(name, {10: [], 50: []})[n].append(share)
    print(f"lexical top-{args.topk} of {args.dataset}, {args.queries} queries (ms):\n")
    print("| way | p50 | p99 | holds exact BM25 top 10 (min) | top 50 |\n|---|---|---|---|---|")
    for name, samples in runs.items():
        p50, p99 = ms(samples)
        h = holds.get(name)
        cells = (
            f"{statistics.fmean(h[10]):.3f} ({min(h[10]):.2f}) | {statistics.fmean(h[50]):.3f}"
            if h
            else "— | —"
        )
        print(f"| {name} | {p50:.1f} | {p99:.1f} | {cells} |")
    print(f"\nload average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
