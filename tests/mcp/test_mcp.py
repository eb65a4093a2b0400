"""`episodic mcp` as an MCP host sees it: the official SDK's client talks to the server
over stdio (and once over streamable HTTP), against real services."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

DEADLINE = 60.0


@pytest.fixture
def services(spawn):  # type: ignore[no-untyped-def]
    scheduler = spawn("scheduler")
    ingest = spawn("ingest", env={"EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    summariser = spawn("summariser", env={"EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2"})
    recall = spawn("recall")
    return {
        "EPISODIC_INGEST_ADDRESS": ingest.address,
        "EPISODIC_RECALL_ADDRESS": recall.address,
        "EPISODIC_SCHEDULER_ADDRESS": scheduler.address,
        "EPISODIC_SUMMARISER_ADDRESS": summariser.address,
    }


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def _call(session: ClientSession, name: str, **arguments: Any) -> Any:
    result = await session.call_tool(name, arguments)
    assert not result.is_error, f"{name}: {_text(result)}"
    return result


def test_a_model_remembers_and_recalls_over_stdio(services) -> None:  # type: ignore[no-untyped-def]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "episodic.cli", "mcp", "--dataset", "mcp_user"],
        env={**os.environ, **services},
    )

    async def session_run() -> None:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            assert init.server_info.name == "episodic"
            assert "recall" in (init.instructions or "")

            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools) == {
                "remember",
                "end_thread",
                "record_outcome",
                "record_event",
                "recall",
                "recall_procedures",
                "search_episodes",
                "list_threads",
                "load_thread",
            }
            for tool in tools.values():
                assert tool.description and tool.output_schema, tool.name
            assert "Default: 'mcp_user'" in json.dumps(tools["recall"].input_schema)
            assert tools["recall"].annotations.read_only_hint is True

            # Nothing yet: an empty recall says why.
            empty = await _call(session, "recall", query="cars")
            assert "No memories in dataset mcp_user yet" in _text(empty)

            first = await _call(
                session,
                "remember",
                label="car-search",
                messages=[
                    {
                        "role": "user",
                        "content": "I need a family car under $30k, SUVs are too big to park.",
                        "name": "Dana",
                    },
                    {
                        "role": "assistant",
                        "content": "The Toyota Corolla Hybrid fits city commuting and your budget.",
                    },
                ],
            )
            made = first.structured_content
            thread_id = made["thread_id"]
            assert made["created_thread"] is True and made["sequences"] == [1, 2]
            assert made["dataset"] == "mcp_user"
            assert f"thread_id={thread_id}" in _text(first)

            more = await _call(
                session,
                "remember",
                thread_id=thread_id,
                messages=[{"role": "user", "content": "Booking a Corolla test drive Saturday."}],
            )
            assert more.structured_content["sequences"] == [3]
            assert more.structured_content["created_thread"] is False

            ended = await _call(session, "end_thread", thread_id=thread_id)
            assert ended.structured_content["episode_queued"] is True
            assert "queued" in _text(ended)

            # The summariser works in the background: poll recall until the episode is
            # there (a deadline, not a fixed wait).
            deadline = time.monotonic() + DEADLINE
            while True:
                found = await _call(session, "recall", query="car recommendations", limit=5)
                if found.structured_content["episodes"]:
                    break
                assert time.monotonic() < deadline, f"no episode: {_text(found)}"
                await anyio.sleep(0.2)
            text = _text(found)
            episode = found.structured_content["episodes"][0]
            assert episode["thread_id"] == thread_id and episode["message_count"] == 3
            assert episode["kind"] == "summary"

            assert 'thread "car-search"' in text and "just now" in text and " UTC" in text
            assert "Corolla" in text and thread_id in text
            assert episode["ended_at"] and episode["started_at"]

            # as_of before the conversation: nothing had happened yet.
            past = await _call(session, "recall", query="cars", as_of="2020-01-01")
            assert past.structured_content["episodes"] == []
            assert _text(past) == "No memories of dataset mcp_user as of 2020-01-01 00:00 UTC."
            since = await _call(session, "recall", since="2020-01-01T00:00:00Z")
            assert len(since.structured_content["episodes"]) == 1

            searched = await _call(session, "search_episodes", query="Corolla")
            assert searched.structured_content["episodes"][0]["thread_id"] == thread_id

            listed = await _call(session, "list_threads")
            assert listed.structured_content["threads"][0]["thread_id"] == thread_id
            assert '"car-search"' in _text(listed) and "3 messages (3 summarised)" in _text(listed)

            loaded = await _call(session, "load_thread", thread_id=thread_id, limit=2)
            assert [m["sequence"] for m in loaded.structured_content["messages"]] == [2, 3]
            page = await _call(session, "load_thread", thread_id=thread_id, start_sequence=1)
            assert "#1 [" in _text(page) and "Dana (user): I need a family car" in _text(page)
            assert page.structured_content["messages"][0]["name"] == "Dana"

            # An event the agent records is recalled beside the episodes, marked as one.
            recorded = await _call(
                session,
                "record_event",
                summary="Booked the Corolla test drive for Saturday 10am",
                event_type="decision",
                entities=["Toyota Corolla Hybrid"],
            )
            event_id = recorded.structured_content["event_id"]
            assert recorded.structured_content["stored"] is True
            assert "Recorded decision event" in _text(recorded)
            with_event = await _call(session, "recall", query="test drive booked", limit=5)
            kinds = {e["episode_id"]: e["kind"] for e in with_event.structured_content["episodes"]}
            assert kinds.get(event_id) == "event"
            assert "decision by agent" in _text(with_event)
            bad = await session.call_tool(
                "record_event", {"summary": "x", "event_type": "Bad Type"}
            )
            assert bad.is_error and "event_type" in _text(bad)

            # Errors come back as tool errors the model can act on.
            missing = await session.call_tool(
                "load_thread", {"thread_id": "00000000-0000-4000-8000-000000000000"}
            )
            assert missing.is_error and "not found" in _text(missing)
            bad_time = await session.call_tool("recall", {"since": "last tuesday"})
            assert bad_time.is_error and "ISO 8601" in _text(bad_time)
            other = await _call(session, "list_threads", dataset="somebody_else")
            assert other.structured_content == {"dataset": "somebody_else", "threads": []}

    anyio.run(session_run)


def _start_http_server(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """Starts ``episodic mcp --transport http --port 0`` and reads the URL it announces."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "episodic.cli", "mcp", "--transport", "http", "--port", "0"],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + 30
    seen: list[str] = []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if "streamable HTTP on " in line:
            return proc, line.rsplit(" ", 1)[1].strip()
    proc.kill()
    raise AssertionError(f"episodic mcp did not announce its URL:\n{''.join(seen)}")


