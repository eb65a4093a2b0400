"""Datasets as a whole: listing them (a dataset exists while it has threads)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, RowMapping, text

__all__ = ["list_datasets"]


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
                "SELECT * FROM ("
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
