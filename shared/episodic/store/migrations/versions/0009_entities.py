"""The entity canon: canonical entities with aliases per dataset (issue 13).

- ``entity_aliases``: every spelling a dataset's entity was met under, keyed by the
  spelling's blind token (the token ``episodes.entity_tokens`` holds for it), with the
  spelling sealed (``alias``) and the token of its match key (``key_token``).
- ``entities``: one row per canonical entity; ``name_token`` names the alias that is its
  name.
- ``entity_keys``: match keys leading new spellings to their entity.

Every table carries ``dataset`` in its primary key, unique constraints and foreign keys
(the distribution rule). See :mod:`episodic.store.entities`.

**Backfill.** Episodes completed before this revision are not in the canon: their entity
spellings are sealed for encrypted datasets, and a migration holds no data keys. So the
migration only creates the tables; ``episodic entities backfill`` (idempotent, resumable,
run with the services' keyring) files every existing episode's entities. Until it runs,
entity filters still match those episodes by their exact spelling, as before.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30
"""

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE entities (
            dataset     text NOT NULL REFERENCES datasets (dataset),
            entity_id   uuid NOT NULL,
            -- The alias (entity_aliases.alias_token) whose spelling is the entity's name.
            name_token  text NOT NULL,
            created_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (dataset, entity_id)
        )
        """
    )
    op.execute("CREATE INDEX entities_dataset_created_idx ON entities (dataset, created_at)")
    op.execute(
        """
        CREATE TABLE entity_aliases (
            dataset     text NOT NULL,
            alias_token text NOT NULL,
            key_token   text NOT NULL,
            entity_id   uuid NOT NULL,
            alias       bytea NOT NULL,
            created_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (dataset, alias_token),
            FOREIGN KEY (dataset, entity_id) REFERENCES entities (dataset, entity_id)
                ON DELETE CASCADE
        )
        """
    )
    op.execute("CREATE INDEX entity_aliases_entity_idx ON entity_aliases (dataset, entity_id)")
    op.execute(
        """
        CREATE TABLE entity_keys (
            dataset     text NOT NULL,
            key_token   text NOT NULL,
            entity_id   uuid NOT NULL,
            PRIMARY KEY (dataset, key_token),
            FOREIGN KEY (dataset, entity_id) REFERENCES entities (dataset, entity_id)
                ON DELETE CASCADE
        )
        """
    )
    op.execute("CREATE INDEX entity_keys_entity_idx ON entity_keys (dataset, entity_id)")


def downgrade() -> None:
    op.execute("DROP TABLE entity_keys")
    op.execute("DROP TABLE entity_aliases")
    op.execute("DROP TABLE entities")
