"""The Summariser process against OpenAI-compatible providers over real HTTP (a fake
server speaking the wire format): outages are retried and lose nothing, malformed model
output fails clearly, and a dimension that does not fit the schema refuses to start."""

from __future__ import annotations

import pytest

from episodic.v1 import summariser_service_pb2 as pb
from episodic.v1 import summariser_service_pb2_grpc as g
from tests.providers.fake_openai import FakeOpenAI
from tests.summariser.helpers import CAR_CHAT, add, episode_row, make_thread, open_episode


@pytest.fixture
def fake():  # type: ignore[no-untyped-def]
    with FakeOpenAI(dimension=384) as server:
        yield server


def openai_env(fake: FakeOpenAI, **extra: str) -> dict[str, str]:
    return {
        "EPISODIC_LLM_PROVIDER": "openai",
        "EPISODIC_LLM_BASE_URL": fake.base_url,
        "EPISODIC_LLM_MODEL": "test-model",
        "EPISODIC_LLM_API_KEY": "sk-test",
        "EPISODIC_LLM_MAX_RETRIES": "1",
        "EPISODIC_EMBEDDING_PROVIDER": "openai",
        "EPISODIC_EMBEDDING_BASE_URL": fake.base_url,
        "EPISODIC_EMBEDDING_MODEL": "test-embed",
        "EPISODIC_RETRY_BACKOFF": "0",
        "EPISODIC_MAX_RETRIES": "2",
        **extra,
    }


row = episode_row


def test_llm_outage_is_retried_and_loses_nothing(spawn, engine, fake) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT)
    ep = open_episode(engine, thread)
    stub = g.SummariserServiceStub(spawn("summariser", env=openai_env(fake)).channel())

    for _ in range(2):  # one attempt = the call and its one HTTP retry
        fake.enqueue_chat(status=500, body={"error": {"message": "upstream down"}})
    assert stub.ProcessPending(pb.ProcessPendingRequest()).failed == 1
    failed_once = row(engine, ep["episode_id"])
    assert failed_once["status"] == "pending" and failed_once["retry_count"] == 1
    assert "500" in failed_once["error"]

    # The provider recovers (default answers): the same episode completes.
    assert stub.ProcessPending(pb.ProcessPendingRequest()).completed == 1
    done = row(engine, ep["episode_id"])
    assert done["status"] == "completed" and done["error"] is None
    assert done["summary"] == "The user discussed their plans with the agent."
    assert done["entities"] == ["project atlas"]  # normalised as stored
    chat = fake.requests_to("chat")[-1]
    body = chat.json()
    assert body["model"] == "test-model"
    assert body["response_format"]["type"] == "json_schema"
    assert chat.headers.get("authorization") == "Bearer sk-test"
    assert "Toyota Corolla Hybrid" in str(body["messages"])  # the thread was sent
    assert fake.requests_to("embeddings"), "the summary was embedded remotely"


def test_rate_limit_then_success_completes_in_one_pass(spawn, engine, fake) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT)
    ep = open_episode(engine, thread)
    stub = g.SummariserServiceStub(spawn("summariser", env=openai_env(fake)).channel())
    fake.enqueue_chat(
        status=429, headers={"Retry-After": "0"}, body={"error": {"message": "slow down"}}
    )
    assert stub.ProcessPending(pb.ProcessPendingRequest()).completed == 1
    assert row(engine, ep["episode_id"])["retry_count"] == 0


def test_malformed_model_output_fails_with_a_clear_error(spawn, engine, fake) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT)
    ep = open_episode(engine, thread)
    stub = g.SummariserServiceStub(spawn("summariser", env=openai_env(fake)).channel())
    for _ in range(20):
        fake.enqueue_chat(content="Sure! Here is your summary: the user likes cars.")
    for _ in range(3):  # max_retries = 2: the third failure is final
        stub.ProcessPending(pb.ProcessPendingRequest())
    final = row(engine, ep["episode_id"])
    assert final["status"] == "failed" and final["retry_count"] == 3
    assert "JSON" in final["error"] or "json" in final["error"]
    status = stub.GetPipelineStatus(pb.GetPipelineStatusRequest(skip_provider_checks=True))
    assert status.status_counts["failed"] == 1
    assert status.recent_errors[0].episode_id == str(ep["episode_id"])


def test_provider_health_reports_a_dead_llm(spawn, fake) -> None:  # type: ignore[no-untyped-def]
    env = openai_env(fake, EPISODIC_LLM_BASE_URL="http://127.0.0.1:9/v1")
    stub = g.SummariserServiceStub(spawn("summariser", env=env).channel())
    health = stub.CheckProviders(pb.CheckProvidersRequest(), timeout=60)
    assert not health.llm.ok and health.llm.error
    assert health.embedder.ok


def test_dimension_that_does_not_fit_the_schema_refuses_to_start(spawn, fake) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RuntimeError, match="768-dimensional vectors but the database stores 384"):
        spawn("summariser", env=openai_env(fake, EPISODIC_EMBEDDING_DIMENSION="768"))
