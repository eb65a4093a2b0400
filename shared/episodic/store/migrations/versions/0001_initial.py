"""Initial schema: threads, messages, scheduled_episodes, episodes, leases.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from alembic import context, op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _dimension() -> int:
    dim = context.config.attributes.get("embedding_dimension", 384)
    return int(dim)


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    # btree_gist lets one exclusion constraint say "windows of a thread never overlap".
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gist")

    op.execute(
        """
        CREATE TABLE threads (
            thread_id        uuid PRIMARY KEY,
            dataset          text NOT NULL,
            label            text NOT NULL DEFAULT '',
            metadata         jsonb NOT NULL DEFAULT '{}'::jsonb,
            -- Highest sequence assigned; the per-thread counter (the row lock serialises
            -- concurrent writers, so sequences have no gaps or duplicates).
            last_sequence    bigint NOT NULL DEFAULT 0 CHECK (last_sequence >= 0),
            -- End of the last episode window opened on this thread (0: none yet).
            captured_sequence bigint NOT NULL DEFAULT 0 CHECK (captured_sequence >= 0),
            -- last_sequence at the last EndThread: an explicit episode is owed while it
            -- exceeds captured_sequence (lets the Scheduler catch up if it was down).
            end_requested_sequence bigint NOT NULL DEFAULT 0,
            created_at       timestamptz NOT NULL DEFAULT now(),
            last_message_at  timestamptz,
            last_activity_at timestamptz NOT NULL DEFAULT now(),
            ended_at         timestamptz,
            CHECK (captured_sequence <= last_sequence)
        )
        """
    )
    op.execute(
        "CREATE INDEX threads_dataset_activity_idx "
        "ON threads (dataset, last_activity_at DESC, thread_id DESC)"
    )
    # The Scheduler's catch-up and backstop scan only threads with uncaptured messages.
    op.execute(
        "CREATE INDEX threads_uncaptured_idx ON threads (last_message_at) "
        "WHERE last_sequence > captured_sequence"
    )

    op.execute(
        """
        CREATE TABLE messages (
            thread_id       uuid NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
            sequence        bigint NOT NULL CHECK (sequence > 0),
            role            text NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
            content         text NOT NULL,
            metadata        jsonb NOT NULL DEFAULT '{}'::jsonb,
            created_at      timestamptz NOT NULL,
            received_at     timestamptz NOT NULL DEFAULT now(),
            idempotency_key text,
            PRIMARY KEY (thread_id, sequence)
        )
        """
    )
    op.execute(
        "CREATE UNIQUE INDEX messages_idempotency_idx ON messages (thread_id, idempotency_key) "
        "WHERE idempotency_key IS NOT NULL"
    )

    op.execute(
        """
        CREATE TABLE scheduled_episodes (
            thread_id   uuid PRIMARY KEY REFERENCES threads (thread_id) ON DELETE CASCADE,
            dataset     text NOT NULL,
            fire_at     timestamptz NOT NULL,
            trigger     text NOT NULL DEFAULT 'inactivity',
            -- Bumped by every touch, so a firing replica can tell whether new activity
            -- arrived after its claim (then the timer must survive).
            version     bigint NOT NULL DEFAULT 1,
            claimed_at  timestamptz,
            claimed_by  text,
            trace_context jsonb,
            created_at  timestamptz NOT NULL DEFAULT now(),
            updated_at  timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute(
        "CREATE INDEX scheduled_episodes_due_idx ON scheduled_episodes (fire_at) "
        "WHERE claimed_at IS NULL"
    )
    op.execute("CREATE INDEX scheduled_episodes_dataset_idx ON scheduled_episodes (dataset)")
    op.execute(
        "CREATE INDEX scheduled_episodes_claimed_idx ON scheduled_episodes (claimed_at) "
        "WHERE claimed_at IS NOT NULL"
    )

    op.execute(
        f"""
        CREATE TABLE episodes (
            episode_id      uuid PRIMARY KEY,
            thread_id       uuid NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
            dataset         text NOT NULL,
            status          text NOT NULL DEFAULT 'pending' CHECK (status IN
                ('pending', 'processing', 'completed', 'failed', 'archived', 'deleted')),
            semantic_status text NOT NULL DEFAULT 'pending' CHECK (semantic_status IN
                ('pending', 'processing', 'completed', 'failed', 'skipped')),
            trigger         text NOT NULL CHECK (trigger IN
                ('explicit', 'new_thread', 'inactivity', 'backstop', 'manual')),
            start_sequence  bigint NOT NULL CHECK (start_sequence > 0),
            end_sequence    bigint NOT NULL,
            message_count   integer NOT NULL,
            started_at      timestamptz NOT NULL,
            ended_at        timestamptz NOT NULL,
            summary         text NOT NULL DEFAULT '',
            key_learnings   jsonb NOT NULL DEFAULT '[]'::jsonb,
            entities        text[] NOT NULL DEFAULT '{{}}',
            event_type      text NOT NULL DEFAULT '',
            actor           text NOT NULL DEFAULT '',
            embedding       vector({_dimension()}),
            retry_count     integer NOT NULL DEFAULT 0,
            error           text,
            next_attempt_at timestamptz NOT NULL DEFAULT now(),
            claimed_at      timestamptz,
            claimed_by      text,
            semantic_claimed_at timestamptz,
            semantic_claimed_by text,
            semantic_error  text,
            trace_context   jsonb,
            created_at      timestamptz NOT NULL DEFAULT now(),
            updated_at      timestamptz NOT NULL DEFAULT now(),
            completed_at    timestamptz,
            CHECK (end_sequence >= start_sequence),
            CHECK (message_count = end_sequence - start_sequence + 1),
            -- Windows of one thread never overlap, whatever races happen above.
            CONSTRAINT episodes_windows_disjoint EXCLUDE USING gist (
                thread_id WITH =,
                int8range(start_sequence, end_sequence, '[]') WITH &&
            )
        )
        """
    )
    # At most one current episode per thread (seed 000, "Archival").
    op.execute(
        "CREATE UNIQUE INDEX episodes_one_completed_per_thread ON episodes (thread_id) "
        "WHERE status = 'completed'"
    )
    op.execute("CREATE INDEX episodes_thread_idx ON episodes (thread_id, end_sequence DESC)")
    # Exact per-dataset recall and listing read this (research/postgres-limits.md).
    op.execute(
        "CREATE INDEX episodes_dataset_status_idx ON episodes (dataset, status, ended_at DESC)"
    )
    op.execute("CREATE INDEX episodes_dataset_created_idx ON episodes (dataset, created_at DESC)")
    op.execute(
        "CREATE INDEX episodes_pending_idx ON episodes (next_attempt_at) WHERE status = 'pending'"
    )
    op.execute(
        "CREATE INDEX episodes_processing_idx ON episodes (claimed_at) WHERE status = 'processing'"
    )
    op.execute(
        "CREATE INDEX episodes_semantic_pending_idx ON episodes (updated_at) "
        "WHERE status = 'completed' AND semantic_status IN ('pending', 'processing')"
    )
    op.execute("CREATE INDEX episodes_entities_idx ON episodes USING gin (entities)")
    # Approximate search for very large single datasets; per-dataset recall is exact.
    op.execute(
        "CREATE INDEX episodes_embedding_hnsw_idx ON episodes "
        "USING hnsw (embedding vector_cosine_ops) WHERE status = 'completed'"
    )

    op.execute(
        """
        CREATE TABLE leases (
            name        text PRIMARY KEY,
            holder      text NOT NULL,
            expires_at  timestamptz NOT NULL,
            -- When each singleton sweep last ran, so a new leader does not rerun it at once.
            last_run_at timestamptz
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS leases")
    op.execute("DROP TABLE IF EXISTS episodes")
    op.execute("DROP TABLE IF EXISTS scheduled_episodes")
    op.execute("DROP TABLE IF EXISTS messages")
    op.execute("DROP TABLE IF EXISTS threads")
