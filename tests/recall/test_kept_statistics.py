"""Recall's kept lexical statistics of a large dataset (store/kept_statistics.py, issue 50):
counted by the Scheduler's maintenance, read by the approximate path for a request without
filters, and ranking exactly as the counted ones do; a dataset without them, and a
filtered request, are counted; erasing a thread forgets them."""

from __future__ import annotations

import os
import random
import threading
import uuid
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, make_url, text

from episodic import metrics
from episodic.config import SchedulerSettings
from episodic.services.recall import domain
from episodic.services.scheduler.sweeper import Sweeper
from episodic.store import kept_statistics
from episodic.store.db import make_engine
from episodic.store.erasure import erase_thread
from episodic.store.recall_queries import Approximation, RecallFilters
from episodic.testing.keys import test_vault
from tests.recall.factory import EMBEDDER, T0, make_episode

pytestmark = pytest.mark.citus

#: The candidate set is a strict part of the dataset's 40 episodes.
SMALL = Approximation(candidates=4, recent=3)
COUNTED = Approximation(candidates=4, recent=3, kept_statistics=False)
TOPICS = ["gardening", "weather", "football", "recipes", "holidays", "music", "cars", "films"]


def _fill(engine: Engine, dataset: str = "big") -> list[Any]:
    """40 episodes on eight topics, two of them sharing the rarer words of the queries,
    some threads with a second (current) episode whose passages reach the first's chunks."""
    rng = random.Random(11)
    made = []
    with engine.begin() as conn:
        for i in range(36):
            topic = rng.choice(TOPICS)
            made.append(
                make_episode(
                    conn,
                    dataset,
                    [f"we talked about {topic} for a while", f"more on {topic} and {i}"],
                    ended_at=T0 - timedelta(days=3 + i, hours=rng.randrange(24)),
                )
            )
        for days in (10, 40):
            first = make_episode(
                conn,
                dataset,
                ["the zebra invoice was paid late", "zebra invoice number 12 needs a refund"],
                ended_at=T0 - timedelta(days=days),
            )
            made.append(
                make_episode(
                    conn,
                    dataset,
                    ["the refund for the zebra invoice came through", "gardening again"],
                    ended_at=T0 - timedelta(days=days - 1),
                    thread_id=first.thread_id,
                )
            )
        made.append(make_episode(conn, dataset, ["something from this morning"], ended_at=T0))
    return made


def _recall(  # type: ignore[no-untyped-def]
    conn, query: str, approximation: Approximation, *, with_vector: bool = True, **filters: Any
) -> domain.RecallAnswer:
    """A recall of "big" on the approximate path; ``with_vector`` False: no query vector,
    so no HNSW part."""
    request = domain.RecallQuery(
        dataset="big",
        query=query,
        include_episodes=True,
        limit=100,
        similarity_weight=0.7,
        recency_weight=0.3,
        filters=RecallFilters(**filters),
    )
    vector = EMBEDDER.embed_query(query) if with_vector else None
    return domain.recall(
        conn, test_vault(), request, vector, domain.DatasetSizes(10, approximation)
    )


def _scores(answer: domain.RecallAnswer) -> dict[Any, tuple[float, ...]]:
    return {
        r["episode_id"]: (r["lexical"], r["similarity"], r["absolute_relevance"])
        for r in answer.rows
    }


def _refresh(engine: Engine, dataset: str = "big") -> kept_statistics.Refreshed | None:
    return kept_statistics.refresh(engine, dataset)


@pytest.mark.parametrize(
    "query", ["zebra invoice", "invoice refund football", "gardening weather", "nothing matches"]
)
def test_kept_statistics_score_every_candidate_as_the_counted_ones(  # type: ignore[no-untyped-def]
    recall_engine, query, monkeypatch
) -> None:
    """The counts kept are the ones the approximate path counts: the same candidates with
    the same scores, down to the last digit; and the metric says which were read."""
    _fill(recall_engine)
    sources: list[bool] = []
    monkeypatch.setattr(metrics, "recall_statistics", lambda *, kept: sources.append(kept))
    with recall_engine.connect() as conn:
        before = _recall(conn, query, SMALL)  # nothing kept yet: counted
    kept = _refresh(recall_engine)
    assert kept is not None and kept.documents == 39  # the two first episodes are archived
    with recall_engine.connect() as conn:
        counted = _recall(conn, query, COUNTED)
        read = _recall(conn, query, SMALL)
    assert sources == [False, False, True]
    assert before.rows and [r["episode_id"] for r in read.rows] == [
        r["episode_id"] for r in counted.rows
    ]
    assert _same(_scores(read), _scores(counted))


