"""The scratch database a replay runs on (:func:`scratch_database`): created for the run and
dropped afterwards, on the server of ``admin_url`` or on an embedded PostgreSQL in a
temporary directory; never the suite's own database.
"""

from __future__ import annotations

import contextlib
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from episodic.store import migrate


def _libpq(url: str) -> str:
    for prefix in ("postgresql+psycopg://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql://" + url[len(prefix) :]
    return url


def _with_database(url: str, database: str) -> str:
    head, _, query = url.partition("?")
    return f"{head.rsplit('/', 1)[0]}/{database}" + (f"?{query}" if query else "")


@contextlib.contextmanager
def scratch_database(admin_url: str | None, embedding_dimension: int) -> Iterator[str]:
    """A migrated database that is dropped afterwards: on the server of ``admin_url``
    (a user that may create databases), else on an embedded PostgreSQL in a temporary
    directory (the ``embedded`` extra), stopped afterwards."""
    import psycopg

    with tempfile.TemporaryDirectory(prefix="episodic-replay-") as tmp:
        server = None
        if admin_url:
            base = _libpq(admin_url)
        else:
            from episodic.ops.runtime import EmbeddedPostgres

            server = EmbeddedPostgres(Path(tmp) / "pgdata")
            base = server.start()
        name = f"episodic_replay_{uuid.uuid4().hex[:12]}"
        try:
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            try:
                url = _with_database(base, name)
                migrate.upgrade(url, embedding_dimension)
                yield url
            finally:
                with psycopg.connect(base, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            if server is not None:
                server.stop()
