"""The embedding space: which model made the store's vectors, and re-embedding.

Two models' vectors do not compare, even at one dimension (MiniLM and multilingual-e5-small
are both 384-dimensional): a Recall embedding queries with one model over vectors another
made ranks by noise, silently. Until now nothing recorded the model, so nothing could
refuse. ``embedding_space`` (one row) records it (store/embedding_space.py):

- ``model``: the embedder's name (``minilm:all-MiniLM-L6-v2-int8``, ``e5:…``,
  ``openai:<model>``) whose vectors the store holds; written by the first service that
  starts on the store (a store from before this revision is taken to hold the vectors of
  the first model that starts on it: it cannot be checked).
- ``reembedding_to`` / ``reembed_started_at``: set while ``episodic reindex --reembed``
  moves the store to another model (or re-embeds it with the same one);
- ``epoch``: counts re-embeddings begun. A thread (and an event) whose ``embedding_epoch``
  is below it has not been re-embedded in the current one, so a re-embedding that stops
  resumes where it was (a constant default: no table rewrite).

Revision ID: 0014_embedding_space
Revises: 0013_approx_stats
Create Date: 2026-12-01
"""

from alembic import op

revision = "0014_embedding_space"
down_revision = "0013_approx_stats"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS embedding_space (
            singleton          boolean PRIMARY KEY DEFAULT true CHECK (singleton),
            model              text NOT NULL CHECK (model <> ''),
            dimension          integer NOT NULL CHECK (dimension > 0),
            recorded_at        timestamptz NOT NULL DEFAULT now(),
            epoch              integer NOT NULL DEFAULT 0 CHECK (epoch >= 0),
            reembedding_to     text CHECK (reembedding_to <> ''),
            reembed_started_at timestamptz,
            CHECK ((reembedding_to IS NULL) = (reembed_started_at IS NULL))
        )
        """
    )
    for table in ("threads", "events"):
        op.execute(
            f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS embedding_epoch integer NOT NULL "
            "DEFAULT 0"
        )


def downgrade() -> None:
    for table in ("events", "threads"):
        op.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS embedding_epoch")
    op.execute("DROP TABLE IF EXISTS embedding_space")
