"""The read path's rules, free of gRPC: what a recall asks for, checked, and answered.

Functions that touch the database take an open SQLAlchemy connection; the servicer embeds
the query (the only slow, non-database step) before it takes one.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import Connection

from episodic import convert
from episodic.config import RecallSettings
from episodic.crypto import ClearKey, WrongKey
from episodic.errors import DeadlineExceeded as DeadlineExceeded
from episodic.errors import InvalidArgument
from episodic.providers.entities import normalise_entity
from episodic.query_focus import strip_function_words, strip_stop_phrases, word_forms
from episodic.store import entities
from episodic.store import recall_queries as q
from episodic.store.events import check_event_type_form
from episodic.store.recall_queries import (
    DEFAULT_RANKING,
    LEARNED_WEIGHTS,
    SECOND_LOOK_WEIGHTS,
    RankingOptions,
    RecallFilters,
    lexical_scale_for,
    recency_band_for,
    scaled_lexical,
)
from episodic.store.relevance import (
    CURVES,
    Abstention,
    cosine_scale_for,
    curve_for,
    fitted_curve,
    other_language_curve,
)
from episodic.store.vault import Vault, open_row
from episodic.temporal import QueryTime, understand
from episodic.v1 import episode_pb2

from . import events as recall_events
from .events import EventScope

#: "The first time we talked about X": episodes with at least this similarity (relative to
#: the best match, cubed: about 0.6 of the best's match) count as being about X.
ORDINAL_MATCH_BAND = 0.2
#: How many matching episodes an ordinal over matches orders in time.
ORDINAL_POOL = 200
#: Calls with less time left than this (seconds) get their own deadline as the statement
#: timeout; longer deadlines rely on the ceiling (and save two round trips).
EXACT_DEADLINE_BELOW = 2.0
MAX_CONTEXT_EPISODES = 100
MAX_QUERY_CHARS = 8192
MAX_FILTER_THREADS = 1000
MAX_FILTER_ENTITIES = 100
MAX_EVENT_TYPE_CHARS = 64
SEARCH_DEFAULT_SIZE = 5
SEARCH_MAX_SIZE = 100
LIST_DEFAULT_SIZE = 10
LIST_MAX_SIZE = 1000
TIMELINE_DEFAULT_SIZE = 20
MAX_ENTITY_REFERENCE_CHARS = 500


def ranking_from(settings: RecallSettings, embedder_name: str = "") -> RankingOptions:
    """The ranking Recall runs under ``settings`` (the fusion and the recency scale) with
    the embedder called ``embedder_name`` (whose relevance curve it reads); the service
    and the replay tool both take it from here so they rank alike."""
    second_look = settings.ranking_second_look
    scale = (
        lexical_scale_for(embedder_name)
        if settings.ranking_lexical_scale is None
        else settings.ranking_lexical_scale
    )
    return RankingOptions(
        relevance_curve=curve_for(embedder_name),
        other_language_curve=other_language_curve(embedder_name),
        cosine_scale=cosine_scale_for(embedder_name) if settings.ranking_cosine_scale else None,
        recency_band=(
            recency_band_for(embedder_name)
            if settings.ranking_recency_band is None
            else settings.ranking_recency_band
        ),
        lexical_coverage=settings.ranking_lexical_coverage,
        fusion=settings.ranking_fusion,
        recency_span=settings.recency_span,
        named_time_recency=settings.recency_from_named_time,
        word_forms=settings.ranking_word_forms,
        strip_function_words=settings.ranking_function_words,
        phrase=second_look > 0,
        rerank_top=second_look,
        rerank_weights=scaled_lexical(SECOND_LOOK_WEIGHTS, scale) if second_look else (),
        # the fitted weights as they are (empty) unless the embedder's words weigh otherwise
        weights=scaled_lexical(LEARNED_WEIGHTS.items(), scale) if scale != 1.0 else (),
    )


#: Procedures a Recall returns by default, and at most (RecallRequest.context_procedures).
DEFAULT_CONTEXT_PROCEDURES = 3
MAX_CONTEXT_PROCEDURES = 20


@dataclass(frozen=True)
class RecallQuery:
    """A checked recall request."""

    dataset: str
    query: str | None
    include_episodes: bool
    limit: int
    similarity_weight: float
    recency_weight: float
    filters: RecallFilters = field(default_factory=RecallFilters)
    #: What the query says about time (None: none, or the request asked for it literally).
    understanding: QueryTime | None = None
    #: Which events join the episodes (None: none, the request excluded them).
    events: EventScope | None = field(default_factory=EventScope)
    #: Entity filters match every alias of the entity (False: the exact spelling only).
    entity_canon: bool = True
    #: Candidates whose calibrated relevance (episodic.store.relevance) is below this are
    #: left out; 0 keeps every one; None (unset) leaves it to ``abstention``.
    min_relevance: float | None = None
    #: Every candidate is left out when the request's match (relevance.request_match) is
    #: below this; 0 keeps them; None (unset) leaves it to ``abstention``.
    min_match: float | None = None
    #: ``abstain``: the model's thresholds, for whichever of the two the request left unset,
    #: applied to a dataset in the configuration they were fitted in (None: not asked).
    abstention: Abstention | None = None
    #: How similarity is scored (recall_queries.RankingOptions).
    ranking: RankingOptions = DEFAULT_RANKING
    #: RECALL_INCLUDE_PROCEDURES: the dataset's procedures that fit, at most this many.
    include_procedures: bool = False
    procedure_limit: int = DEFAULT_CONTEXT_PROCEDURES

    @property
    def applied_time(self) -> QueryTime | None:
        """The query's time, when it narrows the search (see QueryTime.applied)."""
        u = self.understanding
        return u if u is not None and u.applied else None

    @property
    def ranked_query(self) -> str | None:
        """The text ranked by similarity: the query without its time words (when they
        narrow the search), else the query as written; without its framing phrases when
        the ranking strips them."""
        query = self.query
        if self.applied_time is not None:
            query = self.applied_time.remainder or None
        if query and self.ranking.strip_stop_phrases:
            return strip_stop_phrases(query)
        return query

    @property
    def query_language(self) -> str | None:
        """The language :attr:`ranked_query` is written in (CLD2's code), as the lexical
        match reads it; None when it cannot be told or there is no query."""
        query = self.ranked_query
        return strip_function_words(query)[1] if query else None

    @property
    def lexical_query(self) -> str | None:
        """The text matched lexically: :attr:`ranked_query` without the function words of
        the language it is written in, when the ranking strips them (issue 40)."""
        query = self.ranked_query
        if query and self.ranking.strip_function_words:
            return strip_function_words(query)[0]
        return query

    @property
    def rerankable(self) -> bool:
        """Whether a reranker may reorder the answer: a ranked query, and no ordinal (an
        ordinal's answer is in time order, by design)."""
        u = self.applied_time
        return bool(self.ranked_query) and (u is None or (u.ordinal is None and not u.time_only))

    @property
    def needs_embedding(self) -> bool:
        """Only a query that similarity can affect is embedded: temporal recall (no query,
        or similarity weight 0) never touches the embedder."""
        return self.include_episodes and bool(self.ranked_query) and self.similarity_weight > 0


