"""Retention and compaction (seed 003, "Privacy and Retention": auto-purge after N days;
"Compacting Old Episodes": keep recent turns verbatim, compact older ones into summaries).

Both are per-dataset policies (``datasets.retention_days`` / ``compact_after_days``) with a
global default (EPISODIC_RETENTION_DAYS / EPISODIC_COMPACT_AFTER_DAYS), measured from a
thread's last message, and applied by the Scheduler's leased lifecycle sweep
(:func:`run_lifecycle`), which also resumes erasures a crash interrupted.

- **Retention** purges whole threads, with everything derived from them (their events
  too), exactly as DeleteThread does (:mod:`episodic.store.erasure`), in short
  transactions; events recorded without a thread expire by ``occurred_at``.
- **Compaction** keeps a thread's current episode (summary, key learnings, entities,
  embedding, window, facts) and drops its verbatim messages and the message chunks derived
  from them; the episode's lexical document is rebuilt from the summary and key learnings
  alone, so recall still finds the thread by its summary (by meaning and by words) but no
  index keeps the dropped words. The thread records when, up to which sequence, and a
  SHA-256 of exactly what was dropped (:func:`messages_digest`). A thread is compacted only
  when every message is covered by its completed current episode and nothing about it is
  pending: no uncaptured message, no pending or processing episode, no semantic extraction
  still to read the window.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, text

from episodic import metrics
from episodic.config import PrivacySettings
from episodic.store import audit, erasure, events
from episodic.store.distribution import across_datasets
from episodic.store.recall_index import blind_vectors, dataset_config
from episodic.store.sql import NOW
from episodic.store.vault import Vault

__all__ = [
    "LifecycleResult",
    "compact_thread",
    "compaction_candidates",
    "messages_digest",
    "retention_candidates",
    "run_lifecycle",
]

log = logging.getLogger(__name__)

#: Threads one lifecycle pass purges or compacts at most (the next pass goes on).
PASS_LIMIT = 500


@dataclass
class LifecycleResult:
    threads_purged: int = 0
    threads_compacted: int = 0
    messages_compacted: int = 0
    erasures_resumed: int = 0
    rows_purged: Counter[str] = field(default_factory=Counter)

    def as_record(self) -> dict[str, Any]:
        return {
            "threads_purged": self.threads_purged,
            "threads_compacted": self.threads_compacted,
            "messages_compacted": self.messages_compacted,
            "erasures_resumed": self.erasures_resumed,
            "rows_purged": dict(self.rows_purged),
        }


def _policy_join(column: str) -> str:
    """Threads of non-erasing datasets whose last message is older than the dataset's
    ``column`` policy (or the global default ``:default``)."""
    return (
        "FROM threads t JOIN datasets d ON d.dataset = t.dataset "
        "WHERE d.erasing_since IS NULL "
        f"AND coalesce(d.{column}, CAST(:default AS integer)) IS NOT NULL "
        f"AND coalesce(t.last_message_at, t.created_at) < {NOW} "
        f"    - make_interval(days => coalesce(d.{column}, CAST(:default AS integer)))"
    )


def retention_candidates(
    conn: Connection, default_days: int | None, now: datetime | None, limit: int
) -> list[tuple[uuid.UUID, str]]:
    """Threads past their dataset's retention: (thread id, dataset)."""
    return [
        (r[0], r[1])
        for r in conn.execute(
            text(
                across_datasets("the lifecycle sweep finds threads past retention")
                + f"SELECT t.thread_id, t.dataset {_policy_join('retention_days')} "
                "ORDER BY t.last_message_at NULLS FIRST LIMIT :limit"
            ),
            {"default": default_days, "now": now, "limit": limit},
        )
    ]


