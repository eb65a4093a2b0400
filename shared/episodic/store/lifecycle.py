"""Episode lifecycle transitions shared by the Scheduler and the Summariser.

Every function takes an open SQLAlchemy connection inside a transaction (READ COMMITTED,
the PostgreSQL default); committing is the caller's job. Every status transition is one
state-guarded ``UPDATE … WHERE <expected state> … RETURNING`` on the database clock, and the
caller learns from the returned row (or its absence) whether it won. ``now`` is the injected
clock: ``None`` means the database's ``now()``; tests and replays pass a time instead.

Windows
-------
An episode covers the messages ``start_sequence .. end_sequence`` of its thread. Opening one
(:func:`open_episode`, whatever the trigger) locks the thread row ``FOR UPDATE`` — the lock
Ingest's ``AddMessages`` takes to bump ``threads.last_sequence`` — so under that lock
``captured_sequence`` (end of the last window opened) and ``last_sequence`` are exact: the
new window is ``captured_sequence + 1 .. last_sequence`` and ``captured_sequence`` moves to
its end in the same transaction. Windows of a thread are therefore contiguous from 1 and
never overlap, whatever interleaving of triggers, writers and replicas; the exclusion
constraint ``episodes_windows_disjoint`` backs this up in the schema.

Windows are permanent. An episode that failed for good (``failed``), or was soft-deleted
(``archived``), KEEPS its window: ``captured_sequence`` is never rolled back, and the next
episode starts after it. Nothing is lost by that: summarisation reads the whole thread, so
the next episode's rolling summary still covers the failed window's messages; only that
window's key learnings and semantic extraction wait until an operator retries it
(:func:`retry_episode` re-processes exactly the same window). Re-capturing the messages in
a later window instead would make two episodes extract the same messages, which is what
windows exist to prevent.

Retries
-------
:func:`record_failure` puts a processing episode back to ``pending`` with an exponential
backoff (``backoff * 2^retry_count``, capped) until ``retry_count`` would exceed
``max_retries``; then it is ``failed`` with the error kept. :func:`reclaim_orphaned_episodes`
treats a processing claim older than the reclaim timeout as a failed attempt of a lost
worker (same bound). :func:`retry_episode` (admin) is the only way out of ``failed``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from opentelemetry import propagate
from sqlalchemy import Connection, RowMapping, text

from episodic.errors import FailedPrecondition, NotFound

# Summariser workers LISTEN here; the payload is the episode id.
EPISODES_CHANNEL = "episodic_episodes"
MAX_ERROR_CHARS = 2000
TRIGGERS = ("explicit", "new_thread", "inactivity", "backstop", "manual")
RECLAIM_ERROR = "claim expired (worker lost)"

_NOW = "coalesce(CAST(:now AS timestamptz), now())"
# Episode rows as clients see them: with the thread's label for rendering.
_EPISODE_COLUMNS = (
    "episodes.*, (SELECT label FROM threads t WHERE t.thread_id = episodes.thread_id) "
    "AS thread_label"
)


def current_trace_context() -> dict[str, str] | None:
    """The current W3C trace context (``traceparent``…) to store on a row, or None."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier or None


def notify_episodes(conn: Connection, episode_ids: list[Any]) -> None:
    """Wakes summariser workers (delivered when the caller's transaction commits)."""
    if episode_ids:
        conn.execute(
            text(f"SELECT pg_notify('{EPISODES_CHANNEL}', x) FROM unnest(CAST(:ids AS text[])) x"),
            {"ids": [str(i) for i in episode_ids]},
        )


