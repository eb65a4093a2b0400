"""Calibrated relevance and abstention: an episode's relevance is absolute (comparable
across queries and datasets), ``min_relevance`` leaves out what does not fit and
``min_match`` answers nothing when the request's best match says nothing fits — so a
question nothing in the dataset answers gets nothing, through the real Recall service with
the offline embedder the curves were fitted for (MiniLM)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from episodic.providers import MiniLMEmbedder
from episodic.store.relevance import MINILM, RECOMMENDED_MIN_RELEVANCE, relevance, request_match
from episodic.v1 import recall_service_pb2 as pb
from episodic.v1 import recall_service_pb2_grpc as pb_grpc
from tests.recall.factory import T0, make_episode

EPISODES = [pb.RECALL_INCLUDE_EPISODES]

CAR = [
    "I need a family car under $30k, SUVs feel too big for the city.",
    "The Toyota Corolla Hybrid fits your budget and city commuting.",
    "Great, I went with the Corolla Hybrid in silver.",
]
TRIP = [
    "We are planning a week in Lisbon in October with the kids.",
    "Alfama and Belem are walkable; the tram 28 is crowded in the mornings.",
]
PRICING = [
    "For project Atlas we agreed on the Pro tier at $29 per seat.",
    "Annual billing gets two months free.",
]


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture
def recall(spawn):  # type: ignore[no-untyped-def]
    service = spawn("recall", {"EPISODIC_EMBEDDING_PROVIDER": "minilm"})
    with service.channel() as channel:
        yield pb_grpc.RecallServiceStub(channel)


def _ask(  # type: ignore[no-untyped-def]
    recall,
    dataset: str,
    query: str,
    min_relevance: float | None = None,
    abstain: bool = False,
    min_match: float | None = None,
):
    """Recall ``query``; a threshold left at None is not sent (unset), 0.0 is sent."""
    request = pb.RecallRequest(
        dataset=dataset, query=query, include=EPISODES, context_episodes=10, abstain=abstain
    )
    if min_relevance is not None:
        request.min_relevance = min_relevance
    if min_match is not None:
        request.min_match = min_match
    return recall.Recall(request, timeout=30).episodes


def _make_life(engine, minilm, dataset: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        made = {
            name: make_episode(
                conn,
                dataset,
                messages,
                label=name,
                embedder=minilm,
                ended_at=T0 - timedelta(days=i),
            )
            for i, (name, messages) in enumerate(
                (("car", CAR), ("trip", TRIP), ("pricing", PRICING))
            )
        }
    return {str(m.episode_id): name for name, m in made.items()}


def test_a_question_nothing_answers_gets_nothing_at_the_threshold(recall, engine, minilm) -> None:  # type: ignore[no-untyped-def]
    names = _make_life(engine, minilm, "user_7")

    # Without a threshold the ranking still fills the answer (relative similarity)...
    unfiltered = _ask(recall, "user_7", "What is my dog's name?")
    assert len(unfiltered.episodes) == 3
    assert max(e.semantic for e in unfiltered.episodes) == pytest.approx(1.0)
    # ...but the calibrated relevance says none of them fits.
    assert all(e.relevance < RECOMMENDED_MIN_RELEVANCE for e in unfiltered.episodes)

    filtered = _ask(recall, "user_7", "What is my dog's name?", RECOMMENDED_MIN_RELEVANCE)
    assert list(filtered.episodes) == []
    assert filtered.episode_count == 3  # the dataset is not empty; nothing fitted

    found = _ask(recall, "user_7", "Which car did I buy?", RECOMMENDED_MIN_RELEVANCE)
    assert [names[e.episode.episode_id] for e in found.episodes][:1] == ["car"]
    assert found.episodes[0].relevance >= RECOMMENDED_MIN_RELEVANCE
    assert all(e.relevance >= RECOMMENDED_MIN_RELEVANCE for e in found.episodes)

    pricing = _ask(
        recall, "user_7", "What price did we agree for Atlas?", RECOMMENDED_MIN_RELEVANCE
    )
    assert [names[e.episode.episode_id] for e in pricing.episodes][:1] == ["pricing"]


def test_a_lone_unrelated_episode_is_similar_but_not_relevant(recall, engine, minilm) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        make_episode(conn, "lonely", TRIP, embedder=minilm)
    (only,) = _ask(recall, "lonely", "How much does the Pro tier cost per seat?").episodes
    assert only.semantic == pytest.approx(1.0)  # relative to the best candidate: itself
    assert 0.0 <= only.relevance < RECOMMENDED_MIN_RELEVANCE


def test_relevance_is_the_same_episode_score_wherever_the_best_match_is_the_same(  # type: ignore[no-untyped-def]
    recall, engine, minilm
) -> None:
    """Comparable across datasets: the same episode and question get the same relevance
    alone and among others when it is the request's best match either way (similarity,
    relative, changes)."""
    with engine.begin() as conn:
        make_episode(conn, "alone", CAR, embedder=minilm)
    _make_life(engine, minilm, "crowded")
    question = "Which car did I buy?"
    (alone,) = _ask(recall, "alone", question).episodes
    crowded = _ask(recall, "crowded", question).episodes
    same = next(e for e in crowded if e.episode.summary == alone.episode.summary)
    assert same.relevance == pytest.approx(alone.relevance, abs=1e-9)
    assert alone.relevance >= RECOMMENDED_MIN_RELEVANCE


def test_a_weak_match_counts_for_more_beside_a_strong_one(recall, engine, minilm) -> None:  # type: ignore[no-untyped-def]
    """The request's best match is the curve's context: an episode that matches a question
    weakly is more likely to answer it in a dataset that holds a strong match (the user
    talked about this) than alone (a stranger's dataset) — what lets a threshold keep the
    weak gold episode of a real question and drop the best of a foreign one."""
    question = "Which car did I buy for the city?"
    with engine.begin() as conn:
        make_episode(conn, "trip-alone", TRIP, embedder=minilm)
    _make_life(engine, minilm, "user_11")
    (alone,) = _ask(recall, "trip-alone", question).episodes
    beside = next(
        e for e in _ask(recall, "user_11", question).episodes if "Lisbon" in e.episode.summary
    )
    assert beside.relevance > alone.relevance


def test_a_recall_without_a_query_is_not_filtered(recall, engine, minilm) -> None:  # type: ignore[no-untyped-def]
    _make_life(engine, minilm, "user_8")
    answer = recall.Recall(
        pb.RecallRequest(
            dataset="user_8", include=EPISODES, context_episodes=10, min_relevance=0.9
        ),
        timeout=30,
    ).episodes
    assert len(answer.episodes) == 3
    assert all(e.relevance == 0 for e in answer.episodes)


def _rank_car_question(engine, minilm, dataset: str, options=None) -> list:  # type: ignore[no-untyped-def]
    """Recall's ranking statement's rows for one question about the car, in ``dataset``."""
    from episodic.store import recall_queries as q
    from episodic.store.recall_queries import DEFAULT_RANKING, RecallFilters
    from episodic.testing import keys

    query = "Which car did I buy in the city?"
    with engine.connect() as conn:
        rows, _ = q.rank_episodes(
            conn,
            key=keys.test_vault().for_read(conn, dataset),
            filters=RecallFilters(),
            query=query,
            query_vector=minilm.embed_query(query),
            similarity_weight=0.7,
            recency_weight=0.3,
            limit=10,
            options=options or DEFAULT_RANKING,
        )
    return list(rows)


def test_the_sql_curve_is_the_python_curve(engine, minilm) -> None:  # type: ignore[no-untyped-def]
    _make_life(engine, minilm, "user_9")
    rows = _rank_car_question(engine, minilm, "user_9")
    assert len(rows) == 3
    for r in rows:
        assert 0.0 <= r["coverage"] <= 1.0 and 0.0 <= r["passage_coverage"] <= r["coverage"]
    best = tuple(max(r[k] for r in rows) for k in ("cosine", "coverage", "passage_coverage"))
    for r in rows:
        signals = (r["cosine"], r["coverage"], r["passage_coverage"])
        assert r["absolute_relevance"] == pytest.approx(relevance(signals, best), abs=1e-9)
        # the request's match reads its best alone: the same on every row
        assert r["request_match"] == pytest.approx(request_match(best, MINILM), abs=1e-9)
        # the context counts: judged alone (its own best), the weaker ones would score less
        if signals != best:
            assert relevance(signals) < r["absolute_relevance"]
    car = max(rows, key=lambda r: r["absolute_relevance"])
    # "car" and "city" are in the car episode (one passage); "buy" is not.
    assert car["coverage"] == pytest.approx(2 / 3)


def test_each_embedder_family_has_its_own_curve_in_the_statement(engine, minilm) -> None:  # type: ignore[no-untyped-def]
    """Recall reads the curve fitted for its embedder: the e5 curve's relevance (computed in
    SQL through the ranking Recall builds for an e5 embedder) is the Python e5 curve's, and
    differs from MiniLM's for the same candidate."""
    from episodic.config import RecallSettings
    from episodic.services.recall.domain import ranking_from
    from episodic.store.relevance import E5, MINILM, curve_for

    assert curve_for("e5:multilingual-e5-small-q4") is E5
    assert curve_for(minilm.name) is MINILM
    assert curve_for("openai:text-embedding-3-small") is MINILM  # none of its own
    assert E5.recommended_min_relevance != MINILM.recommended_min_relevance
    e5_ranking = ranking_from(RecallSettings(), "e5:multilingual-e5-small-q4")
    assert e5_ranking.relevance_curve is E5
    assert ranking_from(RecallSettings(), minilm.name).relevance_curve is MINILM

    _make_life(engine, minilm, "user_10")
    rows = _rank_car_question(engine, minilm, "user_10", e5_ranking)
    assert len(rows) == 3
    best = tuple(max(r[k] for r in rows) for k in ("cosine", "coverage", "passage_coverage"))
    for r in rows:
        signals = (r["cosine"], r["coverage"], r["passage_coverage"])
        assert r["absolute_relevance"] == pytest.approx(
            relevance(signals, best, curve=E5), abs=1e-9
        )
        assert r["absolute_relevance"] != pytest.approx(relevance(signals, best), abs=1e-3)
        # and e5's match curve, not MiniLM's
        assert r["request_match"] == pytest.approx(request_match(best, E5), abs=1e-9)
        assert r["request_match"] != pytest.approx(request_match(best, MINILM), abs=1e-3)


