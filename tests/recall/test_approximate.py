"""Recall's approximate candidate path (a large dataset): chosen by dataset size only above
the threshold, and it ranks the same top episodes as the exact path, filters included."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine

from episodic.config import Settings
from episodic.providers import HashingEmbedder
from episodic.services.recall import domain
from episodic.services.recall.__main__ import engine_options
from episodic.store.db import make_engine
from episodic.store.recall_queries import Approximation, RecallFilters
from episodic.testing.keys import test_vault
from tests.recall.factory import EMBEDDER, T0, make_episode

#: Small enough that the candidate set is a strict part of the dataset's 64 episodes.
SMALL = Approximation(candidates=4, recent=3)
FILLER = ["gardening", "weather", "football", "recipes", "holidays", "music", "cars", "films"]


@pytest.fixture
def recall_engine(db_url: str) -> Iterator[Engine]:
    """An engine with the Recall service's session settings (iterative HNSW scans)."""
    settings = Settings()
    settings.recall.recall_approximate_candidates = SMALL.candidates
    eng = make_engine(db_url, pool_size=2, **engine_options(settings))
    yield eng
    eng.dispose()


def _fill(engine: Engine) -> None:
    rng = random.Random(5)
    with engine.begin() as conn:
        for i in range(60):
            topic = rng.choice(FILLER)
            make_episode(
                conn,
                "big",
                [f"we talked about {topic} for a while", f"more on {topic} and {i}"],
                ended_at=T0 - timedelta(days=3 + i, hours=rng.randrange(24)),
                entities=["alice"] if i % 2 else ["bob"],
            )
        for days, entities in ((10, ["alice"]), (40, ["bob"]), (70, ["alice"])):
            make_episode(
                conn,
                "big",
                ["the zebra invoice was paid late", "zebra invoice number 12 needs a refund"],
                ended_at=T0 - timedelta(days=days),
                entities=entities,
            )
        make_episode(conn, "big", ["something from this morning"], ended_at=T0)


def _recall(conn, query, sizes, *, limit=3, **filters) -> domain.RecallAnswer:  # type: ignore[no-untyped-def]
    filters.setdefault("as_of", T0 + timedelta(hours=1))
    request = domain.RecallQuery(
        dataset="big",
        query=query,
        include_episodes=True,
        limit=limit,
        similarity_weight=0.7,
        recency_weight=0.3,
        filters=RecallFilters(**filters),
    )
    vector = EMBEDDER.embed_query(query) if request.needs_embedding else None
    return domain.recall(conn, test_vault(), request, vector, sizes)


def _ids(answer: domain.RecallAnswer) -> list[str]:
    return [str(r["episode_id"]) for r in answer.rows]


def test_the_approximate_path_is_chosen_only_above_the_threshold(recall_engine) -> None:  # type: ignore[no-untyped-def]
    _fill(recall_engine)
    with recall_engine.connect() as conn:
        # 64 episodes: the approximate path above 63, not at 64 (its threshold) or more.
        assert domain.DatasetSizes(63, SMALL).path(conn, "big") is SMALL
        assert domain.DatasetSizes(64, SMALL).path(conn, "big") is None
        assert domain.DatasetSizes(63, SMALL).path(conn, "other") is None
        assert domain.DatasetSizes(0, SMALL).path(conn, "big") is SMALL
        # Asked for every episode, the exact path answers all 64, the approximate one only
        # its candidates: proof that it ranked a part of the dataset.
        exact = _recall(conn, "zebra invoice", domain.DatasetSizes(10_000, SMALL), limit=100)
        approximate = _recall(conn, "zebra invoice", domain.DatasetSizes(10, SMALL), limit=100)
        assert len(exact.rows) == 64
        assert 3 <= len(approximate.rows) < 64
        assert exact.episode_count == approximate.episode_count == 64
        # The size a recall saw is remembered: a dataset that grows switches paths.
        sizes = domain.DatasetSizes(63, SMALL)
        sizes.saw("big", 10)
        assert sizes.path(conn, "big") is None
        _recall(conn, None, sizes, as_of=None)
        assert sizes.path(conn, "big") is SMALL


