"""OpenAIChatSummariser against the fake OpenAI-compatible server."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from episodic.config import LLMSettings
from episodic.errors import ProviderError
from episodic.providers import (
    ChatMessage,
    ExtractiveSummariser,
    HashingEmbedder,
    OpenAIChatSummariser,
    RetryPolicy,
    Summariser,
    SummaryRequest,
    make_summariser,
)
from tests.providers.fake_openai import FakeOpenAI

T0 = datetime(2026, 8, 16, 9, 2, 11, tzinfo=UTC)

GOOD = {
    "summary": "The user is choosing a compact family car under $30k.",
    "key_learnings": ["user wants a family car under $30k", "user finds SUVs too big"],
    "entities": ["Toyota Corolla Hybrid", "  toyota  corolla hybrid "],
    "event_type": "decision",
    "actor": "user",
}


def _request(n: int = 6, window_start: int = 1, **kwargs: Any) -> SummaryRequest:
    messages = [
        ChatMessage(i, "user" if i % 2 else "assistant", f"message {i}", T0 + timedelta(minutes=i))
        for i in range(1, n + 1)
    ]
    return SummaryRequest(messages, window_start, **kwargs)


def _summariser(fake: FakeOpenAI, policy: RetryPolicy, **kwargs: Any) -> OpenAIChatSummariser:
    return OpenAIChatSummariser(base_url=fake.base_url, model="gpt-test", retry=policy, **kwargs)


def test_good_json_gives_a_result(fake: FakeOpenAI, policy: RetryPolicy) -> None:
    fake.enqueue_chat(result=GOOD)
    summariser = _summariser(fake, policy)
    assert isinstance(summariser, Summariser)
    result = summariser.summarise(_request())
    assert result.summary == GOOD["summary"]
    assert result.key_learnings == GOOD["key_learnings"]
    assert result.entities == ["toyota corolla hybrid"]  # normalised and de-duplicated
    assert (result.event_type, result.actor) == ("decision", "user")


def test_request_carries_schema_model_and_key(fake: FakeOpenAI, policy: RetryPolicy) -> None:
    _summariser(fake, policy, api_key="sk-secret").summarise(_request(thread_label="cars"))
    (request,) = fake.requests_to("chat")
    body = request.json()
    assert request.headers["authorization"] == "Bearer sk-secret"
    assert body["model"] == "gpt-test"
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "episode_summary"
    assert fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert set(schema["required"]) == {
        "summary",
        "key_learnings",
        "entities",
        "event_type",
        "actor",
    }
    assert schema["additionalProperties"] is False
    assert schema["properties"]["event_type"]["enum"] == [
        "decision",
        "tool_call",
        "feedback",
        "milestone",
        "conversation",
    ]
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user"]
    prompt = body["messages"][1]["content"]
    assert "Thread: cars" in prompt and "message 6" in prompt


def test_no_key_no_authorization_header(fake: FakeOpenAI, policy: RetryPolicy) -> None:
    _summariser(fake, policy).summarise(_request())
    assert "authorization" not in fake.requests_to("chat")[0].headers


def test_json_in_markdown_fences_is_accepted(fake: FakeOpenAI, policy: RetryPolicy) -> None:
    fake.enqueue_chat("```json\n" + json.dumps(GOOD) + "\n```")
    assert _summariser(fake, policy).summarise(_request()).summary == GOOD["summary"]


def test_malformed_json_is_a_clear_error_after_one_retry(
    fake: FakeOpenAI, policy: RetryPolicy
) -> None:
    fake.enqueue_chat("Sure! Here is the summary: the user likes cars")
    fake.enqueue_chat("{not json")
    with pytest.raises(ProviderError) as excinfo:
        _summariser(fake, policy).summarise(_request())
    message = str(excinfo.value)
    # Says what is wrong, but never quotes the answer: it is made of the user's words.
    assert "not JSON" in message and "at character 1 of 9" in message
    assert "{not json" not in message and "likes cars" not in message
    assert len(fake.requests_to("chat")) == 2


def test_one_malformed_answer_then_a_good_one_succeeds(
    fake: FakeOpenAI, policy: RetryPolicy
) -> None:
    fake.enqueue_chat("oops")
    fake.enqueue_chat(result=GOOD)
    assert _summariser(fake, policy).summarise(_request()).event_type == "decision"


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ({**GOOD, "event_type": "party"}, "event_type"),
        ({**GOOD, "key_learnings": "just one string"}, "key_learnings"),
        ({k: v for k, v in GOOD.items() if k != "summary"}, "summary"),
        ({**GOOD, "summary": ""}, "summary"),
        ({**GOOD, "entities": [1, 2]}, "entities"),
        ([GOOD], "(root)"),
    ],
)
def test_schema_invalid_json_is_a_provider_error(
    fake: FakeOpenAI, policy: RetryPolicy, bad: object, needle: str
) -> None:
    for _ in range(2):
        fake.enqueue_chat(json.dumps(bad))
    with pytest.raises(ProviderError, match="does not match the episode schema") as excinfo:
        _summariser(fake, policy).summarise(_request())
    assert needle in str(excinfo.value)


def test_refusal_and_truncation_are_errors(fake: FakeOpenAI, policy: RetryPolicy) -> None:
    fake.enqueue_chat(body={"choices": [{"message": {"content": None, "refusal": "no"}}]})
    with pytest.raises(ProviderError, match="refused"):
        _summariser(fake, policy).summarise(_request())
    for _ in range(2):
        fake.enqueue_chat('{"summary": "cut', finish_reason="length")
    with pytest.raises(ProviderError, match="finish_reason=length"):
        _summariser(fake, policy).summarise(_request())


def test_429_then_200_succeeds_after_retry(
    fake: FakeOpenAI, policy: RetryPolicy, waits: list[float]
) -> None:
    fake.enqueue_chat(status=429, headers={"Retry-After": "1"})
    fake.enqueue_chat(result=GOOD)
    result = _summariser(fake, policy).summarise(_request())
    assert result.summary == GOOD["summary"]
    assert len(fake.requests_to("chat")) == 2
    assert waits == [1.0]


def test_500s_give_up_after_bounded_retries(
    fake: FakeOpenAI, policy: RetryPolicy, waits: list[float]
) -> None:
    for _ in range(10):
        fake.enqueue_chat(status=500, body={"error": {"message": "upstream exploded"}})
    with pytest.raises(ProviderError, match=r"HTTP 500 4 time.*upstream exploded") as excinfo:
        _summariser(fake, policy).summarise(_request())
    assert excinfo.value.metadata["status"] == "500"
    assert len(fake.requests_to("chat")) == 4  # 1 attempt + max_retries (3)
    assert len(waits) == 3
    assert all(0 < w <= 0.004 for w in waits)


def test_timeout_is_retried_then_reported(fake: FakeOpenAI, waits: list[float]) -> None:
    # "hold" answers never come back (until the fake stops): the client's timeout fires.
    for _ in range(2):
        fake.enqueue_chat(hold=True)
    summariser = OpenAIChatSummariser(
        base_url=fake.base_url,
        model="m",
        timeout=0.2,
        retry=RetryPolicy(max_retries=1, backoff_base=0.001, sleep=waits.append),
    )
    with pytest.raises(ProviderError, match="ReadTimeout"):
        summariser.summarise(_request())
    assert len(waits) == 1


def test_input_budget_sends_previous_summary_and_newest_messages(
    fake: FakeOpenAI, policy: RetryPolicy
) -> None:
    messages = [
        ChatMessage(i, "user", f"message {i:03d} " + "x" * 180, T0 + timedelta(minutes=i))
        for i in range(1, 101)
    ]
    request = SummaryRequest(messages, 91, previous_summary="PREVIOUS: the user likes cars.")
    summariser = _summariser(fake, policy, max_input_chars=4000)
    summariser.summarise(request)
    prompt = fake.requests_to("chat")[0].json()["messages"][1]["content"]
    assert "PREVIOUS: the user likes cars." in prompt
    assert "too long to send whole" in prompt
    assert "message 100" in prompt and "message 091" in prompt  # the whole window
    assert "message 001" not in prompt  # the oldest are dropped
    assert len(prompt) < 4000 + 500


def test_input_within_budget_sends_the_whole_thread(fake: FakeOpenAI, policy: RetryPolicy) -> None:
    request = _request(n=10, window_start=7, previous_summary="PREVIOUS")
    prompt = _summariser(fake, policy).build_prompt(request)
    assert "message 1\n" in prompt and "message 10" in prompt
    assert "PREVIOUS" not in prompt  # the full transcript makes it redundant
    assert prompt.index("message 6") < prompt.index("NEW messages") < prompt.index("message 7")


def test_check_detects_a_rejected_key(policy: RetryPolicy) -> None:
    with FakeOpenAI(require_api_key="right") as fake:
        _summariser(fake, policy, api_key="right").check()
        with pytest.raises(ProviderError, match="rejected the API key"):
            _summariser(fake, policy, api_key="wrong").check()


def test_make_summariser(fake: FakeOpenAI) -> None:
    extractive = make_summariser(LLMSettings(), HashingEmbedder())
    assert isinstance(extractive, ExtractiveSummariser)
    settings = LLMSettings(llm_provider="openai", llm_base_url=fake.base_url, llm_model="llama")
    openai = make_summariser(settings, HashingEmbedder())
    assert isinstance(openai, OpenAIChatSummariser)
    assert openai.summarise(_request()).summary  # the fake's default episode
    assert fake.requests_to("chat")[0].json()["model"] == "llama"


def test_request_rejects_an_empty_window() -> None:
    with pytest.raises(ValueError, match="window cannot be empty"):
        _request(n=3, window_start=4)


def test_plain_tuples_are_accepted() -> None:
    request = SummaryRequest([(2, "user", "b", T0), (1, "user", "a", T0)], 2)
    assert [m.sequence for m in request.rows] == [1, 2]
    assert [m.content for m in request.window] == ["b"]
