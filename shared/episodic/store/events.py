"""Events: episodes that are one moment, not a stretch of a thread (seed 002, "Episodes are
events, not messages — write selectively, query by time + entity + similarity").

An event is recorded by an agent (IngestService.RecordEvent) or by the turn classifier
(:mod:`episodic.services.summariser.events`), stored in ``events`` (migration 0008) and
recalled beside the summarised episodes:

- **Sealed like episodes.** ``summary``, ``entities`` and ``actor`` are sealed with the
  dataset's key (:data:`episodic.store.vault.SEALED_COLUMNS`); ``entity_tokens`` and
  ``actor_token`` are blind tokens for the filters, and the lexical document
  (``search_vector``) holds blind tokens too (:func:`episodic.store.recall_index.blind_vectors`),
  written with the row, so an event is searchable by its words as soon as it is stored.
- **Embedded afterwards.** The Summariser has the embedder; :func:`embed_pending` gives
  new events their vector shortly after they are written (an unembedded event still
  ranks on its words, its time and its filters). Ingest stays free of the model.
- **Ranked by the episodes' formula** (:func:`rank_events`): relevance = similarity ×
  weight + recency × weight, similarity = (LEXICAL_SHARE × lexical + (1 − LEXICAL_SHARE) ×
  semantic) ^ BAND_EXPONENT, recency from ``occurred_at``. An event has no thread chunks:
  its lexical part is the BM25 of its document (summary, type, actor, entities) and its
  semantic part the cosine of its embedding, each relative to the best *event* candidate
  of the request (BM25 statistics are not comparable across the two document kinds). An
  event the Summariser has not embedded yet is ranked on its words alone (its semantic
  part is unknown, not zero).
- Every statement filters by one dataset (the distribution rule of ``events``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, RowMapping, TextClause, text

from episodic.crypto import DatasetKey, seal_json
from episodic.errors import AlreadyExists, InvalidArgument, NotFound
from episodic.providers.dataset_embedders import DatasetEmbedders
from episodic.providers.entities import normalise_entities
from episodic.providers.types import Embedder
from episodic.store import embedding_space
from episodic.store import entities as canon
from episodic.store.distribution import across_datasets
from episodic.store.lexical_statistics import QUOTED_LEXEME
from episodic.store.owners import episode_not_found
from episodic.store.ranking_options import (
    BAND_EXPONENT,
    BM25_B,
    BM25_K1,
    DEFAULT_RANKING,
    RankingOptions,
)
from episodic.store.ranking_sql import (
    fused_relevance_sql,
    ranked_recency_sql,
    similarity_sql,
    span_cte,
)
from episodic.store.recall_filters import entity_clauses, entity_params, named_time_params
from episodic.store.recall_index import blind_vectors, hold_language, query_tokens
from episodic.store.relevance import Abstention, on_reference_scale_sql
from episodic.store.relevance_thresholds import (
    calibrated_sql,
    match_sql,
    relevant_sql,
    threshold_params,
)
from episodic.store.shards import read_every_shard
from episodic.store.sql import NOW
from episodic.store.vault import Vault, open_row

__all__ = [
    "BUILT_IN_TYPES",
    "EVENT_TYPE_PATTERN",
    "EventFilters",
    "NewEvent",
    "RankedEvents",
    "actor_token",
    "delete_event",
    "embed_pending",
    "erase_dataset_events",
    "erase_thread_events",
    "event_document",
    "get_event",
    "list_for_export",
    "list_page",
    "purge_expired",
    "rank_events",
    "record_event",
]

#: The types seed 002 names; any other lowercase name is a custom type.
BUILT_IN_TYPES = ("decision", "tool_call", "feedback", "milestone")
EVENT_TYPE_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,63}")


def check_event_type_form(value: str) -> str:
    """``value`` if an event can be recorded with it (:data:`EVENT_TYPE_PATTERN`), else
    INVALID_ARGUMENT saying the rule: RecordEvent's check, and Recall's of its filter (one
    no event could have matched nothing, without a word)."""
    if EVENT_TYPE_PATTERN.fullmatch(value) is None:
        raise InvalidArgument(
            f"event_type {value[:80]!r} is not valid: lowercase letters, digits and "
            "underscores, starting with a letter, at most 64 characters (e.g. decision, "
            "tool_call, price_change)",
            field="event_type",
        )
    return value


@dataclass(frozen=True)
class NewEvent:
    """An event as checked by the write path (entities already normalised)."""

    dataset: str
    actor: str
    event_type: str
    summary: str
    entities: tuple[str, ...]
    occurred_at: datetime | None  # None: the time it is stored
    thread_id: uuid.UUID | None = None
    idempotency_key: str | None = None
    source: str = "agent"  # or "classifier"
    source_sequence: int | None = None  # the classified turn


@dataclass(frozen=True)
class EventFilters:
    """Which events of a dataset are candidates (RecallFilters' meaning, plus the actor)."""

    since: datetime | None = None
    until: datetime | None = None
    as_of: datetime | None = None
    thread_ids: Sequence[uuid.UUID] = ()
    entities: Sequence[str] = ()
    #: The entities resolved by the canon (store/entities.py), as in RecallFilters.
    entity_groups: Sequence[Sequence[str]] | None = None
    event_type: str | None = None
    actor: str | None = None
    #: RecallFilters.named_time (recency measured from it).
    named_time: tuple[datetime, datetime] | None = None


def actor_token(key: DatasetKey, actor: str) -> str:
    """The actor as the filter compares it: case-insensitive, blind for a sealed dataset."""
    return key.token("actor:" + actor.strip().casefold())


def event_document(event: NewEvent | dict[str, Any]) -> str:
    """What an event is found by: its summary, type, actor and entities (also embedded)."""
    get = event.get if isinstance(event, dict) else lambda k: getattr(event, k)
    entities = " ".join(e.replace(":", " ") for e in get("entities") or ())
    kind = str(get("event_type")).replace("_", " ")
    return f"{get('summary')}\n{kind} by {get('actor')}. {entities}".strip()


def _event_as_episode(dataset: str) -> str:
    """Columns of an event shaped as an episode row (convert.episode reads them), sealed.
    ``dataset`` is the statement's SQL for the dataset (``:d``): the thread label's lookup
    names it as a constant, so the planner prunes it to that dataset's partition."""
    return f"""
    ev.event_id AS episode_id, ev.thread_id, ev.dataset, 'completed' AS status,
    'skipped' AS semantic_status, ev.summary, NULL::jsonb AS key_learnings, ev.entities,
    ev.event_type, ev.actor,
    CASE WHEN ev.source_sequence IS NULL THEN 0 ELSE 1 END AS message_count,
    coalesce(ev.source_sequence, 0) AS start_sequence,
    coalesce(ev.source_sequence, 0) AS end_sequence,
    ev.occurred_at AS started_at, ev.occurred_at AS ended_at, NULL::text AS trigger,
    0 AS retry_count, NULL::text AS error, ev.created_at, ev.created_at AS updated_at,
    false AS chunks_pending,
    (SELECT t.label FROM threads t WHERE t.dataset = {dataset} AND t.thread_id = ev.thread_id
       AND t.dataset = ev.dataset) AS thread_label,
    'event' AS kind, ev.source AS event_source
"""


def _same(event: NewEvent, stored: dict[str, Any]) -> bool:
    """A retry must send the same event; without occurred_at the stored time stands."""
    return (
        event.actor == stored["actor"]
        and event.event_type == stored["event_type"]
        and event.summary == stored["summary"]
        and list(event.entities) == list(stored["entities"] or [])
        and event.thread_id == stored["thread_id"]
        and (event.occurred_at is None or event.occurred_at == stored["started_at"])
    )


def _select_one(
    conn: Connection,
    dataset: str,
    where: str,
    params: dict[str, Any],
    missing: NotFound | None = None,
) -> RowMapping:
    row = (
        conn.execute(
            text(
                f"SELECT {_event_as_episode(':d')} FROM events ev WHERE ev.dataset = :d AND {where}"
            ),
            {"d": dataset, **params},
        )
        .mappings()
        .first()
    )
    if row is None:  # callers of record_event select what they just saw
        raise missing or NotFound("event not found")
    return row


def get_event(conn: Connection, dataset: str, event_id: uuid.UUID) -> RowMapping:
    """One event of ``dataset`` shaped as an episode row (sealed), for GetEpisode;
    NOT_FOUND (as for a missing episode) when it is gone since its id was routed."""
    return _select_one(
        conn, dataset, "ev.event_id = :id", {"id": event_id}, episode_not_found(event_id)
    )


def delete_event(conn: Connection, vault: Vault, dataset: str, event_id: uuid.UUID) -> RowMapping:
    """Erases one event of ``dataset`` — events have no status to archive: a wrong or
    unwanted one is removed outright, as its thread's erasure would remove it — and
    returns it as it was, shaped as an episode row (sealed). The dataset row is
    share-locked as by every writer (:meth:`Vault.for_write`: DatasetErasing once its
    erasure started). One statement deletes and returns it, so of two racing deletes (or a
    delete and the thread's erasure) only one finds it: the other is NOT_FOUND. The names
    only it mentioned leave the entity canon with it, as a thread's do when the thread is
    erased (:func:`~episodic.store.entities.forget_unmentioned`)."""
    vault.for_write(conn, dataset)
    row = (
        conn.execute(
            text(
                "WITH ev AS (DELETE FROM events WHERE dataset = :d AND event_id = :id "
                f"RETURNING *) SELECT {_event_as_episode(':d')} FROM ev"
            ),
            {"d": dataset, "id": event_id},
        )
        .mappings()
        .first()
    )
    if row is None:
        raise episode_not_found(event_id)
    canon.forget_unmentioned(conn, dataset)
    return row


def record_event(conn: Connection, vault: Vault, event: NewEvent) -> tuple[dict[str, Any], bool]:
    """Stores ``event`` in the caller's transaction; returns it (opened, shaped as an
    episode row) and whether this call stored it (False: its idempotency key, or for the
    classifier its turn, was stored before).

    The dataset row is share-locked (:meth:`Vault.for_write`: no erasure starts meanwhile)
    and so is the thread, if any (an erasure of the thread waits, then deletes the event
    with it); before them, the dataset's language (:func:`hold_language`): the event is
    stemmed here, so a language switch re-stems it or runs after it, never beside it.
    ALREADY_EXISTS when the idempotency key names a different event."""
    hold_language(conn, event.dataset, exclusive=False)
    key = vault.for_write(conn, event.dataset)
    if event.thread_id is not None:
        owned = conn.execute(
            text("SELECT 1 FROM threads WHERE dataset = :d AND thread_id = :t FOR SHARE"),
            {"d": event.dataset, "t": event.thread_id},
        ).first()
        if owned is None:  # missing, or another dataset's: the same answer
            raise NotFound(
                f"thread {event.thread_id} does not exist in dataset {event.dataset!r}",
                field="thread_id",
                thread_id=str(event.thread_id),
            )
    entities = normalise_entities(event.entities)
    [(document, length)] = blind_vectors(conn, key, [(event_document(event), "")])
    new_id = uuid.uuid4()
    inserted = conn.execute(
        text(
            """
            INSERT INTO events (dataset, event_id, source, thread_id, source_sequence,
                event_type, actor, actor_token, summary, entities, entity_tokens, occurred_at,
                idempotency_key, search_vector, search_length)
            VALUES (:d, :id, :source, :t, :seq, :type, :actor, :actor_token, :summary,
                :entities, CAST(:tokens AS text[]), coalesce(CAST(:at AS timestamptz), now()),
                :ikey, CAST(:tsv AS tsvector), :n)
            ON CONFLICT DO NOTHING
            RETURNING event_id
            """
        ),
        {
            "d": event.dataset,
            "id": new_id,
            "source": event.source,
            "t": event.thread_id,
            "seq": event.source_sequence,
            "type": event.event_type,
            "actor": key.seal(event.actor, "events.actor"),
            "actor_token": actor_token(key, event.actor),
            "summary": key.seal(event.summary, "events.summary"),
            "entities": seal_json(key, entities, "events.entities"),
            "tokens": sorted({key.token(e) for e in entities}),
            "at": event.occurred_at,
            "ikey": event.idempotency_key,
            "tsv": document,
            "n": length,
        },
    ).scalar()
    if inserted is not None:
        # Its names join the dataset's entity canon, so an entity filter that resolves
        # "atlas" to every alias finds the event as it finds episodes.
        canon.record_mentions(conn, key, entities)
        row = _select_one(conn, event.dataset, "ev.event_id = :id", {"id": new_id})
        return open_row(key, row, "events"), True
    # A conflict: the same idempotency key, or (classifier) the same turn.
    params: dict[str, Any]
    if event.source == "classifier":
        where, params = (
            "ev.source = 'classifier' AND ev.thread_id = :t AND ev.source_sequence = :seq",
            {"t": event.thread_id, "seq": event.source_sequence},
        )
    else:
        where, params = "ev.idempotency_key = :k", {"k": event.idempotency_key}
    stored = open_row(key, _select_one(conn, event.dataset, where, params), "events")
    if event.source == "agent" and not _same(
        NewEvent(**{**event.__dict__, "entities": tuple(entities)}), stored
    ):
        raise AlreadyExists(
            f"idempotency key {event.idempotency_key!r} was already used for event "
            f"{stored['episode_id']} of dataset {event.dataset!r} with different content; a "
            "retry must resend the same event, a new event needs a new key",
            field="idempotency_key",
            reason="IDEMPOTENCY_KEY_REUSED",
            idempotency_key=str(event.idempotency_key),
            event_id=str(stored["episode_id"]),
        )
    return stored, False


# ---- recall --------------------------------------------------------------------------------

_CANDIDATES = (
    """
    SELECT ev.event_id, ev.occurred_at, ev.embedding IS NULL AS unembedded, {cosine} AS cos,
           coalesce(ev.search_vector, ''::tsvector) AS tsv,
           greatest(coalesce(ev.search_length, 1), 1)::float8 AS dl
    FROM events ev
    WHERE ev.dataset = :dataset
      AND (CAST(:as_of AS timestamptz) IS NULL OR ev.occurred_at <= CAST(:as_of AS timestamptz))
      AND (CAST(:since AS timestamptz) IS NULL OR ev.occurred_at >= CAST(:since AS timestamptz))
      AND (CAST(:until AS timestamptz) IS NULL OR ev.occurred_at <= CAST(:until AS timestamptz))
      AND (CAST(:thread_ids AS uuid[]) IS NULL OR ev.thread_id = ANY(CAST(:thread_ids AS uuid[])))
    """
    + entity_clauses("ev")
    + """
      AND (CAST(:event_type AS text) IS NULL OR ev.event_type = CAST(:event_type AS text))
      AND (CAST(:actor AS text) IS NULL OR ev.actor_token = CAST(:actor AS text))"""
)


def _candidates(with_vector: bool) -> str:
    """The request's events (:data:`_CANDIDATES`), each with its vector's cosine with the
    query (``cos``; NULL without a query vector or before the Summariser embedded it) in
    place of the vector: vectors are stored inline (migration 0024), and a dataset's
    events' vectors in the materialised ``c`` would overflow ``work_mem`` beyond ~2,500
    events and go to a temporary file."""
    cosine = "1.0 - (ev.embedding <=> CAST(:qvec AS vector))" if with_vector else "NULL::float8"
    return _CANDIDATES.replace("{cosine}", cosine)


@lru_cache(maxsize=8)
def _rank_sql(
    with_query: bool, with_vector: bool, options: RankingOptions = DEFAULT_RANKING
) -> str:
    # Every intermediate result is MATERIALIZED and the top rows are cut before the join
    # back to ``events``: the planner cannot estimate CTE sizes and otherwise re-runs the
    # window aggregates once per candidate.
    if not with_query:
        scored = f"""
        scored AS (
            SELECT c.event_id, c.occurred_at, 0.0::float8 AS similarity, 0.0::float8 AS lexical,
                   0.0::float8 AS semantic,
                   ({ranked_recency_sql("c.occurred_at", options)})::float8 AS recency,
                   0.0::float8 AS absolute_relevance, NULL::float8 AS request_match
            FROM c
        ),"""
    else:
        cos = "coalesce(c.cos, 0.0)" if with_vector else "0.0"
        # the episodes' fusion (an event is one passage: its coverage is the passage's)
        similarity = similarity_sql(
            options,
            {
                "lexical": "n.lex_rel",
                "semantic": "n.sem_rel",
                "cosine": on_reference_scale_sql("n.sem", options.cosine_scale),
                "coverage": "n.coverage",
                "passage_coverage": "n.coverage",
            },
        )
        if with_vector and options.fusion == "score":  # unembedded: ranked on its words alone
            similarity = (
                f"CASE WHEN n.unembedded THEN power(least(1.0, n.lex_rel), "
                f"{BAND_EXPONENT}) ELSE {similarity} END"
            )
        recency = ranked_recency_sql("n.occurred_at", options)

        def scaled(cosine: str) -> str:  # on MiniLM's scale, as the episodes' (the same map)
            return on_reference_scale_sql(cosine, options.cosine_scale)

        # Recall's calibrated relevance (store/relevance.py): an event is one passage, so its
        # document coverage is its passage coverage too; its context is each signal's best
        # over the request's events.
        best = ("max(n.sem) OVER ()", "max(n.coverage) OVER ()", "max(n.coverage) OVER ()")
        calibrated = calibrated_sql(("n.sem", "n.coverage", "n.coverage"), best, options)
        # and the request's match over its events, as the episodes' over theirs
        match = match_sql(best, options)
        # the episodes' coverage (RankingOptions.lexical_coverage): scaled by the largest
        # share of the query's weight (idf) an event holds
        query_idf, share = "", ""
        if options.lexical_coverage:
            query_idf = """query_idf AS MATERIALIZED (
            SELECT coalesce(sum(ln(1.0 + (s.n - coalesce(f.df, 0.0) + 0.5)
                                   / (coalesce(f.df, 0.0) + 0.5))), 0.0) AS score
            FROM q LEFT JOIN df f ON f.lexeme = q.lexeme CROSS JOIN stats s
        ),
        """
            share = (
                " * least(1.0, coalesce(max(r.matched_idf) OVER () "
                "/ nullif((SELECT score FROM query_idf), 0.0), 1.0))"
            )
        scored = f"""
        q AS (SELECT DISTINCT lexeme FROM unnest(CAST(:lexemes AS text[])) AS lexeme),
        qq AS (SELECT string_agg({QUOTED_LEXEME}, ' | ')::tsquery AS tq,
                      array_agg(lexeme) AS lexemes FROM q),
        stats AS MATERIALIZED (
            SELECT count(*)::float8 AS n, greatest(avg(dl), 1.0) AS avgdl FROM c
        ),
        terms AS MATERIALIZED (
            SELECT c.event_id, c.dl, u.lexeme,
                   coalesce(array_length(u.positions, 1), 1)::float8 AS tf
            FROM c CROSS JOIN LATERAL unnest(
                ts_filter(setweight(c.tsv, 'B', (SELECT lexemes FROM qq)), '{{b}}')) AS u
            WHERE c.tsv @@ (SELECT tq FROM qq)
        ),
        df AS MATERIALIZED (SELECT lexeme, count(*)::float8 AS df FROM terms GROUP BY lexeme),
        bm25 AS MATERIALIZED (
            SELECT t.event_id,
                   sum(ln(1.0 + (s.n - df.df + 0.5) / (df.df + 0.5)) * t.tf * ({BM25_K1} + 1.0)
                       / (t.tf + {BM25_K1} * (1.0 - {BM25_B} + {BM25_B} * t.dl / s.avgdl)))
                       AS score,
                   count(*)::float8 AS matched,
                   sum(ln(1.0 + (s.n - df.df + 0.5) / (df.df + 0.5))) AS matched_idf
            FROM terms t JOIN df ON df.lexeme = t.lexeme CROSS JOIN stats s
            GROUP BY t.event_id
        ),
        {query_idf}raw AS MATERIALIZED (
            SELECT c.event_id, c.occurred_at, c.unembedded,
                   coalesce(b.score, 0.0) AS lex, coalesce(b.matched_idf, 0.0) AS matched_idf,
                   greatest({cos}, 0.0) AS sem,
                   coalesce(b.matched, 0.0) / greatest((SELECT count(*) FROM q), 1)::float8
                       AS coverage
            FROM c LEFT JOIN bm25 b ON b.event_id = c.event_id
        ),
        normed AS MATERIALIZED (
            SELECT r.*,
                   coalesce(r.lex / nullif(max(r.lex) OVER (), 0.0), 0.0){share} AS lex_rel,
                   coalesce({scaled("r.sem")} / nullif({scaled("max(r.sem) OVER ()")}, 0.0),
                            0.0) AS sem_rel
            FROM raw r
        ),
        scored AS (
            SELECT n.event_id, n.occurred_at,
                   ({similarity})::float8 AS similarity,
                   n.lex_rel::float8 AS lexical, n.sem_rel::float8 AS semantic,
                   ({recency})::float8 AS recency,
                   {calibrated} AS absolute_relevance,
                   {match} AS request_match
            FROM normed n
        ),"""
    # min_relevance and min_match apply only with a query (without one nothing is
    # matched), as for episodes (recall_queries.rank): those they leave out come after
    # every event they keep, only to fill the limit, and the caller drops them, so an
    # answer whose every event was left out still knows its match and that it abstained.
    passes = f"coalesce({relevant_sql('s.occurred_at', options)}, false)" if with_query else "true"
    span = span_cte("c", "occurred_at") if options.recency_span else ""
    return f"""
        WITH c AS MATERIALIZED ({_candidates(with_vector)}),{span}{scored}
        top AS MATERIALIZED (
            SELECT s.*, {fused_relevance_sql(options, "s.similarity", "s.recency")}
                       AS relevance,
                   {passes} AS passes
            FROM scored s
            ORDER BY passes DESC, relevance DESC, s.occurred_at DESC, s.event_id DESC
            LIMIT :limit
        )
        SELECT {_event_as_episode(":dataset")}, t.similarity, t.lexical, t.semantic, t.recency,
               t.relevance, t.absolute_relevance, t.request_match, t.passes
        FROM top t JOIN events ev ON ev.dataset = :dataset AND ev.event_id = t.event_id
        ORDER BY t.passes DESC, t.relevance DESC, t.occurred_at DESC, t.event_id DESC
    """


def rank_events(
    conn: Connection,
    *,
    key: DatasetKey,
    filters: EventFilters,
    query: str | None,
    query_vector: np.ndarray | None,
    similarity_weight: float,
    recency_weight: float,
    limit: int,
    min_relevance: float | None = None,
    min_match: float | None = None,
    abstention: Abstention | None = None,
    lexemes: list[str] | None = None,
    options: RankingOptions = DEFAULT_RANKING,
) -> RankedEvents:
    """The top ``limit`` events of ``key``'s dataset by relevance, best first, opened and
    shaped as episode rows (with ``kind`` 'event', ``similarity``, ``lexical``,
    ``semantic``, ``recency``, ``relevance`` and the calibrated ``absolute_relevance``),
    by the episodes' formula (module docstring); with a query, events whose calibrated
    relevance is below ``min_relevance`` are left out, and every event when the request's
    match over its events is below ``min_match`` (``abstention``: as for episodes).
    ``lexemes``: the query's tokens when
    the caller already has them (the episodes' ranking sent them), saving a round trip."""
    with_query = bool(query and query.strip()) and similarity_weight > 0
    with_vector = with_query and query_vector is not None
    params: dict[str, Any] = {
        "dataset": key.dataset,
        "as_of": filters.as_of,
        "since": filters.since,
        "until": filters.until,
        "thread_ids": list(filters.thread_ids) or None,
        **entity_params(key, filters.entities, filters.entity_groups),
        "event_type": filters.event_type,
        "actor": actor_token(key, filters.actor) if filters.actor else None,
        **named_time_params(filters.named_time),
        "ws": float(similarity_weight),
        "wr": float(recency_weight),
        "limit": limit,
        **threshold_params(min_relevance, min_match, abstention, options),
    }
    if with_query:
        assert query is not None
        params["lexemes"] = lexemes if lexemes is not None else query_tokens(conn, key, query)
        if with_vector:
            params["qvec"] = np.asarray(query_vector, dtype=np.float32)
    rows = conn.execute(_rank_statement(with_query, with_vector, options), params).mappings().all()
    kept = [open_row(key, r, "events") for r in rows if r["passes"]]
    return RankedEvents(
        kept,
        match=float(rows[0]["request_match"]) if with_query and rows else None,
        withheld=bool(rows) and not kept,
    )


@dataclass(frozen=True)
class RankedEvents:
    """What :func:`rank_events` answered."""

    #: The events the thresholds keep, opened, best first.
    rows: list[dict[str, Any]]
    #: The request's match over its events (as ``recall_queries.Ranking.match`` over
    #: episodes): None without a query or without an event to rank.
    match: float | None = None
    #: Whether the thresholds left out every event there was (there was at least one).
    withheld: bool = False


@lru_cache(maxsize=8)
def _rank_statement(
    with_query: bool, with_vector: bool, options: RankingOptions = DEFAULT_RANKING
) -> TextClause:
    return text(_rank_sql(with_query, with_vector, options))  # parsed once, not per call


# ---- embedding (the Summariser) -------------------------------------------------------------


def embed_pending(
    engine: Engine, vault: Vault, embedders: DatasetEmbedders | Embedder, *, limit: int = 64
) -> int:
    """Gives up to ``limit`` events without a vector their embedding (of
    :func:`event_document`), each by its dataset's model (``embedders``; an Embedder alone:
    every dataset in it); returns how many. The model runs outside any transaction; the
    write only fills a still-empty vector, so two workers never fight, and only while the
    dataset's model is still the one that embedded them (store/embedding_space.py)."""
    if not isinstance(embedders, DatasetEmbedders):
        embedders = DatasetEmbedders(embedders)
    with engine.connect() as conn:
        datasets = read_every_shard(
            conn,
            across_datasets("the Summariser finds the datasets with events to embed")
            + "SELECT DISTINCT d.dataset FROM datasets d WHERE d.erasing_since IS NULL "
            "AND EXISTS (SELECT 1 FROM events ev WHERE ev.dataset = d.dataset "
            "AND ev.embedding IS NULL)",
        )
        todo: dict[tuple[str, str | None], list[tuple[uuid.UUID, str]]] = {}
        taken = 0
        for dataset in datasets:
            rows = (
                conn.execute(
                    text(
                        "SELECT ev.event_id, ev.dataset, ev.summary, ev.actor, ev.entities, "
                        "ev.event_type FROM events ev WHERE ev.dataset = :d "
                        "AND ev.embedding IS NULL ORDER BY ev.created_at LIMIT :n"
                    ),
                    {"d": dataset, "n": limit - taken},
                )
                .mappings()
                .all()
            )
            model = embedding_space.dataset_model(conn, dataset)
            for row in vault.open_rows(conn, dataset, list(rows), "events"):
                todo.setdefault((dataset, model), []).append((row["event_id"], event_document(row)))
                taken += 1
            if taken >= limit:
                break
    done = 0
    for (dataset, model), events in todo.items():
        vectors = embedders.get(model).embed([document for _, document in events])
        with engine.begin() as conn:
            if not hold_language(conn, dataset, exclusive=False, wait=False):
                continue  # its language (and maybe its model) is switching: next pass
            if embedding_space.dataset_model(conn, dataset) != model:
                continue  # re-embedded in another model meanwhile: next pass
            for (event_id, _), vector in zip(events, vectors, strict=True):
                done += conn.execute(
                    text(
                        "UPDATE events SET embedding = :v WHERE dataset = :d "
                        "AND event_id = :id AND embedding IS NULL"
                    ),
                    {"v": np.asarray(vector, dtype=np.float32), "d": dataset, "id": event_id},
                ).rowcount
    return done


# ---- erasure, retention, export -------------------------------------------------------------


def erase_thread_events(conn: Connection, dataset: str, thread_id: uuid.UUID) -> list[str]:
    """Deletes the events of a thread (in the thread's erasing transaction); returns their
    ids for the receipt."""
    return [
        str(i)
        for i in conn.execute(
            text("DELETE FROM events WHERE dataset = :d AND thread_id = :t RETURNING event_id"),
            {"d": dataset, "t": thread_id},
        ).scalars()
    ]


def erase_dataset_events(conn: Connection, dataset: str, limit: int | None) -> list[str]:
    """Deletes (up to ``limit`` of) a dataset's events; returns their ids."""
    where = "dataset = :d"
    if limit is not None:
        where += " AND event_id IN (SELECT event_id FROM events WHERE dataset = :d LIMIT :n)"
    return [
        str(i)
        for i in conn.execute(
            text(f"DELETE FROM events WHERE {where} RETURNING event_id"),
            {"d": dataset, "n": limit},
        ).scalars()
    ]


def purge_expired(engine: Engine, default_days: int | None, now: datetime | None) -> int:
    """Retention of events without a thread (a thread's events go with the thread): those
    that occurred longer ago than their dataset's retention; returns how many."""
    with engine.connect() as conn:
        policies = conn.execute(
            text(
                across_datasets("the lifecycle sweep reads every dataset's retention policy")
                + "SELECT dataset, coalesce(retention_days, CAST(:default AS integer)) AS days "
                "FROM datasets WHERE erasing_since IS NULL "
                "AND coalesce(retention_days, CAST(:default AS integer)) IS NOT NULL"
            ),
            {"default": default_days},
        ).all()
    purged = 0
    for dataset, days in policies:
        with engine.begin() as conn:
            gone = conn.execute(
                text(
                    "DELETE FROM events WHERE dataset = :d AND thread_id IS NULL "
                    f"AND occurred_at < {NOW} - make_interval(days => :days)"
                ),
                {"d": dataset, "days": days, "now": now},
            ).rowcount
            if gone:  # names only the purged events used go with them
                canon.forget_unmentioned(conn, dataset)
            purged += gone
    return purged


def list_page(
    conn: Connection,
    vault: Vault,
    dataset: str,
    *,
    thread_id: uuid.UUID | None,
    before: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> tuple[list[dict[str, Any]], bool]:
    """A dataset's events newest first by (occurred_at, id) — the order ListEpisodes pages
    episodes in (ended_at, id) — keyset-paged, opened; the bool says whether more follow."""
    rows = (
        conn.execute(
            text(
                f"SELECT {_event_as_episode(':d')} FROM events ev WHERE ev.dataset = :d "
                "AND (CAST(:thread AS uuid) IS NULL OR ev.thread_id = CAST(:thread AS uuid)) "
                "AND (CAST(:at AS timestamptz) IS NULL OR (ev.occurred_at, ev.event_id) < "
                "     (CAST(:at AS timestamptz), CAST(:id AS uuid))) "
                "ORDER BY ev.occurred_at DESC, ev.event_id DESC LIMIT :limit"
            ),
            {
                "d": dataset,
                "thread": thread_id,
                "at": before[0] if before else None,
                "id": before[1] if before else None,
                "limit": limit + 1,
            },
        )
        .mappings()
        .all()
    )
    return vault.open_rows(conn, dataset, list(rows[:limit]), "events"), len(rows) > limit


def list_for_export(conn: Connection, vault: Vault, dataset: str) -> list[dict[str, Any]]:
    """A dataset's events, oldest first, opened (for ``episodic export``)."""
    rows = (
        conn.execute(
            text(
                f"SELECT {_event_as_episode(':d')}, ev.idempotency_key FROM events ev "
                "WHERE ev.dataset = :d ORDER BY ev.occurred_at, ev.event_id"
            ),
            {"d": dataset},
        )
        .mappings()
        .all()
    )
    return vault.open_rows(conn, dataset, list(rows), "events")