def test_the_nearest_parts_take_their_own_number_of_episodes(recall_engine) -> None:  # type: ignore[no-untyped-def]
    """Approximation.nearest (recall_approximate_nearest) bounds the HNSW walks apart from
    the lexical parts, and the sessions' search list follows it."""
    from episodic.services.recall.__main__ import ef_search

    _fill(recall_engine)
    # No lexical candidates (the query's words are in no episode), nothing recent: the
    # nearest summaries and the threads of the nearest chunks alone.
    for nearest, most in ((1, 2), (6, 12)):
        only_nearest = Approximation(candidates=20, recent=0, nearest=nearest)
        with recall_engine.connect() as conn:
            answer = _recall(
                conn, "quokka marmalade", domain.DatasetSizes(10, only_nearest), limit=100
            )
        assert nearest <= len(answer.rows) <= most
    # a margin over the walks' size, for the rows the dataset filter drops (no second pass)
    settings = Settings().recall
    assert ef_search(settings) == 330 and settings.recall_approximate_nearest == 300
    settings.recall_approximate_nearest = None
    assert ef_search(settings) == settings.recall_approximate_candidates + 40
    settings.recall_approximate_nearest = 20
    assert ef_search(settings) == 40
    settings.recall_approximate_nearest = 1000  # pgvector's ceiling
    assert ef_search(settings) == 1000


def test_filters_that_leave_few_episodes_of_a_large_dataset_are_ranked_exactly(  # type: ignore[no-untyped-def]
    recall_engine,
) -> None:
    """A large dataset narrowed by its filters to at most the threshold's episodes takes
    the exact path (every episode they leave is scored); filters that leave more, the
    approximate one."""
    _fill(recall_engine)
    # At most one candidate from each part: the approximate path ranks 3 episodes or fewer.
    tiny = Approximation(candidates=1, recent=0, per_lexeme=1)
    sizes = domain.DatasetSizes(10, tiny)  # "big" has 64 completed episodes
    week = {"since": T0 - timedelta(days=8)}  # the morning's, and 3-8 days ago: < 10
    with recall_engine.connect() as conn:
        assert sizes.path(conn, "big") is tiny
        few = _recall(conn, "invoice", sizes, limit=100, **week)
        exact = _recall(conn, "invoice", domain.DatasetSizes(10_000, tiny), limit=100, **week)
        many = _recall(conn, "invoice", sizes, limit=100, since=T0 - timedelta(days=400))
        # a process that has not seen the dataset yet counts it, then what the filter leaves
        first = _recall(conn, "invoice", domain.DatasetSizes(10, tiny), limit=100, **week)
    assert _ids(first) == _ids(few)
    assert 3 < len(few.rows) <= 10
    assert _ids(few) == _ids(exact)  # every episode the filter leaves, ranked
    assert len(many.rows) <= 3  # the approximate path's candidates only


@pytest.mark.parametrize(
    ("query", "filters"),
    [
        ("zebra invoice", {}),
        ("zebra refund", {"since": T0 - timedelta(days=50)}),
        ("zebra invoice", {"entities": ["alice"]}),
        ("zebra invoice", {"as_of": T0 - timedelta(days=20)}),
        ("invoice", {"min_relevance": 0.1}),
        ("invoice", {"min_match": 0.1}),
        (None, {}),
        (None, {"until": T0 - timedelta(days=30)}),
        # A time the query names (recency counts from it; no episode holds these words, so
        # recency decides): the episodes nearest that time join the candidates, as the
        # most recent ones do otherwise. Both failed before they did.
        ("quarterly forecast", {"named_time": (T0 - timedelta(days=41), T0 - timedelta(days=40))}),
        (None, {"named_time": (T0 - timedelta(days=31), T0 - timedelta(days=30))}),
    ],
)
def test_the_approximate_path_ranks_the_same_top_episodes(  # type: ignore[no-untyped-def]
    recall_engine, query, filters
) -> None:
    _fill(recall_engine)
    min_relevance = filters.pop("min_relevance", 0.0)
    min_match = filters.pop("min_match", 0.0)
    with recall_engine.connect() as conn:
        answers = []
        for threshold in (10_000, 10):  # exact, then approximate
            request = domain.RecallQuery(
                dataset="big",
                query=query,
                include_episodes=True,
                limit=3,
                similarity_weight=0.7,
                recency_weight=0.3,
                filters=RecallFilters(**{"as_of": T0 + timedelta(hours=1), **filters}),
                min_relevance=min_relevance,
                min_match=min_match,
            )
            vector = EMBEDDER.embed_query(query) if request.needs_embedding else None
            answers.append(
                domain.recall(
                    conn, test_vault(), request, vector, domain.DatasetSizes(threshold, SMALL)
                )
            )
    exact, approximate = answers
    assert exact.rows, "the case must rank something"
    assert _ids(approximate) == _ids(exact)
    for a, e in zip(approximate.rows, exact.rows, strict=True):
        assert a["recency"] == pytest.approx(e["recency"])
        assert a["absolute_relevance"] == pytest.approx(e["absolute_relevance"])
        assert a["request_match"] == pytest.approx(e["request_match"])


