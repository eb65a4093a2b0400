"""`episodic mcp` against a hostile or careless host: every tool stays in its dataset,
malformed JSON-RPC on stdio gets an answer, and wrong arguments get a message that names
them."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from episodic.sdk.client import EpisodicClient

NOT_A_THREAD = "00000000-0000-4000-8000-000000000000"
AUTH = {"EPISODIC_AUTH": "required"}


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def _ok(session: ClientSession, name: str, **arguments: Any) -> Any:
    result = await session.call_tool(name, arguments)
    assert not result.is_error, f"{name}: {_text(result)}"
    return result


async def _refused(session: ClientSession, name: str, **arguments: Any) -> str:
    result = await session.call_tool(name, arguments)
    assert result.is_error, f"{name} was not refused: {_text(result)}"
    return _text(result)


def _stdio(dataset: str, env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "episodic.cli", "mcp", "--dataset", dataset],
        env={**os.environ, **env},
    )


# --------------------------------------------------------------------------- datasets


def test_thread_tools_never_leave_the_servers_dataset(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    """With a key for the whole tenant (``acme/*``), a server for ``acme/u1`` neither reads
    nor writes nor ends a thread of ``acme/u2``: such a thread gets, word for word, the
    answer a thread that does not exist gets."""
    from episodic.access import Role
    from episodic.store.keys import create_key

    with engine.begin() as conn:
        key = create_key(conn, role=Role.WRITER, datasets=["acme/*"], name="tenant").secret
    scheduler = spawn("scheduler")  # ingest notifies it without a key: loopback, auto
    ingest = spawn("ingest", env={**AUTH, "EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    recall = spawn("recall", env=AUTH)
    env = {
        "EPISODIC_INGEST_ADDRESS": ingest.address,
        "EPISODIC_RECALL_ADDRESS": recall.address,
        "EPISODIC_SCHEDULER_ADDRESS": scheduler.address,
        "EPISODIC_API_KEY": key,
    }
    with EpisodicClient(ingest=ingest.address, api_key=key) as c:
        other = c.create_thread("acme/u2", label="u2-private").thread_id
        c.add_messages(other, [("user", "u2 secret: my PIN is 4321")])

    def same_as_missing(text: str) -> str:
        return text.replace(other, "<id>").replace(NOT_A_THREAD, "<id>")

    async def session_run() -> None:
        async with (
            stdio_client(_stdio("acme/u1", env)) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            message = [{"role": "user", "content": "written by the acme/u1 server"}]
            for name, arguments in (
                ("remember", {"messages": message}),
                ("remember", {"messages": message, "dataset": "acme/u1"}),
                ("load_thread", {}),
                ("end_thread", {}),
                ("record_outcome", {"outcome": "failure"}),
            ):
                foreign = await _refused(session, name, thread_id=other, **arguments)
                missing = await _refused(session, name, thread_id=NOT_A_THREAD, **arguments)
                assert "not found" in foreign and "4321" not in foreign, (name, foreign)
                assert "acme/u2" not in foreign and "u2-private" not in foreign, (name, foreign)
                assert same_as_missing(foreign) == same_as_missing(missing), (name, arguments)
            refused = await _refused(
                session, "record_event", summary="x", event_type="decision", thread_id=other
            )
            assert "does not exist" in refused

            # An explicit dataset is the one the call acts in, for every thread tool.
            there = await _ok(session, "load_thread", thread_id=other, dataset="acme/u2")
            assert "PIN is 4321" in _text(there)
            made = await _ok(session, "remember", messages=message, label="mine")
            mine = made.structured_content["thread_id"]
            assert made.structured_content["dataset"] == "acme/u1"
            more = await _ok(session, "remember", thread_id=mine, messages=message)
            assert more.structured_content["sequences"] == [2]
            wrong = await _refused(session, "load_thread", thread_id=mine, dataset="acme/u2")
            assert "not found" in wrong and "acme/u1" not in wrong
            assert (await _ok(session, "load_thread", thread_id=mine)).structured_content["thread"][
                "message_count"
            ] == 2
            ended = await _ok(session, "end_thread", thread_id=mine)
            assert ended.structured_content["episode_queued"] is True

    anyio.run(session_run)
    with EpisodicClient(ingest=ingest.address, api_key=key) as c:
        untouched = c.get_thread(other)
        assert (untouched.message_count, untouched.captured_sequence) == (1, 0)


# --------------------------------------------------------------------------- stdio framing


class _RawStdio:
    """``episodic mcp`` over stdio, line by line, as a host that sends whatever it likes."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "episodic.cli", "mcp", "--dataset", "raw_user"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "EPISODIC_INGEST_ADDRESS": "127.0.0.1:9"},
        )

    def send(self, line: bytes | str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((line.encode() if isinstance(line, str) else line) + b"\n")
        self.proc.stdin.flush()

    def reply(self, timeout: float = 20.0) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def close(self) -> str:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        return self.proc.stderr.read().decode(errors="replace")


def _request(id_: object, method: str, params: dict[str, Any] | None = None) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message)


def test_malformed_json_rpc_over_stdio_is_answered() -> None:
    """JSON-RPC 2.0: what is not JSON gets -32700 (id null), what is JSON but no valid
    request gets -32600 (with the request's id when it has a valid one); the server keeps
    serving. Before, stdio answered none of these and the host waited for its timeout."""
    deep = '{"jsonrpc":"2.0","id":8,"method":"ping","params":{"x":' + "[" * 100_000
    deep += "]" * 100_000 + "}}"
    surrogate = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 6,
            "method": "tools/call",
            "params": {"name": "recall", "arguments": {"query": "\ud800"}},
        }
    )
    assert "\\ud800" in surrogate
    cases: list[tuple[bytes | str, int, object]] = [
        ("not json at all", -32700, None),
        ('{"jsonrpc":"2.0","id":1,', -32700, None),
        (b"\xff\xfe garbage", -32700, None),
        ('{"jsonrpc":"1.0","id":2,"method":"ping"}', -32600, 2),
        ('{"id":3,"method":"ping"}', -32600, 3),
        ('{"jsonrpc":"2.0","id":"four","method":"tools/call","params":"str"}', -32600, "four"),
        ('[{"jsonrpc":"2.0","id":5,"method":"ping"}]', -32600, None),
        ('{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', -32600, None),
        ('{"jsonrpc":"2.0","id":true,"method":"ping"}', -32600, None),
        ('{"jsonrpc":"2.0","id":7.5,"method":"ping"}', -32600, None),
        ("42", -32600, None),
        (surrogate, -32600, 6),
        # An id no UTF-8 can write: echoed in the answer, it killed the server's writer.
        ('{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}', -32600, None),
        ('{"jsonrpc":"1.0","id":"\\udfff","method":"ping"}', -32600, None),
        (deep, -32700, None),
        # MCP's own requests with params that do not fit: -32602 naming them (the SDK
        # answered "Invalid request parameters" with no word of which).
        ('{"jsonrpc":"2.0","id":10,"method":"tools/call"}', -32602, 10),
        ('{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":1}}', -32602, 11),
        (
            '{"jsonrpc":"2.0","id":12,"method":"tools/call",'
            '"params":{"name":"recall","arguments":[]}}',
            -32602,
            12,
        ),
    ]
    raw = _RawStdio()
    try:
        # Before initialize: ping is served, any other request is told the order.
        raw.send(_request(100, "tools/list"))
        early = raw.reply()
        assert early is not None and early["id"] == 100, early
        assert early["error"]["code"] == -32600, early
        assert "before initialize" in early["error"]["message"], early
        raw.send(_request(101, "ping"))
        assert raw.reply() == {"jsonrpc": "2.0", "id": 101, "result": {}}
        raw.send(
            _request(
                0,
                "initialize",
                {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            )
        )
        init = raw.reply()
        assert init is not None and init["id"] == 0 and "result" in init, init
        raw.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        raw.send("")  # a blank line is no message: no answer
        for line, code, id_ in cases:
            raw.send(line)
            answer = raw.reply()
            assert answer is not None, f"no answer to {line[:60]!r}"
            assert answer["jsonrpc"] == "2.0" and answer["id"] == id_, (line[:60], answer)
            assert answer["error"]["code"] == code, (line[:60], answer)
            assert answer["error"]["message"], answer
            if code == -32602:
                assert "params" in answer["error"]["message"], answer
        raw.send(_request(9, "ping"))
        assert raw.reply() == {"jsonrpc": "2.0", "id": 9, "result": {}}
    finally:
        stderr = raw.close()
    assert "Traceback" not in stderr, stderr


# --------------------------------------------------------------------------- arguments


def test_wrong_arguments_and_out_of_range_times_are_named(spawn) -> None:  # type: ignore[no-untyped-def]
    """A time no timestamp can hold names the argument and the range; an unknown tool is
    a -32602 protocol error naming the tools there are; a schema-invalid argument is a tool
    error (the model corrects it: MCP's SEP-1303) naming the argument, without pydantic's
    text; and recall counts what it shows (events too)."""
    ingest = spawn("ingest")
    recall = spawn("recall")
    env = {"EPISODIC_INGEST_ADDRESS": ingest.address, "EPISODIC_RECALL_ADDRESS": recall.address}

    async def session_run() -> None:
        async with (
            stdio_client(_stdio("args_user", env)) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            for name, arguments, argument in (
                ("recall", {"as_of": "0001-01-01T00:00:00+14:00"}, "as_of"),
                ("recall", {"since": "9999-12-31T23:59:59-14:00"}, "since"),
                ("recall", {"until": "0001-01-01T00:00:00+14:00"}, "until"),
                (
                    "record_event",
                    {
                        "summary": "x",
                        "event_type": "decision",
                        "occurred_at": "0001-01-01T00:00:00+14:00",
                    },
                    "occurred_at",
                ),
            ):
                text = await _refused(session, name, **arguments)
                assert f"{argument}=" in text and "out of range" in text, text
                assert "0001-01-01" in text and "9999-12-31" in text, text

            with pytest.raises(MCPError) as unknown:
                await session.call_tool("nosuchtool", {})
            assert unknown.value.error.code == -32602
            assert "nosuchtool" in unknown.value.error.message
            assert "recall" in unknown.value.error.message

            wrong: list[tuple[str, dict[str, Any], str]] = [
                ("recall", {"limit": 0}, "limit"),
                ("recall", {"limit": 1e100}, "limit"),
                ("recall", {"query": ["x"]}, "query"),
                ("remember", {"messages": [{"role": "hacker", "content": "x"}]}, "messages"),
                ("load_thread", {}, "thread_id"),
                # Strictly the schema's types: no string for a number or a boolean.
                ("recall", {"limit": "5"}, "limit"),
                ("recall", {"query": "x", "abstain": "false"}, "abstain"),
                ("recall", {"query": 5}, "query"),
                # An argument the tool does not have was ignored: a model that set
                # min_relevance (a RecallRequest field, not the tool's) got every episode
                # and no word that its threshold was never applied.
                ("recall", {"query": "x", "min_relevance": 0.5}, "min_relevance"),
                ("list_threads", {"page_token": "abc"}, "page_token"),
            ]
            for name, arguments, named in wrong:
                text = await _refused(session, name, **arguments)
                assert named in text, text
                assert "pydantic" not in text and "validation error for" not in text, text
                assert "Arguments" not in text, text
            # An optional argument of the right type but out of range says the range (it
            # said "must be integer, not -1").
            for name, arguments in (("recall", {"limit": -1}), ("recall_procedures", {"limit": 0})):
                text = await _refused(session, name, **arguments)
                assert "less than the minimum of 1" in text, text
            # However many arguments are wrong, the refusal names a few (50,000 unknown ones
            # made an answer of 5.5 MB for the model's context).
            flood = await _refused(session, "recall", **{f"k{i}": i for i in range(2000)})
            assert "and 1990 more" in flood, flood[-200:]
            assert len(flood) < 5000, len(flood)
            unknown_argument = await _refused(session, "recall", query="x", min_relevance=0.5)
            assert "`min_relevance` is not an argument of recall" in unknown_argument
            assert "abstain" in unknown_argument, unknown_argument  # what it does take
            missing = await _refused(session, "load_thread")
            assert "thread_id" in missing and "required" in missing, missing

            # Messages refused after remember started their thread: the refusal names the
            # thread, and the corrected call fills it instead of starting another.
            refused = await _refused(
                session,
                "remember",
                label="orphan",
                messages=[
                    {"role": "user", "content": "ok"},
                    {"role": "tool", "content": "r", "tool_call_id": "nope"},
                ],
            )
            assert "answers no call" in refused, refused
            started = re.search(r"pass thread_id=(\S+) with the corrected messages", refused)
            assert started, refused
            filled = await _ok(
                session,
                "remember",
                thread_id=started.group(1),
                messages=[{"role": "user", "content": "ok"}],
            )
            assert filled.structured_content["thread_id"] == started.group(1)
            assert filled.structured_content["created_thread"] is False

            # A dataset with one event and no episode: recall counts the event it shows.
            await _ok(
                session,
                "record_event",
                summary="Shipped project Atlas to production",
                event_type="milestone",
            )
            found = await _ok(session, "recall", query="Atlas shipped", abstain=False)
            assert len(found.structured_content["episodes"]) == 1
            text = _text(found)
            assert "of 0 episodes" not in text, text
            assert text.startswith("1 event of dataset args_user"), text

    anyio.run(session_run)


def test_the_recall_count_counts_episodes_and_events_apart() -> None:
    from episodic.mcp.answers import recall_count

    assert recall_count(2, 0, 5) == "2 of 5 episodes"
    assert recall_count(0, 1, 0) == "1 event"
    assert recall_count(1, 2, 3) == "1 of 3 episodes and 2 events"
    assert recall_count(1, 0, 1) == "1 of 1 episode"
    # never fewer in all than shown (the count is the service's, taken apart from the list)
    assert recall_count(3, 0, 2) == "3 of 3 episodes"
