"""Reranking Recall's top candidates with a reranking endpoint (the Jina/Cohere ``/rerank``
format), against the fake provider server over real HTTP."""

from __future__ import annotations

from datetime import timedelta

import pytest

from episodic.errors import ProviderError
from episodic.providers import RetryPolicy
from episodic.providers.rerank import HttpReranker
from episodic.v1 import recall_service_pb2 as pb
from episodic.v1 import recall_service_pb2_grpc as pb_grpc
from tests.providers.fake_openai import FakeOpenAI, FakeResponse, rerank_answer
from tests.recall.factory import T0, make_episode

EPISODES = [pb.RECALL_INCLUDE_EPISODES]


def test_scores_come_back_in_the_documents_order() -> None:
    with FakeOpenAI() as fake:
        reranker = HttpReranker(base_url=fake.base_url, model="bge-reranker")
        scores = reranker.scores("car price", ["a garden", "the car price is $29k", "car"])
        assert scores[1] > scores[0] and scores[2] > scores[0]
        sent = fake.requests_to("rerank")[0].json()
        assert sent["model"] == "bge-reranker" and sent["query"] == "car price"
        assert len(sent["documents"]) == 3 and sent["top_n"] == 3


@pytest.mark.parametrize(
    "body",
    [
        {"results": [{"index": 0, "relevance_score": 1.0}]},  # one of two documents scored
        {"results": [{"index": 5, "relevance_score": 1.0}, {"index": 0, "relevance_score": 0}]},
        {"data": []},
        {"results": [{"index": 0, "relevance_score": "high"}, {"index": 1, "relevance_score": 0}]},
    ],
)
def test_a_malformed_answer_is_a_provider_error(body) -> None:  # type: ignore[no-untyped-def]
    with FakeOpenAI() as fake:
        fake.enqueue("rerank", FakeResponse(body=body))
        reranker = HttpReranker(base_url=fake.base_url, model="m", retry=RetryPolicy(max_retries=0))
        with pytest.raises(ProviderError):
            reranker.scores("q", ["a", "b"])


@pytest.fixture
def fake():  # type: ignore[no-untyped-def]
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def recall(spawn, fake):  # type: ignore[no-untyped-def]
    service = spawn("recall", {"EPISODIC_RERANK_BASE_URL": fake.base_url})
    with service.channel() as channel:
        yield pb_grpc.RecallServiceStub(channel)


def _one(recall, query: str):  # type: ignore[no-untyped-def]
    return recall.Recall(
        pb.RecallRequest(dataset="ranked", query=query, include=EPISODES, context_episodes=1),
        timeout=30,
    ).episodes.episodes


def test_the_reranker_reorders_the_top_candidates(recall, engine, fake) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        for i, words in enumerate(
            ["car price budget", "car price", "car insurance quote", "garden roses"]
        ):
            make_episode(conn, "ranked", [words], ended_at=T0 - timedelta(days=i))
    # The reranker puts Recall's third candidate first.
    fake.enqueue(
        "rerank",
        FakeResponse(body=rerank_answer([(2, 0.97), (0, 0.4), (1, 0.3), (3, 0.0)])),
    )
    (top,) = _one(recall, "car price")
    sent = fake.requests_to("rerank")[-1].json()
    # It saw more candidates than the one asked for, in Recall's order, as summaries.
    assert sent["query"] == "car price" and len(sent["documents"]) == 4
    assert top.episode.summary == sent["documents"][2]
    assert top.episode.summary != sent["documents"][0]


def test_a_failing_reranker_leaves_recalls_own_order(recall, engine, fake) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        for i, words in enumerate(["car price", "car insurance", "garden roses"]):
            make_episode(conn, "ranked", [words], ended_at=T0 - timedelta(days=i))
    for _ in range(2):  # the first try and its one retry
        fake.enqueue("rerank", FakeResponse(status=503))
    (top,) = _one(recall, "car price")
    sent = fake.requests_to("rerank")[-1].json()
    assert top.episode.summary == sent["documents"][0]


def test_a_recall_without_a_query_is_not_reranked(recall, engine, fake) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        make_episode(conn, "ranked", ["car price"])
        make_episode(conn, "ranked", ["garden roses"], ended_at=T0 - timedelta(days=1))
    recall.Recall(pb.RecallRequest(dataset="ranked", include=EPISODES), timeout=30)
    assert fake.requests_to("rerank") == []
