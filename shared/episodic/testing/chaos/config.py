"""What a chaos run does (:class:`ChaosConfig`: the load, the faults to inject and the
services' settings), the services and kinds of fault it knows, and the status codes a
client may see while they happen."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from episodic.sdk.client import STREAM_RESET
from episodic.testing.proxy import CutMode

SERVICES: tuple[str, ...] = ("scheduler", "ingest", "summariser", "recall")
FAULT_KINDS: tuple[str, ...] = (
    "kill:ingest",
    "kill:scheduler",
    "kill:summariser",
    "kill:recall",
    "pg:fast",
    "pg:immediate",
    "cut",
    "freeze",
)
#: Codes a client must expect while replicas die and the database restarts: retry them.
#: STREAM_RESET is an UNAVAILABLE the SDK made of a reset HTTP/2 stream (grpcio's INTERNAL
#: "Stream removed"), counted apart so that a run shows how often streams were reset.
#: RESOURCE_EXHAUSTED: with keys required, a key's limits (serving/guard.py) answer it with a retry
#: hint, which the SDKs wait out; a frozen replica charges the calls it held for the time it
#: was stopped, so the key's next call there can be refused once it resumes.
RETRYABLE = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", STREAM_RESET, "RESOURCE_EXHAUSTED"})
#: Codes that are fine in what clients saw, per RPC (beyond OK and RETRYABLE).
EXPECTED_CODES: dict[str, frozenset[str]] = {
    # A retried CreateThread whose first attempt committed before its answer was lost.
    "CreateThread": frozenset({"ALREADY_EXISTS"}),
}


@dataclass
class ChaosConfig:
    """What a chaos run does. Faults are counted per kind; they are spread over ``seconds``
    (the planned length of the load, which writes ``messages`` at an even pace) and run
    one at a time; the load goes on until every fault has been injected."""

    messages: int = 3000
    threads: int = 60
    datasets: int = 8
    replicas: int = 2  # of each service
    writers: int = 6
    readers: int = 2
    seconds: float = 20.0
    max_batch: int = 8  # messages per AddMessages: 1..max_batch
    active_threads: int = 3  # threads a writer interleaves at once
    end_probability: float = 0.35  # EndThread at the end of a burst on a thread
    checkpoint_probability: float = 0.03  # EndThread in the middle of a burst
    kills_per_service: int = 1
    pg_fast_restarts: int = 1
    pg_immediate_restarts: int = 1
    network_cuts: int = 1
    cut_seconds: float = 3.0
    cut_mode: CutMode = "blackhole"
    pg_down_seconds: float = 0.0  # > 0: stop, this long down, start (instead of restart)
    freezes: int = 1
    restart_delay: float = 0.5  # a killed replica stays down this long before its restart
    reclaim_after: float = 3.0  # EPISODIC_ORPHAN_RECLAIM_AFTER
    auto_episode_interval: float = 2.0  # EPISODIC_AUTO_EPISODE_INTERVAL
    rpc_timeout: float = 5.0  # deadline of every client call
    batch_deadline: float = 120.0  # a writer gives a batch up after retrying this long
    freeze_search_timeout: float = 60.0  # to find a summariser holding a claim
    # After SIGSTOP, how long the frozen process's sessions may take to finish statements
    # already sent; one still running after that is a freeze "mid-statement".
    freeze_settle_timeout: float = 5.0
    audit_writes: bool = True  # audit triggers for the stale-write checks (see verify)
    # As users run it: EPISODIC_ENCRYPTION=required with a master keyring, and every value
    # checked sealed at the end. False: no keyring, text stored in the clear.
    encryption: bool = True
    # EPISODIC_AUTH=required: every client calls with an API key of its own (see the package
    # docstring). False: the services' default on loopback (development mode, no keys).
    auth: bool = True
    settle_timeout: float = 180.0  # for the services' own loops to finish the work
    seed: int | None = None
    workdir: Path | None = None  # logs and the database go here (a temp dir if None)
    keep_workdir: bool = False  # keep a temporary workdir (logs) after the run
    keep_database: bool = False  # keep the (stopped) database's data directory for autopsy
    log_level: str = "INFO"
    extra_env: dict[str, str] = field(default_factory=dict)
    progress: Callable[[str], None] | None = None  # status lines while running

    def fault_plan(self) -> list[str]:
        kinds: list[str] = []
        for service in ("ingest", "scheduler", "summariser", "recall"):
            kinds += [f"kill:{service}"] * self.kills_per_service
        kinds += ["pg:fast"] * self.pg_fast_restarts
        kinds += ["pg:immediate"] * self.pg_immediate_restarts
        kinds += ["cut"] * self.network_cuts
        kinds += ["freeze"] * self.freezes
        return kinds

    @property
    def idle_transaction_timeout(self) -> float:
        """EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT of the services: well within the reclaim
        time, so that a summariser frozen inside a transaction has its session (and its
        row locks) ended by PostgreSQL before its claims are due for reclaim."""
        return max(1.0, self.reclaim_after / 2)

    def security(self) -> str:
        """What the services ran with, for the report."""
        return (
            "encryption at rest "
            + ("required (master keyring, a data key per dataset)" if self.encryption else "off")
            + ", auth "
            + (
                "required (API keys: writer, reader, operator, service)"
                if self.auth
                else "off (development mode on loopback, no keys)"
            )
        )

    def service_env(self) -> dict[str, str]:
        """Settings of every service process: real loops with short intervals, so timers,
        reclaims and retries happen within the run. The service key (auth) is minted per
        run and added by the run."""
        security: dict[str, str] = {
            # The keyring itself: episodic.testing.processes passes the test keyring; an
            # empty file name runs the services without one.
            "EPISODIC_ENCRYPTION": "required" if self.encryption else "off",
        }
        if not self.encryption:
            security["EPISODIC_MASTER_KEY_FILE"] = ""
        if self.auth:
            security["EPISODIC_AUTH"] = "required"
        return {
            **security,
            "EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT": str(self.idle_transaction_timeout),
            "EPISODIC_EMBEDDING_PROVIDER": "hashing",
            "EPISODIC_SCHEDULER_POLL_INTERVAL": "0.2",
            "EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2",
            "EPISODIC_AUTO_EPISODE_INTERVAL": str(self.auto_episode_interval),
            "EPISODIC_SIBLING_PULL_FORWARD": str(max(self.auto_episode_interval / 2, 0.1)),
            "EPISODIC_ORPHAN_RECLAIM_AFTER": str(self.reclaim_after),
            "EPISODIC_LEASE_TTL": str(self.reclaim_after),
            "EPISODIC_RETRY_BACKOFF": "0.5",
            "EPISODIC_DB_HEALTH_INTERVAL": "0.5",
            "EPISODIC_SHUTDOWN_GRACE": "3",
            "EPISODIC_DB_POOL_SIZE": "5",
            "EPISODIC_LOG_LEVEL": self.log_level,
            "OTEL_TRACES_EXPORTER": "none",
            **self.extra_env,
        }
