"""Events in Recall: ranked by the episodes' formula (:func:`episodic.store.events.rank_events`)
and merged into a recall's candidates by relevance, so every path of the recall — plain
ranking, a time window, "the last 3 decisions", a session ordinal — sees events beside
summaries without knowing about them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from episodic.crypto import DatasetKey
from episodic.store import events as event_store
from episodic.store.events import EventFilters, RankedEvents, rank_events
from episodic.store.recall_queries import DEFAULT_RANKING, Ranking, RankingOptions, RecallFilters
from episodic.store.relevance import Abstention
from episodic.store.vault import Vault

MAX_ACTOR_CHARS = 128


@dataclass(frozen=True)
class EventScope:
    """Which events join a recall: all (that pass the request's filters), or only those of
    one actor — then summaries, which carry no recorded actor, are left out."""

    actor: str | None = None


def event_filters(filters: RecallFilters, scope: EventScope) -> EventFilters:
    """The recall's filters as they apply to events (an event's span is its moment)."""
    return EventFilters(
        since=filters.since,
        until=filters.until,
        as_of=filters.as_of,
        thread_ids=tuple(filters.thread_ids),
        entities=tuple(filters.entities),
        entity_groups=filters.entity_groups,
        event_type=filters.event_type,
        actor=scope.actor,
        named_time=filters.named_time,
    )


def _order(row: dict[str, Any]) -> tuple[float, float, str]:
    return (-float(row["relevance"]), -row["ended_at"].timestamp(), str(row["episode_id"]))


def merge(
    conn: Connection,
    key: DatasetKey,
    ranked: Ranking,
    scope: EventScope,
    *,
    filters: RecallFilters,
    query: str | None,
    query_vector: Any,
    similarity_weight: float,
    recency_weight: float,
    limit: int,
    min_relevance: float | None = None,
    min_match: float | None = None,
    abstention: Abstention | None = None,
    any_events: bool = True,
    lexemes: list[str] | None = None,
    options: RankingOptions = DEFAULT_RANKING,
) -> Ranking:
    """``ranked`` (its rows opened) with the dataset's events merged in: the best
    ``limit`` of both by relevance (then newest first). Events below ``min_relevance``
    (and all of them when their best match is below ``min_match``) are left out as
    episodes are; the answer's match is the better of the two, and ``withheld`` says the
    thresholds left candidates out and kept none of either kind (with ``actor``: events
    alone).
    ``any_events`` False (the dataset has none, as the episodes' statement saw) skips the
    events' statement; ``lexemes``: the query's tokens the episodes' ranking sent."""
    found = (
        rank_events(
            conn,
            key=key,
            filters=event_filters(filters, scope),
            query=query,
            query_vector=query_vector,
            similarity_weight=similarity_weight,
            recency_weight=recency_weight,
            limit=limit,
            min_relevance=min_relevance,
            min_match=min_match,
            abstention=abstention,
            lexemes=lexemes,
            options=options,
        )
        if any_events
        else RankedEvents([])
    )
    if scope.actor:  # events alone: summaries carry no recorded actor
        return replace(ranked, rows=found.rows, match=found.match, withheld=found.withheld)
    matches = [m for m in (ranked.match, found.match) if m is not None]
    return replace(
        ranked,
        rows=sorted([*ranked.rows, *found.rows], key=_order)[:limit],
        match=max(matches) if matches else None,
        # withheld: the thresholds left something out and kept nothing of either kind
        withheld=(ranked.withheld or found.withheld) and not (ranked.rows or found.rows),
    )


def with_listed_events(
    conn: Connection,
    vault: Vault,
    dataset: str,
    episodes: list[dict[str, Any]],
    more: bool,
    *,
    status: str | None,
    thread_id: uuid.UUID | None,
    before: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> tuple[list[dict[str, Any]], bool]:
    """A ListEpisodes page with the dataset's events merged in: both are ordered by
    (time, id) descending (an event's time is when it occurred), so one cursor pages
    through both. Events are always completed: a status filter other than completed
    leaves them out."""
    if status not in (None, "completed"):
        return episodes, more
    events, events_more = event_store.list_page(
        conn, vault, dataset, thread_id=thread_id, before=before, limit=limit
    )
    if not events:
        return episodes, more
    merged = sorted(
        [*episodes, *events],
        key=lambda r: (r["ended_at"], uuid.UUID(str(r["episode_id"]))),
        reverse=True,
    )
    return merged[:limit], more or events_more or len(merged) > limit