@dataclass(frozen=True)
class RecallAnswer:
    """Ranked rows (episode columns plus similarity, recency, relevance) and the count."""

    rows: list[dict[str, Any]]
    episode_count: int
    selected_threads: list[uuid.UUID] = field(default_factory=list)  # an ordinal's choice
    #: The request's match (how likely the dataset holds an answer at all: what
    #: ``min_match`` compares): the better of the episodes' and the events'; None without
    #: a query or without candidates.
    match: float | None = None
    #: Whether the answer is empty because the thresholds (``min_relevance``,
    #: ``min_match``, ``abstain``'s) left out every episode and event there was to rank.
    abstained: bool = False
    #: Whether ``abstain``'s thresholds held (``Ranking.abstain_applied``).
    abstain_applied: bool = False
    #: Whether the dataset is still settling (``Ranking.chunks_pending``,
    #: ``Ranking.episodes_pending``): RecalledEpisodes' fields of the same names.
    chunks_pending: bool = False
    episodes_pending: bool = False


def _answer(ranked: q.Ranking, rows: list[dict[str, Any]] | None = None, **kw: Any) -> RecallAnswer:
    """The answer made of ``rows`` (default: the ranking's, opened): abstained when it is
    empty because the thresholds withheld every candidate there was."""
    rows = ranked.rows if rows is None else rows
    return RecallAnswer(
        rows=rows,
        episode_count=ranked.count,
        match=ranked.match,
        abstained=ranked.withheld and not rows,
        abstain_applied=ranked.abstain_applied,
        chunks_pending=ranked.chunks_pending,
        episodes_pending=ranked.episodes_pending,
        **kw,
    )


