"""Per-dataset language for the lexical index (issue 19).

``datasets.text_search_config``: the PostgreSQL text-search configuration that parses and
stems a dataset's text for Recall's lexical index and its queries (both must agree). Every
existing dataset keeps 'english', the configuration it was indexed with. SetDatasetPolicy
changes it (and re-tokenises the dataset's index); a language PostgreSQL has no stemmer for
gets 'simple' (words as written, lowercased).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE datasets ADD COLUMN text_search_config text NOT NULL DEFAULT 'english' "
        "CHECK (text_search_config ~ '^[a-z_]{1,63}$')"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE datasets DROP COLUMN text_search_config")
