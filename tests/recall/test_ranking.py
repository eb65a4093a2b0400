"""Recall's ranking, filters and index at the domain level, on a real PostgreSQL."""

from __future__ import annotations

import random
import uuid
from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import text

from episodic.errors import InvalidArgument, NotFound
from episodic.services.recall import domain
from episodic.store import episodes as states
from episodic.store import recall_queries
from episodic.store.recall_index import index_episode, index_missing
from episodic.store.recall_queries import (
    DEFAULT_RANKING,
    RECENCY_SPAN,
    RankingOptions,
    RecallFilters,
)
from episodic.testing.keys import test_vault
from tests.recall.factory import EMBEDDER, T0, make_episode, make_thread
from tests.recall.reference import reference_rank


def _recall(
    conn, dataset, query=None, *, ws=0.7, wr=0.3, limit=10, ranking=DEFAULT_RANKING, **filters
):  # type: ignore[no-untyped-def]
    filters.setdefault("as_of", T0)
    request = domain.RecallQuery(
        dataset=dataset,
        query=query,
        include_episodes=True,
        limit=limit,
        similarity_weight=ws,
        recency_weight=wr,
        filters=RecallFilters(**filters),
        ranking=ranking,
    )
    vector = EMBEDDER.embed_query(query) if request.needs_embedding else None
    return domain.recall(conn, test_vault(), request, vector)


def _ids(answer) -> list[str]:  # type: ignore[no-untyped-def]
    return [str(r["episode_id"]) for r in answer.rows]


