"""The SQL of the ranking statement (its formula: :mod:`episodic.store.recall_queries`).

:func:`recall_sql` builds it from its pieces: recency (:func:`ranked_recency_sql`,
:func:`span_cte`), the fusion of the signals (:func:`similarity_sql`,
:func:`fused_relevance_sql`), the approximate path's candidate pool
(:func:`approximate_parts`) and the optional signals' parts, with BM25 and the dataset's
statistics from :mod:`episodic.store.lexical_statistics` and the calibrated relevance and
its thresholds from :mod:`episodic.store.relevance_thresholds`. Events rank with the same
pieces (store/events.py). Nothing here runs a statement.
"""

from __future__ import annotations

from functools import lru_cache

from episodic.store.episodes import episode_columns
from episodic.store.lexical_statistics import (
    LEXEME_QUERY,
    QUOTED_LEXEME,
    bm25,
    dataset_best_cosine,
    dataset_statistics,
    document_length,
    matched_idf,
    only_query_lexemes,
    query_idf,
    query_lexemes_cte,
)
from episodic.store.ranking_options import (
    BAND_EXPONENT,
    DEFAULT_RANKING,
    EXTRA_SIGNALS,
    FEEDBACK_SHARE,
    LEARNED_WEIGHTS,
    LEXICAL_SHARE,
    RankingOptions,
)
from episodic.store.recall_filters import CANDIDATES
from episodic.store.relevance import on_reference_scale_sql
from episodic.store.relevance_thresholds import calibrated_sql, match_sql, relevant_sql

__all__ = [
    "approximate_parts",
    "fused_relevance_sql",
    "ranked_recency_sql",
    "recall_sql",
    "recency_gate",
    "recency_sql",
    "similarity_sql",
    "span_cte",
]

#: The calibrated relevance's context: each signal's best over every episode the statement
#: scored (window maxima, computed before the time filters and the LIMIT), so an episode
#: is judged beside the request's best match (``episodic.store.relevance``). The cosine's
#: is the one the semantic signal is normalised by: on the approximate path with
#: ``exact_cosine``, the dataset's best rather than the pool's.
_REQUEST_BEST = (
    "n.best_cosine",
    "max(n.coverage) OVER ()",
    "max(n.passage_coverage) OVER ()",
)

_EPISODE_COLUMNS = episode_columns("e", ":dataset")


def recency_sql(moment: str) -> str:
    """Recency of a timestamp expression: 1 at ``as_of`` (or now), halving after a day —
    the one definition episodes (``ended_at``) and events (``occurred_at``) share."""
    return (
        "1.0 / (1.0 + greatest(extract(epoch FROM "
        f"(coalesce(CAST(:as_of AS timestamptz), now()) - {moment})), 0) / 86400.0)"
    )


def span_cte(source: str, moment: str = "ended_at") -> str:
    """``span``: the days between the oldest ``moment`` of ``source``'s rows (the filtered
    candidates) and ``as_of`` (or now), at least one (RankingOptions.recency_span)."""
    return f"""
        span AS (
            SELECT greatest(extract(epoch FROM (coalesce(CAST(:as_of AS timestamptz), now())
                                               - min(x.{moment}))) / 86400.0, 1.0) AS days
            FROM {source} x
        ),"""


def ranked_recency_sql(moment: str, options: RankingOptions) -> str:
    """Recency of ``moment`` under ``options``: the seed's day scale (:func:`recency_sql`),
    or days counted in units of ``recency_span`` × the dataset's span (needs
    :func:`span_cte`). Episodes and events (store/events.py) share it."""
    if not options.recency_span:
        recency = recency_sql(moment)
    else:
        recency = (
            "1.0 / (1.0 + greatest(extract(epoch FROM "
            f"(coalesce(CAST(:as_of AS timestamptz), now()) - {moment})), 0) / 86400.0 "
            f"/ ({float(options.recency_span)} * (SELECT days FROM span)))"
        )
    if not options.named_time_recency:
        return recency
    # Days between the moment and the named window (0 inside it), on the seed's day scale.
    return (
        f"CASE WHEN CAST(:named_start AS timestamptz) IS NULL THEN {recency} "
        "ELSE 1.0 / (1.0 + greatest("
        f"extract(epoch FROM (CAST(:named_start AS timestamptz) - {moment})), "
        f"extract(epoch FROM ({moment} - CAST(:named_end AS timestamptz))), 0) / 86400.0) END"
    )


def recency_gate(similarity: float, best: float, band: float) -> float:
    """How much of its recency a candidate of ``similarity`` keeps when the best candidate's
    is ``best`` (``RankingOptions.recency_band``): 1 within a hair of the best, down to 0 at
    ``band`` × ``best`` below it; 1 for every candidate when ``band`` is 0 (off) or nothing
    is similar at all (no query: plain recency)."""
    if band <= 0.0 or best <= 0.0:
        return 1.0
    return min(1.0, max(0.0, 1.0 - (best - similarity) / (band * best)))


def fused_relevance_sql(options: RankingOptions, similarity: str, recency: str) -> str:
    """``relevance``: ``:ws`` × similarity + ``:wr`` × recency, the recency term weighed by
    :func:`recency_gate` against the best similarity among the rows (a window maximum: the
    statement's candidates, before any limit). Episodes and events share it."""
    fused = f"CAST(:ws AS float8) * {similarity} + CAST(:wr AS float8) * {recency}"
    band = float(options.recency_band)
    if not band:
        return fused
    best = f"max({similarity}) OVER ()"
    gate = (
        f"CASE WHEN {best} > 0 THEN least(1.0, greatest(0.0, "
        f"1.0 - ({best} - {similarity}) / ({band!r} * {best}))) ELSE 1.0 END"
    )
    return f"CAST(:ws AS float8) * {similarity} + CAST(:wr AS float8) * {recency} * {gate}"


