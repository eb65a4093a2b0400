"""Distribution-ready schema: dataset in every key, hash partitions (issue 15). Placeholder: filled by the scale-out work.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30
"""

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
