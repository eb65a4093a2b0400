"""The ranking switches measured on LoCoMo (recall_queries.RankingOptions, recall_index's
index switches): each does what it says, on a real PostgreSQL, at the domain level."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest

from episodic.query_focus import GENERIC_WEIGHT, query_phrases, strip_stop_phrases
from episodic.services.recall import domain
from episodic.store import lexical_document, message_chunks, recall_index
from episodic.store.recall_index import index_episode, weighted_query_tokens
from episodic.store.recall_queries import (
    DEFAULT_RANKING,
    LEARNED_WEIGHTS,
    RECENCY_BANDS,
    RankingOptions,
    RecallFilters,
    recency_band_for,
    recency_gate,
)
from episodic.store.relevance import (
    E5_SCALE,
    MINILM_SCALE,
    CosineScale,
    cosine_scale_for,
    on_reference_scale,
)
from episodic.testing.keys import test_vault
from tests.recall.factory import EMBEDDER, T0, _key, make_episode


@pytest.mark.parametrize(
    ("query", "focused"),
    [
        ("What did we discuss about the pricing model?", "the pricing model?"),
        ("Do you remember what Ann said about Lisbon?", "Ann Lisbon?"),
        ("What kind of music does John like?", "music does John like?"),
        ("Can you tell me about her trip to Paris?", "her trip to Paris?"),
        ("What did Ann and Bo talk about regarding adoption?", "What did Ann and Bo adoption?"),
        # nothing but framing: kept as written (something must be ranked)
        ("What did we discuss?", "What did we discuss?"),
        ("What did we talk about?", "What did we talk about?"),
        # no framing: unchanged
        ("When did Melanie go to the park?", "When did Melanie go to the park?"),
        (
            "Quand est-ce que nous avons parlé de Lisbonne ?",
            "Quand est-ce que nous avons parlé de Lisbonne ?",
        ),
    ],
)
def test_stop_phrases_leave_the_topic(query: str, focused: str) -> None:
    assert strip_stop_phrases(query) == focused


def _request(query: str, options: RankingOptions) -> domain.RecallQuery:
    return domain.RecallQuery(
        dataset="ds",
        query=query,
        include_episodes=True,
        limit=10,
        similarity_weight=1.0,
        recency_weight=0.0,
        filters=RecallFilters(as_of=T0),
        ranking=options,
    )


def test_the_ranked_query_loses_its_framing_only_when_the_switch_is_on() -> None:
    query = "What did we discuss about the Lisbon trip?"
    assert _request(query, RankingOptions()).ranked_query == query
    assert (
        _request(query, RankingOptions(strip_stop_phrases=True)).ranked_query == "the Lisbon trip?"
    )


def _lexical(conn, query: str, options: RankingOptions) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Each episode's lexical signal (no embedding: the lexical part alone)."""
    answer = domain.recall(conn, test_vault(), _request(query, options), None)
    return {str(r["episode_id"]): float(r["lexical"]) for r in answer.rows}


