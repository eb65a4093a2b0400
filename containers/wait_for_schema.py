"""The services' init container: waits until the database's schema is the one this image's
migrations end at, so a service starts serving only after the migrate Job has run.

Polls EPISODIC_DATABASE_URL's Alembic revision every 2 s until it equals the image's head;
exits 1 after --timeout seconds (Kubernetes runs the init container again), 0 when current.
A database that is not reachable yet counts as not migrated yet.
    python -m episodic_wait_for_schema [--timeout 600]
"""

from __future__ import annotations

import argparse
import sys
import time

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine
from sqlalchemy.exc import SQLAlchemyError

from episodic.config import DatabaseSettings
from episodic.store.migrate import alembic_config


def current(url: str) -> set[str]:
    engine = create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": 5})
    try:
        with engine.connect() as conn:
            return set(MigrationContext.configure(conn).get_current_heads())
    finally:
        engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds (600)")
    args = parser.parse_args()
    settings = DatabaseSettings()
    url = settings.sqlalchemy_url()
    heads = set(ScriptDirectory.from_config(alembic_config(url, 0, 1)).get_heads())
    deadline = time.monotonic() + args.timeout
    said = None
    while True:
        try:
            found: set[str] | str = current(url)
        except SQLAlchemyError as err:
            found = f"database not reachable ({type(err).__name__})"
        if found == heads:
            print(f"schema at {', '.join(sorted(heads))}", flush=True)
            return 0
        if found != said:
            print(
                f"waiting for `episodic migrate`: schema {found or 'empty'}, want {heads}",
                flush=True,
            )
            said = found
        if time.monotonic() > deadline:
            print(f"schema not migrated after {args.timeout:.0f} s", file=sys.stderr)
            return 1
        time.sleep(2)


if __name__ == "__main__":
    sys.exit(main())
