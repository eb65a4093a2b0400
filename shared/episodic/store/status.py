"""Pipeline status: the numbers that show a stuck pipeline behind green health checks
(peers' most common complaint: background work stalls silently)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, text

from episodic.store.distribution import across_datasets


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
    pending_waiting: int = 0
    latest_retry_at: datetime | None = None
    failed_episodes: list[dict[str, Any]] = field(default_factory=list)
    threads_without_timer: int = 0
    oldest_untimed_thread_age: timedelta | None = None
    lifecycle_last_run_at: datetime | None = None
    lifecycle_last_result: dict[str, Any] = field(default_factory=dict)
    datasets_erasing: int = 0
    threads_compacted: int = 0


#: A thread with uncaptured messages and no timer this long after its last message lost its
#: notice (a live write arms its timer within a moment).
LOST_NOTICE_AFTER = timedelta(minutes=1)


def pipeline_status(conn: Connection, dataset: str | None, max_errors: int) -> PipelineStatus:
    params = {"dataset": dataset, "max_errors": max_errors}
    scope = "(CAST(:dataset AS text) IS NULL OR dataset = :dataset)"
    # Without a dataset, `episodic status` and the pipeline gauges read every dataset.
    every = (
        across_datasets("`episodic status` and the pipeline gauges without a dataset")
        if dataset is None
        else ""
    )
    now = conn.execute(text("SELECT now()")).scalar_one()
    status = PipelineStatus(observed_at=now)
    for name, count in conn.execute(
        text(every + f"SELECT status, count(*) FROM episodes WHERE {scope} GROUP BY status"), params
    ):
        status.status_counts[name] = count
    for name, count in conn.execute(
        text(
            every
            + f"SELECT semantic_status, count(*) FROM episodes WHERE {scope} GROUP BY semantic_status"
        ),
        params,
    ):
        status.semantic_status_counts[name] = count
    ages = conn.execute(
        text(
            every + "SELECT "
            f"(SELECT now() - min(next_attempt_at) FROM episodes WHERE {scope} "
            "   AND status = 'pending' AND next_attempt_at <= now()), "
            f"(SELECT now() - min(claimed_at) FROM episodes WHERE {scope} "
            "   AND status = 'processing'), "
            f"(SELECT count(*) FROM scheduled_episodes WHERE {scope} AND fire_at <= now()), "
            f"(SELECT now() - min(fire_at) FROM scheduled_episodes WHERE {scope} "
            "   AND fire_at <= now()), "
            f"(SELECT count(*) FROM scheduled_episodes WHERE {scope} AND fire_at > now()), "
            f"(SELECT count(*) FROM threads WHERE {scope} AND last_sequence > captured_sequence), "
            f"(SELECT count(*) FROM episodes WHERE {scope} "
            "   AND status = 'pending' AND next_attempt_at > now()), "
            f"(SELECT max(next_attempt_at) FROM episodes WHERE {scope} "
            "   AND status = 'pending' AND next_attempt_at > now())"
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
        status.pending_waiting,
        status.latest_retry_at,
    ) = ages
    untimed = conn.execute(
        text(
            every + "SELECT count(*), now() - min(t.last_message_at) FROM threads t "
            "WHERE (CAST(:dataset AS text) IS NULL OR t.dataset = :dataset) "
            "AND t.last_sequence > t.captured_sequence AND t.last_message_at < now() - :grace "
            "AND NOT EXISTS (SELECT 1 FROM scheduled_episodes s "
            "WHERE s.dataset = t.dataset AND s.thread_id = t.thread_id)"
        ),
        {**params, "grace": LOST_NOTICE_AFTER},
    ).one()
    status.threads_without_timer, status.oldest_untimed_thread_age = untimed[0], untimed[1]
    lease = conn.execute(
        text("SELECT last_run_at, last_result FROM leases WHERE name = 'scheduler.lifecycle'")
    ).first()
    if lease is not None:
        status.lifecycle_last_run_at = lease[0]
        status.lifecycle_last_result = dict(lease[1] or {})
    status.datasets_erasing, status.threads_compacted = conn.execute(
        text(
            every
            + f"SELECT (SELECT count(*) FROM datasets WHERE {scope} AND erasing_since IS NOT NULL), "
            f"(SELECT count(*) FROM threads WHERE {scope} AND compacted_at IS NOT NULL)"
        ),
        params,
    ).one()
    status.failed_episodes = [
        dict(row)
        for row in conn.execute(
            text(
                every
                + "SELECT episode_id, thread_id, dataset, status, retry_count, error, updated_at "
                f"FROM episodes WHERE {scope} AND status = 'failed' "
                "ORDER BY updated_at DESC LIMIT :max_errors"
            ),
            params,
        ).mappings()
    ]
    status.recent_errors = [
        dict(row)
        for row in conn.execute(
            text(
                every + "SELECT episode_id, thread_id, dataset, "
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
