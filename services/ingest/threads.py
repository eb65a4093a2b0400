"""Threads: creating one (once per id and per key), reading them, ending one, and
reading a thread's messages a page at a time.

A thread id is unique across datasets while the primary key is per dataset, so creating a
thread with a caller's own id takes a lock on the id and looks in every dataset.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from episodic.crypto import DatasetKey
from episodic.errors import AlreadyExists
from episodic.store.distribution import across_datasets
from episodic.store.owners import thread_not_found
from episodic.store.vault import Vault, open_row

from .model import MessagesPage

#: Most bytes of content and metadata in one page of ListMessages.
MAX_PAGE_BYTES = 3 * 1024 * 1024

#: The first key of the two-key advisory locks on caller-chosen thread ids (a key space of
#: its own: one-key locks, such as the erasure's and the migrations', never collide with it).
THREAD_ID_LOCK_SPACE = 0x7468


def create_thread(
    conn: Connection,
    vault: Vault,
    *,
    dataset: str,
    thread_id: uuid.UUID | None,
    label: str,
    metadata_json: str,
) -> dict[str, Any]:
    """Creates a thread (registering its dataset on first use); returns it as clients see
    it. The label and metadata are sealed with the dataset's key."""
    row, _ = find_or_create_thread(
        conn, vault, dataset=dataset, thread_id=thread_id, label=label, metadata_json=metadata_json
    )
    return row


def find_or_create_thread(
    conn: Connection,
    vault: Vault,
    *,
    dataset: str,
    thread_id: uuid.UUID | None,
    label: str,
    metadata_json: str,
    idempotency_key: str | None = None,
) -> tuple[dict[str, Any], bool]:
    """CreateThread: creates a thread (registering its dataset on first use); returns it
    as clients see it and whether this call created it. The label and metadata are sealed
    with the dataset's key.

    ``idempotency_key``: the dataset's own name for the thread. A key the dataset holds
    returns its thread (not created) when the call asks for the same thread — label,
    metadata, and the id if one is given — and is ALREADY_EXISTS otherwise, as a message
    key sent again with other content is. Two calls with one key at once: the second's
    insert waits on the unique index for the first to commit, then finds its thread."""
    key = vault.for_write(conn, dataset)
    if idempotency_key is not None:
        found = _thread_by_key(conn, key, dataset, idempotency_key)
        if found is not None:
            return _same_thread(found, thread_id, label, metadata_json, idempotency_key), False
    # A thread id is unique across datasets (id-only RPCs find the dataset by it), but the
    # primary key is (dataset, thread_id), which no index can extend across partitions: a
    # caller's own id is checked in every dataset. The transaction lock on the id makes
    # check-then-insert atomic: a second creation of the same id, in any dataset, waits
    # here until the first commits, then sees its row.
    if thread_id is not None:
        conn.execute(
            text("SELECT pg_advisory_xact_lock(:space, hashtext(:id))"),
            {"space": THREAD_ID_LOCK_SPACE, "id": str(thread_id)},
        )
        taken = conn.execute(
            text(
                across_datasets("a caller's own thread id must be new in every dataset")
                + "SELECT 1 FROM threads WHERE thread_id = :id"
            ),
            {"id": thread_id},
        ).first()
        if taken:
            raise AlreadyExists(f"thread {thread_id} already exists", thread_id=str(thread_id))
    row = (
        conn.execute(
            text(
                "INSERT INTO threads (thread_id, dataset, label, metadata, idempotency_key) "
                "VALUES (:id, :dataset, :label, :metadata, :ikey) "
                "ON CONFLICT DO NOTHING RETURNING *"
            ),
            {
                "id": thread_id or uuid.uuid4(),
                "dataset": dataset,
                "label": key.seal(label, "threads.label"),
                "metadata": key.seal(metadata_json, "threads.metadata"),
                "ikey": idempotency_key,
            },
        )
        .mappings()
        .first()
    )
    if row is not None:
        return open_row(key, row, "threads"), True
    if idempotency_key is not None:  # a concurrent call with the key committed first
        found = _thread_by_key(conn, key, dataset, idempotency_key)
        if found is not None:
            return _same_thread(found, thread_id, label, metadata_json, idempotency_key), False
    raise AlreadyExists(f"thread {thread_id} already exists", thread_id=str(thread_id))


def _thread_by_key(
    conn: Connection, key: DatasetKey, dataset: str, idempotency_key: str
) -> dict[str, Any] | None:
    row = (
        conn.execute(
            text("SELECT * FROM threads WHERE dataset = :dataset AND idempotency_key = :ikey"),
            {"dataset": dataset, "ikey": idempotency_key},
        )
        .mappings()
        .first()
    )
    return None if row is None else open_row(key, row, "threads")


def _same_thread(
    found: dict[str, Any],
    thread_id: uuid.UUID | None,
    label: str,
    metadata_json: str,
    idempotency_key: str,
) -> dict[str, Any]:
    """``found`` (the thread ``idempotency_key`` names) if the call asks for that thread,
    else ALREADY_EXISTS naming the key."""
    stored = found["metadata"]
    same = (
        (thread_id is None or thread_id == found["thread_id"])
        and label == (found["label"] or "")
        and json.loads(metadata_json or "{}")
        == (json.loads(stored) if isinstance(stored, str) else (stored or {}))
    )
    if not same:
        raise AlreadyExists(
            f"idempotency_key {idempotency_key!r} names thread {found['thread_id']}, created "
            "with another label, metadata or id; a retry must send the same thread, a new "
            "thread needs a new key",
            field="idempotency_key",
            reason="IDEMPOTENCY_KEY_REUSED",
            thread_id=str(found["thread_id"]),
        )
    return found


