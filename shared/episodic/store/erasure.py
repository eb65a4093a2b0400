"""Erasure: every row of a dataset or thread gone, in short transactions, with a receipt.

What goes (every table holding a dataset's rows; tests/privacy scans the whole schema to
prove it): the dataset's events (with their thread, or with the dataset); the threads; their messages (content, metadata, idempotency keys); episodes of
every status (summaries, key learnings, entities, embeddings, lexical documents); message
chunks (embeddings and lexical vectors); facts; timers; the entity canon's rows (for a
thread: the aliases no remaining episode mentions, and entities left without one — see
:func:`episodic.store.entities.forget_unmentioned`). For a dataset also its row in
``datasets`` — the only copy of its data key, so copies of its sealed rows in backups or
WAL archives become unreadable (crypto-erasure). Audit events that named the dataset or an
erased thread or episode keep the fact of the action but name a pseudonym instead
(``erased:`` + SHA-256 prefix); API keys scoped to the dataset lose it (a key scoped to
nothing else is revoked).

How it stays safe while everything runs:

- **Bounded transactions.** Messages, chunks and facts go in slices of at most
  ``batch_rows`` rows per transaction; a thread's last transaction locks its row (the lock
  AddMessages and the summariser's completion take), deletes what is left — including
  anything written meanwhile — and the thread itself. Writers of other datasets never wait
  on more than one slice.
- **No orphans.** A DeleteDataset first marks the dataset ``erasing``: CreateThread takes a
  share lock on the dataset row and refuses an erasing dataset, so no thread appears
  behind the sweep. A message for a thread not yet reached is stored and then erased with
  it; one for a thread already gone gets NOT_FOUND. A summariser finishing an episode of an
  erased thread finds its claim gone and writes nothing (:func:`episodes.complete`).
- **One eraser per dataset.** A session advisory lock; a second caller gets ABORTED. An
  erasure interrupted by a crash leaves the dataset ``erasing``; the Scheduler's lifecycle
  sweep resumes it (:func:`resume_stalled`), and a new DeleteDataset call does too.

The receipt counts rows per table and carries a digest: SHA-256 over the receipt's fields
and the identities of every row erased (in erasure order). An auditor keeps the digest;
the audit log keeps the receipt (under the pseudonym), so the two can be checked against
each other later without keeping anything of the person.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError

from episodic import metrics
from episodic.errors import Aborted, NotFound
from episodic.store import audit, entities, episode_counts, events, kept_statistics, procedures
from episodic.store.distribution import across_datasets
from episodic.store.sql import or_now
from episodic.store.vault import Vault

log = logging.getLogger(__name__)

__all__ = [
    "ERASED_TABLES",
    "ErasureInProgress",
    "Receipt",
    "erase_dataset",
    "erase_thread",
    "erase_threads",
    "pseudonym",
    "resume_stalled",
]

#: Tables whose rows belong to a thread, deleted before it (children first).
_SLICED = ("facts", "message_chunks", "messages")
#: Every table a receipt counts, in erasure order.
ERASED_TABLES = (
    "events",
    "facts",
    "message_chunks",
    "message_tool_calls",
    "messages",
    "outcomes",
    "procedure_candidates",
    "procedures",
    "episodes",
    "scheduled_episodes",
    "threads",
    "entity_keys",
    "entity_aliases",
    "entities",
    "datasets",
)
# A sliced table's key within a thread (its rows are picked by an index on thread_id).
_SLICE_KEY = {
    "facts": ("fact_id",),
    "message_chunks": ("start_sequence", "start_offset"),
    "messages": ("sequence",),
}


def _slice_sql(table: str, *, limited: bool) -> str:
    """Deletes (a slice of) a thread's rows of ``table``, returning each row's key."""
    columns = ", ".join(_SLICE_KEY[table])
    identity = " || '.' || ".join(f"{c}::text" for c in _SLICE_KEY[table])
    where = "dataset = :d AND thread_id = :t"
    if limited:
        where += (
            f" AND ({columns}) IN (SELECT {columns} FROM {table} "
            "WHERE dataset = :d AND thread_id = :t LIMIT :n)"
        )
    return f"DELETE FROM {table} WHERE {where} RETURNING {identity}"


#: An interrupted erasure untouched this long is resumed by the lifecycle sweep.
STALL_AFTER = timedelta(minutes=5)


class ErasureInProgress(Aborted):
    reason = "ERASURE_IN_PROGRESS"


def pseudonym(value: str) -> str:
    """What audit records say instead of an erased dataset name or id."""
    return "erased:" + hashlib.sha256(value.encode()).hexdigest()[:16]


@dataclass
class Receipt:
    """What an erasure removed. ``dataset`` is the name (the caller knows it); the copy in
    the audit log has only ``dataset_digest``."""

    receipt_id: str
    scope: str  # "dataset", "thread", or "retention"
    dataset: str
    thread_id: str = ""
    rows: Counter[str] = field(default_factory=Counter)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    data_key_destroyed: bool = False
    audit_events_pseudonymised: int = 0
    api_keys_scrubbed: int = 0
    digest: str = ""
    _ids: Any = field(default_factory=hashlib.sha256, repr=False)

    @property
    def dataset_digest(self) -> str:
        return hashlib.sha256(self.dataset.encode()).hexdigest()

    def record(self, table: str, identities: Iterable[object]) -> None:
        n = 0
        for identity in identities:
            self._ids.update(f"{table}:{identity}\n".encode())
            n += 1
        self.rows[table] += n

    def seal(self) -> None:
        """Computes the digest over the receipt's fields and the erased identities."""
        body = self.as_record(with_digest=False)
        self.digest = hashlib.sha256(
            json.dumps(body, sort_keys=True).encode() + self._ids.digest()
        ).hexdigest()

    def as_record(self, *, with_digest: bool = True) -> dict[str, object]:
        """The receipt as the audit log keeps it: no dataset name, no ids."""
        out: dict[str, object] = {
            "receipt_id": self.receipt_id,
            "scope": self.scope,
            "dataset_digest": self.dataset_digest,
            "thread_digest": (
                hashlib.sha256(self.thread_id.encode()).hexdigest() if self.thread_id else ""
            ),
            "rows": {t: self.rows.get(t, 0) for t in ERASED_TABLES},
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "data_key_destroyed": self.data_key_destroyed,
            "audit_events_pseudonymised": self.audit_events_pseudonymised,
            "api_keys_scrubbed": self.api_keys_scrubbed,
        }
        if with_digest:
            out["digest"] = self.digest
        return out


