"""When episodes are created: timers, triggers, catch-up, backstop and leases, free of gRPC.

Design
======

State. ``threads.last_sequence`` is the highest message sequence; ``captured_sequence`` the
end of the last episode window opened on the thread; ``end_requested_sequence`` the
``last_sequence`` at the last EndThread (an explicit episode is owed while it exceeds
``captured_sequence``). ``scheduled_episodes`` holds at most one timer per thread: when it
fires, the trigger it fires with, a ``version`` bumped by every touch, and the claim
(``claimed_at``/``claimed_by``) of the replica firing it.

Opening an episode, whatever the trigger, is :func:`episodic.store.episodes.open_episode`:
under the thread's row lock (the lock Ingest's writers take), window =
``captured_sequence + 1 .. last_sequence``; that makes ``captured_sequence`` authoritative
and windows contiguous and disjoint across any number of replicas.

Triggers.
1. Explicit — :func:`request_episode` opens the episode at once and drops the thread's
   unclaimed timer (nothing is uncaptured after the open, under the same lock).
2. New thread — :func:`record_thread_started` pulls the timer of every sibling thread of the
   dataset that has uncaptured messages to at most ``now + sibling_pull_forward`` (never
   later; a claimed timer is left to its firer). A sibling with uncaptured messages but no
   timer (a lost notice) gets one. Siblings with nothing uncaptured are untouched.
3. Inactivity — :func:`record_activity` upserts ``fire_at = now + auto_episode_interval``,
   bumps ``version`` and clears any claim, so a burst keeps pushing one deadline out. An
   owed explicit timer that is not being fired keeps its (earlier) deadline.
4. Backstop — :func:`backstop_candidates` / :func:`backstop_thread` open an episode directly for threads quiet for
   ``backstop_quiet_period`` with uncaptured messages and no timer (a singleton sweep).

Firing. :func:`claim_due_timers` claims due, unclaimed timers in one statement (CTE with
``FOR NO KEY UPDATE SKIP LOCKED``, writing ``claimed_at``/``claimed_by`` and returning the
``version`` seen). :func:`fire_timers` then, in one transaction per claimed batch, opens the
episodes (thread locks, taken in thread_id order) and deletes each timer only ``WHERE
claimed_by = me AND version = claimed version`` (timer locks, in thread_id order);
:func:`fire_timer` is the same for one timer.
A message arriving meanwhile is either committed before the thread lock (it is in the
window) or after it (it is not, and stays uncaptured); its RecordActivity bumps the version
and clears the claim, so the delete matches nothing and the timer survives with its new
deadline (or, arriving while the firing holds the thread's row, waits for it and arms a new
timer) — the message is neither lost nor swallowed.

Catch-up. Ingest's notices are best-effort (a down Scheduler must not fail a write), so
:func:`catch_up` — run at startup and periodically on every replica — creates a timer for
every thread with uncaptured messages and no timer: due now with trigger ``explicit`` when
an EndThread is owed (``end_requested_sequence > captured_sequence``), else at
``last_message_at + auto_episode_interval``. It reads the partial index
``threads_uncaptured_idx`` and locks the candidate threads ``FOR SHARE SKIP LOCKED``: a
thread whose episode is being opened (or which is being written) right now is skipped, and
a thread locked after its opener committed is re-checked on its new row version, so the
catch-up never makes a timer for messages an in-flight episode is capturing; its second
statement (an owed EndThread's timer made due now) skips timers locked by others too, as it
already holds the timers the first inserted (no deadlock with RecordThreadStarted). A timer that
outlives its messages (say a RecordActivity arriving after an explicit episode captured
them) fires empty and is dropped. A lost RecordThreadStarted is not replayed: the siblings then fire at their idle
deadline instead (at most ``auto_episode_interval`` later); nothing is lost.

Orphans. A replica that dies holding timer claims leaves claimed rows: the reclaim sweep
unclaims those older than ``orphan_reclaim_after`` (:func:`reclaim_timers`), and their
firers' guarded deletes then fail harmlessly. Stuck episode claims are reclaimed by
:func:`episodic.store.episodes.reclaim_orphaned`. On SIGTERM a replica releases
its claims and leases at once (:func:`release_claims`, :func:`release_leases`).

Leases. Singleton sweeps (reclaim, backstop) run on one replica at a time: a replica runs
one only if :func:`acquire_lease` returns the lease row (free, expired or already its own,
judged on the database clock — never the injected clock, a lease is about live replicas).
``last_run_at`` on the lease row carries the sweep's cadence across leaders.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, RowMapping, text

from episodic.config import SchedulerSettings
from episodic.store import episodes
from episodic.store.distribution import across_datasets
from episodic.store.owners import thread_not_found
from episodic.store.shards import read_every_shard, run_in_groups, shard_groups
from episodic.store.sql import DUE_NOW, NOW, or_now, pick_time
from episodic.telemetry import current_trace_context


def _trace_json(context: dict[str, str] | None) -> str | None:
    return json.dumps(context) if context else None


# ---------------------------------------------------------------------------------------
# Notices from Ingest (triggers 1-3)


def record_activity(
    conn: Connection,
    thread_id: uuid.UUID,
    settings: SchedulerSettings,
    now: datetime | None = None,
    *,
    dataset: str,
) -> datetime:
    """Trigger 3: (re)arms the thread's idle timer at ``now + auto_episode_interval``.

    Bumping ``version`` and clearing the claim tells a replica firing the old deadline that
    new activity arrived: its guarded delete fails and the timer survives. Returns fire_at;
    NOT_FOUND when the thread is gone, also when it is erased while this runs.

    Two steps, so that re-arming an existing timer (nearly every call) takes no thread
    lock — it must not wait for a firing that holds the thread's row — while creating one
    cannot meet an erasure halfway: the timer alone is updated first; only when there is
    none (or it was deleted meanwhile, by an erasure or a firing), the thread's row is
    key-share locked, then the timer is inserted (see :func:`record_thread_started` for
    the lock order). An erasure holding the thread makes that wait and then find no row:
    NOT_FOUND, never a timer insert failing its foreign key.
    """
    params = {
        "dataset": dataset,
        "id": thread_id,
        "interval": settings.auto_episode_interval,
        "trace": _trace_json(current_trace_context()),
        "now": now,
    }
    # An owed explicit episode keeps its deadline unless it is being fired right now (then
    # the firing captures up to some message and the rest waits for idleness).
    explicit_kept = "s.trigger = 'explicit' AND s.claimed_at IS NULL"
    row = conn.execute(
        text(
            "UPDATE scheduled_episodes s SET "
            # CASE WHEN kept THEN LEAST(fire_at, new) ELSE new END, without the CASE (Citus
            # refuses a clock inside one): LEAST(kept ? fire_at : infinity, new).
            "fire_at = LEAST((ARRAY[CAST('infinity' AS timestamptz), s.fire_at])"
            f"[1 + CAST(({explicit_kept}) AS integer)], {NOW} + :interval), "
            f"trigger = CASE WHEN {explicit_kept} THEN 'explicit' ELSE 'inactivity' END, "
            "version = s.version + 1, claimed_at = NULL, claimed_by = NULL, "
            "trace_context = CAST(:trace AS jsonb), updated_at = now() "
            "WHERE s.dataset = :dataset AND s.thread_id = :id RETURNING fire_at"
        ),
        params,
    ).first()
    if row is not None:
        return row[0]
    row = conn.execute(
        text(
            "INSERT INTO scheduled_episodes AS s (thread_id, dataset, fire_at, trigger, "
            "trace_context, created_at, updated_at) "
            f"SELECT thread_id, dataset, {NOW} + :interval, 'inactivity', "
            "CAST(:trace AS jsonb), now(), now() FROM threads "
            # The thread's key lock before its timer (the lock the timer's foreign key takes
            # anyway, taken first).
            "WHERE dataset = :dataset AND thread_id = :id FOR KEY SHARE "
            # Another notice (or the catch-up) may have created the timer since the update.
            "ON CONFLICT (dataset, thread_id) DO UPDATE SET "
            f"fire_at = CASE WHEN {explicit_kept} "
            "  THEN LEAST(s.fire_at, excluded.fire_at) ELSE excluded.fire_at END, "
            f"trigger = CASE WHEN {explicit_kept} THEN 'explicit' ELSE 'inactivity' END, "
            "version = s.version + 1, claimed_at = NULL, claimed_by = NULL, "
            "trace_context = excluded.trace_context, updated_at = excluded.updated_at "
            "RETURNING fire_at"
        ),
        params,
    ).first()
    if row is None:
        raise thread_not_found(thread_id)
    return row[0]


def record_thread_started(
    conn: Connection,
    thread_id: uuid.UUID,
    settings: SchedulerSettings,
    now: datetime | None = None,
    *,
    dataset: str,
) -> int:
    """Trigger 2: pulls sibling timers forward to at most ``now + sibling_pull_forward``.

    Only siblings with uncaptured messages; never pushes a deadline later; leaves a timer
    being fired alone. Returns how many timers were pulled forward (or created for a
    sibling whose activity notice was lost). NOT_FOUND when the thread itself is gone (also
    when it is erased while this runs).

    Lock order. Every writer of timers takes a thread's row lock before its timer's, and
    several of them in ``thread_id`` order: :func:`fire_timers` (every thread of the batch
    ``FOR UPDATE``, then their timers), :func:`request_episode`, the erasure and
    :func:`record_activity` (one thread, then its timer), :func:`catch_up` (threads
    ``FOR SHARE SKIP LOCKED``, then timers; its second statement skips locked timers).
    This one does the same: the thread's own row ``FOR KEY SHARE`` first (waiting for an
    erasure, which then answers NOT_FOUND), then in one statement, in ``thread_id``
    order, each sibling's row ``FOR KEY SHARE SKIP LOCKED`` and then its timer. A sibling
    whose row is locked ``FOR UPDATE`` is skipped, and skipping is right for every holder:
    a firing (its timer is claimed, which this leaves alone anyway) or RequestEpisode
    (either captures what is uncaptured and decides the timer), an erasure (the thread is
    going), a writer (its RecordActivity sets the deadline next anyway). So this never
    waits for a thread lock while holding a timer — the inverse order, timers then the
    threads' key locks (the foreign key checks of the inserted timers at the end of the
    statement), deadlocked with the sweep — and the timers it does wait for are never
    those of a thread another transaction holds ``FOR UPDATE`` while waiting for timers:
    the key lock this holds keeps such a transaction out of the thread.
    """
    own = conn.execute(
        text("SELECT 1 FROM threads WHERE dataset = :dataset AND thread_id = :id FOR KEY SHARE"),
        {"dataset": dataset, "id": thread_id},
    ).first()
    if own is None:
        raise thread_not_found(thread_id)
    rows = conn.execute(
        text(
            "INSERT INTO scheduled_episodes AS s (thread_id, dataset, fire_at, trigger, "
            "trace_context, created_at, updated_at) "
            f"SELECT t.thread_id, t.dataset, {NOW} + :pull, 'new_thread', "
            "CAST(:trace AS jsonb), now(), now() "
            "FROM threads t WHERE t.dataset = :dataset AND t.thread_id <> :id "
            "AND t.last_sequence > t.captured_sequence "
            # One lock order for every multi-row timer writer (no deadlocks between them):
            # each sibling's row (locked after the sort), then its timer.
            "ORDER BY t.thread_id FOR KEY SHARE OF t SKIP LOCKED "
            "ON CONFLICT (dataset, thread_id) DO UPDATE SET fire_at = excluded.fire_at, "
            "trigger = 'new_thread', updated_at = excluded.updated_at "
            "WHERE s.claimed_at IS NULL AND s.fire_at > excluded.fire_at "
            "RETURNING s.thread_id"
        ),
        {
            "id": thread_id,
            "dataset": dataset,
            "pull": settings.sibling_pull_forward,
            "trace": _trace_json(current_trace_context()),
            "now": now,
        },
    ).all()
    return len(rows)


@dataclass(frozen=True)
class RequestResult:
    episode: RowMapping | None  # None: nothing uncaptured, nothing queued


def request_episode(
    conn: Connection,
    thread_id: uuid.UUID,
    trigger: str = "explicit",
    now: datetime | None = None,
    *,
    dataset: str,
) -> RequestResult:
    """Trigger 1 (and manual requests): opens an episode over the uncaptured messages now
    (an explicit one up to the EndThread's checkpoint).

    The thread stays writable. When nothing is uncaptured after the open (under the thread
    lock), the thread's unclaimed timer has nothing left to do and is dropped; a later
    message re-arms it. Messages after the checkpoint keep their idle timer. A timer being
    fired is left to its firer (it will find nothing and drop it).
    """
    thread = conn.execute(
        text("SELECT 1 FROM threads WHERE dataset = :dataset AND thread_id = :id FOR UPDATE"),
        {"dataset": dataset, "id": thread_id},
    ).first()
    if thread is None:
        raise thread_not_found(thread_id)
    episode = episodes.open_episode(conn, thread_id, trigger, now, dataset=dataset)
    conn.execute(
        text(
            "DELETE FROM scheduled_episodes s USING threads t "
            "WHERE s.dataset = :dataset AND s.thread_id = :id AND s.claimed_at IS NULL "
            "AND t.dataset = :dataset AND t.thread_id = s.thread_id "
            "AND t.last_sequence <= t.captured_sequence"
        ),
        {"dataset": dataset, "id": thread_id},
    )
    return RequestResult(episode=episode)


# ---------------------------------------------------------------------------------------
# Firing timers


@dataclass(frozen=True)
class ClaimedTimer:
    thread_id: uuid.UUID
    version: int
    trigger: str
    fire_at: datetime
    trace_context: dict[str, str] | None
    dataset: str  # routes every later statement on the timer to its dataset's partition
    lag: timedelta = timedelta(0)  # how late the claim came, on the database clock


def claim_due_timers(
    conn: Connection, worker: str, limit: int, now: datetime | None = None
) -> list[ClaimedTimer]:
    """Claims up to ``limit`` due, unclaimed timers for ``worker`` in one statement.

    The CTE with ``SKIP LOCKED`` picks rows no other replica is claiming; the claim itself
    (claimed_at, claimed_by) is persisted by the same statement, because SKIP LOCKED
    protects nothing after commit. Commit before firing, so other replicas skip them.
    """
    rows = run_in_groups(
        conn,
        across_datasets("the Scheduler claims due timers of every dataset") + "WITH due AS ("
        "  SELECT dataset, thread_id FROM scheduled_episodes "
        f"  WHERE IN_GROUP(scheduled_episodes) AND claimed_at IS NULL AND fire_at <= {NOW} "
        "  ORDER BY fire_at LIMIT :limit FOR NO KEY UPDATE SKIP LOCKED) "
        "UPDATE scheduled_episodes s SET claimed_at = now(), claimed_by = :me, "
        "updated_at = now() "
        "FROM due WHERE IN_GROUP(s) AND s.dataset = due.dataset AND s.thread_id = due.thread_id "
        "AND s.claimed_at IS NULL "
        # The lag is computed here from the claim's stamp: Citus allows no clock in a
        # RETURNING clause.
        "RETURNING s.dataset, s.thread_id, s.version, s.trigger, s.fire_at, s.trace_context, "
        "s.claimed_at",
        {"me": worker, "limit": limit, "now": now},
        discover=across_datasets("the Scheduler looks for datasets with due timers")
        + "SELECT dataset FROM scheduled_episodes "
        f"WHERE claimed_at IS NULL AND fire_at <= {NOW} "
        "GROUP BY dataset ORDER BY min(fire_at) LIMIT :limit",
        limit=limit,
    )
    return [
        ClaimedTimer(
            thread_id=r["thread_id"],
            version=r["version"],
            trigger=r["trigger"],
            fire_at=r["fire_at"],
            trace_context=r["trace_context"],
            lag=(now if now is not None else r["claimed_at"]) - r["fire_at"],
            dataset=r["dataset"],
        )
        for r in rows
    ]


@dataclass(frozen=True)
class FireResult:
    episode: RowMapping | None  # the episode opened, if the thread had uncaptured messages
    timer_deleted: bool  # False: new activity re-armed the timer (or the claim was lost)
    #: Another session held the thread's row: nothing was opened, and the timer was handed
    #: back due again ``FIRE_RETRY_DELAY`` later (see :func:`fire_timers`).
    deferred: bool = False


#: How much later a timer whose thread another session holds is due again. Writers and
#: completions hold a thread for milliseconds, so one second later it is nearly always
#: free; a thread held for longer (a frozen process inside a transaction, until PostgreSQL
#: ends its session; someone's psql) costs one cheap skip per second, for that thread only.
FIRE_RETRY_DELAY = timedelta(seconds=1)


def fire_timer(
    conn: Connection, timer: ClaimedTimer, worker: str, now: datetime | None = None
) -> FireResult:
    """Fires one claimed timer (call in its own transaction).

    Opens the episode first — taking the thread lock, which orders this against writers —
    then deletes the timer only if it is still ours at the version we claimed.
    """
    # The firing span if tracing is on (it links to the write that armed the timer),
    # otherwise the write's own context stored on the timer.
    context = current_trace_context() or timer.trace_context
    episode = episodes.open_episode(
        conn, timer.thread_id, timer.trigger, now, trace_context=context, dataset=timer.dataset
    )
    return FireResult(episode=episode, timer_deleted=finish_timer(conn, timer, worker))


def fire_timers(
    conn: Connection, timers: list[ClaimedTimer], worker: str, now: datetime | None = None
) -> list[FireResult]:
    """Fires a batch of claimed timers in one transaction (call in its own); the results
    are in the order of ``timers``.

    The same two steps as :func:`fire_timer`, set-wise: open the episodes (every thread lock,
    in thread_id order, :func:`episodic.store.episodes.open_episodes`), then delete the
    timers still ours at the claimed version (their rows locked in thread_id order too).
    Every lock is taken in one order — threads by id, then timers by id — and every other
    writer takes a thread's lock before its timer's, one thread or several in that same
    order (:func:`record_thread_started`, which skips a thread locked ``FOR UPDATE``, so it
    never touches a timer of a batch being fired), or skips locked rows
    (:func:`claim_due_timers`, :func:`catch_up`), so the batch cannot deadlock with them;
    that is what makes one transaction per batch safe where the first version needed one
    per timer.
    A message arriving meanwhile behaves exactly as with :func:`fire_timer`.

    No firing waits for a thread: a thread whose row another session holds is skipped
    (:func:`episodic.store.episodes.open_episodes_unless_locked`) and its timer handed back,
    due again :data:`FIRE_RETRY_DELAY` later (:func:`defer_timers`). One stuck session — a
    frozen process inside a transaction, a debugger, anyone's ``BEGIN; SELECT … FOR
    UPDATE`` — delays that one thread's episode, never the batch, never another dataset.
    """
    if not timers:
        return []
    groups = shard_groups(conn, {t.dataset for t in timers})
    if len(groups) > 1:  # Citus: each statement below stays on one shard, group by group
        fired: dict[int, FireResult] = {}
        for group in groups:
            members = [t for t in timers if t.dataset in group]
            for timer, result in zip(members, fire_timers(conn, members, worker, now), strict=True):
                fired[id(timer)] = result
        return [fired[id(t)] for t in timers]
    # The firing span if tracing is on (it links to the writes that armed the timers),
    # otherwise each write's own context stored on its timer.
    context = current_trace_context() or None
    opened, held = episodes.open_episodes_unless_locked(
        conn,
        [
            episodes.EpisodeToOpen(t.dataset, t.thread_id, t.trigger, context or t.trace_context)
            for t in timers
        ],
        now,
    )
    deferred = defer_timers(conn, worker, [t for t in timers if t.thread_id in held], now)
    timers_fired = [t for t in timers if t.thread_id not in held]
    if not timers_fired:
        return [FireResult(None, False, deferred=t.thread_id in deferred) for t in timers]
    deleted = _delete_fired(conn, worker, timers_fired)
    return [
        FireResult(
            opened.get(t.thread_id), t.thread_id in deleted, deferred=t.thread_id in deferred
        )
        for t in timers
    ]


def _delete_fired(conn: Connection, worker: str, timers: list[ClaimedTimer]) -> set[uuid.UUID]:
    """Deletes the fired timers still ours at the claimed version; returns their threads."""
    datasets = sorted({t.dataset for t in timers})
    deleted = set(
        conn.execute(
            text(
                (
                    across_datasets("a batch of claimed timers spans the datasets it came from")
                    if len(datasets) > 1
                    else ""
                )
                + "DELETE FROM scheduled_episodes s USING ("
                "  SELECT se.dataset, se.thread_id FROM scheduled_episodes se "
                "  JOIN unnest(CAST(:datasets AS text[]), CAST(:ids AS uuid[]), "
                "    CAST(:versions AS bigint[])) AS d(dataset, thread_id, version) "
                "    ON se.dataset = d.dataset AND se.thread_id = d.thread_id "
                "    AND se.version = d.version "
                # The datasets as constants too: the planner prunes to their partitions.
                "  WHERE se.dataset = ANY(:batch) AND se.claimed_by = :me "
                "  ORDER BY se.thread_id FOR UPDATE OF se) mine "
                "WHERE s.dataset = ANY(:batch) AND s.dataset = mine.dataset "
                "AND s.thread_id = mine.thread_id RETURNING s.thread_id"
            ),
            {
                "datasets": [t.dataset for t in timers],
                "ids": [t.thread_id for t in timers],
                "versions": [t.version for t in timers],
                "batch": datasets,
                "me": worker,
            },
        ).scalars()
    )
    return deleted


def defer_timers(
    conn: Connection, worker: str, timers: list[ClaimedTimer], now: datetime | None = None
) -> set[uuid.UUID]:
    """Hands back claimed timers this worker could not fire now (their thread was held by
    another session), due again :data:`FIRE_RETRY_DELAY` later — on the injected clock when
    there is one, so a forced pass at ``as_of`` does not claim them again at once. Only a
    timer still ours at the claimed version: new activity meanwhile already re-armed it.
    Returns the threads whose timers were deferred."""
    if not timers:
        return set()
    datasets = sorted({t.dataset for t in timers})
    return set(
        conn.execute(
            text(
                (
                    across_datasets("a batch of claimed timers spans the datasets it came from")
                    if len(datasets) > 1
                    else ""
                )
                + "UPDATE scheduled_episodes s SET claimed_at = NULL, claimed_by = NULL, "
                f"fire_at = GREATEST(s.fire_at, {NOW} + :delay), updated_at = now() "
                "FROM unnest(CAST(:datasets AS text[]), CAST(:ids AS uuid[]), "
                "  CAST(:versions AS bigint[])) AS d(dataset, thread_id, version) "
                "WHERE s.dataset = ANY(:batch) AND s.dataset = d.dataset "
                "AND s.thread_id = d.thread_id AND s.version = d.version "
                "AND s.claimed_by = :me RETURNING s.thread_id"
            ),
            {
                "datasets": [t.dataset for t in timers],
                "ids": [t.thread_id for t in timers],
                "versions": [t.version for t in timers],
                "batch": datasets,
                "me": worker,
                "delay": FIRE_RETRY_DELAY,
                "now": now,
            },
        ).scalars()
    )


def finish_timer(conn: Connection, timer: ClaimedTimer, worker: str) -> bool:
    """Deletes a fired timer if it is still ours at the claimed version. False when new
    activity re-armed it meanwhile (it survives with the new deadline) or the claim was
    reclaimed."""
    deleted = conn.execute(
        text(
            "DELETE FROM scheduled_episodes WHERE dataset = :dataset AND thread_id = :id "
            "AND claimed_by = :me AND version = :version"
        ),
        {"id": timer.thread_id, "me": worker, "version": timer.version, "dataset": timer.dataset},
    ).rowcount
    return deleted == 1


def unclaim_timers(conn: Connection, worker: str, timers: list[ClaimedTimer]) -> int:
    """Gives back claimed timers this worker will not fire (e.g. on shutdown)."""
    if not timers:
        return 0
    groups = shard_groups(conn, {t.dataset for t in timers})
    if len(groups) > 1:  # Citus: one shard per statement
        return sum(
            unclaim_timers(conn, worker, [t for t in timers if t.dataset in group])
            for group in groups
        )
    datasets = sorted({t.dataset for t in timers})
    return conn.execute(
        text(
            (
                across_datasets("a batch of claimed timers spans the datasets it came from")
                if len(datasets) > 1
                else ""
            )
            + "WITH mine AS ("
            "  SELECT se.dataset, se.thread_id FROM scheduled_episodes se "
            "  JOIN unnest(CAST(:datasets AS text[]), CAST(:ids AS uuid[])) AS u(dataset, id) "
            "    ON se.dataset = u.dataset AND se.thread_id = u.id "
            "  WHERE se.dataset = ANY(:batch) AND se.claimed_by = :me "
            # Timers in thread_id order, like every multi-row timer writer.
            "  ORDER BY se.thread_id FOR UPDATE OF se) "
            "UPDATE scheduled_episodes s SET claimed_at = NULL, claimed_by = NULL "
            "FROM mine WHERE s.dataset = ANY(:batch) AND s.dataset = mine.dataset "
            "AND s.thread_id = mine.thread_id AND s.claimed_by = :me"
        ),
        {
            "datasets": [t.dataset for t in timers],
            "ids": [t.thread_id for t in timers],
            "batch": datasets,
            "me": worker,
        },
    ).rowcount


def next_due_in(conn: Connection) -> float | None:
    """Seconds (database clock) until the earliest unclaimed timer is due; None if none."""
    # One minimum per shard when a Citus worker is down (read_every_shard): their least.
    found = [
        float(due)
        for due in read_every_shard(
            conn,
            across_datasets("the Scheduler's next deadline, over every dataset")
            + "SELECT extract(epoch FROM min(fire_at) - now()) FROM scheduled_episodes "
            "WHERE claimed_at IS NULL",
        )
        if due is not None
    ]
    return min(found, default=None)


# ---------------------------------------------------------------------------------------
# Sweeps


def catch_up(
    conn: Connection,
    settings: SchedulerSettings,
    now: datetime | None = None,
    limit: int = 1000,
) -> int:
    """Creates timers for threads with uncaptured messages and no timer (lost notices), and
    makes an owed explicit episode (EndThread whose RequestEpisode was lost) due now.

    Candidates come from the partial index ``threads_uncaptured_idx`` and are locked
    ``FOR SHARE SKIP LOCKED``: threads being written or having an episode opened right now
    are skipped (the next pass sees their committed state), and a row that changed since
    the statement's snapshot is re-checked on its new version. Returns timers created.
    """
    created = run_in_groups(
        conn,
        across_datasets("the Scheduler's catch-up sweep finds threads of every dataset")
        + "WITH cand AS ("
        "  SELECT t.thread_id, t.dataset, "
        "    t.end_requested_sequence > t.captured_sequence AS owed, t.last_message_at "
        "  FROM threads t "
        "  WHERE IN_GROUP(t) AND t.last_sequence > t.captured_sequence "
        "  AND NOT EXISTS (SELECT 1 FROM scheduled_episodes s WHERE IN_GROUP(s) "
        "                  AND s.dataset = t.dataset AND s.thread_id = t.thread_id) "
        "  ORDER BY t.last_message_at LIMIT :limit "
        "  FOR SHARE OF t SKIP LOCKED) "
        "INSERT INTO scheduled_episodes (thread_id, dataset, fire_at, trigger, created_at, "
        "updated_at) "
        "SELECT thread_id, dataset, "
        # CASE WHEN owed THEN due ELSE coalesce(last_message_at, now()) + interval END,
        # written without CASE and COALESCE: Citus refuses a clock inside them.
        f"  {pick_time('owed', DUE_NOW, or_now('last_message_at') + ' + :interval')}, "
        "  (ARRAY['inactivity', 'explicit'])[1 + CAST(owed AS integer)], "
        "  now(), now() "
        "FROM cand ORDER BY thread_id "
        "ON CONFLICT (dataset, thread_id) DO NOTHING RETURNING thread_id",
        {"interval": settings.auto_episode_interval, "now": now, "limit": limit},
        discover=across_datasets("the catch-up sweep looks for datasets with threads to time")
        + "SELECT DISTINCT t.dataset FROM threads t "
        "WHERE t.last_sequence > t.captured_sequence "
        "AND NOT EXISTS (SELECT 1 FROM scheduled_episodes s "
        "                WHERE s.dataset = t.dataset AND s.thread_id = t.thread_id) "
        "LIMIT :limit",
        limit=limit,
    )
    # An EndThread whose RequestEpisode was lost, on a thread that already has an idle
    # timer: make that timer due now as an explicit one, or the checkpoint would wait for
    # (and be merged into) the next idle episode.
    owed = run_in_groups(
        conn,
        across_datasets("the Scheduler's catch-up sweep finds threads of every dataset")
        + "WITH cand AS ("
        "  SELECT t.dataset, t.thread_id FROM threads t "
        "  JOIN scheduled_episodes se "
        "    ON se.dataset = t.dataset AND se.thread_id = t.thread_id "
        "  WHERE IN_GROUP(t) AND IN_GROUP(se) AND t.last_sequence > t.captured_sequence "
        "  AND t.end_requested_sequence > t.captured_sequence "
        "  AND se.claimed_at IS NULL "
        f"  AND (se.trigger <> 'explicit' OR se.fire_at > {DUE_NOW}) "
        "  ORDER BY t.thread_id LIMIT :limit "
        # The timers too are skipped when locked: this transaction already holds the
        # timers the first statement inserted, so waiting here for a timer (say one
        # RecordThreadStarted holds while it waits for one of those) would deadlock.
        # A skipped timer is being written right now; the next pass sees it.
        "  FOR SHARE OF t SKIP LOCKED FOR UPDATE OF se SKIP LOCKED) "
        f"UPDATE scheduled_episodes s SET fire_at = {DUE_NOW}, trigger = 'explicit', "
        "version = s.version + 1, updated_at = now() "
        "FROM cand WHERE IN_GROUP(s) AND s.dataset = cand.dataset "
        "AND s.thread_id = cand.thread_id AND s.claimed_at IS NULL "
        f"AND (s.trigger <> 'explicit' OR s.fire_at > {DUE_NOW}) "
        "RETURNING s.thread_id",
        {"now": now, "limit": limit},
        discover=across_datasets("the catch-up sweep looks for datasets with owed episodes")
        + "SELECT DISTINCT t.dataset FROM threads t "
        "JOIN scheduled_episodes se ON se.dataset = t.dataset AND se.thread_id = t.thread_id "
        "WHERE t.last_sequence > t.captured_sequence "
        "AND t.end_requested_sequence > t.captured_sequence AND se.claimed_at IS NULL "
        f"AND (se.trigger <> 'explicit' OR se.fire_at > {DUE_NOW}) LIMIT :limit",
        limit=limit,
    )
    return len(created) + len(owed)


def backstop_candidates(
    conn: Connection,
    settings: SchedulerSettings,
    now: datetime | None = None,
    limit: int = 1000,
) -> list[tuple[str, uuid.UUID]]:
    """Threads quiet for ``backstop_quiet_period`` with uncaptured messages and no timer,
    as (dataset, thread_id)."""
    rows = conn.execute(
        text(
            across_datasets("the Scheduler's backstop sweep finds threads of every dataset")
            + "SELECT t.dataset, t.thread_id FROM threads t "
            "WHERE t.last_sequence > t.captured_sequence "
            f"AND t.last_message_at < {NOW} - :quiet "
            "AND NOT EXISTS (SELECT 1 FROM scheduled_episodes s "
            "  WHERE s.dataset = t.dataset AND s.thread_id = t.thread_id) "
            "ORDER BY t.last_message_at LIMIT :limit"
        ),
        {"quiet": settings.backstop_quiet_period, "now": now, "limit": limit},
    ).all()
    return [(r[0], r[1]) for r in rows]


def backstop_thread(
    conn: Connection,
    thread_id: uuid.UUID,
    settings: SchedulerSettings,
    now: datetime | None = None,
    *,
    dataset: str,
) -> RowMapping | None:
    """Trigger 4 for one candidate (own transaction): re-checks the conditions under the
    thread lock, then opens the episode. A thread another session holds is skipped (None),
    not waited for: the sweep goes on with the other candidates, and the next pass sees it
    again."""
    still = conn.execute(
        text(
            "SELECT 1 FROM threads t WHERE t.dataset = :dataset AND t.thread_id = :id "
            "AND t.last_sequence > t.captured_sequence "
            f"AND t.last_message_at < {NOW} - :quiet "
            "AND NOT EXISTS (SELECT 1 FROM scheduled_episodes s "
            "  WHERE s.dataset = t.dataset AND s.thread_id = t.thread_id) "
            "FOR UPDATE OF t SKIP LOCKED"
        ),
        {"dataset": dataset, "id": thread_id, "quiet": settings.backstop_quiet_period, "now": now},
    ).first()
    if still is None:
        return None
    return episodes.open_episode(conn, thread_id, "backstop", now, dataset=dataset)


def reclaim_timers(
    conn: Connection, older_than: timedelta, now: datetime | None = None, limit: int = 1000
) -> int:
    """Unclaims timers whose claim is older than ``older_than`` (their replica died).

    The dead firer's guarded delete (claimed_by = me) can no longer match, so whichever
    replica claims the timer next fires it; at worst it fires empty and is dropped.
    """
    return len(
        run_in_groups(
            conn,
            across_datasets("the Scheduler reclaims orphaned timers of every dataset")
            + "WITH stale AS ("
            "  SELECT dataset, thread_id FROM scheduled_episodes "
            f"  WHERE IN_GROUP(scheduled_episodes) AND claimed_at IS NOT NULL "
            f"  AND claimed_at < {NOW} - :after "
            "  ORDER BY thread_id LIMIT :limit FOR NO KEY UPDATE SKIP LOCKED) "
            "UPDATE scheduled_episodes s SET claimed_at = NULL, claimed_by = NULL, "
            "updated_at = now() "
            "FROM stale WHERE IN_GROUP(s) AND s.dataset = stale.dataset "
            "AND s.thread_id = stale.thread_id "
            f"AND s.claimed_at < {NOW} - :after RETURNING s.thread_id",
            {"after": older_than, "now": now, "limit": limit},
            discover=across_datasets("the Scheduler looks for datasets with orphaned timers")
            + "SELECT DISTINCT dataset FROM scheduled_episodes "
            f"WHERE claimed_at IS NOT NULL AND claimed_at < {NOW} - :after",
            limit=limit,
        )
    )


def release_claims(conn: Connection, worker: str) -> int:
    """On shutdown: every timer this replica claimed becomes claimable again at once."""
    return len(
        run_in_groups(
            conn,
            across_datasets("a stopping Scheduler releases its claims, whatever the dataset")
            + "WITH mine AS (SELECT dataset, thread_id FROM scheduled_episodes "
            "  WHERE IN_GROUP(scheduled_episodes) AND claimed_by = :me "
            "  ORDER BY thread_id FOR UPDATE) "
            "UPDATE scheduled_episodes s SET claimed_at = NULL, claimed_by = NULL "
            "FROM mine WHERE IN_GROUP(s) AND s.dataset = mine.dataset "
            "AND s.thread_id = mine.thread_id AND s.claimed_by = :me "
            "RETURNING s.thread_id",
            {"me": worker},
            discover=across_datasets("a stopping Scheduler finds the datasets of its claims")
            + "SELECT DISTINCT dataset FROM scheduled_episodes WHERE claimed_by = :me",
        )
    )


# ---------------------------------------------------------------------------------------
# Leases (database clock only)


@dataclass(frozen=True)
class Lease:
    name: str
    last_run_at: datetime | None
    db_now: datetime

    def due(self, interval: timedelta) -> bool:
        return self.last_run_at is None or self.db_now - self.last_run_at >= interval


def acquire_lease(conn: Connection, name: str, holder: str, ttl: timedelta) -> Lease | None:
    """Takes or renews lease ``name`` for ``ttl`` if it is free, expired or already ours.
    None when another live replica holds it.

    An update of the lease's row, and an insert only the first time a name is used: not
    one upsert, because Citus (where ``leases`` was a reference table) allows no clock in an
    upsert's conflict condition nor in a RETURNING clause. The database's now is the new
    expiry less the ttl."""
    params = {"name": name, "holder": holder, "ttl": ttl}
    row = conn.execute(
        text(
            "UPDATE leases SET holder = :holder, expires_at = now() + :ttl "
            "WHERE name = :name AND (expires_at < now() OR holder = :holder) "
            "RETURNING last_run_at, expires_at"
        ),
        params,
    ).first()
    if row is None:
        row = conn.execute(
            text(
                "INSERT INTO leases (name, holder, expires_at) "
                "VALUES (:name, :holder, now() + :ttl) "
                "ON CONFLICT (name) DO NOTHING RETURNING last_run_at, expires_at"
            ),
            params,
        ).first()
    if row is None:
        return None
    return Lease(name=name, last_run_at=row[0], db_now=row[1] - ttl)


def renew_lease(conn: Connection, name: str, holder: str, ttl: timedelta) -> bool:
    """Extends lease ``name`` by ``ttl`` from now if ``holder`` still holds it (expired or
    not: nobody else took it); False when another replica has taken it meanwhile."""
    return (
        conn.execute(
            text(
                "UPDATE leases SET expires_at = now() + :ttl "
                "WHERE name = :name AND holder = :holder"
            ),
            {"name": name, "holder": holder, "ttl": ttl},
        ).rowcount
        == 1
    )


def mark_lease_run(
    conn: Connection, name: str, holder: str, result: dict[str, object] | None = None
) -> bool:
    """Records that the sweep ran, and what it did (only while we still hold the lease)."""
    return (
        conn.execute(
            text(
                "UPDATE leases SET last_run_at = now(), "
                "last_result = coalesce(CAST(:result AS jsonb), last_result) "
                "WHERE name = :name AND holder = :holder"
            ),
            {
                "name": name,
                "holder": holder,
                "result": json.dumps(result) if result is not None else None,
            },
        ).rowcount
        == 1
    )


def release_leases(conn: Connection, holder: str) -> int:
    """Expires this replica's leases (keeping last_run_at) so another takes over at once."""
    return conn.execute(
        text("UPDATE leases SET expires_at = '-infinity' WHERE holder = :holder"),
        {"holder": holder},
    ).rowcount
