"""The episode state machine: every state change of an episode, one statement each.

Two independent status columns (seed 000, "Status lifecycle")::

    status:          pending ─► processing ─► completed ─► archived (superseded / deleted)
                        ▲            │
                        └── retry ◄──┴──► failed (retries used up; admin retry → pending)

    semantic_status: pending ─► processing ─► completed | skipped | failed
                     (claimable once summarisation completed)

The transitions, in the order an episode meets them:

=========================  =====================================================  ========
transition                 statement                                              used by
=========================  =====================================================  ========
:func:`open_episode`       INSERT pending over the thread's uncaptured messages   Scheduler
:func:`claim_pending`      pending (due) → processing, CTE + SKIP LOCKED          Summariser
:func:`complete`           processing (mine) → completed; others → archived       Summariser
:func:`record_failure`     processing (mine) → pending (backoff) or failed        Summariser
:func:`renew_claims`       processing (mine): claimed_at = now(), still working   Summariser
:func:`release_claims`     processing (mine) → pending, no retry counted          Summariser
:func:`reclaim_orphaned`   processing (stale) → pending or failed                 Scheduler
:func:`retry_episode`      failed → pending, retries reset (admin)                Scheduler
:func:`delete_episode`     any → archived (soft delete, admin)                    Scheduler
:func:`claim_semantic`     semantic pending → processing                          Summariser
:func:`finish_semantic`    semantic processing (mine) → completed/skipped/failed  Summariser
=========================  =====================================================  ========

Every function takes an open SQLAlchemy connection inside a transaction (READ COMMITTED,
the PostgreSQL default); committing is the caller's job. Every transition is one
state-guarded ``UPDATE … WHERE <expected state> … RETURNING`` on the database clock, and the
caller learns from the returned row (or its absence) whether it won: a worker whose claim
was reclaimed, released or deleted meanwhile writes nothing. ``now`` is the injected clock
(see :mod:`episodic.store.sql`).

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

A window holds at most :data:`MAX_WINDOW_MESSAGES` messages and :data:`MAX_WINDOW_BYTES`
bytes of stored content: a longer stretch is opened as several consecutive windows in the
same transaction, under the same lock (:func:`open_episodes`).

Windows are permanent. An episode that failed for good (``failed``), or was soft-deleted
(``archived``), KEEPS its window: ``captured_sequence`` is never rolled back, and the next
episode starts after it. Nothing is lost by that: summarisation reads the thread before the
window (its newest 400,000 characters), so the next episode's rolling summary still covers
the failed window's messages; only that
window's key learnings and semantic extraction wait until an operator retries it
(:func:`retry_episode` re-processes exactly the same window). Re-capturing the messages in
a later window instead would make two episodes extract the same messages, which is what
windows exist to prevent.

One current episode per thread
------------------------------
:func:`complete` serialises on the thread row, archives the thread's other completed
episode and completes this one in one transaction; if a *newer* window of the thread
completed first (an out-of-order finish), this one goes straight to ``archived``: a
thread's one current episode is always its latest window. A partial unique index backs it.

Retries
-------
:func:`record_failure` puts a processing episode back to ``pending`` with an exponential
backoff (``backoff * 2^retry_count``, capped) until ``retry_count`` would exceed
``max_retries``; then it is ``failed`` with the error kept. :func:`reclaim_orphaned`
treats a processing claim older than the reclaim timeout as a failed attempt of a lost
worker (same bound). :func:`retry_episode` (admin) is the only way out of ``failed``.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, RowMapping, text

from episodic.crypto import DatasetKey, seal_json
from episodic.errors import FailedPrecondition, describe_error
from episodic.store.distribution import across_datasets
from episodic.store.owners import episode_not_found
from episodic.store.shards import read_every_shard, run_in_groups, shard_groups
from episodic.store.sql import DUE_NOW, NOW
from episodic.telemetry import current_trace_context

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
#: The most messages one episode's window holds, and the most bytes of stored content
#: (issue 49: one thread of 133,000 messages made one window, and summarising it took
#: 6.9 GB). A longer stretch of conversation becomes several consecutive episodes, opened
#: together: the thread's current episode is the last, and the summary rolls over the
#: earlier ones as it does over any earlier window. A claimed window is summarised whole
#: before the worker takes another dataset's turn, so its size is what another dataset's
#: small episode may wait behind (bench/resilience/work_attacks.py: 20,000 messages delayed one by
#: 2.6 s with 500, 6.4 s with 2,000). 256 KiB, not the 2 MiB it was: 500 messages of 4 KB
#: are 2 MiB, and a giant thread's 2 MiB windows kept a victim's episode waiting 10-15 s
#: each (load ~10) against 1.7-2.4 s with 256 KiB (docs/benchmarks.md); an LLM is sent
#: at most EPISODIC_LLM_MAX_INPUT_CHARS (24,000 by default) of a window anyway.
MAX_WINDOW_MESSAGES = 500
MAX_WINDOW_BYTES = 256 * 1024

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


@dataclass(frozen=True)
class EpisodeToOpen:
    """One thread to open an episode on (see :func:`open_episodes`)."""

    dataset: str
    thread_id: uuid.UUID
    trigger: str
    #: None: the current span's context (so the summariser's span links back to the trigger).
    trace_context: dict[str, str] | None = None


def open_episode(
    conn: Connection,
    thread_id: uuid.UUID,
    trigger: str,
    now: datetime | None = None,
    *,
    trace_context: dict[str, str] | None = None,
    dataset: str,
) -> RowMapping | None:
    """Opens a pending episode over the thread's uncaptured messages, if it has any:
    :func:`open_episodes` for one thread. Returns the new episode row, or None when the
    thread has nothing uncaptured (or does not exist)."""
    opened = open_episodes(conn, [EpisodeToOpen(dataset, thread_id, trigger, trace_context)], now)
    return opened.get(thread_id)


def open_episodes(
    conn: Connection, wanted: Sequence[EpisodeToOpen], now: datetime | None = None
) -> dict[uuid.UUID, RowMapping]:
    """Opens a pending episode over each thread's uncaptured messages, if it has any; returns
    the new episode rows by thread (threads with nothing uncaptured, or gone, are absent).
    Waits for the threads' row locks (bounded by the session's ``lock_timeout``); the
    Scheduler's firing, which must not wait, uses :func:`open_episodes_unless_locked`.

    A thread whose window's first or last message is gone is being erased (the erasure
    deletes its messages in slices before it takes the thread's row): nothing is opened
    for it, as for a thread with nothing uncaptured.

    Takes the threads' row locks (held until the caller commits), so a message committed
    before the lock is in the window and one committed after it is not — it stays
    uncaptured for the next episode. The locks are taken in ``thread_id`` order, the one
    lock order of every writer that locks several threads: two replicas firing overlapping
    batches, or a batch and Ingest's writers (one thread each), wait for each other but
    cannot deadlock. Six statements whatever the number of threads: the locks, then the
    windows, the episodes, the counters, the episodes read back and the notices
    (:func:`_open_windows`; a stretch longer than one window's cap repeats all but the
    locks).

    An explicit episode honours the checkpoint: when an EndThread is owed
    (``end_requested_sequence`` beyond what is captured), its window ends where the
    EndThread was made, however late the episode is opened (the Scheduler was down, the
    call was lost); messages written after the EndThread wait for their own trigger.
    """
    return _open_episodes(conn, wanted, now, skip_locked=False)[0]


def open_episodes_unless_locked(
    conn: Connection, wanted: Sequence[EpisodeToOpen], now: datetime | None = None
) -> tuple[dict[uuid.UUID, RowMapping], set[uuid.UUID]]:
    """:func:`open_episodes` without waiting for any thread: a thread whose row another
    session holds is skipped (``SKIP LOCKED``). Returns the episodes opened by thread and
    the threads skipped (held by someone else; gone threads are not in it).

    What holds a thread's row for long is never a reason to stop every other dataset's
    episodes: a writer holds it for milliseconds, but a frozen process inside a
    transaction, or anyone's psql, may hold it for ever. The caller retries a skipped
    thread on a later pass."""
    return _open_episodes(conn, wanted, now, skip_locked=True)


def _open_episodes(
    conn: Connection, wanted: Sequence[EpisodeToOpen], now: datetime | None, *, skip_locked: bool
) -> tuple[dict[uuid.UUID, RowMapping], set[uuid.UUID]]:
    by_thread: dict[uuid.UUID, EpisodeToOpen] = {}
    for item in wanted:
        if item.trigger not in TRIGGERS:
            raise ValueError(f"unknown trigger {item.trigger!r}")
        by_thread.setdefault(item.thread_id, item)
    if not by_thread:
        return {}, set()
    groups = shard_groups(conn, {item.dataset for item in by_thread.values()})
    if len(groups) > 1:  # Citus: each statement below stays on one shard, group by group
        all_opened: dict[uuid.UUID, RowMapping] = {}
        all_skipped: set[uuid.UUID] = set()
        for group in groups:
            members = [item for item in by_thread.values() if item.dataset in group]
            got, held = _open_episodes(conn, members, now, skip_locked=skip_locked)
            all_opened.update(got)
            all_skipped |= held
        return all_opened, all_skipped
    # Every statement names the batch's datasets as constants (``dataset = ANY(:batch)``),
    # so it reaches their partitions only: one for a single thread's episode.
    batch = sorted({item.dataset for item in by_thread.values()})
    spans = (
        across_datasets("a batch of fired timers opens episodes in the datasets it came from")
        if len(batch) > 1
        else ""
    )
    ids = sorted(by_thread)
    # The locks first, in a statement of their own: the next statement's snapshot is taken
    # after they are granted, so it sees every message committed before them (the window's
    # last message included) and none written after.
    counters = {
        row.thread_id: row
        for row in conn.execute(
            text(
                spans + "SELECT t.thread_id, t.captured_sequence, t.last_sequence, "
                "t.end_requested_sequence FROM threads t "
                "JOIN unnest(CAST(:datasets AS text[]), CAST(:ids AS uuid[])) AS w(dataset, tid) "
                "ON t.dataset = w.dataset AND t.thread_id = w.tid "
                "WHERE t.dataset = ANY(:batch) ORDER BY t.thread_id FOR UPDATE OF t"
                + (" SKIP LOCKED" if skip_locked else "")
            ),
            {"datasets": [by_thread[t].dataset for t in ids], "ids": ids, "batch": batch},
        )
    }
    locked = set(counters)
    skipped: set[uuid.UUID] = set()
    if skip_locked and len(locked) < len(ids):
        # Not locked: held by another session, or gone. A held row is still visible.
        absent = [t for t in ids if t not in locked]
        skipped = set(
            conn.execute(
                text(
                    spans + "SELECT t.thread_id FROM threads t JOIN unnest("
                    "CAST(:datasets AS text[]), CAST(:ids AS uuid[])) AS w(dataset, tid) "
                    "ON t.dataset = w.dataset AND t.thread_id = w.tid "
                    "WHERE t.dataset = ANY(:batch)"
                ),
                {"datasets": [by_thread[t].dataset for t in absent], "ids": absent, "batch": batch},
            ).scalars()
        )
        # Only the threads this transaction holds get an episode.
        ids = [t for t in ids if t in locked]
        if not ids:
            return {}, skipped
    current = current_trace_context() or None
    traces: dict[uuid.UUID, str | None] = {}
    for thread_id in ids:
        context = by_thread[thread_id].trace_context
        context = context if context is not None else current
        traces[thread_id] = json.dumps(context) if context else None
    # Where each thread's stretch ends (what the statement's CASE computes, read under the
    # same locks): a stretch longer than one window's cap becomes several episodes, opened
    # here one after the other until the stretch is covered.
    ids = [t for t in ids if t in counters]  # gone threads get nothing
    goals = {t: _window_goal(by_thread[t].trigger, counters[t]) for t in ids}
    opened: dict[uuid.UUID, RowMapping] = {}
    wanted_now = ids
    while wanted_now:
        rows = _open_windows(conn, wanted_now, by_thread, traces, batch, spans, now)
        opened.update((r["thread_id"], r) for r in rows)
        wanted_now = [r["thread_id"] for r in rows if r["end_sequence"] < goals[r["thread_id"]]]
    return opened, skipped


def _window_goal(trigger: str, thread: Any) -> int:
    """Where the stretch ``trigger`` closes on ``thread`` (its locked counters) ends: at an
    owed EndThread's checkpoint for an explicit episode, else at the last message."""
    end_requested = thread.end_requested_sequence
    if (
        trigger == "explicit"
        and end_requested is not None
        and thread.captured_sequence < end_requested < thread.last_sequence
    ):
        return int(end_requested)
    return int(thread.last_sequence)


