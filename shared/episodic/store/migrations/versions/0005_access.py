"""API keys and the audit log.

A key is stored as its public prefix (for lookup, logs and audits) and a SHA-256 hash of
its secret; the secret itself is shown once and never stored. Keys are 256-bit random, so
a fast hash is enough (nothing to brute-force). ``datasets`` holds the key's scope: exact
dataset names, ``acme/*`` prefixes, or ``*``.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE api_keys (
            key_id       uuid PRIMARY KEY,
            prefix       text NOT NULL UNIQUE,
            secret_hash  bytea NOT NULL,
            name         text NOT NULL DEFAULT '',
            role         text NOT NULL
                         CHECK (role IN ('reader', 'writer', 'admin', 'service')),
            datasets     text[] NOT NULL CHECK (cardinality(datasets) > 0),
            created_at   timestamptz NOT NULL DEFAULT now(),
            expires_at   timestamptz,
            revoked_at   timestamptz,
            created_by   text NOT NULL DEFAULT ''
        )
        """
    )
    op.execute("CREATE INDEX api_keys_created_idx ON api_keys (created_at DESC, key_id DESC)")
    op.execute(
        """
        CREATE TABLE audit_events (
            event_id     bigserial PRIMARY KEY,
            occurred_at  timestamptz NOT NULL DEFAULT now(),
            key_prefix   text NOT NULL,
            action       text NOT NULL,
            dataset      text,
            target       text NOT NULL DEFAULT '',
            details      jsonb NOT NULL DEFAULT '{}'::jsonb
        )
        """
    )
    op.execute("CREATE INDEX audit_events_dataset_idx ON audit_events (dataset, event_id DESC)")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS audit_events")
    op.execute("DROP TABLE IF EXISTS api_keys")
