"""Whether a dataset has a chunk index still pending, in one index probe (issue 41).

Every Recall answer says whether the dataset is still settling
(``RecalledEpisodes.chunks_pending``). The only index over ``chunks_pending`` was keyed on
``completed_at`` (the Summariser's queue across datasets), so the probe for one dataset read
every pending row of its partition: another dataset's backlog (an import of 20k episodes)
cost this one's Recall ~10 ms (measured: 20,001 rows read for a dataset with none). Keyed on
``dataset``, the probe reads nothing but the dataset's own pending rows.

Revision ID: 0020_dataset_chunks_pending
Revises: 0019_chunk_attempts
Create Date: 2026-12-05
"""

from alembic import op

revision = "0020_dataset_chunks_pending"
down_revision = "0019_chunk_attempts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX IF NOT EXISTS episodes_dataset_chunks_pending_idx "
        "ON episodes (dataset, episode_id) WHERE chunks_pending"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS episodes_dataset_chunks_pending_idx")
