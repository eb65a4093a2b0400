"""Per-dataset language for the lexical index (issue 19). Placeholder: filled by the multilingual work.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
