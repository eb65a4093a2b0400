"""The SQL of the read path: ranked recall, listing, search and single reads of episodes.

Ranking (seed 000, "Ranking"), computed entirely in SQL over every candidate:

    relevance  = similarity × similarity_weight + recency × recency_weight
    recency    = 1 / (1 + days / (RECENCY_SPAN × span)): days since the episode ended,
                 measured from as_of (≥ 0), in units of the dataset's own span (the days
                 since its oldest candidate, ≥ 1); RankingOptions.recency_span 0 gives the
                 first version's 1 / (1 + days); when the query names the time something
                 happened (RecallFilters.named_time), 1 / (1 + days) counted from that
                 window instead (RankingOptions.named_time_recency)
    similarity = exp(fit − ideal fit), fit = Σ LEARNED_WEIGHTS × (lexical, semantic, the
                 raw best cosine, the query words' coverage of the document and of the best
                 passage); the ideal is 1 on each but the cosine, the candidates' best
                 (RankingOptions.fusion "score" gives the first version:
                 (LEXICAL_SHARE × lexical + (1 − LEXICAL_SHARE) × semantic) ^ BAND_EXPONENT)
    lexical    = (document + passage) / 2

    document   = BM25 of the query against the episode's document (the thread's messages up
                 to the episode's end, its summary and key learnings; english stemming),
                 divided by the best such BM25 among the candidates (0 when none matches);
    passage    = the best BM25 of any chunk of the thread's messages (a few consecutive
                 messages; statistics over the candidates' chunks), divided likewise — a
                 long thread is found by the passage that answers, not by its average;
    semantic   = the best cosine between the query's embedding and the episode's summary
                 embedding or any chunk of its thread's messages, clipped at 0, divided by
                 the best such cosine among the candidates.

So similarity is in [0, 1]: 1 for an episode that best matches the query on both signals,
lower as an episode matches less well *relative to the best match* (BM25 has no absolute
scale, and neither do cosines across embedders). The exponent (or the learned weights'
scale) makes the band of "about as similar as the best" narrow: recency then orders
episodes within that band (seed 002: "sort by ts DESC within a similarity band") instead
of lifting yesterday's loosely related
chat over last month's exact answer. Without a query, similarity is 0 and the order is plain
recency.

Candidates are the dataset's completed episodes that pass the filters; every one is scored
(a btree on (dataset, status) finds them), so the top N is exactly the top N of the
formula, including a very recent, moderately similar episode that an approximate nearest
neighbour search by similarity alone would not have fetched. Per-dataset candidate sets are
small (research/postgres-limits.md: ~1–1.5 ms for the vector part at 1M episodes).

A large dataset (more episodes than ``recall_approximate_above``; services/recall/domain.py
chooses) takes the approximate path instead: the same formula over a generous candidate
set — the episodes nearest the query by summary and by chunk (the HNSW indexes, iterative
scan), the best lexical matches (by the exact lexical signals among the holders of a
selective query word, and by ts_rank through GIN), the most recent ones and each query
word's densest documents and chunks — while BM25's statistics and the best BM25 come from the
whole filtered dataset (:func:`~episodic.store.lexical_statistics.dataset_statistics`), so a
candidate scores as on the exact path; the semantic signal is normalised by the best cosine
among the candidates (the HNSW nearest, which holds the dataset's best with high
probability). docs/benchmarks.md "Recall at scale" has its recall@N against the exact
ranking.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, cast

import numpy as np
from sqlalchemy import Connection

from episodic import metrics
from episodic.crypto import DatasetKey
from episodic.store import episode_counts, nearest_indexes
from episodic.store.episode_reads import (
    Opening,
    blinded_lexemes,
    count_up_to,
    list_episodes,
    read_opening,
    threads_in_order,
)
from episodic.store.lexical_pool import choose_lexical_pool, postings_statement
from episodic.store.lexical_statistics import QUOTED_LEXEME
from episodic.store.nearest_walks import NearestWalks
from episodic.store.query_terms import (
    expansion_terms,
    phrase_pairs,
    query_lexemes,
    query_phrase_pairs,
    query_term_tokens,
    query_terms,
    speaker_pair_params,
)
from episodic.store.ranking_options import (
    BAND_EXPONENT,
    BM25_B,
    BM25_K1,
    DEFAULT_RANKING,
    EXPANSION_POOL,
    EXPANSION_TERMS,
    EXPANSION_WEIGHT,
    EXTRA_SIGNALS,
    FEEDBACK_SHARE,
    FUSIONS,
    LEARNED_WEIGHTS,
    LEXICAL_COVERAGE,
    LEXICAL_SCALE,
    LEXICAL_SCALES,
    LEXICAL_SHARE,
    LEXICAL_SIGNALS,
    PASSAGE_BM25,
    PHRASE_WINDOW,
    RECENCY_BAND,
    RECENCY_BANDS,
    RECENCY_SPAN,
    SECOND_LOOK,
    SECOND_LOOK_WEIGHTS,
    THIRD_PASS_WEIGHTS,
    RankingOptions,
    lexical_scale_for,
    recency_band_for,
    scaled_lexical,
)
from episodic.store.ranking_sql import (
    approximate_parts,
    fused_relevance_sql,
    ranked_recency_sql,
    recall_sql,
    recency_gate,
    recency_sql,
    similarity_sql,
    span_cte,
)
from episodic.store.raw_statement import driver_form, fetch_all
from episodic.store.recall_filters import (
    CANDIDATES,
    RecallFilters,
    entity_clauses,
    entity_params,
    filter_params,
    named_time_params,
    unfiltered_params,
)
from episodic.store.recall_index import query_tokens
from episodic.store.relevance import Abstention, on_reference_scale
from episodic.store.relevance_thresholds import (
    ABSTAIN_APPLIED_SQL,
    IN_FITTED_CONFIG,
    calibrated_sql,
    match_sql,
    relevant_sql,
    threshold_params,
)

# Its own names, and those of the modules the read path's SQL was split into
# (ranking_options, recall_filters, lexical_statistics, relevance_thresholds,
# ranking_sql, query_terms, episode_reads), importable from here as before the split.
__all__ = [
    "ABSTAIN_APPLIED_SQL",
    "BAND_EXPONENT",
    "BM25_B",
    "BM25_K1",
    "COUNT_STATEMENT",
    "DEFAULT_RANKING",
    "EXPANSION_POOL",
    "EXPANSION_TERMS",
    "EXPANSION_WEIGHT",
    "EXTRA_SIGNALS",
    "FEEDBACK_SHARE",
    "FUSIONS",
    "IN_FITTED_CONFIG",
    "LEARNED_WEIGHTS",
    "LEXICAL_COVERAGE",
    "LEXICAL_SCALE",
    "LEXICAL_SCALES",
    "LEXICAL_SHARE",
    "LEXICAL_SIGNALS",
    "PASSAGE_BM25",
    "PHRASE_WINDOW",
    "QUOTED_LEXEME",
    "RECENCY_BAND",
    "RECENCY_BANDS",
    "RECENCY_SPAN",
    "SECOND_LOOK",
    "SECOND_LOOK_WEIGHTS",
    "THIRD_PASS_WEIGHTS",
    "Approximation",
    "Opening",
    "Ranking",
    "RankingOptions",
    "RecallFilters",
    "approximate_parts",
    "approximation_params",
    "blinded_lexemes",
    "calibrated_sql",
    "count_candidates_up_to",
    "count_up_to",
    "entity_clauses",
    "entity_params",
    "expansion_terms",
    "fused_relevance_sql",
    "lexical_scale_for",
    "list_episodes",
    "match_sql",
    "named_time_params",
    "phrase_pairs",
    "query_lexemes",
    "query_phrase_pairs",
    "query_term_tokens",
    "query_terms",
    "rank",
    "rank_episodes",
    "ranked_recency_sql",
    "read_opening",
    "recall_sql",
    "recall_statement",
    "recency_band_for",
    "recency_gate",
    "recency_sql",
    "relevant_sql",
    "reorder_top",
    "scaled_lexical",
    "similarity_sql",
    "span_cte",
    "speaker_pair_params",
    "threads_in_order",
    "threshold_params",
    "unfiltered_params",
]

# The count, and whether the dataset has any event (one probe of the events' primary key):
# most datasets have none, and then Recall skips the events' statement (a round trip);
# whether ``abstain``'s thresholds hold for the dataset (ABSTAIN_APPLIED_SQL); and
# whether the dataset is still settling (RecalledEpisodes.chunks_pending, episodes_pending):
# a probe of episodes_dataset_chunks_pending_idx (dataset, episode_id) WHERE chunks_pending
# and one of (dataset, status). The ORDER BY is the first index's order: as an EXISTS the
# planner took the Summariser's queue index (completed_at) WHERE chunks_pending instead and
# read every pending row of the partition, so another dataset's backlog of 20k cost 14-30 ms
# (0.04 ms this way; migration 0020). Named apart from the episode's own columns
# (r.chunks_pending), which the ranking rows carry. The count is the one its writers keep
# (store/episode_counts.py) when the dataset has one and the request is not as of a past
# moment: counting cost ~11 ms per 100k episodes.
COUNT_STATEMENT = (
    f"SELECT {episode_counts.COUNT_SQL} AS episode_count, "
    "EXISTS (SELECT 1 FROM events ev WHERE ev.dataset = :dataset) AS has_events, "
    "(SELECT true FROM episodes cp WHERE cp.dataset = :dataset AND cp.chunks_pending "
    "AND cp.status = 'completed' ORDER BY cp.episode_id LIMIT 1) IS NOT NULL "
    "AS dataset_chunks_pending, "
    "EXISTS (SELECT 1 FROM episodes ep WHERE ep.dataset = :dataset "
    "AND ep.status IN ('pending', 'processing')) AS dataset_episodes_pending, "
    f"{ABSTAIN_APPLIED_SQL} AS abstain_applied"
)


@lru_cache(maxsize=32)
def recall_statement(
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
    """The ranking and the dataset's episode count in one statement (one round trip, one
    snapshot): one row per ranked episode, each carrying ``episode_count``,
    ``has_events`` and ``abstain_applied``; a single row with only those when no episode
    qualifies. ``guarded``
    (the exact statement with a query): the count is taken first and nothing is ranked
    when it is above ``:exact_up_to`` — the size probe of a dataset not seen before,
    within the ranking (:class:`SizeGuard`)."""
    ranking = recall_sql(
        with_query=with_query,
        with_vector=with_vector,
        approximate=approximate,
        options=options,
        exact_cosine=exact_cosine,
        guarded=guarded,
        kept_statistics=kept_statistics,
        lexical_pool=lexical_pool,
        walked=walked,
    )
    if guarded:  # the count as a CTE, which the ranking's candidates read (ranking_sql._SIZE_GUARD)
        return f"""
        WITH total AS MATERIALIZED ({COUNT_STATEMENT})
        SELECT total.episode_count, total.has_events, total.abstain_applied, total.dataset_chunks_pending,
               total.dataset_episodes_pending, r.*
        FROM total
        LEFT JOIN ({ranking}) r ON true
        ORDER BY r.passes DESC NULLS LAST, r.relevance DESC NULLS LAST, r.ended_at DESC,
                 r.episode_id DESC
    """
    return f"""
        SELECT total.episode_count, total.has_events, total.abstain_applied, total.dataset_chunks_pending,
               total.dataset_episodes_pending, r.*
        FROM ({COUNT_STATEMENT}) total
        LEFT JOIN ({ranking}) r ON true
        ORDER BY r.passes DESC NULLS LAST, r.relevance DESC NULLS LAST, r.ended_at DESC,
                 r.episode_id DESC
    """


@lru_cache(maxsize=32)
def _driver_statement(
    with_query: bool,
    with_vector: bool,
    options: RankingOptions,
    approximate: bool = False,
    exact_cosine: bool = False,
    guarded: bool = False,
    kept_statistics: bool = False,
    lexical_pool: bool = False,
    walked: bool = False,
) -> str:
    """The ranking statement (:func:`recall_statement`) in the driver's form."""
    return driver_form(
        recall_statement(
            with_query=with_query,
            with_vector=with_vector,
            approximate=approximate,
            options=options,
            exact_cosine=exact_cosine,
            guarded=guarded,
            kept_statistics=kept_statistics,
            lexical_pool=lexical_pool,
            walked=walked,
        )
    )