def _compactable(dataset: str) -> str:
    """What makes a thread safe to compact (see the module docstring), as SQL over ``t``.
    ``dataset`` is the SQL of its dataset: ``:d`` for one thread, so the episodes'
    subqueries prune to that dataset's partition; ``t.dataset`` in the sweep."""
    return f"""
    t.compacted_through < t.last_sequence
    AND t.captured_sequence = t.last_sequence
    AND EXISTS (SELECT 1 FROM episodes e WHERE e.dataset = {dataset}
                AND e.thread_id = t.thread_id
                AND e.status = 'completed' AND e.end_sequence = t.last_sequence)
    AND NOT EXISTS (SELECT 1 FROM episodes e WHERE e.dataset = {dataset}
                    AND e.thread_id = t.thread_id
                    AND (e.status IN ('pending', 'processing')
                         OR (e.semantic_status IN ('pending', 'processing')
                             AND e.completed_at IS NOT NULL)))
"""


def compaction_candidates(
    conn: Connection, default_days: int | None, now: datetime | None, limit: int
) -> list[tuple[uuid.UUID, str]]:
    """Threads past their dataset's compaction age that are safe to compact: (thread id,
    dataset)."""
    return [
        (r[0], r[1])
        for r in conn.execute(
            text(
                across_datasets("the lifecycle sweep finds threads to compact")
                + f"SELECT t.thread_id, t.dataset {_policy_join('compact_after_days')} "
                f"AND {_compactable('t.dataset')} ORDER BY t.last_message_at LIMIT :limit"
            ),
            {"default": default_days, "now": now, "limit": limit},
        )
    ]


