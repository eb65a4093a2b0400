"""Speaker-aware ranking (RankingOptions.speaker): a question that names a person ("What
did Caroline research?") is matched against what *that person* said in a thread, from the
speaker-word pairs the lexical document holds (recall_index.speaker_word_tokens). On a
real PostgreSQL, with an encrypted dataset (the pairs are blind tokens)."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text

from episodic.services.recall import domain
from episodic.store import lexical_document, recall_index
from episodic.store.recall_queries import (
    DEFAULT_RANKING,
    LEARNED_WEIGHTS,
    RankingOptions,
    RecallFilters,
    speaker_pair_params,
)
from episodic.testing.keys import test_vault
from tests.recall.factory import T0, _key, make_episode

SPEAKER = RankingOptions(speaker=True, word_forms=True)


@pytest.fixture(autouse=True)
def _speaker_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """The index switch is off by default (docs/benchmarks.md "Ranking, fifth pass"): on here."""
    monkeypatch.setattr(lexical_document, "SPEAKER_WORDS", True)


def _rows(conn, query: str, options: RankingOptions, dataset: str = "ds") -> dict[str, dict]:  # type: ignore[no-untyped-def]
    request = domain.RecallQuery(
        dataset=dataset,
        query=query,
        include_episodes=True,
        limit=10,
        similarity_weight=1.0,
        recency_weight=0.0,
        filters=RecallFilters(as_of=T0),
        ranking=options,
    )
    answer = domain.recall(conn, test_vault(), request, None)
    return {str(r["episode_id"]): dict(r) for r in answer.rows}


def _two_threads(conn, dataset: str = "ds") -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """The same words in two threads; in the first Caroline says them, in the second
    Melanie does (and Caroline only answers)."""
    hers = make_episode(
        conn,
        dataset,
        ["I researched adoption agencies all week", "That sounds great"],
        names=["Caroline", "Melanie"],
    )
    not_hers = make_episode(
        conn,
        dataset,
        ["Nice to hear from you", "I researched adoption agencies all week"],
        names=["Caroline", "Melanie"],
    )
    return str(hers.episode_id), str(not_hers.episode_id)


def test_the_speaker_signal_counts_the_words_the_named_person_said(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        hers, not_hers = _two_threads(conn)
    with engine.connect() as conn:
        rows = _rows(conn, "What did Caroline research?", SPEAKER)
        plain = _rows(conn, "What did Caroline research?", RankingOptions(word_forms=True))
    assert "speaker_coverage" not in plain[hers]  # computed only with the switch
    # Caroline said "research" in the first thread; in the second only Melanie did
    assert rows[hers]["speaker_coverage"] == pytest.approx(1.0)
    assert rows[not_hers]["speaker_coverage"] == 0.0
    # the lexical signals cannot tell the two apart: both threads hold both words
    assert rows[hers]["coverage"] == rows[not_hers]["coverage"] == pytest.approx(1.0)


def test_a_question_that_names_no_speaker_gets_nothing_from_the_signal(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        hers, not_hers = _two_threads(conn)
    with engine.connect() as conn:
        rows = _rows(conn, "Who researched adoption agencies?", SPEAKER)
    assert rows[hers]["speaker_coverage"] == rows[not_hers]["speaker_coverage"] == 0.0


def test_the_other_speaker_is_matched_when_the_question_names_her(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        hers, not_hers = _two_threads(conn)
    with engine.connect() as conn:
        rows = _rows(conn, "What did Melanie research?", SPEAKER)
    assert rows[not_hers]["speaker_coverage"] == pytest.approx(1.0)
    assert rows[hers]["speaker_coverage"] == 0.0


def test_a_word_form_counts_for_the_word_the_person_said(engine) -> None:  # type: ignore[no-untyped-def]
    """ "What did Caroline buy?" and Caroline said "bought" (word_forms' irregular forms)."""
    with engine.begin() as conn:
        bought = make_episode(
            conn, "ds", ["I bought a new guitar", "Lovely"], names=["Caroline", "Melanie"]
        )
        other = make_episode(
            conn, "ds", ["Hi", "I bought a new guitar"], names=["Caroline", "Melanie"]
        )
    with engine.connect() as conn:
        rows = _rows(conn, "What did Caroline buy?", SPEAKER)
    assert rows[str(bought.episode_id)]["speaker_coverage"] == pytest.approx(1.0)
    assert rows[str(other.episode_id)]["speaker_coverage"] == 0.0


def test_a_weight_on_the_signal_ranks_the_named_speakers_thread_first(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        hers, not_hers = _two_threads(conn)
    weighted = RankingOptions(
        fusion="learned",
        speaker=True,
        word_forms=True,
        weights=(*LEARNED_WEIGHTS.items(), ("speaker_coverage", 1.0)),
    )
    with engine.connect() as conn:
        rows = _rows(conn, "What did Caroline research?", weighted)
    assert rows[hers]["similarity"] > rows[not_hers]["similarity"]


def test_the_pairs_are_blind_tokens_outside_bm25s_length(engine) -> None:  # type: ignore[no-untyped-def]
    """The pairs join the document as the key's tokens (no word in the clear), without
    positions: the document's length (BM25's) is the one without them."""
    with engine.begin() as conn:
        hers, _ = _two_threads(conn)
        key = _key(conn, "ds")
        source = recall_index.load_index_input(conn, test_vault(), hers)
        pairs = recall_index.speaker_word_tokens(conn, key, source)
        assert key.token(recall_index.speaker_pair("carolin", "research")) in pairs
        assert key.token(recall_index.speaker_pair("melani", "research")) not in pairs
        assert not any(" " in p for p in pairs)  # blinded: no "carolin research"
        _, length = recall_index.blind_vectors(
            conn, key, [("\n".join(m for _, m in source.messages), source.summary)]
        )[0]
        stored = conn.execute(
            text("SELECT search_length FROM episodes WHERE dataset = 'ds' AND episode_id = :e"),
            {"e": uuid.UUID(hers)},
        ).scalar_one()
    assert stored == length


def test_messages_without_a_speaker_add_no_pairs(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        made = make_episode(conn, "ds", ["I researched adoption agencies"])
        source = recall_index.load_index_input(conn, test_vault(), made.episode_id)
        assert recall_index.speaker_word_tokens(conn, _key(conn, "ds"), source) == []


def test_without_the_index_switch_no_pairs_are_written(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(lexical_document, "SPEAKER_WORDS", False)
    with engine.begin() as conn:
        hers, not_hers = _two_threads(conn)
        source = recall_index.load_index_input(conn, test_vault(), hers)
        assert recall_index.speaker_word_tokens(conn, _key(conn, "ds"), source) == []
    with engine.connect() as conn:
        rows = _rows(conn, "What did Caroline research?", SPEAKER)
    assert rows[hers]["speaker_coverage"] == rows[not_hers]["speaker_coverage"] == 0.0


def test_the_query_pairs_take_each_word_as_a_possible_name() -> None:
    class Clear:
        def token(self, lexeme: str) -> str:
            return lexeme

    params = speaker_pair_params(Clear(), ["carolin", "research"], [("bought", "buy")])  # type: ignore[arg-type]
    pairs = set(params["speaker_pairs"])  # type: ignore[arg-type]
    assert {"'carolin research'", "'research carolin'"} == pairs
    assert params["speaker_word_count"] == 1
    with_form = speaker_pair_params(Clear(), ["buy", "carolin"], [("bought", "buy")])  # type: ignore[arg-type]
    assert "'carolin bought'" in with_form["speaker_pairs"]  # type: ignore[operator]
    # the form counts for the word it stands for
    index = with_form["speaker_pairs"].index("'carolin bought'")  # type: ignore[attr-defined]
    assert with_form["speaker_words"][index] == "buy"  # type: ignore[index]


def test_events_rank_under_a_weight_for_a_signal_they_do_not_have(engine) -> None:  # type: ignore[no-untyped-def]
    """Events compete with episodes under the same options; an event has no speakers, so
    the speaker weight counts 0 for it (in the fit and the ideal alike) instead of failing."""
    from episodic.store.events import _rank_sql

    weighted = RankingOptions(
        fusion="learned",
        speaker=True,
        weights=(*LEARNED_WEIGHTS.items(), ("speaker_coverage", 1.0)),
    )
    assert "speaker_coverage" not in _rank_sql(True, True, weighted)
    assert _rank_sql(True, True, weighted) == _rank_sql(
        True, True, RankingOptions(fusion="learned", weights=tuple(LEARNED_WEIGHTS.items()))
    )
    assert DEFAULT_RANKING.fusion == "learned"
