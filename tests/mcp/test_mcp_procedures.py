"""Procedural memory over MCP (issue 39), as a host sees it: an agent saves its tool calls
with `remember`, says how the conversation turned out with `record_outcome`, and before the
next task asks `recall_procedures` how it was done before — against real services."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import anyio
import jsonschema
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

DEADLINE = 90.0
DATASET = "mcp_agent"


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def _services(spawn) -> dict[str, str]:  # type: ignore[no-untyped-def]
    scheduler = spawn("scheduler", env={"EPISODIC_SCHEDULER_POLL_INTERVAL": "0.2"})
    ingest = spawn("ingest", env={"EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    spawn("summariser", env={"EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2"})
    recall = spawn("recall")
    return {
        "EPISODIC_INGEST_ADDRESS": ingest.address,
        "EPISODIC_RECALL_ADDRESS": recall.address,
        "EPISODIC_SCHEDULER_ADDRESS": scheduler.address,
    }


# One task done with tools, as a harness holds it: OpenAI's nested form with arguments as
# JSON text, and the flat form a model writes with arguments as an object.
CONVERSATION = [
    {"role": "user", "content": "Please cancel my order #W7, I ordered it twice."},
    {
        "role": "assistant",
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
                "name": "cancel_pending_order",
                "arguments": {"order_id": "#W7", "reason": "ordered by mistake"},
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


def test_an_agent_learns_a_procedure_and_recalls_it_before_acting(spawn) -> None:  # type: ignore[no-untyped-def]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "episodic.cli", "mcp", "--dataset", DATASET],
        env={**os.environ, **_services(spawn)},
    )

    async def session_run() -> None:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            assert "recall_procedures" in (init.instructions or "")
            tools = {t.name: t for t in (await session.list_tools()).tools}

            async def call(name: str, **arguments: Any) -> Any:
                result = await session.call_tool(name, arguments)
                assert not result.is_error, f"{name}: {_text(result)}"
                # What the server sends matches what it publishes.
                jsonschema.validate(result.structured_content, tools[name].output_schema)
                return result

            async def refused(name: str, **arguments: Any) -> str:
                result = await session.call_tool(name, arguments)
                assert result.is_error, f"{name} was not refused: {_text(result)}"
                return _text(result)

            assert tools["recall_procedures"].annotations.read_only_hint is True
            assert tools["record_outcome"].annotations.idempotent_hint is True
            empty = await call("recall_procedures", task="cancel an order")
            assert empty.structured_content["procedures"] == []
            assert "No procedures in dataset mcp_agent yet" in _text(empty)

            made = await call("remember", label="cancel-w7", messages=CONVERSATION)
            thread_id = made.structured_content["thread_id"]
            assert made.structured_content["sequences"] == [1, 2, 3, 4, 5, 6]

            # Read back: the calls with their arguments, and which call each result answers.
            loaded = await call("load_thread", thread_id=thread_id)
            messages = loaded.structured_content["messages"]
            assert messages[1]["tool_calls"] == [
                {"id": "call_a", "name": "get_order_details", "arguments": '{"order_id": "#W7"}'}
            ]
            assert json.loads(messages[3]["tool_calls"][0]["arguments"]) == {
                "order_id": "#W7",
                "reason": "ordered by mistake",
            }
            assert messages[2]["tool_call_id"] == "call_a"
            assert messages[2]["name"] == "get_order_details"  # the answered call's tool
            text = _text(loaded)
            assert '[called get_order_details(order_id="#W7") id call_a]' in text
            assert 'tool get_order_details, answers call_a: {"status": "pending"}' in text
            assert "assistant: Cancelling it. [called cancel_pending_order(" in text

            outcome = await call(
                "record_outcome", thread_id=thread_id, outcome="success", score=1, note="thanked"
            )
            assert outcome.structured_content["changed"] is True
            assert outcome.structured_content["outcome"] == "success"
            assert outcome.structured_content["episode_id"] is None
            assert f"Recorded success for thread {thread_id} (score 1)." in _text(outcome)
            again = await call(
                "record_outcome", thread_id=thread_id, outcome="success", score=1, note="thanked"
            )
            assert again.structured_content["changed"] is False
            assert "unchanged" in _text(again)
            await call("end_thread", thread_id=thread_id)

            deadline = time.monotonic() + DEADLINE
            while True:
                found = await call("recall_procedures", task="a customer wants an order cancelled")
                if found.structured_content["procedures"]:
                    break
                assert time.monotonic() < deadline, f"no procedure: {_text(found)}"
                await anyio.sleep(0.3)
            [procedure] = found.structured_content["procedures"]
            assert procedure["write_actions"] == ["cancel_pending_order"]
            assert [s["tool"] for s in procedure["steps"]] == [
                "get_order_details",
                "cancel_pending_order",
            ]
            assert procedure["steps"][1]["arguments"] == {"order_id": "user", "reason": "agent"}
            assert (procedure["success_count"], procedure["failure_count"]) == (1, 0)
            assert 0 < procedure["relevance"] <= 1
            assert procedure["sources"] == [
                {
                    "thread_id": thread_id,
                    "episode_id": procedure["sources"][0]["episode_id"],
                    "outcome": "success",
                }
            ]
            text = _text(found)
            assert text.startswith("1 procedure(s) of dataset mcp_agent, fit to this task first")
            assert "How this was done before:" in text
            assert "1. Goal: Please cancel my order #W7, I ordered it twice." in text
            assert "2. cancel_pending_order (changes something)" in text
            assert "[order_id from the user, reason chosen by the agent]" in text
            assert "Worked once (relevance " in text

            # A failure of the same actions counts against it.
            failed = await call(
                "remember",
                messages=[
                    {**m, "content": m.get("content", "").replace("#W7", "#W8")}
                    | (
                        {
                            "tool_calls": [
                                {**c, "id": c["id"] + "x"} for c in m.get("tool_calls", [])
                            ]
                        }
                        if m.get("tool_calls")
                        else {}
                    )
                    | ({"tool_call_id": m["tool_call_id"] + "x"} if "tool_call_id" in m else {})
                    for m in CONVERSATION
                ],
            )
            other = failed.structured_content["thread_id"]
            await call("record_outcome", thread_id=other, outcome="failure", note="wrong order")
            await call("end_thread", thread_id=other)
            deadline = time.monotonic() + DEADLINE
            while True:
                found = await call("recall_procedures")  # no task: most supported first
                counted = found.structured_content["procedures"]
                if counted and counted[0]["failure_count"] == 1:
                    break
                assert time.monotonic() < deadline, f"failure not counted: {_text(found)}"
                await anyio.sleep(0.3)
            assert "most supported first" in _text(found)
            assert "Worked once, failed once" in _text(found)

            # Mistakes are named, for the model to correct.
            assert "outcome" in await refused("record_outcome", thread_id=other, outcome="great")
            assert "score" in await refused(
                "record_outcome", thread_id=other, outcome="success", score=2
            )
            missing = await refused(
                "record_outcome",
                thread_id="00000000-0000-4000-8000-000000000000",
                outcome="success",
            )
            assert "not found" in missing
            unanswered = await refused(
                "remember",
                thread_id=other,
                messages=[{"role": "tool", "tool_call_id": "never_made", "content": "{}"}],
            )
            assert "messages[0].tool_call_id" in unanswered
            silent = await refused("remember", messages=[{"role": "assistant"}])
            assert "needs content" in silent
            bad_json = await refused(
                "remember",
                messages=[
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "c1", "name": "get_x", "arguments": "{nope"}],
                    }
                ],
            )
            assert "messages[0].tool_calls[0].arguments" in bad_json
            assert "not JSON" in bad_json

    anyio.run(session_run)
