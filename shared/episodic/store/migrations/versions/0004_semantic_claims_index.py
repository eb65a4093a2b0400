"""The Scheduler's reclaim of stuck semantic claims reads a partial index.

``episodes_processing_idx`` covers stuck summarisation claims (status = 'processing');
semantic claims (semantic_status = 'processing', which may outlive status 'completed' when
the episode is archived meanwhile) had no index, so every reclaim pass scanned the table.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX IF NOT EXISTS episodes_semantic_processing_idx "
        "ON episodes (semantic_claimed_at) WHERE semantic_status = 'processing'"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS episodes_semantic_processing_idx")