def open_episode(
    conn: Connection,
    thread_id: uuid.UUID,
    trigger: str,
    now: datetime | None = None,
    *,
    trace_context: dict[str, str] | None = None,
) -> RowMapping | None:
    """Opens a pending episode over the thread's uncaptured messages, if it has any.

    Takes the thread's row lock (held until the caller commits), so a message committed
    before the lock is in the window and one committed after it is not — it stays
    uncaptured for the next episode. Returns the new episode row, or None when the thread
    has nothing uncaptured (or does not exist). ``trace_context`` defaults to the current
    span's context, so the summariser's span links back to the trigger.
    """
    if trigger not in TRIGGERS:
        raise ValueError(f"unknown trigger {trigger!r}")
    thread = (
        conn.execute(
            text(
                "SELECT dataset, last_sequence, captured_sequence FROM threads "
                "WHERE thread_id = :id FOR UPDATE"
            ),
            {"id": thread_id},
        )
        .mappings()
        .first()
    )
    if thread is None or thread["last_sequence"] <= thread["captured_sequence"]:
        return None
    start, end = thread["captured_sequence"] + 1, thread["last_sequence"]
    context = trace_context if trace_context is not None else current_trace_context()
    episode = (
        conn.execute(
            text(
                "INSERT INTO episodes (episode_id, thread_id, dataset, trigger, start_sequence, "
                "end_sequence, message_count, started_at, ended_at, trace_context, "
                "next_attempt_at, created_at, updated_at) "
                "SELECT :eid, :tid, :dataset, :trigger, :start, :end, :count, "
                "(SELECT created_at FROM messages WHERE thread_id = :tid AND sequence = :start), "
                "(SELECT created_at FROM messages WHERE thread_id = :tid AND sequence = :end), "
                "CAST(:trace AS jsonb), "
                # Claimable at once, whether the injected clock is ahead of or behind the
                # database's (a replayed past must not hide new work from live workers).
                f"LEAST({_NOW}, now()), {_NOW}, {_NOW} "
                f"RETURNING {_EPISODE_COLUMNS}"
            ),
            {
                "eid": uuid.uuid4(),
                "tid": thread_id,
                "dataset": thread["dataset"],
                "trigger": trigger,
                "start": start,
                "end": end,
                "count": end - start + 1,
                "trace": json.dumps(context) if context else None,
                "now": now,
            },
        )
        .mappings()
        .one()
    )
    conn.execute(
        text("UPDATE threads SET captured_sequence = :end WHERE thread_id = :tid"),
        {"end": end, "tid": thread_id},
    )
    notify_episodes(conn, [episode["episode_id"]])
    return episode


def record_failure(
    conn: Connection,
    episode_id: uuid.UUID,
    claimed_by: str,
    error: str,
    *,
    max_retries: int,
    backoff: timedelta,
    max_backoff: timedelta = timedelta(hours=1),
    jitter: float = 0.0,
    now: datetime | None = None,
) -> str | None:
    """Records a failed summarisation attempt by the worker holding the claim.

    ``retry_count`` goes up by one; past ``max_retries`` the episode is ``failed`` for good,
    otherwise ``pending`` again after ``backoff * 2^(retry_count before)`` (at most
    ``max_backoff``, stretched by up to ``jitter`` × itself at random; 0 keeps it
    deterministic). Returns the new status, or None when this worker no longer holds a
    processing claim on the episode (reclaimed, deleted or completed meanwhile).
    """
    row = conn.execute(
        text(
            "UPDATE episodes SET retry_count = retry_count + 1, "
            "status = CASE WHEN retry_count + 1 > :max THEN 'failed' ELSE 'pending' END, "
            f"next_attempt_at = {_NOW} + make_interval(secs => "
            "  LEAST(:base * power(2, retry_count), :cap) * (1 + :jitter * random())), "
            "claimed_at = NULL, claimed_by = NULL, error = :error, "
            f"updated_at = {_NOW} "
            "WHERE episode_id = :id AND status = 'processing' AND claimed_by = :me "
            "RETURNING status"
        ),
        {
            "id": episode_id,
            "me": claimed_by,
            "max": max_retries,
            "base": backoff.total_seconds(),
            "cap": max_backoff.total_seconds(),
            "jitter": jitter,
            "error": error[:MAX_ERROR_CHARS],
            "now": now,
        },
    ).first()
    if row is None:
        return None
    if row[0] == "pending":
        notify_episodes(conn, [episode_id])
    return str(row[0])


@dataclass(frozen=True)
class ReclaimResult:
    requeued: int  # processing claims returned to pending
    failed: int  # processing claims that exhausted max_retries
    semantic_requeued: int  # semantic processing claims returned to pending

    @property
    def total(self) -> int:
        return self.requeued + self.failed + self.semantic_requeued