def _open_windows(
    conn: Connection,
    ids: Sequence[uuid.UUID],
    by_thread: dict[uuid.UUID, EpisodeToOpen],
    traces: dict[uuid.UUID, str | None],
    batch: list[str],
    spans: str,
    now: datetime | None,
) -> list[RowMapping]:
    """One window per thread of ``ids`` (whose rows the caller locked), at most
    :data:`MAX_WINDOW_MESSAGES` messages and :data:`MAX_WINDOW_BYTES` bytes long.

    Four statements whatever the number of threads, each on the batch's datasets only: the
    windows (read under the caller's locks), the episodes, the threads' captured counters
    and the episodes read back with their threads' labels; then the summarisers' wake-up
    notices. One data-modifying statement did all of it once, but Citus plans such a chain
    as subplans whose intermediate results go to every worker, so one worker down stopped
    every dataset's episodes (tests/test_one_shard.py checks no per-dataset statement is
    split so). The counter update only touches rows the caller already locked, so it takes
    no lock of its own."""
    params = {"batch": batch, "now": now}
    windows = conn.execute(
        text(spans + _WINDOWS_SQL),
        {
            **params,
            "datasets": [by_thread[t].dataset for t in ids],
            "ids": list(ids),
            "triggers": [by_thread[t].trigger for t in ids],
            "traces": [traces[t] for t in ids],
            "max_messages": MAX_WINDOW_MESSAGES,
            "max_bytes": MAX_WINDOW_BYTES,
        },
    ).all()
    if not windows:
        return []
    columns = {
        name: [getattr(w, name) for w in windows]
        for name in ("dataset", "tid", "trig", "trace", "s", "e", "lo", "hi")
    }
    opened = conn.execute(text(spans + _INSERT_EPISODES_SQL), {**params, **columns}).all()
    conn.execute(text(spans + _CAPTURE_SQL), {**params, **columns})
    episode_ids = [row.episode_id for row in opened]
    rows = list(
        conn.execute(
            text(
                spans + f"SELECT {episode_columns('e', 'ANY(:batch)')} FROM episodes e "
                "WHERE e.dataset = ANY(:batch) AND e.episode_id = ANY(:episodes)"
            ),
            {**params, "episodes": episode_ids},
        )
        .mappings()
        .all()
    )
    # Delivered when the caller commits (a notice sent inside a statement Citus runs on a
    # worker reaches no Summariser, so the coordinator's session sends them, after).
    notify_episodes(conn, episode_ids)
    return rows


