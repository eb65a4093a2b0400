"""Privacy and lifecycle: datasets with their data keys and policies, user text sealed at
rest, compaction of old threads, results of the lifecycle sweeps.

- ``datasets``: one row per dataset (every thread belongs to one: a foreign key). It holds
  the dataset's **data key**, wrapped by a master key kept outside the database (NULL: the
  dataset was created without encryption and is stored in the clear), the dataset's
  retention and compaction policy (NULL: the global default), and ``erasing`` while a
  DeleteDataset is under way (no thread can be created meanwhile). Erasing a dataset
  deletes its row last, and with it the only copy of its data key.
- Every column holding words a person wrote becomes ``bytea``: ``0x01 | nonce |
  AES-GCM ciphertext`` when sealed with the dataset's key, ``0x00 | UTF-8`` when stored in
  the clear (every existing value is converted to that form here, so nothing is rewritten
  and nothing is lost): messages.content/metadata, threads.label/metadata,
  episodes.summary/key_learnings/entities/actor, facts.statement.
- What the database must still compare gets a **blind token** beside it (an HMAC with a
  key derived from the data key; for a dataset in the clear the token is the value
  itself): ``episodes.entity_tokens`` (entity filters), ``facts.statement_token`` (a fact
  is stored once). The lexical search vectors hold tokens the same way (written by the
  application; existing ones, of datasets in the clear, stay valid as they are).
- ``threads.compacted_*``: a compacted thread lost its verbatim messages up to
  ``compacted_through`` and keeps, as provenance, when and a SHA-256 of what was dropped.
- ``leases.last_result``: what a singleton sweep did on its last run (shown by
  ``episodic status``).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# A value stored in the clear: 0x00 followed by its UTF-8 bytes.
_PLAIN = "'\\x00'::bytea || convert_to({}, 'UTF8')"


def _to_plain_bytea(table: str, column: str, expression: str, default: str | None) -> None:
    op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} DROP DEFAULT")
    op.execute(
        f"ALTER TABLE {table} ALTER COLUMN {column} TYPE bytea USING {_PLAIN.format(expression)}"
    )
    if default is not None:
        op.execute(
            f"ALTER TABLE {table} ALTER COLUMN {column} SET DEFAULT {_PLAIN.format(default)}"
        )


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE datasets (
            dataset            text PRIMARY KEY,
            -- The data key's id (a new one whenever the dataset is created again) and the
            -- key itself, wrapped (AES-GCM) by master key master_key_id. NULL: the dataset
            -- is stored in the clear.
            key_id             uuid,
            master_key_id      text,
            wrapped_key        bytea,
            -- Policy; NULL takes the global default (EPISODIC_RETENTION_DAYS,
            -- EPISODIC_COMPACT_AFTER_DAYS).
            retention_days     integer CHECK (retention_days > 0),
            compact_after_days integer CHECK (compact_after_days > 0),
            -- Set when a DeleteDataset starts; the row goes when it finishes.
            erasing_since      timestamptz,
            created_at         timestamptz NOT NULL DEFAULT now(),
            updated_at         timestamptz NOT NULL DEFAULT now(),
            CHECK ((key_id IS NULL) = (wrapped_key IS NULL)),
            CHECK ((key_id IS NULL) = (master_key_id IS NULL))
        )
        """
    )
    op.execute(
        "INSERT INTO datasets (dataset, created_at) "
        "SELECT dataset, min(created_at) FROM threads GROUP BY dataset"
    )
    op.execute(
        "ALTER TABLE threads ADD CONSTRAINT threads_dataset_fkey "
        "FOREIGN KEY (dataset) REFERENCES datasets (dataset)"
    )
    op.execute(
        "CREATE INDEX datasets_erasing_idx ON datasets (erasing_since) "
        "WHERE erasing_since IS NOT NULL"
    )

    _to_plain_bytea("messages", "content", "content", None)
    _to_plain_bytea("messages", "metadata", "metadata::text", "'{}'")
    _to_plain_bytea("threads", "label", "label", "''")
    _to_plain_bytea("threads", "metadata", "metadata::text", "'{}'")

    # Entities: a sealed JSON list, and blind tokens for filtering (the values themselves
    # for a dataset in the clear, which every existing dataset is).
    op.execute("ALTER TABLE episodes ADD COLUMN entity_tokens text[] NOT NULL DEFAULT '{}'")
    op.execute("UPDATE episodes SET entity_tokens = entities WHERE cardinality(entities) > 0")
    op.execute("DROP INDEX IF EXISTS episodes_entities_idx")
    op.execute("CREATE INDEX episodes_entity_tokens_idx ON episodes USING gin (entity_tokens)")
    _to_plain_bytea("episodes", "entities", "to_jsonb(entities)::text", "'[]'")
    _to_plain_bytea("episodes", "summary", "summary", "''")
    _to_plain_bytea("episodes", "key_learnings", "key_learnings::text", "'[]'")
    _to_plain_bytea("episodes", "actor", "actor", "''")

    op.execute("ALTER TABLE facts ADD COLUMN statement_token text")
    op.execute("UPDATE facts SET statement_token = statement")
    op.execute("ALTER TABLE facts ALTER COLUMN statement_token SET NOT NULL")
    op.execute(
        "ALTER TABLE facts DROP CONSTRAINT IF EXISTS facts_episode_id_source_sequence_statement_key"
    )
    op.execute(
        "ALTER TABLE facts ADD CONSTRAINT facts_statement_once "
        "UNIQUE (episode_id, source_sequence, statement_token)"
    )
    _to_plain_bytea("facts", "statement", "statement", None)
    # Erasure deletes a thread's facts by thread (and the foreign key's cascade looks them
    # up the same way).
    op.execute("CREATE INDEX facts_thread_idx ON facts (thread_id)")

    op.execute("ALTER TABLE threads ADD COLUMN compacted_at timestamptz")
    op.execute("ALTER TABLE threads ADD COLUMN compacted_through bigint NOT NULL DEFAULT 0")
    op.execute("ALTER TABLE threads ADD COLUMN compacted_digest text")
    # Retention and compaction pick threads by their last message.
    op.execute(
        "CREATE INDEX threads_dataset_last_message_idx ON threads (dataset, last_message_at)"
    )

    op.execute("ALTER TABLE leases ADD COLUMN last_result jsonb")


