"""A second multilingual model's opinion of the best episodes of a dataset in another
language (providers/second_opinion.py, services/recall/domain.second_opinion, issue 40):
the order it gives, the model itself, and Recall asking it only where the dataset is in
the multilingual model."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from episodic.providers.second_opinion import SecondOpinion
from episodic.services.recall import domain
from episodic.v1 import recall_service_pb2 as pb
from episodic.v1 import recall_service_pb2_grpc as pb_grpc
from tests.recall.factory import T0, make_episode


def _row(name: str, cosine: float, semantic: float) -> dict[str, Any]:
    """An episode's row as the ranking answers it: its raw cosine and its ``semantic``
    signal (on MiniLM's scale, over the candidates' best)."""
    return {"summary": name, "key_learnings": [], "cosine": cosine, "semantic": semantic}


def _event(name: str, semantic: float) -> dict[str, Any]:
    """An event's row: a ``semantic`` signal, no ``cosine``."""
    return {"summary": name, "key_learnings": [], "semantic": semantic}


def test_the_best_episodes_are_put_in_order_of_both_cosines_and_the_rest_stay() -> None:
    """Within the top, e5's cosine plus the weight of the second model's decides — the raw
    cosine, not the ranking's stretched ``semantic`` signal, which would put "a" before
    "c"; below it, and rows without a cosine (events), keep their places; equal scores
    keep the order."""
    rows = [
        _row("a", 0.80, 1.00),
        _event("event", 0.90),
        _row("b", 0.79, 0.93),
        _row("c", 0.78, 0.86),
        _row("d", 0.95, 1.00),  # below the top: not looked at
    ]
    second = {"a": 0.10, "b": 0.60, "c": 0.30}
    asked: list[list[str]] = []

    def cosines(texts: list[str]) -> list[float]:
        asked.append(texts)
        return [second[t] for t in texts]

    out = domain.second_opinion(rows, cosines, top=4, weight=0.2)
    # b .8 × .79 + .2 × .60 = .752, c .684, a .660 (on ``semantic``: b .864, a .820, c .748)
    assert [r["summary"] for r in out] == ["b", "event", "c", "a", "d"]
    assert asked == [["a", "b", "c"]]
    # No weight: e5's own cosine, which is the ranking's order here.
    same = domain.second_opinion(rows, cosines, top=4, weight=0.0)
    assert [r["summary"] for r in same] == ["a", "event", "b", "c", "d"]
    # Fewer than two episodes in the top: nothing to order, nothing asked.
    asked.clear()
    assert domain.second_opinion(rows[:2], cosines, top=4, weight=0.2) == rows[:2]
    assert asked == []


def test_the_second_model_finds_a_paraphrase_in_another_language_closer() -> None:
    """The packaged model (no download) puts a French question nearer the session it
    paraphrases than a session of the same user on another matter, and gives the same
    cosines again from its cache."""
    opinion = SecondOpinion()
    question = "Quel logement est-ce que je comptais louer ?"
    texts = [
        "Je cherche un appartement de deux pièces près de la gare, loyer maximum 900 euros.",
        "Mon chat vomit depuis deux jours, le vétérinaire veut faire une prise de sang.",
    ]
    first = opinion.cosines(question, texts)
    assert first[0] > first[1]
    assert opinion.cosines(question, texts) == pytest.approx(first)
    assert opinion.cosines(question, []) == []
    # A cache smaller than a call: the call still gets every text's cosine.
    small = SecondOpinion(cache_size=1)
    assert small.cosines(question, texts) == pytest.approx(first, abs=1e-6)
    assert small.cosines(question, texts[::-1]) == pytest.approx(first[::-1], abs=1e-6)
    # The query's vector computed beforehand (Recall: while it ranks) gives the same cosines.
    computed = opinion.query_vector(question)
    assert float(np.linalg.norm(computed)) == pytest.approx(1.0, abs=1e-5)
    assert opinion.cosines(question, texts, computed) == pytest.approx(first, abs=1e-6)


def test_recall_asks_the_second_model_only_for_a_dataset_in_the_multilingual_model(  # type: ignore[no-untyped-def]
    spawn, engine
) -> None:
    """Two episodes of a French dataset in e5 with the same vector (a tie in e5's cosine),
    the newer one on another matter: the ranking puts it first (recency), and the second
    opinion puts the one the question paraphrases first. Off (0), or in the store's model,
    the ranking's order stands."""
    from episodic.providers import E5Embedder

    e5 = E5Embedder()
    question = "Quel logement est-ce que je comptais louer ?"
    tie = e5.embed(["Une conversation avec l'assistant."])[0]
    with engine.begin() as conn:
        for dataset in ("fr_e5", "fr_store"):
            for summary, hours in (
                ("Je cherche un appartement de deux pièces près de la gare, 900 euros.", 48),
                ("Mon chat vomit depuis deux jours, le vétérinaire veut une prise de sang.", 1),
            ):
                made = make_episode(
                    conn,
                    dataset,
                    [summary],
                    summary=summary,
                    ended_at=T0 - timedelta(hours=hours),
                    index=False,
                )
                conn.execute(
                    text("UPDATE episodes SET embedding = :v WHERE episode_id = :e"),
                    {"v": tie, "e": made.episode_id},
                )
            conn.execute(
                text("UPDATE datasets SET text_search_config = 'french' WHERE dataset = :d"),
                {"d": dataset},
            )
        conn.execute(
            text("UPDATE datasets SET embedding_model = :m WHERE dataset = 'fr_e5'"),
            {"m": e5.name},
        )

    def first(service: Any, dataset: str) -> str:
        with service.channel() as channel:
            answer = pb_grpc.RecallServiceStub(channel).Recall(
                pb.RecallRequest(
                    dataset=dataset, query=question, include=[pb.RECALL_INCLUDE_EPISODES]
                ),
                timeout=60,
            )
        return answer.episodes.episodes[0].episode.summary

    default = spawn("recall", env={"EPISODIC_EMBEDDING_PROVIDER": "minilm"})
    off = spawn(
        "recall",
        env={"EPISODIC_EMBEDDING_PROVIDER": "minilm", "EPISODIC_RANKING_SECOND_OPINION": "0"},
    )
    assert first(off, "fr_e5").startswith("Mon chat")
    assert first(default, "fr_e5").startswith("Je cherche")
    assert first(default, "fr_store").startswith("Mon chat")