def test_what_is_kept_is_read_only_without_filters(recall_engine) -> None:  # type: ignore[no-untyped-def]
    """Kept statistics made wrong on purpose move the ranking of a request without
    filters (the rarer words made common), and leave a filtered one's (counted over its
    own episodes) as it was."""
    _fill(recall_engine)
    _refresh(recall_engine)
    query = "zebra invoice football"
    since = {"since": T0 - timedelta(days=60)}
    with recall_engine.connect() as conn:
        plain, filtered = _recall(conn, query, SMALL), _recall(conn, query, SMALL, **since)
    with recall_engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE kept_term_statistics SET documents = 30, passages = 30 "
                "WHERE dataset = 'big' AND documents < 5"
            )
        )
    with recall_engine.connect() as conn:
        plain_after = _recall(conn, query, SMALL)
        filtered_after = _recall(conn, query, SMALL, **since)
    assert _same(_scores(filtered_after), _scores(filtered))
    assert not _same(_scores(plain_after), _scores(plain))


def _same(a: dict[Any, tuple[float, ...]], b: dict[Any, tuple[float, ...]]) -> bool:
    return a.keys() == b.keys() and all(a[e] == pytest.approx(b[e], abs=1e-12) for e in a)


def test_the_maintenance_keeps_the_statistics_of_the_datasets_past_the_threshold(  # type: ignore[no-untyped-def]
    recall_engine, db_url
) -> None:
    """A dataset larger than Recall's threshold gets its statistics on the next pass, not
    again while its episodes have not moved, and again once they have; a smaller one never."""
    _fill(recall_engine, "big")
    with recall_engine.begin() as conn:
        for i in range(3):
            make_episode(conn, "small", [f"a few words {i}"], ended_at=T0)
    scheduler_engine = make_engine(db_url, pool_size=3)  # the Scheduler's: no autocommit
    try:
        sweeper = Sweeper(scheduler_engine, SchedulerSettings(), "stats", statistics_above=10)
        assert sweeper.run_pass(force=True).statistics_refreshed == 1
        assert sweeper.run_pass(force=True).statistics_refreshed == 0
        with recall_engine.begin() as conn:
            make_episode(conn, "big", ["one more zebra"], ended_at=T0)
            kept = conn.execute(
                text("SELECT dataset, documents FROM kept_statistics ORDER BY dataset")
            ).all()
        assert [tuple(r) for r in kept] == [("big", 39)]
        assert sweeper.run_pass(force=True).statistics_refreshed == 1
    finally:
        scheduler_engine.dispose()
    with recall_engine.connect() as conn:
        assert conn.execute(text("SELECT documents FROM kept_statistics")).scalar() == 40


def test_erasing_a_thread_forgets_the_statistics_and_voids_a_count_running_meanwhile(  # type: ignore[no-untyped-def]
    recall_engine, db_url, monkeypatch
) -> None:
    """The erased thread's words do not outlive it in the counts: they go with it, and a
    count that read the thread before the erasure committed is not kept after it."""
    made = _fill(recall_engine)
    assert _refresh(recall_engine) is not None
    erase_thread(recall_engine, made[0].thread_id, dataset="big", actor="test", vault=test_vault())
    with recall_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM kept_statistics")).scalar() == 0
        assert conn.execute(text("SELECT count(*) FROM kept_term_statistics")).scalar() == 0

    # A thread erased while a count runs: the erasure commits after the count read the
    # erasures' tally and before the count ends.
    drop = kept_statistics.drop

    erased: list[Any] = []
    started: list[bool] = []

    def erase() -> None:  # as another process would, on connections of its own
        engine = make_engine(db_url, pool_size=2)
        try:
            erased.append(
                erase_thread(
                    engine, made[1].thread_id, dataset="big", actor="test", vault=test_vault()
                )
            )
        finally:
            engine.dispose()

    def erased_meanwhile(conn, dataset) -> None:  # type: ignore[no-untyped-def]
        if not started:  # the count's own drop (the erasure's own is the real one)
            started.append(True)
            eraser = threading.Thread(target=erase)
            eraser.start()
            eraser.join()
        drop(conn, dataset)

    monkeypatch.setattr(kept_statistics, "drop", erased_meanwhile)
    assert _refresh(recall_engine) is None
    assert erased, "the erasure finished while the count ran"
    monkeypatch.setattr(kept_statistics, "drop", drop)
    with recall_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM kept_statistics")).scalar() == 0
    kept = _refresh(recall_engine)
    assert kept is not None and kept.documents == 37