def message_line(message: Mapping[str, Any]) -> bytes:
    """One message as the compaction digest hashes it (see ThreadCompaction in the API)."""
    created: datetime = message["created_at"]
    return (
        json.dumps(
            {
                "sequence": message["sequence"],
                "role": message["role"],
                "content": message["content"],
                "metadata": message["metadata"] or {},
                "created_at": created.astimezone(UTC).isoformat(),
            },
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()
        + b"\n"
    )


def messages_digest(messages: Iterable[Mapping[str, Any]]) -> str:
    """SHA-256 (hex) of messages (opened, in sequence order) as :func:`message_line`s."""
    digest = hashlib.sha256()
    for message in messages:
        digest.update(message_line(message))
    return digest.hexdigest()


def compact_thread(
    conn: Connection, vault: Vault, thread_id: uuid.UUID, *, dataset: str
) -> int | None:
    """Compacts one thread in the caller's transaction; returns how many messages were
    dropped, or None when it is not (or no longer) safe to compact. Takes the thread's
    row lock first, so a message or an episode arriving meanwhile waits or wins. A thread
    another session holds is skipped (None), not waited for: the sweep goes on with the
    others, and the next pass compacts it."""
    # The episode's document is stemmed again below: the dataset's language lock is held
    # (shared) before the thread's and the episodes' locks, as every writer that stems
    # takes it, so a language set or detected meanwhile waits for this transaction or
    # runs wholly before it (store/languages.py set_language).
    dataset_config(conn, dataset, for_write=True)
    # Every statement names the dataset: it routes to the thread's partition (shard).
    thread = (
        conn.execute(
            text(
                "SELECT t.thread_id, t.last_sequence FROM threads t "
                f"WHERE t.dataset = :d AND t.thread_id = :t AND {_compactable(':d')} "
                "FOR UPDATE OF t SKIP LOCKED"
            ),
            {"d": dataset, "t": thread_id},
        )
        .mappings()
        .first()
    )
    if thread is None:
        return None
    # Re-checked under the lock: the candidate query ran without it.
    through = thread["last_sequence"]
    still = conn.execute(
        text(
            "SELECT 1 FROM threads t WHERE t.dataset = :d AND t.thread_id = :t "
            f"AND {_compactable(':d')}"
        ),
        {"d": dataset, "t": thread_id},
    ).first()
    if still is None:
        return None
    rows = conn.execute(
        text(
            "SELECT sequence, role, content, metadata, created_at FROM messages "
            "WHERE dataset = :d AND thread_id = :t AND sequence <= :through ORDER BY sequence"
        ),
        {"d": dataset, "t": thread_id, "through": through},
    ).mappings()
    digest = messages_digest(vault.open_rows(conn, dataset, list(rows), "messages"))
    dropped = conn.execute(
        text("DELETE FROM messages WHERE dataset = :d AND thread_id = :t AND sequence <= :through"),
        {"d": dataset, "t": thread_id, "through": through},
    ).rowcount
    conn.execute(
        text("DELETE FROM message_chunks WHERE dataset = :d AND thread_id = :t"),
        {"d": dataset, "t": thread_id},
    )
    # The current episode's lexical document: its summary and key learnings only.
    episode = (
        conn.execute(
            text(
                "SELECT episode_id, dataset, summary, key_learnings FROM episodes "
                "WHERE dataset = :d AND thread_id = :t AND status = 'completed'"
            ),
            {"d": dataset, "t": thread_id},
        )
        .mappings()
        .one()
    )
    opened = vault.open_one(conn, episode, "episodes")
    key = vault.for_read(conn, dataset)
    head = "\n".join([opened["summary"], *(opened["key_learnings"] or [])])
    [(document, length)] = blind_vectors(conn, key, [("", head)])
    conn.execute(
        text(
            "UPDATE episodes SET search_vector = CAST(:v AS tsvector), search_length = :n "
            "WHERE dataset = :d AND episode_id = :id"
        ),
        {"v": document, "n": length, "d": dataset, "id": episode["episode_id"]},
    )
    conn.execute(
        text(
            "UPDATE threads SET compacted_at = now(), compacted_through = :through, "
            "compacted_digest = :digest WHERE dataset = :d AND thread_id = :t"
        ),
        {"through": through, "digest": digest, "d": dataset, "t": thread_id},
    )
    return int(dropped)


def run_lifecycle(
    engine: Engine,
    vault: Vault,
    settings: PrivacySettings,
    *,
    actor: str,
    now: datetime | None = None,
) -> LifecycleResult:
    """One pass of the lifecycle sweep: resume stalled erasures, purge threads past
    retention, compact threads past compaction age (each at most :data:`PASS_LIMIT`)."""
    result = LifecycleResult()
    result.erasures_resumed = len(
        erasure.resume_stalled(engine, actor=actor, batch_rows=settings.erasure_batch_rows)
    )
    with engine.connect() as conn:
        expired = retention_candidates(conn, settings.retention_days, now, PASS_LIMIT)
    receipt = erasure.Receipt(receipt_id=str(uuid.uuid4()), scope="retention", dataset="")
    erasure.erase_threads(engine, expired, receipt, settings.erasure_batch_rows, vault=vault)
    result.threads_purged = receipt.rows.get("threads", 0)
    # Events without a thread expire by when they occurred (a thread's go with it).
    receipt.rows["events"] += events.purge_expired(engine, settings.retention_days, now)
    result.rows_purged = receipt.rows
    if result.threads_purged:
        with engine.begin() as conn:
            for dataset, n in Counter(d for _, d in expired).items():
                audit.record(
                    conn,
                    key_prefix=actor,
                    action="retention.purge",
                    dataset=dataset,
                    details={"threads": n},
                )
    with engine.connect() as conn:
        due = compaction_candidates(conn, settings.compact_after_days, now, PASS_LIMIT)
    for thread_id, dataset in due:
        with engine.begin() as conn:
            dropped = compact_thread(conn, vault, thread_id, dataset=dataset)
        if dropped is not None:
            result.threads_compacted += 1
            result.messages_compacted += dropped
    metrics.erasure_finished("retention", receipt.rows, counted=False)
    metrics.lifecycle_threads("purged", result.threads_purged)
    metrics.lifecycle_threads("compacted", result.threads_compacted)
    if result.threads_purged or result.threads_compacted or result.erasures_resumed:
        log.info("lifecycle: %s", result.as_record())
    return result