def test_min_match_answers_nothing_or_everything_a_request_matched(recall, engine, minilm) -> None:  # type: ignore[no-untyped-def]
    """The request-level decision: below ``min_match`` nothing comes back; above it every
    episode does, the weak ones too, where ``min_relevance`` judges each episode."""
    names = _make_life(engine, minilm, "user_13")
    at = MINILM.abstention.min_match
    assert list(_ask(recall, "user_13", "What is my dog's name?", min_match=at).episodes) == []
    car = _ask(recall, "user_13", "Which car did I buy?", min_match=at).episodes
    assert [names[e.episode.episode_id] for e in car][:1] == ["car"]
    assert len(car) == 3  # the trip and the pricing stay: the request matched
    # the same threshold on each episode drops the weak ones
    assert len(_ask(recall, "user_13", "Which car did I buy?", at).episodes) < 3


def test_the_answer_says_how_well_the_request_matched_and_whether_it_abstained(  # type: ignore[no-untyped-def]
    recall, engine, minilm
) -> None:
    """``RecalledEpisodes.match`` is the request's match whether or not the thresholds let
    anything through; ``abstained`` tells an answer the thresholds emptied from a dataset
    with nothing to rank, and from a request that kept some."""
    _make_life(engine, minilm, "user_15")
    open_answer = _ask(recall, "user_15", "What is my dog's name?")
    assert len(open_answer.episodes) == 3 and not open_answer.abstained
    assert open_answer.HasField("match") and 0.0 < open_answer.match < 1.0
    # the same whether the thresholds let anything through or not
    gated = _ask(recall, "user_15", "What is my dog's name?", abstain=True)
    assert list(gated.episodes) == [] and gated.abstained
    assert gated.match == pytest.approx(open_answer.match)
    per_episode = _ask(recall, "user_15", "What is my dog's name?", min_relevance=0.99)
    assert list(per_episode.episodes) == [] and per_episode.abstained
    # a request that kept some did not abstain, though the thresholds left others out
    car = _ask(recall, "user_15", "Which car did I buy?", RECOMMENDED_MIN_RELEVANCE)
    assert 0 < len(car.episodes) < 3 and not car.abstained
    assert car.match > gated.match
    # nothing to rank: no match, and no abstention (the dataset holds nothing)
    nothing = _ask(recall, "nobody_here", "What is my dog's name?", abstain=True)
    assert nothing.episode_count == 0 and not nothing.abstained
    assert not nothing.HasField("match")
    # without a query nothing is matched
    recent = recall.Recall(
        pb.RecallRequest(dataset="user_15", include=EPISODES, context_episodes=2), timeout=30
    ).episodes
    assert len(recent.episodes) == 2 and not recent.HasField("match") and not recent.abstained