def _lexical_only(conn, query: str, approximation: Approximation) -> set[Any]:  # type: ignore[no-untyped-def]
    """The episodes a recall without a query vector (so no HNSW part) ranks."""
    return {r["episode_id"] for r in _recall(conn, query, approximation, with_vector=False).rows}


def test_a_words_candidates_are_its_kept_best_holders(recall_engine) -> None:  # type: ignore[no-untyped-def]
    """With kept statistics, the per-word parts of the pool take each word's best holders
    as they were counted, no longer every holder read by ts_rank."""
    made = _fill(recall_engine)
    _refresh(recall_engine)
    # No part of 'candidates' (lexical, best lexical; no vector: no nearest), nothing
    # recent: only the per-word parts can bring a candidate.
    only_lists = Approximation(candidates=0, recent=0)
    zebra = {m.episode_id for m in made[36:38]}  # the two current episodes of zebra threads
    with recall_engine.connect() as conn:
        assert _lexical_only(conn, "zebra invoice", only_lists) >= zebra
    with recall_engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE kept_term_statistics SET best_documents = '{}', document_weights = '{}', "
                "best_passages = '{}', passage_weights = '{}'"
            )
        )
    with recall_engine.connect() as conn:
        assert not _lexical_only(conn, "zebra invoice", only_lists) & zebra
    with recall_engine.begin() as conn:  # nothing kept: every holder, by ts_rank, again
        conn.execute(text("DELETE FROM kept_statistics"))
    with recall_engine.connect() as conn:
        assert _lexical_only(conn, "zebra invoice", only_lists) >= zebra


def test_each_word_keeps_its_best_holders_by_weight_the_latest_first_among_equals(  # type: ignore[no-untyped-def]
    recall_engine,
) -> None:
    """The postings: per word, at most ``best_kept`` holders with their weights, the
    heaviest first; among holders of equal weight (the same text), the latest; and every
    holder, with its weight, when the word has at most that many."""
    with recall_engine.begin() as conn:
        old = make_episode(
            conn, "big", ["the walrus ate the fish"], ended_at=T0 - timedelta(days=9)
        )
        new = make_episode(
            conn, "big", ["the walrus ate the fish"], ended_at=T0 - timedelta(days=2)
        )
        make_episode(
            conn, "big", ["a walrus walrus walrus swam by"], ended_at=T0 - timedelta(days=5)
        )
        make_episode(conn, "big", ["nothing in common here"], ended_at=T0)
    assert kept_statistics.refresh(recall_engine, "big", best_kept=1) is not None
    with recall_engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT documents, best_documents, document_weights, passages, best_passages, "
                "passage_weights FROM kept_term_statistics WHERE dataset = 'big'"
            )
        ).all()
    assert rows and all(len(r.best_documents) == len(r.document_weights) == 1 for r in rows)
    assert all(len(r.best_passages) == len(r.passage_weights) == 1 for r in rows)
    # "fish" and "ate": held by the two equal episodes only, the later one kept
    pair = [r for r in rows if r.documents == 2]
    assert len(pair) == 2 and {r.best_documents[0] for r in pair} == {new.episode_id}
    assert old.episode_id not in {e for r in rows for e in r.best_documents}
    # "walrus": three holders; the one that says it three times weighs most
    (walrus,) = [r for r in rows if r.documents == 3]
    assert walrus.best_documents[0] not in (old.episode_id, new.episode_id)
    assert kept_statistics.refresh(recall_engine, "big") is not None  # whole lists
    with recall_engine.connect() as conn:
        (walrus,) = conn.execute(
            text(
                "SELECT best_documents, document_weights, best_passages, passage_weights "
                "FROM kept_term_statistics WHERE dataset = 'big' AND documents = 3"
            )
        ).all()
    assert walrus.best_documents[1:] == [new.episode_id, old.episode_id]
    assert walrus.document_weights[0] > walrus.document_weights[1] == walrus.document_weights[2]
    assert set(walrus.best_passages) == set(walrus.best_documents)