#: How the approximate statement is planned (see :func:`rank`).
CUSTOM_PLANS = "force_custom_plan"


@dataclass(frozen=True)
class Approximation:
    """How the approximate path gathers candidates (see
    :func:`~episodic.store.ranking_sql.approximate_parts`)."""

    #: How many episodes each of the nearest-summary, nearest-chunk and lexical parts adds.
    candidates: int = 400
    #: How many of the most recent episodes join them.
    recent: int = 100
    #: How many episodes each of the nearest-summary and nearest-chunk parts adds (None:
    #: ``candidates``).
    nearest: int | None = None
    #: Per query word, how many of the documents and of the chunks that hold it most
    #: densely join them (they carry the dataset's best BM25, which normalises the
    #: lexical signal).
    per_lexeme: int = 50
    #: A query word held by at most this many documents (passages) is selective: the
    #: best BM25 that normalises the lexical signal is computed over all its holders.
    selective_df: int = 5000
    #: With kept statistics: how many of each query word's kept best holders (its postings
    #: in impact order, :data:`~episodic.store.kept_statistics.BEST_KEPT` at most) are
    #: scored; they take the place of the selective words' holders.
    postings: int = 5000
    #: How many of the query's words the parts above read the holders of: the rarest, by
    #: how many documents and passages hold them. A long query's common words would each
    #: bring thousands (a query of 200 words did not finish in 10 s on a dataset of 100k);
    #: every candidate is still scored over all the query's words.
    words: int = 16
    #: Read BM25's statistics from what the Scheduler keeps of the dataset
    #: (:mod:`episodic.store.kept_statistics`) when the request has no filter and the
    #: dataset has them, instead of counting them over every holder of each query word.
    kept_statistics: bool = True
    #: Normalise the semantic signal by the dataset's best cosine (every filtered summary
    #: and chunk vector read) rather than the candidates' best (the HNSW nearest, which
    #: misses the dataset's best on hard data): the exact path's semantic scores, at the
    #: price of that read (docs/benchmarks.md "Recall at scale").
    exact_cosine: bool = False
    #: Where the nearest walks run on the path with kept statistics: beside the postings'
    #: read, on connections of their own (:mod:`episodic.store.nearest_walks`; Recall's
    #: service), or inside the ranking statement (None).
    walks: NearestWalks | None = field(default=None, compare=False)


