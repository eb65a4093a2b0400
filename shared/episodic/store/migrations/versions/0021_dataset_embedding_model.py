"""Which embedding model made a dataset's vectors, when it is not the store's (issue 40).

The store's model (``embedding_space``, migration 0014) is English-only by default
(MiniLM): a French user's paraphrases recall near chance with it (R@1 .35 on the short
multilingual set against .87 with multilingual-e5-small). The multilingual model costs
7× the Summariser's time and 5× a query's embedding, and is no better on English, so
it is not everyone's default: a dataset whose language is not English gets its vectors
from it (``EPISODIC_EMBEDDING_MULTILINGUAL``; store/embedding_space.py, "A dataset's
own space").

``datasets.embedding_model``: NULL, the store's model (every dataset so far); else the
name of the model that made every vector of the dataset. It changes only under the
dataset's language lock held exclusively, with the dataset's vectors re-embedded in the
same transaction (services/summariser/spaces.py).

Revision ID: 0021_dataset_embedding_model
Revises: 0020_dataset_chunks_pending
Create Date: 2026-12-05
"""

from alembic import op

revision = "0021_dataset_embedding_model"
down_revision = "0020_dataset_chunks_pending"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE datasets ADD COLUMN IF NOT EXISTS embedding_model text")


def downgrade() -> None:
    op.execute("ALTER TABLE datasets DROP COLUMN IF EXISTS embedding_model")