def similarity_sql(options: RankingOptions, signals: dict[str, str]) -> str:
    """Similarity under ``options`` from a candidate's signal expressions, keyed by the
    names of :data:`LEARNED_WEIGHTS` (``lexical`` and ``semantic`` relative to the best
    candidate, ``cosine``, ``coverage``, ``passage_coverage``), and optionally
    ``best_cosine``, the ideal's cosine (the candidates' best by default; the dataset's when
    the approximate path reads it). Episodes and events (store/events.py) share it."""
    lexical, semantic = signals["lexical"], signals["semantic"]
    if options.fusion == "learned":
        # a signal the caller does not compute (an event has no speakers) counts 0 in the
        # fit and in the ideal alike
        weights = {n: w for n, w in options.learned_weights().items() if n in signals}
        fit = " + ".join(f"{w} * {signals[name]}" for name, w in weights.items())
        # Relative to the ideal candidate: best on both relative signals, every query word
        # in its document and in one passage, the candidates' best cosine. 1 only for a
        # candidate that is all of these (as the score fusion gives 1 only to the best on
        # both signals), so a lone episode that matches one way only does not score 1;
        # and, as there, 0 for a candidate that matches neither way.
        best_cosine = signals.get("best_cosine", f"max({signals['cosine']}) OVER ()")

        def ideal_of(name: str) -> str:
            if name == "cosine":
                return best_cosine
            if name in EXTRA_SIGNALS:  # the candidates' best: 0 when none has it
                return f"max({signals[name]}) OVER ()"
            return "1.0"

        ideal = " + ".join(f"{w} * {ideal_of(name)}" for name, w in weights.items())
        return (
            f"CASE WHEN {lexical} > 0 OR {semantic} > 0 THEN exp(({fit}) - ({ideal})) ELSE 0.0 END"
        )
    return (
        f"power(least(1.0, {LEXICAL_SHARE} * {lexical} + {1.0 - LEXICAL_SHARE} * {semantic}), "
        f"{BAND_EXPONENT})"
    )


def _signals(lexical: str) -> dict[str, str]:
    """The signals of ``normed`` (``n``) by the names of LEARNED_WEIGHTS and EXTRA_SIGNALS
    (an optional one is a column only when its switch is on); the cosines on MiniLM's scale
    (``RankingOptions.cosine_scale``)."""
    return {
        "lexical": lexical,
        "semantic": "n.sem_rel",
        "cosine": "n.scaled_cosine",
        "best_cosine": "n.scaled_best_cosine",
        "coverage": "n.coverage",
        "passage_coverage": "n.passage_coverage",
        **{name: f"n.{name}" for name in EXTRA_SIGNALS},
    }


def approximate_parts(
    with_vector: bool, kept: bool = False, lexical_pool: bool = False, walked: bool = False
) -> dict[str, str]:
    """The approximate path's candidates (a large dataset) by source: a generous set that
    holds the exact top N with high probability, re-scored by the exact formula. The
    episodes whose summary is nearest the query and those of the threads whose chunks are
    (HNSW with iterative scan, the filters applied as it walks), the best lexical matches
    (the GIN index finds the documents with any query lexeme; ts_rank orders them) and the
    most recent episodes (recency alone can carry one into the top). Every part applies the
    request's filters. Named so that bench/recall_scale.py can tell which source holds (or
    should have held) an exact top-N episode.

    ``lexical_pool`` (with ``kept``): the query words' best holders by the lexical fit and
    each word's densest are ``:lexical_pool``, chosen by Recall from the kept postings
    (:mod:`episodic.store.lexical_pool`): the parts that read them here are left out, and
    ``best lexical`` holds the densest holders too. ``walked`` (with ``with_vector``): the
    nearest parts are what Recall's walks found (:data:`NEAREST_WALKS`: ``:nearest_episodes``
    and ``:nearest_threads``), not walks of this statement."""
    # The lexical part of the default fusion (LEARNED_WEIGHTS): what orders the selective
    # words' holders, whose exact BM25 the dataset's statistics have already computed (or
    # the postings' holders, whose passage score sums each word's best passage of the
    # episode: normalised by the best such sum, which on the counted path is the best
    # passage).
    lexical_fit = (
        f"{LEARNED_WEIGHTS['lexical'] / 2} * (coalesce(d.score / nullif((SELECT score FROM "
        "best_document), 0.0), 0.0) + coalesce(p.score / nullif((SELECT max(score) FROM "
        "dataset_passage_bm25), 0.0), 0.0)) + ("
        f"{LEARNED_WEIGHTS['coverage']} * coalesce(d.matched, 0.0) "
        f"+ {LEARNED_WEIGHTS['passage_coverage']} * coalesce(p.matched, 0.0)) "
        "/ greatest((SELECT count(*) FROM q), 1)"
    )
    parts = {
        # Ranked as the exact formula's lexical signals rank them; ts_rank (below) ties
        # on documents of similar length and ignores how rare each word is.
        "best lexical": f"""SELECT coalesce(d.episode_id, p.episode_id) AS episode_id
            FROM dataset_doc_bm25 d FULL JOIN dataset_passage_bm25 p
              ON p.episode_id = d.episode_id
            ORDER BY {lexical_fit} DESC LIMIT :approx_candidates""",
        "lexical": f"""SELECT x.episode_id FROM ({CANDIDATES}) x
            WHERE x.search_vector @@ (SELECT tq FROM qq)
            ORDER BY ts_rank(x.search_vector, (SELECT tq FROM qq), 1) DESC
            LIMIT :approx_candidates""",
        "recent": f"""SELECT x.episode_id FROM ({CANDIDATES}) x
            ORDER BY x.ended_at DESC LIMIT :approx_recent""",
        # The normalising maxima (best document and best passage BM25) must be the
        # dataset's, and ts_rank over all the query's words weighs a common word like a
        # rare one: so, per query word, the documents and the threads of the chunks that
        # hold it most densely (GIN indexes; a rare word's best holders carry the best BM25).
        "densest documents": f"""SELECT best.episode_id FROM pool_words q CROSS JOIN LATERAL (
                SELECT x.episode_id FROM ({CANDIDATES}) x
                WHERE x.search_vector @@ {LEXEME_QUERY}
                ORDER BY ts_rank(x.search_vector, {LEXEME_QUERY}, 1) DESC
                LIMIT :approx_per_lexeme) best""",
        "densest chunks": _episodes_of_threads(
            f"""SELECT dense.thread_id FROM pool_words q CROSS JOIN LATERAL (
                SELECT m.thread_id FROM message_chunks m
                WHERE m.dataset = :dataset AND m.search_vector @@ {LEXEME_QUERY}
                ORDER BY ts_rank(m.search_vector, {LEXEME_QUERY}, 1) DESC
                LIMIT :approx_per_lexeme) dense"""
        ),
    }
    if kept:
        parts.update(_kept_parts(parts))
    if lexical_pool:
        if not kept:
            raise ValueError("a lexical pool is chosen from kept statistics")
        for chosen in ("lexical", "densest documents", "densest chunks"):
            del parts[chosen]
        # 16 bytes an episode id (lexical_pool.LexicalPool.episode_ids)
        parts["best lexical"] = (
            f"SELECT {_ids_in(':lexical_pool')} AS episode_id FROM {_ids_series(':lexical_pool')}"
        )
    if with_vector and walked:
        # What :data:`NEAREST_WALKS` found (Recall walked them beside the postings' read).
        parts["nearest summaries"] = (
            f"SELECT {_ids_in(':nearest_episodes')} AS episode_id "
            f"FROM {_ids_series(':nearest_episodes')}"
        )
        parts["nearest chunks"] = _episodes_of_threads(
            f"SELECT {_ids_in(':nearest_threads')} FROM {_ids_series(':nearest_threads')}"
        )
    elif with_vector:
        parts["nearest summaries"] = NEAREST_WALKS["nearest summaries"]
        parts["nearest chunks"] = _episodes_of_threads(
            f"SELECT near.thread_id FROM ({NEAREST_WALKS['nearest chunks']}) near"
        )
    return parts