@dataclass(frozen=True)
class SizeGuard:
    """How :func:`rank` ranks a dataset whose size is not known yet: exactly if it has at
    most ``exact_up_to`` completed episodes — which the exact statement checks itself, from
    the count it reads anyway, before reading any candidate — else, with a second
    statement, ``otherwise``. It spares the size probe a statement of its own (or a part of
    the opening's, ~0.2-0.3 ms: docs/benchmarks.md "Recall, sixth pass")."""

    exact_up_to: int
    otherwise: Approximation


@dataclass(frozen=True)
class Ranking:
    """What one ranking statement answered (see :func:`rank`)."""

    #: Column name to value (dicts, as :func:`~episodic.store.raw_statement.fetch_all`
    #: reads them): the candidates the thresholds keep, best first.
    rows: list[dict[str, Any]]
    count: int
    #: Whether the dataset has any event at all (else ranking its events can be skipped).
    has_events: bool
    #: The query's tokens as sent (None without a query), for the events' ranking to reuse.
    lexemes: list[str] | None
    #: The request's match (``relevance.request_match``: how likely the dataset holds an
    #: answer at all) when there was a query and at least one candidate; else None.
    match: float | None = None
    #: Whether the thresholds left out every candidate there was (there was at least one).
    withheld: bool = False
    #: Whether ``abstain``'s thresholds held: it was asked, with a query, by a model with
    #: curves, of a dataset in the language they were fitted in (else every candidate is
    #: kept, as without it).
    abstain_applied: bool = False
    #: Whether a current episode of the dataset still waits for its chunk index, and
    #: whether episodes of it are queued or being summarised (the dataset is settling).
    chunks_pending: bool = False
    episodes_pending: bool = False


