"""Indexes of Recall's approximate candidate path (a large dataset, recall_queries).

- ``message_chunks_embedding_hnsw_idx``: the chunks nearest the query (HNSW, cosine), as
  ``episodes_embedding_hnsw_idx`` serves the summaries; walked with iterative scan, the
  dataset filter applied as it goes.
- ``episodes_search_vector_idx``: the documents holding any of the query's lexemes (GIN),
  for the best lexical matches, without reading every document of the dataset.

Both are per partition (dataset hash partitions, 0010) and cost the Summariser an index
insert per chunk and per episode; the exact path (every dataset below the threshold) uses
neither.

Revision ID: 0011_recall_scale
Revises: 0010
Create Date: 2026-11-30
"""

from alembic import op

revision = "0011_recall_scale"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX IF NOT EXISTS message_chunks_embedding_hnsw_idx "
        "ON message_chunks USING hnsw (embedding vector_cosine_ops)"
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS episodes_search_vector_idx "
        "ON episodes USING gin (search_vector) WHERE status = 'completed'"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS episodes_search_vector_idx")
    op.execute("DROP INDEX IF EXISTS message_chunks_embedding_hnsw_idx")