def _episodes_of_threads(thread_ids: str) -> str:
    """The candidate episodes of the threads ``thread_ids`` (a query of one column) names.

    As one array, not a join: a join probes the episodes once per thread, and the planner
    may probe them through the GiST index of the episodes' sequence ranges (dataset,
    thread, range), which at a 1M-episode store took 0.14 ms a probe against 0.004 for a
    btree (300 threads: 41 ms of a 116 ms statement; docs/benchmarks-history.md "the
    threads' episodes as one array"). A GiST index cannot take ``= ANY(array)``; the
    btree of (dataset, thread) reads all of them in one scan."""
    return f"""SELECT x.episode_id FROM ({CANDIDATES}) x
                WHERE x.thread_id = ANY(ARRAY({thread_ids}))"""


#: The approximate path's two HNSW walks (iterative scan, filtered as they walk): the
#: episodes whose summaries are nearest the query, and the threads whose chunks are. Inside
#: the ranking statement, or run by Recall beside the postings' read
#: (:mod:`episodic.store.nearest_walks`), which passes what they found as ``bytea``.
NEAREST_WALKS = {
    "nearest summaries": f"""SELECT x.episode_id FROM ({CANDIDATES}) x
                ORDER BY x.embedding <=> CAST(:qvec AS vector) LIMIT :approx_nearest""",
    "nearest chunks": """SELECT m.thread_id FROM message_chunks m WHERE m.dataset = :dataset
                      ORDER BY m.embedding <=> CAST(:qvec AS vector)
                      LIMIT :approx_nearest""",
}


def _ids_in(parameter: str) -> str:
    """The ``i``-th id of ``parameter``, ``bytea`` of ids 16 bytes each, as a uuid."""
    return (
        f"CAST(encode(substring(CAST({parameter} AS bytea) FROM 16 * i + 1 FOR 16), 'hex') AS uuid)"
    )


def _ids_series(parameter: str) -> str:
    return f"generate_series(0, length(CAST({parameter} AS bytea)) / 16 - 1) AS i"


def _kept_parts(counted: dict[str, str]) -> dict[str, str]:
    """The per-word parts of the pool for a dataset with kept statistics (a request without
    filters; :mod:`episodic.store.kept_statistics`): each query word's best holders as the
    statistics keep them (its postings, by its BM25 weight), where ``ts_rank`` read every
    holder of the word. With nothing kept (the CTE ``kept`` empty) each is the counted
    part, whose scan a one-time filter otherwise skips.

    ``best lexical`` then scores every holder the query words' postings list
    (:func:`~episodic.store.lexical_statistics.dataset_statistics`), so a document holding
    several query words ranks by their sum; ``lexical`` (``ts_rank`` over every holder of
    any query word, ~70 ms at 100k) is read only when nothing is kept. An episode completed
    since the count is in no list: ``since the count`` takes the best of those by
    ``ts_rank`` (the recent and nearest parts may find it too)."""
    unless_kept = "NOT EXISTS (SELECT 1 FROM kept) AND "
    return {
        "lexical": _guarded(counted["lexical"], "WHERE x.search_vector @@", unless_kept),
        # The kept path serves requests without filters only: every completed episode of
        # the dataset is a candidate. Read newest first by the index of when they were
        # completed (at most _SINCE_READ: the statistics are counted again after
        # STALE_SHARE of them), from the moment before which the count holds them all
        # (kept_statistics.COMPLETE_BEFORE_SQL: an episode whose completion was still
        # committing when the count read the dataset is in neither).
        "since the count": f"""SELECT n.episode_id FROM (
                SELECT e.episode_id, e.search_vector FROM episodes e
                WHERE e.dataset = :dataset AND e.status = 'completed'
                  AND e.completed_at >= (SELECT complete_before FROM kept)
                ORDER BY e.completed_at DESC LIMIT {_SINCE_READ}) n
            WHERE n.search_vector @@ (SELECT tq FROM qq)
            ORDER BY ts_rank(n.search_vector, (SELECT tq FROM qq), 1) DESC
            LIMIT :approx_candidates""",
        "densest documents": _guarded(
            counted["densest documents"], "WHERE x.search_vector @@", unless_kept
        )
        + """)
            UNION ALL
            (SELECT best.episode_id FROM kept_postings t
            CROSS JOIN LATERAL unnest(t.documents[1:CAST(:approx_per_lexeme AS int)])
                AS best(episode_id)""",
        "densest chunks": _guarded(
            counted["densest chunks"],
            "WHERE m.dataset = :dataset AND m.search_vector @@",
            unless_kept,
        )
        + """)
            UNION ALL
            (SELECT best.episode_id FROM kept_postings t
            CROSS JOIN LATERAL unnest(t.passages[1:CAST(:approx_per_lexeme AS int)])
                AS best(episode_id)""",
    }