def _from_plain_bytea(table: str, column: str, type_: str, default: str | None) -> None:
    op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} DROP DEFAULT")
    op.execute(
        f"ALTER TABLE {table} ALTER COLUMN {column} TYPE {type_} "
        f"USING CAST(convert_from(substring({column} FROM 2), 'UTF8') AS {type_})"
    )
    if default is not None:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET DEFAULT {default}")


def downgrade() -> None:
    # Only possible while nothing is sealed: sealed values need their dataset's key.
    op.execute(
        """
        DO $$
        BEGIN
            IF EXISTS (SELECT 1 FROM datasets WHERE key_id IS NOT NULL) THEN
                RAISE EXCEPTION 'datasets hold encrypted text: downgrading below 0006 would '
                    'lose it; restore a backup taken before the upgrade instead';
            END IF;
        END $$
        """
    )
    op.execute("ALTER TABLE leases DROP COLUMN last_result")
    op.execute("DROP INDEX threads_dataset_last_message_idx")
    for column in ("compacted_digest", "compacted_through", "compacted_at"):
        op.execute(f"ALTER TABLE threads DROP COLUMN {column}")
    op.execute("DROP INDEX facts_thread_idx")
    _from_plain_bytea("facts", "statement", "text", None)
    op.execute("ALTER TABLE facts DROP CONSTRAINT facts_statement_once")
    op.execute("ALTER TABLE facts ADD UNIQUE (episode_id, source_sequence, statement)")
    op.execute("ALTER TABLE facts DROP COLUMN statement_token")
    _from_plain_bytea("episodes", "actor", "text", "''")
    _from_plain_bytea("episodes", "key_learnings", "jsonb", "'[]'::jsonb")
    _from_plain_bytea("episodes", "summary", "text", "''")
    # (A column type change cannot run a subquery per row: go through a new column.)
    op.execute("ALTER TABLE episodes ADD COLUMN entities_text text[] NOT NULL DEFAULT '{}'")
    op.execute(
        "UPDATE episodes SET entities_text = ARRAY(SELECT jsonb_array_elements_text("
        "convert_from(substring(entities FROM 2), 'UTF8')::jsonb))"
    )
    op.execute("ALTER TABLE episodes DROP COLUMN entities")
    op.execute("ALTER TABLE episodes RENAME COLUMN entities_text TO entities")
    op.execute("DROP INDEX episodes_entity_tokens_idx")
    op.execute("ALTER TABLE episodes DROP COLUMN entity_tokens")
    op.execute("CREATE INDEX episodes_entities_idx ON episodes USING gin (entities)")
    _from_plain_bytea("threads", "metadata", "jsonb", "'{}'::jsonb")
    _from_plain_bytea("threads", "label", "text", "''")
    _from_plain_bytea("messages", "metadata", "jsonb", "'{}'::jsonb")
    _from_plain_bytea("messages", "content", "text", None)
    op.execute("ALTER TABLE threads DROP CONSTRAINT threads_dataset_fkey")
    op.execute("DROP TABLE datasets")