def test_the_limit_holds_the_best_episodes_that_pass_not_the_best_of_all(engine, minilm) -> None:  # type: ignore[no-untyped-def]
    """The thresholds do not narrow the top ``limit`` after the fact: when recency puts an
    episode that fails them first, the best that passes still comes back in its place
    (the statement orders those that pass before those that do not, then drops these)."""
    from episodic.store import recall_queries as q
    from episodic.store.recall_queries import RecallFilters
    from episodic.testing import keys

    with engine.begin() as conn:
        make_episode(
            conn, "user_16", CAR, label="car", embedder=minilm, ended_at=T0 - timedelta(days=30)
        )
        make_episode(conn, "user_16", TRIP, label="trip", embedder=minilm, ended_at=T0)
    query = "Which car did I buy?"
    with engine.connect() as conn:
        key = keys.test_vault().for_read(conn, "user_16")

        def top(min_relevance: float) -> q.Ranking:
            return q.rank(
                conn,
                key=key,
                filters=RecallFilters(),
                query=query,
                query_vector=minilm.embed_query(query),
                similarity_weight=0.01,  # recency decides the order: the trip first
                recency_weight=0.99,
                limit=1,
                min_relevance=min_relevance,
                # recency weighed everywhere, not only inside the similarity band
                options=replace(q.DEFAULT_RANKING, recency_band=0.0),
            )

        (first,) = top(0.0).rows
        assert first["absolute_relevance"] < RECOMMENDED_MIN_RELEVANCE  # the trip
        kept = top(RECOMMENDED_MIN_RELEVANCE)
        assert len(kept.rows) == 1 and not kept.withheld
        assert kept.rows[0]["episode_id"] != first["episode_id"]
        assert kept.rows[0]["absolute_relevance"] >= RECOMMENDED_MIN_RELEVANCE
        assert kept.match == pytest.approx(first["request_match"])


