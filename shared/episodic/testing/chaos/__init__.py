"""Proof under faults: a chaos run that must lose nothing.

:func:`run_chaos` starts its own embedded PostgreSQL, N replicas of each service (each its
own process and port), a TCP proxy between Ingest and the Scheduler, then writers and
readers that use the SDK like an application would, while a fault schedule hits the
suite:

- ``kill:<service>``: SIGKILL of a random replica of that service, restarted on the same
  port (a fresh port only when the old one cannot be bound again);
- ``pg:fast`` / ``pg:immediate``: ``pg_ctl restart -m fast|immediate`` of the database on
  the same data directory and socket (clients reconnect; immediate means crash recovery);
- ``cut``: the proxy between Ingest and the Scheduler drops its connections and refuses or
  blackholes new ones for a few seconds, then heals;
- ``freeze``: SIGSTOP of a summariser while it holds episode claims, whatever it is doing:
  idle, inside a transaction, or right after sending a statement. The harness waits
  (bounded) until the process's database sessions settle, classifies the freeze (idle,
  idle in transaction with the locks it holds, or mid-statement) and keeps it stopped
  until the Scheduler reclaimed its claims, then SIGCONT. PostgreSQL is to end a session
  the freeze left idle in a transaction (``EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT``, half the
  reclaim time here): one still open at SIGCONT is a problem, and so is a claim still held
  at a generous deadline, reported with what the sessions were doing and who waited on
  them.

A watchdog restarts any service process that exits on its own (and reports it). After the
load, the run waits (polling with a deadline) until the services' own loops have covered
every message with an episode and nothing is pending, processing or scheduled, then checks:

- every acknowledged message is stored, at the sequence its receipt named, with the same
  idempotency key, role and content (opened with the keyring, SHA-256 compared); nothing
  stored twice;
- :func:`~episodic.testing.invariants.check_invariants` with ``all_covered=True``
  (gap-free sequences, contiguous disjoint windows, at most one current episode);
- no episode stuck (pending, processing or failed; semantic extraction likewise);
- no stale write: every claim and every end of a claim a summariser wrote came from the
  process named in the claim, and every fact was committed by the transaction that
  finished its episode's extraction (the run's database gets audit triggers, in a
  ``chaos`` schema of its own, and the harness maps each summariser's database sessions
  to its process while the run goes on). A summariser woken from a freeze after its
  claims were reclaimed must write nothing for them;
- every thread with messages has its current episode;
- what clients saw: status codes per RPC — UNAVAILABLE and DEADLINE_EXCEEDED are the
  retryable outcomes a client must expect under faults (STREAM_RESET, counted apart, is
  an UNAVAILABLE made of a reset HTTP/2 stream); INTERNAL, UNKNOWN and the like are not,
  and the report says which replica answered them and when.

By default the suite runs as users run it (:attr:`ChaosConfig.encryption`,
:attr:`ChaosConfig.auth`): encryption at rest required (a master keyring, every dataset
with its own data key), and API keys required on every service. Each writer then calls
with a writer key for exactly the datasets of its threads, each reader with a reader key
for the run's datasets, the pipeline-status reads and the harness's own calls with an
operator (admin) key, Ingest reaches the Scheduler with a service key; before the load a
probe checks that a call without a key is refused and that a key is held to its
datasets, and afterwards every stored message, thread label, episode summary and fact
must be sealed (none in the clear) and open with its dataset's key.

Everything is returned as a :class:`ChaosResult` (figures and a ``problems`` list);

Its modules, from the bottom: :mod:`~episodic.testing.chaos.config` (:class:`ChaosConfig`,
the services, the kinds of fault and the codes a client may see) and
:mod:`~episodic.testing.chaos.result` (:class:`ChaosResult`, :class:`FaultRecord`);
:mod:`~episodic.testing.chaos.postgres` (the database, restartable in place),
:mod:`~episodic.testing.chaos.sessions` (which sessions are whose, what a frozen process's
sessions do), :mod:`~episodic.testing.chaos.audit` (the stale-write audit's triggers),
:mod:`~episodic.testing.chaos.cluster` (the replicas and their watchdog) and
:mod:`~episodic.testing.chaos.client_side` (clients, pace, and what clients were told and
saw); then the run, one part per module over :mod:`~episodic.testing.chaos.state` (its
state and calls): :mod:`~episodic.testing.chaos.workload` (writers, readers, keys),
:mod:`~episodic.testing.chaos.faults` (the fault schedule and each fault),
:mod:`~episodic.testing.chaos.checks` (the checks at the end) and
:mod:`~episodic.testing.chaos.run` (:class:`ChaosRun`, :func:`run_chaos`: the whole run).
"""

from episodic.testing.chaos.audit import install_write_audit as install_write_audit
from episodic.testing.chaos.client_side import Tally as Tally
from episodic.testing.chaos.cluster import Cluster as Cluster
from episodic.testing.chaos.config import EXPECTED_CODES as EXPECTED_CODES
from episodic.testing.chaos.config import FAULT_KINDS as FAULT_KINDS
from episodic.testing.chaos.config import RETRYABLE as RETRYABLE
from episodic.testing.chaos.config import SERVICES as SERVICES
from episodic.testing.chaos.config import ChaosConfig
from episodic.testing.chaos.postgres import ChaosPostgres as ChaosPostgres
from episodic.testing.chaos.result import ChaosResult, FaultRecord
from episodic.testing.chaos.run import ChaosRun as ChaosRun
from episodic.testing.chaos.run import run_chaos
from episodic.testing.chaos.sessions import FrozenSessions as FrozenSessions
from episodic.testing.chaos.sessions import classify_frozen as classify_frozen
from episodic.testing.chaos.sessions import session_owners as session_owners

__all__ = ["ChaosConfig", "ChaosResult", "FaultRecord", "run_chaos"]
