"""Every migration runs up and down on a real database, and `migrate` is idempotent."""

from __future__ import annotations

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from episodic.errors import SchemaMismatch
from episodic.store import migrate
from episodic.store.db import check_embedding_dimension, make_engine, schema_embedding_dimension

TABLES = {"threads", "messages", "scheduled_episodes", "episodes", "leases"}


def _revisions() -> list[str]:
    script = ScriptDirectory.from_config(migrate.alembic_config("postgresql://x/y", 384))
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]


def test_each_migration_up_and_down(databases) -> None:  # type: ignore[no-untyped-def]
    url = databases.create(migrated=False)
    engine = make_engine(url, pool_size=1)
    try:
        for rev in _revisions():
            migrate.upgrade(url, 384, rev)
        assert set(inspect(engine).get_table_names()) >= TABLES
        migrate.upgrade(url, 384)  # idempotent: nothing left to do, nothing fails
        for rev in reversed(_revisions()):
            migrate.downgrade(url, 384, f"{rev}-1" if rev != _revisions()[0] else "base")
        engine.dispose()
        assert not TABLES & set(inspect(engine).get_table_names())
        migrate.upgrade(url, 384)
        engine.dispose()
        assert set(inspect(engine).get_table_names()) >= TABLES
    finally:
        engine.dispose()
        databases.drop(url)


def test_embedding_dimension_is_fixed_at_migration_and_checked(databases) -> None:  # type: ignore[no-untyped-def]
    url = databases.create(migrated=False)
    engine = make_engine(url, pool_size=1)
    try:
        with pytest.raises(SchemaMismatch, match="migrate"):
            check_embedding_dimension(engine, 768)
        migrate.upgrade(url, 768)
        assert schema_embedding_dimension(engine) == 768
        check_embedding_dimension(engine, 768)
        with pytest.raises(
            SchemaMismatch, match="384-dimensional vectors but the database stores 768"
        ):
            check_embedding_dimension(engine, 384)
    finally:
        engine.dispose()
        databases.drop(url)