def reorder_top(
    rows: Sequence[Any],
    options: RankingOptions,
    similarity_weight: float,
    recency_weight: float,
) -> list[Any]:
    """``rows`` (ranked, best first) with their first ``options.rerank_top`` episodes put in
    the order of the learned fusion with ``options.rerank_weights``
    (``RankingOptions.rerank_top``): ``similarity_weight`` × exp(fit − ideal fit) +
    ``recency_weight`` × recency, the ideal being, among those k, 1 on the relative
    signals and the coverages and the best of the others (the cosine, the optional
    signals), as the ranking's own fusion has it over every candidate. Rows without one of
    the weighted signals (events) keep their places; a tie keeps the ranking's order."""
    k = options.rerank_top
    if k < 2 or len(rows) < 2:
        return list(rows)
    weights = dict(options.rerank_weights)
    head = [i for i, r in enumerate(rows[:k]) if all(name in r for name in weights)]
    if len(head) < 2:
        return list(rows)

    def signal(row: Any, name: str) -> float:  # the cosine on MiniLM's scale, as fused
        value = float(row[name])
        return on_reference_scale(value, options.cosine_scale) if name == "cosine" else value

    ideal = {
        name: 1.0
        if name not in EXTRA_SIGNALS and name != "cosine"
        else max(signal(rows[i], name) for i in head)
        for name in weights
    }
    best = sum(w * ideal[name] for name, w in weights.items())

    def similarity(row: Any) -> float:
        if float(row["lexical"]) > 0 or float(row["semantic"]) > 0:
            fit = sum(w * signal(row, name) for name, w in weights.items())
            return float(np.exp(fit - best))
        return 0.0

    similarities = {i: similarity(rows[i]) for i in head}
    best_similarity = max(similarities.values())

    def score(i: int) -> float:  # the first pass's fusion, recency gated alike
        gate = recency_gate(similarities[i], best_similarity, options.recency_band)
        return (
            similarity_weight * similarities[i] + recency_weight * float(rows[i]["recency"]) * gate
        )

    reordered = [rows[i] for i in sorted(head, key=score, reverse=True)]  # stable on ties
    out = list(rows)
    for i, row in zip(head, reordered, strict=True):
        out[i] = row
    return out


