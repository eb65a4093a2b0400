"""The connection pool pings only what may be dead: a connection idle a while, or one the
server has sent something to (a restart's AdminShutdown, a terminated backend). Without
the second rule, the first statement after a database restart could fail on a connection
that had been idle for less than a second (seen as UNAVAILABLE on a CreateThread)."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy import Engine, text

from episodic.store import db
from episodic.testing.processes import wait_until


def test_a_connection_the_server_closed_is_replaced_at_checkout(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the pending input can tell: no connection counts as idle long enough.
    monkeypatch.setattr(db, "PING_AFTER_IDLE_SECONDS", 3600.0)
    conninfo = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with engine.connect() as a, engine.connect() as b:
        pids = {
            a.execute(text("SELECT pg_backend_pid()")).scalar_one(),
            b.execute(text("SELECT pg_backend_pid()")).scalar_one(),
        }
    with psycopg.connect(conninfo, autocommit=True) as admin:
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        wait_until(
            lambda: (
                not admin.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", (list(pids),)
                ).fetchone()
            ),
            timeout=10,
            message="the terminated backends are gone",
        )
    # Both pooled connections are dead; each checkout must hand out a live one.
    with engine.connect() as a, engine.connect() as b:
        assert a.execute(text("SELECT 1")).scalar_one() == 1
        assert b.execute(text("SELECT 1")).scalar_one() == 1
        fresh = {
            a.execute(text("SELECT pg_backend_pid()")).scalar_one(),
            b.execute(text("SELECT pg_backend_pid()")).scalar_one(),
        }
    assert not fresh & pids