def test_streamable_http_transport(spawn) -> None:  # type: ignore[no-untyped-def]
    ingest = spawn("ingest")
    recall = spawn("recall")
    env = {
        "EPISODIC_INGEST_ADDRESS": ingest.address,
        "EPISODIC_RECALL_ADDRESS": recall.address,
        "EPISODIC_MCP_DATASET": "http_user",
    }
    proc, url = _start_http_server(env)
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")

        async def session_run() -> None:
            async with (
                streamable_http_client(url) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                names = {t.name for t in (await session.list_tools()).tools}
                assert {"remember", "recall", "load_thread"} <= names
                made = await _call(
                    session,
                    "remember",
                    label="over-http",
                    messages=[{"role": "user", "content": "Remember me over HTTP."}],
                )
                thread_id = made.structured_content["thread_id"]
                assert made.structured_content["dataset"] == "http_user"
                loaded = await _call(session, "load_thread", thread_id=thread_id)
                assert "user: Remember me over HTTP." in _text(loaded)

        anyio.run(session_run)

        # A body that is no JSON-RPC message is answered as stdio answers it, status 400
        # (the SDK sent pydantic's text, and a request with a null id got 202 and nothing).
        for body, code, words in (
            (b"not json", -32700, "Parse error"),
            (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', -32600, "id must be"),
            (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', -32600, "batches"),
            (b'{"jsonrpc":"1.0","id":2,"method":"ping"}', -32600, '"jsonrpc" must be "2.0"'),
        ):
            request = urllib.request.Request(
                url,
                data=body,
                method="POST",
                headers={
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                },
            )
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=30)
            assert refused.value.code == 400, body
            answer = json.loads(refused.value.read())
            assert answer["jsonrpc"] == "2.0" and "id" in answer, answer
            assert answer["error"]["code"] == code, (body, answer)
            assert words in answer["error"]["message"], (body, answer)
            assert "pydantic" not in answer["error"]["message"], answer
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_the_recall_tool_flags_weak_fits_and_abstains_when_asked(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    """With the model the curves were fitted for: a question about something the user never
    mentioned gets the closest memories by default, said to fit only weakly (what a
    paraphrase of something said gets too), and nothing with abstain=true — while one
    about what they did say gets it, unflagged."""
    from episodic.providers import MiniLMEmbedder
    from tests.recall.factory import make_episode

    minilm = MiniLMEmbedder()
    with engine.begin() as conn:
        for label, messages in (
            ("car", ["I need a family car under $30k.", "I went with the Corolla Hybrid."]),
            ("trip", ["We are planning a week in Lisbon in October with the kids."]),
        ):
            make_episode(conn, "abstaining_user", messages, label=label, embedder=minilm)
    recall = spawn("recall", {"EPISODIC_EMBEDDING_PROVIDER": "minilm"})
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "episodic.cli", "mcp", "--dataset", "abstaining_user"],
        env={**os.environ, "EPISODIC_RECALL_ADDRESS": recall.address},
    )

    async def session_run() -> None:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            dog = await _call(session, "recall", query="What is my dog's name?", limit=5)
            assert len(dog.structured_content["episodes"]) == 2
            assert dog.structured_content["weak_match"] is True and "weakly" in _text(dog)
            assert dog.structured_content["abstained"] is False
            assert dog.structured_content["match"] < 0.29  # MiniLM's abstain threshold
            # the model may ask for nothing when nothing fits
            strict = await _call(
                session, "recall", query="What is my dog's name?", limit=5, abstain=True
            )
            assert strict.structured_content["episodes"] == []
            assert strict.structured_content["episode_count"] == 2
            assert "fit this request" in _text(strict) and "abstain=false" in _text(strict)
            assert strict.structured_content["abstained"] is True
            assert strict.structured_content["abstain_applied"] is True
            assert strict.structured_content["match"] == dog.structured_content["match"]
            car = await _call(session, "recall", query="Which car did I buy?", limit=5)
            labels = [e["thread_label"] for e in car.structured_content["episodes"]]
            assert labels[:1] == ["car"], _text(car)
            assert car.structured_content["match"] > dog.structured_content["match"]
            assert car.structured_content["weak_match"] is False and "weakly" not in _text(car)
            # a request that passes the gate keeps its weaker episodes too (min_relevance 0)
            assert len(labels) == 2

    anyio.run(session_run)


def test_the_quick_starts_question_finds_its_episode_through_the_default_recall_tool(
    spawn, engine
) -> None:  # type: ignore[no-untyped-def]
    """The README's own example: "what did we decide about pricing?" shares no content word
    with the episode that agreed the Pro tier at $29, so its calibrated relevance is near 0
    and abstaining hid it (bench.quality.paraphrase_abstain: abstain answered none of 30 such
    questions). The tool's default keeps the closest memories and says that they fit the
    words weakly; abstain=true still answers nothing when nothing fits."""
    from episodic.providers import MiniLMEmbedder
    from tests.recall.factory import make_episode

    minilm = MiniLMEmbedder()
    with engine.begin() as conn:
        make_episode(
            conn,
            "user_42",
            ["We agreed on the Pro tier at $29 for project Atlas."],
            label="billing-q2",
            embedder=minilm,
        )
    recall = spawn("recall", {"EPISODIC_EMBEDDING_PROVIDER": "minilm"})
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "episodic.cli", "mcp", "--dataset", "user_42"],
        env={**os.environ, "EPISODIC_RECALL_ADDRESS": recall.address},
    )

    async def session_run() -> None:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            pricing = await _call(session, "recall", query="what did we decide about pricing?")
            (episode,) = pricing.structured_content["episodes"]
            assert episode["thread_label"] == "billing-q2"
            assert "Pro tier at $29" in _text(pricing)
            # Said plainly: a weak fit by the words, to be read before it is relied on.
            assert episode["relevance"] < 0.29 and "weakly" in _text(pricing)
            assert pricing.structured_content["abstain_applied"] is False
            asked_in_its_words = await _call(
                session, "recall", query="what price did we agree for Atlas?"
            )
            assert asked_in_its_words.structured_content["episodes"][0]["relevance"] > 0.5
            assert "weakly" not in _text(asked_in_its_words)
            strict = await _call(
                session, "recall", query="what did we decide about pricing?", abstain=True
            )
            assert strict.structured_content["episodes"] == []
            assert strict.structured_content["abstained"] is True

    anyio.run(session_run)