def test_an_episode_completed_since_the_count_is_found_by_its_words(recall_engine) -> None:  # type: ignore[no-untyped-def]
    """No postings list an episode completed after the count: it is a candidate through
    its words all the same (``since the count``), until the next count lists it."""
    _fill(recall_engine)
    _refresh(recall_engine)
    with recall_engine.begin() as conn:
        late = make_episode(
            conn, "big", ["the quokka smiled at the camera"], ended_at=T0 - timedelta(days=30)
        )
    # No vector (no nearest part), nothing recent: the words alone bring candidates.
    words_only = Approximation(candidates=4, recent=0)
    with recall_engine.connect() as conn:
        assert late.episode_id in _lexical_only(conn, "quokka camera", words_only)
    _refresh(recall_engine)
    with recall_engine.begin() as conn:  # long after the count: only the postings have it
        conn.execute(text("UPDATE kept_statistics SET complete_before = now() + interval '1 day'"))
    with recall_engine.connect() as conn:
        assert late.episode_id in _lexical_only(conn, "quokka camera", words_only)
    with recall_engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE kept_term_statistics SET best_documents = '{}', document_weights = '{}', "
                "best_passages = '{}', passage_weights = '{}'"
            )
        )
    with recall_engine.connect() as conn:  # neither lists nor "since": not a candidate
        assert late.episode_id not in _lexical_only(conn, "quokka camera", words_only)


def test_a_completion_committed_after_the_count_began_is_read_since_it(recall_engine) -> None:  # type: ignore[no-untyped-def]
    """An episode whose completion was still in progress while its dataset was counted is
    in no postings list: the count records a moment before that completion began
    (``complete_before``, from the transactions it saw in progress), and the episode is a
    candidate through its words (``since the count``). The others, completed before it,
    are not read again: a count made long after them lists them all."""
    _fill(recall_engine)
    _refresh(recall_engine)
    with recall_engine.connect() as conn:
        first = conn.execute(
            text("SELECT complete_before, counted_at FROM kept_statistics WHERE dataset = 'big'")
        ).one()
    if os.environ.get("EPISODIC_TEST_CITUS"):  # the workers' transactions are not listed
        assert first.complete_before is None
        return
    # The only session in progress was the count's own: the bound is its start.
    assert first.complete_before is not None and first.complete_before <= first.counted_at
    with recall_engine.connect() as writer:
        writer = writer.execution_options(isolation_level="READ COMMITTED")  # not autocommit
        committing = writer.begin()
        late = make_episode(
            writer,
            "big",
            ["the quokka smiled at the camera"],
            ended_at=T0 - timedelta(days=30),
            keep_count=False,  # the count's row lock would wait for this transaction
        )
        began = writer.execute(
            text("UPDATE episodes SET completed_at = now() WHERE episode_id = :e RETURNING now()"),
            {"e": late.episode_id},
        ).scalar_one()  # as the Summariser completes one: its transaction's start
        _refresh(recall_engine)  # its count does not see the episode
        committing.commit()
    with recall_engine.connect() as conn:
        kept = conn.execute(
            text("SELECT complete_before FROM kept_statistics WHERE dataset = 'big'")
        ).scalar_one()
        listed = conn.execute(
            text("SELECT count(*) FROM kept_term_statistics WHERE :e = ANY(best_documents)"),
            {"e": late.episode_id},
        ).scalar_one()
        assert listed == 0 and kept is not None and kept <= began
        assert late.episode_id in _lexical_only(
            conn, "quokka camera", Approximation(candidates=4, recent=0)
        )
    # Counted again with nothing in progress: the bound passes the episode's completion,
    # so it is no longer read apart (its postings gone, nothing else brings it).
    _refresh(recall_engine)
    with recall_engine.begin() as conn:
        assert conn.execute(
            text("SELECT complete_before > :t FROM kept_statistics WHERE dataset = 'big'"),
            {"t": began},
        ).scalar_one()
        conn.execute(
            text(
                "UPDATE kept_term_statistics SET best_documents = '{}', document_weights = '{}', "
                "best_passages = '{}', passage_weights = '{}'"
            )
        )
    with recall_engine.connect() as conn:
        assert late.episode_id not in _lexical_only(
            conn, "quokka camera", Approximation(candidates=4, recent=0)
        )


