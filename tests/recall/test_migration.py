"""Migration 0003 (recall's search index) up and down, at any embedding dimension."""

from __future__ import annotations

from sqlalchemy import inspect, text

from episodic.store import migrate
from episodic.store.db import make_engine


def _columns(engine, table: str) -> set[str]:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return set(
            conn.execute(
                text("SELECT column_name FROM information_schema.columns WHERE table_name = :t"),
                {"t": table},
            ).scalars()
        )


def test_recall_index_migration_follows_the_schema_dimension(databases) -> None:  # type: ignore[no-untyped-def]
    url = databases.create(migrated=False)
    engine = make_engine(url, pool_size=1)
    try:
        migrate.upgrade(url, 768, "0003")
        columns = _columns(engine, "episodes")
        assert {"search_vector", "search_length"} <= columns
        with engine.connect() as conn:
            dim = conn.execute(
                text(
                    "SELECT atttypmod FROM pg_attribute WHERE attrelid = "
                    "'message_chunks'::regclass AND attname = 'embedding'"
                )
            ).scalar_one()
        assert dim == 768
        migrate.downgrade(url, 768, "0003-1")
        assert "message_chunks" not in inspect(engine).get_table_names()
        columns = _columns(engine, "episodes")
        assert not {"search_vector", "search_length"} & columns
        migrate.upgrade(url, 768)
    finally:
        engine.dispose()
        databases.drop(url)