def test_abstain_applies_the_thresholds_recommended_for_the_running_model(
    recall, engine, minilm
) -> None:  # type: ignore[no-untyped-def]
    """An agent need not know each model's scale: ``abstain`` is the recommended
    ``min_relevance`` and ``min_match`` of the model Recall runs (MiniLM here); an
    explicit one decides."""
    names = _make_life(engine, minilm, "user_12")
    assert list(_ask(recall, "user_12", "What is my dog's name?", abstain=True).episodes) == []
    found = _ask(recall, "user_12", "Which car did I buy?", abstain=True).episodes
    assert [names[e.episode.episode_id] for e in found][:1] == ["car"]
    assert all(e.relevance >= MINILM.abstention.min_relevance for e in found)
    # explicit thresholds take precedence: tiny ones keep the unrelated episodes
    kept = _ask(
        recall, "user_12", "What is my dog's name?", 1e-6, abstain=True, min_match=1e-6
    ).episodes
    assert len(kept) == 3
    # either alone leaves the other's recommended value in force: the request is gated
    assert (
        list(_ask(recall, "user_12", "What is my dog's name?", 1e-6, abstain=True).episodes) == []
    )
    # An explicit 0 is a choice too (the field has presence): it keeps everything where
    # abstain alone would answer nothing, and sent alone it lifts only its own
    # threshold.
    zero = _ask(recall, "user_12", "What is my dog's name?", 0.0, abstain=True, min_match=0.0)
    assert len(zero.episodes) == 3 and not zero.abstained
    assert list(_ask(recall, "user_12", "What is my dog's name?", 0.0, abstain=True).episodes) == []


def test_abstain_keeps_everything_for_a_model_without_a_curve_of_its_own() -> None:
    from episodic.services.recall.domain import abstention, check_min_match, check_min_relevance
    from episodic.store.relevance import E5, MINILM

    assert abstention("minilm:all-MiniLM-L6-v2-int8") == MINILM.abstention
    assert abstention("e5:multilingual-e5-small-q4") == E5.abstention
    assert MINILM.abstention.min_match > 0 and E5.abstention.min_match > 0
    # MiniLM's curves would misjudge another model's cosines: abstaining would be a guess
    assert abstention("openai:text-embedding-3-small") is None
    assert abstention("hashing:384") is None
    assert check_min_relevance(0.0) == 0.0 and check_min_relevance(0.7) == 0.7
    assert check_min_match(0.0) == 0.0 and check_min_match(0.1) == 0.1


