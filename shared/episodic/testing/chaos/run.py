"""A whole chaos run (:func:`run_chaos`): start the database, the services and the proxy,
run the load and the faults, tie the summarisers' sessions to their processes meanwhile,
wait until the services' own loops settled the work, check, then stop and collect the
logs."""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import threading
import time
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from episodic.store.db import make_engine
from episodic.testing.chaos.audit import install_write_audit
from episodic.testing.chaos.checks import Checks
from episodic.testing.chaos.cluster import Cluster
from episodic.testing.chaos.config import ChaosConfig
from episodic.testing.chaos.faults import FaultInjection
from episodic.testing.chaos.postgres import ChaosPostgres
from episodic.testing.chaos.result import ChaosResult
from episodic.testing.chaos.sessions import session_owners
from episodic.testing.chaos.workload import Workload
from episodic.testing.database import TestDatabases
from episodic.testing.proxy import TcpProxy

log = logging.getLogger(__name__)


class ChaosRun(Workload, FaultInjection, Checks):
    """One chaos run: its load, faults and checks, and the run itself (:meth:`run`)."""

    # -- the sessions of the summarisers

    def watch_sessions(self) -> None:
        """Ties the summarisers' database sessions to their processes while the run goes
        on, for the stale-write check (:meth:`check_writes`): every quarter second, the
        sessions not seen before."""
        while not self.stop_sessions.wait(0.25):
            self.sample_sessions()

    def sample_sessions(self) -> None:
        assert self.engine is not None and self.cluster is not None
        try:
            processes = self.cluster.summariser_pids()
            with self.engine.connect() as conn:
                rows = conn.execute(
                    text(
                        "SELECT pid, client_port, backend_start FROM pg_stat_activity "
                        "WHERE backend_type = 'client backend' "
                        "AND application_name = 'episodic-summariser'"
                    )
                ).all()
            new = [r for r in rows if (int(r[0]), r[2]) not in self.session_owner]
            if not new:
                return
            owners = session_owners(processes, [(int(r[0]), r[1]) for r in new])
        except (OSError, DBAPIError) as err:  # the database restarting: the next sample
            self.session_errors[type(err).__name__] += 1
            return
        for r in new:
            owner = owners.get(int(r[0]))
            if owner is not None and owner in processes:
                self.session_owner[(int(r[0]), r[2])] = (owner, processes[owner].label)

    # -- settling

    def backlog(self) -> dict[str, int]:
        row = self.query(
            "SELECT "
            "(SELECT count(*) FROM threads WHERE last_sequence > captured_sequence), "
            "(SELECT count(*) FROM episodes WHERE status IN ('pending', 'processing')), "
            "(SELECT count(*) FROM episodes WHERE completed_at IS NOT NULL "
            "   AND semantic_status IN ('pending', 'processing')), "
            "(SELECT count(*) FROM scheduled_episodes)"
        )[0]
        return {
            "uncovered_threads": int(row[0]),
            "episodes_in_flight": int(row[1]),
            "semantic_in_flight": int(row[2]),
            "timers": int(row[3]),
        }

    def wait_quiescent(self, timeout: float, nudge: bool) -> bool:
        """Polls until nothing is left to do; ``nudge``: also run sweeps and end the
        uncovered threads (what an operator would do)."""
        assert self.cluster is not None
        deadline = time.monotonic() + timeout
        last_report = 0.0
        while True:
            state = self.backlog()
            if not any(state.values()):
                return True
            now = time.monotonic()
            if now > deadline:
                self.say(f"not quiescent after {timeout:.0f}s: {state}")
                return False
            if now - last_report > 5:
                self.say(f"settling: {state}")
                last_report = now
            if nudge:
                self._nudge()
            time.sleep(0.2)

    def _nudge(self) -> None:
        assert self.cluster is not None
        deadline = time.monotonic() + self.cfg.rpc_timeout
        self.call("RunSweep", "scheduler", 0, lambda c: c.run_sweep(), deadline=deadline)
        for (tid,) in self.query(
            "SELECT thread_id FROM threads WHERE last_sequence > captured_sequence LIMIT 50"
        ):
            self._end_by_id(str(tid), deadline)

    def _end_by_id(self, thread_id: str, deadline: float) -> None:
        self.call("EndThread", "ingest", 0, lambda c: c.end_thread(thread_id), deadline=deadline)

    def diagnose(self) -> list[str]:
        """What is left when the run did not settle: the rows, for the report."""
        out: list[str] = []
        for r in self.query(
            "SELECT t.thread_id, t.last_sequence, t.captured_sequence, "
            "t.end_requested_sequence, s.fire_at, s.trigger, s.claimed_by, s.claimed_at "
            "FROM threads t LEFT JOIN scheduled_episodes s USING (thread_id) "
            "WHERE t.last_sequence > t.captured_sequence LIMIT 10"
        ):
            out.append(
                f"uncovered thread {r[0]}: last {r[1]} captured {r[2]} end_requested {r[3]}; "
                f"timer fire_at={r[4]} trigger={r[5]} claimed_by={r[6]} claimed_at={r[7]}"
            )
        for r in self.query(
            "SELECT episode_id, thread_id, start_sequence, end_sequence, status, "
            "semantic_status, retry_count, claimed_by, claimed_at, next_attempt_at, error "
            "FROM episodes WHERE status IN ('pending', 'processing') "
            "OR (completed_at IS NOT NULL AND semantic_status IN ('pending', 'processing')) "
            "ORDER BY created_at LIMIT 10"
        ):
            out.append(
                f"episode {r[0]} thread {r[1]} window {r[2]}..{r[3]} status {r[4]}/{r[5]} "
                f"retries {r[6]} claimed_by={r[7]} at {r[8]} next_attempt_at={r[9]} "
                f"error={r[10]!r}"
            )
        for r in self.query(
            "SELECT thread_id, fire_at, trigger, claimed_by, claimed_at, now() "
            "FROM scheduled_episodes ORDER BY fire_at LIMIT 10"
        ):
            out.append(
                f"timer of {r[0]}: fire_at={r[1]} trigger={r[2]} claimed_by={r[3]} "
                f"claimed_at={r[4]} (db now {r[5]})"
            )
        return out

    # -- the whole run

    def run(self) -> ChaosResult:
        cfg = self.cfg
        started = time.monotonic()
        temporary = cfg.workdir is None
        workdir = Path(tempfile.mkdtemp(prefix="episodic-chaos-")) if temporary else cfg.workdir
        assert workdir is not None
        workdir.mkdir(parents=True, exist_ok=True)
        self.result.workdir = workdir
        threads: list[threading.Thread] = []
        logs: dict[str, str] = {}
        try:
            self.say(f"chaos run seed={self.seed} in {workdir}; {cfg.security()}")
            self.pg = ChaosPostgres(workdir / "pgdata")
            self.db_url = TestDatabases(self.pg.start()).create()
            if cfg.audit_writes:
                install_write_audit(self.db_url)
            self.engine = make_engine(self.db_url, pool_size=3)
            env = cfg.service_env()
            if cfg.auth:
                env["EPISODIC_SERVICE_KEY"] = self.mint_keys()
            self.proxy = TcpProxy().start()
            self.cluster = Cluster(self.db_url, env, self.proxy, cfg.replicas)
            self.cluster.start()
            if cfg.auth:
                self.probe_auth()
            self.result.startup_seconds = time.monotonic() - started
            self.say(
                f"{cfg.replicas} replicas of each service up in "
                f"{self.result.startup_seconds:.1f}s; scheduler behind proxy {self.proxy.address}"
            )

            self.load_started = time.monotonic()
            for w in range(cfg.writers):
                threads.append(threading.Thread(target=self.writer, args=(w,), name=f"writer-{w}"))
            readers = [
                threading.Thread(target=self.reader, args=(r,), name=f"reader-{r}")
                for r in range(cfg.readers)
            ]
            faulter = threading.Thread(target=self.faults, name="faults")
            sessions = threading.Thread(target=self.watch_sessions, name="chaos-sessions")
            for t in [*threads, *readers, faulter, sessions]:
                t.daemon = True
                t.start()
            hard_deadline = self.load_started + cfg.seconds * 10 + 300
            last_report = 0.0
            while time.monotonic() < hard_deadline:
                if self.ledger.count() >= cfg.messages and self.faults_done.is_set():
                    break
                if time.monotonic() - last_report > 5:
                    self.say(
                        f"load {time.monotonic() - self.load_started:5.1f}s: "
                        f"{self.ledger.count():,} messages acknowledged"
                    )
                    last_report = time.monotonic()
                time.sleep(0.1)
            else:
                self.result.problems.append(
                    f"the load did not finish within {hard_deadline - self.load_started:.0f}s "
                    f"({self.ledger.count()} of {cfg.messages} messages acknowledged, faults "
                    f"{'done' if self.faults_done.is_set() else 'still running'})"
                )
                self.aborted.set()
            self.stop_writers.set()
            for t in threads:
                t.join(cfg.batch_deadline + 30)
            self.stop_readers.set()
            for t in readers:
                t.join(cfg.rpc_timeout * 4 + 10)
            faulter.join(60)
            self.result.load_seconds = time.monotonic() - self.load_started
            self.say(
                f"load done in {self.result.load_seconds:.1f}s: "
                f"{self.ledger.count():,} messages acknowledged"
            )

            for fault in self.result.faults:
                if not fault.ok:
                    self.result.problems.append(
                        f"fault {fault.kind} at {fault.at:.1f}s could not be injected: "
                        f"{fault.detail}"
                    )
            missing = len(cfg.fault_plan()) - len(self.result.faults)
            if missing:
                self.result.problems.append(f"{missing} planned faults were never injected")

            settle_started = time.monotonic()
            self.result.settled_by_loops = self.wait_quiescent(cfg.settle_timeout, nudge=False)
            if self.result.settled_by_loops:
                self.result.quiescence_seconds = time.monotonic() - settle_started
            else:
                self.result.problems.append(
                    f"the services' own loops did not finish the work within "
                    f"{cfg.settle_timeout:.0f}s after the load: {self.backlog()}\n    "
                    + "\n    ".join(self.diagnose())
                )
                if self.wait_quiescent(cfg.settle_timeout / 2, nudge=True):
                    self.result.quiescence_seconds = time.monotonic() - settle_started
            self.stop_sessions.set()
            sessions.join(30)
            self.sample_sessions()  # the last sessions opened

            verify_started = time.monotonic()
            dead = self.cluster.dead_slots()
            if dead:
                self.result.problems.append(f"service processes not running at the end: {dead}")
            self.verify()
            self.check_at_rest()
            self.check_writes()
            self.check_codes()
            self.result.verify_seconds = time.monotonic() - verify_started
        except Exception as err:
            log.exception("chaos run failed")
            self.result.problems.append(f"the run itself failed: {type(err).__name__}: {err}")
        finally:
            self.aborted.set()
            self.stop_writers.set()
            self.stop_readers.set()
            self.stop_sessions.set()
            with self.ledger.lock:
                self.result.problems[:0] = self.ledger.problems
                self.result.replayed_receipts = self.ledger.replayed
                self.result.add_calls_ok = self.ledger.add_calls_ok
                self.result.end_thread_ok = self.ledger.end_ok
                self.result.end_thread_without_episode_id = self.ledger.end_without_episode_id
                self.result.threads_created = len(self.ledger.created)
            if not self.result.codes:
                self.result.codes = self.tally.snapshot()
            self.clients.close()
            if self.cluster is not None:
                self.cluster.stop()
                logs = self.cluster.write_logs(workdir / "logs")
                self.result.unexpected_exits = list(self.cluster.unexpected)
                for message in self.cluster.unexpected:
                    self.result.problems.append(f"unexpected exit: {message}")
            if self.proxy is not None:
                self.result.proxy = {
                    k: v for k, v in vars(self.proxy.stats()).items() if not k.startswith("bytes")
                }
                self.proxy.close()
            if self.engine is not None:
                self.engine.dispose()
            if self.pg is not None:
                with contextlib.suppress(OSError):
                    (workdir / "logs").mkdir(parents=True, exist_ok=True)
                    (workdir / "logs" / "postgres.log").write_text(self.pg.server_log())
                self.pg.stop()
                if not cfg.keep_database:
                    shutil.rmtree(workdir / "pgdata", ignore_errors=True)
            self.scan_logs(logs)
            self.result.total_seconds = time.monotonic() - started
            if temporary and not cfg.keep_workdir:
                shutil.rmtree(workdir, ignore_errors=True)
                self.result.workdir = None
        return self.result


def run_chaos(config: ChaosConfig | None = None) -> ChaosResult:
    """Runs one chaos run (see the package docstring) and returns its figures and problems."""
    return ChaosRun(config or ChaosConfig()).run()