#: At most how many of the episodes completed since the count are read for the query's
#: words, newest first (a dataset of 100k is counted again after 1,000).
_SINCE_READ = 5000


def _guarded(part: str, where: str, condition: str) -> str:
    """``part`` with ``condition`` first in its ``where`` clause, which must be there once
    (else the kept variant would scan every holder beside its lists, unseen)."""
    if part.count(where) != 1:
        raise ValueError(f"the counted part no longer has one {where!r}")
    return part.replace(where, where.replace("WHERE ", f"WHERE {condition}"))


#: The episodes nearest the time a query names (RankingOptions.named_time_recency ranks
#: them by it): those ending in or after the window, earliest first, and those ending in or
#: before it, latest first — two walks of the (dataset, ended_at) order. Nothing when the
#: query names no time (the NULL comparisons match no row).
_NEAREST_NAMED_TIME = f"""(SELECT x.episode_id, x.ended_at FROM ({CANDIDATES}) x
            WHERE x.ended_at >= CAST(:named_start AS timestamptz)
            ORDER BY x.ended_at LIMIT :near_limit)
        UNION
        (SELECT x.episode_id, x.ended_at FROM ({CANDIDATES}) x
            WHERE x.ended_at <= CAST(:named_end AS timestamptz)
            ORDER BY x.ended_at DESC LIMIT :near_limit)"""


def _approximate_pool(
    with_vector: bool,
    options: RankingOptions,
    kept: bool = False,
    lexical_pool: bool = False,
    walked: bool = False,
) -> str:
    """The union of :func:`approximate_parts`, and — when recency counts from the time a
    query names — the episodes nearest that time (recency alone can carry one into the
    top, as the most recent ones otherwise)."""
    parts = list(approximate_parts(with_vector, kept, lexical_pool, walked).values())
    if options.named_time_recency:
        parts.append(
            "SELECT episode_id FROM ("
            + _NEAREST_NAMED_TIME.replace(":near_limit", ":approx_recent")
            + ") near"
        )
    return "\n            UNION\n            ".join(f"({p})" for p in parts)


def _candidate_columns(with_vector: bool) -> str:
    """What the ranking statement keeps of each candidate (``x``, a row of
    :data:`~episodic.store.recall_filters.CANDIDATES`) in its materialised ``c``: its
    summary's cosine with the query (``summary_cos``; NULL without a query vector or
    before the Summariser embedded it) in place of the vector itself. Vectors are stored
    inline with their rows (migration 0024), and ~1,400 candidates' vectors overflowed
    ``work_mem`` (4 MB by default): ``c`` was written to a temporary file and read back
    each time the statement reads it (five or six)."""
    cosine = "1.0 - (x.embedding <=> CAST(:qvec AS vector))" if with_vector else "NULL::float8"
    return (
        "x.episode_id, x.thread_id, x.end_sequence, x.ended_at, x.search_length, "
        f"coalesce(x.search_vector, ''::tsvector) AS tsv, {cosine} AS summary_cos"
    )


#: The exact statement's candidates when the dataset's size is not known: none when the
#: dataset has more completed episodes than ``:exact_up_to`` (its count, ``total`` in
#: recall_queries.recall_statement, is read first: a one-time filter, so no candidate is
#: read then). Measured: no slower than the unguarded statement (docs/benchmarks.md
#: "Recall, sixth pass").
_SIZE_GUARD = "\n            WHERE (SELECT t.episode_count FROM total t) <= :exact_up_to"


