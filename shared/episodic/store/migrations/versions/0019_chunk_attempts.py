"""How often the deferred chunk index of an episode was taken up again (issue 49).

A completed episode whose chunks are still to be indexed (``chunks_pending``) is taken up
by any worker's ``resume_chunks`` once the grace has passed. A window whose indexing kills
the worker (out of memory, a crash in the model) was taken up again on every restart: a
crash loop. ``chunk_attempts`` counts the takes and ``chunk_attempted_at`` keeps one take
from another worker for a grace; past the limit the chunk index is given up (the episode
stays completed and is found by its summary), and ``error`` says so.

Revision ID: 0019_chunk_attempts
Revises: 0018_procedural
Create Date: 2026-12-05
"""

from alembic import op

revision = "0019_chunk_attempts"
down_revision = "0018_procedural"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE episodes ADD COLUMN IF NOT EXISTS chunk_attempts smallint NOT NULL DEFAULT 0"
    )
    op.execute("ALTER TABLE episodes ADD COLUMN IF NOT EXISTS chunk_attempted_at timestamptz")


def downgrade() -> None:
    op.execute("ALTER TABLE episodes DROP COLUMN IF EXISTS chunk_attempted_at")
    op.execute("ALTER TABLE episodes DROP COLUMN IF EXISTS chunk_attempts")
