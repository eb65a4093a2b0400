"""`episodic import` of OpenAI-format conversations with tool calls and outcomes, and the
export round trip (issue 39): the calls come back as they went in, and an imported
outcome teaches a procedure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from episodic.ops.backfill import read_plan
from episodic.sdk.client import EpisodicClient
from episodic.testing.processes import wait_until

RUN = {
    "id": "run-812",
    "dataset": "imported_agent",
    "outcome": {"outcome": "success", "score": 0.9, "note": "resolved"},
    "messages": [
        {"role": "user", "content": "Please return the kettle from order #W42."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_order_details", "arguments": '{"order_id": "#W42"}'},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "name": "get_order_details",
            "content": '{"items": ["kettle"]}',
        },
        {
            "role": "assistant",
            "content": "Returning it.",
            "tool_calls": [
                {
                    "id": "c2",
                    "type": "function",
                    "function": {
                        "name": "return_delivered_order_items",
                        "arguments": {"order_id": "#W42", "item_ids": ["kettle"]},
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c2", "content": '{"status": "return requested"}'},
        {"role": "assistant", "content": "Your return is requested."},
    ],
}


def test_the_openai_format_is_read_with_its_tool_calls_and_outcome() -> None:
    plan = read_plan([json.dumps(RUN)])
    assert plan.formats == {"openai": 1}
    [thread] = plan.threads
    assert thread.dataset == "imported_agent" and thread.outcome is not None
    assert (thread.outcome.outcome, thread.outcome.score) == ("success", 0.9)
    assistant = thread.messages[1]
    assert assistant.content == "" and assistant.tool_calls[0].name == "get_order_details"
    tool = thread.messages[2]
    # On a tool result that answers a call, "name" is the tool's, not a speaker's.
    assert tool.tool_call_id == "c1" and tool.tool_name == "get_order_details"
    assert "name" not in tool.metadata
    # Arguments given as an object are sent as JSON text.
    assert json.loads(thread.messages[3].tool_calls[0].arguments)["item_ids"] == ["kettle"]


def _cli(
    env: dict[str, str], *args: str, data: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "episodic.cli", *args],
        input=data,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )


def test_bad_tool_calls_are_named_by_the_dry_run() -> None:
    bad = dict(
        RUN,
        messages=[
            RUN["messages"][0],
            dict(
                RUN["messages"][1],
                tool_calls=[
                    {"id": "c 1", "function": {"name": "get_order_details", "arguments": "{oops"}}
                ],
            ),
        ],
    )
    done = _cli({}, "import", "-", "--dry-run", data=json.dumps(bad) + "\n")
    assert done.returncode == 2, done.stderr
    assert "messages[1].tool_calls[0].id" in done.stderr
    assert "messages[1].tool_calls[0].arguments is not JSON" in done.stderr


def test_import_export_round_trip_keeps_tool_calls_and_learns_from_the_outcome(  # type: ignore[no-untyped-def]
    spawn, tmp_path: Path
) -> None:
    scheduler = spawn("scheduler", env={"EPISODIC_SCHEDULER_POLL_INTERVAL": "0.2"})
    ingest = spawn("ingest", env={"EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    summariser = spawn("summariser", env={"EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2"})
    recall = spawn("recall")
    env = {
        "EPISODIC_INGEST_ADDRESS": ingest.address,
        "EPISODIC_RECALL_ADDRESS": recall.address,
        "EPISODIC_SCHEDULER_ADDRESS": scheduler.address,
        "EPISODIC_SUMMARISER_ADDRESS": summariser.address,
    }
    source = tmp_path / "runs.jsonl"
    source.write_text(json.dumps(RUN) + "\n")
    done = _cli(env, "import", str(source), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcomes"] == 1

    with EpisodicClient(ingest=ingest.address, recall=recall.address) as client:
        [thread] = client.list_threads("imported_agent")
        original = [m.to_openai() for m in client.list_messages(thread.thread_id)]
        assert original[1]["tool_calls"][0]["function"]["name"] == "get_order_details"
        [procedure] = wait_until(
            lambda: list(client.list_procedures("imported_agent")),
            timeout=60,
            message="the imported outcome taught a procedure",
        )
        assert procedure.write_actions == ["return_delivered_order_items"]

        exported = tmp_path / "export.jsonl"
        done = _cli(env, "export", "imported_agent", "-o", str(exported))
        assert done.returncode == 0, done.stderr
        done = _cli(env, "import", str(exported), "--dataset", "restored_agent")
        assert done.returncode == 0, done.stderr
        [copy] = client.list_threads("restored_agent")
        restored = [m.to_openai() for m in client.list_messages(copy.thread_id)]
    assert restored == original
