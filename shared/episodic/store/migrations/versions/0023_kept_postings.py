"""Each kept word's best holders with their weights: postings in impact order (issue 50).

Migration 0022 kept, per dataset and word, its best holders (documents, threads of chunks)
by the word's BM25 weight, as candidates. With the weights beside them, the approximate
path scores the query's words' holders from these lists alone — each holder's BM25 over
the words whose lists hold it — where it read every holder of every selective word and
ran ``ts_rank`` over every holder of any query word (docs/benchmarks-history.md "A big
tenant's Recall: postings in impact order").

- ``kept_term_statistics.document_weights``: the weight of each entry of
  ``best_documents``, in the same order (double precision, so a dataset whose lists are
  whole scores exactly as when counted).
- ``best_passages`` and ``passage_weights`` replace ``best_threads``: the word's best
  episodes by their best passage holding it, and that passage's weight. An episode, not
  its thread: the statement scores an episode's passages, and finding a thread's
  episodes cost a probe per thread.
- What was kept is dropped: the Scheduler's maintenance counts it again with the weights
  (until then Recall counts, as for a dataset with nothing kept).
- ``episodes_dataset_completed_idx``: the episodes a dataset completed since its count,
  which no list holds, are found by when they were completed.

Revision ID: 0023_kept_postings
Revises: 0022_kept_statistics
Create Date: 2026-12-06
"""

from alembic import op

revision = "0023_kept_postings"
down_revision = "0022_kept_statistics"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Lists without their weights would score nothing: count them again.
    op.execute("DELETE FROM kept_statistics")
    op.execute(
        "ALTER TABLE kept_term_statistics "
        "ADD COLUMN IF NOT EXISTS document_weights double precision[] NOT NULL DEFAULT '{}', "
        "ADD COLUMN IF NOT EXISTS best_passages uuid[] NOT NULL DEFAULT '{}', "
        "ADD COLUMN IF NOT EXISTS passage_weights double precision[] NOT NULL DEFAULT '{}', "
        "DROP COLUMN IF EXISTS best_threads"
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS episodes_dataset_completed_idx "
        "ON episodes (dataset, completed_at) WHERE status = 'completed'"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS episodes_dataset_completed_idx")
    op.execute("DELETE FROM kept_statistics")
    op.execute(
        "ALTER TABLE kept_term_statistics DROP COLUMN IF EXISTS document_weights, "
        "DROP COLUMN IF EXISTS best_passages, DROP COLUMN IF EXISTS passage_weights, "
        "ADD COLUMN IF NOT EXISTS best_threads uuid[] NOT NULL DEFAULT '{}'"
    )
