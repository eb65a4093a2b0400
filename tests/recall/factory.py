"""Builds threads, messages and episodes directly in SQL, exactly as the pipeline leaves
them (a completed episode over a window, indexed by ``index_episode``), so recall can be
tested without running the Scheduler and the Summariser."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, text

from episodic.providers import Embedder, HashingEmbedder
from episodic.store.recall_index import index_episode

EMBEDDER = HashingEmbedder(384)
T0 = datetime(2026, 5, 17, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Made:
    episode_id: uuid.UUID
    thread_id: uuid.UUID
    dataset: str
    ended_at: datetime


def make_thread(conn: Connection, dataset: str, label: str = "") -> uuid.UUID:
    thread_id = uuid.uuid4()
    conn.execute(
        text("INSERT INTO threads (thread_id, dataset, label) VALUES (:id, :ds, :label)"),
        {"id": thread_id, "ds": dataset, "label": label},
    )
    return thread_id


def add_messages(
    conn: Connection,
    thread_id: uuid.UUID,
    contents: Sequence[str],
    *,
    at: datetime,
    spacing: timedelta = timedelta(minutes=1),
    names: Sequence[str | None] | None = None,
) -> tuple[int, int, datetime, datetime]:
    """Appends messages ending at ``at``; returns (first, last sequence, first, last time)."""
    last = conn.execute(
        text("SELECT last_sequence FROM threads WHERE thread_id = :t FOR UPDATE"),
        {"t": thread_id},
    ).scalar_one()
    n = len(contents)
    times = [at - spacing * (n - 1 - i) for i in range(n)]
    for i, content in enumerate(contents):
        name = names[i] if names else None
        conn.execute(
            text(
                "INSERT INTO messages (thread_id, sequence, role, content, metadata, created_at) "
                "VALUES (:t, :s, :r, :c, CAST(:m AS jsonb), :at)"
            ),
            {
                "t": thread_id,
                "s": last + 1 + i,
                "r": "user" if i % 2 == 0 else "assistant",
                "c": content,
                "m": json.dumps({"name": name} if name else {}),
                "at": times[i],
            },
        )
    conn.execute(
        text(
            "UPDATE threads SET last_sequence = :last, last_message_at = :at, "
            "last_activity_at = :at WHERE thread_id = :t"
        ),
        {"last": last + n, "at": times[-1], "t": thread_id},
    )
    return last + 1, last + n, times[0], times[-1]


def make_episode(
    conn: Connection,
    dataset: str,
    messages: Sequence[str],
    *,
    ended_at: datetime = T0,
    status: str = "completed",
    summary: str | None = None,
    key_learnings: Sequence[str] = (),
    entities: Sequence[str] = (),
    event_type: str = "conversation",
    thread_id: uuid.UUID | None = None,
    label: str = "",
    embedder: Embedder = EMBEDDER,
    index: bool = True,
    names: Sequence[str | None] | None = None,
) -> Made:
    """A thread (new unless ``thread_id``) gets ``messages`` and an episode over them.

    A completed episode archives the thread's previous completed one, as the summariser
    does; its summary defaults to the messages joined, embedded with ``embedder``.
    """
    if thread_id is None:
        thread_id = make_thread(conn, dataset, label)
    first, last, started, ended = add_messages(conn, thread_id, messages, at=ended_at, names=names)
    summary = " ".join(messages) if summary is None else summary
    episode_id = uuid.uuid4()
    done = status in ("completed", "archived", "deleted")
    if status == "completed":
        conn.execute(
            text(
                "UPDATE episodes SET status = 'archived' "
                "WHERE thread_id = :t AND status = 'completed'"
            ),
            {"t": thread_id},
        )
    conn.execute(
        text(
            """
            INSERT INTO episodes (episode_id, thread_id, dataset, status, semantic_status,
                trigger, start_sequence, end_sequence, message_count, started_at, ended_at,
                summary, key_learnings, entities, event_type, actor, embedding, completed_at)
            VALUES (:id, :t, :ds, :status, 'skipped', 'explicit', :first, :last, :n, :started,
                :ended, :summary, CAST(:kl AS jsonb), CAST(:entities AS text[]), :event_type,
                'user', CAST(:embedding AS vector), CASE WHEN :done THEN now() END)
            """
        ),
        {
            "id": episode_id,
            "t": thread_id,
            "ds": dataset,
            "status": status,
            "first": first,
            "last": last,
            "n": last - first + 1,
            "started": started,
            "ended": ended,
            "summary": summary if done else "",
            "kl": json.dumps(list(key_learnings)),
            "entities": list(entities),
            "event_type": event_type,
            "embedding": embedder.embed([summary])[0] if done else None,
            "done": done,
        },
    )
    conn.execute(
        text("UPDATE threads SET captured_sequence = :last WHERE thread_id = :t"),
        {"last": last, "t": thread_id},
    )
    if index and done:
        index_episode(conn, episode_id, embedder)
    return Made(episode_id, thread_id, dataset, ended)