def check_text(value: str, field: str, max_chars: int) -> str:
    if len(value) > max_chars:
        raise InvalidArgument(
            f"{field} is {len(value)} characters; the limit is {max_chars}", field=field
        )
    if "\x00" in value:
        raise InvalidArgument(f"{field} contains a NUL character", field=field)
    return value


def check_weight(value: float | None, default: float, field: str) -> float:
    """Unset means the server default; a set weight must be a number in [0, 1]."""
    if value is None:
        return default
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise InvalidArgument(f"{field} must be between 0 and 1 (got {value})", field=field)
    return float(value)


def check_context_episodes(value: int, settings: RecallSettings) -> int:
    if value < 0:
        raise InvalidArgument(
            f"context_episodes must not be negative (got {value})", field="context_episodes"
        )
    if value == 0:
        return settings.context_episodes
    return min(value, MAX_CONTEXT_EPISODES)


def check_context_procedures(value: int) -> int:
    if value < 0:
        raise InvalidArgument(
            f"context_procedures must not be negative (got {value})", field="context_procedures"
        )
    return min(value or DEFAULT_CONTEXT_PROCEDURES, MAX_CONTEXT_PROCEDURES)


def check_entities(entities: list[str]) -> list[str]:
    """Normalises filter entities exactly as stored ones are (seed 002, "entity drift")."""
    if len(entities) > MAX_FILTER_ENTITIES:
        raise InvalidArgument(
            f"{len(entities)} entities; at most {MAX_FILTER_ENTITIES} may be given",
            field="entities",
        )
    out: list[str] = []
    for i, raw in enumerate(entities):
        check_text(raw, f"entities[{i}]", 500)
        normalised = normalise_entity(raw)
        if not normalised:
            raise InvalidArgument(
                f"entities[{i}] {raw[:80]!r} is empty once normalised", field=f"entities[{i}]"
            )
        if normalised not in out:
            out.append(normalised)
    return out


def check_thread_ids(values: list[str], parse: Callable[[str, str], uuid.UUID]) -> list[uuid.UUID]:
    if len(values) > MAX_FILTER_THREADS:
        raise InvalidArgument(
            f"{len(values)} thread_ids; at most {MAX_FILTER_THREADS} may be given",
            field="thread_ids",
        )
    return list(dict.fromkeys(parse(v, f"thread_ids[{i}]") for i, v in enumerate(values)))


def check_event_type(value: str) -> str | None:
    """The filter's event type, lowercased (None: no filter). One no event could be
    recorded with (RecordEvent's pattern: ``decision``, ``price_change``) is refused as
    RecordEvent refuses it, rather than matching nothing without a word."""
    value = value.strip().lower()
    if not value:
        return None
    return check_event_type_form(check_text(value, "event_type", MAX_EVENT_TYPE_CHARS))


