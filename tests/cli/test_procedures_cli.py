"""`episodic outcome` and `episodic procedures …` as a newcomer runs them (issue 39):
subprocesses against real services; `relearn` against the database alone."""

from __future__ import annotations

import json

from sqlalchemy import text

from episodic.sdk.client import EpisodicClient
from episodic.testing.processes import wait_until
from tests.cli.test_cli import _ok, _run
from tests.cli.test_cli import services as services  # the fixture


def _conversation(client: EpisodicClient, request: str, order: str) -> str:
    thread = client.create_thread("cli_agent")
    client.add_messages(
        thread.thread_id,
        [
            {"role": "user", "content": request},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "a",
                        "type": "function",
                        "function": {
                            "name": "cancel_pending_order",
                            "arguments": {"order_id": order},
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": '{"ok": true}'},
        ],
    )
    client.end_thread(thread.thread_id)
    return thread.thread_id


def test_outcomes_and_procedures_from_the_shell(services, engine, db_url) -> None:  # type: ignore[no-untyped-def]
    env = services
    with EpisodicClient(
        ingest=env["EPISODIC_INGEST_ADDRESS"], recall=env["EPISODIC_RECALL_ADDRESS"]
    ) as client:
        thread = _conversation(client, "Cancel my order #W9 please", "#W9")
        out = _ok(env, "outcome", thread, "success", "--score", "1", "--note", "thanked us")
        assert f"success recorded for thread {thread}" in out
        assert "unchanged" in _ok(
            env, "outcome", thread, "success", "--score", "1", "--note", "thanked us"
        )
        wait_until(lambda: list(client.list_procedures("cli_agent")), timeout=60, message="learned")

    out = _ok(env, "procedures", "list", "cli_agent")
    assert "cancel_pending_order" in out and "Cancel my order #W9 please" in out
    listed = json.loads(_ok(env, "procedures", "list", "cli_agent", "--json"))
    procedure_id = listed[0]["procedure_id"]
    out = _ok(env, "procedures", "show", "cli_agent", procedure_id)
    assert "1. cancel_pending_order (writes)" in out and "order_id ← user" in out
    assert f"success  thread {thread}" in out
    out = _ok(env, "procedures", "recall", "cli_agent", "a customer wants an order cancelled")
    assert procedure_id in out and "fit " in out
    out = _ok(env, "procedures", "recall", "cli_agent", "cancel an order", "--render")
    assert out.startswith("How this was done before:") and "cancel_pending_order" in out

    # Relearning against the database gives the same procedure back (same id).
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM procedures"))
    out = _ok(
        {"EPISODIC_EMBEDDING_PROVIDER": "hashing"},
        "procedures",
        "relearn",
        "--database-url",
        db_url,
    )
    assert "relearned 1 stretch(es) of tool use" in out and "1 procedure(s)" in out
    assert procedure_id[:8] in _ok(env, "procedures", "list", "cli_agent")

    out = _ok(env, "procedures", "delete", "cli_agent", procedure_id)
    assert "1 stretch(es)" in out
    missing = _run(env, "procedures", "show", "cli_agent", procedure_id)
    assert missing.returncode == 1 and "no procedure" in missing.stderr
    bad = _run(env, "outcome", thread, "great")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