def test_abstain_holds_only_in_the_language_its_curves_were_fitted_in(  # type: ignore[no-untyped-def]
    recall, engine, minilm
) -> None:
    """The curves were fitted on English: in a dataset set to another language abstain
    leaves everything (measured to cut a third of real answers there), while an explicit
    threshold still applies."""
    from episodic.store.languages import resolve_language, set_language
    from episodic.testing.keys import test_vault

    names = _make_life(engine, minilm, "user_14")
    dog = "What is my dog's name?"
    english = _ask(recall, "user_14", dog, abstain=True)
    assert list(english.episodes) == [] and english.abstained and english.abstain_applied
    # the answer says whether abstain held: not asked, or nothing asked of it, it did not
    assert not _ask(recall, "user_14", dog).abstain_applied
    assert not _ask(recall, "user_14", "", abstain=True).abstain_applied
    with engine.begin() as conn:
        set_language(conn, test_vault(), "user_14", resolve_language(conn, "french"))
    french = _ask(recall, "user_14", dog, abstain=True)
    assert sorted(names[e.episode.episode_id] for e in french.episodes) == [
        "car",
        "pricing",
        "trip",
    ]
    assert not french.abstain_applied and not french.abstained  # the client can tell
    at = MINILM.abstention.min_match
    assert list(_ask(recall, "user_14", dog, abstain=True, min_match=at).episodes) == []


def test_a_model_with_curves_for_other_languages_abstains_there_by_them(engine, minilm) -> None:  # type: ignore[no-untyped-def]
    """multilingual-e5 (the model a dataset in another language is embedded with) has
    curves fitted on datasets in other languages (bench.quality.language_curves): in a dataset set
    to French the relevance and the match are that curve's and ``abstain`` holds with its
    thresholds, while an English dataset keeps the curve fitted on LoCoMo. (MiniLM has none:
    it keeps every episode there, the test above.) The vectors here are MiniLM's: the
    statement reads cosines, whoever made them."""
    from episodic.config import RecallSettings
    from episodic.services.recall import domain
    from episodic.store.languages import resolve_language, set_language
    from episodic.store.recall_queries import RecallFilters
    from episodic.store.relevance import E5, E5_OTHER_LANGUAGES, other_language_curve
    from episodic.testing.keys import test_vault

    e5 = "e5:multilingual-e5-small-q4"
    assert other_language_curve(e5) is E5_OTHER_LANGUAGES
    assert other_language_curve(minilm.name) is None
    ranking = domain.ranking_from(RecallSettings(), e5)
    assert ranking.relevance_curve is E5 and ranking.other_language_curve is E5_OTHER_LANGUAGES
    for dataset, curve in (("user_16", E5), ("user_15", E5_OTHER_LANGUAGES)):
        names = _make_life(engine, minilm, dataset)
        if curve is E5_OTHER_LANGUAGES:
            with engine.begin() as conn:
                set_language(conn, test_vault(), dataset, resolve_language(conn, "french"))
        rows = _rank_car_question(engine, minilm, dataset, ranking)
        best = tuple(max(r[k] for r in rows) for k in ("cosine", "coverage", "passage_coverage"))
        for r in rows:
            signals = (r["cosine"], r["coverage"], r["passage_coverage"])
            assert r["absolute_relevance"] == pytest.approx(
                relevance(signals, best, curve=curve), abs=1e-9
            )
            assert r["request_match"] == pytest.approx(request_match(best, curve), abs=1e-9)

    def ask(question: str, **thresholds: float) -> domain.RecallAnswer:
        request = domain.RecallQuery(
            dataset="user_15",
            query=question,
            include_episodes=True,
            limit=10,
            similarity_weight=0.7,
            recency_weight=0.3,
            filters=RecallFilters(),
            abstention=E5.abstention,  # what the servicer passes for abstain=true
            ranking=ranking,
            **thresholds,  # type: ignore[arg-type]
        )
        with engine.connect() as conn:
            return domain.recall(conn, test_vault(), request, minilm.embed_query(question))

    # the other-language thresholds go with abstain, beside the English ones
    from episodic.store.recall_queries import threshold_params

    params = threshold_params(None, None, E5.abstention, ranking)
    assert params["abstain_min_relevance"] == E5.abstention.min_relevance
    assert params["abstain_other_min_relevance"] == E5_OTHER_LANGUAGES.abstention.min_relevance
    assert params["abstain_other_min_match"] == E5_OTHER_LANGUAGES.abstention.min_match
    assert E5_OTHER_LANGUAGES.abstention != E5.abstention
    with pytest.raises(ValueError, match="other-language curve"):
        threshold_params(None, None, E5.abstention)  # abstaining without the ranking
    dog = ask("What is my dog's name?")
    assert dog.abstain_applied and dog.abstained and not dog.rows
    # the request gate alone (as the MCP tool asks): the car question passes it
    car = ask("Which car did I buy in the city?", min_relevance=0.0)
    assert car.abstain_applied and car.match > dog.match
    assert [names[str(r["episode_id"])] for r in car.rows][:1] == ["car"]
    # an explicit 0 still keeps everything
    assert len(ask("What is my dog's name?", min_relevance=0.0, min_match=0.0).rows) == 3
