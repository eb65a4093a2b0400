"""Shared fixtures: a real PostgreSQL with pgvector (embedded), a fresh migrated database
per test, and helpers to run the services as real processes."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from episodic import forking  # noqa: F401  (first: gRPC's fork handlers off, see the module)
from episodic.store.db import make_engine
from episodic.testing.citus import TEST_SHARDS, CitusDatabases, citus_cluster
from episodic.testing.database import (
    SERVER_DIRECTORY_PREFIX,
    TestDatabases,
    remove_abandoned,
    server_data_parent,
    test_server,
)
from episodic.testing.processes import ServiceProcess, start_service
from episodic.v1.ingest_service_pb2_grpc import IngestServiceStub


@pytest.fixture(scope="session")
def databases() -> Iterator[TestDatabases]:
    # Not under pytest's basetemp: concurrent pytest runs prune each other's old basetemps,
    # which would delete a running server's data directory. In RAM when the machine has
    # room (server_data_parent says why); what killed runs left there is removed first.
    parent = server_data_parent()
    remove_abandoned(parent)
    base = Path(tempfile.mkdtemp(prefix=SERVER_DIRECTORY_PREFIX, dir=parent))
    try:
        if os.environ.get("EPISODIC_TEST_CITUS"):  # the Citus tier: `make test-citus`
            with citus_cluster(base) as cluster:
                partitions = int(os.environ.get("EPISODIC_TEST_CITUS_PARTITIONS", "1"))
                shards = int(os.environ.get("EPISODIC_TEST_CITUS_SHARDS", TEST_SHARDS))
                yield CitusDatabases(cluster, partitions, shards)  # type: ignore[misc]
        else:
            with test_server(base) as dbs:
                yield dbs
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def db_url(databases: TestDatabases) -> Iterator[str]:
    url = databases.create()
    yield url
    databases.drop(url)


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    eng = make_engine(db_url, pool_size=5)
    yield eng
    eng.dispose()


@pytest.fixture
def spawn(db_url: str) -> Iterator:  # type: ignore[type-arg]
    """``spawn("ingest", env={...})`` starts a service process against this test's database;
    every process is stopped (SIGTERM, then SIGKILL) when the test ends."""
    started: list[ServiceProcess] = []

    def _spawn(name: str, env: dict[str, str] | None = None, **kw) -> ServiceProcess:  # type: ignore[no-untyped-def]
        service = start_service(name, db_url, env, **kw)
        started.append(service)
        return service

    yield _spawn
    for service in reversed(started):
        _stop(service)


def _stop(service: ServiceProcess) -> None:
    """Stops ``service`` and prints its output, which pytest captures and shows only when
    a test failed."""
    service.terminate()
    print(f"----- {service.name} output -----\n{service.log()}")


@pytest.fixture(scope="module")
def module_db_url(databases: TestDatabases) -> Iterator[str]:
    """One migrated database for a whole test module (see ``shared_ingest``)."""
    url = databases.create()
    yield url
    databases.drop(url)


@pytest.fixture(scope="module")
def module_engine(module_db_url: str) -> Iterator[Engine]:
    eng = make_engine(module_db_url, pool_size=2)
    yield eng
    eng.dispose()


@pytest.fixture(scope="module")
def shared_ingest(module_db_url: str) -> Iterator[IngestServiceStub]:
    """One Ingest process for a whole module, against ``module_db_url``: for the many
    requests that must be refused, which need no state of their own. A process and a
    database per case cost ~4 s of start and stop each (~180 s of the suite over four
    parametrised tests). A test using it asserts what its call changed, not what the
    tables hold (other cases of the module ran against them). Yields a stub."""
    service = start_service("ingest", module_db_url)
    channel = service.channel()
    try:
        yield IngestServiceStub(channel)
    finally:
        channel.close()
        _stop(service)