@pytest.mark.skipif(
    bool(os.environ.get("EPISODIC_TEST_CITUS")), reason="on Citus the count always keeps the margin"
)
def test_a_count_that_cannot_see_every_session_falls_back_to_the_margin(  # type: ignore[no-untyped-def]
    recall_engine, db_url
) -> None:
    """A role without pg_read_all_stats does not see other roles' transactions: the count
    cannot bound what they commit, keeps no ``complete_before``, and Recall reads from the
    count's start less the margin, as before."""
    _fill(recall_engine)
    role = f"counter_{uuid.uuid4().hex[:8]}"
    with recall_engine.connect() as admin:
        admin = admin.execution_options(isolation_level="AUTOCOMMIT")
        admin.execute(text(f"CREATE ROLE {role} LOGIN"))
        admin.execute(text(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}"))
        admin.execute(text(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}"))
        admin.execute(text(f"GRANT USAGE ON SCHEMA public TO {role}"))
    counter = make_engine(make_url(db_url).set(username=role).render_as_string(hide_password=False))
    try:
        with recall_engine.connect() as other:  # the superuser's transaction, hidden
            other.execute(text("SELECT 1"))
            assert _refresh(counter) is not None
        with recall_engine.connect() as conn:
            kept = conn.execute(
                text(
                    "SELECT complete_before, "
                    f"{kept_statistics.COMPLETE_BEFORE_SQL} AS since, "
                    "counted_at FROM kept_statistics k WHERE dataset = 'big'"
                )
            ).one()
        assert kept.complete_before is None
        assert kept.since == kept.counted_at - timedelta(minutes=10)
    finally:
        counter.dispose()
        with recall_engine.connect() as admin:
            admin = admin.execution_options(isolation_level="AUTOCOMMIT")
            admin.execute(text(f"DROP OWNED BY {role}"))
            admin.execute(text(f"DROP ROLE {role}"))


@pytest.mark.parametrize("kept", [True, False], ids=["kept", "counted"])
def test_the_pool_reads_the_holders_of_the_querys_rarest_words_only(  # type: ignore[no-untyped-def]
    recall_engine, kept: bool
) -> None:
    """A long query's common words bring no holders of their own (Approximation.words):
    the pool reads the postings, or the densest holders, of its rarest words, kept or
    counted. Every candidate is still scored over all its words."""
    with recall_engine.begin() as conn:
        zebra = {
            make_episode(conn, "big", [f"the zebra invoice {i} was paid late"]).episode_id
            for i in range(2)
        }
        gardening = {
            make_episode(
                conn, "big", [f"gardening in the rain, week {i}"], ended_at=T0 - timedelta(days=i)
            ).episode_id
            for i in range(10)
        }
    _refresh(recall_engine)
    # No part of 'candidates' (no lexical, no nearest), nothing recent: the per-word parts
    # alone bring candidates.
    every_word = Approximation(candidates=0, recent=0, kept_statistics=kept)
    with recall_engine.connect() as conn:
        both = _lexical_only(conn, "zebra gardening", every_word)
        only_rarest = _lexical_only(conn, "zebra gardening", replace(every_word, words=1))
    assert both >= zebra and both & gardening
    assert only_rarest >= zebra and not only_rarest & gardening


def test_the_answers_count_is_the_one_its_writers_keep(recall_engine) -> None:  # type: ignore[no-untyped-def]
    """Once the maintenance has counted a dataset, Recall answers with the count its writers
    keep (store/episode_counts.py) instead of counting: a kept count made wrong on purpose
    shows in the answer. A request as of a past moment, and a dataset with no kept count,
    are counted."""
    _fill(recall_engine)
    with recall_engine.connect() as conn:
        assert _recall(conn, "zebra", SMALL).episode_count == 39  # nothing kept: counted
    assert _refresh(recall_engine) is not None
    with recall_engine.begin() as conn:
        conn.execute(text("UPDATE episode_counts SET completed = 1000 WHERE dataset = 'big'"))
    with recall_engine.connect() as conn:
        assert _recall(conn, "zebra", SMALL).episode_count == 1000
        moment = T0 - timedelta(days=20)
        past = _recall(conn, "zebra", SMALL, as_of=moment)
        ended_by_then = conn.execute(
            text(
                "SELECT count(*) FROM episodes WHERE dataset = 'big' "
                "AND status = 'completed' AND ended_at <= :t"
            ),
            {"t": moment},
        ).scalar_one()
        assert 0 < past.episode_count == ended_by_then < 39
    with recall_engine.begin() as conn:
        conn.execute(text("DELETE FROM episode_counts WHERE dataset = 'big'"))
    with recall_engine.connect() as conn:
        assert _recall(conn, "zebra", SMALL).episode_count == 39