def reclaim_orphaned_episodes(
    conn: Connection,
    *,
    older_than: timedelta,
    max_retries: int,
    now: datetime | None = None,
    limit: int = 1000,
) -> ReclaimResult:
    """Returns processing claims older than ``older_than`` to pending (their worker is
    presumed lost), or to ``failed`` once the retries are used up.

    Rows are picked with ``SKIP LOCKED`` and the ``UPDATE`` re-checks state and age, so a
    worker completing or failing the episode at the same moment wins cleanly: its own
    guarded ``UPDATE`` (status = 'processing' AND claimed_by = me) or ours matches, never
    both.
    """
    params = {"after": older_than, "max": max_retries, "now": now, "limit": limit}
    rows = conn.execute(
        text(
            "WITH stale AS ("
            "  SELECT episode_id FROM episodes "
            f"  WHERE status = 'processing' AND claimed_at < {_NOW} - :after "
            "  ORDER BY claimed_at LIMIT :limit FOR UPDATE SKIP LOCKED) "
            "UPDATE episodes e SET retry_count = e.retry_count + 1, "
            "status = CASE WHEN e.retry_count + 1 > :max THEN 'failed' ELSE 'pending' END, "
            f"error = '{RECLAIM_ERROR}', next_attempt_at = {_NOW}, "
            f"claimed_at = NULL, claimed_by = NULL, updated_at = {_NOW} "
            "FROM stale WHERE e.episode_id = stale.episode_id "
            f"AND e.status = 'processing' AND e.claimed_at < {_NOW} - :after "
            "RETURNING e.episode_id, e.status"
        ),
        params,
    ).all()
    requeued = [r[0] for r in rows if r[1] == "pending"]
    semantic = conn.execute(
        text(
            "WITH stale AS ("
            "  SELECT episode_id FROM episodes "
            "  WHERE semantic_status = 'processing' "
            f"  AND semantic_claimed_at < {_NOW} - :after "
            "  ORDER BY semantic_claimed_at LIMIT :limit FOR UPDATE SKIP LOCKED) "
            "UPDATE episodes e SET semantic_status = 'pending', "
            f"semantic_error = '{RECLAIM_ERROR}', "
            f"semantic_claimed_at = NULL, semantic_claimed_by = NULL, updated_at = {_NOW} "
            "FROM stale WHERE e.episode_id = stale.episode_id "
            "AND e.semantic_status = 'processing' "
            f"AND e.semantic_claimed_at < {_NOW} - :after "
            "RETURNING e.episode_id"
        ),
        params,
    ).all()
    notify_episodes(conn, requeued + [r[0] for r in semantic])
    return ReclaimResult(
        requeued=len(requeued), failed=len(rows) - len(requeued), semantic_requeued=len(semantic)
    )


def get_episode(conn: Connection, episode_id: uuid.UUID) -> RowMapping:
    row = (
        conn.execute(
            text(f"SELECT {_EPISODE_COLUMNS} FROM episodes WHERE episode_id = :id"),
            {"id": episode_id},
        )
        .mappings()
        .first()
    )
    if row is None:
        raise NotFound(f"episode {episode_id} does not exist", episode_id=str(episode_id))
    return row


def retry_episode(
    conn: Connection, episode_id: uuid.UUID, now: datetime | None = None
) -> RowMapping:
    """Admin retry: a ``failed`` episode goes back to ``pending`` over the same window, with
    its retry budget reset. FAILED_PRECONDITION from any other status."""
    row = (
        conn.execute(
            text(
                "UPDATE episodes SET status = 'pending', retry_count = 0, error = NULL, "
                f"next_attempt_at = LEAST({_NOW}, now()), claimed_at = NULL, "
                f"claimed_by = NULL, updated_at = {_NOW} "
                "WHERE episode_id = :id AND status = 'failed' "
                f"RETURNING {_EPISODE_COLUMNS}"
            ),
            {"id": episode_id, "now": now},
        )
        .mappings()
        .first()
    )
    if row is None:
        current = get_episode(conn, episode_id)  # NotFound when missing
        raise FailedPrecondition(
            f"episode {episode_id} is {current['status']}; only a failed episode can be retried",
            episode_id=str(episode_id),
            status=current["status"],
        )
    notify_episodes(conn, [episode_id])
    return row


def delete_episode(
    conn: Connection, episode_id: uuid.UUID, now: datetime | None = None
) -> RowMapping:
    """Soft delete (AIP-164): the episode becomes ``archived`` from any status and is
    returned; deleting an archived episode again returns it unchanged. Its window stays
    captured. A worker holding a claim loses it: its completion re-checks the claim."""
    row = (
        conn.execute(
            text(
                "UPDATE episodes SET status = 'archived', claimed_at = NULL, claimed_by = NULL, "
                # A deleted episode's window is not mined for facts any more.
                "semantic_status = CASE WHEN semantic_status = 'pending' THEN 'skipped' "
                "ELSE semantic_status END, "
                f"updated_at = {_NOW} "
                "WHERE episode_id = :id AND status <> 'archived' "
                f"RETURNING {_EPISODE_COLUMNS}"
            ),
            {"id": episode_id, "now": now},
        )
        .mappings()
        .first()
    )
    return row if row is not None else get_episode(conn, episode_id)
