"""The faults of a chaos run, one at a time over the load: SIGKILL and restart of a
replica, a restart of PostgreSQL, a cut between Ingest and the Scheduler, and a
summariser frozen (SIGSTOP) while it holds claims, kept stopped until they are reclaimed
(with the diagnostics when they are not)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
import uuid
from collections import Counter
from typing import Literal

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from episodic.testing.chaos.audit import claimant_pid
from episodic.testing.chaos.cluster import Slot
from episodic.testing.chaos.result import FaultRecord, fmt_counts
from episodic.testing.chaos.sessions import (
    FrozenSessions,
    classify_frozen,
    describe_session,
    session_activity,
    session_locks,
)
from episodic.testing.chaos.state import RunState

log = logging.getLogger(__name__)


class FaultInjection(RunState):
    """The fault schedule and each kind of fault."""

    # -- faults

    def _fault_times(self, n: int) -> list[float]:
        """Evenly over 10%..85% of the planned load, with jitter."""
        if n == 0:
            return []
        span = self.cfg.seconds * 0.75
        step = span / n
        return [self.cfg.seconds * 0.1 + step * (i + self.rnd.uniform(0.1, 0.9)) for i in range(n)]

    def faults(self) -> None:
        kinds = self.cfg.fault_plan()
        self.rnd.shuffle(kinds)
        try:
            for at, kind in zip(self._fault_times(len(kinds)), kinds, strict=True):
                wait = self.load_started + at - time.monotonic()
                if wait > 0 and self.aborted.wait(wait):
                    return
                started = time.monotonic()
                try:
                    ok, detail = self._inject(kind)
                except Exception as err:
                    log.exception("fault %s failed", kind)
                    ok, detail = False, f"{type(err).__name__}: {err}"
                record = FaultRecord(
                    at=started - self.load_started,
                    kind=kind,
                    detail=detail,
                    duration=time.monotonic() - started,
                    ok=ok,
                )
                self.result.faults.append(record)
                self.say(f"fault at {record.at:.1f}s: {kind} ({'ok' if ok else 'FAILED'}) {detail}")
        finally:
            self.faults_done.set()

    def _inject(self, kind: str) -> tuple[bool, str]:
        assert self.cluster is not None and self.pg is not None and self.proxy is not None
        if kind.startswith("kill:"):
            name = kind.split(":", 1)[1]
            index = self.rnd.randrange(self.cfg.replicas)
            return True, self.cluster.kill_and_restart(name, index, self.cfg.restart_delay)
        if kind in ("pg:fast", "pg:immediate"):
            mode: Literal["fast", "immediate"] = "fast" if kind == "pg:fast" else "immediate"
            self.pg.restart(mode, down=self.cfg.pg_down_seconds)
            if self.cfg.pg_down_seconds > 0:
                return True, f"pg_ctl stop -m {mode}, {self.cfg.pg_down_seconds:.1f}s down, start"
            return True, f"pg_ctl restart -m {mode}"
        if kind == "cut":
            self.proxy.cut(self.cfg.cut_mode)
            try:
                self.aborted.wait(self.cfg.cut_seconds)
            finally:
                self.proxy.heal()
            return True, f"{self.cfg.cut_mode} for {self.cfg.cut_seconds:.1f}s"
        if kind == "freeze":
            return self._freeze()
        raise ValueError(f"unknown fault {kind}")

    def _claims_of(self, worker: str) -> list[tuple[str, str, str]]:
        return [
            (str(r[0]), str(r[1]), str(r[2]))
            for r in self.query(
                "SELECT episode_id, thread_id, 'summary' FROM episodes "
                "WHERE status = 'processing' AND claimed_by = :w "
                "UNION ALL SELECT episode_id, thread_id, 'semantic' FROM episodes "
                "WHERE semantic_status = 'processing' AND semantic_claimed_by = :w",
                w=worker,
            )
        ]

    def _row_locked(self, episode_ids: list[str]) -> set[str]:
        """Which of these episodes' rows another session holds against the lock the
        reclaim takes (FOR NO KEY UPDATE, whose SKIP LOCKED passes them over). The probe
        takes the free ones and lets them go at once."""
        if not episode_ids:
            return set()
        free = self.query(
            "SELECT episode_id FROM episodes WHERE episode_id = ANY(:ids) "
            "FOR NO KEY UPDATE SKIP LOCKED",
            ids=[uuid.UUID(i) for i in episode_ids],
        )
        return set(episode_ids) - {str(r[0]) for r in free}

    def _service_seconds(self, name: str, default: float) -> float:
        """A duration setting of the services (seconds), as this run sets it."""
        try:
            return float(self.cfg.service_env().get(name, default))
        except ValueError:  # an ISO 8601 duration in extra_env
            return default

    def _reclaim_bound(self) -> float:
        """How long, once its sessions settled, a frozen summariser's claims may take to
        be reclaimed; generous, as nothing is asserted on time but that it happens: the
        session left in a transaction is ended after the idle timeout; a claim is stale
        once not renewed for the reclaim time; the reclaim sweep runs every quarter of it
        on the replica holding its lease (which may have to expire first: a killed
        Scheduler), and a pass may wait for a lock up to the lock timeout; then a few
        Scheduler polls, and slack for a loaded machine."""
        reclaim = self._service_seconds("EPISODIC_ORPHAN_RECLAIM_AFTER", self.cfg.reclaim_after)
        return (
            self._service_seconds("EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT", 60.0)
            + reclaim
            + self._service_seconds("EPISODIC_LEASE_TTL", reclaim)
            + reclaim / 4
            + self._service_seconds("EPISODIC_DB_LOCK_TIMEOUT", 10.0)
            + 10 * self._service_seconds("EPISODIC_SCHEDULER_POLL_INTERVAL", 1.0)
            + 30.0
        )

    def _freeze(self) -> tuple[bool, str]:
        """SIGSTOP a summariser that holds claims, whatever it is doing (idle, inside a
        transaction, right after sending a statement): see :meth:`_hold_frozen`."""
        assert self.cluster is not None
        deadline = time.monotonic() + self.cfg.freeze_search_timeout
        tries = 0
        while time.monotonic() < deadline and not self.aborted.is_set():
            rows = self.query(
                "SELECT claimed_by FROM episodes WHERE status = 'processing' "
                "AND claimed_by IS NOT NULL UNION SELECT semantic_claimed_by FROM episodes "
                "WHERE semantic_status = 'processing' AND semantic_claimed_by IS NOT NULL"
            )
            pids = self.cluster.summariser_pids()
            for (worker,) in rows:
                pid = claimant_pid(worker)
                slot = pids.get(pid) if pid is not None else None
                if pid is None or slot is None or not slot.lock.acquire(blocking=False):
                    continue
                tries += 1
                try:
                    os.kill(pid, signal.SIGSTOP)
                    slot.frozen = True
                    stopped = time.monotonic()
                    claims = self._claims_of(str(worker))
                    if not claims:  # it finished them between the query and the SIGSTOP
                        os.kill(pid, signal.SIGCONT)
                        slot.frozen = False
                        continue
                    return True, self._hold_frozen(slot, pid, str(worker), claims, stopped, tries)
                finally:
                    if slot.frozen:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGCONT)
                        slot.frozen = False
                    slot.lock.release()
            time.sleep(0.01)  # polling for a summariser with claims, bounded by deadline
        return False, (
            f"no summariser held a claim within {self.cfg.freeze_search_timeout:.0f}s "
            f"(tries {tries})"
        )

    def _hold_frozen(
        self,
        slot: Slot,
        pid: int,
        worker: str,
        claims: list[tuple[str, str, str]],
        stopped: float,
        tries: int,
    ) -> str:
        """With ``pid`` stopped: waits until its sessions settled and classifies the freeze
        (:func:`classify_frozen`), keeps it stopped past the reclaim time until none of
        its claims is its own (or :meth:`_reclaim_bound` passed: a problem naming the
        claims still held and why), then SIGCONT. Returns the fault's detail."""
        assert self.engine is not None
        sessions = classify_frozen(self.engine, pid, self.cfg.freeze_settle_timeout)
        self.result.freeze_classes[sessions.kind] = (
            self.result.freeze_classes.get(sessions.kind, 0) + 1
        )
        self.frozen.append((worker, pid, slot.label))
        held = {c[0] for c in claims}
        kinds = Counter(c[2] for c in claims)
        locked_rows = self._row_locked(sorted(held)) if sessions.transaction else set()
        limit = time.monotonic() + self._reclaim_bound()
        ended: dict[int, float] = {}  # sessions in a transaction that PostgreSQL ended
        still = set(held)
        reclaimed = False
        while not self.aborted.is_set():
            now = time.monotonic()
            still = {c[0] for c in self._claims_of(worker)} & held
            if sessions.transaction and len(ended) < len(sessions.transaction):
                alive = {
                    int(r[0])
                    for r in self.query(
                        "SELECT pid FROM pg_stat_activity WHERE pid = ANY(:pids)",
                        pids=sessions.transaction,
                    )
                }
                for backend in sessions.transaction:
                    if backend not in alive:
                        ended.setdefault(backend, now - stopped)
            # Stopped past the reclaim time, until none of its claims is its own.
            if now - stopped > self.cfg.reclaim_after + 0.5 and not still:
                reclaimed = True
                break
            if now > limit:
                break
            time.sleep(0.1)  # polling, bounded by limit
        frozen_for = time.monotonic() - stopped
        if not reclaimed and not self.aborted.is_set():
            self.ledger.problem(
                self._unreclaimed(slot, pid, worker, sorted(still), sessions, frozen_for)
            )
        overdue = self._overdue(sessions)
        if overdue and not self.aborted.is_set():
            # Whatever else happened, a frozen process must not keep a transaction (and
            # its locks) open: PostgreSQL was to end it after the idle timeout.
            self.ledger.problem(
                f"freeze: the stopped {slot.label} (pid {pid}) still had a session idle in "
                f"a transaction after {frozen_for:.1f}s, past EPISODIC_DB_IDLE_TRANSACTION_"
                f"TIMEOUT={self._service_seconds('EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT', 60)}"
                f"s: {'; '.join(overdue)}"
            )
        os.kill(pid, signal.SIGCONT)
        slot.frozen = False
        detail = (
            f"{slot.label} pid {pid} stopped {frozen_for:.1f}s holding "
            f"{fmt_counts(dict(kinds))} claims; frozen {sessions.describe()}"
        )
        if locked_rows:
            detail += f"; {len(locked_rows)} of {len(held)} claimed rows locked against the reclaim"
        if ended:
            detail += "; sessions ended by PostgreSQL " + ", ".join(
                f"pid {b} after {t:.1f}s" for b, t in sorted(ended.items())
            )
        if overdue:
            detail += f"; NOT ended by PostgreSQL: {'; '.join(overdue)}"
        detail += "; all reclaimed" if reclaimed else f"; {len(still)} NOT reclaimed"
        return detail + f" (tries {tries})"

    def _overdue(self, sessions: FrozenSessions) -> list[str]:
        """The frozen process's sessions still idle inside a transaction well past the
        idle timeout (a second of slack), described."""
        idle = self._service_seconds("EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT", 60.0)
        if idle <= 0 or not sessions.transaction:
            return []
        assert self.engine is not None
        try:
            with self.engine.connect() as conn:
                rows = session_activity(conn, sessions.transaction)
                conn.rollback()
        except DBAPIError:  # not a finding about the suite
            log.exception("the frozen sessions could not be looked at")
            return []
        return [
            describe_session(r)
            for r in rows
            if str(r[1]).startswith("idle in transaction")
            and r[5] is not None
            and float(r[5]) > idle + 1.0
        ]

    def _unreclaimed(
        self,
        slot: Slot,
        pid: int,
        worker: str,
        still: list[str],
        sessions: FrozenSessions,
        frozen_for: float,
    ) -> str:
        """The problem of a freeze whose claims were not all reclaimed: the claims still
        held (only those), what the frozen process's sessions are doing, their locks, who
        waits on them (with pg_blocking_pids), and the reclaim sweep's lease."""
        assert self.engine is not None
        lines = [
            f"freeze: {len(still)} claims of the stopped {slot.label} (pid {pid}, worker "
            f"{worker}) still held after {frozen_for:.1f}s (EPISODIC_ORPHAN_RECLAIM_AFTER="
            f"{self.cfg.reclaim_after}, EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT="
            f"{self._service_seconds('EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT', 60.0)}); "
            f"frozen {sessions.kind}"
        ]
        try:
            locked = self._row_locked(still)
            for r in self.query(
                "SELECT episode_id, thread_id, dataset, 'summary', "
                "extract(epoch FROM now() - claimed_at) FROM episodes "
                "WHERE episode_id = ANY(:ids) AND status = 'processing' AND claimed_by = :w "
                "UNION ALL SELECT episode_id, thread_id, dataset, 'semantic', "
                "extract(epoch FROM now() - semantic_claimed_at) FROM episodes "
                "WHERE episode_id = ANY(:ids) AND semantic_status = 'processing' "
                "AND semantic_claimed_by = :w",
                ids=[uuid.UUID(i) for i in still],
                w=worker,
            ):
                lines.append(
                    f"{r[3]} claim on episode {r[0]} (thread {r[1]}, dataset {r[2]}): claimed "
                    f"{float(r[4]):.1f}s ago; its row is "
                    + ("LOCKED" if str(r[0]) in locked else "not locked")
                    + " against the reclaim's FOR NO KEY UPDATE"
                )
            if not sessions.backends:
                lines.append(f"sessions of the frozen process: {sessions.describe()}")
            else:
                with self.engine.connect() as conn:
                    rows = session_activity(conn, sessions.backends)
                    locks = session_locks(conn, sessions.backends)
                    waiting = conn.execute(
                        text(
                            "SELECT pid, application_name, state, wait_event_type, wait_event, "
                            "extract(epoch FROM clock_timestamp() - query_start), "
                            "left(btrim(regexp_replace(regexp_replace(query, "
                            "'/\\*.*?\\*/', '', 'g'), '\\s+', ' ', 'g')), 110), "
                            "pg_blocking_pids(pid) FROM pg_stat_activity "
                            "WHERE pg_blocking_pids(pid) && CAST(:pids AS int[])"
                        ),
                        {"pids": sessions.backends},
                    ).all()
                    conn.rollback()
                for r in rows:
                    lines.append(f"frozen session {describe_session(r)}")
                gone = sorted(set(sessions.backends) - {int(r[0]) for r in rows})
                if gone:
                    lines.append(f"frozen sessions ended meanwhile: {gone}")
                lines.append(f"their locks: {', '.join(locks) or 'none'}")
                for w in waiting:
                    lines.append(
                        f"waiting on them: pid {w[0]} ({w[1]}, {w[2]}, wait {w[3]}/{w[4]}, "
                        f"statement running {float(w[5] or 0):.1f}s): {w[6]!r}; "
                        f"pg_blocking_pids {list(w[7])}"
                    )
                if not waiting:
                    lines.append("no session waits on them")
            for r in self.query(
                "SELECT name, holder, extract(epoch FROM expires_at - now()), "
                "extract(epoch FROM now() - last_run_at) FROM leases "
                "WHERE name LIKE 'scheduler.reclaim%'"
            ):
                lines.append(
                    f"lease {r[0]}: holder {r[1]}, expires in {float(r[2]):.1f}s, last run "
                    + ("never" if r[3] is None else f"{float(r[3]):.1f}s ago")
                )
        except (DBAPIError, OSError) as err:
            lines.append(f"(diagnostics failed: {type(err).__name__}: {err})")
        return "\n    ".join(lines)