def check_window(since: datetime | None, until: datetime | None) -> None:
    if since is not None and until is not None and since > until:
        raise InvalidArgument(
            f"since ({since.isoformat()}) is after until ({until.isoformat()})", field="since"
        )


def check_query(value: str) -> str | None:
    check_text(value, "query", MAX_QUERY_CHARS)
    return value if value.strip() else None


def check_status(value: int) -> str | None:
    """A ListEpisodes status filter: unset means any status."""
    if value == episode_pb2.EPISODE_STATUS_UNSPECIFIED:
        return None
    if value == episode_pb2.EPISODE_STATUS_DELETED:
        raise InvalidArgument(
            "status EPISODE_STATUS_DELETED is reserved and never produced (a deleted episode "
            "is archived): filter on EPISODE_STATUS_ARCHIVED",
            field="status",
        )
    status = convert.STATUS_FROM_PROTO.get(value)
    if status is None:
        raise InvalidArgument(f"status {value} is not an episode status", field="status")
    return str(status)


def abstention(embedder_name: str) -> Abstention | None:
    """The thresholds ``abstain`` stands for with the embedder called ``embedder_name``:
    those its relevance curve recommends (:class:`~episodic.store.relevance.Abstention`)
    — or None (keep every episode) for an embedder without a curve fitted for it (an
    OpenAI model, the tests' hashing), whose cosines MiniLM's curves would misjudge.
    Recall applies them only to datasets in the text-search configuration the curves were
    fitted in (``relevance.FITTED_CONFIG``); elsewhere those of the model's other-language
    curve (``RankingOptions.other_language_curve``), when it has one."""
    curve = fitted_curve(embedder_name)
    return curve.abstention if curve is not None else None


def check_min_relevance(value: float | None) -> float | None:
    """None (unset: ``abstain`` may set it) or a number in [0, 1]; 0 keeps every candidate,
    even with ``abstain``."""
    if value is None:
        return None
    return _check_threshold(
        value,
        "min_relevance",
        "0 keeps every episode; recommended alone: "
        + ", ".join(f"{c.recommended_min_relevance} with {n}" for n, c in CURVES.items())
        + " (abstain=true picks the running model's thresholds)",
    )


def check_min_match(value: float | None) -> float | None:
    """None (unset: ``abstain`` may set it) or a number in [0, 1]; 0 keeps a request's
    candidates whatever its match, even with ``abstain``."""
    if value is None:
        return None
    return _check_threshold(
        value,
        "min_match",
        "0 answers every request; abstain=true picks the running model's recommended value ("
        + ", ".join(f"{c.abstention.min_match} with {n}" for n, c in CURVES.items())
        + ")",
    )


def _check_threshold(value: float, name: str, hint: str) -> float:
    """``value`` if it is a number in [0, 1], else INVALID_ARGUMENT naming ``name``."""
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise InvalidArgument(f"{name} must be between 0 and 1 (got {value}); {hint}", field=name)
    return float(value)


def check_weights_usable(similarity_weight: float, recency_weight: float) -> None:
    if similarity_weight == 0 and recency_weight == 0:
        raise InvalidArgument(
            "similarity_weight and recency_weight are both 0, so nothing would rank the "
            "episodes; leave them unset for the defaults (0.7 and 0.3)",
            field="similarity_weight",
        )