def get_thread(
    conn: Connection, vault: Vault, thread_id: uuid.UUID, *, dataset: str
) -> dict[str, Any]:
    """The thread as clients see it (``dataset`` is the one its routing lookup found)."""
    row = (
        conn.execute(
            text("SELECT * FROM threads WHERE dataset = :dataset AND thread_id = :id"),
            {"dataset": dataset, "id": thread_id},
        )
        .mappings()
        .first()
    )
    if row is None:
        raise thread_not_found(thread_id)
    return _with_compaction(conn, vault, row["dataset"], [vault.open_one(conn, row, "threads")])[0]


def _with_compaction(
    conn: Connection, vault: Vault, dataset: str, threads: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Compacted threads get ``compaction_episode``: their current episode's id and summary,
    which stand in for the dropped messages."""
    compacted = [t["thread_id"] for t in threads if t.get("compacted_at") is not None]
    if not compacted:
        return threads
    rows = (
        conn.execute(
            text(
                "SELECT thread_id, episode_id, dataset, summary FROM episodes "
                "WHERE dataset = :dataset AND thread_id = ANY(:ids) AND status = 'completed'"
            ),
            {"dataset": dataset, "ids": compacted},
        )
        .mappings()
        .all()
    )
    current = {r["thread_id"]: r for r in vault.open_rows(conn, dataset, list(rows), "episodes")}
    for t in threads:
        if t["thread_id"] in current:
            t["compaction_episode"] = current[t["thread_id"]]
    return threads


def end_thread(conn: Connection, thread_id: uuid.UUID, *, dataset: str) -> tuple[str, bool]:
    """Records the explicit end durably and says whether an episode is owed.

    ``end_requested_sequence`` keeps the request even when the Scheduler cannot be reached:
    its catch-up sweep opens the episode for any thread whose end request is uncaptured.
    """
    row = (
        conn.execute(
            text(
                "UPDATE threads SET ended_at = now(), end_requested_sequence = last_sequence, "
                "last_activity_at = now() WHERE dataset = :dataset AND thread_id = :id "
                "RETURNING dataset, last_sequence > captured_sequence AS owed"
            ),
            {"dataset": dataset, "id": thread_id},
        )
        .mappings()
        .first()
    )
    if row is None:
        raise thread_not_found(thread_id)
    return row["dataset"], bool(row["owed"])


def list_messages(
    conn: Connection,
    vault: Vault,
    thread_id: uuid.UUID,
    *,
    dataset: str,
    after_sequence: int,
    end_sequence: int | None,
    limit: int,
) -> MessagesPage:
    """Messages with sequence > after_sequence (and <= end_sequence), in order, and whether
    more follow. A page also stops before :data:`MAX_PAGE_BYTES` of content and metadata
    (always holding at least one message), so it fits every client's default 4 MiB
    receive limit; AIP-158 lets a page hold fewer than ``page_size`` items. The thread
    comes along: a compacted thread's summary stands in for the messages it dropped."""
    thread = get_thread(conn, vault, thread_id, dataset=dataset)
    rows = (
        conn.execute(
            text(
                "WITH page AS ("
                "  SELECT * FROM messages WHERE dataset = :dataset AND thread_id = :id "
                "  AND sequence > :after "
                "  AND (CAST(:end AS bigint) IS NULL OR sequence <= :end) "
                "  ORDER BY sequence LIMIT :limit), "
                "sized AS ("
                "  SELECT page.*, count(*) OVER () AS page_rows, "
                "    sum(octet_length(content) + octet_length(metadata)) "
                "      OVER (ORDER BY sequence) AS running_bytes "
                "  FROM page) "
                "SELECT * FROM sized "
                "WHERE running_bytes <= :budget OR sequence = (SELECT min(sequence) FROM page) "
                "ORDER BY sequence"
            ),
            {
                "dataset": thread["dataset"],
                "id": thread_id,
                "after": after_sequence,
                "end": end_sequence,
                "limit": limit + 1,
                "budget": MAX_PAGE_BYTES,
            },
        )
        .mappings()
        .all()
    )
    more = bool(rows) and (rows[0]["page_rows"] > min(len(rows), limit))
    messages = vault.open_rows(conn, thread["dataset"], list(rows[:limit]), "messages")
    return MessagesPage(thread=thread, messages=messages, more=more)


def list_threads(
    conn: Connection,
    vault: Vault,
    dataset: str,
    *,
    before: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> tuple[list[dict[str, Any]], bool]:
    """A dataset's threads, most recently active first (keyset paging on the index)."""
    rows = (
        conn.execute(
            text(
                "SELECT * FROM threads WHERE dataset = :dataset "
                "AND (CAST(:at AS timestamptz) IS NULL "
                "     OR (last_activity_at, thread_id) < (CAST(:at AS timestamptz), CAST(:tid AS uuid))) "
                "ORDER BY last_activity_at DESC, thread_id DESC LIMIT :limit"
            ),
            {
                "dataset": dataset,
                "at": before[0] if before else None,
                "tid": before[1] if before else None,
                "limit": limit + 1,
            },
        )
        .mappings()
        .all()
    )
    threads = vault.open_rows(conn, dataset, list(rows[:limit]), "threads")
    return _with_compaction(conn, vault, dataset, threads), len(rows) > limit
