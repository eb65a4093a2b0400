"""A large dataset's own nearest indexes (store/nearest_indexes.py): built by the
maintenance above the threshold, taken by the planner for Recall's walks, dropped when no
longer needed, and rebuilt when a build did not finish."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, text

from episodic import metrics
from episodic.config import SchedulerSettings
from episodic.services.scheduler.sweeper import Sweeper
from episodic.store import episode_counts, nearest_indexes
from episodic.store.nearest_walks import WALK_STATEMENTS, walk
from episodic.store.raw_statement import fetch_all
from episodic.store.recall_filters import RecallFilters, filter_params
from episodic.testing.keys import test_vault
from episodic.testing.processes import wait_until
from tests.recall.factory import EMBEDDER, make_episode

TOPICS = ["invoices", "football", "gardening", "the weather", "a zebra", "holidays"]


@pytest.fixture(autouse=True)
def any_share(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's datasets are alone in their partitions: built whatever their share (the
    share's own test sets it back)."""
    monkeypatch.setattr(nearest_indexes, "MOST_OF_ITS_PARTITION", 1.0)


def _fill(engine: Engine, dataset: str, n: int) -> None:
    rng = random.Random(7)
    with engine.begin() as conn:
        for i in range(n):
            topic = rng.choice(TOPICS)
            make_episode(conn, dataset, [f"we talked about {topic}", f"more on {topic} and {i}"])
    assert episode_counts.seed(engine, dataset) is not None  # as the maintenance does


def _params(conn: Any, dataset: str, query: str) -> dict[str, Any]:
    """The walks' parameters, as Recall passes them."""
    key = test_vault().for_read(conn, dataset)
    return {
        **filter_params(key, RecallFilters()),
        "qvec": np.asarray(EMBEDDER.embed_query(query), dtype=np.float32),
        "approx_nearest": 50,  # more than the dataset holds: every row, whatever the ties
    }


def _plans(engine: Engine, dataset: str) -> str:
    """Both walks' plans, as Recall plans them (for their parameters), seqscans off: on a
    table this small the planner would rather sort it."""
    plans = []
    with engine.connect() as conn:
        conn.exec_driver_sql("SET enable_seqscan = off")
        for statement in WALK_STATEMENTS.values():
            rows = fetch_all(
                conn, "EXPLAIN " + statement, _params(conn, dataset, "zebra"), prepare=False
            )
            plans.extend(str(next(iter(r.values()))) for r in rows)
        conn.exec_driver_sql("RESET enable_seqscan")
    return "\n".join(plans)


def _walked(engine: Engine, dataset: str, query: str) -> dict[str, set[bytes]]:
    """Each walk's ids, as a set (the iterative scan's order is relaxed: the ranking
    statement reads them as candidates)."""
    with engine.connect() as conn:
        found = {name: walk(conn, name, _params(conn, dataset, query)) for name in WALK_STATEMENTS}
    return {name: {ids[i : i + 16] for i in range(0, len(ids), 16)} for name, ids in found.items()}


