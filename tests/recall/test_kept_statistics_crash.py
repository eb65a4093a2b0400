"""A count of a dataset's kept statistics cut short by a crash of the database (the
postmaster SIGKILLed, as ``pg_ctl stop -m immediate`` leaves it) leaves what was kept before
it, and the next count keeps the new figures: the count is one transaction, and Recall reads
what it finds (store/kept_statistics.py)."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from episodic.ops.runtime import EmbeddedPostgres
from episodic.store import kept_statistics, migrate
from episodic.store.db import make_engine
from episodic.testing.database import (
    EMBEDDING_DIMENSION,
    SERVER_DIRECTORY_PREFIX,
    server_data_parent,
)
from episodic.testing.processes import wait_until
from tests.recall.factory import make_episode


@pytest.fixture
def server() -> Iterator[EmbeddedPostgres]:
    """A server of this test's own, to crash."""
    base = Path(tempfile.mkdtemp(prefix=SERVER_DIRECTORY_PREFIX, dir=server_data_parent()))
    pg = EmbeddedPostgres(base / "pgdata")
    pg.start()
    try:
        yield pg
    finally:
        pg.stop()
        shutil.rmtree(base, ignore_errors=True)


def _kept(engine: Any) -> tuple[Any, ...]:
    with engine.connect() as conn:
        totals = conn.execute(text("SELECT documents, passages FROM kept_statistics")).all()
        terms = conn.execute(text("SELECT count(*) FROM kept_term_statistics")).scalar()
    return (tuple(tuple(r) for r in totals), terms)


def test_a_crash_during_a_count_leaves_what_was_kept(
    server: EmbeddedPostgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = server.url()
    migrate.upgrade(url, EMBEDDING_DIMENSION)
    engine = make_engine(url, pool_size=2)
    try:
        with engine.begin() as conn:
            for i in range(5):
                make_episode(conn, "big", [f"the zebra invoice {i}", "paid late"])
        assert kept_statistics.refresh(engine, "big") is not None
        before = _kept(engine)
        assert before[0] == ((5, 5),) and before[1] > 0
        with engine.begin() as conn:
            make_episode(conn, "big", ["a quokka at the zoo"])

        # The next count stops after it deleted what was kept (in its transaction) and
        # waits there, until the database dies under it.
        drop = kept_statistics.drop

        def drop_then_wait(conn, dataset) -> None:  # type: ignore[no-untyped-def]
            drop(conn, dataset)
            conn.execute(text("SELECT pg_sleep(600)"))

        monkeypatch.setattr(kept_statistics, "drop", drop_then_wait)
        failed: list[BaseException] = []

        def count() -> None:
            try:
                kept_statistics.refresh(engine, "big")
            except BaseException as err:  # handed to the test's thread
                failed.append(err)

        counting = threading.Thread(target=count)
        counting.start()

        def waiting() -> bool:
            # A new connection per look: pg_stat_activity is a snapshot taken once per
            # transaction, so one watcher's transaction never sees the count arrive if
            # its first look came before it (as it did on a slow machine).
            assert counting.is_alive(), f"the count ended before its wait: {failed}"
            with engine.connect() as watcher:
                return bool(
                    watcher.execute(
                        text(
                            "SELECT count(*) FROM pg_stat_activity "
                            "WHERE query LIKE 'SELECT pg_sleep%'"
                        )
                    ).scalar()
                )

        wait_until(waiting, timeout=30, message="the count did not reach its wait")
        pid = server.pid()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # no checkpoint, no shutdown: recovery from the WAL
        counting.join(timeout=60)
        assert failed, "the count must have died with the database"
        assert isinstance(failed[0], DBAPIError), failed
        monkeypatch.setattr(kept_statistics, "drop", drop)
        wait_until(lambda: not server.running(), timeout=30, message="the postmaster lives")
        server.restart()
        engine.dispose()  # the pool's connections died with the server

        assert _kept(engine) == before  # the deletion was never committed
        assert kept_statistics.refresh(engine, "big") is not None
        after = _kept(engine)
        assert after[0] == ((6, 6),) and after[1] > before[1]
    finally:
        engine.dispose()