def rank_episodes(conn: Connection, **arguments: Any) -> tuple[list[dict[str, Any]], int]:
    """:func:`rank`'s rows and count (same arguments)."""
    ranking = rank(conn, **arguments)
    return ranking.rows, ranking.count


def rank(
    conn: Connection,
    *,
    key: DatasetKey,
    filters: RecallFilters,
    query: str | None,
    query_vector: np.ndarray | None,
    similarity_weight: float,
    recency_weight: float,
    limit: int,
    min_relevance: float | None = None,
    min_match: float | None = None,
    abstention: Abstention | None = None,
    approximate: Approximation | None = None,
    options: RankingOptions = DEFAULT_RANKING,
    opening: Opening | None = None,
    guard: SizeGuard | None = None,
) -> Ranking:
    """The top ``limit`` candidates of ``key``'s dataset by relevance, best first, with
    ``similarity``, ``recency`` and ``relevance`` columns beside the episode's (sealed, as
    stored: open them with ``key``), and how many completed episodes the dataset has (that
    ended by ``as_of``, when given; other filters do not apply to the count). Without
    ``query`` (or with ``similarity_weight`` 0) similarity is 0 and nothing is searched;
    without ``query_vector`` the semantic part is 0. Each row also carries the episode's
    absolute ``absolute_relevance`` (:mod:`episodic.store.relevance`) and its inputs
    (``cosine``, ``coverage``, ``passage_coverage``), and the request's ``request_match``
    (``relevance.request_match``, 1 without a query); with a query, candidates whose
    absolute relevance is below ``min_relevance`` are left out, and every candidate when
    the request's match is below ``min_match`` (without a query, nothing is matched and
    neither applies); ``abstention`` (``abstain``): the model's thresholds where the
    request sets none, for a dataset in the configuration they were fitted in. ``approximate``: score only a generous
    candidate set of the dataset (a large one) instead of every episode. ``options``:
    :class:`RankingOptions`. ``opening``: what :func:`read_opening` read for this call
    (with the query's lexemes, and their word forms under ``options.word_forms``: then no
    round trip for them here); None: they are read now. ``guard`` (a dataset of unknown
    size, with a query, no ``approximate``, no ``as_of``: its count is then its size, and no
    ``options.expansion``): :class:`SizeGuard`; the count returned is the dataset's either
    way."""
    with_query = bool(query and query.strip()) and similarity_weight > 0
    with_vector = with_query and query_vector is not None
    if guard is not None and (
        not with_query or approximate is not None or filters.as_of is not None or options.expansion
    ):
        raise ValueError("a size guard needs a query, the exact path, no as_of, no expansion")
    filtered = filters.narrows()
    params: dict[str, object] = {
        **filter_params(key, filters),
        "ws": float(similarity_weight),
        "wr": float(recency_weight),
        "limit": limit,
        **threshold_params(min_relevance, min_match, abstention, options),
    }
    if approximate is not None:
        params.update(approximation_params(approximate))
    if guard is not None:
        params["exact_up_to"] = guard.exact_up_to
    lexemes: list[str] | None = None
    if with_query:
        assert query is not None
        weighted: list[tuple[str, float, str]] | None = None
        if opening is not None and opening.lexemes is not None:
            weighted = query_term_tokens(key, opening.lexemes, opening.forms or ())
        elif options.weighted_terms():
            weighted = query_terms(conn, key, query, options)
        if weighted is None:
            lexemes = params["lexemes"] = query_tokens(conn, key, query)
        elif options.weighted_terms():
            lexemes = [t for t, _, term in weighted if term == t]  # the query's own
            params["lexemes"] = [t for t, _, _ in weighted]
            params["weights"] = [w for _, w, _ in weighted]
            params["terms"] = [term for _, _, term in weighted]
        else:
            lexemes = params["lexemes"] = [t for t, _, _ in weighted]
        if options.phrase:
            params["phrases"] = (
                phrase_pairs(key, opening.ordered)
                if opening is not None and opening.ordered is not None
                else query_phrase_pairs(conn, key, query)
            )
        if options.speaker:
            if opening is not None and opening.lexemes is not None:
                own, forms = [w for w, _ in opening.lexemes], opening.forms or []
            else:
                own, forms = query_lexemes(conn, key, query), []
            params.update(speaker_pair_params(key, own, forms))
        if options.entity_match:
            from episodic.query_focus import query_phrases

            params["entity_query"] = sorted({key.token(p) for p in query_phrases(query)})
        params["qvec"] = (
            np.asarray(query_vector, dtype=np.float32)
            if with_vector and query_vector is not None
            else None
        )
    if with_query and options.expansion:
        # RM3-style feedback: a first pass without it picks the episodes whose words join
        # the query (the second pass, below, ranks with them).
        first_options = replace(options, expansion=0)
        _, first = _rank_with(
            conn,
            {**params, "limit": options.expansion, **threshold_params(0.0, 0.0, None)},
            with_query,
            with_vector,
            approximate,
            first_options,
            filtered=filtered,
        )
        tokens = cast(list[str], params["lexemes"])
        feedback = expansion_terms(
            conn, key, filters, [r for r in first if r["episode_id"]], tokens
        )
        params["lexemes"] = [*tokens, *(t for t, _ in feedback)]
        params["weights"] = [*cast(list[float], params["weights"]), *(w for _, w in feedback)]
        params["terms"] = [*cast(list[str | None], params["terms"]), *(None for _ in feedback)]
    statement, rows = _rank_with(
        conn,
        params,
        with_query,
        with_vector,
        approximate,
        options,
        guarded=guard is not None,
        filtered=filtered,
    )
    count = int(rows[0]["episode_count"]) if rows else 0
    if guard is not None and count > guard.exact_up_to:  # too large: nothing was ranked
        approximate = guard.otherwise
        statement, rows = _rank_with(
            conn,
            {**params, **approximation_params(approximate)},
            with_query,
            with_vector,
            approximate,
            options,
            filtered=filtered,
        )
        count = int(rows[0]["episode_count"]) if rows else 0
    candidates = [r for r in rows if r["episode_id"] is not None]
    ranked = [r for r in candidates if r["passes"]]
    if statement[1] and with_query:  # the approximate path: were its statistics kept?
        metrics.recall_statistics(kept=bool(rows and rows[0].get("statistics_kept")))
    metrics.recall_ranked(candidates=count, results=len(ranked))
    has_events = bool(rows[0]["has_events"]) if rows else True
    return Ranking(
        ranked,
        count,
        has_events,
        lexemes,
        match=float(candidates[0]["request_match"]) if with_query and candidates else None,
        withheld=bool(candidates) and not ranked,
        abstain_applied=with_query and bool(rows) and bool(rows[0]["abstain_applied"]),
        chunks_pending=bool(rows) and bool(rows[0]["dataset_chunks_pending"]),
        episodes_pending=bool(rows) and bool(rows[0]["dataset_episodes_pending"]),
    )