@pytest.mark.parametrize(
    ("query", "filters"),
    [
        ("zebra invoice", {}),
        ("invoice refund football", {}),
        ("gardening weather", {}),
        ("music films", {"entities": ["bob"]}),
        ("zebra refund", {"since": T0 - timedelta(days=50)}),
    ],
)
def test_the_approximate_path_scores_its_candidates_as_the_exact_path_does(  # type: ignore[no-untyped-def]
    recall_engine, query, filters
) -> None:
    """Each episode the approximate path ranks gets the exact path's scores: BM25's
    statistics and the normalising maxima are the whole filtered dataset's, not those of
    the candidates (a strict part of it here)."""
    _fill(recall_engine)
    with recall_engine.connect() as conn:
        exact = _recall(conn, query, domain.DatasetSizes(10_000, SMALL), limit=100, **filters)
        approximate = _recall(conn, query, domain.DatasetSizes(10, SMALL), limit=100, **filters)
    by_id = {r["episode_id"]: r for r in exact.rows}
    assert 3 <= len(approximate.rows) < len(exact.rows), "the candidates must be a strict part"
    for row in approximate.rows:
        want = by_id[row["episode_id"]]
        for column in (
            "lexical",
            "semantic",
            "similarity",
            "relevance",
            "absolute_relevance",
            "request_match",
        ):
            assert row[column] == pytest.approx(want[column], abs=1e-9), column


@pytest.mark.parametrize("query", ["zebra invoice", "invoice refund football"])
def test_with_no_selective_word_the_candidates_best_normalises_the_lexical_signal(  # type: ignore[no-untyped-def]
    recall_engine, query
) -> None:
    """No query word is selective (``selective_df`` 0: as every word of a query of common
    words in a large dataset), so the dataset's best BM25 is not computed: the candidates'
    best normalises the lexical signal, which the exact path's equals when the dataset's
    best document is a candidate (the lexical part brings it). Before, the signal was 0 for
    every candidate and the ranking fell to the vectors and recency alone."""
    _fill(recall_engine)
    none_selective = replace(SMALL, selective_df=0)
    with recall_engine.connect() as conn:
        exact = _recall(conn, query, domain.DatasetSizes(10_000, none_selective), limit=100)
        approximate = _recall(conn, query, domain.DatasetSizes(10, none_selective), limit=100)
    by_id = {r["episode_id"]: r for r in exact.rows}
    assert max(r["lexical"] for r in approximate.rows) > 0
    for row in approximate.rows[:3]:
        assert row["lexical"] == pytest.approx(by_id[row["episode_id"]]["lexical"], abs=1e-9)
    assert _ids(approximate)[:3] == _ids(exact)[:3]


class _PlacedEmbedder(HashingEmbedder):
    """The hashing embedder, except that a text holding one of ``placed``'s marker words
    gets that word's vector: a test chooses which summaries and chunks are near a query."""

    def __init__(self, placed: dict[str, np.ndarray]) -> None:
        super().__init__(EMBEDDER.dimension)
        self.placed = placed

    def embed(self, texts: list[str]) -> np.ndarray:
        vectors = super().embed(texts)
        for i, t in enumerate(texts):
            for marker, vector in self.placed.items():
                if marker in t:
                    vectors[i] = vector
        return vectors


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def test_the_exact_cosine_option_normalises_by_the_datasets_best_cosine(recall_engine) -> None:  # type: ignore[no-untyped-def]
    """The candidates' best cosine is not the dataset's when the nearest neighbours the pool
    holds miss it (on random vectors HNSW does; here the chunk part's nearest chunks all
    belong to episodes the time filter leaves out, a miss that needs no luck): the semantic
    scores then differ from the exact path's, and ``exact_cosine`` makes them equal."""
    rng = np.random.default_rng(3)
    toward = _unit(rng.standard_normal(EMBEDDER.dimension))  # the query's vector

    def near(cosine: float) -> np.ndarray:
        other = rng.standard_normal(EMBEDDER.dimension)
        other = _unit(other - other.dot(toward) * toward)
        return _unit(cosine * toward + (1 - cosine**2) ** 0.5 * other)

    embedder = _PlacedEmbedder({"oldnear": near(0.95), "needle": near(0.8), "quietday": -toward})
    _fill(recall_engine)
    with recall_engine.begin() as conn:
        for i in range(2 * SMALL.candidates):  # the nearest chunks, outside the filter below
            make_episode(
                conn,
                "big",
                [f"oldnear remark {i}"],
                ended_at=T0 - timedelta(days=200 + i),
                embedder=embedder,
            )
        # The filtered dataset's best cosine: a chunk of this episode, whose summary is far
        # from the query and which matches none of its words and is not among the newest.
        needle = make_episode(
            conn,
            "big",
            ["needle remark"],
            summary="quietday",
            ended_at=T0 - timedelta(days=30, hours=5),
            embedder=embedder,
        )

    def ranked(threshold: int, approximation: Approximation) -> list[dict[str, Any]]:
        request = domain.RecallQuery(
            dataset="big",
            query="zebra invoice",
            include_episodes=True,
            limit=100,
            similarity_weight=0.7,
            recency_weight=0.3,
            filters=RecallFilters(as_of=T0 + timedelta(hours=1), since=T0 - timedelta(days=50)),
        )
        with recall_engine.connect() as conn:
            answer = domain.recall(
                conn,
                test_vault(),
                request,
                toward,
                domain.DatasetSizes(threshold, approximation),
            )
        return answer.rows

    exact = {r["episode_id"]: r for r in ranked(10_000, SMALL)}
    assert max(exact.values(), key=lambda r: r["cosine"])["episode_id"] == needle.episode_id
    candidates_best = ranked(10, SMALL)
    dataset_best = ranked(10, replace(SMALL, exact_cosine=True))
    assert needle.episode_id not in {r["episode_id"] for r in dataset_best}
    assert 3 <= len(dataset_best) < len(exact), "the candidates must be a strict part"
    # Normalised by the candidates' best, every semantic score is too high ...
    assert all(
        r["semantic"] > exact[r["episode_id"]]["semantic"] + 0.05
        for r in candidates_best
        if exact[r["episode_id"]]["cosine"] > 0
    )
    # ... and by the dataset's best, each is the exact path's.
    for row in dataset_best:
        want = exact[row["episode_id"]]
        for column in ("semantic", "similarity", "relevance", "absolute_relevance"):
            assert row[column] == pytest.approx(want[column], abs=1e-9), column