#: The windows of a batch: for each locked thread (``:datasets``, ``:ids``, with its
#: trigger and trace) with something uncaptured, from the first uncaptured message as far
#: towards the goal as the caps allow, and at least one message (a single message over
#: the byte cap is a window of its own).
_WINDOWS_SQL = (
    "WITH g AS ("
    "  SELECT t.dataset, t.thread_id AS tid, u.trig, u.trace, "
    "    t.captured_sequence + 1 AS s, "
    # An explicit episode ends at the EndThread's checkpoint when one is owed (as
    # _window_goal reads it).
    "    CASE WHEN u.trig = 'explicit' "
    "      AND t.end_requested_sequence > t.captured_sequence "
    "      AND t.end_requested_sequence < t.last_sequence "
    "      THEN t.end_requested_sequence ELSE t.last_sequence END AS goal "
    "  FROM threads t JOIN unnest(CAST(:datasets AS text[]), CAST(:ids AS uuid[]), "
    "    CAST(:triggers AS text[]), CAST(:traces AS text[])) "
    "    AS u(dataset, tid, trig, trace) "
    "    ON t.dataset = u.dataset AND t.thread_id = u.tid "
    "  WHERE t.dataset = ANY(:batch) AND t.last_sequence > t.captured_sequence), "
    # octet_length reads a stored value's size without detoasting it.
    "w AS ("
    "  SELECT g.*, coalesce((SELECT max(x.sequence) FROM ("
    "    SELECT m.sequence, "
    "      sum(octet_length(m.content)) OVER (ORDER BY m.sequence) AS total "
    "    FROM messages m WHERE m.dataset = ANY(:batch) AND m.dataset = g.dataset "
    "      AND m.thread_id = g.tid "
    "      AND m.sequence BETWEEN g.s AND least(g.goal, g.s + :max_messages - 1)"
    "    ) x WHERE x.total <= :max_bytes), g.s) AS e "
    "  FROM g), "
    "b AS ("
    "  SELECT w.*, "
    "  (SELECT created_at FROM messages WHERE dataset = ANY(:batch) "
    "    AND dataset = w.dataset AND thread_id = w.tid AND sequence = w.s) AS first_at, "
    "  (SELECT created_at FROM messages WHERE dataset = ANY(:batch) "
    "    AND dataset = w.dataset AND thread_id = w.tid AND sequence = w.e) AS last_at, "
    # The span is when the window's messages were written, earliest to latest: backfilled
    # messages (client created_at) may come in any order, and the times of the first and
    # last by sequence made a reversed span that as_of and since/until then read wrongly.
    "  span.lo, span.hi FROM w CROSS JOIN LATERAL ("
    "    SELECT min(m.created_at) AS lo, max(m.created_at) AS hi FROM messages m "
    "    WHERE m.dataset = ANY(:batch) AND m.dataset = w.dataset "
    "      AND m.thread_id = w.tid AND m.sequence BETWEEN w.s AND w.e) AS span) "
    # A window whose first or last message is gone belongs to a thread being erased (its
    # messages go in slices before its row, which is what the caller holds; compaction
    # drops captured messages only): nothing to open.
    "SELECT dataset, tid, trig, trace, s, e, lo, hi FROM b "
    "WHERE first_at IS NOT NULL AND last_at IS NOT NULL"
)

