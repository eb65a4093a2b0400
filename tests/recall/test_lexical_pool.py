"""The approximate path's lexical pool chosen by Recall from the kept postings
(store/lexical_pool.py, issue 50): the same episodes and the same normalising maxima as
the statement's own kept parts chose, carried into the statement intact; nothing chosen
when nothing is kept, and an empty pool when no query word is held."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID

import pytest
from sqlalchemy import text

from episodic.store import kept_statistics, recall_queries
from episodic.store.lexical_pool import LexicalPool, choose_lexical_pool
from episodic.store.ranking_sql import approximate_parts, recall_sql
from episodic.store.raw_statement import driver_form, fetch_all
from episodic.store.recall_queries import Approximation
from tests.recall.test_kept_statistics import _fill, _recall

pytestmark = pytest.mark.citus

#: Every holder of the query words fits: the pool is then a set, not a choice among ties.
WHOLE = Approximation(candidates=100, recent=0, per_lexeme=2)
#: Each word's densest holders alone (no ``best lexical`` part).
DENSEST = Approximation(candidates=0, recent=0, per_lexeme=2)
#: Each word's first holder only: its list cut short.
FIRST = Approximation(candidates=100, recent=0, per_lexeme=2, postings=1)


@pytest.fixture
def spied(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """What each ranking chose: the postings' rows, the pool, and the parameters the
    statement was sent with."""
    seen: list[dict[str, Any]] = []
    choose = recall_queries.choose_lexical_pool
    execute = recall_queries._execute

    def choosing(rows, **sizes):  # type: ignore[no-untyped-def]
        pool = choose(rows, **sizes)
        seen.append({"rows": rows, "pool": pool})
        return pool

    def executing(conn, statement, params):  # type: ignore[no-untyped-def]
        if seen and "params" not in seen[-1]:
            seen[-1]["params"], seen[-1]["statement"] = params, statement
        return execute(conn, statement, params)

    monkeypatch.setattr(recall_queries, "choose_lexical_pool", choosing)
    monkeypatch.setattr(recall_queries, "_execute", executing)
    yield seen


def _statement_pool(conn, params: dict[str, Any]) -> tuple[set[UUID], dict[str, float | None]]:  # type: ignore[no-untyped-def]
    """The pool's lexical members and maxima as the statement's own kept parts choose them
    (the statement without a lexical pool, its parts run alone)."""
    statement = recall_sql(
        with_query=True, with_vector=True, approximate=True, kept_statistics=True
    )
    head = statement[: statement.index("pool AS MATERIALIZED (")]
    parts = approximate_parts(True, kept=True)
    lexical = " UNION ".join(
        f"({parts[name]})" for name in ("best lexical", "densest documents", "densest chunks")
    )
    members = {
        r["episode_id"]
        for r in fetch_all(
            conn, driver_form(f"{head} part AS ({lexical}) SELECT episode_id FROM part"), params
        )
    }
    (best,) = fetch_all(
        conn,
        driver_form(
            f"{head} done AS (SELECT 1) SELECT d.score AS best_document, d.idf AS "
            "best_document_idf, p.score AS best_passage, p.idf AS best_passage_idf "
            "FROM best_document d, best_passage p"
        ),
        params,
    )
    return members, best


@pytest.mark.parametrize("sizes", [WHOLE, DENSEST, FIRST], ids=["whole", "densest", "first"])
@pytest.mark.parametrize(
    "query", ["zebra invoice", "invoice refund football", "gardening weather", "zebra"]
)
def test_recall_chooses_the_pool_the_statement_chose(  # type: ignore[no-untyped-def]
    recall_engine, spied, query, sizes
) -> None:
    """Scored in numpy from the postings, the pool holds the episodes the statement's kept
    parts hold (the best by the lexical fit, each word's densest), with the same dataset
    maxima; and the statement reads the ids as they were chosen."""
    _fill(recall_engine)
    assert kept_statistics.refresh(recall_engine, "big") is not None
    with recall_engine.connect() as conn:
        answer = _recall(conn, query, sizes)
        assert answer.rows
        (chosen,) = spied
        pool: LexicalPool = chosen["pool"]
        members, best = _statement_pool(conn, chosen["params"])
        decoded = fetch_all(
            conn,
            driver_form(
                "SELECT CAST(encode(substring(CAST(:lexical_pool AS bytea) FROM 16 * i + 1 "
                "FOR 16), 'hex') AS uuid) AS episode_id FROM generate_series(0, "
                "length(CAST(:lexical_pool AS bytea)) / 16 - 1) AS i"
            ),
            pool.params(),
        )
    ids = [UUID(bytes=pool.episode_ids[i : i + 16]) for i in range(0, len(pool.episode_ids), 16)]
    assert members and set(ids) == members and len(ids) == len(members)
    assert [r["episode_id"] for r in decoded] == ids
    for name in ("best_document", "best_document_idf", "best_passage", "best_passage_idf"):
        assert getattr(pool, name) == pytest.approx(best[name], rel=1e-12), name


def test_a_smaller_pool_keeps_the_best_by_the_lexical_fit(recall_engine, spied) -> None:  # type: ignore[no-untyped-def]
    """Cut to fewer than its holders, the pool keeps those the statement's ``best lexical``
    part ranks first: of the many holders of "gardening", the two zebra episodes that
    hold both words."""
    made = _fill(recall_engine)
    kept_statistics.refresh(recall_engine, "big")
    two = Approximation(candidates=2, recent=0, per_lexeme=0)
    with recall_engine.connect() as conn:
        _recall(conn, "zebra gardening", two)
    pool: LexicalPool = spied[0]["pool"]
    # array_send: a 20-byte header, then 4 + 16 bytes a holder
    holders = max((len(r["documents"]) - 20) // 20 for r in spied[0]["rows"])
    assert holders > 2
    ids = {UUID(bytes=pool.episode_ids[i : i + 16]) for i in range(0, len(pool.episode_ids), 16)}
    assert ids == {m.episode_id for m in made[36:38]}  # the threads' current episodes


def test_nothing_kept_chooses_no_pool_and_no_word_held_an_empty_one(  # type: ignore[no-untyped-def]
    recall_engine, spied
) -> None:
    """Before the count, the statement counts the statistics itself (no pool); after it,
    a query none of whose words the dataset holds gets an empty pool, and an answer."""
    _fill(recall_engine)
    with recall_engine.connect() as conn:
        _recall(conn, "zebra invoice", WHOLE)
    assert spied[-1]["pool"] is None and choose_lexical_pool([], candidates=1, per_lexeme=1) is None
    kept_statistics.refresh(recall_engine, "big")
    with recall_engine.connect() as conn:
        answer = _recall(conn, "quokka xylophone", WHOLE)
        assert conn.execute(text("SELECT count(*) FROM kept_statistics")).scalar() == 1
    pool = spied[-1]["pool"]
    assert (pool.episode_ids, pool.best_document, pool.best_passage) == (b"", None, None)
    assert pool.kept.document_frequencies == [0.0, 0.0] and pool.kept.documents == 39
    assert answer.rows  # the nearest and recent parts still bring candidates


def test_the_statement_scores_with_the_statistics_the_pool_read(  # type: ignore[no-untyped-def]
    recall_engine, spied
) -> None:
    """The ranking statement reads nothing kept: counted again (or dropped) after the pool
    was chosen, the statistics it scores with are still those the pool was chosen with."""
    _fill(recall_engine)
    kept_statistics.refresh(recall_engine, "big")
    with recall_engine.connect() as conn:
        answer = _recall(conn, "zebra invoice football", WHOLE)
    (chosen,) = spied
    with recall_engine.begin() as conn:
        conn.execute(text("UPDATE kept_term_statistics SET documents = 30, passages = 30"))
        conn.execute(text("UPDATE kept_statistics SET document_length = 1, passages = 1"))
    with recall_engine.connect() as conn:
        again = recall_queries._execute(conn, chosen["statement"], chosen["params"])
    scored = {r["episode_id"]: r["lexical"] for r in answer.rows}
    # the lexical signal: recency moves with the clock between the two statements
    assert {r["episode_id"]: r["lexical"] for r in again if r["passes"]} == pytest.approx(
        scored, rel=1e-12
    )


def test_a_list_it_cannot_read_leaves_the_lists_to_the_statement() -> None:
    """A kept list with a NULL element (array_send's flag) or elements of another width is
    not read as if it were whole: no pool, and the ranking statement reads the lists."""
    import datetime
    import struct

    def sent(values: list[bytes], width: int, nulls: int = 0) -> bytes:
        header = struct.pack(">iiiii", 1, nulls, 0, len(values), 1)
        return header + b"".join(struct.pack(">i", width) + v for v in values)

    ids = [UUID(int=i).bytes for i in (1, 2)]
    weights = [struct.pack(">d", w) for w in (2.0, 1.0)]
    row = {
        "dn": 2, "davg": 5.0, "pn": 2, "pavg": 3.0, "complete_before": datetime.datetime.now(),
        "query_words": 1, "lexeme": "zebra", "weight": 1.0, "term": "zebra",
        "ddf": 2.0, "pdf": 2.0, "pooled": True,
        "documents": sent(ids, 16), "document_weights": sent(weights, 8),
        "passages": sent(ids, 16), "passage_weights": sent(weights, 8),
    }  # fmt: skip
    whole = choose_lexical_pool([row], candidates=5, per_lexeme=0)
    assert whole is not None and len(whole.episode_ids) == 32
    assert whole.episode_ids[:16] == ids[0]  # the heavier first
    with_null = {**row, "document_weights": sent(weights, 8, nulls=1)}
    assert choose_lexical_pool([with_null], candidates=5, per_lexeme=0) is None
    narrower = {**row, "passage_weights": sent([w[:4] for w in weights], 4)}
    assert choose_lexical_pool([narrower], candidates=5, per_lexeme=0) is None
