"""An episode's vocabulary and what every transition shares: the values of its two status
columns and of its trigger, the channels summariser workers listen on, the columns clients
see (and the SQL selecting them), how an error is kept on a row, waking the workers, and the
bounded count asked before work that grows with a dataset. Read by every module of the
state machine (:mod:`episodic.store.episodes`) and by the ranking and entity reads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, text

from episodic.errors import describe_error

#: Values of ``episodes.status``. ``deleted`` is reserved by the design and never produced
#: (a soft delete archives), so it is not among them.
STATUSES: tuple[str, ...] = ("pending", "processing", "completed", "failed", "archived")
#: Values of ``episodes.semantic_status``.
SEMANTIC_STATUSES: tuple[str, ...] = ("pending", "processing", "completed", "failed", "skipped")
#: What opened an episode.
TRIGGERS: tuple[str, ...] = ("explicit", "new_thread", "inactivity", "backstop", "manual")

#: Summariser workers LISTEN on these; the payload is an episode id (or a hint).
EPISODES_CHANNEL = "episodic_episodes"  # an episode became claimable
SEMANTIC_CHANNEL = "episodic_semantic"  # an episode's extraction became claimable
CHANNELS: tuple[str, ...] = (EPISODES_CHANNEL, SEMANTIC_CHANNEL)

#: Longest error text kept on a row (``error``, ``semantic_error``).
MAX_ERROR_CHARS = 2000
RECLAIM_ERROR = "claim expired (worker lost)"


#: The columns of an episode that clients see (``convert.episode`` reads these), without the
#: internal ones (embedding, search index, claims, trace context).
VISIBLE_COLUMNS: tuple[str, ...] = (
    "episode_id",
    "thread_id",
    "dataset",
    "status",
    "semantic_status",
    "summary",
    "key_learnings",
    "entities",
    "event_type",
    "actor",
    "message_count",
    "start_sequence",
    "end_sequence",
    "started_at",
    "ended_at",
    "trigger",
    "retry_count",
    "error",
    "created_at",
    "updated_at",
    # The thread's chunks are still to be indexed (Episode.chunks_pending).
    "chunks_pending",
)


def episode_columns(table: str, dataset: str) -> str:
    """SQL for :data:`VISIBLE_COLUMNS` of ``table`` (a table name or alias) and the thread's
    label (``thread_label``, for rendering). ``dataset`` is the statement's SQL for the
    dataset (``:dataset``, ``ANY(:batch)``): a constant, not ``{table}.dataset``, so the
    planner prunes the label's lookup to that dataset's partition."""
    columns = ", ".join(f"{table}.{c}" for c in VISIBLE_COLUMNS)
    label = (
        f"(SELECT label FROM threads t WHERE t.dataset = {dataset} "
        f"AND t.dataset = {table}.dataset AND t.thread_id = {table}.thread_id)"
    )
    return f"{columns}, {label} AS thread_label"


EPISODE_COLUMNS = episode_columns("episodes", ":dataset")


def has_more_episodes_than(
    conn: Connection, dataset: str, limit: int, *, embedded: bool = False
) -> bool:
    """Whether ``dataset`` has more than ``limit`` completed episodes (``embedded``: more
    than ``limit`` episodes with a summary vector, whatever their status), counting no
    further: an index scan of at most ``limit + 1`` entries, cheap however large the
    dataset. Asked before work that grows with the dataset (a re-stem, a re-embedding)."""
    which = "embedding IS NOT NULL" if embedded else "status = 'completed'"
    return bool(
        conn.execute(
            text(
                "SELECT count(*) > :n FROM (SELECT 1 FROM episodes WHERE dataset = :d "
                f"AND {which} LIMIT :n + 1) x"
            ),
            {"d": dataset, "n": limit},
        ).scalar()
    )


def error_text(err: BaseException) -> str:
    """How an exception is recorded on a row (and logged): without user content or SQL
    parameters (see :func:`episodic.errors.describe_error`), capped."""
    return describe_error(err, MAX_ERROR_CHARS)


def notify_episodes(
    conn: Connection, episode_ids: Sequence[Any], channel: str = EPISODES_CHANNEL
) -> None:
    """Wakes summariser workers (delivered when the caller's transaction commits)."""
    if episode_ids:
        conn.execute(
            text("SELECT pg_notify(:channel, x) FROM unnest(CAST(:ids AS text[])) x"),
            {"channel": channel, "ids": [str(i) for i in episode_ids]},
        )
