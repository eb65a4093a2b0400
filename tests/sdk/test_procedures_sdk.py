"""The SDK's procedural memory (issue 39), with both clients: OpenAI-format messages with
tool calls written and read back as they were, outcomes, procedures recalled, listed,
fetched and deleted."""

from __future__ import annotations

import json

import pytest

from episodic.sdk.client import InvalidArgumentError, NotFoundError, Procedure
from episodic.testing.processes import wait_until

# A chat completion's messages, as an agent framework holds them.
OPENAI_CHAT = [
    {"role": "user", "content": "Please cancel my order #W7, I ordered twice."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "get_order_details", "arguments": '{"order_id": "#W7"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_a", "content": '{"status": "pending"}'},
    {
        "role": "assistant",
        "content": "Cancelling it.",
        "tool_calls": [
            {
                "id": "call_b",
                "type": "function",
                # Arguments as a dict are sent as JSON text.
                "function": {
                    "name": "cancel_pending_order",
                    "arguments": {"order_id": "#W7", "reason": "ordered by mistake"},
                },
            }
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "call_b",
        "name": "cancel_pending_order",
        "content": '{"status": "cancelled"}',
    },
    {"role": "assistant", "content": "Done: #W7 is cancelled."},
]


@pytest.fixture
def suite(spawn, make_client):  # type: ignore[no-untyped-def]
    scheduler = spawn("scheduler", env={"EPISODIC_SCHEDULER_POLL_INTERVAL": "0.2"})
    ingest = spawn("ingest", env={"EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    spawn("summariser", env={"EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2"})
    recall = spawn("recall")
    with make_client(
        ingest=ingest.address,
        recall=recall.address,
        scheduler=scheduler.address,
        timeout=15,
    ) as client:
        yield client


def test_openai_messages_round_trip_and_teach_a_procedure(suite) -> None:  # type: ignore[no-untyped-def]
    thread = suite.create_thread("sdk_agent")
    suite.add_messages(thread.thread_id, OPENAI_CHAT)
    stored = suite.list_messages(thread.thread_id)
    back = [m.to_openai() for m in stored]
    assert back[1]["tool_calls"][0]["function"] == {
        "name": "get_order_details",
        "arguments": '{"order_id": "#W7"}',
    }
    assert back[1]["content"] is None
    assert back[2] == {
        "role": "tool",
        "content": '{"status": "pending"}',
        "tool_call_id": "call_a",
        "name": "get_order_details",
    }
    sent = json.loads(back[3]["tool_calls"][0]["function"]["arguments"])
    assert sent == {"order_id": "#W7", "reason": "ordered by mistake"}

    result = suite.record_outcome(thread.thread_id, "success", score=1.0, note="user thanked")
    assert result.changed and result.outcome == "success"
    assert not suite.record_outcome(
        thread.thread_id, "success", score=1.0, note="user thanked"
    ).changed
    suite.end_thread(thread.thread_id)

    def learned() -> list[Procedure]:
        return list(suite.list_procedures("sdk_agent"))

    [procedure] = wait_until(learned, timeout=60, message="a procedure learned")
    assert procedure.write_actions == ["cancel_pending_order"]
    # The user said the order id; the reason is the agent's words, not theirs.
    assert procedure.steps[1].arguments == {"order_id": "user", "reason": "agent"}
    assert procedure.sources[0][0] == thread.thread_id and procedure.sources[0][2] == "success"

    [fit] = suite.recall_procedures("sdk_agent", "how do I cancel a customer's order?")
    assert fit.procedure == procedure and 0 < fit.relevance <= 1
    both = suite.recall("sdk_agent", "cancel an order", include_procedures=True)
    assert both.procedures[0].procedure_id == procedure.procedure_id
    assert suite.get_procedure("sdk_agent", procedure.procedure_id) == procedure

    assert suite.delete_procedure("sdk_agent", procedure.procedure_id) == 1
    assert list(suite.list_procedures("sdk_agent")) == []
    with pytest.raises(NotFoundError):
        suite.get_procedure("sdk_agent", procedure.procedure_id)


def test_bad_tool_calls_name_the_field(suite) -> None:  # type: ignore[no-untyped-def]
    thread = suite.create_thread("sdk_agent")
    with pytest.raises(InvalidArgumentError) as err:
        suite.add_messages(
            thread.thread_id,
            [{"role": "tool", "tool_call_id": "call_never_made", "content": "{}"}],
        )
    assert err.value.field == "messages[0].tool_call_id"
    with pytest.raises(ValueError):
        suite.record_outcome(thread.thread_id, "great")
