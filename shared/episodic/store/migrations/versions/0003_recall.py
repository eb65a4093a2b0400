"""Recall's search index: each episode's lexical document and the thread's chunk embeddings.

An episode is found by what its thread actually said, not only by its summary (research:
the summary embedding alone loses badly to BM25 over the raw messages):

- ``episodes.search_vector``: a tsvector of the thread's messages up to the episode's
  ``end_sequence`` plus the summary and key learnings (weight A); ``search_length`` is its
  token count, the document length of BM25. Written by ``index_episode`` when the episode
  completes. Only the thread's one current episode is searched, and earlier episodes of the
  thread are archived, so the current episode stands for the whole thread so far.
- ``message_chunks``: overlapping runs of a few consecutive messages of a thread (within the
  embedder's window) with their embedding and tsvector (passage-level BM25), keyed by
  thread and position so they outlive the episode that created them: the current episode
  uses every chunk of its thread up to its ``end_sequence``. Deleted with the thread.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from alembic import op
from sqlalchemy import text

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _dimension() -> int:
    # The chunk vectors must match episodes.embedding, whatever dimension it was created with.
    row = (
        op.get_bind()
        .execute(
            text(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'episodes'::regclass "
                "AND attname = 'embedding' AND NOT attisdropped"
            )
        )
        .first()
    )
    if row is None or row[0] is None or int(row[0]) <= 0:
        raise RuntimeError("episodes.embedding has no fixed dimension")
    return int(row[0])


def upgrade() -> None:
    op.execute("ALTER TABLE episodes ADD COLUMN search_vector tsvector")
    op.execute("ALTER TABLE episodes ADD COLUMN search_length integer")
    op.execute(
        f"""
        CREATE TABLE message_chunks (
            thread_id       uuid NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
            start_sequence  bigint NOT NULL CHECK (start_sequence > 0),
            -- Word offset into the first message (a long message is split into pieces).
            start_offset    integer NOT NULL DEFAULT 0 CHECK (start_offset >= 0),
            end_sequence    bigint NOT NULL,
            dataset         text NOT NULL,
            embedding       vector({_dimension()}) NOT NULL,
            -- The chunk's words, for passage-level BM25 (the best passage of a thread).
            search_vector   tsvector NOT NULL,
            search_length   integer NOT NULL,
            created_at      timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (thread_id, start_sequence, start_offset),
            CHECK (end_sequence >= start_sequence)
        )
        """
    )
    # Per-dataset erasure and retention purges delete by dataset.
    op.execute("CREATE INDEX message_chunks_dataset_idx ON message_chunks (dataset)")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS message_chunks")
    op.execute("ALTER TABLE episodes DROP COLUMN IF EXISTS search_length")
    op.execute("ALTER TABLE episodes DROP COLUMN IF EXISTS search_vector")
