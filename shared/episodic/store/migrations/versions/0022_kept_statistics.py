"""Recall's kept lexical statistics of a large dataset (issue 50).

The approximate path (a dataset of more than ``EPISODIC_RECALL_APPROXIMATE_ABOVE``
completed episodes) scores its candidates with BM25 over the whole dataset's statistics,
and counted them on every call: each query word's document and passage frequency (every
holder of a common word read through the GIN indexes) and the documents' and passages'
count and average length. At 100k episodes that was about a second of every call. These
tables keep them per dataset instead; the Scheduler's maintenance refreshes a dataset's
(store/kept_statistics.py) when its completed episodes have changed by more than a
small share, and Recall reads them when its request has no filter.

- ``kept_statistics``: one row per dataset: its completed episodes (``documents``) and
  their average length, its passages (an episode with a chunk of its thread up to the
  episode's end) and theirs, and when they were counted.
- ``kept_term_statistics``: per dataset and token (the blinded lexeme, as in
  ``search_vector``), how many documents and passages hold it, and its best holders by its
  BM25 weight (the approximate path's candidates for it).

- ``datasets.threads_erased``: how many times a thread of the dataset was erased. Erasing
  one drops the dataset's kept statistics (its words must not outlive it there); a count
  that began before an erasure and would end after it sees this move and is not kept.

Derived data: ``episodic reindex --statistics`` rebuilds them, a dataset without them is
ranked as before (counting), and erasing a thread drops its dataset's (refreshed later).

Revision ID: 0022_kept_statistics
Revises: 0021_dataset_embedding_model
Create Date: 2026-12-06
"""

from alembic import op
from sqlalchemy import text

revision = "0022_kept_statistics"
down_revision = "0021_dataset_embedding_model"
branch_labels = None
depends_on = None


def _partitions() -> int:
    """As many hash partitions as the schema's other dataset tables have (0 when they are
    not partitioned)."""
    return int(
        op.get_bind()
        .execute(text("SELECT count(*) FROM pg_inherits WHERE inhparent = 'threads'::regclass"))
        .scalar()
        or 0
    )


def _create(table: str, body: str, partitions: int) -> None:
    layout = " PARTITION BY HASH (dataset)" if partitions else ""
    op.execute(f"CREATE TABLE IF NOT EXISTS {table} ({body}){layout}")
    for remainder in range(partitions):
        op.execute(
            f"CREATE TABLE IF NOT EXISTS {table}_p{remainder} PARTITION OF {table} "
            f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {remainder})"
        )


def upgrade() -> None:
    partitions = _partitions()
    op.execute(
        "ALTER TABLE datasets ADD COLUMN IF NOT EXISTS threads_erased bigint NOT NULL DEFAULT 0"
    )
    _create(
        "kept_statistics",
        """
        dataset         text NOT NULL,
        documents       bigint NOT NULL,
        document_length double precision NOT NULL,
        passages        bigint NOT NULL,
        passage_length  double precision NOT NULL,
        counted_at      timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (dataset),
        FOREIGN KEY (dataset) REFERENCES datasets (dataset) ON DELETE CASCADE
        """,
        partitions,
    )
    _create(
        "kept_term_statistics",
        """
        dataset   text NOT NULL,
        token     text NOT NULL,
        documents bigint NOT NULL,
        passages  bigint NOT NULL,
        -- its best holders by its BM25 weight, best first: documents (episodes), and the
        -- threads of chunks (store/kept_statistics.py BEST_KEPT)
        best_documents uuid[] NOT NULL,
        best_threads   uuid[] NOT NULL,
        PRIMARY KEY (dataset, token),
        FOREIGN KEY (dataset) REFERENCES kept_statistics (dataset) ON DELETE CASCADE
        """,
        partitions,
    )

    # A store already distributed by Citus (k8s/overlays/citus/distribute.sql ran before
    # this revision): the new tables join the datasets' colocation group here, as
    # distribute.sql does for a store distributed after it.
    bind = op.get_bind()
    citus = bind.execute(text("SELECT to_regclass('pg_dist_partition') IS NOT NULL")).scalar()
    distributed = (
        citus
        and bind.execute(
            text(
                "SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'datasets'::regclass)"
            )
        ).scalar()
    )
    if distributed:
        for table in ("kept_statistics", "kept_term_statistics"):
            op.execute(
                f"SELECT create_distributed_table('{table}', 'dataset', "
                "colocate_with := 'datasets')"
            )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS kept_term_statistics")
    op.execute("DROP TABLE IF EXISTS kept_statistics")
    op.execute("ALTER TABLE datasets DROP COLUMN IF EXISTS threads_erased")