@lru_cache(maxsize=32)
def recall_sql(
    *,
    with_query: bool,
    with_vector: bool,
    approximate: bool = False,
    options: RankingOptions = DEFAULT_RANKING,
    exact_cosine: bool = False,
    guarded: bool = False,
    kept_statistics: bool = False,
    lexical_pool: bool = False,
    walked: bool = False,
) -> str:
    """The ranking statement. ``with_query``: score similarity (lexical part);
    ``with_vector``: also the semantic part (needs ``:qvec``). ``approximate``: score only
    the candidates of :func:`_approximate_pool` (needs ``:approx_candidates`` and
    ``:approx_recent``); without a query it is exact (the order is the time order).
    ``exact_cosine`` (approximate path): normalise the semantic signal by the dataset's
    best cosine, read from every filtered summary and chunk vector, instead of the
    candidates' best (see :class:`~episodic.store.recall_queries.Approximation`).
    ``options``: see :class:`RankingOptions` (with ``weight_generic_terms``, ``:weights``
    holds each lexeme's weight, in the order of ``:lexemes``). ``guarded`` (the exact path
    with a query, inside the ``guarded`` form of
    :func:`~episodic.store.recall_queries.recall_statement`): no candidate is read when the
    dataset's count (its ``total``) is above ``:exact_up_to``. ``kept_statistics`` (the
    approximate path, a request without filters): BM25's statistics from the dataset's
    kept ones when it has them (:func:`~episodic.store.lexical_statistics.dataset_statistics`),
    and a column ``statistics_kept`` saying whether it had. ``lexical_pool`` (with
    ``kept_statistics``, when the dataset has them): the query words' holders were scored
    by Recall from the kept postings (:mod:`episodic.store.lexical_pool`), which passes
    the episodes chosen and the best BM25 as parameters (``LexicalPool.params``).
    ``walked`` (the approximate path with a vector): Recall ran the nearest walks beside
    (:data:`NEAREST_WALKS`) and passes what they found."""
    if walked and not (approximate and with_vector):
        raise ValueError("walks run beside the approximate statement with a vector only")
    if guarded and (approximate or not with_query):
        raise ValueError("only the exact statement with a query is guarded")
    if kept_statistics and not (approximate and with_query):
        raise ValueError("kept statistics serve the approximate statement with a query")
    if lexical_pool and not kept_statistics:
        raise ValueError("a lexical pool is chosen from kept statistics")
    if not with_query:
        candidates = CANDIDATES
        if approximate:  # recency alone: the newest episodes by the index, as ranked below
            candidates += " ORDER BY e.ended_at DESC, e.episode_id DESC LIMIT :limit"
            if options.named_time_recency:  # or those nearest the time the query names
                candidates = (
                    f"SELECT x.* FROM ({CANDIDATES}) x WHERE x.episode_id IN ("
                    f"SELECT newest.episode_id FROM ({candidates}) newest UNION "
                    "SELECT near.episode_id FROM ("
                    f"{_NEAREST_NAMED_TIME.replace(':near_limit', ':limit')}) near)"
                )
        span = span_cte(f"({CANDIDATES})") if options.recency_span else ""
        return f"""
            WITH c AS ({candidates}),{span}
            scored AS (
                SELECT c.episode_id, c.ended_at, 0.0::float8 AS similarity,
                       0.0::float8 AS lexical, 0.0::float8 AS semantic,
                       ({ranked_recency_sql("c.ended_at", options)})::float8 AS recency
                FROM c
            )
            SELECT {_EPISODE_COLUMNS}, s.similarity, s.lexical, s.semantic, s.recency,
                   {fused_relevance_sql(options, "s.similarity", "s.recency")} AS relevance,
                   0.0::float8 AS cosine, 0.0::float8 AS coverage,
                   0.0::float8 AS passage_coverage, 0.0::float8 AS absolute_relevance,
                   1.0::float8 AS request_match, true AS passes
            FROM scored s
            JOIN episodes e ON e.dataset = :dataset AND e.episode_id = s.episode_id
            ORDER BY relevance DESC, s.ended_at DESC, s.episode_id DESC
            LIMIT :limit
        """
    query_lexemes = query_lexemes_cte(options)
    weight, weight_join = None, ""
    matched, query_words = "count(*)::float8", "count(*)"
    if options.weighted_terms():
        weight, weight_join = "qw.weight", "\n            JOIN q qw ON qw.lexeme = t.lexeme"
        matched, query_words = "count(DISTINCT qw.term)::float8", "count(DISTINCT term)"
    lexical = "((n.doc_rel + n.passage_rel) / 2.0)"
    head_ctes, head_score, head_join, head_rel = "", "", "", ""
    if options.head_share > 0:
        h = options.head_share
        lexical = f"({(1.0 - h) / 2} * (n.doc_rel + n.passage_rel) + {h} * n.head_rel)"
        head_score = "\n                   coalesce(hb.score, 0.0) AS head_lexical,"
        head_join = "\n            LEFT JOIN head_bm25 hb ON hb.episode_id = c.episode_id"
        head_rel = (
            "                   coalesce(r.head_lexical / nullif(max(r.head_lexical) OVER (), "
            "0.0), 0.0) AS head_rel,\n"
        )
        head_ctes = f"""
        -- The summary and key learnings alone (the weight-A positions of the document).
        heads AS MATERIALIZED (
            SELECT c.episode_id, ts_filter(c.tsv, '{{a}}') AS tsv FROM c
        ),
        hlens AS (
            SELECT h.episode_id,
                   greatest((SELECT coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0)
                             FROM unnest(h.tsv) u), 1)::float8 AS dl
            FROM heads h
        ),
        hstats AS (SELECT count(*)::float8 AS n, greatest(avg(dl), 1.0) AS avgdl FROM hlens),
        hterms AS (
            SELECT h.episode_id, u.lexeme,
                   coalesce(array_length(u.positions, 1), 1)::float8 AS tf
            FROM heads h CROSS JOIN LATERAL unnest({only_query_lexemes("h.tsv")}) AS u
            WHERE h.tsv @@ (SELECT tq FROM qq)
        ),
        hdf AS (SELECT lexeme, count(*)::float8 AS df FROM hterms GROUP BY lexeme),
        head_bm25 AS (
            SELECT t.episode_id, {bm25("t", "hdf", "l.dl", "s", weight)} AS score
            FROM hterms t
            JOIN hdf ON hdf.lexeme = t.lexeme
            JOIN hlens l ON l.episode_id = t.episode_id{weight_join}
            CROSS JOIN hstats s
            GROUP BY t.episode_id
        ),"""
    chunk_cos = "NULL::float8"
    summary_cos = "0.0::float8"
    if with_vector:
        chunk_cos = "1.0 - (m.embedding <=> (SELECT v FROM qv))"
        summary_cos = "coalesce(c.summary_cos, 0.0)"
    candidate_columns = _candidate_columns(with_vector)
    query_ctes = f"""
        qv AS (SELECT CAST(:qvec AS vector) AS v),
        -- The query's lexemes, blinded like the index (recall_index.query_tokens).
        {query_lexemes},
        -- The query's lexemes OR-ed, quoted for tsquery: documents that contain none of
        -- them are skipped before their lexemes are unnested (NULL, no rows, without any).
        qq AS (
            SELECT string_agg({QUOTED_LEXEME}, ' | ')::tsquery AS tq,
                   array_agg(lexeme) AS lexemes
            FROM q
        ),"""
    # BM25's statistics: over the candidates, which on the exact path are the whole
    # filtered dataset; the approximate path scores a part of it, so it counts them over
    # the whole filtered dataset instead (else every query word looks common among
    # candidates chosen for matching it, and the scores, hence the order, differ).
    doc_stats = "SELECT count(*)::float8 AS n, greatest(avg(dl), 1.0) AS avgdl FROM docs"
    doc_df = "\n        ddf AS (SELECT lexeme, count(*)::float8 AS df FROM dterms GROUP BY lexeme),"
    passage_stats = "SELECT count(*)::float8 AS n, greatest(avg(dl), 1.0) AS avgdl FROM passages"
    passage_df = (
        "\n        pdf AS (SELECT lexeme, count(*)::float8 AS df FROM pterms GROUP BY lexeme),"
    )
    # The normalising maxima: the candidates' best, the dataset's on the approximate path.
    best_doc, best_passage = "max(r.doc_lexical) OVER ()", "max(r.passage_lexical) OVER ()"
    best_cosine = "max(r.semantic) OVER ()"
    dataset_ctes = dataset_best = ""
    if approximate:
        dataset_ctes, doc_stats, passage_stats = dataset_statistics(
            options, kept=kept_statistics, lexical_pool=lexical_pool
        )
        # The dataset's best BM25 over the selective words' holders, or a candidate's when
        # it is better (one holding only words too common to be selective; or every
        # candidate when no query word is selective): the exact path's maximum whenever
        # the dataset's best document is a candidate.
        best_doc = f"greatest((SELECT score FROM best_document), {best_doc})"
        best_passage = f"greatest((SELECT score FROM best_passage), {best_passage})"
        doc_df = passage_df = ""  # counted over the dataset (dataset_ctes)
        if exact_cosine and with_vector:
            dataset_best += dataset_best_cosine()
            best_cosine = "greatest((SELECT cos FROM best_cosine), max(r.semantic) OVER ())"
        # The dataset's statistics come first: the pool takes the best-scoring holders of
        # the selective words from them.
        head = f"""
        WITH {query_ctes}{dataset_ctes}
        pool AS MATERIALIZED (
            {_approximate_pool(with_vector, options, kept_statistics, lexical_pool, walked)}
        ),
        c AS MATERIALIZED (
            SELECT {candidate_columns}
            FROM ({CANDIDATES}) x
            WHERE x.episode_id IN (SELECT episode_id FROM pool)
        ),"""
    else:
        head = f"""
        WITH c AS MATERIALIZED (
            -- An episode not indexed yet is found by its summary's embedding alone.
            SELECT {candidate_columns}
            FROM ({CANDIDATES}) x{_SIZE_GUARD if guarded else ""}
        ),{query_ctes}"""
    if options.recency_span:  # the approximate path's c is a part of the candidates
        head += span_cte(f"({CANDIDATES})" if approximate else "c")
    # The largest share of the query's weight a candidate holds (RankingOptions.
    # lexical_coverage): the candidates' best, or the dataset's on the approximate path.
    query_idf_cte, doc_share, passage_share = "", "", ""
    if options.lexical_coverage:
        query_idf_cte = query_idf(options)
        best_doc_idf, best_passage_idf = "max(r.doc_idf) OVER ()", "max(r.passage_idf) OVER ()"
        if approximate:
            best_doc_idf = f"greatest({best_doc_idf}, (SELECT idf FROM best_document))"
            best_passage_idf = f"greatest({best_passage_idf}, (SELECT idf FROM best_passage))"
        doc_share = (
            f" * least(1.0, coalesce({best_doc_idf} / nullif((SELECT doc FROM query_idf), "
            "0.0), 1.0))"
        )
        passage_share = (
            f" * least(1.0, coalesce({best_passage_idf} / nullif((SELECT passage FROM "
            "query_idf), 0.0), 1.0))"
        )
    extra = _extra_signal_sql(options, with_vector, lexical)

    def scaled(cosine: str) -> str:  # on MiniLM's scale (the map is increasing: max commutes)
        return on_reference_scale_sql(cosine, options.cosine_scale)

    chunk_vector = extra["chunk_vector"]
    depth_lexical, depth_open, depth_close = (
        extra["depth_lexical"],
        extra["depth_open"],
        extra["depth_close"],
    )
    depth_cosine, passage_cosines = extra["depth_cosine"], extra["passage_cosines"]
    entity_ctes, extra_raw, extra_join = extra["entity_ctes"], extra["raw"], extra["join"]
    extra_rel, feedback_ctes = extra["rel"], extra["feedback_ctes"]
    scored_from, extra_scored, extra_out = extra["scored_from"], extra["scored"], extra["out"]
    kept_out = (
        ",\n               EXISTS (SELECT 1 FROM kept) AS statistics_kept"
        if kept_statistics
        else ""
    )
    return f"""{head}
        -- Document level: the thread's messages up to the episode's end, and its summary.
        docs AS (
            SELECT c.episode_id, {document_length("c")} AS dl FROM c
        ),
        dstats AS ({doc_stats}),
        dterms AS (
            SELECT c.episode_id, u.lexeme,
                   coalesce(array_length(u.positions, 1), 1)::float8 AS tf
            FROM c CROSS JOIN LATERAL unnest({only_query_lexemes("c.tsv")}) AS u
            WHERE c.tsv @@ (SELECT tq FROM qq)
        ),{head_ctes}{doc_df}
        nq AS (SELECT greatest({query_words}, 1)::float8 AS n FROM q),
        doc_bm25 AS (
            SELECT t.episode_id, {bm25("t", "ddf", "d.dl", "s", weight)} AS score,
                   {matched} AS matched, {matched_idf("ddf", "s", weight)} AS matched_idf
            FROM dterms t
            JOIN ddf ON ddf.lexeme = t.lexeme{weight_join}
            JOIN docs d ON d.episode_id = t.episode_id
            CROSS JOIN dstats s
            GROUP BY t.episode_id
        ),
        -- Passage level: the thread's chunks (keyed by thread; the primary key serves this).
        passages AS MATERIALIZED (
            SELECT row_number() OVER () AS pid, c.episode_id, m.search_vector AS tsv,
                   greatest(m.search_length, 1)::float8 AS dl, {chunk_cos} AS cos{chunk_vector}
            FROM c
            JOIN message_chunks m
              ON m.dataset = :dataset AND m.thread_id = c.thread_id
              AND m.end_sequence <= c.end_sequence
        ),
        pstats AS ({passage_stats}),
        pterms AS (
            SELECT p.pid, p.episode_id, p.dl, u.lexeme,
                   coalesce(array_length(u.positions, 1), 1)::float8 AS tf
            FROM passages p CROSS JOIN LATERAL unnest({only_query_lexemes("p.tsv")}) AS u
            WHERE p.tsv @@ (SELECT tq FROM qq)
        ),
{passage_df}
        passage_bm25 AS (
            SELECT episode_id, max(score) AS score, max(matched) AS matched,
                   max(matched_idf) AS matched_idf{depth_lexical}
            FROM ({depth_open}
                SELECT t.pid, t.episode_id, {bm25("t", "pdf", "t.dl", "s", weight, passage=True)} AS score,
                       {matched} AS matched, {matched_idf("pdf", "s", weight)} AS matched_idf
                FROM pterms t
                JOIN pdf ON pdf.lexeme = t.lexeme{weight_join}
                CROSS JOIN pstats s
                GROUP BY t.pid, t.episode_id{depth_close}
            ) per_passage
            GROUP BY episode_id
        ),
        passage_cos AS (
            SELECT episode_id, max(cos) AS cos{depth_cosine} FROM {passage_cosines}
            GROUP BY episode_id
        ),{entity_ctes}
        {dataset_best}{query_idf_cte}
        -- Materialised: normed reads the semantic signal six times, and inlined each
        -- read would do the joins below again.
        raw AS MATERIALIZED (
            SELECT c.episode_id, c.ended_at,
                   coalesce(db.score, 0.0) AS doc_lexical,
                   coalesce(pb.score, 0.0) AS passage_lexical,{head_score}
                   coalesce(db.matched_idf, 0.0) AS doc_idf,
                   coalesce(pb.matched_idf, 0.0) AS passage_idf,
                   greatest({summary_cos}, coalesce(pc.cos, 0.0), 0.0) AS semantic,
                   coalesce(db.matched, 0.0) / (SELECT n FROM nq) AS coverage,
                   coalesce(pb.matched, 0.0) / (SELECT n FROM nq) AS passage_coverage,
                   ({ranked_recency_sql("c.ended_at", options)})::float8 AS recency{extra_raw}
            FROM c
            LEFT JOIN doc_bm25 db ON db.episode_id = c.episode_id
            LEFT JOIN passage_bm25 pb ON pb.episode_id = c.episode_id
            LEFT JOIN passage_cos pc ON pc.episode_id = c.episode_id{head_join}{extra_join}
        ),
        normed AS (
            SELECT r.*,
                   coalesce(r.doc_lexical / nullif({best_doc}, 0.0), 0.0){doc_share}
                       AS doc_rel,
                   coalesce(r.passage_lexical / nullif({best_passage}, 0.0),
                            0.0){passage_share} AS passage_rel,
{head_rel}                   coalesce({scaled("r.semantic")} / nullif({scaled(best_cosine)}, 0.0), 0.0)
                       AS sem_rel,{extra_rel}
                   {scaled("r.semantic")} AS scaled_cosine,
                   {scaled(best_cosine)} AS scaled_best_cosine,
                   {best_cosine} AS best_cosine
            FROM raw r
        ),{feedback_ctes}
        scored AS (
            SELECT n.episode_id, n.ended_at, n.recency,
                   n.semantic::float8 AS cosine, n.coverage::float8 AS coverage,
                   n.passage_coverage::float8 AS passage_coverage,
                   {calibrated_sql(("n.semantic", "n.coverage", "n.passage_coverage"), _REQUEST_BEST, options)} AS absolute_relevance,
                   {match_sql(_REQUEST_BEST, options)} AS request_match,
                   ({similarity_sql(options, _signals(lexical))})::float8 AS similarity,
                   ({lexical})::float8 AS lexical,
                   n.sem_rel::float8 AS semantic{extra_scored}
            FROM {scored_from} n
        ),
        -- Those the thresholds leave out come after every one they keep, and only to fill
        -- the limit: the caller drops them. So the top rows that pass are the same as with
        -- the condition in a WHERE, and a request whose every candidate is left out still
        -- answers its match (RecalledEpisodes.match) and that it abstained. The episodes'
        -- rows are read for the top rows only (joined before the limit, a large dataset's
        -- were all read: a hash join over every episode of its partition).
        top AS (
            SELECT s.*,
                   {fused_relevance_sql(options, "s.similarity", "s.recency")} AS relevance,
                   coalesce({relevant_sql("s.ended_at", options)}, false) AS passes
            FROM scored s
            ORDER BY passes DESC, relevance DESC, s.ended_at DESC, s.episode_id DESC
            LIMIT :limit
        )
        SELECT {_EPISODE_COLUMNS}, s.similarity, s.lexical, s.semantic, s.recency,
               s.relevance, s.cosine, s.coverage, s.passage_coverage, s.absolute_relevance,
               s.request_match, s.passes{extra_out}{kept_out}
        FROM top s
        JOIN episodes e ON e.dataset = :dataset AND e.episode_id = s.episode_id
        ORDER BY s.passes DESC, s.relevance DESC, s.ended_at DESC, s.episode_id DESC
    """


