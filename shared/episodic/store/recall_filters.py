"""Which episodes a recall ranks: the request's filters (:class:`RecallFilters`), their
statement parameters, and :data:`CANDIDATES`, the SQL that applies them to a dataset's
completed episodes — the candidates every ranking statement (exact or approximate) and
the dataset's statistics read. Events share the entity filter and the named time's
parameters (store/events.py).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from episodic.crypto import DatasetKey

__all__ = [
    "CANDIDATES",
    "RecallFilters",
    "entity_clauses",
    "entity_params",
    "filter_params",
    "named_time_params",
    "unfiltered_params",
]


@dataclass(frozen=True)
class RecallFilters:
    """Which completed episodes of a dataset are candidates. Empty means no filter."""

    since: datetime | None = None  # the episode's span ends at or after this
    until: datetime | None = None  # the episode's span starts at or before this
    thread_ids: Sequence[uuid.UUID] = field(default_factory=tuple)
    entities: Sequence[str] = field(default_factory=tuple)  # all of these (normalised)
    #: The entities resolved by the canon (store/entities.py): per entity, the blind tokens
    #: of all its aliases, any of which matches. None: match ``entities`` spelled exactly.
    entity_groups: Sequence[Sequence[str]] | None = None
    event_type: str | None = None
    as_of: datetime | None = None  # nothing that ended after it; recency measured from it
    #: The window [start, end) of a time the query names as when something happened (not
    #: applied as a filter): recency is measured from it under
    #: RankingOptions.named_time_recency.
    named_time: tuple[datetime, datetime] | None = None

    def narrows(self) -> bool:
        """Whether the filters leave out any of the dataset's completed episodes (the named
        time does not: it only measures recency)."""
        return bool(
            self.since is not None
            or self.until is not None
            or self.thread_ids
            or self.entities
            or self.entity_groups
            or self.event_type is not None
            or self.as_of is not None
        )


def filter_params(key: DatasetKey, filters: RecallFilters) -> dict[str, object]:
    """The filter parameters of a recall of ``key``'s dataset under ``filters``."""
    return {"dataset": key.dataset, **_filter_values(key, filters)}


def unfiltered_params() -> dict[str, object]:
    """The filter parameters of a recall without filters, ``dataset`` aside: what the
    benches that send Recall's bare SQL bind (bench/speed/recall_speed.py, recall_scale.py,
    partition_cost.py), from the one place a new filter's parameters are added."""
    return _filter_values(None, RecallFilters())


def _filter_values(key: DatasetKey | None, filters: RecallFilters) -> dict[str, object]:
    """``key``: the dataset's, to blind the entities (None: no entity filter)."""
    return {
        "since": filters.since,
        "until": filters.until,
        "thread_ids": list(filters.thread_ids) or None,
        **entity_params(key, filters.entities, filters.entity_groups),
        "event_type": filters.event_type,
        "as_of": filters.as_of,
        **named_time_params(filters.named_time),
    }


def named_time_params(named_time: tuple[datetime, datetime] | None) -> dict[str, object]:
    """The parameters of the named time (None: not named) of
    :func:`~episodic.store.ranking_sql.ranked_recency_sql`."""
    start, end = named_time if named_time is not None else (None, None)
    return {"named_start": start, "named_end": end}


def entity_params(
    key: DatasetKey | None,
    entities: Sequence[str],
    entity_groups: Sequence[Sequence[str]] | None,
) -> dict[str, object]:
    """Stored entities are blind tokens (``entity_tokens`` of episodes and events). Entities
    with one spelling are all required (``@>``, the GIN index); each with several (resolved
    by the canon) needs any one of them. Parameters of ``entity_clauses``. ``key`` blinds
    ``entities`` (None only without them)."""
    groups = entity_groups
    if groups is None:
        if entities and key is None:
            raise ValueError("entities need the dataset's key to be blinded")
        groups = [[key.token(e)] for e in entities] if key is not None else []
    single = sorted({g[0] for g in groups if len(g) == 1})
    several = [sorted(g) for g in groups if len(g) > 1]
    return {
        "entities": single or None,
        "entity_any": several[0] if several else None,
        "entity_groups": json.dumps(several[1:]) if len(several) > 1 else None,
    }


def entity_clauses(alias: str) -> str:
    """The entity filter on ``alias.entity_tokens`` (parameters from ``entity_params``)."""
    return f"""
      AND (CAST(:entities AS text[]) IS NULL OR {alias}.entity_tokens @> CAST(:entities AS text[]))
      AND (CAST(:entity_any AS text[]) IS NULL OR {alias}.entity_tokens && CAST(:entity_any AS text[]))
      AND (CAST(:entity_groups AS jsonb) IS NULL OR NOT EXISTS (
            SELECT 1 FROM jsonb_array_elements(CAST(:entity_groups AS jsonb)) g
            WHERE NOT {alias}.entity_tokens && ARRAY(SELECT jsonb_array_elements_text(g))))"""


#: The dataset's completed episodes that pass the filters (``e``): the candidates.
CANDIDATES = (
    """
    SELECT e.episode_id, e.thread_id, e.end_sequence, e.ended_at, e.embedding,
           e.search_vector, e.search_length
    FROM episodes e
    WHERE e.dataset = :dataset AND e.status = 'completed'
      AND (CAST(:as_of AS timestamptz) IS NULL OR e.ended_at <= CAST(:as_of AS timestamptz))
      AND (CAST(:since AS timestamptz) IS NULL OR e.ended_at >= CAST(:since AS timestamptz))
      AND (CAST(:until AS timestamptz) IS NULL OR e.started_at <= CAST(:until AS timestamptz))
      AND (CAST(:thread_ids AS uuid[]) IS NULL OR e.thread_id = ANY(CAST(:thread_ids AS uuid[])))
    """
    + entity_clauses("e")
    + """
      AND (CAST(:event_type AS text) IS NULL OR e.event_type = CAST(:event_type AS text))"""
)
