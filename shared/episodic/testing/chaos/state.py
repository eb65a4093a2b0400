"""The state of one chaos run (:class:`RunState`: its configuration, seed, plan, database,
services and clients) and the harness's own calls: reads of the database that survive its
restarts, and RPCs that move to the next replica after a retryable failure. The parts of
the run (:mod:`~episodic.testing.chaos.workload`, :mod:`~episodic.testing.chaos.faults`,
:mod:`~episodic.testing.chaos.checks`) extend it; :class:`~episodic.testing.chaos.run.ChaosRun`
puts them together."""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError, OperationalError

from episodic.sdk.client import STREAM_RESET, EpisodicClient, EpisodicRpcError
from episodic.testing.chaos.client_side import Clients, Ledger, Pacer, PlannedThread, Tally
from episodic.testing.chaos.cluster import Cluster
from episodic.testing.chaos.config import EXPECTED_CODES, RETRYABLE, ChaosConfig
from episodic.testing.chaos.postgres import ChaosPostgres
from episodic.testing.chaos.result import ChaosResult
from episodic.testing.proxy import TcpProxy

log = logging.getLogger(__name__)


class RunState:
    """One run's state and the calls every part of the run makes."""

    def __init__(self, config: ChaosConfig) -> None:
        self.cfg = config
        self.seed = config.seed if config.seed is not None else random.randrange(2**31)
        self.rnd = random.Random(self.seed)
        self.run_id = f"{self.seed:x}"
        self.result = ChaosResult(config=config, seed=self.seed)
        self.tally = Tally()
        self.ledger = Ledger()
        self.clients = Clients(config.rpc_timeout)
        self.stop_writers = threading.Event()
        self.stop_readers = threading.Event()
        self.faults_done = threading.Event()
        self.aborted = threading.Event()
        self.load_started = 0.0
        self.pacer = Pacer(config.messages / max(config.seconds, 0.1))
        self.plan = self._plan_threads()
        self.pg: ChaosPostgres | None = None
        self.cluster: Cluster | None = None
        self.proxy: TcpProxy | None = None
        self.engine: Engine | None = None
        self.db_url = ""
        self.frozen: list[tuple[str, int, str]] = []  # (worker id, pid, slot) of each freeze
        # (backend pid, backend_start) -> (OS pid, slot) of summarisers' sessions
        self.session_owner: dict[tuple[int, Any], tuple[int, str]] = {}
        self.session_errors: Counter[str] = Counter()
        self.stop_sessions = threading.Event()

    def say(self, message: str) -> None:
        log.info("%s", message)
        if self.cfg.progress is not None:
            self.cfg.progress(message)

    def _plan_threads(self) -> list[PlannedThread]:
        rnd = random.Random(self.seed + 1)
        return [
            PlannedThread(
                index=i,
                thread_id=str(uuid.UUID(int=rnd.getrandbits(128), version=4)),
                dataset=f"chaos-{self.run_id}-ds{i % self.cfg.datasets}",
                writer=i % self.cfg.writers,
            )
            for i in range(self.cfg.threads)
        ]

    # -- database helpers (the harness's own reads survive restarts)

    def query(self, sql: str, **params: Any) -> list[Any]:
        assert self.engine is not None
        deadline = time.monotonic() + 60
        while True:
            try:
                with self.engine.connect() as conn:
                    return list(conn.execute(text(sql), params).all())
            except (OperationalError, DBAPIError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    # -- calls (the harness's, the writers' and the readers')

    def _retry_pause(self, attempt: int) -> None:
        self.aborted.wait(min(0.05 * 2**attempt, 1.0) * (0.5 + random.random()))

    def call(
        self,
        rpc: str,
        service: str,
        home: int,
        fn: Callable[[EpisodicClient], Any],
        *,
        deadline: float,
        allow: frozenset[str] = frozenset(),
        owner: str = "harness",
    ) -> tuple[Any, str, int]:
        """Calls ``fn`` on the replica ``home`` of ``service``, moving to the next replica
        after each retryable failure, until it answers or ``deadline``. Returns (answer,
        "OK", attempts) or (the last error, its code, attempts); codes in ``allow`` end
        the loop too."""
        assert self.cluster is not None
        slot = home
        attempt = 0
        while True:
            client = self.clients.get(owner, service, self.cluster.address(service, slot))
            try:
                answer = fn(client)
            except EpisodicRpcError as err:
                code = STREAM_RESET if err.reason == STREAM_RESET else err.code.name
                acceptable = (
                    code in RETRYABLE or code in allow or code in EXPECTED_CODES.get(rpc, ())
                )
                self.tally.record(rpc, code, "" if acceptable else self._where(service, slot))
                attempt += 1
                if code in allow:
                    return err, code, attempt
                if code not in RETRYABLE or time.monotonic() > deadline or self.aborted.is_set():
                    return err, code, attempt
                slot += 1
                self._retry_pause(attempt)
                continue
            self.tally.record(rpc, "OK")
            return answer, "OK", attempt + 1

    def _where(self, service: str, slot: int) -> str:
        """Which process answered, and when in the load: "ingest-1 pid 123 at 25.3s"."""
        assert self.cluster is not None
        slots = self.cluster.slots[service]
        target = slots[slot % len(slots)]
        pid = target.process.proc.pid if target.process is not None else "-"
        return f"{target.label} pid {pid} at {time.monotonic() - self.load_started:.1f}s"