#: The windows' episodes. Claimable at once, whether the injected clock is ahead of or
#: behind the database's (a replayed past must not hide new work from live workers).
_INSERT_EPISODES_SQL = (
    "INSERT INTO episodes (episode_id, thread_id, dataset, trigger, start_sequence, "
    "end_sequence, message_count, started_at, ended_at, trace_context, next_attempt_at, "
    "created_at, updated_at) "
    "SELECT gen_random_uuid(), w.tid, w.dataset, w.trig, w.s, w.e, w.e - w.s + 1, w.lo, w.hi, "
    f"CAST(w.trace AS jsonb), {DUE_NOW}, now(), now() "
    "FROM unnest(CAST(:dataset AS text[]), CAST(:tid AS uuid[]), CAST(:trig AS text[]), "
    "CAST(:trace AS text[]), CAST(:s AS bigint[]), CAST(:e AS bigint[]), "
    "CAST(:lo AS timestamptz[]), CAST(:hi AS timestamptz[])) "
    "AS w(dataset, tid, trig, trace, s, e, lo, hi) "
    "RETURNING dataset, episode_id"
)

#: The threads' captured counters, at their windows' ends.
_CAPTURE_SQL = (
    "UPDATE threads t SET captured_sequence = w.e "
    "FROM unnest(CAST(:dataset AS text[]), CAST(:tid AS uuid[]), CAST(:e AS bigint[])) "
    "AS w(dataset, tid, e) "
    "WHERE t.dataset = ANY(:batch) AND t.dataset = w.dataset AND t.thread_id = w.tid"
)


