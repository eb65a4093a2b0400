"""The LLM words a procedure (issue 39): against the fake OpenAI-compatible server. The
model may reword the goal and purposes, never change the tools."""

from __future__ import annotations

import pytest

from episodic.errors import ProviderError
from episodic.procedural import WindowTurn, extract
from episodic.providers import RetryPolicy
from episodic.providers.procedure_writer import OpenAIProcedureWriter
from episodic.tool_calls import ToolCall
from tests.providers.fake_openai import FakeOpenAI

TURNS = [
    WindowTurn(1, "user", "Cancel order #W1 for me, I'm Omar, it was a mistake"),
    WindowTurn(2, "assistant", "", (ToolCall("a", "get_order_details", '{"order_id": "#W1"}'),)),
    WindowTurn(3, "tool", '{"status": "pending"}', tool_call_id="a", name="get_order_details"),
    WindowTurn(4, "assistant", "", (ToolCall("b", "cancel_pending_order", '{"order_id": "#W1"}'),)),
]


def _writer(fake: FakeOpenAI, policy: RetryPolicy) -> OpenAIProcedureWriter:
    return OpenAIProcedureWriter(base_url=fake.base_url, model="gpt-test", retry=policy)


def test_the_model_words_the_goal_and_purposes_and_keeps_the_tools(
    fake: FakeOpenAI, policy: RetryPolicy
) -> None:
    candidate = extract(TURNS, episode_id="e", thread_id="t")
    assert candidate is not None
    fake.enqueue_chat(
        result={
            "goal": "A customer wants to cancel an order that has not shipped yet.",
            "steps": [
                {"tool": "get_order_details", "purpose": "check the order is still pending"},
                {"tool": "cancel_pending_order", "purpose": "cancel it"},
            ],
        }
    )
    written = _writer(fake, policy).write(TURNS, candidate)
    assert written.goal == "A customer wants to cancel an order that has not shipped yet."
    assert [s.purpose for s in written.steps] == ["check the order is still pending", "cancel it"]
    assert [s.tool for s in written.steps] == [s.tool for s in candidate.steps]
    assert [s.arguments for s in written.steps] == [s.arguments for s in candidate.steps]
    assert written.signature == candidate.signature and written.extractor == "llm"
    body = fake.requests_to("chat")[0].json()
    assert body["response_format"]["json_schema"]["strict"] is True
    prompt = body["messages"][1]["content"]
    assert (
        "1. get_order_details" in prompt and "2. cancel_pending_order (changes something)" in prompt
    )


@pytest.mark.parametrize(
    "answer",
    [
        {"goal": "x", "steps": [{"tool": "delete_everything", "purpose": "?"}]},  # other tools
        {"goal": "x", "steps": []},  # fewer
        {"steps": []},  # no goal
    ],
)
def test_an_answer_that_changes_the_procedure_is_refused(
    fake: FakeOpenAI, policy: RetryPolicy, answer: dict
) -> None:  # type: ignore[type-arg]
    candidate = extract(TURNS, episode_id="e", thread_id="t")
    assert candidate is not None
    fake.enqueue_chat(result=answer)
    with pytest.raises(ProviderError):
        _writer(fake, policy).write(TURNS, candidate)


def test_the_call_is_a_chat_span_without_content(
    fake: FakeOpenAI, policy: RetryPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model call is a GenAI `chat` span (issue 47), failed when the answer is refused,
    and carries none of the conversation."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from episodic import genai

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(genai, "tracer", provider.get_tracer("episodic.genai"))
    candidate = extract(TURNS, episode_id="e", thread_id="t")
    assert candidate is not None
    fake.enqueue_chat(
        result={"goal": "x", "steps": [{"tool": "delete_everything", "purpose": "?"}]}
    )
    with pytest.raises(ProviderError):
        _writer(fake, policy).write(TURNS, candidate)
    [span] = exporter.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert span.name == "chat gpt-test"
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["error.type"] == "invalid_response"
    assert not any("Omar" in str(v) or "#W1" in str(v) for v in attributes.values())
