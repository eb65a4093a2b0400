"""Opening episodes: the windows of a thread's uncaptured messages (see "Windows" in
:mod:`episodic.store.episodes`). Under the thread row's lock, a stretch is cut into windows
of at most :data:`MAX_WINDOW_MESSAGES` messages and :data:`MAX_WINDOW_BYTES` bytes, inserted
as pending episodes, and ``captured_sequence`` moves to the last window's end; a batch of
fired timers opens its threads dataset group by dataset group. A test that changes a cap
sets it on this module, which reads it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, RowMapping, text

from episodic.store.distribution import across_datasets
from episodic.store.episode_states import TRIGGERS, episode_columns, notify_episodes
from episodic.store.shards import shard_groups
from episodic.store.sql import DUE_NOW
from episodic.telemetry import current_trace_context

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
