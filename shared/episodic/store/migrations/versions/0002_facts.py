"""Facts extracted from episode windows (the built-in semantic extraction).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE facts (
            fact_id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            -- Provenance: the episode whose window stated it, and the message.
            episode_id      uuid NOT NULL REFERENCES episodes (episode_id) ON DELETE CASCADE,
            thread_id       uuid NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
            dataset         text NOT NULL,
            statement       text NOT NULL,
            source_sequence bigint NOT NULL,
            stated_at       timestamptz NOT NULL,
            created_at      timestamptz NOT NULL DEFAULT now(),
            UNIQUE (episode_id, source_sequence, statement)
        )
        """
    )
    op.execute("CREATE INDEX facts_dataset_idx ON facts (dataset, stated_at DESC)")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS facts")
