"""How a claimed episode ends: completed (archiving the thread's previous current episode,
see "One current episode per thread" in :mod:`episodic.store.episodes`), its extraction
held and finished, a failure put back with a backoff or failed for good (see "Retries"),
and the Scheduler's reclaim of claims whose worker was lost."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, RowMapping, text

from episodic.crypto import DatasetKey, seal_json
from episodic.store import episode_counts
from episodic.store.distribution import across_datasets
from episodic.store.episode_states import (
    MAX_ERROR_CHARS,
    RECLAIM_ERROR,
    SEMANTIC_CHANNEL,
    notify_episodes,
)
from episodic.store.shards import run_in_groups
from episodic.store.sql import DUE_NOW, NOW


def complete(
    conn: Connection,
    episode: RowMapping,
    worker: str,
    *,
    key: DatasetKey,
    summary: str,
    key_learnings: list[str],
    entities: list[str],
    event_type: str,
    actor: str,
    embedding: list[float],
) -> str | None:
    """Writes the result (text sealed with the dataset's ``key``; entities also as blind
    tokens, for filters) and keeps one current episode per thread. Returns the new status
    ('completed', or 'archived' when a newer window already completed), or None when the
    claim was lost and nothing was written."""
    # Serialise completions of one thread (brief: the slow work is already done).
    dataset = episode["dataset"]
    conn.execute(
        text("SELECT 1 FROM threads WHERE dataset = :d AND thread_id = :t FOR UPDATE"),
        {"d": dataset, "t": episode["thread_id"]},
    )
    # Still ours? Checked (and locked) before touching any other row: a lost claim must
    # not archive the thread's current episode.
    mine = conn.execute(
        text(
            "SELECT 1 FROM episodes WHERE dataset = :d AND episode_id = :id "
            "AND status = 'processing' AND claimed_by = :worker FOR UPDATE"
        ),
        {"d": dataset, "id": episode["episode_id"], "worker": worker},
    ).first()
    if mine is None:
        return None
    newer = conn.execute(
        text(
            "SELECT 1 FROM episodes WHERE dataset = :d AND thread_id = :t "
            "AND status = 'completed' AND end_sequence > :end LIMIT 1"
        ),
        {"d": dataset, "t": episode["thread_id"], "end": episode["end_sequence"]},
    ).first()
    final_status = "archived" if newer else "completed"
    replaced = 0
    if final_status == "completed":
        replaced = conn.execute(
            text(
                "UPDATE episodes SET status = 'archived', updated_at = now() "
                "WHERE dataset = :d AND thread_id = :t AND status = 'completed' "
                "AND episode_id <> :id"
            ),
            {"d": dataset, "t": episode["thread_id"], "id": episode["episode_id"]},
        ).rowcount
    row = conn.execute(
        text(
            """
            UPDATE episodes SET status = :status, summary = :summary,
                key_learnings = :learnings, entities = :entities,
                entity_tokens = CAST(:entity_tokens AS text[]),
                event_type = :event_type, actor = :actor, embedding = CAST(:embedding AS vector),
                error = NULL, claimed_by = NULL, claimed_at = NULL,
                completed_at = now(), updated_at = now()
            WHERE dataset = :d AND episode_id = :id AND status = 'processing'
                AND claimed_by = :worker
            RETURNING episode_id
            """
        ),
        {
            "status": final_status,
            "summary": key.seal(summary, "episodes.summary"),
            "learnings": seal_json(key, key_learnings, "episodes.key_learnings"),
            "entities": seal_json(key, entities, "episodes.entities"),
            "entity_tokens": sorted({key.token(e) for e in entities}),
            "event_type": event_type,
            "actor": key.seal(actor, "episodes.actor"),
            "embedding": "[" + ",".join(f"{x:.7g}" for x in embedding) + "]",
            "d": dataset,
            "id": episode["episode_id"],
            "worker": worker,
        },
    ).first()
    # Last, after the episodes' rows (store/episode_counts.py): a thread's first episode adds
    # one, a later one replaces the current one (nothing to add).
    completed = row is not None and final_status == "completed"
    episode_counts.changed(conn, dataset, int(completed) - replaced)
    if row is None:
        return None
    notify_episodes(conn, [row[0]], SEMANTIC_CHANNEL)
    return final_status


def hold_semantic_claim(conn: Connection, episode_id: Any, worker: str, *, dataset: str) -> bool:
    """Whether ``worker`` still holds the episode's extraction claim, locking the row (as
    :func:`finish_semantic` would) for the rest of the caller's transaction. Checked before
    writing facts: a worker whose claim was reclaimed while it was away (frozen, cut off)
    writes none, and nobody takes the claim between the check and the finish."""
    return (
        conn.execute(
            text(
                "SELECT 1 FROM episodes WHERE dataset = :dataset AND episode_id = :id "
                "AND semantic_status = 'processing' AND semantic_claimed_by = :worker "
                "FOR NO KEY UPDATE"
            ),
            {"dataset": dataset, "id": episode_id, "worker": worker},
        ).first()
        is not None
    )


def finish_semantic(
    conn: Connection,
    episode_id: Any,
    worker: str,
    status: str,
    error: str | None = None,
    *,
    dataset: str,
) -> bool:
    return (
        conn.execute(
            text(
                "UPDATE episodes SET semantic_status = :status, semantic_error = :error, "
                "semantic_claimed_by = NULL, semantic_claimed_at = NULL, updated_at = now() "
                "WHERE dataset = :dataset AND episode_id = :id "
                "AND semantic_status = 'processing' AND semantic_claimed_by = :worker"
            ),
            {
                "status": status,
                "error": error,
                "dataset": dataset,
                "id": episode_id,
                "worker": worker,
            },
        ).rowcount
        == 1
    )


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
    dataset: str,
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
            # Seconds added to the epoch rather than an interval to a timestamptz (a
            # STABLE operator over a column, which Citus refuses in a write); the random
            # stretch is drawn here, as Citus refuses random() in one too.
            f"next_attempt_at = to_timestamp(extract(epoch FROM {DUE_NOW}) + "
            "  LEAST(:base * power(2, retry_count), :cap) * (1 + :jitter * :draw)), "
            "claimed_at = NULL, claimed_by = NULL, error = :error, "
            "updated_at = now() "
            "WHERE dataset = :dataset AND episode_id = :id AND status = 'processing' "
            "AND claimed_by = :me RETURNING status"
        ),
        {
            "dataset": dataset,
            "id": episode_id,
            "me": claimed_by,
            "max": max_retries,
            "base": backoff.total_seconds(),
            "cap": max_backoff.total_seconds(),
            "jitter": jitter,
            "draw": random.random(),
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


def reclaim_orphaned(
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

    The rows are locked ``FOR NO KEY UPDATE`` — what the ``UPDATE`` itself takes — not
    ``FOR UPDATE``: the key-share locks that inserting an episode's facts or chunks takes
    through their foreign keys do not conflict with it, so a worker frozen after writing
    them cannot hide its claim from this sweep. A worker frozen while it holds the row
    itself (say in the middle of renewing its claims) is ended by PostgreSQL after
    ``EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT``; the next sweep then takes the claim.
    """
    params = {"after": older_than, "max": max_retries, "now": now, "limit": limit}
    rows = run_in_groups(
        conn,
        across_datasets("the Scheduler reclaims orphaned summarisations of every dataset")
        + "WITH stale AS ("
        "  SELECT dataset, episode_id FROM episodes "
        f"  WHERE IN_GROUP(episodes) AND status = 'processing' AND claimed_at < {NOW} - :after "
        "  ORDER BY claimed_at LIMIT :limit FOR NO KEY UPDATE SKIP LOCKED) "
        "UPDATE episodes e SET retry_count = e.retry_count + 1, "
        "status = CASE WHEN e.retry_count + 1 > :max THEN 'failed' ELSE 'pending' END, "
        f"error = '{RECLAIM_ERROR}', next_attempt_at = {DUE_NOW}, "
        "claimed_at = NULL, claimed_by = NULL, updated_at = now() "
        "FROM stale WHERE IN_GROUP(e) AND e.dataset = stale.dataset "
        "AND e.episode_id = stale.episode_id "
        f"AND e.status = 'processing' AND e.claimed_at < {NOW} - :after "
        "RETURNING e.episode_id, e.status",
        params,
        discover=across_datasets("the Scheduler looks for datasets with orphaned summarisations")
        + "SELECT DISTINCT dataset FROM episodes "
        f"WHERE status = 'processing' AND claimed_at < {NOW} - :after",
        limit=limit,
    )
    requeued = [r["episode_id"] for r in rows if r["status"] == "pending"]
    semantic = run_in_groups(
        conn,
        across_datasets("the Scheduler reclaims orphaned extractions of every dataset")
        + "WITH stale AS ("
        "  SELECT dataset, episode_id FROM episodes "
        "  WHERE IN_GROUP(episodes) AND semantic_status = 'processing' "
        f"  AND semantic_claimed_at < {NOW} - :after "
        "  ORDER BY semantic_claimed_at LIMIT :limit FOR NO KEY UPDATE SKIP LOCKED) "
        "UPDATE episodes e SET semantic_status = 'pending', "
        f"semantic_error = '{RECLAIM_ERROR}', "
        "semantic_claimed_at = NULL, semantic_claimed_by = NULL, updated_at = now() "
        "FROM stale WHERE IN_GROUP(e) AND e.dataset = stale.dataset "
        "AND e.episode_id = stale.episode_id AND e.semantic_status = 'processing' "
        f"AND e.semantic_claimed_at < {NOW} - :after "
        "RETURNING e.episode_id",
        params,
        discover=across_datasets("the Scheduler looks for datasets with orphaned extractions")
        + "SELECT DISTINCT dataset FROM episodes "
        f"WHERE semantic_status = 'processing' AND semantic_claimed_at < {NOW} - :after",
        limit=limit,
    )
    semantic = [(r["episode_id"],) for r in semantic]
    notify_episodes(conn, requeued + [r[0] for r in semantic])
    return ReclaimResult(
        requeued=len(requeued), failed=len(rows) - len(requeued), semantic_requeued=len(semantic)
    )
