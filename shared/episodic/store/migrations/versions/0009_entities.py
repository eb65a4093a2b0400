"""The entity canon: canonical entities with aliases per dataset (issue 13). Placeholder:
filled by the entities work.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30
"""

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
