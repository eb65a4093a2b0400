"""Indexes for the statistics of Recall's approximate path.

The approximate path (a large dataset, store/recall_queries.py) scores a candidate set but
takes BM25's statistics from the whole filtered dataset, so its scores equal the exact
path's. Without reading a document, vector or chunk row:

- ``message_chunks_search_vector_idx`` (GIN): the chunks holding a query lexeme, counted
  for its passage frequency, and the densest holders of each lexeme for the candidates;
- ``message_chunks_passage_lengths_idx``: the passages' count and average length, an
  index-only scan joined to
- ``episodes_completed_lengths_idx``: the completed episodes with the columns the time
  filters, that join and the documents' count and average length need (index-only; 30 ms
  instead of 120 ms at 50k episodes, bench/recall_scale.py).

Per partition (dataset hash partitions, 0010); one more index insert per chunk (two) and
per completed episode for the Summariser.

Revision ID: 0013_approx_stats
Revises: 0012_write_path
Create Date: 2026-11-30
"""

from alembic import op

revision = "0013_approx_stats"
down_revision = "0012_write_path"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX IF NOT EXISTS message_chunks_search_vector_idx "
        "ON message_chunks USING gin (search_vector)"
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS message_chunks_passage_lengths_idx "
        "ON message_chunks (dataset, thread_id, end_sequence) INCLUDE (search_length)"
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS episodes_completed_lengths_idx "
        "ON episodes (dataset, ended_at) "
        "INCLUDE (thread_id, end_sequence, started_at, search_length) "
        "WHERE status = 'completed'"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS episodes_completed_lengths_idx")
    op.execute("DROP INDEX IF EXISTS message_chunks_passage_lengths_idx")
    op.execute("DROP INDEX IF EXISTS message_chunks_search_vector_idx")
