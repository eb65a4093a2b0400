"""A GIN index on the chunks' lexical documents, for Recall's approximate path.

The approximate path (a large dataset, store/recall_queries.py) scores a candidate set but
takes BM25's statistics from the whole filtered dataset, so its scores equal the exact
path's: each query lexeme's passage frequency is counted through this index (the chunks
holding the lexeme) instead of by reading every chunk of the dataset. Per partition
(dataset hash partitions, 0010); one more index insert per chunk for the Summariser.

Revision ID: 0012_approx_stats
Revises: 0011_recall_scale
Create Date: 2026-11-30
"""

from alembic import op

revision = "0012_approx_stats"
down_revision = "0011_recall_scale"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX IF NOT EXISTS message_chunks_search_vector_idx "
        "ON message_chunks USING gin (search_vector)"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS message_chunks_search_vector_idx")
