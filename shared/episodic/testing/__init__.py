"""Helpers for testing against a real suite — used by episodic's own tests and benchmarks,
and available to applications that want integration tests against real services:

- :mod:`episodic.testing.database`: an embedded PostgreSQL (the ``embedded`` extra) with a
  migrated template and a fresh database per test, or scratch databases for benchmarks;
- :mod:`episodic.testing.processes`: each service as its own process on a free port, and
  polling helpers (``wait_until``) instead of sleeps;
- :mod:`episodic.testing.invariants`: what must hold in the tables whatever happened
  (windows contiguous and disjoint, sequences gap-free, one current episode per thread).
"""