def test_a_dataset_above_the_threshold_gets_indexes_the_walks_read(
    recall_engine, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """Above the threshold a dataset gets an index of its own on each walk's table; the
    planner takes them for Recall's walks, which find what they found before; a smaller
    dataset gets none."""
    _fill(recall_engine, "large", 12)
    _fill(recall_engine, "small", 4)
    before = _walked(recall_engine, "large", "a zebra")
    assert len(before["nearest_episodes"]) == 12 * 16 // 16  # every completed episode
    with recall_engine.connect() as conn:
        todo = nearest_indexes.plan(conn, above=10)
    assert todo.build == ["large"] and not todo.drop and not todo.built
    names = nearest_indexes.index_names("large")
    assert sorted(nearest_indexes.build(recall_engine, "large")) == sorted(names.values())
    plans = _plans(recall_engine, "large")
    assert all(name in plans for name in names.values()), plans
    assert _walked(recall_engine, "large", "a zebra") == before
    # the other dataset's walks still read the shared indexes
    assert not any(name in _plans(recall_engine, "small") for name in names.values())
    with recall_engine.connect() as conn:
        again = nearest_indexes.plan(conn, above=10)
        assert again.built == ["large"] and not again.build and not again.drop
        # Recall's metric says which index its walks read (the catalog read afresh)
        monkeypatch.setattr(nearest_indexes, "_known", None)
        assert nearest_indexes.has_own(conn, "large")
        assert not nearest_indexes.has_own(conn, "small")


def test_an_unfinished_build_is_dropped_and_built_again(recall_engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A build that did not finish (a crash, a cancel) leaves an invalid index, which the
    planner ignores (the walks read the shared index meanwhile): the maintenance's next
    pass drops it and builds it again; an index no longer needed is dropped."""
    _fill(recall_engine, "large", 12)
    settings = SchedulerSettings(nearest_index_above=10)
    sweeper = Sweeper(recall_engine, settings, statistics_above=5)
    assert sweeper.keep_nearest_indexes() == 2
    names = nearest_indexes.index_names("large")
    before = _walked(recall_engine, "large", "a zebra")
    assert len(before["nearest_episodes"]) == 12 * 16 // 16  # every completed episode
    with recall_engine.begin() as conn:  # what an interrupted CREATE INDEX CONCURRENTLY leaves
        conn.execute(
            text("UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass(:n)"),
            {"n": names["episodes"]},
        )
    assert names["episodes"] not in _plans(recall_engine, "large")
    assert _walked(recall_engine, "large", "a zebra") == before
    with recall_engine.connect() as conn:
        todo = nearest_indexes.plan(conn, above=10)
    assert [i.name for i in todo.drop] == [names["episodes"]] and todo.build == ["large"]
    # An index being built is invalid too: while another builder runs, nothing is done.
    with nearest_indexes.exclusive(recall_engine) as other:
        assert other and sweeper.keep_nearest_indexes() == 0
    with recall_engine.connect() as conn:
        assert [i.name for i in nearest_indexes.plan(conn, above=10).drop] == [names["episodes"]]
    changes: list[str] = []
    monkeypatch.setattr(metrics, "nearest_index_changed", changes.append)
    assert sweeper.keep_nearest_indexes() == 2  # dropped, then built again
    assert changes == ["invalid dropped", "built"]
    assert names["episodes"] in _plans(recall_engine, "large")
    # the threshold raised past twice its size: no longer needed
    sweeper.settings = SchedulerSettings(nearest_index_above=100)
    assert sweeper.keep_nearest_indexes() == 2
    with recall_engine.connect() as conn:
        gone = conn.execute(
            text("SELECT count(*) FROM pg_class WHERE relname LIKE :p"),
            {"p": nearest_indexes.NEAREST_INDEX_PREFIX + "%"},
        ).scalar_one()
    assert gone == 0


@pytest.mark.parametrize("name", ['it\'s "odd"; DROP TABLE episodes; --', "x" * 300])
def test_any_dataset_name_is_a_literal_and_a_short_identifier(recall_engine, name: str) -> None:  # type: ignore[no-untyped-def]
    """A dataset's name is quoted as a literal in the predicate and hashed into the
    index's name: any name builds, and its indexes are its own."""
    _fill(recall_engine, name, 11)
    assert len(nearest_indexes.build(recall_engine, name)) == 2
    with recall_engine.connect() as conn:
        assert nearest_indexes.plan(conn, above=10).built == [name]
        assert all(len(n) < 63 for n in nearest_indexes.index_names(name).values())


def test_a_dataset_that_is_most_of_its_partition_gets_none(recall_engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Alone in its partition, a large dataset walks the shared index as its own would:
    it gets none (its writes would pay a second HNSW insert for nothing), once the
    partition's statistics say so."""
    monkeypatch.setattr(nearest_indexes, "MOST_OF_ITS_PARTITION", 0.8)
    _fill(recall_engine, "alone", 12)
    with recall_engine.connect() as conn:
        conn.execute(text("ANALYZE episodes"))
        todo = nearest_indexes.plan(conn, above=10)
    assert not todo.build and not todo.built


def test_the_maintenance_builds_them_beside_its_pass(recall_engine) -> None:  # type: ignore[no-untyped-def]
    """The Scheduler's maintenance pass starts the builds in a thread of their own (a
    build takes minutes; the pass would stall) and the indexes appear."""
    _fill(recall_engine, "large", 12)
    sweeper = Sweeper(recall_engine, SchedulerSettings(nearest_index_above=10), statistics_above=5)
    sweeper.run_pass(force=True)

    def built() -> bool:
        with recall_engine.connect() as conn:
            return nearest_indexes.plan(conn, above=10).built == ["large"]

    wait_until(built, timeout=60, message="the maintenance built no nearest index")


def test_a_build_leaves_its_connection_as_it_found_it(recall_engine, db_url) -> None:  # type: ignore[no-untyped-def]
    """The build's memory and ceiling are its session's while it runs: the pooled
    connection goes back with the settings it had."""
    from episodic.store.db import make_engine

    _fill(recall_engine, "large", 11)
    one = make_engine(db_url, pool_size=1)
    try:

        def settings() -> tuple[tuple[str, str], int]:
            with one.connect() as conn:
                row = conn.execute(
                    text(
                        "SELECT current_setting('maintenance_work_mem'), "
                        "current_setting('statement_timeout'), pg_backend_pid()"
                    )
                ).one()
            return (row[0], row[1]), row[2]

        before, pid = settings()
        assert len(nearest_indexes.build(one, "large", memory="77MB")) == 2
        after, same = settings()
        assert same == pid and after == before
    finally:
        one.dispose()