def test_the_approximate_statement_is_planned_for_its_parameters(recall_engine) -> None:  # type: ignore[no-untyped-def]
    """psycopg prepares a statement from its fifth run on a connection; PostgreSQL may then
    plan it once for any dataset and words (a generic plan), which at 1M episodes ran up to
    87 s where the plan for the parameters took 10 s. The session here prefers generic
    plans, as the planner's own choice did there: the approximate statement must still be
    planned for its parameters, and the session's setting be left as it was found."""
    _fill(recall_engine)
    sizes = domain.DatasetSizes(10, SMALL)
    with recall_engine.connect() as conn:
        conn.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
        for _ in range(7):
            _recall(conn, "zebra invoice", sizes)
            # Whatever the session had chosen comes back after each call (here the
            # session's default: RESET restores it, not the SET above).
            assert conn.exec_driver_sql("SHOW plan_cache_mode").scalar_one() != (
                "force_custom_plan"
            )
            conn.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
        plans = conn.exec_driver_sql(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE '%%pool AS MATERIALIZED%%'"
        ).all()
    assert plans, "the approximate statement was never prepared (nothing checked)"
    assert all(generic == 0 and custom >= 2 for generic, custom in plans), plans


def test_the_pool_holds_the_best_lexical_match_that_ts_rank_ties_with_others(  # type: ignore[no-untyped-def]
    recall_engine,
) -> None:
    """ts_rank ranks documents holding as many query words by their length alone, however
    rare the words: 40 documents hold the common "alpha" and "beta", one a word longer the
    common "beta" and the rare "gamma" — the exact formula's best lexical match (BM25 weighs
    rarity), last by ts_rank — and two short ones hold "gamma" (so the densest holder of
    "gamma" is not it). The pool must still hold it, from the dataset's exact lexical
    scores; no vectors (the nearest summaries and chunks would be luck), and it is older
    than the 40 (not recent)."""
    tiny = Approximation(candidates=4, recent=1, per_lexeme=1)
    with recall_engine.begin() as conn:
        best = make_episode(
            conn, "big", ["we noted beta and gamma quietly today"], ended_at=T0 - timedelta(days=60)
        )
        for i in range(40):
            make_episode(
                conn, "big", ["we noted alpha and beta today"], ended_at=T0 - timedelta(days=i)
            )
        for i in range(2):
            make_episode(conn, "big", ["gamma today"], ended_at=T0 - timedelta(days=80 + i))
    request = domain.RecallQuery(
        dataset="big",
        query="alpha beta gamma",
        include_episodes=True,
        limit=1,
        similarity_weight=0.7,
        recency_weight=0.3,
        filters=RecallFilters(as_of=T0 + timedelta(hours=1)),
    )
    with recall_engine.connect() as conn:
        exact = domain.recall(conn, test_vault(), request, None, domain.DatasetSizes(10_000, tiny))
        approximate = domain.recall(conn, test_vault(), request, None, domain.DatasetSizes(0, tiny))
    assert _ids(exact) == [str(best.episode_id)]
    assert _ids(approximate) == _ids(exact)