def claim_pending(
    conn: Connection, worker: str, limit: int, now: datetime | None = None
) -> list[RowMapping]:
    """Claims up to ``limit`` due pending episodes for ``worker``: one statement (a CTE with
    ``FOR NO KEY UPDATE SKIP LOCKED``, so replicas never claim the same row) that writes the
    claimant and the claim time, so the claim outlives the transaction.

    Fair across datasets: each dataset's due episodes take turns — every dataset's oldest
    first, then every dataset's second, … (oldest first within a turn) — so one dataset's
    backlog (a burst of 5,000 threads, a retry storm) delays another dataset's episode by
    one claim, not by the whole backlog. The rows come back in that order too: the worker
    summarises them one after the other."""
    rows = run_in_groups(
        conn,
        across_datasets("the Summariser claims pending episodes of every dataset")
        + f"""
        WITH turns AS (
            SELECT dataset, episode_id, next_attempt_at, created_at,
                row_number() OVER (
                    PARTITION BY dataset ORDER BY next_attempt_at, created_at
                ) AS turn
            FROM episodes
            WHERE IN_GROUP(episodes) AND status = 'pending'
              AND next_attempt_at <= {NOW}
        ),
        due AS (
            SELECT e.dataset, e.episode_id FROM episodes e
            JOIN turns t ON e.dataset = t.dataset AND e.episode_id = t.episode_id
            WHERE IN_GROUP(e) AND e.status = 'pending'
            ORDER BY t.turn, t.next_attempt_at, t.created_at
            LIMIT :limit
            FOR NO KEY UPDATE OF e SKIP LOCKED
        )
        UPDATE episodes e
        SET status = 'processing', claimed_by = :worker,
            claimed_at = now(),
            updated_at = now()
        FROM due WHERE IN_GROUP(e) AND e.dataset = due.dataset
          AND e.episode_id = due.episode_id AND e.status = 'pending'
        RETURNING e.*
        """,
        {"worker": worker, "limit": limit, "now": now},
        # Citus: the datasets with the longest-waiting episodes, a shard at a time.
        discover=across_datasets("the Summariser looks for datasets with episodes due")
        + f"SELECT dataset FROM episodes WHERE status = 'pending' AND next_attempt_at <= {NOW} "
        "GROUP BY dataset ORDER BY min(next_attempt_at) LIMIT :limit",
        limit=limit,
    )
    return in_turns(rows, key=lambda r: (r["next_attempt_at"], r["created_at"]))


