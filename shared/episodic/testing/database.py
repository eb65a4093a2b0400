"""Real PostgreSQL for tests: one embedded server per test process, a migrated template
database, and a fresh database cloned from it for every test (procrastinate's pattern)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import psycopg

from episodic.ops.runtime import EmbeddedPostgres
from episodic.store import migrate

TEMPLATE = "episodic_template"
EMBEDDING_DIMENSION = 384

#: A RAM-backed directory for test servers' data (see ``server_data_parent``).
RAM_DIRECTORY = Path("/dev/shm")
#: Free space it must have: a test server's WAL may grow to ``max_wal_size`` (1 GB) before
#: a checkpoint recycles it, and the suite runs one server per worker.
RAM_DIRECTORY_MIN_FREE = 4 << 30


def server_data_parent() -> str | None:
    """Where a test server's data directory goes: ``$EPISODIC_TEST_DATA_PARENT`` if set,
    else the RAM-backed ``/dev/shm`` when it exists, is writable and has room, else None
    (the system's temporary directory).

    Why RAM: every test clones the migrated template into a database of its own, ~1,170
    files created and later deleted. On the ext4 disks of our machines the kernel's inode
    allocator then spends most of that time skipping recently deleted inodes
    (``ext4_create`` → ``recently_deleted``, measured with ``perf``): ~1.2 s of CPU a
    ``CREATE DATABASE``, against ~0.07 s on tmpfs (the suite: 842–932 s → 740 s).
    PostgreSQL is the same either way; what tmpfs changes is that ``fsync`` is free, and no
    test crashes the machine (they kill processes, whose writes the page cache keeps on
    any file system). Benchmarks and the chaos run stay on disk, as a deployment is."""
    chosen = os.environ.get("EPISODIC_TEST_DATA_PARENT")
    if chosen:
        return chosen
    try:
        usable = (
            RAM_DIRECTORY.is_dir()
            and os.access(RAM_DIRECTORY, os.W_OK | os.X_OK)
            and shutil.disk_usage(RAM_DIRECTORY).free >= RAM_DIRECTORY_MIN_FREE
        )
    except OSError:
        usable = False
    return str(RAM_DIRECTORY) if usable else None


#: The prefix of a test server's directory (tests/conftest.py); see remove_abandoned.
SERVER_DIRECTORY_PREFIX = "episodic-test-pg-"


def remove_abandoned(parent: str | None, *, older_than: float = 600.0) -> list[Path]:
    """Removes test servers' directories under ``parent`` that a killed test run left
    behind — in RAM they would hold memory until the machine restarts: those older than
    ``older_than`` seconds whose server is not running (no ``postmaster.pid``, or its
    process is gone). A run that has just created its directory and not yet started its
    server is younger than that. A Citus test cluster (``episodic.testing.citus``) keeps a
    data directory per node (``coordinator``, ``worker1`` …) instead of ``pgdata``: it is
    running while any of them is (the tier outlives ten minutes, and another test run's
    start must not delete it under it). Returns what it removed."""
    base = Path(parent) if parent else Path(tempfile.gettempdir())
    removed = []
    for directory in base.glob(f"{SERVER_DIRECTORY_PREFIX}*"):
        try:
            if time.time() - directory.stat().st_mtime < older_than:
                continue
        except OSError:
            continue  # gone meanwhile
        nodes = [directory / "pgdata", *(p.parent for p in directory.glob("*/postmaster.pid"))]
        if any(EmbeddedPostgres(node).running() for node in nodes):
            continue
        shutil.rmtree(directory, ignore_errors=True)
        removed.append(directory)
    return removed


def with_database(url: str, database: str) -> str:
    """Swaps the database name of a libpq URL (socket URLs keep their ?host=…)."""
    head, _, query = url.partition("?")
    base = head.rsplit("/", 1)[0]
    return f"{base}/{quote(database)}" + (f"?{query}" if query else "")


class TestDatabases:
    """Creates per-test databases on one server; works for embedded or external servers."""

    __test__ = False  # not a pytest test class

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self._template_ready = False

    def _admin(self) -> psycopg.Connection:
        return psycopg.connect(self.admin_url, autocommit=True)

    def ensure_template(self) -> None:
        if self._template_ready:
            return
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{TEMPLATE}"')
        migrate.upgrade(with_database(self.admin_url, TEMPLATE), EMBEDDING_DIMENSION)
        self._template_ready = True

    def create(self, *, migrated: bool = True) -> str:
        name = f"t_{uuid.uuid4().hex[:16]}"
        with self._admin() as conn:
            if migrated:
                self.ensure_template()
                conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
            else:
                conn.execute(f'CREATE DATABASE "{name}"')
        return with_database(self.admin_url, name)

    def drop(self, url: str) -> None:
        name = url.partition("?")[0].rsplit("/", 1)[1]
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def test_server(base_dir: Path) -> Iterator[TestDatabases]:
    """EPISODIC_TEST_DATABASE_URL (an admin URL) wins; otherwise an embedded server."""
    external = os.environ.get("EPISODIC_TEST_DATABASE_URL")
    if external:
        yield TestDatabases(external)
        return
    pg = EmbeddedPostgres(base_dir / "pgdata")
    url = pg.start()
    try:
        yield TestDatabases(url)
    finally:
        pg.stop()


@contextmanager
def scratch_database(
    admin_url: str | None = None, prefix: str = "episodic-bench-"
) -> Iterator[str]:
    """A migrated database that is dropped afterwards, for benchmarks: on ``admin_url``
    when given, else on an embedded server in a temporary directory (stopped afterwards)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        if admin_url:
            dbs = TestDatabases(admin_url)
            url = dbs.create()
            try:
                yield url
            finally:
                dbs.drop(url)
            return
        pg = EmbeddedPostgres(Path(tmp) / "pgdata")
        dbs = TestDatabases(pg.start())
        try:
            url = dbs.create()
            yield url
        finally:
            pg.stop()
