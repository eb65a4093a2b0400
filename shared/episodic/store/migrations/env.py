"""Alembic environment: online migrations only, under an advisory lock so replicas that
start together do not race."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool, text

config = context.config

# Any fixed 64-bit number; only migrations take this lock.
MIGRATION_LOCK_ID = 7_263_110_425


def run_migrations_online() -> None:
    connectable = config.attributes.get("connection")
    if connectable is not None:
        _run(connectable)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("no database URL given to the migrations")
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as connection:
        connection.execute(text("SELECT pg_advisory_lock(:id)"), {"id": MIGRATION_LOCK_ID})
        try:
            _run(connection)
        finally:
            connection.execute(text("SELECT pg_advisory_unlock(:id)"), {"id": MIGRATION_LOCK_ID})
            connection.commit()
    engine.dispose()


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    context.configure(connection=connection, transaction_per_migration=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run `episodic migrate`")
run_migrations_online()