def in_turns(rows: Sequence[RowMapping], key: Any) -> list[RowMapping]:
    """``rows`` in the order of fair turns: each dataset's first (by ``key``), then each
    dataset's second, …; within a turn, by ``key``."""
    by_dataset: dict[str, list[RowMapping]] = {}
    for row in sorted(rows, key=key):
        by_dataset.setdefault(row["dataset"], []).append(row)
    ordered = [
        (turn, key(row), row) for group in by_dataset.values() for turn, row in enumerate(group)
    ]
    ordered.sort(key=lambda item: (item[0], item[1]))
    return [row for _, _, row in ordered]


def any_due(
    conn: Connection, now: datetime | None = None, *, excluding: Sequence[str] = ()
) -> bool:
    """Whether some episode is due for a worker to claim (what :func:`claim_pending` would
    find, rows another worker is claiming included), of a dataset not in ``excluding``.

    The Summariser asks it between slices of its chunk index and between extractions, which
    yield to a due episode; and, with ``excluding`` its batch's datasets, before a second
    turn of a dataset in a batch, which it hands back when another dataset is waiting
    (:func:`hand_back`). An index-only probe of ``episodes_pending_idx`` per partition."""
    return bool(
        read_every_shard(
            conn,
            across_datasets("the Summariser asks whether any dataset has an episode due")
            + f"SELECT dataset FROM episodes WHERE status = 'pending' "
            f"AND next_attempt_at <= {NOW} AND NOT (dataset = ANY(:excluding)) LIMIT 1",
            {"now": now, "excluding": list(excluding)},
        )
    )


def hand_back(
    conn: Connection,
    claimed: Sequence[RowMapping],
    worker: str,
    *,
    delay: timedelta | None = None,
) -> int:
    """Hands processing claims of this worker back without counting a retry; returns how
    many it still held. With no ``delay``, as they were (due when they were due), so the
    next claim orders them with the other datasets' episodes again (each dataset's oldest
    first); with one, due again after it: the episode could not be written right now for
    a reason that is nobody's fault (its dataset's language is being switched, a row it
    needs is held by another session). Per dataset: one shard each on Citus."""
    handed = 0
    by_dataset: dict[str, list[Any]] = {}
    for episode in claimed:
        by_dataset.setdefault(episode["dataset"], []).append(episode["episode_id"])
    due_again = "" if delay is None else "next_attempt_at = now() + :delay, "
    for dataset, ids in sorted(by_dataset.items()):
        handed += conn.execute(
            text(
                "UPDATE episodes SET status = 'pending', claimed_by = NULL, claimed_at = NULL, "
                f"{due_again}updated_at = now() WHERE dataset = :dataset "
                "AND episode_id = ANY(:ids) AND status = 'processing' AND claimed_by = :worker"
            ),
            {"dataset": dataset, "ids": ids, "worker": worker, "delay": delay},
        ).rowcount
    return handed


