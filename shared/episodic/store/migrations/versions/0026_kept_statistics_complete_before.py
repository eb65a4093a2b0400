"""When a dataset's kept statistics hold every episode completed before (issue 50).

Recall's approximate path scores a large dataset's episodes from its kept statistics
(store/kept_statistics.py), and reads apart the episodes completed after them (the
``since the count`` part of store/ranking_sql.py): newest first, by the index of when
they were completed. Which ones those are was known only roughly: an episode's
``completed_at`` is its transaction's start, and a completion still committing when the
count read the dataset is in neither, so the part read from 10 minutes before the count
began (``counted_at``) — every episode completed in those 10 minutes read again on every
call, up to 5,000 of them (8 ms of a 1M-episode store's call, and ~400 more candidates
scored: docs/benchmarks-history.md).

``complete_before``: a moment before which every completed episode is in the count, set by
the refresh from the transactions it saw in progress (``kept_statistics.complete_before``);
NULL where it cannot tell (sessions it may not see, prepared transactions, Citus), and
then Recall reads from ``counted_at`` less the margin, as before. Derived data, like the
rest of the row: each refresh sets it again.

Revision ID: 0026_complete_before
Revises: 0025_episode_counts
Create Date: 2026-12-07
"""

from alembic import op

revision = "0026_complete_before"
down_revision = "0025_episode_counts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A partitioned table's new column reaches its partitions; on Citus, its shards.
    op.execute("ALTER TABLE kept_statistics ADD COLUMN IF NOT EXISTS complete_before timestamptz")


def downgrade() -> None:
    op.execute("ALTER TABLE kept_statistics DROP COLUMN IF EXISTS complete_before")
