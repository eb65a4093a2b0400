"""Pipeline status: the numbers that show a stuck pipeline behind green health checks
(peers' most common complaint: background work stalls silently)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, text


@dataclass
class PipelineStatus:
    observed_at: datetime
    status_counts: dict[str, int] = field(default_factory=dict)
    semantic_status_counts: dict[str, int] = field(default_factory=dict)
    oldest_pending_age: timedelta | None = None
    oldest_processing_age: timedelta | None = None
    timers_due: int = 0
    oldest_due_timer_age: timedelta | None = None
    timers_waiting: int = 0
    threads_uncaptured: int = 0
    recent_errors: list[dict[str, Any]] = field(default_factory=list)


def pipeline_status(conn: Connection, dataset: str | None, max_errors: int) -> PipelineStatus:
    params = {"dataset": dataset, "max_errors": max_errors}
    scope = "(CAST(:dataset AS text) IS NULL OR dataset = :dataset)"
    now = conn.execute(text("SELECT now()")).scalar_one()
    status = PipelineStatus(observed_at=now)
    for name, count in conn.execute(
        text(f"SELECT status, count(*) FROM episodes WHERE {scope} GROUP BY status"), params
    ):
        status.status_counts[name] = count
    for name, count in conn.execute(
        text(
            f"SELECT semantic_status, count(*) FROM episodes WHERE {scope} GROUP BY semantic_status"
        ),
        params,
    ):
        status.semantic_status_counts[name] = count
    ages = conn.execute(
        text(
            "SELECT "
            f"(SELECT now() - min(next_attempt_at) FROM episodes WHERE {scope} "
            "   AND status = 'pending' AND next_attempt_at <= now()), "
            f"(SELECT now() - min(claimed_at) FROM episodes WHERE {scope} "
            "   AND status = 'processing'), "
            f"(SELECT count(*) FROM scheduled_episodes WHERE {scope} AND fire_at <= now()), "
            f"(SELECT now() - min(fire_at) FROM scheduled_episodes WHERE {scope} "
            "   AND fire_at <= now()), "
            f"(SELECT count(*) FROM scheduled_episodes WHERE {scope} AND fire_at > now()), "
            f"(SELECT count(*) FROM threads WHERE {scope} AND last_sequence > captured_sequence)"
        ),
        params,
    ).one()
    (
        status.oldest_pending_age,
        status.oldest_processing_age,
        status.timers_due,
        status.oldest_due_timer_age,
        status.timers_waiting,
        status.threads_uncaptured,
    ) = ages
    status.recent_errors = [
        dict(row)
        for row in conn.execute(
            text(
                "SELECT episode_id, thread_id, dataset, "
                "CASE WHEN error IS NOT NULL THEN status ELSE 'semantic' END AS status, "
                "retry_count, coalesce(error, semantic_error) AS error, updated_at "
                f"FROM episodes WHERE {scope} "
                "AND (error IS NOT NULL OR semantic_error IS NOT NULL) "
                "ORDER BY updated_at DESC LIMIT :max_errors"
            ),
            params,
        ).mappings()
    ]
    return status