def _extra_signal_sql(options: RankingOptions, with_vector: bool, lexical: str) -> dict[str, str]:
    """The pieces of the ranking statement that compute the optional signals
    (:data:`EXTRA_SIGNALS`) whose switch is on; empty strings leave the statement as it
    was without them."""
    on = set(options.signals()) - set(LEARNED_WEIGHTS)
    pieces = dict.fromkeys(
        (
            "chunk_vector",
            "depth_lexical",
            "depth_open",
            "depth_close",
            "depth_cosine",
            "entity_ctes",
            "raw",
            "join",
            "rel",
            "feedback_ctes",
            "scored",
            "out",
        ),
        "",
    )
    pieces["passage_cosines"] = "passages"
    pieces["scored_from"] = "normed"
    k = options.passage_depth
    if k:
        # Several places in one episode: its k best passages (BM25) and chunks (cosine).
        pieces["depth_lexical"] = (
            f",\n                   sum(score) FILTER (WHERE rn <= {k}) AS depth_score"
        )
        pieces["depth_open"] = """
                SELECT ranked.*, row_number() OVER (
                    PARTITION BY ranked.episode_id ORDER BY ranked.score DESC) AS rn
                FROM ("""
        pieces["depth_close"] = "\n                ) ranked"
        pieces["depth_cosine"] = f", avg(cos) FILTER (WHERE rn <= {k}) AS depth_cos"
        pieces["passage_cosines"] = """(
                SELECT p.episode_id, p.cos, row_number() OVER (
                    PARTITION BY p.episode_id ORDER BY p.cos DESC NULLS LAST) AS rn
                FROM passages p) ranked_cosines"""
        pieces["raw"] += """,
                   coalesce(pb.depth_score, 0.0) AS passage_depth_raw,
                   greatest(coalesce(pc.depth_cos, 0.0), 0.0) AS cosine_depth"""
        pieces["rel"] += """
                   coalesce(r.passage_depth_raw / nullif(max(r.passage_depth_raw) OVER (), 0.0),
                            0.0) AS passage_depth,"""
    if options.entity_match:
        # The query's names and phrases among the episodes' entities (blind tokens, as the
        # entity filter reads them), each weighted by its rarity among the candidates: the
        # speakers' names, on every episode of their dataset, weigh nearly nothing.
        pieces["entity_ctes"] = """
        candidate_entities AS MATERIALIZED (
            SELECT c.episode_id, e.entity_tokens FROM c
            JOIN episodes e ON e.dataset = :dataset AND e.episode_id = c.episode_id
        ),
        entity_idf AS (
            SELECT t.token,
                   ln(1.0 + ((SELECT count(*) FROM c)::float8 - h.df + 0.5) / (h.df + 0.5)) AS idf
            FROM unnest(CAST(:entity_query AS text[])) AS t(token)
            CROSS JOIN LATERAL (
                SELECT count(*)::float8 AS df FROM candidate_entities ce
                WHERE ce.entity_tokens @> ARRAY[t.token]) h
            WHERE h.df > 0
        ),
        entity_hits AS (
            SELECT ce.episode_id, sum(i.idf) AS score
            FROM candidate_entities ce JOIN entity_idf i ON ce.entity_tokens @> ARRAY[i.token]
            GROUP BY ce.episode_id
        ),"""
        pieces["raw"] += ",\n                   coalesce(eh.score, 0.0) AS entity_raw"
        pieces["join"] += "\n            LEFT JOIN entity_hits eh ON eh.episode_id = c.episode_id"
        pieces["rel"] += """
                   coalesce(r.entity_raw / nullif(max(r.entity_raw) OVER (), 0.0), 0.0)
                       AS entity_match,"""
    if options.feedback:
        if with_vector:
            # Rocchio: the first pass (LEARNED_WEIGHTS' fit) picks the best episodes; the
            # centroid of their best chunks joins the query, and every chunk is compared
            # with both (a cosine with q + share × centroid, up to its norm).
            signals = _signals(lexical)
            first_fit = " + ".join(f"{w} * {signals[n]}" for n, w in LEARNED_WEIGHTS.items())
            share = float(FEEDBACK_SHARE)
            pieces["chunk_vector"] = ", m.embedding AS vec"
            pieces["feedback_ctes"] = f"""
        first_pass AS (
            SELECT n.episode_id FROM normed n
            WHERE n.doc_rel > 0 OR n.passage_rel > 0 OR n.sem_rel > 0
            ORDER BY {first_fit} DESC, n.episode_id LIMIT {int(options.feedback)}
        ),
        centroid AS (
            SELECT avg(b.vec) AS v FROM first_pass f CROSS JOIN LATERAL (
                SELECT p.vec FROM passages p WHERE p.episode_id = f.episode_id
                ORDER BY p.cos DESC NULLS LAST LIMIT 1) b
        ),
        feedback AS (
            SELECT p.episode_id,
                   max((p.cos + {share} * (1.0 - (p.vec <=> (SELECT v FROM centroid))))
                       / {1.0 + share}) AS cos
            FROM passages p GROUP BY p.episode_id
        ),
        with_feedback AS (
            SELECT n.*, greatest(coalesce(fb.cos, 0.0), 0.0) AS feedback_cosine
            FROM normed n LEFT JOIN feedback fb ON fb.episode_id = n.episode_id
        ),"""
            pieces["scored_from"] = "with_feedback"
        else:
            pieces["rel"] += "\n                   0.0::float8 AS feedback_cosine,"
    if options.phrase:
        # The query's word pairs as phrase queries (:phrases, built by query_phrase_pairs).
        pieces["entity_ctes"] += """
        phrase_hits AS (
            SELECT c.episode_id, count(*)::float8 AS hits
            FROM c CROSS JOIN unnest(CAST(:phrases AS text[])) AS p(tq)
            WHERE c.tsv @@ CAST(p.tq AS tsquery)
            GROUP BY c.episode_id
        ),"""
        pieces["raw"] += (
            ",\n                   coalesce(ph.hits, 0.0) "
            "/ greatest(cardinality(CAST(:phrases AS text[])), 1) AS phrase"
        )
        pieces["join"] += "\n            LEFT JOIN phrase_hits ph ON ph.episode_id = c.episode_id"
    if options.speaker:
        # The query's (name, word) pairs (query_terms.speaker_pair_params) in the document:
        # per name, how many of the other query words that speaker said; the best name.
        pieces["entity_ctes"] += """
        speaker_pairs AS MATERIALIZED (
            SELECT p.name, p.word, CAST(p.pair AS tsquery) AS tq
            FROM unnest(CAST(:speaker_names AS text[]), CAST(:speaker_words AS text[]),
                        CAST(:speaker_pairs AS text[])) AS p(name, word, pair)
        ),
        speaker_hits AS (
            SELECT h.episode_id, max(h.words)::float8 AS words FROM (
                SELECT c.episode_id, sp.name, count(DISTINCT sp.word) AS words
                FROM c CROSS JOIN speaker_pairs sp
                WHERE c.tsv @@ sp.tq
                GROUP BY c.episode_id, sp.name) h
            GROUP BY h.episode_id
        ),"""
        pieces["raw"] += (
            ",\n                   coalesce(sh.words, 0.0) "
            "/ CAST(:speaker_word_count AS float8) AS speaker_coverage"
        )
        pieces["join"] += "\n            LEFT JOIN speaker_hits sh ON sh.episode_id = c.episode_id"
    for name in EXTRA_SIGNALS:
        if name in on:
            pieces["scored"] += f",\n                   n.{name}::float8 AS {name}"
            pieces["out"] += f", s.{name}"
    return pieces