def test_without_query_episodes_come_in_recency_order(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        old = make_episode(conn, "ds", ["about the roadmap"], ended_at=T0 - timedelta(days=9))
        new = make_episode(conn, "ds", ["about the invoices"], ended_at=T0 - timedelta(hours=2))
        mid = make_episode(conn, "ds", ["about the team"], ended_at=T0 - timedelta(days=1))
    with engine.connect() as conn:
        answer = _recall(conn, "ds")
    assert _ids(answer) == [str(new.episode_id), str(mid.episode_id), str(old.episode_id)]
    for row in answer.rows:
        days = (T0 - row["ended_at"]).total_seconds() / 86400
        assert row["similarity"] == 0.0
        # in units of the dataset's span: 9 days, the oldest episode's age
        assert row["recency"] == pytest.approx(1 / (1 + days / (RECENCY_SPAN * 9)))
        assert row["relevance"] == pytest.approx(0.3 * row["recency"])
    assert answer.episode_count == 3


def test_only_completed_episodes_come_back_and_are_counted(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        keep = make_episode(conn, "ds", ["pricing tier for atlas"], ended_at=T0 - timedelta(days=2))
        # The same thread's earlier episode: archived when `keep2` completed.
        first = make_episode(
            conn, "ds", ["pricing talk, first part"], ended_at=T0 - timedelta(days=5)
        )
        keep2 = make_episode(
            conn, "ds", ["pricing talk, second part"], thread_id=first.thread_id, ended_at=T0
        )
        for status in ("pending", "processing", "failed", "deleted"):
            make_episode(conn, "ds", [f"pricing {status}"], status=status, ended_at=T0)
        make_episode(conn, "ds", ["pricing soft deleted"], status="archived", ended_at=T0)
        make_episode(conn, "other", ["pricing elsewhere"], ended_at=T0)
    with engine.connect() as conn:
        for query in (None, "pricing"):
            answer = _recall(conn, "ds", query)
            assert set(_ids(answer)) == {str(keep.episode_id), str(keep2.episode_id)}
            assert answer.episode_count == 2
        status = conn.execute(
            text("SELECT status FROM episodes WHERE episode_id = :id"), {"id": first.episode_id}
        ).scalar_one()
        assert status == "archived"


def test_default_limit_is_three_and_episode_count_is_the_dataset_total(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        for i in range(5):
            make_episode(conn, "ds", [f"note {i}"], ended_at=T0 - timedelta(hours=i))
    with engine.connect() as conn:
        answer = _recall(conn, "ds", limit=3)
    assert len(answer.rows) == 3
    assert answer.episode_count == 5


def test_as_of_hides_later_episodes_and_measures_recency_from_it(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        before = make_episode(conn, "ds", ["budget review"], ended_at=T0 - timedelta(days=10))
        after = make_episode(conn, "ds", ["budget approved"], ended_at=T0)
    as_of = T0 - timedelta(days=7)
    with engine.connect() as conn:
        answer = _recall(conn, "ds", "budget", as_of=as_of)
        assert _ids(answer) == [str(before.episode_id)]
        # 3 days before as_of, and the span (its only candidate) is those 3 days
        assert answer.rows[0]["recency"] == pytest.approx(1 / (1 + 3 / (RECENCY_SPAN * 3)))
        seed = _recall(conn, "ds", "budget", as_of=as_of, ranking=FIRST_VERSION)
        assert seed.rows[0]["recency"] == pytest.approx(1 / (1 + 3))
        assert answer.episode_count == 1
        total = "SELECT count(*) FROM episodes WHERE dataset = 'ds' AND status = 'completed'"
        assert conn.execute(text(total)).scalar_one() == 2
        # The same question at the same as_of answers the same, whatever happened since.
        again = _recall(conn, "ds", "budget", as_of=as_of)
    assert [dict(r) for r in again.rows] == [dict(r) for r in answer.rows]
    assert str(after.episode_id) not in _ids(answer)


def test_recency_is_never_above_one(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        make_episode(conn, "ds", ["clock skew"], ended_at=T0 + timedelta(minutes=3))
    with engine.connect() as conn:
        request = domain.RecallQuery("ds", None, True, 3, 0.7, 0.3, RecallFilters())
        rows = domain.recall(conn, test_vault(), request, None).rows
    assert rows and rows[0]["recency"] <= 1.0


def test_filters_by_time_window_threads_entities_and_event_type(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        a = make_episode(
            conn,
            "ds",
            ["atlas pricing decided"],
            ended_at=T0 - timedelta(days=20),
            entities=["project atlas", "pricing"],
            event_type="decision",
        )
        b = make_episode(
            conn,
            "ds",
            ["atlas launch"],
            ended_at=T0 - timedelta(days=5),
            entities=["project atlas"],
            event_type="milestone",
        )
        c = make_episode(
            conn,
            "ds",
            ["pricing for zeus decided"],
            ended_at=T0 - timedelta(days=1),
            entities=["pricing", "project zeus"],
            event_type="decision",
        )
    ids = {k: str(v.episode_id) for k, v in {"a": a, "b": b, "c": c}.items()}
    with engine.connect() as conn:

        def got(**f):  # type: ignore[no-untyped-def]
            return set(_ids(_recall(conn, "ds", **f)))

        # since/until bound the episode's span: since on its end, until on its start.
        assert got(since=T0 - timedelta(days=6)) == {ids["b"], ids["c"]}
        assert got(until=T0 - timedelta(days=6)) == {ids["a"]}
        assert got(since=T0 - timedelta(days=6), until=T0 - timedelta(days=2)) == {ids["b"]}
        assert got(thread_ids=[a.thread_id, c.thread_id]) == {ids["a"], ids["c"]}
        # Entities are matched after normalisation, all of them required.
        entities = domain.check_entities(["Atlas Project"])
        assert entities == ["project atlas"]
        assert got(entities=entities) == {ids["a"], ids["b"]}
        assert got(entities=domain.check_entities(["PRICING", "Project Atlas"])) == {ids["a"]}
        assert got(event_type=domain.check_event_type(" Decision ")) == {ids["a"], ids["c"]}
        # Temporal question without embeddings: "the last decision about pricing".
        request = domain.RecallQuery(
            "ds",
            None,
            True,
            1,
            0.7,
            0.3,
            RecallFilters(entities=["pricing"], event_type="decision", as_of=T0),
        )
        assert not request.needs_embedding
        assert _ids(domain.recall(conn, test_vault(), request, None)) == [ids["c"]]


def test_similarity_weight_one_orders_by_similarity(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        match = make_episode(
            conn, "ds", ["the quarterly invoice for acme failed"], ended_at=T0 - timedelta(days=60)
        )
        make_episode(conn, "ds", ["we chatted about the weather"], ended_at=T0)
    with engine.connect() as conn:
        answer = _recall(conn, "ds", "acme invoice", ws=1.0, wr=0.0)
    assert _ids(answer)[0] == str(match.episode_id)
    assert answer.rows[0]["similarity"] == pytest.approx(1.0)
    assert answer.rows[0]["relevance"] == pytest.approx(1.0)
    assert 0.0 <= answer.rows[1]["similarity"] < 1.0


def test_messages_of_the_window_are_searchable_not_only_the_summary(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        hidden = make_episode(
            conn,
            "ds",
            ["my cat Mochi needs a vet appointment", "booked for Tuesday"],
            summary="The user organised an appointment.",
            ended_at=T0 - timedelta(days=30),
        )
        make_episode(conn, "ds", ["a talk about holidays"], ended_at=T0)
    with engine.connect() as conn:
        answer = _recall(conn, "ds", "Mochi")
    assert _ids(answer)[0] == str(hidden.episode_id)


def test_the_current_episode_stands_for_its_whole_thread(engine) -> None:  # type: ignore[no-untyped-def]
    """Earlier windows are archived, so the thread's current episode must find them."""
    with engine.begin() as conn:
        first = make_episode(
            conn,
            "ds",
            ["we compared the Corolla Hybrid with SUVs"],
            ended_at=T0 - timedelta(days=3),
        )
        current = make_episode(
            conn,
            "ds",
            ["later we talked about insurance"],
            thread_id=first.thread_id,
            ended_at=T0 - timedelta(days=2),
        )
        make_episode(conn, "ds", ["unrelated chat about music"], ended_at=T0)
    with engine.connect() as conn:
        answer = _recall(conn, "ds", "Corolla hybrid", ws=1.0, wr=0.0)
        assert _ids(answer)[0] == str(current.episode_id)
        assert answer.rows[0]["similarity"] == pytest.approx(1.0)
        # The second episode embedded only its own window: chunks are per thread.
        chunks = conn.execute(
            text("SELECT start_sequence, end_sequence FROM message_chunks WHERE thread_id = :t"),
            {"t": first.thread_id},
        ).all()
    assert sorted(chunks) == [(1, 1), (2, 2)]


def test_an_unindexed_episode_is_still_found_by_its_summary(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        plain = make_episode(
            conn,
            "ds",
            ["hello"],
            summary="Discussed the kubernetes migration plan",
            index=False,
            ended_at=T0 - timedelta(days=40),
        )
        make_episode(conn, "ds", ["other things"], ended_at=T0)
    with engine.connect() as conn:
        answer = _recall(conn, "ds", "kubernetes migration", ws=1.0, wr=0.0)
    assert _ids(answer)[0] == str(plain.episode_id)


def test_index_missing_backfills_episodes_completed_without_an_index(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        plain = make_episode(
            conn, "ds", ["the Zanzibar offsite is in March"], summary="An offsite.", index=False
        )
        make_episode(conn, "ds", ["already indexed"], ended_at=T0 - timedelta(days=1))
    assert index_missing(engine, EMBEDDER, test_vault()) == 1
    assert index_missing(engine, EMBEDDER, test_vault()) == 0
    with engine.connect() as conn:
        answer = _recall(conn, "ds", "Zanzibar", ws=1.0, wr=0.0)
    assert _ids(answer)[0] == str(plain.episode_id)


def test_index_episode_is_idempotent_and_reports_unknown_episodes(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        made = make_episode(conn, "ds", ["one", "two", "three"])
        before = conn.execute(text("SELECT count(*) FROM message_chunks")).scalar_one()
        again = index_episode(conn, test_vault(), made.episode_id, EMBEDDER)
        after = conn.execute(text("SELECT count(*) FROM message_chunks")).scalar_one()
        assert again.chunks_added == 0 and before == after
        assert again.search_length > 0
        with pytest.raises(NotFound):
            index_episode(conn, test_vault(), uuid.uuid4(), EMBEDDER)


def _words(rng: random.Random, pool: list[str], k: int) -> str:
    return " ".join(rng.choice(pool) for _ in range(k))


#: The ranking before issue 19: score fusion, recency on the seed's day scale.
FIRST_VERSION = RankingOptions(fusion="score", recency_span=0.0)


@pytest.mark.parametrize(
    "ranking",
    [DEFAULT_RANKING, FIRST_VERSION, replace(DEFAULT_RANKING, lexical_coverage=False)],
    ids=["default", "first", "no coverage"],
)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ranking_equals_the_formula_over_every_episode(engine, seed: int, ranking) -> None:  # type: ignore[no-untyped-def]
    """The SQL's top 10 is exactly the brute-force top 10 of the documented formula; the
    default's second look (``rerank_top``) then only reorders its first k."""
    look, with_look = ranking.rerank_top, ranking
    ranking = replace(ranking, phrase=False, rerank_top=0, rerank_weights=())
    rng = random.Random(seed)
    pool = [f"w{i}" for i in range(40)]
    with engine.begin() as conn:
        for i in range(40):
            thread_id = None
            if i % 7 == 0:  # some threads have an archived earlier episode
                earlier = make_episode(
                    conn,
                    "ds",
                    [_words(rng, pool, 8)],
                    ended_at=T0 - timedelta(days=rng.uniform(30, 90)),
                )
                thread_id = earlier.thread_id
            make_episode(
                conn,
                "ds",
                [_words(rng, pool, rng.randint(3, 15)) for _ in range(rng.randint(1, 4))],
                summary=_words(rng, pool, 6),
                thread_id=thread_id,
                ended_at=T0 - timedelta(days=rng.uniform(0, 30)),
                status=rng.choice(["completed"] * 6 + ["failed", "pending"]),
            )
    with engine.connect() as conn:
        for _ in range(4):
            query = _words(rng, pool, rng.randint(1, 4))
            ws, wr = rng.choice([(0.7, 0.3), (1.0, 0.0), (0.2, 0.9)])
            expected = reference_rank(
                conn,
                "ds",
                query,
                EMBEDDER.embed_query(query),
                as_of=T0,
                similarity_weight=ws,
                recency_weight=wr,
                options=ranking,
            )[:10]
            got = _recall(conn, "ds", query, ws=ws, wr=wr, limit=10, ranking=ranking).rows
            assert [str(r["episode_id"]) for r in got] == [e.episode_id for e in expected]
            for row, ref in zip(got, expected, strict=True):
                assert row["similarity"] == pytest.approx(ref.similarity, abs=1e-6)
                assert row["recency"] == pytest.approx(ref.recency, abs=1e-9)
            if look:
                second = _recall(conn, "ds", query, ws=ws, wr=wr, limit=10, ranking=with_look).rows
                ids = [str(r["episode_id"]) for r in got]
                looked = [str(r["episode_id"]) for r in second]
                assert sorted(looked[:look]) == sorted(ids[:look])
                assert looked[look:] == ids[look:]
                assert row["relevance"] == pytest.approx(ref.relevance, abs=1e-6)
                assert 0.0 <= row["similarity"] <= 1.0


def test_a_very_recent_moderately_similar_episode_is_not_dropped(engine) -> None:  # type: ignore[no-untyped-def]
    """Candidate generation by similarity alone (an ANN top-K) would miss it: a dozen old
    episodes are more similar. The formula lifts it into the top 3 by recency, and so
    must Recall. With the seed's day scale (the first version): recency relative to the
    dataset's span lifts a day-old episode far less, by design (docs/concepts/recall.md)."""
    query = "alpha beta gamma delta"
    with engine.begin() as conn:
        for i in range(2):  # the best matches, long ago
            make_episode(
                conn,
                "ds",
                [f"alpha beta gamma delta note{i}"],
                ended_at=T0 - timedelta(days=300 + 10 * i),
            )
        for i in range(10):  # more similar than the recent one, also long ago
            make_episode(
                conn, "ds", [f"alpha beta gamma filler{i}"], ended_at=T0 - timedelta(days=200 + i)
            )
        recent = make_episode(
            conn, "ds", ["alpha and many other words said in passing today"], ended_at=T0
        )
    with engine.connect() as conn:
        reference = reference_rank(
            conn, "ds", query, EMBEDDER.embed_query(query), as_of=T0, options=FIRST_VERSION
        )
        by_similarity = sorted(reference, key=lambda r: -r.similarity)
        got = _recall(conn, "ds", query, limit=3, ranking=FIRST_VERSION).rows
    recent_id = str(recent.episode_id)
    assert recent_id not in [r.episode_id for r in by_similarity[:10]]
    assert recent_id in [r.episode_id for r in reference[:3]]
    assert [str(r["episode_id"]) for r in got] == [r.episode_id for r in reference[:3]]


def test_search_ranks_by_text_only_and_skips_non_matches(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        old = make_episode(
            conn, "ds", ["terraform state locking"], ended_at=T0 - timedelta(days=90)
        )
        make_episode(conn, "ds", ["lunch plans"], ended_at=T0)
    with engine.connect() as conn:
        rows = domain.search(
            conn, test_vault(), "ds", "terraform", EMBEDDER.embed_query("terraform"), 5
        )
    assert [str(r["episode_id"]) for r in rows] == [str(old.episode_id)]
    assert rows[0]["relevance"] == pytest.approx(rows[0]["similarity"])


def test_list_and_get_episodes(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        made = [
            make_episode(conn, "ds", [f"m{i}"], ended_at=T0 - timedelta(hours=i)) for i in range(5)
        ]
        failed = make_episode(conn, "ds", ["broken"], status="failed", ended_at=T0)
        thread = make_thread(conn, "ds", "lonely")
    with engine.connect() as conn:
        page, more = recall_queries.list_episodes(
            conn, "ds", status="completed", thread_id=None, before=None, limit=3
        )
        assert more and [r["episode_id"] for r in page] == [m.episode_id for m in made[:3]]
        last = page[-1]
        page2, more2 = recall_queries.list_episodes(
            conn,
            "ds",
            status="completed",
            thread_id=None,
            before=(last["ended_at"], last["episode_id"]),
            limit=3,
        )
        assert not more2 and [r["episode_id"] for r in page2] == [m.episode_id for m in made[3:]]
        only_failed, _ = recall_queries.list_episodes(
            conn, "ds", status="failed", thread_id=None, before=None, limit=10
        )
        assert [r["episode_id"] for r in only_failed] == [failed.episode_id]
        none, _ = recall_queries.list_episodes(
            conn, "ds", status=None, thread_id=thread, before=None, limit=10
        )
        assert none == []
        assert states.get_episode(conn, failed.episode_id, dataset="ds")["status"] == "failed"
        with pytest.raises(NotFound):
            states.get_episode(conn, uuid.uuid4(), dataset="ds")
    with pytest.raises(InvalidArgument):
        domain.check_status(42)


@pytest.mark.parametrize("approximate", [False, True], ids=["exact", "approximate"])
def test_one_word_shared_by_chance_is_not_a_full_lexical_match(engine, approximate) -> None:  # type: ignore[no-untyped-def]
    """A paraphrase shares one word with a session about something else and none with its
    own (issue 40: short conversations in other languages). Relative to the best candidate
    alone, that chance match is the dataset's best lexical match, lexical 1.0, and outweighs
    the meaning; weighed by the share of the query it holds (``lexical_coverage``) it counts
    for that share. A session holding every query word makes a full match again."""
    query = "how much did I plan to offer for the electric bicycle I was eyeing"
    with engine.begin() as conn:
        chance = make_episode(
            conn, "ds", ["we fixed the bicycle chain on sunday"], ended_at=T0 - timedelta(days=1)
        )
        make_episode(
            conn, "ds", ["an e-bike, nine hundred at most"], ended_at=T0 - timedelta(days=2)
        )
        make_episode(conn, "ds", ["the cat is sick again"], ended_at=T0 - timedelta(days=3))
    sizes = domain.DatasetSizes(0 if approximate else 10_000, recall_queries.Approximation(8, 8))

    def lexical_of(conn, coverage: bool) -> dict[str, float]:  # type: ignore[no-untyped-def]
        request = domain.RecallQuery(
            dataset="ds",
            query=query,
            include_episodes=True,
            limit=10,
            similarity_weight=0.7,
            recency_weight=0.3,
            filters=RecallFilters(as_of=T0),
            ranking=replace(DEFAULT_RANKING, lexical_coverage=coverage),
        )
        answer = domain.recall(conn, test_vault(), request, EMBEDDER.embed_query(query), sizes)
        return {str(r["episode_id"]): float(r["lexical"]) for r in answer.rows}

    with engine.connect() as conn:
        alone = lexical_of(conn, False)
        weighed = lexical_of(conn, True)
    assert alone[str(chance.episode_id)] == pytest.approx(1.0)
    assert 0.0 < weighed[str(chance.episode_id)] < 0.35
    with engine.begin() as conn:
        whole = make_episode(
            conn,
            "ds",
            ["I plan to offer much for the electric bicycle I was eyeing"],
            ended_at=T0 - timedelta(days=4),
        )
    with engine.connect() as conn:
        weighed = lexical_of(conn, True)
    assert weighed[str(whole.episode_id)] == pytest.approx(1.0)
    assert weighed[str(chance.episode_id)] < 0.35