class DatasetSizes:
    """Which datasets are large enough for the approximate candidate path: each dataset's
    count of completed episodes as the last recall saw it (every ranking statement returns
    it), or, the first time, the exact statement guarded by the threshold (:meth:`guard`)
    or a count that stops at the threshold (an index-only probe of at most
    ``threshold + 1`` entries) — never a full count before a call. Process-local; a
    dataset that grows past the threshold switches at its next recall."""

    MAX_REMEMBERED = 100_000

    def __init__(self, threshold: int, approximation: q.Approximation) -> None:
        self.threshold = threshold
        self.approximation = approximation
        self._seen: dict[str, int] = {}

    def probe_bound(self, dataset: str) -> int | None:
        """How far to count ``dataset``'s episodes before ranking it (None: its size is
        known; the count rides on the call's opening statement, :func:`_rank`)."""
        return None if dataset in self._seen else self.threshold + 1

    def guard(self, dataset: str) -> q.SizeGuard | None:
        """For a dataset whose size is not known: rank it with the exact statement guarded
        by the threshold (:class:`~episodic.store.recall_queries.SizeGuard`) instead of
        probing its size first; None when its size is known."""
        if dataset in self._seen:
            return None
        return q.SizeGuard(exact_up_to=self.threshold, otherwise=self.approximation)

    def path(self, conn: Connection, dataset: str) -> q.Approximation | None:
        """The approximation to rank ``dataset`` with, or None for the exact path (probing
        its size with a statement of its own the first time)."""
        size = self._seen.get(dataset)
        if size is None:
            size = q.count_up_to(conn, dataset, self.threshold + 1)
            self.saw(dataset, size)
        return self.approximation if size > self.threshold else None

    def path_probed(self, dataset: str, probed: int | None) -> q.Approximation | None:
        """:meth:`path` when the count :meth:`probe_bound` asked for (if it asked) was read
        with another statement: ``probed``."""
        if probed is not None:
            self.saw(dataset, probed)
        size = self._seen.get(dataset, 0)
        return self.approximation if size > self.threshold else None

    def filtered_path(
        self, conn: Connection, key: Any, filters: q.RecallFilters
    ) -> q.Approximation | None:
        """For a large dataset and filters that narrow it: the exact path when they leave
        at most the threshold's episodes (a bounded count), which then costs what a small
        dataset's recall does and is exact, where the approximate path's HNSW walks would
        skip most of what they meet (a day of a 100k-episode dataset: 411 against 39 ms,
        docs/benchmarks.md "Recall")."""
        left = q.count_candidates_up_to(conn, key, filters, self.threshold + 1)
        return self.approximation if left > self.threshold else None

    def saw(self, dataset: str, size: int) -> None:
        if len(self._seen) >= self.MAX_REMEMBERED:
            self._seen.clear()
        self._seen[dataset] = size


def _rank(conn: Connection, vault: Vault, dataset: str, **ranking: Any) -> q.Ranking:
    """rank_episodes with the dataset's key, rows opened. The key and the query's lexemes
    (and their word forms) are read in one statement before the ranking
    (:func:`~episodic.store.recall_queries.read_opening`): two round trips per call. The
    first time the process sees the dataset, the exact ranking statement checks its size
    itself (:class:`~episodic.store.recall_queries.SizeGuard`: a third round trip, the
    approximate statement, only for a dataset above the threshold), or, for a call without
    a query or with filters (``as_of`` among them), the opening counts it. A key gone
    stale (the dataset was erased and created again since it was cached) is noticed on the
    rows and the ranking redone with the new one: the query's tokens must be the new key's
    too (the lexemes read are the same for any key)."""
    events: EventScope | None = ranking.pop("events", None)
    sizes: DatasetSizes | None = ranking.pop("sizes", None)
    query = ranking["query"]
    options = ranking.get("options", DEFAULT_RANKING)
    with_query = bool(query and query.strip()) and ranking["similarity_weight"] > 0
    guard = bound = None
    filtered = ranking["filters"].narrows()
    if sizes is not None:
        # A dataset not seen yet: with a query, the exact statement checks its size itself
        # (the count it reads anyway); else the opening counts it (it is its size only
        # without as_of, the feedback's first pass has no guard, and filters may leave a
        # large dataset few enough episodes for the exact path: DatasetSizes.filtered_path).
        if with_query and not filtered and not options.expansion:
            guard = sizes.guard(dataset)
        else:
            bound = sizes.probe_bound(dataset)
    if with_query or bound is not None:
        opening = q.read_opening(
            conn,
            dataset,
            query=query if with_query else None,
            size_bound=bound,
            generic=options.weight_generic_terms,
            forms=word_forms(query) if with_query and options.word_forms else (),
            ordered=options.phrase,
        )
        row = opening.key_row
        key = (
            vault.key_of(dataset, row["key_id"], row["master_key_id"], row["wrapped_key"])
            if row is not None
            else ClearKey(dataset)  # no row yet: what Vault.for_read answers for one
        )
        ranking["opening"] = opening
        probed = opening.size
    else:  # nothing to read before the ranking but the key, which is usually cached
        key = vault.for_read(conn, dataset)
        probed = None
    approximate = sizes.path_probed(dataset, probed) if sizes is not None else None
    if approximate is not None and sizes is not None and filtered:
        approximate = sizes.filtered_path(conn, key, ranking["filters"])
    if guard is not None:
        ranking["guard"] = guard
    try:
        ranked = _rank_with(conn, key, events, approximate, ranking)
    except WrongKey:
        key = vault.for_read(conn, dataset, fresh=True)
        ranked = _rank_with(conn, key, events, approximate, ranking)
    if sizes is not None and ranking["filters"].as_of is None:  # the count is the size
        sizes.saw(dataset, ranked.count)
    return ranked