def _now(conn: Connection) -> datetime:
    return conn.execute(text("SELECT clock_timestamp()")).scalar_one()  # type: ignore[no-any-return]


def _erase_one_thread(
    engine: Engine,
    vault: Vault | None,
    dataset: str,
    thread_id: uuid.UUID,
    receipt: Receipt,
    batch_rows: int,
) -> list[str]:
    """Erases one thread of ``dataset`` in slices; returns the ids of its episodes (for the
    audit log). The dataset routes every statement to one partition (shard); a thread
    already gone has nothing left to delete. What the thread taught (procedure candidates,
    outcomes) goes with it, and the dataset's procedures are recomputed without it (with
    ``vault``'s key; None when the whole dataset goes, procedures included)."""
    for table in _SLICED:
        while True:
            with engine.begin() as conn:
                ids = conn.execute(
                    text(_slice_sql(table, limited=True)),
                    {"d": dataset, "t": thread_id, "n": batch_rows},
                ).scalars()
                got = [f"{thread_id}/{i}" for i in ids]
            receipt.record(table, got)
            if len(got) < batch_rows:
                break
    with engine.begin() as conn:
        # The thread's lock: writers of this thread wait, then find it gone.
        locked = conn.execute(
            text("SELECT 1 FROM threads WHERE dataset = :d AND thread_id = :t FOR UPDATE"),
            {"d": dataset, "t": thread_id},
        ).first()
        for table in _SLICED:  # whatever was written since its slices
            rest = conn.execute(
                text(_slice_sql(table, limited=False)), {"d": dataset, "t": thread_id}
            )
            receipt.record(table, (f"{thread_id}/{i}" for i in rest.scalars()))
        # The thread's events (RecordEvent share-locks the thread: none can slip past).
        receipt.record("events", events.erase_thread_events(conn, dataset, thread_id))
        taught, signatures = procedures.forget_thread(conn, dataset, thread_id)
        for table, identities in taught.items():
            receipt.record(table, identities)
        if signatures:
            if vault is not None:
                procedures.rebuild(conn, vault.for_write(conn, dataset), dataset)
            else:  # no key to recompute with: what it taught goes, relearned on next change
                receipt.record("procedures", procedures.drop_signatures(conn, dataset, signatures))
        erased = conn.execute(
            text(
                "DELETE FROM episodes WHERE dataset = :d AND thread_id = :t "
                "RETURNING episode_id, status"
            ),
            {"d": dataset, "t": thread_id},
        ).all()
        episodes = [str(e.episode_id) for e in erased]
        receipt.record("episodes", episodes)
        episode_counts.changed(conn, dataset, -sum(e.status == "completed" for e in erased))
        # Recall's counts of the dataset's words held the thread's: counted again later.
        kept_statistics.thread_erased(conn, dataset)
        receipt.record(
            "scheduled_episodes",
            conn.execute(
                text(
                    "DELETE FROM scheduled_episodes WHERE dataset = :d AND thread_id = :t "
                    "RETURNING thread_id"
                ),
                {"d": dataset, "t": thread_id},
            ).scalars(),
        )
        if locked is not None:
            receipt.record(
                "threads",
                conn.execute(
                    text(
                        "DELETE FROM threads WHERE dataset = :d AND thread_id = :t "
                        "RETURNING thread_id"
                    ),
                    {"d": dataset, "t": thread_id},
                ).scalars(),
            )
    return episodes


