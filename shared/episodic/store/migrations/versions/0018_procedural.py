"""Procedural memory (seed 003): tool calls on messages, outcomes, procedures.

- ``messages.tools``: a message's tool calls (an assistant's ``tool_calls``, a tool
  result's ``name``), sealed JSON like content. ``messages.tool_call_id``: the call a tool
  message answers, in the clear — an opaque id the model API made up, needed to check
  that the call exists without opening sealed rows.
- ``message_tool_calls``: one row per call an assistant message made, so that a tool
  message's ``tool_call_id`` is checked by one index probe (and a thread's calls are found
  without reading its messages).
- ``outcomes``: how a thread (``episode_id`` nil) or one episode's stretch turned out.
  The last one recorded stands.
- ``procedure_candidates``: what one episode's stretch of tool use taught (its goal, its
  steps, their signature, its outcome), one row per episode; ``procedures`` are derived
  from them and recomputed per dataset, so erasing a thread, correcting an outcome or
  changing the extractor is a recomputation, never a patch.

Every table is a dataset table (partitioned by dataset like the rest, colocated on Citus).

Revision ID: 0018_procedural
Revises: 0017_thread_keys
Create Date: 2026-12-05
"""

from alembic import op
from sqlalchemy import text

revision = "0018_procedural"
down_revision = "0017_thread_keys"
branch_labels = None
depends_on = None

_NEW_TABLES = ("procedures", "procedure_candidates", "outcomes", "message_tool_calls")


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
    # The goals are embedded by the store's model: its dimension, as the episodes have it.
    dim = (
        op.get_bind()
        .execute(
            text(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'episodes'::regclass "
                "AND attname = 'embedding'"
            )
        )
        .scalar_one()
    )
    op.execute("ALTER TABLE messages ADD COLUMN IF NOT EXISTS tools bytea")
    op.execute("ALTER TABLE messages ADD COLUMN IF NOT EXISTS tool_call_id text")
    _create(
        "message_tool_calls",
        """
        dataset   text NOT NULL,
        thread_id uuid NOT NULL,
        call_id   text NOT NULL,
        sequence  bigint NOT NULL,
        -- The tool called (its name only; the arguments are sealed in messages.tools).
        tool      text NOT NULL,
        PRIMARY KEY (dataset, thread_id, call_id, sequence),
        FOREIGN KEY (dataset, thread_id) REFERENCES threads (dataset, thread_id)
            ON DELETE CASCADE
        """,
        partitions,
    )
    _create(
        "outcomes",
        """
        dataset     text NOT NULL,
        thread_id   uuid NOT NULL,
        -- The nil UUID: the whole thread.
        episode_id  uuid NOT NULL,
        outcome     text NOT NULL CHECK (outcome IN ('success', 'failure', 'partial')),
        score       double precision CHECK (score >= 0 AND score <= 1),
        note        bytea,
        recorded_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (dataset, thread_id, episode_id),
        FOREIGN KEY (dataset, thread_id) REFERENCES threads (dataset, thread_id)
            ON DELETE CASCADE
        """,
        partitions,
    )
    _create(
        "procedure_candidates",
        f"""
        dataset        text NOT NULL,
        episode_id     uuid NOT NULL,
        thread_id      uuid NOT NULL,
        start_sequence bigint NOT NULL,
        end_sequence   bigint NOT NULL,
        -- The actions' fingerprint: stretches with one signature merge into one procedure.
        signature      text NOT NULL,
        goal           bytea NOT NULL,
        steps          bytea NOT NULL,
        goal_embedding vector({int(dim)}),
        extractor      text NOT NULL,
        -- 'forgotten': an admin deleted the procedure it taught; it is not learned again.
        forgotten      boolean NOT NULL DEFAULT false,
        created_at     timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (dataset, episode_id),
        FOREIGN KEY (dataset, thread_id) REFERENCES threads (dataset, thread_id)
            ON DELETE CASCADE
        """,
        partitions,
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS procedure_candidates_signature_idx "
        "ON procedure_candidates (dataset, signature)"
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS procedure_candidates_thread_idx "
        "ON procedure_candidates (dataset, thread_id)"
    )
    _create(
        "procedures",
        f"""
        dataset        text NOT NULL,
        procedure_id   uuid NOT NULL,
        signature      text NOT NULL,
        goal           bytea NOT NULL,
        example_goals  bytea NOT NULL,
        steps          bytea NOT NULL,
        sources        bytea NOT NULL,
        embedding      vector({int(dim)}),
        success_count  integer NOT NULL DEFAULT 0,
        failure_count  integer NOT NULL DEFAULT 0,
        partial_count  integer NOT NULL DEFAULT 0,
        extractor      text NOT NULL,
        created_at     timestamptz NOT NULL DEFAULT now(),
        updated_at     timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (dataset, procedure_id)
        """,
        partitions,
    )
    op.execute(
        "CREATE UNIQUE INDEX IF NOT EXISTS procedures_signature_idx "
        "ON procedures (dataset, signature)"
    )


def downgrade() -> None:
    for table in _NEW_TABLES:
        op.execute(f"DROP TABLE IF EXISTS {table}")
    op.execute("ALTER TABLE messages DROP COLUMN IF EXISTS tool_call_id")
    op.execute("ALTER TABLE messages DROP COLUMN IF EXISTS tools")