def _rank_with(
    conn: Connection,
    key: Any,
    events: EventScope | None,
    approximate: q.Approximation | None,
    ranking: dict[str, Any],
) -> q.Ranking:
    shared = {k: v for k, v in ranking.items() if k not in ("options", "opening", "guard")}
    options = ranking.get("options", DEFAULT_RANKING)
    limit = shared["limit"]
    if options.rerank_top and shared["query"]:  # the second look needs its k candidates
        shared["limit"] = max(limit, options.rerank_top)
    ranked = q.rank(
        conn,
        key=key,
        approximate=approximate,
        options=options,
        opening=ranking.get("opening"),
        guard=ranking.get("guard"),
        **shared,
    )
    ranked = replace(ranked, rows=[open_row(key, r, "episodes") for r in ranked.rows])
    if events is not None:  # events join the candidates (services/recall/events.py)
        ranked = recall_events.merge(
            conn,
            key,
            ranked,
            events,
            **shared,
            any_events=ranked.has_events,
            lexemes=ranked.lexemes,
            # the same fusion and recency scale: episodes and events compete in one list
            options=options,
        )
    if options.rerank_top and shared["query"]:
        top = q.reorder_top(
            ranked.rows, options, shared["similarity_weight"], shared["recency_weight"]
        )
        ranked = replace(ranked, rows=top[:limit])
    return ranked  # opened, events merged, second look applied


def read_time(query: str | None, as_of: datetime | None, literal: bool) -> QueryTime | None:
    """The time expressions of a query (see :mod:`episodic.temporal`), or None."""
    if literal or not query:
        return None
    understood = understand(query, as_of or datetime.now(UTC))
    return understood if understood.found else None


def _within(filters: RecallFilters, understood: QueryTime) -> RecallFilters:
    """The request's filters narrowed to the query's window (both apply)."""
    since, until = filters.since, filters.until
    if understood.start is not None:
        since = understood.start if since is None else max(since, understood.start)
    if understood.end is not None:
        last = understood.end - timedelta(microseconds=1)  # the window's end is exclusive
        until = last if until is None else min(until, last)
    event_type = filters.event_type
    if understood.ordinal is not None and understood.ordinal.event_type and not event_type:
        event_type = understood.ordinal.event_type
    return replace(filters, since=since, until=until, event_type=event_type)


def _in_time_order(rows: list[dict[str, Any]], newest_first: bool = False) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: (r["started_at"], str(r["episode_id"])), reverse=newest_first)