def test_generic_words_weigh_less_than_topic_words_when_terms_are_weighted(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        chatty = make_episode(
            conn,
            "ds",
            ["we talk and talk, then talk some more", "good talk today"],
            ended_at=T0 - timedelta(days=1),
        )
        topic = make_episode(
            conn, "ds", ["the Lisbon apartment is booked"], ended_at=T0 - timedelta(days=2)
        )
    query = "talk Lisbon"
    with engine.connect() as conn:
        weights = dict(weighted_query_tokens(conn, _key(conn, "ds"), "talked about Lisbon"))
        assert sorted(weights.values()) == [GENERIC_WEIGHT, 1.0]  # "talk" (stemmed), "lisbon"
        plain = _lexical(conn, query, RankingOptions())
        weighted = _lexical(conn, query, RankingOptions(weight_generic_terms=True))
    chatty_id, topic_id = str(chatty.episode_id), str(topic.episode_id)
    # "talk" four times beats "lisbon" once when both count fully…
    assert plain[chatty_id] > plain[topic_id]
    # …and loses once a generic word counts GENERIC_WEIGHT of a topic word
    assert weighted[topic_id] > weighted[chatty_id]


def test_the_head_field_lifts_an_episode_whose_summary_names_the_topic(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        in_passing = make_episode(
            conn,
            "ds",
            ["Lisbon, Lisbon: the band was called Lisbon", "anyway, back to the budget"],
            summary="Budget review.",
            ended_at=T0 - timedelta(days=1),
        )
        about = make_episode(
            conn,
            "ds",
            ["we fly to Lisbon in October", "the kids want to see the trams"],
            summary="Planning the October trip to Lisbon.",
            ended_at=T0 - timedelta(days=2),
        )
    with engine.connect() as conn:
        plain = _lexical(conn, "Lisbon", RankingOptions())
        head = _lexical(conn, "Lisbon", RankingOptions(head_share=0.4))
    passing_id, about_id = str(in_passing.episode_id), str(about.episode_id)
    assert plain[passing_id] > plain[about_id]
    assert head[about_id] > head[passing_id]


def test_entities_join_the_documents_head_only_when_the_switch_is_on(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        made = make_episode(
            conn, "ds", ["we walked up the hill to the castle"], entities=["alfama"], index=False
        )
    options = RankingOptions(head_share=0.4)
    with engine.begin() as conn:
        index_episode(conn, test_vault(), made.episode_id, EMBEDDER)
    with engine.connect() as conn:
        assert _lexical(conn, "Alfama", options)[str(made.episode_id)] == 0.0
    monkeypatch.setattr(lexical_document, "HEAD_ENTITIES", True)
    with engine.begin() as conn:
        index_episode(conn, test_vault(), made.episode_id, EMBEDDER)
    with engine.connect() as conn:
        assert _lexical(conn, "Alfama", options)[str(made.episode_id)] > 0.0


def test_chunks_hold_as_many_messages_as_the_switch_says(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    messages = [(i, f"message number {i}") for i in range(1, 9)]
    assert [(c.start_sequence, c.end_sequence) for c in recall_index.make_chunks(messages)] == [
        (1, 4),
        (3, 6),
        (5, 8),
    ]
    monkeypatch.setattr(message_chunks, "CHUNK_MESSAGES", 2)  # turn pairs, overlapping
    pairs = [(c.start_sequence, c.end_sequence) for c in recall_index.make_chunks(messages)]
    assert pairs == [(i, i + 1) for i in range(1, 8)]


def test_the_episode_embedding_reads_its_entities_only_when_the_switch_is_on(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from episodic.services.summariser import episode_vector, pipeline

    assert pipeline.embedding_text("Trip planning.", ["User flies in May"], ["lisbon"]) == (
        "Trip planning.\nUser flies in May"
    )
    monkeypatch.setattr(episode_vector, "EMBED_ENTITIES", True)  # read there
    assert pipeline.embedding_text("Trip planning.", [], ["lisbon", "tram 28"]) == (
        "Trip planning.\nNames: lisbon, tram 28"
    )


def _rows(  # type: ignore[no-untyped-def]
    conn, query: str | None, options: RankingOptions, embed: bool = False, **weights: float
) -> dict[str, dict]:
    """Each episode's ranked row (the lexical part only unless ``embed``), by episode id."""
    request = replace(_request(query or "", options), query=query, **weights)
    vector = EMBEDDER.embed_query(query) if embed and query else None
    answer = domain.recall(conn, test_vault(), request, vector)
    return {str(r["episode_id"]): dict(r) for r in answer.rows}


def test_the_learned_fusion_scores_what_its_weights_say(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        for i, words in enumerate(
            ["the castle tram runs at night", "castle castle castle", "a tram to the coast"]
        ):
            make_episode(conn, "ds", [words], ended_at=T0 - timedelta(days=i + 1))
    with engine.connect() as conn:
        score = _rows(conn, "castle tram", RankingOptions(), embed=True)
        fused = _rows(conn, "castle tram", RankingOptions(fusion="learned"), embed=True)
    assert max(float(r["cosine"]) for r in fused.values()) > 0  # every signal is in play
    # the row's columns carry the signals under LEARNED_WEIGHTS' names; the ideal
    # candidate is 1 on every signal but the cosine, which is the candidates' best
    fit = {k: sum(w * float(r[s]) for s, w in LEARNED_WEIGHTS.items()) for k, r in fused.items()}
    best_cosine = max(float(r["cosine"]) for r in fused.values())
    ideal = sum(w * (best_cosine if s == "cosine" else 1.0) for s, w in LEARNED_WEIGHTS.items())
    for k, r in fused.items():
        assert float(r["similarity"]) == pytest.approx(math.exp(fit[k] - ideal))
    # the score fusion is another formula (a mean of the relative signals, cubed)
    assert any(
        float(score[k]["similarity"]) != pytest.approx(float(fused[k]["similarity"])) for k in score
    )


def test_the_learned_fusion_prefers_the_episode_matching_every_query_word(engine) -> None:  # type: ignore[no-untyped-def]
    """One rare word said many times wins the relative lexical signal; the learned fusion
    also reads how many of the query's words matched."""
    with engine.begin() as conn:
        repeated = make_episode(
            conn, "ds", ["zanzibar zanzibar zanzibar, zanzibar again"], ended_at=T0
        )
        every = make_episode(
            conn, "ds", ["zanzibar: the ferry leaves from the harbour at noon"], ended_at=T0
        )
        for i in range(4):  # ferry and harbour are common in this dataset
            make_episode(
                conn, "ds", [f"ferry {i} and the harbour"], ended_at=T0 - timedelta(days=1)
            )
    query = "zanzibar ferry harbour"
    with engine.connect() as conn:
        score = _rows(conn, query, RankingOptions())
        fused = _rows(conn, query, RankingOptions(fusion="learned"))
    a, b = str(repeated.episode_id), str(every.episode_id)
    assert score[a]["similarity"] > score[b]["similarity"]
    assert fused[b]["similarity"] > fused[a]["similarity"]


def test_recency_is_relative_to_the_datasets_span_when_the_switch_is_on(engine) -> None:  # type: ignore[no-untyped-def]
    """Two datasets, one ten times longer: an episode a tenth of the way back in either
    gets the same recency with ``recency_span``; with the seed's day scale it does not."""
    ids = {}
    with engine.begin() as conn:
        for dataset, days in (("short", 10), ("long", 100)):
            oldest = make_episode(conn, dataset, ["first"], ended_at=T0 - timedelta(days=days))
            tenth = make_episode(conn, dataset, ["later"], ended_at=T0 - timedelta(days=days / 10))
            ids[dataset] = (str(oldest.episode_id), str(tenth.episode_id))
    span = RankingOptions(recency_span=2.0)
    recency: dict[tuple[str, str], float] = {}
    with engine.connect() as conn:
        for dataset in ("short", "long"):
            for name, options in (("seed", RankingOptions()), ("span", span)):
                for query in (None, "first later"):  # both statements (without and with a query)
                    rows = _rows(
                        conn,
                        query,
                        options,
                        dataset=dataset,
                        similarity_weight=0.0,
                        recency_weight=1.0,
                    )
                    oldest, tenth = ids[dataset]
                    recency[(dataset, name)] = float(rows[tenth]["recency"])
                    # the span is the oldest episode's age: it is at 1 / (1 + 1/2)
                    if name == "span":
                        assert float(rows[oldest]["recency"]) == pytest.approx(1 / 1.5)
    assert recency[("short", "span")] == pytest.approx(1 / (1 + 0.1 / 2.0))
    assert recency[("long", "span")] == pytest.approx(recency[("short", "span")])
    assert recency[("short", "seed")] == pytest.approx(1 / (1 + 1))
    assert recency[("long", "seed")] == pytest.approx(1 / (1 + 10))


def test_ranking_options_refuse_what_they_cannot_do() -> None:
    with pytest.raises(ValueError, match="fusion"):
        RankingOptions(fusion="average")
    with pytest.raises(ValueError, match="recency_span"):
        RankingOptions(recency_span=-1.0)
    with pytest.raises(ValueError, match="recency_band"):
        RankingOptions(recency_band=1.5)


def test_the_recall_service_ranks_with_its_settings() -> None:
    from episodic.config import RecallSettings
    from episodic.services.recall.servicer import RecallServicer

    def ranking(**settings: object) -> RankingOptions:
        servicer = RecallServicer(None, RecallSettings(**settings), EMBEDDER, test_vault())  # type: ignore[arg-type]
        return servicer.ranking

    assert ranking() == DEFAULT_RANKING
    assert (
        ranking(
            ranking_fusion="score",
            recency_span=0.0,
            recency_from_named_time=False,
            ranking_word_forms=False,
            ranking_function_words=False,
            ranking_second_look=0,
            ranking_recency_band=0.0,
            ranking_lexical_coverage=False,
        )
        == RankingOptions()
    )


def test_words_count_less_beside_e5s_meaning_and_the_setting_overrides() -> None:
    """The fitted lexical weights (fusion and second look) count LEXICAL_SCALES["e5"] (less
    than 1) for e5, the model of datasets in other languages; MiniLM keeps them; the
    setting names another factor."""
    from episodic.config import RecallSettings
    from episodic.store.recall_queries import (
        LEARNED_WEIGHTS,
        LEXICAL_SCALES,
        SECOND_LOOK_WEIGHTS,
    )

    scale = LEXICAL_SCALES["e5"]
    assert 0 < scale < 1

    e5 = domain.ranking_from(RecallSettings(), "e5:multilingual-e5-small-q4")
    weights = e5.learned_weights()
    assert weights["lexical"] == pytest.approx(LEARNED_WEIGHTS["lexical"] * scale)
    assert weights["coverage"] == pytest.approx(LEARNED_WEIGHTS["coverage"] * scale)
    assert weights["semantic"] == LEARNED_WEIGHTS["semantic"]
    second = dict(e5.rerank_weights)
    assert second["phrase"] == pytest.approx(dict(SECOND_LOOK_WEIGHTS)["phrase"] * scale)
    assert second["cosine"] == dict(SECOND_LOOK_WEIGHTS)["cosine"]
    minilm = domain.ranking_from(RecallSettings(), "minilm:all-MiniLM-L6-v2-int8")
    assert minilm.weights == () and minilm.rerank_weights == SECOND_LOOK_WEIGHTS
    as_fitted = domain.ranking_from(
        RecallSettings(ranking_lexical_scale=1.0), "e5:multilingual-e5-small-q4"
    )
    assert as_fitted.learned_weights() == LEARNED_WEIGHTS


# -- the third pass: recency from a named time, and the optional signals ---------------


def test_recency_counts_from_the_time_the_query_names_when_the_switch_is_on(engine) -> None:  # type: ignore[no-untyped-def]
    """ "What was Ann doing on May 2?" asked on May 17: the episode of May 2 is the
    question's "now" (recency 1), the one of May 16 is two weeks after it; without the
    switch, recency counts from as_of and the May 16 one is the more recent."""
    with engine.begin() as conn:
        then = make_episode(conn, "ds", ["Ann painted the fence"], ended_at=T0 - timedelta(days=15))
        lately = make_episode(conn, "ds", ["Ann painted the shed"], ended_at=T0 - timedelta(days=1))
    query = "What was Ann doing on May 2, 2026?"
    understood = domain.read_time(query, T0, False)
    assert understood is not None and not understood.applied  # ranked as written
    recency: dict[bool, dict[str, float]] = {}
    with engine.connect() as conn:
        for on in (False, True):
            request = replace(
                _request(query, replace(DEFAULT_RANKING, named_time_recency=on)),
                understanding=understood,
                similarity_weight=0.7,
                recency_weight=0.3,
            )
            rows = domain.recall(conn, test_vault(), request, None).rows
            recency[on] = {str(r["episode_id"]): float(r["recency"]) for r in rows}
    then_id, lately_id = str(then.episode_id), str(lately.episode_id)
    assert recency[False][lately_id] > recency[False][then_id]
    assert recency[True][then_id] == pytest.approx(1.0)  # inside the named day
    # ended on May 16 12:00, the named day ends May 3 00:00: 13.5 days after it
    assert recency[True][lately_id] == pytest.approx(1 / (1 + 13.5))


def test_a_time_the_filter_applies_does_not_move_recency(engine) -> None:  # type: ignore[no-untyped-def]
    """ "What did we discuss last week?" narrows the search to the week (a filter): recency
    stays measured from as_of."""
    with engine.begin() as conn:
        made = make_episode(conn, "ds", ["the budget review"], ended_at=T0 - timedelta(days=8))
    query = "What did we discuss about the budget last week?"
    understood = domain.read_time(query, T0, False)
    assert understood is not None and understood.applied
    request = replace(_request(query, DEFAULT_RANKING), understanding=understood)
    with engine.connect() as conn:
        rows = domain.recall(conn, test_vault(), request, None).rows
    assert [str(r["episode_id"]) for r in rows] == [str(made.episode_id)]
    span_days = 8.0  # the only candidate is the oldest: span = its age
    assert float(rows[0]["recency"]) == pytest.approx(1 / (1 + 8 / (8.0 * span_days)))


def test_passage_depth_reads_the_best_passages_of_an_episode(engine) -> None:  # type: ignore[no-untyped-def]
    """Two episodes whose best passage matches alike; one also matches in a second place:
    only the depth signals tell them apart."""
    filler = [f"filler line {i} about nothing" for i in range(4)]
    with engine.begin() as conn:
        twice = make_episode(
            conn, "ds", ["the heron nests by the lake", *filler, "the heron came back"]
        )
        once = make_episode(conn, "ds", ["the heron nests by the lake", *filler, "rain again"])
    options = RankingOptions(passage_depth=2)
    with engine.connect() as conn:
        rows = _rows(conn, "heron", options, embed=True)
        plain = _rows(conn, "heron", RankingOptions(), embed=True)
    a, b = str(twice.episode_id), str(once.episode_id)
    assert "passage_depth" not in plain[a]  # computed only with the switch
    assert rows[a]["passage_depth"] == pytest.approx(1.0)
    assert 0.0 < rows[b]["passage_depth"] < 1.0
    assert rows[a]["cosine_depth"] > rows[b]["cosine_depth"]
    # the mean of the two best chunk cosines is at most the best one
    assert rows[a]["cosine_depth"] <= rows[a]["cosine"] + 1e-9


def test_query_phrases_are_spelled_as_entities_are_stored() -> None:
    phrases = query_phrases("What did Caroline's LGBTQ support group do?")
    assert {"caroline", "lgbtq support group", "support group", "lgbtq"} <= set(phrases)
    assert "caroline's" not in phrases  # the possessive is dropped
    assert all(len(p.split()) <= 3 for p in phrases)


def test_entity_match_weighs_names_by_their_rarity(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        named = make_episode(conn, "ds", ["we walked up to the castle"], entities=["ann", "alfama"])
        other = make_episode(conn, "ds", ["we walked along the river"], entities=["ann"])
    options = RankingOptions(entity_match=True)
    with engine.connect() as conn:
        rows = _rows(conn, "Did Ann like Alfama?", options)
        speaker_only = _rows(conn, "What did Ann say?", options)
    a, b = str(named.episode_id), str(other.episode_id)
    assert rows[a]["entity_match"] == pytest.approx(1.0)
    # "ann", on every episode, weighs little next to "alfama" on one
    assert rows[b]["entity_match"] < 0.3
    # alone, the speaker's name matches both alike
    assert speaker_only[a]["entity_match"] == pytest.approx(speaker_only[b]["entity_match"])


def test_feedback_mixes_the_first_pass_centroid_into_the_cosine(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        for words in ("heron lake nests", "lake boats oars", "tax forms deadline"):
            make_episode(conn, "ds", [words])
    with engine.connect() as conn:
        rows = _rows(conn, "heron", RankingOptions(feedback=1), embed=True)
        weighted = _rows(
            conn,
            "lake",
            RankingOptions(
                fusion="learned",
                feedback=1,
                weights=(*LEARNED_WEIGHTS.items(), ("feedback_cosine", 2.0)),
            ),
            embed=True,
        )
        unweighted = _rows(conn, "lake", RankingOptions(fusion="learned", feedback=1), embed=True)
    top = max(rows.values(), key=lambda r: r["cosine"])
    # the first pass's best episode is the centroid: its feedback cosine is its cosine
    # mixed with 1 (its own best chunk), (cos + 0.5) / 1.5
    assert top["feedback_cosine"] == pytest.approx((top["cosine"] + 0.5) / 1.5, abs=1e-6)
    assert any(r["feedback_cosine"] != pytest.approx(r["cosine"]) for r in rows.values())
    # a weight on the signal moves similarity (computed, not fused, without one)
    assert any(
        weighted[k]["similarity"] != pytest.approx(unweighted[k]["similarity"]) for k in weighted
    )


def test_weights_need_their_signals() -> None:
    with pytest.raises(ValueError, match="entity_match"):
        RankingOptions(fusion="learned", weights=(("entity_match", 1.0),))
    with pytest.raises(ValueError, match="passage_depth"):
        RankingOptions(passage_depth=1)
    assert RankingOptions(entity_match=True, weights=(("entity_match", 1.0),)).signals()[-1] == (
        "entity_match"
    )


@pytest.mark.parametrize("threshold", ["min_relevance", "min_match"])
def test_min_relevance_keeps_what_happened_at_the_named_time(engine, threshold) -> None:  # type: ignore[no-untyped-def]
    """The calibrated relevance and the request's match read words and meaning; an episode
    of the very time the question names answers it whatever its words, so min_relevance and
    min_match keep it (with the switch) while they drop the rest."""
    with engine.begin() as conn:
        then = make_episode(conn, "ds", ["we fixed the gutter"], ended_at=T0 - timedelta(days=15))
        make_episode(conn, "ds", ["we fixed the roof"], ended_at=T0 - timedelta(days=1))
    query = "What was Ann doing on May 2, 2026?"
    understood = domain.read_time(query, T0, False)
    kept: dict[bool, list[str]] = {}
    with engine.connect() as conn:
        for on in (False, True):
            request = replace(
                _request(query, replace(DEFAULT_RANKING, named_time_recency=on)),
                understanding=understood,
                **{threshold: 0.99},
            )
            rows = domain.recall(conn, test_vault(), request, EMBEDDER.embed_query(query)).rows
            kept[on] = [str(r["episode_id"]) for r in rows]
    assert kept[False] == []
    assert kept[True] == [str(then.episode_id)]


# -- the fourth pass: irregular word forms, RM3 feedback, BM25 per field ----------------


def test_word_forms_group_the_forms_the_stemmer_keeps_apart() -> None:
    from episodic.query_focus import word_form_groups, word_forms

    groups = word_form_groups()
    assert set(groups["broken"]) == {"break", "broke"}
    assert "buy" in groups["bought"] and "children" in groups["child"]
    assert "saw" not in groups.get("see", ())  # mostly another word: left out
    assert word_forms("Who ran the race?") == [("run", "ran")]
    assert word_forms("Wann bist du gelaufen?") == []  # not an English word of the table


def test_word_forms_find_the_episode_that_says_it_in_another_form(engine) -> None:  # type: ignore[no-untyped-def]
    """ "What did Evan have broken?" against "my Prius broke down": no shared lexeme until
    the query's irregular forms are OR-ed in; the added lexeme stands for "broken" in the
    coverage signals."""
    with engine.begin() as conn:
        broke = make_episode(conn, "ds", ["my Prius broke down on the highway"])
        other = make_episode(conn, "ds", ["the Prius is parked at home"])
    query = "What did Evan have broken?"
    with engine.connect() as conn:
        plain = _rows(conn, query, RankingOptions())
        forms = _rows(conn, query, RankingOptions(word_forms=True))
        terms = query_terms_of(conn, query, RankingOptions(word_forms=True))
    a, b = str(broke.episode_id), str(other.episode_id)
    assert plain[a]["lexical"] == 0.0
    assert forms[a]["lexical"] == pytest.approx(1.0)
    assert forms[b]["lexical"] == 0.0
    # one of the query's two words ("evan", "broken"; not of its four lexemes) matched
    assert forms[a]["coverage"] == pytest.approx(0.5)
    # "evan", "broken" and the two added forms, which stand for "broken"
    assert len(terms) == 4 and len({term for _, _, term in terms}) == 2


def test_word_forms_leave_a_dataset_in_another_language_alone(engine) -> None:  # type: ignore[no-untyped-def]
    from episodic.store.languages import set_language

    with engine.begin() as conn:
        make_episode(conn, "ds", ["el coche se estropeó"])
        set_language(conn, test_vault(), "ds", "spanish")
    with engine.connect() as conn:
        terms = query_terms_of(conn, "children broken", RankingOptions(word_forms=True))
    assert len(terms) == 2  # the query's own two lexemes, nothing added


def query_terms_of(conn, query: str, options: RankingOptions) -> list[tuple[str, float, str]]:  # type: ignore[no-untyped-def]
    from episodic.store.recall_queries import query_terms

    return query_terms(conn, _key(conn, "ds"), query, options)


def test_expansion_adds_the_first_pass_episodes_words_to_the_query(engine) -> None:  # type: ignore[no-untyped-def]
    """RM3-style feedback: "heron" finds the episode about herons at the lake; its words
    ("lake", "nests") join the query with a small weight, so the episode about the lake
    that never says "heron" gets a lexical score, and one about neither stays at 0."""
    with engine.begin() as conn:
        heron = make_episode(conn, "ds", ["the heron nests by the lake every spring"])
        lake = make_episode(conn, "ds", ["we rowed across the lake to the nests"])
        tax = make_episode(conn, "ds", ["the tax forms are due on Friday"])
    with engine.connect() as conn:
        plain = _rows(conn, "heron", RankingOptions())
        expanded = _rows(conn, "heron", RankingOptions(expansion=1))
        from episodic.store.recall_queries import EXPANSION_WEIGHT, expansion_terms

        key = _key(conn, "ds")
        first = [r for r in plain.values() if str(r["episode_id"]) == str(heron.episode_id)]
        words = expansion_terms(conn, key, RecallFilters(as_of=T0), first, [key.token("heron")])
    h, l_, t = str(heron.episode_id), str(lake.episode_id), str(tax.episode_id)
    assert plain[l_]["lexical"] == 0.0
    assert expanded[l_]["lexical"] > 0.0
    assert expanded[t]["lexical"] == 0.0
    assert expanded[h]["lexical"] == pytest.approx(1.0)  # still the best
    # feedback words do not count as query words: the heron episode still covers it all
    assert expanded[h]["coverage"] == pytest.approx(1.0)
    assert expanded[l_]["coverage"] == 0.0
    assert {w for _, w in words} and max(w for _, w in words) == pytest.approx(EXPANSION_WEIGHT)
    assert key.token("lake") in {t_ for t_, _ in words}
    assert key.token("heron") not in {t_ for t_, _ in words}


def test_passage_bm25_constants_apply_to_passages_only(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from episodic.store import lexical_statistics

    plain = lexical_statistics.bm25("t", "pdf", "t.dl", "s", passage=True)
    monkeypatch.setattr(lexical_statistics, "PASSAGE_BM25", (0.9, 0.4))
    assert lexical_statistics.bm25("t", "pdf", "t.dl", "s", passage=True) != plain
    assert "0.9" in lexical_statistics.bm25("t", "pdf", "t.dl", "s", passage=True)
    assert lexical_statistics.bm25("t", "ddf", "d.dl", "s") == plain.replace("pdf", "ddf").replace(
        "t.dl", "d.dl"
    )


def test_expansion_refuses_a_negative_count() -> None:
    with pytest.raises(ValueError, match="expansion"):
        RankingOptions(expansion=-1)


def test_the_phrase_signal_reads_the_query_words_close_together_in_order(engine) -> None:  # type: ignore[no-untyped-def]
    """ "the LGBTQ conference": one episode says it, another has both words apart; only the
    proximity signal tells them apart (the lexical signals match both words in both)."""
    with engine.begin() as conn:
        together = make_episode(conn, "ds", ["I went to an LGBTQ conference two days ago"])
        apart = make_episode(
            conn,
            "ds",
            ["the LGBTQ parade was loud and happy", "work sent me to a sales conference"],
        )
    query = "When did Caroline go to the LGBTQ conference?"
    with engine.connect() as conn:
        rows = _rows(conn, query, RankingOptions(phrase=True))
        plain = _rows(conn, query, RankingOptions())
        from episodic.store.recall_queries import query_phrase_pairs

        pairs = query_phrase_pairs(conn, _key(conn, "ds"), query)
    a, b = str(together.episode_id), str(apart.episode_id)
    assert "phrase" not in plain[a]  # computed only with the switch
    assert len(pairs) == 3  # caroline→go, go→lgbtq, lgbtq→conference
    assert rows[a]["phrase"] == pytest.approx(1 / 3)
    assert rows[b]["phrase"] == 0.0
    # a weight on it lifts the episode that says the phrase
    weighted_options = RankingOptions(
        fusion="learned", phrase=True, weights=(*LEARNED_WEIGHTS.items(), ("phrase", 2.0))
    )
    with engine.connect() as conn:
        weighted = _rows(conn, query, weighted_options)
    assert weighted[a]["similarity"] > weighted[b]["similarity"]


def test_a_long_query_counts_its_first_phrase_pairs_only() -> None:
    """Each pair is matched against every candidate: a pasted paragraph's hundreds of
    pairs would cost a second on a large dataset (PHRASE_PAIRS)."""
    from episodic.crypto import ClearKey
    from episodic.store.query_terms import phrase_pairs
    from episodic.store.ranking_options import PHRASE_PAIRS

    key = ClearKey("ds")
    words = [f"word{i}" for i in range(PHRASE_PAIRS * 3)]
    pairs = phrase_pairs(key, words)
    assert len(pairs) == PHRASE_PAIRS
    assert pairs == phrase_pairs(key, words[: PHRASE_PAIRS + 1])  # the first ones, in order


# -- the cosine scale: an embedder's narrow band put on MiniLM's scale -------------------


class _Band:
    """Unit vectors by text: a direction every text shares (so every cosine sits high, in a
    narrow band, as e5's do) plus one of its own."""

    dimension = 384
    name = "band:384"

    def __init__(self, own: dict[str, dict[int, float]]) -> None:
        self.own = own

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dimension, dtype=np.float32)
        vec[0] = 3.0
        for axis, weight in self.own[text].items():
            vec[axis] = weight
        return vec / np.linalg.norm(vec)

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._vector(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector(text)


def test_the_cosine_scale_maps_an_embedders_points_onto_minilms() -> None:
    band = CosineScale(chance=0.8, answer=0.9)
    assert on_reference_scale(0.8, band) == pytest.approx(MINILM_SCALE.chance)
    assert on_reference_scale(0.9, band) == pytest.approx(MINILM_SCALE.answer)
    assert on_reference_scale(0.0, band) == 0.0  # clipped: far below chance
    assert on_reference_scale(0.42, None) == 0.42  # no scale: the cosine as it is
    # MiniLM is the reference (read as it is), e5 has its own, an unmeasured model none
    assert cosine_scale_for("minilm:all-MiniLM-L6-v2") is None
    assert cosine_scale_for("e5:multilingual-e5-small") == E5_SCALE
    assert cosine_scale_for("openai:text-embedding-3-small") is None
    with pytest.raises(ValueError, match="above chance"):
        CosineScale(chance=0.9, answer=0.9)


def test_a_clear_semantic_winner_in_a_narrow_band_is_not_overridden_by_recency(engine) -> None:  # type: ignore[no-untyped-def]
    """Cosines in a narrow band: read as they are, the relative semantic
    signal barely separates them and the newer episode wins on recency; on MiniLM's scale
    the one that matches clearly better comes first."""
    embedder = _Band({"alpha": {1: 1.0}, "beta": {2: 1.0}, "omega": {1: 0.9, 2: 0.3}})
    with engine.begin() as conn:
        better = make_episode(
            conn, "ds", ["alpha"], ended_at=T0 - timedelta(days=20), embedder=embedder
        )
        newer = make_episode(conn, "ds", ["beta"], ended_at=T0, embedder=embedder)
    query = "omega"  # no word in common: the cosines alone
    vector = embedder.embed_query(query)
    cosines = {
        k: float(vector @ embedder.embed_query(t)) for k, t in (("a", "alpha"), ("b", "beta"))
    }
    assert 0.9 < cosines["b"] < cosines["a"] < 1.0  # a narrow, high band
    band = CosineScale(chance=0.9, answer=0.98)
    order = {}
    with engine.connect() as conn:
        for name, scale in (("raw", None), ("scaled", band)):
            # recency weighed everywhere (no band), so that the scale alone decides
            options = replace(
                DEFAULT_RANKING,
                cosine_scale=scale,
                rerank_top=0,
                rerank_weights=(),
                recency_band=0.0,
            )
            request = replace(_request(query, options), similarity_weight=0.7, recency_weight=0.3)
            rows = domain.recall(conn, test_vault(), request, vector).rows
            order[name] = [str(r["episode_id"]) for r in rows]
    assert order["raw"][0] == str(newer.episode_id)
    assert order["scaled"][0] == str(better.episode_id)


def test_the_recency_gate_fades_across_the_band() -> None:
    assert recency_gate(0.5, 0.5, 0.25) == 1.0  # as similar as the best: all of it
    assert recency_gate(0.4375, 0.5, 0.25) == pytest.approx(0.5)  # half-way down the band
    assert recency_gate(0.375, 0.5, 0.25) == pytest.approx(0.0)  # at the band's edge: none
    assert recency_gate(0.1, 0.5, 0.25) == 0.0
    assert recency_gate(0.1, 0.5, 0.0) == 1.0  # off: the seed's sum
    assert recency_gate(0.0, 0.0, 0.1) == 1.0  # nothing similar (no query): plain recency


def test_the_recency_band_is_the_embedders_own_unless_set() -> None:
    from episodic.config import RecallSettings

    """e5's measured band; MiniLM and models nobody measured: the seed's sum (0)."""
    assert recency_band_for("e5:multilingual-e5-small-q4") == RECENCY_BANDS["e5"] > 0
    assert recency_band_for("minilm:all-MiniLM-L6-v2-int8") == 0.0
    assert recency_band_for("openai:text-embedding-3-small") == 0.0
    e5 = "e5:multilingual-e5-small-q4"
    assert domain.ranking_from(RecallSettings(), e5).recency_band == RECENCY_BANDS["e5"]
    assert domain.ranking_from(RecallSettings(ranking_recency_band=0.2), e5).recency_band == 0.2
    assert domain.ranking_from(RecallSettings(ranking_recency_band=0.0), e5).recency_band == 0.0


def test_recency_breaks_ties_only_inside_the_similarity_band(engine) -> None:  # type: ignore[no-untyped-def]
    """Two old sessions that match the query fully, one from today that shares two of its
    three words: the seed's sum lets today's overtake both (recency on the seed's day scale is
    worth more than the difference in match); with the band it comes last, and recency
    still orders the two that match alike (the newer of them first), in the statement and
    in the second look alike."""
    with engine.begin() as conn:
        older = make_episode(
            conn, "ds", ["The lighthouse keeper repainted the boat."], ended_at=T0 - timedelta(30)
        )
        newer = make_episode(
            conn, "ds", ["The lighthouse keeper repainted the boat."], ended_at=T0 - timedelta(29)
        )
        today = make_episode(
            conn, "ds", ["We walked to the lighthouse and saw a boat."], ended_at=T0
        )
    query = "Who repainted the boat at the lighthouse?"
    # 1 / (1 + days): recency weighs most; the band e5's (MiniLM's default is the sum)
    seed = replace(DEFAULT_RANKING, recency_span=0.0, recency_band=RECENCY_BANDS["e5"])
    order = {}
    with engine.connect() as conn:
        for name, options in (
            ("sum", replace(seed, recency_band=0.0)),
            ("band", seed),
            ("band, statement only", replace(seed, rerank_top=0, rerank_weights=())),
        ):
            request = replace(_request(query, options), similarity_weight=0.7, recency_weight=0.3)
            rows = domain.recall(conn, test_vault(), request, None).rows
            order[name] = [str(r["episode_id"]) for r in rows]
    ids = {
        str(e.episode_id): name
        for name, e in (("older", older), ("newer", newer), ("today", today))
    }
    assert ids[order["sum"][0]] == "today"
    assert [ids[i] for i in order["band"]] == ["newer", "older", "today"]
    assert [ids[i] for i in order["band, statement only"]] == ["newer", "older", "today"]
