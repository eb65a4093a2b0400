"""Event episodes recorded by agents (RecordEvent) and the turn classifier's output (issue 13). Placeholder: filled by the events work.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30
"""

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