def recall(
    conn: Connection,
    vault: Vault,
    request: RecallQuery,
    query_vector: np.ndarray | None,
    sizes: DatasetSizes | None = None,
) -> RecallAnswer:
    """Ranks the dataset's current episodes (see :mod:`episodic.store.recall_queries`),
    within the window and ordinal the query names (seed 002: temporal + semantic, recency
    inside the similarity band). ``sizes``: large datasets take the approximate candidate
    path (None: every dataset is ranked exactly)."""
    understood = request.applied_time
    filters = request.filters if understood is None else _within(request.filters, understood)
    named = request.understanding
    if (
        understood is None
        and named is not None
        and request.ranking.named_time_recency
        and named.start is not None
        and named.end is not None
        and named.ordinal is None
    ):  # a time the query names as when something happened: recency counts from it
        filters = replace(filters, named_time=(named.start, named.end))
    if request.entity_canon and filters.entities:
        filters = entities.resolve_filters(conn, vault.for_read(conn, request.dataset), filters)
    ranking: dict[str, Any] = {
        "filters": filters,
        "query": request.lexical_query,
        "query_vector": query_vector,
        "similarity_weight": request.similarity_weight,
        "recency_weight": request.recency_weight,
        "limit": request.limit,
        "events": request.events,
        "min_relevance": request.min_relevance,
        "min_match": request.min_match,
        "abstention": request.abstention,
        "sizes": sizes,
        "options": request.ranking,
    }
    if understood is None:
        return _answer(_rank(conn, vault, request.dataset, **ranking))
    ordinal = understood.ordinal
    if ordinal is not None and ordinal.scope == "sessions":
        chosen = q.threads_in_order(
            conn,
            request.dataset,
            as_of=filters.as_of,
            since=filters.since,
            until=filters.until,
            position=ordinal.position,
            from_end=ordinal.from_end,
            count=ordinal.count,
        )
        if filters.thread_ids:
            chosen = [t for t in chosen if t in set(filters.thread_ids)]
        if not chosen:
            counted = _rank(conn, vault, request.dataset, **{**ranking, "limit": 1})
            return RecallAnswer(
                rows=[],
                episode_count=counted.count,
                chunks_pending=counted.chunks_pending,
                episodes_pending=counted.episodes_pending,
            )
        ranking["filters"] = replace(filters, thread_ids=chosen)
        ranked = _rank(conn, vault, request.dataset, **ranking)
        rows = ranked.rows if request.ranked_query else _in_time_order(ranked.rows)
        return _answer(ranked, rows, selected_threads=chosen)
    if ordinal is not None:  # "the first time we talked about X", "the last 3 decisions"
        pool = {**ranking, "limit": ORDINAL_POOL}
        if request.ranked_query:
            pool.update(similarity_weight=1.0, recency_weight=0.0)
        ranked = _rank(conn, vault, request.dataset, **pool)
        rows = ranked.rows
        if request.ranked_query:
            rows = [r for r in rows if r["similarity"] >= ORDINAL_MATCH_BAND]
        ordered = _in_time_order(rows, newest_first=ordinal.from_end)
        picked = ordered[ordinal.position - 1 : ordinal.position - 1 + ordinal.count]
        return _answer(
            ranked,
            _in_time_order(picked)[: request.limit],
            selected_threads=[r["thread_id"] for r in picked if r["thread_id"] is not None],
        )
    if understood.time_only:
        # Nothing but time: the window's episodes, in time order, similarity aside.
        ranked = _rank(conn, vault, request.dataset, **{**ranking, "query": None})
        return _answer(ranked, _in_time_order(ranked.rows))
    return _answer(_rank(conn, vault, request.dataset, **ranking))


def rerank_text(row: dict[str, Any]) -> str:
    """What a reranker reads of an episode: its summary and key learnings."""
    return "\n".join([row.get("summary") or "", *(row.get("key_learnings") or [])]).strip()