def claim_semantic(conn: Connection, worker: str, limit: int) -> list[RowMapping]:
    """Semantic extraction only starts once summarisation succeeded (completed_at is set;
    an episode superseded right at completion is archived but did complete). Nothing here
    is time-dependent, so there is no injected clock."""
    return run_in_groups(
        conn,
        across_datasets("the Summariser claims pending extractions of every dataset")
        + """
        WITH due AS (
            SELECT dataset, episode_id FROM episodes
            WHERE IN_GROUP(episodes) AND semantic_status = 'pending'
              AND completed_at IS NOT NULL AND status IN ('completed', 'archived')
            ORDER BY completed_at
            LIMIT :limit
            FOR NO KEY UPDATE SKIP LOCKED
        )
        UPDATE episodes e
        SET semantic_status = 'processing', semantic_claimed_by = :worker,
            semantic_claimed_at = now(),
            updated_at = now()
        FROM due WHERE IN_GROUP(e) AND e.dataset = due.dataset
          AND e.episode_id = due.episode_id AND e.semantic_status = 'pending'
        RETURNING e.*
        """,
        {"worker": worker, "limit": limit},
        discover=across_datasets("the Summariser looks for datasets with extractions due")
        + "SELECT dataset FROM episodes WHERE semantic_status = 'pending' "
        "AND completed_at IS NOT NULL AND status IN ('completed', 'archived') "
        "GROUP BY dataset ORDER BY min(completed_at) LIMIT :limit",
        limit=limit,
    )


def renew_claims(conn: Connection, worker: str) -> int:
    """The worker's heartbeat: every claim it holds (summarisation and semantic) is fresh
    again, so the reclaim sweep — which takes claims older than the reclaim timeout —
    never takes work from a worker that is alive, however long a batch or an LLM call.
    On Citus shard by shard, the shards of a worker that is down left out."""
    return _update_my_claims(
        conn,
        worker,
        "UPDATE episodes SET claimed_at = now() "
        "WHERE IN_GROUP(episodes) AND status = 'processing' AND claimed_by = :w",
        "UPDATE episodes SET semantic_claimed_at = now() WHERE IN_GROUP(episodes) "
        "AND semantic_status = 'processing' AND semantic_claimed_by = :w",
        across_datasets("a Summariser worker renews its claims, whatever their dataset"),
    )


def release_claims(conn: Connection, worker: str) -> int:
    """Hands this worker's claims back (graceful shutdown): no retry is counted."""
    released = _update_my_claims(
        conn,
        worker,
        "UPDATE episodes SET status = 'pending', claimed_by = NULL, claimed_at = NULL, "
        "next_attempt_at = now(), updated_at = now() "
        "WHERE IN_GROUP(episodes) AND status = 'processing' AND claimed_by = :w",
        "UPDATE episodes SET semantic_status = 'pending', semantic_claimed_by = NULL, "
        "semantic_claimed_at = NULL, updated_at = now() WHERE IN_GROUP(episodes) "
        "AND semantic_status = 'processing' AND semantic_claimed_by = :w",
        across_datasets("a stopping Summariser worker releases its claims"),
    )
    if released:
        notify_episodes(conn, ["released"])
    return released


def _update_my_claims(
    conn: Connection, worker: str, summarising: str, extracting: str, marker: str
) -> int:
    """Runs ``summarising`` and ``extracting`` (UPDATEs of ``worker``'s claims, with
    ``IN_GROUP(episodes)`` filters) over every dataset; returns the rows they changed. One
    statement each on one PostgreSQL; on Citus one per shard holding a claim of the worker
    (:func:`episodic.store.shards.run_in_groups`: a worker that is down fails no other)."""
    changed = 0
    for statement, which in ((summarising, "claimed_by"), (extracting, "semantic_claimed_by")):
        changed += len(
            run_in_groups(
                conn,
                marker + statement + " RETURNING episode_id",
                {"w": worker},
                discover=across_datasets("a Summariser worker finds the datasets of its claims")
                + f"SELECT DISTINCT dataset FROM episodes WHERE {which} = :w",
            )
        )
    return changed


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
    if final_status == "completed":
        conn.execute(
            text(
                "UPDATE episodes SET status = 'archived', updated_at = now() "
                "WHERE dataset = :d AND thread_id = :t AND status = 'completed' "
                "AND episode_id <> :id"
            ),
            {"d": dataset, "t": episode["thread_id"], "id": episode["episode_id"]},
        )
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
    return row if row is not None else get_episode(conn, episode_id, dataset=dataset)
