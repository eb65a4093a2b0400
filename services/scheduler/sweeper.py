"""The Scheduler's periodic work: singleton sweeps (orphan reclaim, backstop, lifecycle:
retention, compaction, stalled erasures) under leases, the catch-up, and firing every due
timer.

Every replica runs them in three loop threads, so none of them waits for another:

- ``scheduler.timers`` — the catch-up (when due) and the due timers, every
  ``scheduler_poll_interval`` or sooner when the next timer is due sooner;
- ``scheduler.reclaim`` — the orphan sweep: claims of lost or frozen workers go back;
- ``scheduler.maintenance`` — the backstop, the lifecycle (which may run for minutes) and
  the kept lexical statistics of large datasets (:mod:`episodic.store.kept_statistics`).

A stuck timer therefore never stops the reclaim that would free it, and a long retention
purge never delays an episode. Each loop is watched (:mod:`episodic.loops`): a pass running
longer than ``loop_stall_after`` shows in the health check and the ``episodic.loop.pass.age``
metric.

``RunSweep`` runs a forced pass of all three at an injected time, one after the other. A
forced pass ignores the local cadences and the lease's ``last_run_at`` (the caller asked for
a full pass now) but still needs the lease, so two replicas never run a singleton sweep at
once; the catch-up and timer firing need no lease (``SKIP LOCKED`` claims and the thread
lock keep replicas apart).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

from opentelemetry import trace
from sqlalchemy import Engine

from episodic import loops, metrics
from episodic.config import PrivacySettings, RecallSettings, RecoverySettings, SchedulerSettings
from episodic.errors import describe_error, log_failure
from episodic.store import episodes, kept_statistics, nearest_indexes
from episodic.store.db import is_database_outage, is_lock_conflict
from episodic.store.lifecycle import LifecycleResult, run_lifecycle
from episodic.store.sql import worker_id
from episodic.store.vault import Vault
from episodic.telemetry import link_from

from . import domain

log = logging.getLogger(__name__)
tracer = trace.get_tracer("episodic.scheduler")

RECLAIM_LEASE = "scheduler.reclaim"
BACKSTOP_LEASE = "scheduler.backstop"
LIFECYCLE_LEASE = "scheduler.lifecycle"
STATISTICS_LEASE = "scheduler.statistics"
#: How long one dataset's statistics refresh may run: its count's ceiling, and its count of
#: completed episodes before it (store/kept_statistics.py).
STATISTICS_STEP = kept_statistics.COUNT_CEILING + timedelta(minutes=1)
SWEEP_LIMIT = 1000


#: Most timers fired in one transaction. One transaction per batch is what makes a burst
#: fast: a batch costs three statements and a commit whatever its size, so the per-timer
#: cost falls with the batch (measured in-process on a 2,000-timer burst: 50 per batch
#: ~1,300 timers/s, 250 per batch ~3,000/s). The bound keeps the thread locks a batch holds
#: — which Ingest's writers of those threads wait for, ~20 ms — short, and what a crash
#: rolls back small.
FIRE_BATCH = 250

#: Chunks of one claim fired at the same time, each in its own transaction on its own
#: connection. A firing spends most of its time waiting for the database (py-spy: 84 % of
#: the firing thread in ``Connection.wait``), so two chunks in flight keep both of the
#: database's cores busy. The chunks hold disjoint timers, hence disjoint threads (one
#: timer per thread): they never wait for each other.
FIRE_WORKERS = 2

#: Chunks are not split below this many timers (a transaction has a fixed cost).
MIN_FIRE_CHUNK = 50


def fire_chunks(timers: list[domain.ClaimedTimer]) -> list[list[domain.ClaimedTimer]]:
    """A claim cut into at least ``FIRE_WORKERS`` chunks when it is large enough, each at
    most ``FIRE_BATCH`` timers and at least ``MIN_FIRE_CHUNK`` (but the last)."""
    if not timers:
        return []
    size = min(FIRE_BATCH, max(MIN_FIRE_CHUNK, -(-len(timers) // FIRE_WORKERS)))
    return [timers[i : i + size] for i in range(0, len(timers), size)]


#: The loops of a replica (see the module's docstring), by their health and metric name.
TIMERS_LOOP = "scheduler.timers"
RECLAIM_LOOP = "scheduler.reclaim"
MAINTENANCE_LOOP = "scheduler.maintenance"


@dataclass
class SweepResult:
    episodes_created: int = 0
    timers_dropped: int = 0
    timers_survived: int = 0  # fired, but new activity re-armed them meanwhile
    timers_deferred: int = 0  # their thread was held by another session: due again soon
    timers_caught_up: int = 0
    claims_reclaimed: int = 0
    backstop_episodes: int = 0
    threads_purged: int = 0
    threads_compacted: int = 0
    statistics_refreshed: int = 0  # datasets whose kept lexical statistics were counted

    def __bool__(self) -> bool:
        return any(vars(self).values())


class Sweeper:
    """Runs passes for one replica; thread-safe (the loop and RunSweep calls may overlap)."""

    def __init__(
        self,
        engine: Engine,
        settings: SchedulerSettings,
        worker: str | None = None,
        *,
        recovery: RecoverySettings | None = None,
        privacy: PrivacySettings | None = None,
        vault: Vault | None = None,
        catch_up_interval: timedelta | None = None,
        reclaim_interval: timedelta | None = None,
        statistics_above: int | None = None,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.worker = worker or worker_id()
        self.recovery = recovery or RecoverySettings()
        self.privacy = privacy or PrivacySettings()
        self.vault = vault or Vault(None, encrypt=False)
        #: Datasets of more completed episodes than this are ranked on Recall's approximate
        #: path, which reads their kept statistics: Recall's own threshold by default.
        self.statistics_above = (
            RecallSettings().recall_approximate_above
            if statistics_above is None
            else statistics_above
        )
        # Lost notices only delay an episode, so the catch-up need not run on every pass:
        # a quarter of the idle interval (at most 30 s) keeps the delay small and cheap.
        self.catch_up_interval = catch_up_interval or min(
            settings.auto_episode_interval / 4, timedelta(seconds=30)
        )
        self.reclaim_interval = reclaim_interval or min(
            self.recovery.orphan_reclaim_after / 4, timedelta(seconds=60)
        )
        self._stop = threading.Event()
        self._release_owed = False
        self._threads: list[threading.Thread] = []
        self._state = threading.Lock()
        self._next_check: dict[str, float] = {}
        self._singleton_locks = {
            RECLAIM_LEASE: threading.Lock(),
            BACKSTOP_LEASE: threading.Lock(),
            LIFECYCLE_LEASE: threading.Lock(),
            STATISTICS_LEASE: threading.Lock(),
        }
        self._results: dict[str, dict[str, object]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._indexer: threading.Thread | None = None  # start_nearest_indexes

    # -- one pass ------------------------------------------------------------------------

    def run_pass(self, now: datetime | None = None, *, force: bool = False) -> SweepResult:
        """One pass of each loop, in turn: reclaim; backstop and lifecycle (if this replica
        holds their lease and they are due); the catch-up (if due), then every due timer.
        ``force``: ignore cadences."""
        result = SweepResult()
        self.reclaim_pass(now, force=force, result=result)
        self.maintenance_pass(now, force=force, result=result)
        self.timers_pass(now, force=force, result=result)
        if result:
            log.info("sweep %s", result)
        return result

    def reclaim_pass(
        self, now: datetime | None = None, *, force: bool = False, result: SweepResult
    ) -> None:
        """The orphan sweep, when due and this replica holds its lease."""
        result.claims_reclaimed = self._singleton(
            RECLAIM_LEASE, self.reclaim_interval, force, lambda: self.reclaim(now)
        )

    def maintenance_pass(
        self, now: datetime | None = None, *, force: bool = False, result: SweepResult
    ) -> None:
        """The backstop, the lifecycle and the kept statistics, each when due and this
        replica holds its lease."""
        result.backstop_episodes = self._singleton(
            BACKSTOP_LEASE, self.settings.backstop_interval, force, lambda: self.backstop(now)
        )
        lifecycle = LifecycleResult()

        def apply_lifecycle() -> int:
            nonlocal lifecycle
            lifecycle = self.lifecycle(now)
            self._results[LIFECYCLE_LEASE] = lifecycle.as_record()
            return lifecycle.threads_purged + lifecycle.threads_compacted

        self._singleton(LIFECYCLE_LEASE, self.privacy.lifecycle_interval, force, apply_lifecycle)
        result.threads_purged = lifecycle.threads_purged
        result.threads_compacted = lifecycle.threads_compacted
        if self.settings.statistics_interval.total_seconds() > 0:

            def keep_derived() -> int:  # one lease: the counts, then the indexes beside
                refreshed = self.refresh_statistics()
                self.start_nearest_indexes()
                return refreshed

            result.statistics_refreshed = self._singleton(
                STATISTICS_LEASE, self.settings.statistics_interval, force, keep_derived
            )

    def timers_pass(
        self, now: datetime | None = None, *, force: bool = False, result: SweepResult
    ) -> None:
        """The catch-up (if due), then every due timer."""
        if self._release_owed:  # claims of a batch the database interrupted
            loops.step("release_claims")
            with self.engine.begin() as conn:
                domain.release_claims(conn, self.worker)
            self._release_owed = False
        if force or self._due("catch_up"):
            result.timers_caught_up = self.catch_up(now)
            self._schedule("catch_up", self.catch_up_interval.total_seconds())
        self.fire_due(now, result)

    def catch_up(self, now: datetime | None = None) -> int:
        loops.step("catch_up")
        total = 0
        while True:
            with self.engine.begin() as conn:
                n = domain.catch_up(conn, self.settings, now, limit=SWEEP_LIMIT)
            total += n
            if n < SWEEP_LIMIT or self._stop.is_set():
                return total

    def reclaim(self, now: datetime | None = None) -> int:
        after = self.recovery.orphan_reclaim_after
        loops.step("reclaim_timers")
        with self.engine.begin() as conn:
            timers = domain.reclaim_timers(conn, after, now, limit=SWEEP_LIMIT)
        loops.step("reclaim_orphaned")
        with self.engine.begin() as conn:
            lost = episodes.reclaim_orphaned(
                conn,
                older_than=after,
                max_retries=self.recovery.max_retries,
                now=now,
                limit=SWEEP_LIMIT,
            )
        metrics.claims_reclaimed("timer", timers)
        metrics.claims_reclaimed("episode", lost.requeued + lost.failed)
        metrics.claims_reclaimed("extraction", lost.semantic_requeued)
        if timers or lost.total:
            log.warning("reclaimed %d timer claims and %s from lost workers", timers, lost)
        return timers + lost.total

    def backstop(self, now: datetime | None = None) -> int:
        loops.step("backstop")
        opened = 0
        while not self._stop.is_set():
            with self.engine.connect() as conn:
                candidates = domain.backstop_candidates(conn, self.settings, now, SWEEP_LIMIT)
            for dataset, thread_id in candidates:
                with self.engine.begin() as conn:
                    episode = domain.backstop_thread(
                        conn, thread_id, self.settings, now, dataset=dataset
                    )
                    if episode is not None:
                        opened += 1
            if len(candidates) < SWEEP_LIMIT:
                break
        if opened:
            log.warning("backstop opened %d episodes (threads with no timer)", opened)
        return opened

    def lifecycle(self, now: datetime | None = None) -> LifecycleResult:
        """Retention, compaction and stalled erasures (see :mod:`episodic.store.lifecycle`)."""
        loops.step("lifecycle")
        with tracer.start_as_current_span("lifecycle") as span:
            done = run_lifecycle(
                self.engine, self.vault, self.privacy, actor=f"scheduler:{self.worker}", now=now
            )
            for name, value in done.as_record().items():
                if isinstance(value, int):
                    span.set_attribute(f"episodic.lifecycle.{name}", value)
        return done

    def refresh_statistics(self) -> int:
        """Counts again the kept lexical statistics of every large dataset whose are due
        (:func:`episodic.store.kept_statistics.due`), one transaction each; how many."""
        loops.step("statistics")
        with self.engine.connect() as conn:
            datasets = kept_statistics.due(conn, above=self.statistics_above)
        refreshed = 0
        for dataset in datasets:
            if self._stop.is_set():
                break
            # A large dataset's count runs for minutes (300k episodes: ~4), under a
            # statement ceiling of its own: the maintenance loop is not stalled meanwhile.
            loops.step("statistics", within=STATISTICS_STEP.total_seconds())
            with tracer.start_as_current_span("statistics refresh") as span:
                started = time.monotonic()
                kept = kept_statistics.refresh(self.engine, dataset)
                if kept is None:  # a thread of it was erased meanwhile: the next pass
                    continue
                span.set_attribute("episodic.statistics.documents", kept.documents)
                span.set_attribute("episodic.statistics.terms", kept.terms)
            log.info(
                "kept the lexical statistics of a dataset of %d episodes (%d terms) in %.1f s",
                kept.documents,
                kept.terms,
                time.monotonic() - started,
            )
            refreshed += 1
        return refreshed

    def start_nearest_indexes(self) -> None:
        """Runs :meth:`keep_nearest_indexes` in a thread of its own, unless one still runs:
        a build takes minutes (100k episodes: ~6), and the maintenance loop's pass would
        stall (EPISODIC_LOOP_STALL_AFTER) and hold the backstop and the lifecycle back."""
        with self._state:
            if self._indexer is not None and self._indexer.is_alive():
                return
            self._indexer = threading.Thread(
                target=self._keep_nearest_indexes_logged, name="nearest-indexes", daemon=True
            )
            self._indexer.start()

    def _keep_nearest_indexes_logged(self) -> None:
        try:
            self.keep_nearest_indexes()
        except Exception as err:  # the next maintenance pass tries again
            log_failure(log, "keeping the large datasets' nearest indexes failed", err)

    def keep_nearest_indexes(self) -> int:
        """Builds the missing own nearest indexes of the datasets above
        ``nearest_index_above`` and drops the invalid ones and those no longer needed
        (:mod:`episodic.store.nearest_indexes`), unless another builder runs (another
        replica, ``episodic reindex --nearest``); how many it built and dropped."""
        with nearest_indexes.exclusive(self.engine) as mine:
            if not mine:
                return 0
            return self._keep_nearest_indexes()

    def _keep_nearest_indexes(self) -> int:
        changes = 0

        def changed(change: nearest_indexes.Change, name: str, dataset: str) -> None:
            nonlocal changes
            changes += 1
            metrics.nearest_index_changed(change)
            log.info("%s %s, a nearest index of a large dataset", change, name)

        with tracer.start_as_current_span("nearest indexes"):
            nearest_indexes.keep(
                self.engine,
                above=self.settings.nearest_index_above,
                memory=self.settings.nearest_index_memory,
                changed=changed,
                stopping=self._stop.is_set,
            )
        return changes

    def fire_due(
        self, now: datetime | None = None, result: SweepResult | None = None
    ) -> SweepResult:
        """Claims and fires due timers in batches until none is left."""
        result = result if result is not None else SweepResult()
        batch = self.settings.claim_batch_size
        while not self._stop.is_set():
            loops.step("claim_due_timers")
            with self.engine.begin() as conn:
                timers = domain.claim_due_timers(conn, self.worker, batch, now)
            loops.step("fire_timers")
            if timers and self._stop.is_set():
                with self.engine.begin() as conn:
                    domain.unclaim_timers(conn, self.worker, timers)
                return result
            fired_all: list[domain.FireResult | None] = []
            for chunk_results in self._fire_pool().map(
                lambda chunk: self._fire_unless_stopping(chunk, now), fire_chunks(timers)
            ):
                fired_all += chunk_results
            for timer, fired in zip(timers, fired_all, strict=True):
                if fired is None:
                    continue  # failed alone (its claim stays for the reclaim sweep) or unclaimed
                if fired.deferred:
                    result.timers_deferred += 1
                    continue
                metrics.timer_fired(
                    timer.trigger,
                    opened_episode=fired.episode is not None,
                    lag_seconds=timer.lag.total_seconds(),
                )
                if fired.episode is not None:
                    result.episodes_created += 1
                elif fired.timer_deleted:
                    result.timers_dropped += 1
                if not fired.timer_deleted:
                    result.timers_survived += 1
            if len(timers) < batch:
                break
        return result

    def _fire_pool(self) -> ThreadPoolExecutor:
        with self._state:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(FIRE_WORKERS, thread_name_prefix="scheduler-fire")
            return self._pool

    def _fire_unless_stopping(
        self, timers: list[domain.ClaimedTimer], now: datetime | None
    ) -> list[domain.FireResult | None]:
        """Fires a chunk, or hands its claims back when the replica is stopping."""
        if self._stop.is_set():
            with self.engine.begin() as conn:
                domain.unclaim_timers(conn, self.worker, timers)
            return [None] * len(timers)
        return self._fire(timers, now)

    def _fire(
        self, timers: list[domain.ClaimedTimer], now: datetime | None
    ) -> list[domain.FireResult | None]:
        """Fires a claimed batch in one transaction; if that fails for a reason other than
        an outage, fires the batch's timers one by one, so one bad thread costs only its
        own timer (None: that timer failed; its claim stays)."""
        if not timers:
            return []
        try:
            with (
                tracer.start_as_current_span(
                    "scheduler.fire_timers",
                    links=[link for t in timers[:32] for link in link_from(t.trace_context)],
                    attributes={"episodic.timers": len(timers)},
                ),
                self.engine.begin() as conn,
            ):
                return list(domain.fire_timers(conn, timers, self.worker, now))
        except Exception as err:
            # A lock conflict (a deadlock victim, say) is a statement that lost, not an
            # outage: the database is up, so the batch is fired again one timer at a time.
            if is_database_outage(err) and not is_lock_conflict(err):
                # The batch stops; its claims are handed back once the database answers
                # again (the next pass), not after the reclaim timeout.
                self._release_owed = True
                raise
            if len(timers) == 1:
                log_failure(log, f"firing the timer of thread {timers[0].thread_id} failed", err)
                return [None]
            log.warning("firing a batch of %d timers failed; firing them one by one", len(timers))
        results: list[domain.FireResult | None] = []
        for timer in timers:
            if self._stop.is_set():
                with self.engine.begin() as conn:
                    domain.unclaim_timers(conn, self.worker, [timer])
                results.append(None)
                continue
            results += self._fire([timer], now)
        return results

    # -- singleton sweeps ----------------------------------------------------------------

    def _due(self, key: str) -> bool:
        with self._state:
            return time.monotonic() >= self._next_check.get(key, 0.0)

    def _schedule(self, key: str, seconds: float) -> None:
        with self._state:
            self._next_check[key] = time.monotonic() + max(seconds, 0.0)

    def _singleton(
        self, name: str, interval: timedelta, force: bool, work: Callable[[], int]
    ) -> int:
        if not force and not self._due(name):
            return 0
        lock = self._singleton_locks[name]
        if not lock.acquire(blocking=force):
            return 0  # this process is already running it
        try:
            ttl = self.settings.lease_ttl
            with self.engine.begin() as conn:
                lease = domain.acquire_lease(conn, name, self.worker, ttl)
            if lease is None:
                # Someone else leads; look again when their lease could have lapsed.
                self._schedule(name, min(interval, ttl).total_seconds())
                return 0
            if not force and not lease.due(interval):
                assert lease.last_run_at is not None
                self._schedule(name, (lease.last_run_at + interval - lease.db_now).total_seconds())
                return 0
            with tracer.start_as_current_span(f"{name} sweep"), self._holding(name, ttl):
                done = work()
            with self.engine.begin() as conn:
                domain.mark_lease_run(conn, name, self.worker, self._results.pop(name, None))
            self._schedule(name, interval.total_seconds())
            return done
        finally:
            lock.release()

    def _holding(self, name: str, ttl: timedelta) -> contextlib.AbstractContextManager[None]:
        """Renews lease ``name`` every third of its ttl while its sweep runs. A sweep may
        run far longer than the ttl (a large dataset's statistics count: minutes; a
        retention purge); unrenewed, the lease would lapse and another replica would take
        it and run the same sweep beside this one (a large dataset counted twice)."""

        def renew() -> bool:
            try:
                with self.engine.begin() as conn:
                    held = domain.renew_lease(conn, name, self.worker, ttl)
            except Exception as err:  # the database away: the next beat tries again
                log.warning("could not renew the %s lease: %s", name, describe_error(err))
                return True
            if not held:  # this replica was too slow (frozen): another leads now
                metrics.lease_lost(name)
                log.warning("lost the %s lease while its sweep ran; another replica took it", name)
            return held

        return loops.beating(f"{name} lease", ttl.total_seconds() / 3, renew)

    # -- the loop ------------------------------------------------------------------------

    def start(self) -> None:
        """Starts the three background loops (not when the poll interval is 0)."""
        if self.settings.scheduler_poll_interval.total_seconds() <= 0:
            return
        stall_after = self.recovery.loop_stall_after.total_seconds()
        for name, one_pass in (
            (TIMERS_LOOP, self._timers_loop_pass),
            (RECLAIM_LOOP, self._reclaim_loop_pass),
            (MAINTENANCE_LOOP, self._maintenance_loop_pass),
        ):
            thread = threading.Thread(
                target=self._loop,
                args=(loops.watch(name, stall_after), one_pass),
                name=name,
                daemon=True,
            )
            self._threads.append(thread)
            thread.start()

    def _timers_loop_pass(self) -> float:
        """One pass of the timers loop; returns how long to wait before the next."""
        result = SweepResult()
        self.timers_pass(result=result)
        if result:
            log.info("timers %s", result)
        loops.step("next_due_in")
        with self.engine.connect() as conn:
            due_in = domain.next_due_in(conn)
        # Wake for the next deadline if it comes before the next poll.
        poll = self.settings.scheduler_poll_interval.total_seconds()
        return poll if due_in is None else min(poll, max(float(due_in), 0.005))

    def _reclaim_loop_pass(self) -> float:
        self.reclaim_pass(result=SweepResult())
        return self._singleton_wait(RECLAIM_LEASE)

    def _maintenance_loop_pass(self) -> float:
        result = SweepResult()
        self.maintenance_pass(result=result)
        if result:
            log.info("maintenance %s", result)
        return min(self._singleton_wait(BACKSTOP_LEASE), self._singleton_wait(LIFECYCLE_LEASE))

    def _singleton_wait(self, name: str) -> float:
        """Seconds until singleton ``name`` is next due here (at most a poll interval, so a
        stopping replica or a lease freed by another is noticed soon)."""
        poll = self.settings.scheduler_poll_interval.total_seconds()
        with self._state:
            due_in = self._next_check.get(name, 0.0) - time.monotonic()
        return min(max(due_in, 0.05), max(poll, 0.05))

    def _loop(self, watch: loops.LoopWatch, one_pass: Callable[[], float]) -> None:
        poll = self.settings.scheduler_poll_interval.total_seconds()
        while not self._stop.is_set():
            try:
                with watch.running():
                    wait = one_pass()
            except Exception as err:
                if is_lock_conflict(err):
                    # The database is up: a statement of the pass lost to another
                    # transaction (deadlock, lock timeout); the next pass does its work.
                    log.warning(
                        "%s pass lost to a concurrent transaction: %s; retrying",
                        watch.name,
                        describe_error(err),
                    )
                elif is_database_outage(err):
                    log.warning(
                        "%s lost the database: %s; retrying", watch.name, describe_error(err)
                    )
                else:
                    log_failure(log, f"{watch.name} pass failed; retrying", err)
                wait = max(poll, 1.0)
            self._stop.wait(wait)

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stops the loop, then gives back this replica's timer claims and leases so
        another replica continues at once."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        try:
            with self.engine.begin() as conn:
                released = domain.release_claims(conn, self.worker)
                domain.release_leases(conn, self.worker)
            if released:
                log.info("released %d timer claims", released)
        except Exception as err:
            log_failure(log, "could not release claims (the reclaim sweep will)", err)
