"""Vectors stay inline with their rows (migration 0024): every summary and chunk cosine
Recall computes reads the row it already has, not the TOAST table besides it."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from tests.recall.factory import make_episode

pytestmark = pytest.mark.citus

# Long enough that the episode's row (vector, sealed summary and key learnings, lexical
# document) is over PostgreSQL's default toast_tuple_target of 2,032 bytes: without the
# migration's setting its vector would be stored out of line.
MESSAGES = [
    "We compared three apartments near the river for the lease starting in March, "
    "weighing rent, commute, light and the landlord's terms on pets and repairs.",
    "The second one on Alder Street had the best light but a steep deposit and a "
    "twelve month minimum; the agent said the owner might accept ten months instead.",
    "We decided to offer on Alder Street if the deposit drops to one month's rent, "
    "and to keep the Birch Lane flat as the fallback because of its shorter commute.",
]


def test_an_episode_and_its_chunks_keep_their_vectors_inline(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        made = make_episode(
            conn,
            "inline-vectors",
            MESSAGES,
            key_learnings=["offer on Alder Street at one month's deposit", "Birch Lane next"],
            entities=["Alder Street", "Birch Lane"],
        )
    with engine.connect() as conn:
        episode = conn.execute(
            text(
                "SELECT pg_column_size(e.*) AS row_size, "
                "pg_column_toast_chunk_id(e.embedding) AS toasted FROM episodes e "
                "WHERE e.dataset = :d AND e.episode_id = :id"
            ),
            {"d": made.dataset, "id": made.episode_id},
        ).one()
        chunks = conn.execute(
            text(
                "SELECT count(*) AS n, max(pg_column_size(m.*)) AS row_size, "
                "count(pg_column_toast_chunk_id(m.embedding)) AS toasted "
                "FROM message_chunks m WHERE m.dataset = :d AND m.thread_id = :t"
            ),
            {"d": made.dataset, "t": made.thread_id},
        ).one()
    assert episode.row_size > 2032, "the row is too small to tell whether the setting holds"
    assert episode.toasted is None, "the episode's vector went to TOAST"
    assert chunks.n >= 1
    assert chunks.row_size > 2032, "the chunks are too small to tell whether the setting holds"
    assert chunks.toasted == 0, "a chunk's vector went to TOAST"


def test_every_table_with_a_vector_keeps_rows_inline(engine) -> None:  # type: ignore[no-untyped-def]
    """A table a later revision adds with a vector column must set it too."""
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT DISTINCT c.oid::regclass::text AS name, c.reloptions FROM pg_class c "
                "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 "
                "AND NOT a.attisdropped WHERE c.relkind = 'r' "
                "AND c.relnamespace = current_schema()::regnamespace "
                "AND a.atttypid = 'vector'::regtype"
            )
        ).all()
    names = {r.name for r in rows}
    assert {"episodes", "message_chunks", "events"} <= {n.rsplit("_p", 1)[0] for n in names}
    missing = sorted(r.name for r in rows if "toast_tuple_target=4080" not in (r.reloptions or []))
    assert not missing, f"tables with a vector column that would move it out of line: {missing}"