def test_the_help_names_every_tool_the_server_registers() -> None:
    from episodic.cli import integrations
    from episodic.mcp_server import build_server

    server = build_server(lambda: pytest.fail("listing the tools calls no service"))
    registered = [t.name for t in anyio.run(server.list_tools)]
    assert list(integrations.MCP_TOOLS) == registered  # the help's list, in the same order
    shown = subprocess.run(
        [sys.executable, "-m", "episodic.cli", "mcp", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    listed = f"tools {', '.join(registered[:-1])} and {registered[-1]}"
    assert listed in " ".join(shown.stdout.split())
    assert listed in " ".join((integrations.__doc__ or "").split())


def test_the_recall_tool_says_when_memory_is_still_being_written(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    """A model asking right after a conversation ended is told the memory is still being
    written (episodes summarised, or passages indexed), so it may ask again, and is not
    told so once the dataset has settled."""
    from sqlalchemy import text

    from tests.recall.factory import make_episode

    with engine.begin() as conn:
        done = make_episode(conn, "settling_user", ["We agreed the Pro tier costs $29."])
        queued = make_episode(conn, "settling_user", ["still to summarise"], status="pending")
    recall = spawn("recall")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "episodic.cli", "mcp", "--dataset", "settling_user"],
        env={**os.environ, "EPISODIC_RECALL_ADDRESS": recall.address},
    )

    async def session_run() -> None:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            asked = await _call(session, "recall", query="Pro tier price", limit=3)
            assert asked.structured_content["settling"] is True
            assert "episodes are being summarised" in _text(asked)
            with engine.begin() as conn:
                conn.execute(
                    text("UPDATE episodes SET status = 'failed' WHERE episode_id = :e"),
                    {"e": queued.episode_id},
                )
                conn.execute(
                    text("UPDATE episodes SET chunks_pending = true WHERE episode_id = :e"),
                    {"e": done.episode_id},
                )
            indexing = await _call(session, "recall", query="Pro tier price", limit=3)
            assert indexing.structured_content["settling"] is True
            assert "passages of recent episodes are being indexed" in _text(indexing)
            with engine.begin() as conn:
                conn.execute(
                    text("UPDATE episodes SET chunks_pending = false WHERE episode_id = :e"),
                    {"e": done.episode_id},
                )
            settled = await _call(session, "recall", query="Pro tier price", limit=3)
            assert settled.structured_content["settling"] is False
            assert "still being written" not in _text(settled)

    anyio.run(session_run)
