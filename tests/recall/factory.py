"""Builds threads, messages and episodes directly in SQL, exactly as the pipeline leaves
them (a completed episode over a window, indexed by ``index_episode``), so recall can be
tested without running the Scheduler and the Summariser."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, text

from episodic.crypto import DatasetKey, seal_json
from episodic.providers import Embedder, HashingEmbedder
from episodic.store import episode_counts, recall_queries
from episodic.store.recall_index import index_episode
from episodic.store.vault import Vault, open_row
from episodic.testing.keys import test_vault

EMBEDDER = HashingEmbedder(384)
T0 = datetime(2026, 5, 17, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Made:
    episode_id: uuid.UUID
    thread_id: uuid.UUID
    dataset: str
    ended_at: datetime


def _key(conn: Connection, dataset: str, vault: Vault | None = None) -> DatasetKey:
    """The dataset's key, registering the dataset (encrypted) on first use."""
    return (vault or test_vault()).for_write(conn, dataset)


def make_thread(conn: Connection, dataset: str, label: str = "") -> uuid.UUID:
    thread_id = uuid.uuid4()
    key = _key(conn, dataset)
    conn.execute(
        text("INSERT INTO threads (thread_id, dataset, label) VALUES (:id, :ds, :label)"),
        {"id": thread_id, "ds": dataset, "label": key.seal(label, "threads.label")},
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
    # Found unlocked, then locked naming its dataset: Citus locks rows only in a statement
    # routed to one shard (as AddMessages does).
    dataset = conn.execute(
        text("SELECT dataset FROM threads WHERE thread_id = :t"), {"t": thread_id}
    ).scalar_one()
    last = conn.execute(
        text("SELECT last_sequence FROM threads WHERE dataset = :ds AND thread_id = :t FOR UPDATE"),
        {"ds": dataset, "t": thread_id},
    ).scalar_one()
    key = _key(conn, dataset)
    n = len(contents)
    times = [at - spacing * (n - 1 - i) for i in range(n)]
    for i, content in enumerate(contents):
        name = names[i] if names else None
        conn.execute(
            text(
                "INSERT INTO messages (dataset, thread_id, sequence, role, content, metadata, "
                "created_at) VALUES (:ds, :t, :s, :r, :c, :m, :at)"
            ),
            {
                "ds": dataset,
                "t": thread_id,
                "s": last + 1 + i,
                "r": "user" if i % 2 == 0 else "assistant",
                "c": key.seal(content, "messages.content"),
                "m": seal_json(key, {"name": name} if name else {}, "messages.metadata"),
                "at": times[i],
            },
        )
    conn.execute(
        text(
            "UPDATE threads SET last_sequence = :last, last_message_at = :at, "
            "last_activity_at = :at WHERE dataset = :ds AND thread_id = :t"
        ),
        {"last": last + n, "at": times[-1], "ds": dataset, "t": thread_id},
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
    keep_count: bool = True,
) -> Made:
    """A thread (new unless ``thread_id``) gets ``messages`` and an episode over them.

    A completed episode archives the thread's previous completed one, as the summariser
    does; its summary defaults to the messages joined, embedded with ``embedder``.
    ``keep_count`` False: the dataset's kept count is not changed (a store at a revision
    before 0025, which has no ``episode_counts``).
    """
    if thread_id is None:
        thread_id = make_thread(conn, dataset, label)
    first, last, started, ended = add_messages(conn, thread_id, messages, at=ended_at, names=names)
    summary = " ".join(messages) if summary is None else summary
    key = _key(conn, dataset)
    episode_id = uuid.uuid4()
    done = status in ("completed", "archived", "deleted")
    replaced = 0
    if status == "completed":
        replaced = conn.execute(
            text(
                "UPDATE episodes SET status = 'archived' "
                "WHERE dataset = :ds AND thread_id = :t AND status = 'completed'"
            ),
            {"ds": dataset, "t": thread_id},
        ).rowcount
    conn.execute(
        text(
            """
            INSERT INTO episodes (episode_id, thread_id, dataset, status, semantic_status,
                trigger, start_sequence, end_sequence, message_count, started_at, ended_at,
                summary, key_learnings, entities, entity_tokens, event_type, actor, embedding,
                completed_at)
            VALUES (:id, :t, :ds, :status, 'skipped', 'explicit', :first, :last, :n, :started,
                :ended, :summary, :kl, :entities, CAST(:tokens AS text[]), :event_type,
                :actor, CAST(:embedding AS vector), :completed_at)
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
            "summary": key.seal(summary if done else "", "episodes.summary"),
            "kl": seal_json(key, list(key_learnings), "episodes.key_learnings"),
            "entities": seal_json(key, list(entities), "episodes.entities"),
            "tokens": sorted({key.token(e) for e in entities}),
            "actor": key.seal("user", "episodes.actor"),
            "event_type": event_type,
            "embedding": embedder.embed([summary])[0] if done else None,
            # Not CASE WHEN … THEN now(): Citus refuses a clock inside CASE in a write.
            "completed_at": datetime.now(UTC) if done else None,
        },
    )
    # As every writer of episodes does: the dataset's kept count (store/episode_counts.py).
    if keep_count:
        episode_counts.changed(conn, dataset, int(status == "completed") - replaced)
    conn.execute(
        text("UPDATE threads SET captured_sequence = :last WHERE dataset = :ds AND thread_id = :t"),
        {"last": last, "ds": dataset, "t": thread_id},
    )
    if index and done:
        index_episode(conn, test_vault(), episode_id, embedder)
    return Made(episode_id, thread_id, dataset, ended)


def lexical_coverage(conn: Connection, dataset: str, query: str) -> dict[str, tuple[float, float]]:
    """Each current episode's (coverage, passage_coverage) of ``query``, by summary: how
    much of the query its lexical document and its best passage hold, in the dataset's
    text-search configuration."""
    key = test_vault().for_read(conn, dataset)
    rows, _ = recall_queries.rank_episodes(
        conn,
        key=key,
        filters=recall_queries.RecallFilters(),
        query=query,
        query_vector=EMBEDDER.embed_query(query),
        similarity_weight=0.7,
        recency_weight=0.3,
        limit=10,
    )
    opened = [open_row(key, r, "episodes") for r in rows]
    return {r["summary"]: (r["coverage"], r["passage_coverage"]) for r in opened}
