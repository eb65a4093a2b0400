"""Datasets as a whole: listing them (a dataset is listed while it has threads), and their
lifecycle policy (rows of ``datasets``, see migration 0006)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, RowMapping, text

from episodic.config import PrivacySettings
from episodic.errors import NotFound
from episodic.store.distribution import across_datasets

__all__ = ["Policy", "get_policy", "list_datasets", "own_days", "registered", "set_policy"]


@dataclass(frozen=True)
class Policy:
    dataset: str
    retention_days: int | None  # the dataset's own (None: the global default)
    compact_after_days: int | None
    effective_retention_days: int | None  # in force (None: never)
    effective_compact_after_days: int | None
    encrypted: bool
    language: str = "english"  # the text-search configuration (migration 0007)
    # whose choice it is: 'default' (detection may change it), 'detected' or 'set'
    # (migration 0015, store/languages.py)
    language_origin: str = "default"


def _policy(row: RowMapping, defaults: PrivacySettings) -> Policy:
    return Policy(
        dataset=row["dataset"],
        retention_days=row["retention_days"],
        compact_after_days=row["compact_after_days"],
        effective_retention_days=row["retention_days"] or defaults.retention_days,
        effective_compact_after_days=row["compact_after_days"] or defaults.compact_after_days,
        encrypted=row["key_id"] is not None,
        language=row["text_search_config"],
        language_origin=row["language_origin"],
    )


def registered(conn: Connection, dataset: str) -> bool:
    """Whether the dataset has its row (a dataset is registered by its first write:
    :meth:`~episodic.store.vault.Vault.for_write`). Takes no lock."""
    found = conn.execute(text("SELECT 1 FROM datasets WHERE dataset = :d"), {"d": dataset})
    return found.first() is not None


def own_days(conn: Connection, dataset: str) -> dict[str, int | None]:
    """The dataset's own ``retention_days`` and ``compact_after_days`` (None: the global
    default; both None for a dataset not registered), as :func:`set_policy` takes them."""
    row = (
        conn.execute(
            text("SELECT retention_days, compact_after_days FROM datasets WHERE dataset = :d"),
            {"d": dataset},
        )
        .mappings()
        .first()
    )
    return {
        "retention_days": row["retention_days"] if row else None,
        "compact_after_days": row["compact_after_days"] if row else None,
    }


def get_policy(conn: Connection, dataset: str, defaults: PrivacySettings) -> Policy:
    row = (
        conn.execute(
            text(
                "SELECT dataset, retention_days, compact_after_days, key_id, text_search_config, "
                "language_origin FROM datasets "
                "WHERE dataset = :d"
            ),
            {"d": dataset},
        )
        .mappings()
        .first()
    )
    if row is None:
        raise NotFound(f"dataset {dataset!r} holds nothing", dataset=dataset)
    return _policy(row, defaults)


def set_policy(
    conn: Connection,
    dataset: str,
    defaults: PrivacySettings,
    *,
    retention_days: int | None,
    compact_after_days: int | None,
) -> Policy:
    """Sets the dataset's own policy (the row must exist: Vault.for_write registers it)."""
    row = (
        conn.execute(
            text(
                "UPDATE datasets SET retention_days = :r, compact_after_days = :c, "
                "updated_at = now() WHERE dataset = :d "
                "RETURNING dataset, retention_days, compact_after_days, key_id, text_search_config, "
                "language_origin"
            ),
            {"d": dataset, "r": retention_days, "c": compact_after_days},
        )
        .mappings()
        .one()
    )
    return _policy(row, defaults)


def list_datasets(
    conn: Connection,
    *,
    prefix: str,
    before: tuple[datetime, str] | None,
    limit: int,
) -> tuple[list[RowMapping], bool]:
    """Datasets with their thread and message counts, most recently active first
    (keyset-paged on (last activity, name)); the bool says whether more follow."""
    rows = (
        conn.execute(
            text(
                across_datasets("the admin's ListDatasets reports on every dataset")
                + "SELECT * FROM ("
                "  SELECT dataset, count(*) AS thread_count, sum(last_sequence)::bigint AS message_count,"
                "         max(last_activity_at) AS last_activity_at "
                "  FROM threads WHERE starts_with(dataset, :prefix) GROUP BY dataset) d "
                "WHERE (CAST(:at AS timestamptz) IS NULL "
                "       OR (d.last_activity_at, d.dataset) < (CAST(:at AS timestamptz), :name)) "
                "ORDER BY d.last_activity_at DESC, d.dataset DESC LIMIT :limit"
            ),
            {
                "prefix": prefix,
                "at": before[0] if before else None,
                "name": before[1] if before else "",
                "limit": limit + 1,
            },
        )
        .mappings()
        .all()
    )
    return list(rows[:limit]), len(rows) > limit
