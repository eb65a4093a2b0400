"""Helpers for testing against a real suite — used by episodic's own tests and benchmarks,
and available to applications that want integration tests against real services:

- :mod:`episodic.testing.database`: an embedded PostgreSQL (the ``embedded`` extra) with a
  migrated template and a fresh database per test, or scratch databases for benchmarks;
- :mod:`episodic.testing.processes`: each service as its own process on a free port, and
  polling helpers (``wait_until``) instead of sleeps;
- :mod:`episodic.testing.invariants`: what must hold in the tables whatever happened
  (windows contiguous and disjoint, sequences gap-free, one current episode per thread);
- :mod:`episodic.testing.chaos`: a suite of replicas under load and faults (SIGKILLs,
  PostgreSQL restarts, a network cut, a frozen summariser), run as users run it
  (encryption at rest and API keys required), then the invariants —
  ``bench/resilience/chaos.py`` and ``tests/chaos``; :mod:`episodic.testing.proxy` is the TCP proxy it
  cuts;
- :mod:`episodic.testing.fuzz`: requests of every RPC generated from the descriptors, and
  byte-level mutations of valid ones;
- :mod:`episodic.testing.replica`: a streaming hot standby of the embedded primary
  (``pg_basebackup``), for read-replica tests and benchmarks;
- :mod:`episodic.testing.certificates`: throwaway CA, server and client certificates.
"""

# Tests and benches restart the embedded database (pg_ctl, forked with ``user=``) while
# gRPC calls are in flight: gRPC's fork handlers off first (see episodic.forking).
from episodic import forking  # noqa: F401