def rerank(
    rows: list[dict[str, Any]], query: str, scores: Callable[[str, list[str]], list[float]]
) -> list[dict[str, Any]]:
    """``rows`` reordered by a reranker's ``scores`` (best first; ties keep Recall's
    order). Each row keeps its own scores; ``rerank_score`` is added."""
    if len(rows) < 2:
        return rows
    given = scores(query, [rerank_text(r) for r in rows])
    ranked = sorted(range(len(rows)), key=lambda i: (-given[i], i))
    return [{**rows[i], "rerank_score": given[i]} for i in ranked]


def second_opinion(
    rows: list[dict[str, Any]],
    cosines: Callable[[list[str]], list[float]],
    *,
    top: int,
    weight: float,
) -> list[dict[str, Any]]:
    """``rows`` (ranked, best first) with their first ``top`` episodes put in the order of
    their e5 cosine (``cosine``) plus ``weight`` × a second model's cosine of the query
    and their summaries (``cosines``; providers/second_opinion.py): which episodes make the
    ``top``, their scores and everything below them stay the ranking's own. Rows without a
    cosine (events) keep their places; ties keep the ranking's order.

    The raw cosine, as :data:`~episodic.providers.second_opinion.WEIGHT` was chosen on, not
    the ranking's ``semantic`` signal: that is the cosine on MiniLM's scale divided by the
    candidates' best, which stretched e5's near-ties ~8-fold (.850 against .843 became
    1.000 against .942) and so gave the second model an eighth of its weight."""
    head = [i for i, r in enumerate(rows[:top]) if r.get("cosine") is not None]
    if len(head) < 2:
        return rows
    second = cosines([rerank_text(rows[i]) for i in head])
    score = {
        i: (1.0 - weight) * float(rows[i]["cosine"]) + weight * c
        for i, c in zip(head, second, strict=True)
    }
    reordered = [rows[i] for i in sorted(head, key=lambda i: -score[i])]  # stable on ties
    out = list(rows)
    for i, row in zip(head, reordered, strict=True):
        out[i] = row
    return out


def search(
    conn: Connection,
    vault: Vault,
    dataset: str,
    query: str,
    query_vector: np.ndarray | None,
    limit: int,
) -> list[dict[str, Any]]:
    """Current episodes by text alone (similarity, no recency), best first; episodes that do
    not match at all (similarity 0) are left out."""
    ranked = _rank(
        conn,
        vault,
        dataset,
        filters=RecallFilters(),
        query=query,
        query_vector=query_vector,
        similarity_weight=1.0,
        recency_weight=0.0,
        limit=limit,
        events=EventScope(),
    )
    return [r for r in ranked.rows if r["similarity"] > 0]


def check_entity_reference(value: str) -> str:
    """An entity named by a request: its id or any name of it."""
    check_text(value, "entity", MAX_ENTITY_REFERENCE_CHARS)
    if not normalise_entity(value):
        raise InvalidArgument(
            'entity is required: an entity id or a name ("atlas", "project Atlas")',
            field="entity",
        )
    return value.strip()


def entity_timeline(
    conn: Connection,
    vault: Vault,
    dataset: str,
    reference: str,
    *,
    after: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> tuple[entities.Entity, list[dict[str, Any]], bool]:
    """The entity ``reference`` names and a page of the episodes mentioning it, oldest
    first (see :func:`episodic.store.entities.timeline`). Its reads depend on one another
    (a merge may delete the entity found): the caller gives them one snapshot."""
    key = vault.for_read(conn, dataset)
    entity_id = entities.find_entity(conn, key, reference, field="entity")
    entity = entities.get_entity(conn, key, entity_id)
    page = entities.timeline(conn, key, entity_id, after=after, limit=limit)
    return entity, [open_row(key, r, "episodes") for r in page.episodes], page.more
