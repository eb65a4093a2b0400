"""Shared fixtures: a real PostgreSQL with pgvector (embedded), a fresh migrated database
per test, and helpers to run the services as real processes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from episodic.store.db import make_engine
from sqlalchemy import Engine

from tests.support.database import TestDatabases, test_server
from tests.support.processes import ServiceProcess, start_service


@pytest.fixture(scope="session")
def databases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestDatabases]:
    with test_server(tmp_path_factory.mktemp("pg")) as dbs:
        yield dbs


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

    def _spawn(name: str, env: dict[str, str] | None = None) -> ServiceProcess:
        service = start_service(name, db_url, env)
        started.append(service)
        return service

    yield _spawn
    for service in reversed(started):
        service.terminate()
