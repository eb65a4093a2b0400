"""Where a dataset's language came from, so that it can be detected from its text.

Until now a dataset was stemmed as English unless someone set its language
(SetDatasetPolicy), so a user writing French got English stemming and was judged by
``abstain``'s English curves. ``datasets.language_origin`` says whose choice
``text_search_config`` is (store/languages.py):

- ``default``: nobody's: 'english' until the Summariser detects the language from the
  dataset's text (EPISODIC_DETECT_LANGUAGE), which it does once;
- ``detected``: the Summariser's detection (final: it is not detected again);
- ``set``: SetDatasetPolicy's ``language`` (detection never overrides it).

Existing datasets in another configuration than 'english' were set by someone: ``set``;
so were those whose audit trail holds a SetDatasetPolicy with a language (English set on
purpose). The other 'english' ones were never set: ``default``, detected at their next
episode with enough text — switched to another language only while the dataset is small
(store/languages.py ``MAX_SWITCHED_EPISODES``: re-stemming a large index is an operator's
decision, made with SetDatasetPolicy).

Revision ID: 0015_language_origin
Revises: 0014_embedding_space
Create Date: 2026-12-02
"""

from alembic import op

revision = "0015_language_origin"
down_revision = "0014_embedding_space"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE datasets ADD COLUMN IF NOT EXISTS language_origin text NOT NULL "
        "DEFAULT 'default' CHECK (language_origin IN ('default', 'detected', 'set'))"
    )
    op.execute(
        "UPDATE datasets d SET language_origin = 'set' WHERE d.text_search_config <> 'english' "
        "OR EXISTS (SELECT 1 FROM audit_events a WHERE a.dataset = d.dataset "
        "AND a.action = 'dataset.policy' AND a.details ? 'language')"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE datasets DROP COLUMN IF EXISTS language_origin")
