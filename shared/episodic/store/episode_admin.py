"""An operator's transitions of one episode: reading it in any status, retrying one that
failed (the only way out of ``failed``, over exactly the same window) and the soft delete
(archived, its window kept). See :mod:`episodic.store.episodes`."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Connection, RowMapping, text

from episodic.errors import FailedPrecondition
from episodic.store import episode_counts
from episodic.store.episode_states import EPISODE_COLUMNS, notify_episodes
from episodic.store.owners import episode_not_found
from episodic.store.sql import DUE_NOW


def get_episode(conn: Connection, episode_id: uuid.UUID, *, dataset: str) -> RowMapping:
    """One episode of ``dataset`` in any status (archived ones too, for provenance), as
    clients see it; NotFound when there is none."""
    row = (
        conn.execute(
            text(
                f"SELECT {EPISODE_COLUMNS} FROM episodes "
                "WHERE dataset = :dataset AND episode_id = :id"
            ),
            {"dataset": dataset, "id": episode_id},
        )
        .mappings()
        .first()
    )
    if row is None:
        raise episode_not_found(episode_id)
    return row


def retry_episode(
    conn: Connection, episode_id: uuid.UUID, now: datetime | None = None, *, dataset: str
) -> RowMapping:
    """Admin retry: a ``failed`` episode goes back to ``pending`` over the same window, with
    its retry budget reset. FAILED_PRECONDITION from any other status."""
    row = (
        conn.execute(
            text(
                "UPDATE episodes SET status = 'pending', retry_count = 0, error = NULL, "
                f"next_attempt_at = {DUE_NOW}, claimed_at = NULL, "
                "claimed_by = NULL, updated_at = now() "
                "WHERE dataset = :dataset AND episode_id = :id AND status = 'failed' "
                f"RETURNING {EPISODE_COLUMNS}"
            ),
            {"dataset": dataset, "id": episode_id, "now": now},
        )
        .mappings()
        .first()
    )
    if row is None:
        current = get_episode(conn, episode_id, dataset=dataset)  # NotFound when missing
        raise FailedPrecondition(
            f"episode {episode_id} is {current['status']}; only a failed episode can be retried",
            episode_id=str(episode_id),
            status=current["status"],
        )
    notify_episodes(conn, [episode_id])
    return row


def delete_episode(
    conn: Connection, episode_id: uuid.UUID, now: datetime | None = None, *, dataset: str
) -> RowMapping:
    """Soft delete (AIP-164): the episode becomes ``archived`` from any status and is
    returned; deleting an archived episode again returns it unchanged. Its window stays
    captured. A worker holding a claim loses it: its completion re-checks the claim."""
    # The status it had, locked: a completed one leaves the dataset's count.
    was = conn.execute(
        text(
            "SELECT status FROM episodes WHERE dataset = :dataset AND episode_id = :id FOR UPDATE"
        ),
        {"dataset": dataset, "id": episode_id},
    ).scalar()
    row = (
        conn.execute(
            text(
                "UPDATE episodes SET status = 'archived', claimed_at = NULL, claimed_by = NULL, "
                # A deleted episode's window is not mined for facts any more.
                "semantic_status = CASE WHEN semantic_status = 'pending' THEN 'skipped' "
                "ELSE semantic_status END, "
                "updated_at = now() "
                "WHERE dataset = :dataset AND episode_id = :id AND status <> 'archived' "
                f"RETURNING {EPISODE_COLUMNS}"
            ),
            {"dataset": dataset, "id": episode_id, "now": now},
        )
        .mappings()
        .first()
    )
    if row is None:
        return get_episode(conn, episode_id, dataset=dataset)
    if was == "completed":
        episode_counts.changed(conn, dataset, -1)
    return row