def count_candidates_up_to(
    conn: Connection, key: DatasetKey, filters: RecallFilters, bound: int
) -> int:
    """How many completed episodes of ``key``'s dataset ``filters`` leave, counting no
    further than ``bound`` (a narrow filter reads its few episodes through the indexes, a
    wide one stops at the bound). Planned for its parameters, as the approximate statement
    is: a generic plan cannot tell which filter narrows."""
    params = {**filter_params(key, filters), "bound": bound}
    rows = _execute(conn, (_COUNT_CANDIDATES, True), params)
    return int(rows[0]["n"])


_COUNT_CANDIDATES = driver_form(
    f"SELECT count(*) AS n FROM (SELECT 1 FROM ({CANDIDATES}) x LIMIT :bound) y"
)


def approximation_params(approximate: Approximation) -> dict[str, object]:
    """The approximate statement's parameters for ``approximate``."""
    return {
        "approx_candidates": approximate.candidates,
        "approx_nearest": (
            approximate.candidates if approximate.nearest is None else approximate.nearest
        ),
        "approx_recent": approximate.recent,
        "approx_per_lexeme": approximate.per_lexeme,
        "approx_selective_df": approximate.selective_df,
        "approx_postings": approximate.postings,
        "approx_words": approximate.words,
    }


def _rank_with(
    conn: Connection,
    params: dict[str, object],
    with_query: bool,
    with_vector: bool,
    approximate: Approximation | None,
    options: RankingOptions,
    *,
    guarded: bool = False,
    filtered: bool = False,
) -> tuple[tuple[str, bool], list[dict[str, Any]]]:
    """The ranking statement for the request (:func:`_ranking_statement`) and its rows.
    On the approximate path with kept statistics, the lexical pool is chosen first from
    the kept postings (:mod:`episodic.store.lexical_pool`: one small statement and numpy,
    where the statement's SQL took most of its time at 100k episodes), while the nearest
    walks run beside it when ``approximate.walks`` is set (:mod:`episodic.store.nearest_walks`)."""
    # A request without filters reads the dataset's kept statistics (filtered, its
    # statistics are not the dataset's: the statement counts its own).
    kept = approximate is not None and with_query and approximate.kept_statistics and not filtered
    pool, walks = None, None
    pool_params: dict[str, object] = {}
    if approximate is not None and with_vector:
        metrics.recall_nearest_walks(own=nearest_indexes.has_own(conn, str(params["dataset"])))
    if kept and approximate is not None:
        if with_vector and approximate.walks is not None:  # beside the postings' read
            walks = approximate.walks.start(dict(params))  # a copy: read in threads
        postings = fetch_all(conn, _postings_statement(options), params)
        pool = choose_lexical_pool(
            postings, candidates=approximate.candidates, per_lexeme=approximate.per_lexeme
        )
        if pool is not None:  # None: nothing kept (yet)
            pool_params.update(pool.params())
        if walks is not None:
            pool_params.update(walks.result(conn).params())
    statement = _ranking_statement(
        with_query,
        with_vector,
        approximate,
        options,
        guarded,
        kept_statistics=kept,
        lexical_pool=pool is not None,
        walked=walks is not None,
    )
    return statement, _execute(conn, statement, {**params, **pool_params})


