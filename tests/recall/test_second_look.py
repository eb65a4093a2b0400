"""The second look at the best candidates (RankingOptions.rerank_top, the default since the
fifth pass): the ranking's top k put in order again by a fusion that also reads the
proximity of the query's words; which episodes make the top k is the ranking's own."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from episodic.config import RecallSettings
from episodic.services.recall import domain
from episodic.store import recall_queries as q
from episodic.store.raw_statement import observing_statements
from episodic.store.recall_queries import (
    DEFAULT_RANKING,
    LEARNED_WEIGHTS,
    SECOND_LOOK,
    RankingOptions,
    RecallFilters,
    reorder_top,
)
from episodic.testing.keys import test_vault
from tests.recall.factory import T0, _key, make_episode

PHRASE_FIRST = RankingOptions(
    fusion="learned",
    phrase=True,
    rerank_top=3,
    rerank_weights=(*LEARNED_WEIGHTS.items(), ("phrase", 5.0)),
)


def _row(name: str, phrase: float, relevance: float, **signals: float) -> dict[str, Any]:
    base = {
        "lexical": 1.0,
        "semantic": 1.0,
        "cosine": 0.5,
        "coverage": 1.0,
        "passage_coverage": 1.0,
        "recency": 1.0,
    }
    return {"name": name, "phrase": phrase, "relevance": relevance, **base, **signals}


def test_the_top_k_are_reordered_and_the_rest_left_where_they_are() -> None:
    rows = [
        _row("a", 0.0, 0.9),
        _row("b", 0.0, 0.8),
        _row("c", 1.0, 0.7),  # says the phrase: first among the top three
        _row("d", 1.0, 0.6),  # below the top three: stays fourth
    ]
    out = reorder_top(rows, PHRASE_FIRST, 0.7, 0.3)
    assert [r["name"] for r in out] == ["c", "a", "b", "d"]
    assert [r["relevance"] for r in out] == [0.7, 0.9, 0.8, 0.6]  # the ranking's own


def test_equal_candidates_keep_the_rankings_order() -> None:
    rows = [_row(n, 0.5, 1.0 - i / 10) for i, n in enumerate("abcd")]
    assert [r["name"] for r in reorder_top(rows, PHRASE_FIRST, 0.7, 0.3)] == list("abcd")


def test_rows_without_the_signals_keep_their_place() -> None:
    """An event (no proximity signal) is not moved; the episodes around it are."""
    event_row = {"name": "event", "relevance": 0.85, "lexical": 1.0, "semantic": 1.0}
    rows = [_row("a", 0.0, 0.9), event_row, _row("c", 1.0, 0.7)]
    out = reorder_top(rows, PHRASE_FIRST, 0.7, 0.3)
    assert [r["name"] for r in out] == ["c", "event", "a"]


def test_recency_still_counts_in_the_second_look() -> None:
    rows = [
        _row("old-phrase", 1.0, 0.9, recency=0.0),
        _row("new-plain", 0.9, 0.8, recency=1.0),
    ]
    assert reorder_top(rows, PHRASE_FIRST, 0.7, 0.3)[0]["name"] == "new-plain"
    assert reorder_top(rows, PHRASE_FIRST, 1.0, 0.0)[0]["name"] == "old-phrase"


def test_a_candidate_that_matches_neither_way_has_no_similarity() -> None:
    rows = [
        _row("match", 0.0, 0.9),
        _row("nothing", 1.0, 0.8, lexical=0.0, semantic=0.0),
    ]
    assert reorder_top(rows, PHRASE_FIRST, 1.0, 0.0)[0]["name"] == "match"


def test_off_changes_nothing() -> None:
    rows = [_row("a", 0.0, 0.9), _row("b", 1.0, 0.8)]
    off = replace(PHRASE_FIRST, rerank_top=0, rerank_weights=())
    assert reorder_top(rows, off, 0.7, 0.3) == rows


def test_the_options_refuse_a_second_look_without_weights() -> None:
    with pytest.raises(ValueError, match="rerank_top"):
        RankingOptions(rerank_top=5)
    with pytest.raises(ValueError, match="phrase"):  # a weight needs its signal
        RankingOptions(rerank_top=5, rerank_weights=(("phrase", 1.0),))


def test_the_default_and_the_settings_take_the_second_look() -> None:
    assert DEFAULT_RANKING.rerank_top == SECOND_LOOK == 5
    assert DEFAULT_RANKING.phrase
    assert domain.ranking_from(RecallSettings()) == DEFAULT_RANKING
    off = domain.ranking_from(RecallSettings(ranking_second_look=0))
    assert off.rerank_top == 0 and not off.phrase


def _recall(conn, query: str, options: RankingOptions, limit: int = 10) -> list[str]:  # type: ignore[no-untyped-def]
    request = domain.RecallQuery(
        dataset="ds",
        query=query,
        include_episodes=True,
        limit=limit,
        similarity_weight=1.0,
        recency_weight=0.0,
        filters=RecallFilters(as_of=T0),
        ranking=options,
    )
    return [str(r["episode_id"]) for r in domain.recall(conn, test_vault(), request, None).rows]


def test_the_episode_that_says_the_phrase_comes_first_even_with_a_limit_of_one(engine) -> None:  # type: ignore[no-untyped-def]
    """Both threads hold "LGBTQ" and "conference"; the one with them apart says them more
    often (the ranking's first), the other says "LGBTQ conference". With a limit of one the
    statement still reads the top k for the second look."""
    with engine.begin() as conn:
        apart = make_episode(
            conn,
            "ds",
            [
                "the LGBTQ parade was loud, LGBTQ friends everywhere",
                "work sent me to a sales conference, then another conference",
            ],
        )
        together = make_episode(conn, "ds", ["I went to an LGBTQ conference two days ago"])
    query = "When did Caroline go to the LGBTQ conference?"
    plain = replace(PHRASE_FIRST, rerank_top=0, rerank_weights=())
    with engine.connect() as conn:
        before = _recall(conn, query, plain)
        after = _recall(conn, query, PHRASE_FIRST)
        one = _recall(conn, query, PHRASE_FIRST, limit=1)
    assert before[0] == str(apart.episode_id)
    assert after[0] == str(together.episode_id)
    assert one == [str(together.episode_id)]


def test_the_opening_reads_the_query_words_in_order_so_the_pairs_cost_no_round_trip(
    engine,  # type: ignore[no-untyped-def]
) -> None:
    query = "When did Caroline go to the LGBTQ conference?"
    with engine.begin() as conn:
        make_episode(conn, "ds", ["I went to an LGBTQ conference"])
        key = _key(conn, "ds")
    with engine.connect() as conn:
        opening = q.read_opening(conn, "ds", query=query, size_bound=None, ordered=True)
        assert opening.ordered == ["carolin", "go", "lgbtq", "confer"]
        assert q.phrase_pairs(key, opening.ordered) == q.query_phrase_pairs(conn, key, query)
        statements: list[str] = []

        def seen(statement: str, *_: Any) -> None:
            statements.append(statement)

        # Every statement, through SQLAlchemy or on its psycopg connection directly.
        with observing_statements(seen):
            _recall(conn, query, DEFAULT_RANKING)
    # the opening (key, lexemes, word forms, their order) and the ranking: two round trips
    assert len(statements) == 2, statements