def _pseudonymise_audit(conn: Connection, dataset: str | None, targets: list[str]) -> int:
    """Audit events keep what was done, not whom it concerned."""
    n = 0
    if targets:
        # The pseudonyms are made here, not in SQL: the same digest, and Citus (where the
        # audit log is a coordinator-local table) refuses convert_to() in a write.
        n += conn.execute(
            text(
                "UPDATE audit_events a SET target = m.alias "
                "FROM unnest(CAST(:targets AS text[]), CAST(:aliases AS text[])) AS m(t, alias) "
                "WHERE a.target = m.t"
            ),
            {"targets": targets, "aliases": [pseudonym(t) for t in targets]},
        ).rowcount
    if dataset is not None:
        name, alias = json.dumps(dataset), json.dumps(pseudonym(dataset))
        n += conn.execute(
            text(
                "UPDATE audit_events SET dataset = CASE WHEN dataset = :d THEN :p "
                "ELSE dataset END, details = replace(details::text, :name, :alias)::jsonb "
                "WHERE dataset = :d OR strpos(details::text, :name) > 0"
            ),
            {"d": dataset, "p": pseudonym(dataset), "name": name, "alias": alias},
        ).rowcount
    return int(n)


def _scrub_keys(conn: Connection, dataset: str) -> int:
    """API keys lose the erased dataset from their scope; a key left with no dataset is
    revoked (it would otherwise reach a new dataset of the same name). Two statements, the
    revocation first: Citus (where ``api_keys`` is a reference table) refuses a clock
    inside the CASE that one statement would need."""
    params = {"d": dataset, "p": pseudonym(dataset)}
    conn.execute(
        text(
            f"UPDATE api_keys SET revoked_at = {or_now('revoked_at')} "
            "WHERE datasets = ARRAY[CAST(:d AS text)]"
        ),
        params,
    )
    return int(
        conn.execute(
            text(
                "UPDATE api_keys SET "
                "datasets = CASE WHEN datasets = ARRAY[CAST(:d AS text)] THEN ARRAY[:p] "
                "  ELSE array_remove(datasets, CAST(:d AS text)) END "
                "WHERE CAST(:d AS text) = ANY(datasets)"
            ),
            params,
        ).rowcount
    )


