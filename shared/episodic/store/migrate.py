"""Runs the Alembic migrations from code (no alembic.ini needed)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from episodic.config import to_sqlalchemy_url

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(url: str, embedding_dimension: int, partitions: int | None = None) -> Config:
    """``partitions``: hash partitions per dataset table (revision 0010); None reads
    EPISODIC_DATABASE_PARTITIONS (default 8)."""
    if partitions is None:
        from episodic.config import DatabaseSettings

        partitions = DatabaseSettings().database_partitions
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", to_sqlalchemy_url(url).replace("%", "%%"))
    cfg.attributes["embedding_dimension"] = embedding_dimension
    cfg.attributes["partitions"] = partitions
    return cfg


def upgrade(
    url: str, embedding_dimension: int, revision: str = "head", partitions: int | None = None
) -> None:
    """Brings the schema to ``revision``; idempotent (a second run changes nothing)."""
    command.upgrade(alembic_config(url, embedding_dimension, partitions), revision)


def downgrade(url: str, embedding_dimension: int, revision: str = "base") -> None:
    command.downgrade(alembic_config(url, embedding_dimension), revision)
