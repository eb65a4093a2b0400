"""A thread's idempotency key: a caller's own name for a thread, unique within its dataset.

``CreateThreadRequest.idempotency_key`` finds the thread a key created before instead of
creating another (a retried call, a resumed import). Thread ids are unique across
datasets, so a caller-chosen id derived from a session key lets another dataset's writer
learn that the id exists, or take it first; a key is the dataset's own, and the thread id
stays the server's random one. Stored as the caller gave it, like the messages' and
events' keys.

Revision ID: 0017_thread_keys
Revises: 0016_event_routing
Create Date: 2026-12-02
"""

from alembic import op

revision = "0017_thread_keys"
down_revision = "0016_event_routing"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE threads ADD COLUMN IF NOT EXISTS idempotency_key text")
    op.execute(
        "CREATE UNIQUE INDEX IF NOT EXISTS threads_idempotency_idx "
        "ON threads (dataset, idempotency_key) WHERE idempotency_key IS NOT NULL"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS threads_idempotency_idx")
    op.execute("ALTER TABLE threads DROP COLUMN IF EXISTS idempotency_key")