def _advisory_key(dataset: str) -> int:
    return zlib.crc32(f"episodic erase {dataset}".encode()) - 2**31


def erase_dataset(
    engine: Engine,
    dataset: str,
    *,
    actor: str,
    batch_rows: int = 2000,
    progress: Callable[[Receipt], None] | None = None,
) -> Receipt:
    """Erases every row of ``dataset`` and its data key; returns the sealed receipt.
    NotFound when nothing of it is stored; ErasureInProgress when another eraser holds it."""
    receipt = Receipt(receipt_id=str(uuid.uuid4()), scope="dataset", dataset=dataset)
    with engine.connect() as lock_conn:
        # A session's advisory lock outlives transactions: held in autocommit, the lock's
        # connection waits idle outside any transaction while the erase runs on others.
        # Inside one (SQLAlchemy begins it), idle_in_transaction_session_timeout (60 s)
        # ended the session mid-erase: the lock was gone, and the unlock's error replaced
        # the receipt of an erase that had finished.
        lock_conn = lock_conn.execution_options(isolation_level="AUTOCOMMIT")
        key = _advisory_key(dataset)
        if not lock_conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar():
            raise ErasureInProgress(
                f"dataset {dataset!r} is being erased by another call; its receipt will be "
                "in the audit log (action dataset.erase)",
                dataset=dataset,
            )
        try:
            with engine.begin() as conn:
                receipt.started_at = _now(conn)
                # Waits for CreateThreads holding the dataset row; later ones are refused.
                marked = conn.execute(
                    text(
                        f"UPDATE datasets SET erasing_since = {or_now('erasing_since')}, "
                        "updated_at = now() WHERE dataset = :d RETURNING key_id"
                    ),
                    {"d": dataset},
                ).first()
            if marked is None:
                raise NotFound(
                    f"dataset {dataset!r} holds nothing (never written, or already erased)",
                    dataset=dataset,
                )
            targets: list[str] = []
            while True:
                with engine.begin() as conn:
                    batch = list(
                        conn.execute(
                            text(
                                "SELECT thread_id FROM threads WHERE dataset = :d "
                                "ORDER BY thread_id LIMIT 100"
                            ),
                            {"d": dataset},
                        ).scalars()
                    )
                    conn.execute(  # the eraser's heartbeat (resume_stalled reads it)
                        text("UPDATE datasets SET updated_at = now() WHERE dataset = :d"),
                        {"d": dataset},
                    )
                if not batch:
                    break
                for thread_id in batch:
                    targets.append(str(thread_id))
                    targets.extend(
                        _erase_one_thread(engine, None, dataset, thread_id, receipt, batch_rows)
                    )
                if progress is not None:
                    progress(receipt)
            while True:  # events without a thread (RecordEvent refuses an erasing dataset)
                with engine.begin() as conn:
                    gone_events = events.erase_dataset_events(conn, dataset, batch_rows)
                receipt.record("events", gone_events)
                if len(gone_events) < batch_rows:
                    break
            with engine.begin() as conn:
                receipt.api_keys_scrubbed = _scrub_keys(conn, dataset)
                receipt.audit_events_pseudonymised = _pseudonymise_audit(conn, dataset, targets)
                for table, identities in entities.erase_dataset_canon(conn, dataset).items():
                    receipt.record(table, identities)
                receipt.record("procedures", procedures.erase_dataset_procedures(conn, dataset))
                gone = conn.execute(
                    text("DELETE FROM datasets WHERE dataset = :d RETURNING key_id"),
                    {"d": dataset},
                ).first()
                receipt.record("datasets", [dataset] if gone is not None else [])
                receipt.data_key_destroyed = gone is not None and gone[0] is not None
                receipt.finished_at = _now(conn)
                receipt.seal()
                audit.record(
                    conn,
                    key_prefix=actor,
                    action="dataset.erase",
                    dataset=pseudonym(dataset),
                    details=receipt.as_record(),
                )
        finally:
            try:
                lock_conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
            except DBAPIError as err:  # the session is gone, and its lock with it
                log.warning("could not release the erase lock of a dataset: %s", err)
    metrics.erasure_finished("dataset", receipt.rows)
    return receipt


