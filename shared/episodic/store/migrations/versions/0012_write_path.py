"""Deferred chunk index: an episode is completed (summary, its vector, the lexical document)
before its thread's new chunks are embedded, and ``episodes.chunks_pending`` marks the gap.

Embedding the chunks is most of the Summariser's work per episode (bench/README.md); the
episode is recallable without them (by its summary's vector, its lexical document and the
thread's older chunks), so the Summariser completes it first and indexes the chunks right
after, in the same pass. The flag is set in the completion transaction and cleared in the
transaction that stores the chunks, so a crash between the two leaves a flagged episode
that the next pass of any worker finds (partial index below) and indexes.

Revision ID: 0012_write_path
Revises: 0011_recall_scale
Create Date: 2026-11-30
"""

from alembic import op

revision = "0012_write_path"
down_revision = "0011_recall_scale"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A constant default: no table rewrite, existing episodes are not pending.
    op.execute(
        "ALTER TABLE episodes ADD COLUMN IF NOT EXISTS chunks_pending boolean NOT NULL "
        "DEFAULT false"
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS episodes_chunks_pending_idx "
        "ON episodes (completed_at) WHERE chunks_pending"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS episodes_chunks_pending_idx")
    op.execute("ALTER TABLE episodes DROP COLUMN IF EXISTS chunks_pending")
