"""The audit log of admin actions (table ``audit_events``): who (the key's public prefix),
when (the database clock), what, on which dataset and object. Written in the transaction
of the action itself, so an action and its record commit together. Never user content."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, RowMapping, text

__all__ = ["list_events", "record"]


def record(
    conn: Connection,
    *,
    key_prefix: str,
    action: str,
    dataset: str | None = None,
    target: str = "",
    details: Mapping[str, Any] | None = None,
) -> None:
    """Appends one event (in the caller's transaction)."""
    conn.execute(
        text(
            "INSERT INTO audit_events (key_prefix, action, dataset, target, details) "
            "VALUES (:prefix, :action, :dataset, :target, CAST(:details AS jsonb))"
        ),
        {
            "prefix": key_prefix,
            "action": action,
            "dataset": dataset,
            "target": target,
            "details": json.dumps(dict(details or {}), default=str),
        },
    )


def list_events(
    conn: Connection, *, dataset: str | None, before: int | None, limit: int
) -> tuple[list[RowMapping], bool]:
    """Events newest first, optionally of one dataset; the bool says whether more follow."""
    rows = (
        conn.execute(
            text(
                "SELECT * FROM audit_events "
                "WHERE (CAST(:dataset AS text) IS NULL OR dataset = :dataset) "
                "AND (CAST(:before AS bigint) IS NULL OR event_id < :before) "
                "ORDER BY event_id DESC LIMIT :limit"
            ),
            {"dataset": dataset, "before": before, "limit": limit + 1},
        )
        .mappings()
        .all()
    )
    return list(rows[:limit]), len(rows) > limit