@lru_cache(maxsize=8)
def _postings_statement(options: RankingOptions) -> str:
    """:func:`~episodic.store.lexical_pool.postings_statement` in the driver's form."""
    return driver_form(postings_statement(options))


def _ranking_statement(
    with_query: bool,
    with_vector: bool,
    approximate: Approximation | None,
    options: RankingOptions,
    guarded: bool = False,
    *,
    kept_statistics: bool = False,
    lexical_pool: bool = False,
    walked: bool = False,
) -> tuple[str, bool]:
    """The ranking statement in the driver's form (compiled once per variant, not per
    call), and whether it is the approximate one. ``kept_statistics``: it reads the
    dataset's kept statistics (:mod:`episodic.store.kept_statistics`; a request without
    filters). ``lexical_pool``: the kept postings' holders were scored by Recall
    (:func:`_rank_with`). ``walked``: so were the nearest walks run."""
    if approximate is None:
        return _driver_statement(with_query, with_vector, options, guarded=guarded), False
    statement = _driver_statement(
        with_query,
        with_vector,
        options,
        approximate=True,
        exact_cosine=approximate.exact_cosine,
        kept_statistics=kept_statistics,
        lexical_pool=lexical_pool,
        walked=walked,
    )
    return statement, True


def _execute(
    conn: Connection, statement: tuple[str, bool], params: dict[str, object]
) -> list[dict[str, Any]]:
    """The rows of a ranking statement (:func:`rank`, :func:`_ranking_statement`), sent on
    the connection's psycopg connection without SQLAlchemy's Core
    (:func:`episodic.store.raw_statement.fetch_all`: observed, traced, errors as
    SQLAlchemy's)."""
    sql, approximate = statement
    if not approximate:
        return fetch_all(conn, sql, params)
    # psycopg prepares a statement run five times on a connection, and PostgreSQL then
    # switches to a generic plan (one planned before the dataset and the query's words are
    # known) whenever its estimated cost is below the custom plans': for this statement it
    # always is (the estimates are far off), and the generic plan ran 2-9x longer than the
    # custom one at 1M episodes, up to 87 s (docs/benchmarks.md "Recall at scale"). So this
    # statement is always planned for its parameters.
    conn.exec_driver_sql(f"SET plan_cache_mode = {CUSTOM_PLANS}")
    try:
        return fetch_all(conn, sql, params)
    finally:
        conn.exec_driver_sql("RESET plan_cache_mode")
