"""Which dataset owns a thread or an episode a request names by id — the check every by-id
RPC makes before it reads or changes anything (:func:`episodic.access.require_visible`).
This lookup is the one statement of such a call that searches every dataset (through the
``*_routing_idx`` indexes); the call names the dataset it returns in every later statement.

A missing id and another dataset's id get the very same NOT_FOUND, built here once.
"""

from __future__ import annotations

import uuid
from typing import Literal

from sqlalchemy import Connection, text

from episodic.access import require_visible
from episodic.errors import NotFound
from episodic.store.distribution import across_datasets

__all__ = [
    "episode_not_found",
    "require_record",
    "require_thread",
    "thread_not_found",
]


def thread_not_found(thread_id: uuid.UUID) -> NotFound:
    """The answer for a thread id that does not exist — or that the caller may not see."""
    return NotFound(f"thread {thread_id} does not exist", thread_id=str(thread_id))


def episode_not_found(episode_id: uuid.UUID) -> NotFound:
    """The answer for an episode id that does not exist — or that the caller may not see."""
    return NotFound(f"episode {episode_id} does not exist", episode_id=str(episode_id))


def require_thread(conn: Connection, thread_id: uuid.UUID) -> str:
    """The dataset of thread ``thread_id`` if the caller may see it; NOT_FOUND otherwise."""
    dataset = conn.execute(
        text(
            across_datasets("the routing lookup of a request that names a thread by id")
            + "SELECT dataset FROM threads WHERE thread_id = :id"
        ),
        {"id": thread_id},
    ).scalar()
    return require_visible(dataset, thread_not_found(thread_id))


def require_record(
    conn: Connection, episode_id: uuid.UUID
) -> tuple[str, Literal["summary", "event"]]:
    """The dataset of ``episode_id`` and its kind when the caller may see it: a summarised
    episode, or an event (ListEpisodes and Recall list both under their ids); NOT_FOUND,
    the same for both, otherwise."""
    row = conn.execute(
        text(
            across_datasets("the routing lookup of a request that names an episode or event")
            + "SELECT dataset, 'summary' FROM episodes WHERE episode_id = :id "
            "UNION ALL SELECT dataset, 'event' FROM events WHERE event_id = :id LIMIT 1"
        ),
        {"id": episode_id},
    ).first()
    dataset = require_visible(row[0] if row else None, episode_not_found(episode_id))
    assert row is not None
    return dataset, row[1]
