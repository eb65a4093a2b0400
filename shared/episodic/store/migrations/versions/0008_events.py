"""Event episodes: what an agent recorded with RecordEvent, and what the turn classifier
decided was worth recording (issue 13; seed 002, "Episodes are events, not messages").

- ``events``: one row per event, keyed by ``(dataset, event_id)`` (the distribution rule:
  every unique index and foreign key carries ``dataset``). The words a person or agent
  wrote are sealed with the dataset's key like an episode's (``summary``, ``entities``,
  ``actor``), and what the database must compare has a blind token beside it:
  ``entity_tokens`` (the entity filter, exactly as ``episodes.entity_tokens``) and
  ``actor_token`` (the actor filter). ``search_vector``/``search_length`` is the lexical
  document (blind tokens, like ``episodes.search_vector``) written with the row;
  ``embedding`` is filled afterwards by the Summariser (NULL until then: the event is
  still found by words and by time).
- ``source`` says who recorded it: ``agent`` (RecordEvent; ``idempotency_key`` unique per
  dataset) or ``classifier`` (a turn of ``thread_id`` at ``source_sequence``; one event per
  turn at most). ``thread_id`` is optional for agent events; erasure deletes a thread's
  events with the thread and a dataset's with the dataset (no foreign key to threads,
  whose key is not yet per dataset: a thread is share-locked while its event is written,
  so an erasure cannot pass underneath).
- ``threads.classified_sequence``: how far the turn classifier has read each thread, so it
  runs after AddMessages has committed (the ack never waits for it) and resumes where it
  stopped after a crash. Every thread starts unread: a classifier switched on later reads
  the turns written while it was off too.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30
"""

from alembic import op
from sqlalchemy import text

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def _dimension() -> int:
    # Event vectors are compared with the same query vector as episodes.embedding.
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
    op.execute(
        f"""
        CREATE TABLE events (
            dataset         text NOT NULL REFERENCES datasets (dataset),
            event_id        uuid NOT NULL,
            source          text NOT NULL CHECK (source IN ('agent', 'classifier')),
            thread_id       uuid,
            source_sequence bigint CHECK (source_sequence > 0),
            event_type      text NOT NULL CHECK (event_type ~ '^[a-z][a-z0-9_]*$'),
            actor           bytea NOT NULL,
            actor_token     text NOT NULL,
            summary         bytea NOT NULL,
            entities        bytea NOT NULL,
            entity_tokens   text[] NOT NULL DEFAULT '{{}}',
            occurred_at     timestamptz NOT NULL,
            idempotency_key text,
            search_vector   tsvector,
            search_length   integer,
            embedding       vector({_dimension()}),
            created_at      timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (dataset, event_id),
            CHECK (source <> 'classifier'
                   OR (thread_id IS NOT NULL AND source_sequence IS NOT NULL))
        )
        """
    )
    op.execute(
        "CREATE UNIQUE INDEX events_idempotency_idx ON events (dataset, idempotency_key) "
        "WHERE idempotency_key IS NOT NULL"
    )
    op.execute(
        "CREATE UNIQUE INDEX events_classified_turn_idx "
        "ON events (dataset, thread_id, source_sequence) WHERE source = 'classifier'"
    )
    # Recall's candidates: a dataset's events in time (since/until/as_of).
    op.execute("CREATE INDEX events_dataset_time_idx ON events (dataset, occurred_at DESC)")
    # Erasure and retention of one thread's events.
    op.execute(
        "CREATE INDEX events_thread_idx ON events (dataset, thread_id) WHERE thread_id IS NOT NULL"
    )
    op.execute("CREATE INDEX events_entity_tokens_idx ON events USING gin (entity_tokens)")
    # The Summariser's embedding pass finds the events still without a vector.
    op.execute(
        "CREATE INDEX events_unembedded_idx ON events (dataset, created_at) WHERE embedding IS NULL"
    )

    op.execute(
        "ALTER TABLE threads ADD COLUMN classified_sequence bigint NOT NULL DEFAULT 0 "
        "CHECK (classified_sequence >= 0)"
    )
    op.execute(
        "CREATE INDEX threads_unclassified_idx ON threads (last_message_at) "
        "WHERE last_sequence > classified_sequence"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS threads_unclassified_idx")
    op.execute("ALTER TABLE threads DROP COLUMN IF EXISTS classified_sequence")
    op.execute("DROP TABLE IF EXISTS events")
