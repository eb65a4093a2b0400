"""Vectors stored inline with their rows: no TOAST read per candidate Recall scores (issue 50).

pgvector's ``vector`` is stored EXTERNAL, and PostgreSQL moves a row's largest
out-of-line-able values to the TOAST table whenever the row is over
``toast_tuple_target`` (2,032 bytes by default). An episode's row with a 384-dimensional
embedding (1,540 bytes), its sealed summary and its lexical document is 2.5-3.3 KB: its
embedding went to TOAST, and every summary cosine Recall computes cost a TOAST index probe
and a page read besides the row's. On a dataset of 100k episodes the approximate path
scores ~1,400 candidates: their summary cosines took p50 25.3 ms read from TOAST against
14.2 inline (``docs/benchmarks.md``, "Recall"); a normal dataset's exact path
reads every episode's vector the same way (0.94-0.95x its statement once inline). The
price is on the write side: each of the pipeline's updates of an episode's row (claim,
completion, index, semantic status) rewrites its vector with it, where a TOAST pointer
was not — the Summariser's database time per episode +8-15 %.

Every table with a ``vector`` column (episodes, message_chunks, events, procedures,
procedure_candidates; a later revision that adds one sets it too, which
tests/recall/test_inline_vectors.py checks) gets ``toast_tuple_target = 4080``: a row of
up to 4,080 bytes (two to a page) stays whole, and a larger one still moves its largest
values out first (a long thread's lexical document before its vector). The parameter is set on the leaf
tables (a partitioned table has no storage of its own); Citus copies it to the shards of
a table distributed afterwards and propagates it to those of one distributed already.

Rows written before this revision stay as they are until rewritten: ``VACUUM FULL
episodes`` (an exclusive lock for the time of a copy) or a tool such as pg_repack brings
them inline (docs/concepts/recall.md "A large dataset").

Revision ID: 0024_inline_vectors
Revises: 0023_kept_postings
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision = "0024_inline_vectors"
down_revision = "0023_kept_postings"
branch_labels = None
depends_on = None

#: Two rows to an 8 KB page: PostgreSQL's own limit for that (MaximumBytesPerTuple(2)).
INLINE_UP_TO = 4080


def _tables_with_vectors() -> list[str]:
    """The leaf tables (plain tables and partitions, not partitioned parents) of the
    current schema that have a ``vector`` column — never a Citus shard (a coordinator that
    holds shards shows them where ``citus.show_shards_for_app_name_prefixes`` says so; the
    setting reaches them through their table)."""
    bind = op.get_bind()
    citus = bind.execute(
        text("SELECT to_regprocedure('pg_catalog.relation_is_a_known_shard(regclass)')")
    ).scalar()
    not_a_shard = " AND NOT pg_catalog.relation_is_a_known_shard(c.oid)" if citus else ""
    rows = bind.execute(
        text(
            "SELECT DISTINCT c.oid::regclass::text FROM pg_class c "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
            "WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace "
            f"AND a.atttypid = 'vector'::regtype{not_a_shard} ORDER BY 1"
        )
    )
    return [r[0] for r in rows]


def upgrade() -> None:
    for table in _tables_with_vectors():
        op.execute(f"ALTER TABLE {table} SET (toast_tuple_target = {INLINE_UP_TO})")


def downgrade() -> None:
    # Rows stay as they were written (inline) until rewritten, as after the upgrade.
    for table in _tables_with_vectors():
        op.execute(f"ALTER TABLE {table} RESET (toast_tuple_target)")
