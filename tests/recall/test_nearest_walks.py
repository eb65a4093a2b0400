"""The approximate path's HNSW walks run beside the postings' read (store/nearest_walks.py,
issue 50): the same answer as the walks inside the ranking statement, the walks sent on
connections other than the call's, and a walk that cannot start (no connection free in
the pool) run on the call's own connection instead of waited for."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import Engine

from episodic.config import Settings
from episodic.services.recall.__main__ import engine_options
from episodic.store import kept_statistics, recall_queries
from episodic.store.db import make_engine
from episodic.store.nearest_walks import WALK_STATEMENTS, NearestWalks
from episodic.store.raw_statement import observing_statements
from episodic.store.recall_queries import Approximation
from episodic.testing.processes import wait_until
from episodic.v1 import recall_service_pb2 as pb
from episodic.v1 import recall_service_pb2_grpc as pb_grpc
from tests.recall.test_kept_statistics import _fill, _recall

SIZES = Approximation(candidates=20, recent=0, per_lexeme=2, nearest=10)
QUERIES = ["zebra invoice", "invoice refund football", "gardening weather"]


def _ranked(answer: Any) -> list[tuple[Any, float]]:
    # relevance to 6 places: recency counts from the moment of each call
    return [(r["episode_id"], round(r["relevance"], 6)) for r in answer.rows]


@pytest.fixture
def walks(recall_engine: Engine) -> Iterator[NearestWalks]:
    w = NearestWalks(recall_engine)
    yield w
    w.close()


class _Sent:
    """Which psycopg connection each walk statement and each ranking went out on."""

    def __init__(self) -> None:
        self.walks: list[Any] = []
        self.others: list[Any] = []
        self._lock = threading.Lock()

    def __call__(self, statement: str, parameters: Any, driver: Any) -> None:
        with self._lock:
            (self.walks if statement in WALK_STATEMENTS.values() else self.others).append(driver)


@pytest.mark.citus  # the walks' statements on Citus: tests/test_one_shard.py routes them
def test_the_walks_beside_rank_as_the_statements_own(  # type: ignore[no-untyped-def]
    recall_engine, walks, monkeypatch
) -> None:
    """Each query ranks the same episodes with the same relevance whether the walks ran
    inside the ranking statement or beside it; beside, they went out on connections other
    than the call's, and the ranking statement walked nothing itself."""
    _fill(recall_engine)
    assert kept_statistics.refresh(recall_engine, "big") is not None
    choose = recall_queries.choose_lexical_pool

    def choose_once_both_walk(rows, **sizes):  # type: ignore[no-untyped-def]
        # A dataset this small reads its postings faster than a thread takes a connection:
        # the call would take its walks back (as it should). Here they are seen sent first.
        wait_until(lambda: len(sent.walks) == 2, timeout=30, message="the walks were not sent")
        return choose(rows, **sizes)

    for query in QUERIES:
        with recall_engine.connect() as conn:
            inside = _recall(conn, query, SIZES)
        sent = _Sent()
        monkeypatch.setattr(recall_queries, "choose_lexical_pool", choose_once_both_walk)
        with recall_engine.connect() as conn, observing_statements(sent):
            beside = _recall(conn, query, replace(SIZES, walks=walks))
            own = conn.connection.driver_connection
        assert inside.rows and _ranked(beside) == _ranked(inside), query
        assert len(sent.walks) == 2, query
        assert all(driver is not own for driver in sent.walks), query
        assert own in sent.others
        monkeypatch.setattr(recall_queries, "choose_lexical_pool", choose)


def test_a_walk_with_no_connection_free_runs_on_the_calls_own(db_url: str) -> None:  # type: ignore[no-untyped-def]
    """Every connection of the pool taken (the call's, and others held elsewhere), the
    walks do not wait for one: the call takes them back and runs them on its own
    connection, and answers as the statement's own walks do."""
    engine = make_engine(db_url, pool_size=1, **engine_options(Settings()))
    engine.pool._timeout = 60  # type: ignore[attr-defined]  # a wait would show as a hang
    walks = NearestWalks(engine)
    try:
        _fill(engine)
        assert kept_statistics.refresh(engine, "big") is not None
        with engine.connect() as conn:
            inside = _recall(conn, "zebra invoice", SIZES)
        sent = _Sent()
        with engine.connect() as conn, engine.connect() as held, observing_statements(sent):
            # the pool's one connection and its one overflow are both taken
            beside = _recall(conn, "zebra invoice", replace(SIZES, walks=walks))
            own = conn.connection.driver_connection
            assert held.connection.driver_connection is not own
        assert _ranked(beside) == _ranked(inside)
        assert len(sent.walks) == 2 and all(driver is own for driver in sent.walks)
    finally:
        walks.close()
        engine.dispose()


def test_closed_walks_run_on_the_calls_own_connection(recall_engine: Engine) -> None:
    """Once closed (the Recall servicer's shutdown hook), the walks are no longer handed to
    threads: a call still ranking then runs them on its own connection, with the same
    answer, where submitting to the stopped threads raised."""
    _fill(recall_engine)
    assert kept_statistics.refresh(recall_engine, "big") is not None
    walks = NearestWalks(recall_engine)
    walks.close()
    with recall_engine.connect() as conn:
        inside = _recall(conn, "zebra invoice", SIZES)
    sent = _Sent()
    with recall_engine.connect() as conn, observing_statements(sent):
        after_close = _recall(conn, "zebra invoice", replace(SIZES, walks=walks))
        own = conn.connection.driver_connection
    assert _ranked(after_close) == _ranked(inside)
    assert len(sent.walks) == 2 and all(driver is own for driver in sent.walks)


def test_a_recall_process_walks_beside_and_answers_as_with_the_walks_inside(  # type: ignore[no-untyped-def]
    spawn, recall_engine
) -> None:
    """Through gRPC, a dataset on the approximate path with kept statistics: the service
    with its walks beside (the default) answers each query with the episodes, in the
    order, of one whose walks run inside the statement (``EPISODIC_RECALL_WALK_THREADS=0``)."""
    _fill(recall_engine)
    assert kept_statistics.refresh(recall_engine, "big") is not None
    approximate = {"EPISODIC_RECALL_APPROXIMATE_ABOVE": "10"}
    beside = spawn("recall", env=approximate)
    inside = spawn("recall", env={**approximate, "EPISODIC_RECALL_WALK_THREADS": "0"})

    def ranked(service: Any, query: str) -> list[str]:
        with service.channel() as channel:
            answer = pb_grpc.RecallServiceStub(channel).Recall(
                pb.RecallRequest(
                    dataset="big",
                    query=query,
                    context_episodes=10,
                    include=[pb.RECALL_INCLUDE_EPISODES],
                ),
                timeout=60,
            )
        return [e.episode.episode_id for e in answer.episodes.episodes]

    for query in QUERIES:
        got = ranked(beside, query)
        assert got and got == ranked(inside, query), query
