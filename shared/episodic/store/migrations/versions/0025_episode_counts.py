"""A dataset's completed episodes counted by the writers, not by every Recall (issue 50).

Every Recall answers with the dataset's count of completed episodes
(``RecalledEpisodes.episode_count``), and Recall's size guard reads it. It was counted on
each call: an index-only scan of the dataset's completed episodes, ~11 ms per 100k of
them, the one cost of the approximate path that still grew with the dataset.

``episode_counts`` keeps it, one row per dataset:

- ``completed``: how many of its episodes are ``completed``; NULL until the Scheduler's
  maintenance has counted it once (store/episode_counts.py ``seed``). Recall reads a
  non-NULL count and counts, as before, when there is none.
- Every writer that moves an episode into or out of ``completed`` (a completion, an
  operator's delete, an erasure) adds its change in its own transaction, and holds the
  row until it commits; the seed counts under the same row's lock, so a change is either
  in the seed's count or added after it, never lost nor counted twice.

Derived data: ``episodic reindex --statistics`` counts it again, and so does each of the
maintenance's refreshes of a large dataset's statistics.

Revision ID: 0025_episode_counts
Revises: 0024_inline_vectors
Create Date: 2026-12-07
"""

from alembic import op
from sqlalchemy import text

revision = "0025_episode_counts"
down_revision = "0024_inline_vectors"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    # As many hash partitions as the schema's other dataset tables (none when they are not
    # partitioned, as on Citus, which shards by dataset itself).
    partitions = int(
        bind.execute(
            text("SELECT count(*) FROM pg_inherits WHERE inhparent = 'threads'::regclass")
        ).scalar()
        or 0
    )
    layout = " PARTITION BY HASH (dataset)" if partitions else ""
    op.execute(
        f"""
        CREATE TABLE IF NOT EXISTS episode_counts (
            dataset    text NOT NULL,
            completed  bigint,
            counted_at timestamptz,
            PRIMARY KEY (dataset),
            FOREIGN KEY (dataset) REFERENCES datasets (dataset) ON DELETE CASCADE
        ){layout}
        """
    )
    for remainder in range(partitions):
        op.execute(
            f"CREATE TABLE IF NOT EXISTS episode_counts_p{remainder} PARTITION OF "
            f"episode_counts FOR VALUES WITH (MODULUS {partitions}, REMAINDER {remainder})"
        )
    # A store already distributed by Citus: the table joins the datasets' colocation group
    # here, as k8s/overlays/citus/distribute.sql does for a store distributed after it.
    citus = bind.execute(text("SELECT to_regclass('pg_dist_partition') IS NOT NULL")).scalar()
    if (
        citus
        and bind.execute(
            text(
                "SELECT EXISTS (SELECT 1 FROM pg_dist_partition "
                "WHERE logicalrelid = 'datasets'::regclass)"
            )
        ).scalar()
    ):
        op.execute(
            "SELECT create_distributed_table('episode_counts', 'dataset', "
            "colocate_with := 'datasets')"
        )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS episode_counts")