def erase_thread(
    engine: Engine,
    thread_id: uuid.UUID,
    *,
    dataset: str,
    actor: str,
    vault: Vault | None = None,
    batch_rows: int = 2000,
) -> Receipt:
    """Erases one thread of ``dataset`` (the caller's routing lookup found it) and
    everything derived from it; returns the sealed receipt."""
    with engine.connect() as conn:
        exists = conn.execute(
            text("SELECT 1 FROM threads WHERE dataset = :d AND thread_id = :t"),
            {"d": dataset, "t": thread_id},
        ).first()
        started = _now(conn)
    if exists is None:
        raise NotFound(f"thread {thread_id} does not exist", thread_id=str(thread_id))
    receipt = Receipt(
        receipt_id=str(uuid.uuid4()),
        scope="thread",
        dataset=dataset,
        thread_id=str(thread_id),
        started_at=started,
    )
    erased = _erase_one_thread(engine, vault, dataset, thread_id, receipt, batch_rows)
    targets = [str(thread_id), *erased]
    with engine.begin() as conn:
        receipt.record("entity_aliases", entities.forget_unmentioned(conn, dataset))
        receipt.audit_events_pseudonymised = _pseudonymise_audit(conn, None, targets)
        receipt.finished_at = _now(conn)
        receipt.seal()
        audit.record(
            conn,
            key_prefix=actor,
            action="thread.erase",
            dataset=dataset,
            target=pseudonym(str(thread_id)),
            details=receipt.as_record(),
        )
    metrics.erasure_finished("thread", receipt.rows)
    return receipt


def erase_threads(
    engine: Engine,
    threads: list[tuple[uuid.UUID, str]],
    receipt: Receipt,
    batch_rows: int,
    *,
    vault: Vault | None = None,
) -> None:
    """Erases ``threads`` ((thread id, dataset) pairs) into ``receipt`` (retention purges);
    the audit log keeps referring to them (a purge is policy, not a request to forget)."""
    for thread_id, dataset in threads:
        _erase_one_thread(engine, vault, dataset, thread_id, receipt, batch_rows)
    for dataset in sorted(
        {d for _, d in threads}
    ):  # names only the purged threads used go with them
        with engine.begin() as conn:
            receipt.record("entity_aliases", entities.forget_unmentioned(conn, dataset))


def resume_stalled(engine: Engine, *, actor: str, batch_rows: int) -> list[Receipt]:
    """Finishes erasures a crash interrupted (datasets still ``erasing`` whose eraser has
    not moved for :data:`STALL_AFTER`)."""
    with engine.connect() as conn:
        stalled = list(
            conn.execute(
                text(
                    across_datasets("the lifecycle sweep finds interrupted erasures")
                    + "SELECT dataset FROM datasets WHERE erasing_since IS NOT NULL "
                    "AND updated_at < now() - :after"
                ),
                {"after": STALL_AFTER},
            ).scalars()
        )
    done = []
    for dataset in stalled:
        try:
            done.append(erase_dataset(engine, dataset, actor=actor, batch_rows=batch_rows))
        except (ErasureInProgress, NotFound):
            continue
    return done
