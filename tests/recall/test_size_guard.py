"""A dataset Recall has not seen yet: with a query (and no ``as_of``), the exact ranking
statement checks the dataset's size itself, from the count it reads anyway
(recall_queries.SizeGuard), instead of a size probe before it — same answers, one part of a
statement less, and a large dataset still goes the approximate way."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine

from episodic.config import Settings
from episodic.services.recall import domain
from episodic.services.recall.__main__ import engine_options
from episodic.store.db import make_engine
from episodic.store.raw_statement import observing_statements
from episodic.store.recall_queries import Approximation, RecallFilters
from episodic.testing.keys import test_vault
from tests.recall.factory import EMBEDDER, T0, make_episode

SMALL = Approximation(candidates=4, recent=3)
EPISODES = 24


@pytest.fixture
def recall_engine(db_url: str) -> Iterator[Engine]:
    """An engine with the Recall service's session settings (iterative HNSW scans)."""
    settings = Settings()
    settings.recall.recall_approximate_candidates = SMALL.candidates
    eng = make_engine(db_url, pool_size=2, **engine_options(settings))
    with eng.begin() as conn:
        for i in range(EPISODES - 2):
            topic = ["gardening", "weather", "football", "recipes"][i % 4]
            make_episode(
                conn,
                "big",
                [f"we talked about {topic}", f"more {topic}"],
                ended_at=T0 - timedelta(days=3 + i),
            )
        for days in (10, 40):
            make_episode(
                conn, "big", ["the zebra invoice was paid late"], ended_at=T0 - timedelta(days=days)
            )
    yield eng
    eng.dispose()


def _recall(
    conn: Any, sizes: domain.DatasetSizes | None, query: str = "zebra invoice", **filters: Any
) -> tuple[list[str], list[str]]:
    """The ids recalled and the statements sent (SET/RESET of plan_cache_mode left out)."""
    request = domain.RecallQuery(
        dataset="big",
        query=query,
        include_episodes=True,
        limit=3,
        similarity_weight=0.7,
        recency_weight=0.3,
        filters=RecallFilters(**filters),
    )
    sent: list[str] = []

    def seen(statement: str, *_: Any) -> None:
        if "plan_cache_mode" not in statement:
            sent.append(statement)

    with observing_statements(seen):
        answer = domain.recall(conn, test_vault(), request, EMBEDDER.embed_query(query), sizes)
    return [str(r["episode_id"]) for r in answer.rows], sent


def _kinds(statements: list[str]) -> list[str]:
    out = []
    for s in statements:
        if "has_row" in s:
            out.append("opening with probe" if "bound" in s else "opening")
        elif "exact_up_to" in s:
            out.append("guarded exact")
        elif "array_send" in s:  # the kept postings, read before the approximate statement
            out.append("postings")
        elif "pool AS MATERIALIZED" in s:
            out.append("approximate")
        elif "episode_count" in s:
            out.append("exact")
        else:
            out.append(s[:60])
    return out


def test_a_small_dataset_not_seen_before_is_ranked_by_the_guarded_exact_statement(
    recall_engine: Engine,
) -> None:
    sizes = domain.DatasetSizes(EPISODES, SMALL)  # 24 episodes: exact (not above 24)
    with recall_engine.connect() as conn:
        exact, _ = _recall(conn, None)  # no sizes: always the exact statement
        first, sent = _recall(conn, sizes)
        assert _kinds(sent) == ["opening", "guarded exact"]  # no probe in the opening
        assert first == exact
        assert sizes.guard("big") is None  # its size is known now (from the count)
        again, sent = _recall(conn, sizes)
        assert _kinds(sent) == ["opening", "exact"]
        assert again == exact


def test_a_large_dataset_not_seen_before_goes_the_approximate_way(
    recall_engine: Engine,
) -> None:
    sizes = domain.DatasetSizes(EPISODES - 1, SMALL)  # 24 episodes: above 23, approximate
    known = domain.DatasetSizes(EPISODES - 1, SMALL)
    known.saw("big", EPISODES)
    with recall_engine.connect() as conn:
        approximate, sent = _recall(conn, known)
        assert _kinds(sent) == ["opening", "postings", "approximate"]
        first, sent = _recall(conn, sizes)
        # The guarded exact statement finds it too large and ranks nothing; the
        # approximate one answers, as it would have after a probe.
        assert _kinds(sent) == ["opening", "guarded exact", "postings", "approximate"]
        assert first == approximate
        again, sent = _recall(conn, sizes)
        assert _kinds(sent) == ["opening", "postings", "approximate"]
        assert again == approximate


def test_a_call_with_as_of_or_without_a_query_still_probes(recall_engine: Engine) -> None:
    """Without a query there is no guarded statement, and with ``as_of`` the ranking's
    count is not the dataset's size."""
    with recall_engine.connect() as conn:
        _, sent = _recall(conn, domain.DatasetSizes(EPISODES, SMALL), as_of=T0)
        assert _kinds(sent) == ["opening with probe", "exact"]
        _, sent = _recall(conn, domain.DatasetSizes(EPISODES, SMALL), query="")
        assert _kinds(sent) == ["opening with probe", "exact"]


def test_the_tripped_guard_reads_no_candidate(recall_engine: Engine) -> None:
    """The guard is a one-time filter ahead of the candidates' scan, not a filter applied
    after ranking every candidate: a large dataset's first call costs its count only."""
    captured: list[tuple[str, Any]] = []

    def seen(statement: str, parameters: Any, *_: Any) -> None:
        if "exact_up_to" in statement:
            captured.append((statement, parameters))

    with recall_engine.connect() as conn:
        with observing_statements(seen):
            _recall(conn, domain.DatasetSizes(EPISODES - 1, SMALL))
        ((statement, parameters),) = captured
        driver = conn.connection.driver_connection

        def candidates_scan(exact_up_to: int) -> str:
            plan = [
                row[0]
                for row in driver.execute(  # type: ignore[union-attr]
                    "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + statement,
                    {**parameters, "exact_up_to": exact_up_to},
                )
            ]
            (at,) = [  # the guard: the count (an InitPlan) against exact_up_to
                i for i, line in enumerate(plan) if "One-Time Filter: ((InitPlan" in line
            ]
            depth = len(plan[at]) - len(plan[at].lstrip())
            # the node the filter gates: its child at the filter's own indentation (the
            # candidates' scan of the dataset's episodes; the InitPlan comes first)
            return next(
                line
                for line in plan[at + 1 :]
                if line.lstrip().startswith("->") and len(line) - len(line.lstrip()) == depth
            )

        tripped, passed = candidates_scan(EPISODES - 1), candidates_scan(EPISODES)
        assert "episodes" in tripped and "never executed" in tripped, tripped
        assert "episodes" in passed and "never executed" not in passed, passed
