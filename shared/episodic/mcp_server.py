"""An MCP server that gives a model episodic memory: ``episodic mcp``.

Nine tools, each a thin layer over the SDK (:class:`episodic.client.EpisodicClient`), so
addresses, API key (``EPISODIC_API_KEY``) and TLS (``EPISODIC_TLS_CA_FILE``, client
certificates) come from the same environment variables and options as every other
command:

- ``remember`` — append messages to a thread (starting one when no ``thread_id`` is given),
  tool calls and their results included (OpenAI's chat format);
- ``end_thread`` — queue the thread's episode now (the explicit trigger);
- ``record_outcome`` — say how a thread (or one episode's stretch) turned out: success,
  failure or partial; procedures are learned from the successes;
- ``recall_procedures`` — "how did we do this before?": the procedures that fit a task
  (goal, numbered steps with where each argument came from, support), before acting;
- ``record_event`` — record something that happened (a decision, a tool call, feedback, a
  milestone) as an event, recalled beside the episodes;
- ``recall`` — episodes rendered for a prompt, with relative and absolute times
  (:func:`episodic.render.render_episodes`), by meaning and recency, within a time range,
  or as of an earlier moment;
- ``search_episodes`` — episodes by text match alone;
- ``list_threads`` — the most recently active threads;
- ``load_thread`` — a thread's messages verbatim, with their tool calls and results.

Every tool answers with concise text for the model and, for applications, structured
content that matches the tool's published output schema. Errors of the services become
tool errors (``isError``) whose text says what to change.

The dataset (whose memory) is the tool call's ``dataset`` argument, else the server's
default (``--dataset`` or ``EPISODIC_MCP_DATASET``), and a tool touches no other: a tool
given a thread id reads the thread's dataset first (GetThread) and answers for a thread of
another dataset exactly as for one that does not exist, even when the API key covers both
(a tenant's ``acme/*`` key behind a server for ``acme/u1``). Transports: stdio (a host
starts the server per session) and streamable HTTP (``--transport http``; it binds
127.0.0.1 by default, with DNS-rebinding protection, and has no authentication of its own:
every caller acts with the server's episodic credentials).

Errors follow MCP (2025-11-25, SEP-1303): an unknown tool is a JSON-RPC -32602 error; an
argument the tool's schema refuses, like a failure of the call itself, is a tool error
naming the argument, which the model can correct. On stdio a line that is not JSON gets
-32700 and one that is no valid JSON-RPC message -32600 (with its id when it has a valid
one), as the HTTP transport answers, instead of the silence of the SDK's stdio transport.

Built on the official MCP Python SDK (``mcp`` 2.x, whose high-level server is
``mcp.server.mcpserver.MCPServer`` — FastMCP's name in mcp 1.x).
"""

# No ``from __future__ import annotations``: MCPServer reads the tools' annotations, and
# those name values of :func:`build_server`'s scope (the dataset help text).

import io
import json
import os
import socket
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import IO, Annotated, Any, Literal, cast

import anyio
import grpc
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    ErrorData,
    InputRequiredResult,
    JSONRPCError,
    JSONRPCNotification,
    TextContent,
    ToolAnnotations,
    jsonrpc_message_adapter,
)
from pydantic import BaseModel, Field, ValidationError, model_validator

from episodic.client import Episode as SdkEpisode
from episodic.client import (
    EpisodicClient,
    EpisodicRpcError,
    NotFoundError,
    ScoredEpisode,
    ScoredProcedure,
    Thread,
)
from episodic.client import Message as SdkMessage
from episodic.render import absolute_time, relative_time, render_episodes, render_procedures
from episodic.tool_calls import render_call

__all__ = ["DATASET_ENV", "build_server", "serve"]

#: The environment variable naming the default dataset.
DATASET_ENV = "EPISODIC_MCP_DATASET"
SERVER_NAME = "episodic"
INSTRUCTIONS = (
    "Long-term episodic memory of past conversations. Call `recall` before answering "
    "anything that may depend on earlier conversations (preferences, decisions, facts the "
    "user shared, what happened last time). Save the conversation with `remember` (keep the "
    "returned thread_id and pass it on later calls) and call `end_thread` when a task or "
    "topic is finished, so it is summarised into an episode that `recall` can find. "
    "Before a task you will do with tools, call `recall_procedures` to see how it was done "
    "before; when you know how a conversation turned out, say so with `record_outcome`."
)
MAX_RECALL = 20
MAX_LOAD = 500

# --------------------------------------------------------------------------- outputs


class FunctionIn(BaseModel):
    """OpenAI's ``function`` part of a tool call."""

    name: str = Field(description="The tool called.")
    arguments: str | dict[str, Any] = Field(
        default="{}", description="Its arguments: a JSON object, or its JSON text."
    )


class ToolCallIn(BaseModel):
    """One tool call of an assistant message: flat ``{id, name, arguments}``, or as OpenAI
    writes it ``{id, type: "function", function: {name, arguments}}``."""

    id: str = Field(description="The call's id; the tool message with its result names it.")
    name: str | None = Field(default=None, description="The tool called.")
    arguments: str | dict[str, Any] | None = Field(
        default=None, description="Its arguments: a JSON object, or its JSON text."
    )
    type: Literal["function"] | None = Field(default=None, description="OpenAI's 'function'.")
    function: FunctionIn | None = Field(
        default=None, description="OpenAI's form: the tool's name and arguments."
    )

    @model_validator(mode="after")
    def _named(self) -> "ToolCallIn":
        if not (self.function or self.name):
            raise ValueError("a tool call needs the tool's name (`name` or `function.name`)")
        return self

    def as_sdk(self) -> dict[str, Any]:
        """The call as the SDK takes it (arguments given as an object become JSON text)."""
        name = self.function.name if self.function else self.name
        arguments = self.function.arguments if self.function else self.arguments
        return {"id": self.id, "name": name, "arguments": "{}" if arguments is None else arguments}


class MessageIn(BaseModel):
    """One message to remember."""

    role: Literal["user", "assistant", "system", "tool"] = Field(
        description="Who wrote it: 'user' (the person), 'assistant' (you), 'system' or 'tool' "
        "(a tool's result)."
    )
    content: str | None = Field(
        default=None,
        description="The message text, verbatim. May be left out on an assistant message "
        "with tool_calls.",
    )
    name: str | None = Field(
        default=None,
        description="Optional display name of the speaker (e.g. 'Alice'); summaries use it. "
        "On a 'tool' message: the tool's name.",
    )
    tool_calls: list[ToolCallIn] | None = Field(
        default=None,
        max_length=128,
        description="'assistant' only: the tools it called, in order, in OpenAI's chat format "
        '(e.g. {"id": "call_1", "name": "get_order", "arguments": {"order_id": "#W1"}}).',
    )
    tool_call_id: str | None = Field(
        default=None,
        description="'tool' only: the id of the call (made earlier in the thread) whose "
        "result this message is.",
    )

    @model_validator(mode="after")
    def _said_something(self) -> "MessageIn":
        if not (self.content or "").strip() and not self.tool_calls:
            raise ValueError("a message needs content (or, from the assistant, tool_calls)")
        return self

    def as_sdk(self) -> dict[str, Any]:
        """The message as the SDK's add_messages takes it (OpenAI's chat format)."""
        tool = self.role == "tool"
        item: dict[str, Any] = {
            "role": self.role,
            "content": self.content or "",
            # A speaker's name is metadata; a tool message's is the tool's (OpenAI's `name`).
            "metadata": {"name": self.name} if self.name and not tool else {},
        }
        if self.tool_calls:
            item["tool_calls"] = [c.as_sdk() for c in self.tool_calls]
        if self.tool_call_id:
            item["tool_call_id"] = self.tool_call_id
        if tool and self.name:
            item["name"] = self.name
        return item


class RememberOutput(BaseModel):
    thread_id: str = Field(description="The thread the messages were added to.")
    dataset: str
    created_thread: bool = Field(description="Whether this call started the thread.")
    sequences: list[int] = Field(description="Each message's position in the thread.")
    stored_count: int = Field(description="Messages stored by this call (not replays).")


class EndThreadOutput(BaseModel):
    thread_id: str
    episode_queued: bool = Field(description="False when every message was already captured.")
    episode_id: str | None = None


class RecordOutcomeOutput(BaseModel):
    thread_id: str
    episode_id: str | None = Field(
        default=None, description="The episode whose stretch it is for; null: the whole thread."
    )
    outcome: Literal["success", "failure", "partial"]
    changed: bool = Field(description="False when the same outcome was already recorded.")
    recorded_at: datetime | None


class RecordEventOutput(BaseModel):
    event_id: str
    dataset: str
    occurred_at: datetime | None
    stored: bool = Field(description="False when the idempotency key was already recorded.")


class EpisodeOut(BaseModel):
    episode_id: str
    thread_id: str
    thread_label: str
    status: str
    summary: str
    key_learnings: list[str]
    entities: list[str]
    started_at: datetime | None = Field(description="Time of the episode's first message.")
    ended_at: datetime | None = Field(description="Time of the episode's last message.")
    message_count: int
    relevance_score: float | None = None
    relevance: float | None = Field(
        default=None,
        description="The calibrated chance (0..1) that this episode answers the query, read "
        "mostly from the words they share: a question in other words than the conversation's "
        "scores low even when this episode answers it, so low means 'read it', not 'wrong'.",
    )
    kind: str = Field(default="summary", description="'summary' or 'event'.")
    event_type: str = ""
    actor: str = ""


class RecallOutput(BaseModel):
    dataset: str
    episode_count: int = Field(
        description="Current episodes the dataset holds in all (summaries: events, which "
        "`episodes` may hold too, are not counted)."
    )
    now: datetime = Field(description="The time relative timestamps are measured from.")
    episodes: list[EpisodeOut] = Field(description="Best first.")
    match: float | None = Field(
        default=None,
        description="How likely the dataset holds an answer to the query at all (0..1); "
        "null without a query or without episodes or events to rank.",
    )
    abstained: bool = Field(
        default=False,
        description="No episodes because none fit the query well enough (not because "
        "there are none).",
    )
    abstain_applied: bool = Field(
        default=False,
        description="Whether abstaining held: false when nothing was matched by meaning "
        "(match is null) and where it is not available (a dataset of another language than "
        "English embedded by MiniLM), where the episodes may not fit.",
    )
    settling: bool = Field(
        default=False,
        description="Memory of this dataset is still being written: episodes are being "
        "summarised, or passages of recent ones indexed. Asking again in a few seconds may "
        "answer better.",
    )
    weak_match: bool = Field(
        default=False,
        description="The closest memories came back although the query fits them too weakly "
        "for abstain=true to keep any: they may answer a question asked in other words, or "
        "not fit at all.",
    )


class SearchOutput(BaseModel):
    dataset: str
    episodes: list[EpisodeOut] = Field(description="Best text match first.")


class ThreadOut(BaseModel):
    thread_id: str
    dataset: str
    label: str
    message_count: int
    summarised_count: int = Field(description="Messages already covered by episodes.")
    created_at: datetime | None
    last_message_at: datetime | None


class ThreadsOutput(BaseModel):
    dataset: str
    threads: list[ThreadOut] = Field(description="Most recently active first.")


class ToolCallOut(BaseModel):
    id: str
    name: str = Field(description="The tool called.")
    arguments: str = Field(description="Its arguments, as JSON text.")


class MessageOut(BaseModel):
    sequence: int
    role: str
    name: str | None = Field(
        description="The speaker's display name; on a 'tool' message, the tool's name."
    )
    content: str
    created_at: datetime | None
    tool_calls: list[ToolCallOut] = Field(
        default_factory=list, description="An assistant message's tool calls, in order."
    )
    tool_call_id: str | None = Field(
        default=None, description="A tool message: the call whose result it is."
    )


class ProcedureStepOut(BaseModel):
    tool: str = Field(description="The tool called.")
    purpose: str = Field(description="What the call was for, in a few words.")
    writes: bool = Field(description="Whether it changes something (as opposed to reading).")
    arguments: dict[str, str] = Field(
        description="The arguments that mattered, each with where its value came from: "
        "'user', 'tool:<name>' (an earlier tool's result) or 'agent'."
    )


class ProcedureSourceOut(BaseModel):
    thread_id: str
    episode_id: str
    outcome: str = Field(description="'success', 'failure' or 'partial'.")


class ProcedureOut(BaseModel):
    procedure_id: str
    goal: str = Field(description="The request it served, in the user's words.")
    example_goals: list[str] = Field(description="Other requests it served.")
    steps: list[ProcedureStepOut] = Field(description="In order.")
    write_actions: list[str] = Field(description="The tools of the steps that change something.")
    success_count: int
    failure_count: int
    partial_count: int
    relevance: float = Field(description="How well its goal fits the task (0..1).")
    sources: list[ProcedureSourceOut] = Field(description="Where it was learned, newest first.")
    updated_at: datetime | None


class ProceduresOutput(BaseModel):
    dataset: str
    task: str | None
    procedures: list[ProcedureOut] = Field(description="Best fit first.")


class LoadThreadOutput(BaseModel):
    thread: ThreadOut
    messages: list[MessageOut] = Field(description="Oldest first.")


# --------------------------------------------------------------------------- helpers


def _episode_out(item: SdkEpisode | ScoredEpisode) -> EpisodeOut:
    e = item.episode if isinstance(item, ScoredEpisode) else item
    return EpisodeOut(
        episode_id=e.episode_id,
        thread_id=e.thread_id,
        thread_label=e.thread_label,
        status=e.status,
        summary=e.summary,
        key_learnings=e.key_learnings,
        entities=e.entities,
        started_at=e.started_at,
        ended_at=e.ended_at,
        message_count=e.message_count,
        relevance_score=item.relevance_score if isinstance(item, ScoredEpisode) else None,
        relevance=item.relevance if isinstance(item, ScoredEpisode) else None,
        kind=e.kind,
        event_type=e.event_type,
        actor=e.actor,
    )


def _procedure_out(item: ScoredProcedure) -> ProcedureOut:
    p = item.procedure
    return ProcedureOut(
        procedure_id=p.procedure_id,
        goal=p.goal,
        example_goals=p.example_goals,
        steps=[
            ProcedureStepOut(tool=s.tool, purpose=s.purpose, writes=s.writes, arguments=s.arguments)
            for s in p.steps
        ],
        write_actions=p.write_actions,
        success_count=p.success_count,
        failure_count=p.failure_count,
        partial_count=p.partial_count,
        relevance=item.relevance,
        sources=[ProcedureSourceOut(thread_id=t, episode_id=e, outcome=o) for t, e, o in p.sources],
        updated_at=p.updated_at,
    )


def _thread_out(t: Thread) -> ThreadOut:
    return ThreadOut(
        thread_id=t.thread_id,
        dataset=t.dataset,
        label=t.label,
        message_count=t.message_count,
        summarised_count=t.captured_sequence,
        created_at=t.created_at,
        last_message_at=t.last_message_at,
    )


def _speaker(m: SdkMessage) -> str | None:
    name = m.metadata.get("name") or m.metadata.get("speaker")
    if isinstance(name, str) and name.strip():
        return name
    return m.name or None  # a tool message: the tool's name


def _message_line(m: SdkMessage) -> str:
    """A message as load_thread shows it: its words, then each call it made
    (``[called name(arg="value") id call_1]``); a tool's result says which call it answers."""
    who = _speaker(m)
    if m.role == "tool":
        answers = f", answers {m.tool_call_id}" if m.tool_call_id else ""
        speaker = f"tool {m.name}{answers}" if m.name else f"tool{answers}"
    else:
        speaker = f"{who} ({m.role})" if who else m.role
    parts = [m.content] if m.content else []
    parts += [f"[called {render_call(c)} id {c.id}]" for c in m.tool_calls]
    return f"#{m.sequence} [{_when(m.created_at)}] {speaker}: {' '.join(parts)}"


def _when(value: datetime | None, now: datetime | None = None) -> str:
    if value is None:
        return "unknown time"
    return f"{relative_time(value, now)}, {absolute_time(value)}"


def _result(text: str, output: BaseModel) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=output.model_dump(mode="json"),
    )


def parse_time(value: str | None, name: str) -> datetime | None:
    """An ISO 8601 argument (a date, or a time; naive means UTC), or None. A time that is
    not between 0001-01-01 and 9999-12-31 in UTC (what a timestamp holds), such as
    ``0001-01-01T00:00:00+14:00``, is a tool error naming the argument and the range."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.lower() == "now":
        return datetime.now(UTC)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ToolError(
            f"{name}={value!r} is not an ISO 8601 date or time; use e.g. 2026-05-14 or "
            "2026-05-14T14:22:00Z"
        ) from None
    if not parsed.tzinfo:
        return parsed.replace(tzinfo=UTC)
    try:
        parsed.astimezone(UTC)  # the conversion every later step makes
    except OverflowError:
        raise ToolError(
            f"{name}={value!r} is out of range: use a time between 0001-01-01T00:00:00Z and "
            "9999-12-31T23:59:59Z (in UTC)"
        ) from None
    return parsed


def _recall_count(summaries: int, events: int, episode_count: int) -> str:
    """What a recall answer shows, counted as the dataset counts it: ``episode_count``
    counts its episodes, not its events, so the events shown are counted apart."""
    parts = []
    if summaries or not events:
        total = max(episode_count, summaries)
        parts.append(f"{summaries} of {total} episode{'' if total == 1 else 's'}")
    if events:
        parts.append(f"{events} event{'' if events == 1 else 's'}")
    return " and ".join(parts)


def _thread_not_found(thread_id: str) -> NotFoundError:
    """The services' NOT_FOUND for a thread that does not exist (or the caller may not see),
    word for word (episodic.store.owners.thread_not_found): the answer for a thread of
    another dataset than the call's, which must not tell that it exists."""
    return NotFoundError(
        grpc.StatusCode.NOT_FOUND,
        f"thread {thread_id} does not exist",
        metadata={"thread_id": thread_id},
        method="GetThread",
    )


def _tool_error(err: EpisodicRpcError, client: EpisodicClient) -> ToolError:
    code = err.code.name
    where = f" (field {err.field})" if err.field else ""
    text = f"episodic refused the call: {code}{where}: {err.message}"
    if code == "UNAVAILABLE":
        addresses = ", ".join(f"{k} {v}" for k, v in sorted(client.addresses.items()))
        text = (
            f"episodic memory is unreachable ({err.message}); is `episodic up` running? "
            f"addresses: {addresses}"
        )
    elif code == "UNAUTHENTICATED":
        text += " — the MCP server needs EPISODIC_API_KEY in its environment"
    elif code == "PERMISSION_DENIED":
        text += " — the server's API key does not allow this dataset or call"
    elif isinstance(err, NotFoundError):
        text = f"not found: {err.message} (list_threads shows the thread ids that exist)"
    return ToolError(text)


def _schema_problems(
    schema: dict[str, Any], arguments: dict[str, Any], tool: str = "this tool"
) -> list[str]:
    """What in ``arguments`` the JSON schema of ``tool`` refuses, each naming its argument
    (an argument the schema does not name too)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    problems = []
    # The SDK's schemas allow other properties, and its parsing drops them: an argument the
    # tool does not have (min_relevance on recall) would be ignored without a word, and the
    # model would believe it applied.
    known = schema.get("properties")
    if isinstance(known, dict):
        for name in sorted(set(arguments) - set(known)):
            problems.append(
                f"`{name}` is not an argument of {tool}; its arguments are {', '.join(known)}"[:300]
            )
    for error in sorted(validator.iter_errors(arguments), key=lambda e: list(e.path)):
        where = ".".join(str(part) for part in error.absolute_path) or "arguments"
        if error.validator == "required":
            problems.append(f"{error.message}")
        elif error.validator == "anyOf" and error.context:
            # An optional argument (anyOf [its type, null]): say the type, not "null".
            kinds = [c.schema.get("type") for c in error.context if isinstance(c.schema, dict)]
            wanted = " or ".join(str(k) for k in kinds if k and k != "null") or "another value"
            problems.append(f"`{where}` must be {wanted}, not {error.instance!r}"[:300])
        else:
            problems.append(f"`{where}`: {error.message}"[:300])
    return problems


def _arguments_error(tool: str, err: ValidationError) -> str:
    """Arguments the tool's input schema refuses, each named, in words (pydantic's own text
    names its model and links its docs)."""
    problems = []
    for problem in err.errors(include_url=False):
        where = ".".join(str(part) for part in problem["loc"]) or "arguments"
        if problem["type"] == "missing":
            problems.append(f"`{where}` is required")
        else:
            problems.append(f"`{where}`: {problem['msg']}")
    return (
        f"invalid arguments for {tool}: {'; '.join(problems)} (the tool's input schema says "
        "what each argument takes)"
    )


class _EpisodicMCPServer(MCPServer[Any]):
    """The SDK's server, with MCP's error kinds for a tool call (2025-11-25, SEP-1303): an
    unknown tool is a protocol error (-32602) naming the tools there are; arguments that do
    not fit the tool's schema are a tool error that names them, for the model to correct
    (the SDK sends pydantic's text, which names an internal model and links its docs)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        tools = {tool.name: tool for tool in await self.list_tools()}
        if name not in tools:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"Unknown tool: {name!r}; the tools are {', '.join(tools)}",
            )
        # The tool's input schema, strictly: the SDK's own parsing is pydantic's lax mode,
        # which takes "5" for 5 and "true" for true, so a model's malformed call would
        # run as if it were right instead of being told what to fix.
        problems = _schema_problems(tools[name].input_schema, arguments or {}, name)
        if problems:
            raise ToolError(
                f"invalid arguments for {name}: {'; '.join(problems)} (the tool's input "
                "schema says what each argument takes)"
            )
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):  # the arguments, not the call
                raise ToolError(_arguments_error(name, exc.__cause__)) from exc.__cause__
            raise


# --------------------------------------------------------------------------- the server


def build_server(
    client: EpisodicClient | Callable[[], EpisodicClient],
    default_dataset: str | None = None,
) -> MCPServer[Any]:
    """The MCP server with its nine tools over ``client`` (or a factory called once, on
    first use). ``default_dataset`` answers for tool calls without a ``dataset``."""
    state: dict[str, EpisodicClient] = {}

    def memory() -> EpisodicClient:
        if "client" not in state:
            state["client"] = client() if callable(client) else client
        return state["client"]

    def call(fn: Callable[[EpisodicClient], Any]) -> Any:
        c = memory()
        try:
            return fn(c)
        except EpisodicRpcError as err:
            raise _tool_error(err, c) from None

    def dataset_of(value: str | None) -> str:
        chosen = (value or "").strip() or default_dataset
        if not chosen:
            raise ToolError(
                "no dataset: pass `dataset` (whose memory, e.g. 'user_42') — this server has "
                f"no default (start it with --dataset or {DATASET_ENV})"
            )
        return chosen

    def thread_of(c: EpisodicClient, thread_id: str, dataset: str) -> Thread:
        """The thread, if it is one of ``dataset``. The services check only that the key
        covers the thread's dataset, and a key may cover several (``acme/*``), so the call
        that names a thread by id learns its dataset first (GetThread, the one extra call
        at most a tool makes for it: load_thread and remember need the thread anyway) and
        answers for another dataset's thread as for a thread that does not exist."""
        thread = c.get_thread(thread_id)
        if thread.dataset != dataset:
            raise _thread_not_found(thread.thread_id)
        return thread

    dataset_help = (
        "Whose memory to use, e.g. 'user_42' (letters, digits, _ . : @ -, '/' between parts). "
        + (
            f"Default: '{default_dataset}'; usually leave it out."
            if default_dataset
            else "Required: this server has no default dataset."
        )
    )
    Dataset = Annotated[str | None, Field(description=dataset_help)]

    server: MCPServer[Any] = _EpisodicMCPServer(
        SERVER_NAME,
        title="Episodic memory",
        instructions=INSTRUCTIONS,
        version=_version(),
    )

    # ---------------------------------------------------------------- remember

    @server.tool(
        name="remember",
        title="Remember messages",
        description=(
            "Save conversation turns to long-term memory. Pass the messages worth keeping "
            "(the user's words and your replies) in order; tool calls and their results too, "
            "in OpenAI's chat format (an assistant message's tool_calls, a tool message's "
            "tool_call_id), so that how a task was done can be learned from them. Without "
            "thread_id a new thread "
            "(one conversation) is started: keep the returned thread_id and pass it on later "
            "calls so the conversation continues in the same thread. Saved messages are "
            "summarised into an episode after end_thread (or 30 minutes without new "
            "messages); only then can recall find them. Returns the thread id and each "
            "message's sequence number."
        ),
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False
        ),
    )
    def remember(
        messages: Annotated[
            list[MessageIn],
            Field(min_length=1, max_length=1000, description="The messages, oldest first."),
        ],
        thread_id: Annotated[
            str | None,
            Field(description="Thread to append to (from an earlier call); omit to start one."),
        ] = None,
        label: Annotated[
            str | None,
            Field(
                max_length=200,
                description="Short name for a new thread, e.g. 'car-search' (ignored with "
                "thread_id); recall shows it.",
            ),
        ] = None,
        dataset: Dataset = None,
    ) -> Annotated[CallToolResult, RememberOutput]:
        items = [m.as_sdk() for m in messages]

        ds = dataset_of(dataset)

        def run(c: EpisodicClient) -> tuple[Thread, bool, Any]:
            if thread_id:
                thread = thread_of(c, thread_id, ds)
                return thread, False, c.add_messages(thread.thread_id, items)
            thread = c.create_thread(ds, label=label or "")
            return thread, True, c.add_messages(thread.thread_id, items)

        thread, created, result = call(run)
        seqs = result.sequences
        span = f"{seqs[0]}" if len(seqs) == 1 else f"{seqs[0]}-{seqs[-1]}"
        start = f"started thread {thread.thread_id}" if created else f"thread {thread.thread_id}"
        name = f' "{thread.label}"' if thread.label else ""
        text = (
            f"Remembered {len(seqs)} message(s) in {start}{name} (dataset {thread.dataset}), "
            f"sequence {span}. Pass thread_id={thread.thread_id} to continue this "
            "conversation; call end_thread when it is done."
        )
        return _result(
            text,
            RememberOutput(
                thread_id=thread.thread_id,
                dataset=thread.dataset,
                created_thread=created,
                sequences=seqs,
                stored_count=result.stored_count,
            ),
        )

    # ---------------------------------------------------------------- end_thread

    @server.tool(
        name="end_thread",
        title="End a thread",
        description=(
            "Mark the end of a stretch of conversation so it is summarised into an episode "
            "now (instead of after 30 minutes without messages). Call it when a task or topic "
            "is finished. The thread stays open: later remember calls with the same "
            "thread_id continue it and become its next episode."
        ),
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=True
        ),
    )
    def end_thread(
        thread_id: Annotated[str, Field(description="The thread to end (from remember).")],
        dataset: Dataset = None,
    ) -> Annotated[CallToolResult, EndThreadOutput]:
        ds = dataset_of(dataset)
        result = call(lambda c: c.end_thread(thread_of(c, thread_id, ds).thread_id))
        if result.episode_queued:
            text = (
                f"Ended thread {thread_id}: episode {result.episode_id or '(id pending)'} is "
                "queued and will be summarised in the background; recall finds it within "
                "moments."
            )
        else:
            text = f"Thread {thread_id}: every message is already in an episode; nothing queued."
        return _result(
            text,
            EndThreadOutput(
                thread_id=thread_id,
                episode_queued=result.episode_queued,
                episode_id=result.episode_id or None,
            ),
        )

    # ---------------------------------------------------------------- record_outcome

    @server.tool(
        name="record_outcome",
        title="Record how a conversation turned out",
        description=(
            "Say how a thread (a conversation saved with remember) turned out: 'success' "
            "(the user's goal was reached), 'failure' or 'partial', with an optional score "
            "in [0, 1] and a short note (why it failed, what the user said). Procedures "
            "(recall_procedures) are learned from the tool calls of successful threads, and "
            "failures count against the procedure they followed. It may be called before or "
            "after end_thread; calling it again replaces the outcome (the last one stands). "
            "episode_id narrows it to one episode's stretch of the thread."
        ),
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=True
        ),
    )
    def record_outcome(
        thread_id: Annotated[str, Field(description="The thread (from remember).")],
        outcome: Annotated[
            Literal["success", "failure", "partial"],
            Field(description="success, failure or partial."),
        ],
        score: Annotated[
            float | None,
            Field(ge=0, le=1, description="Optional score in [0, 1] (a reward, a rating)."),
        ] = None,
        note: Annotated[
            str | None,
            Field(max_length=2000, description="Optional note: why, in a sentence."),
        ] = None,
        episode_id: Annotated[
            str | None,
            Field(description="Optional: one episode of the thread; default the whole thread."),
        ] = None,
        dataset: Dataset = None,
    ) -> Annotated[CallToolResult, RecordOutcomeOutput]:
        ds = dataset_of(dataset)
        result = call(
            lambda c: c.record_outcome(
                thread_of(c, thread_id, ds).thread_id,
                outcome,
                score=score,
                note=note or "",
                episode_id=episode_id or None,
            )
        )
        what = f"episode {result.episode_id} of thread" if result.episode_id else "thread"
        if result.changed:
            text = f"Recorded {outcome} for {what} {result.thread_id}"
            text += f" (score {score:g})." if score is not None else "."
            if outcome == "success":
                text += " Its tool calls teach a procedure once its episode is summarised."
        else:
            text = f"{what.capitalize()} {result.thread_id} already had this outcome; unchanged."
        return _result(
            text,
            RecordOutcomeOutput(
                thread_id=result.thread_id,
                episode_id=result.episode_id or None,
                outcome=outcome,
                changed=result.changed,
                recorded_at=result.recorded_at,
            ),
        )

    # ---------------------------------------------------------------- record_event

    @server.tool(
        name="record_event",
        title="Record an event",
        description=(
            "Record something that just happened and is worth remembering on its own: a "
            "decision or commitment ('decision'), a non-trivial action you took with a tool "
            "('tool_call'), the user's verdict on your help ('feedback'), something finished "
            "or achieved ('milestone'), or a lowercase type of your own. It is stored at once "
            "and recall returns it beside the conversation episodes, with its time. Do not "
            "record small talk or repeats."
        ),
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False
        ),
    )
    def record_event(
        summary: Annotated[
            str,
            Field(min_length=1, max_length=4096, description="What happened, in a sentence."),
        ],
        event_type: Annotated[
            str,
            Field(description="decision, tool_call, feedback, milestone, or a custom type."),
        ],
        actor: Annotated[
            str, Field(description="Who acted: 'user', 'agent', or a name.")
        ] = "agent",
        entities: Annotated[
            list[str] | None,
            Field(description="People, projects, products it concerns, e.g. 'project atlas'."),
        ] = None,
        occurred_at: Annotated[
            str | None, Field(description="When it happened (ISO 8601); default now.")
        ] = None,
        thread_id: Annotated[
            str | None, Field(description="The thread it happened in, if any.")
        ] = None,
        dataset: Dataset = None,
    ) -> Annotated[CallToolResult, RecordEventOutput]:
        ds = dataset_of(dataset)
        when = parse_time(occurred_at, "occurred_at")
        result = call(
            lambda c: c.record_event(
                ds,
                summary,
                event_type=event_type,
                actor=actor,
                entities=entities or [],
                occurred_at=when,
                thread_id=thread_id or None,
            )
        )
        event = result.event
        text = (
            f"Recorded {event.event_type} event {event.episode_id} in dataset {ds} "
            f"({_when(event.ended_at)}); recall returns it with the episodes."
        )
        return _result(
            text,
            RecordEventOutput(
                event_id=event.episode_id,
                dataset=ds,
                occurred_at=event.ended_at,
                stored=result.stored,
            ),
        )

    # ---------------------------------------------------------------- recall

    @server.tool(
        name="recall",
        title="Recall memories",
        description=(
            "Retrieve memories of past conversations, ready to read: each episode's summary "
            "under a header saying when it happened (e.g. '3 days ago, 2026-05-14 14:22 "
            "UTC') and in which thread, oldest first. Use it before answering anything that "
            "may depend on earlier conversations: preferences, decisions, facts the user "
            "shared, what happened last time. Episodes are ranked by similarity to `query` "
            "and by recency; the closest come back even when they fit weakly, and the "
            "answer says so (with each episode's relevance): a "
            "question in other words than the conversation's fits its answer weakly too, so "
            "read them before relying on them (abstain=true answers nothing instead); "
            "without a query the most recent come back. since/until keep "
            "episodes within a time range; as_of answers as if it were that moment (nothing "
            "that ended later is returned)."
        ),
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True),
    )
    def recall(
        query: Annotated[
            str | None,
            Field(description="What to remember, in words, e.g. 'pricing decisions'."),
        ] = None,
        limit: Annotated[
            int | None, Field(ge=1, le=MAX_RECALL, description="How many episodes (default 3).")
        ] = None,
        since: Annotated[
            str | None,
            Field(description="Only episodes ending at or after this ISO 8601 date or time."),
        ] = None,
        until: Annotated[
            str | None,
            Field(description="Only episodes starting at or before this ISO 8601 date or time."),
        ] = None,
        as_of: Annotated[
            str | None,
            Field(
                description="Answer as if it were this ISO 8601 time: only episodes that "
                "ended by then, ranked and dated from then."
            ),
        ] = None,
        abstain: Annotated[
            bool,
            Field(
                description="True: answer nothing when no memory fits the query well enough "
                "(a question in other words than the conversation's is then often left "
                "unanswered). False (default): the closest memories, flagged when they fit "
                "weakly."
            ),
        ] = False,
        dataset: Dataset = None,
    ) -> Annotated[CallToolResult, RecallOutput]:
        ds = dataset_of(dataset)
        when_as_of = parse_time(as_of, "as_of")

        def ask(**thresholds: Any) -> Any:
            return call(
                lambda c: c.recall(
                    ds,
                    query or None,
                    limit=limit,
                    since=parse_time(since, "since"),
                    until=parse_time(until, "until"),
                    as_of=when_as_of,
                    **thresholds,
                )
            )

        # Abstaining by default hid answers: a question sharing no content word with what
        # was said scores near 0 however well it is answered (bench.paraphrase_abstain:
        # abstain answered none of 30 such questions, which found their session first 83 %
        # of the time without it). So the default asks with abstain's request gate alone
        # (an explicit min_relevance of 0 keeps every episode of a request that passes) and,
        # when the gate leaves nothing, asks again for the closest and says they fit weakly:
        # nothing is hidden, and the model is told what the gate would have said.
        weak = False
        if abstain:
            result = ask(abstain=True)
        else:
            result = ask(abstain=True, min_relevance=0.0)
            if result.abstained:
                weak = True
                result = ask(abstain=False)
        now = when_as_of or datetime.now(UTC)
        episodes = result.episodes
        if not episodes:
            window = [
                f"{name} {absolute_time(value)}"
                for name, value in (
                    ("since", parse_time(since, "since")),
                    ("until", parse_time(until, "until")),
                    ("as of", when_as_of),
                )
                if value is not None
            ]
            if result.abstained:
                text = (
                    f"No memories of dataset {ds} fit this request (match "
                    f"{result.match or 0.0:.2f}: those that fit it too weakly were left out; "
                    "ask in the conversation's own words, or with abstain=false for the "
                    "closest ones)."
                )
            elif window:
                text = f"No memories of dataset {ds} {', '.join(window)}."
            elif result.episode_count == 0:
                text = (
                    f"No memories in dataset {ds} yet: messages are summarised into episodes "
                    "after end_thread or 30 minutes without new messages."
                )
            else:
                text = f"No memories of dataset {ds} match this request."
        else:
            threads = {e.thread_id: e.thread_label for e in episodes if e.thread_id}
            ids = "; ".join(f'"{label}" {tid}' if label else tid for tid, label in threads.items())
            events = sum(1 for e in episodes if e.kind == "event")
            count = _recall_count(len(episodes) - events, events, result.episode_count)
            text = f"{count} of dataset {ds}, oldest first (now: {absolute_time(now)}):\n\n"
            text += render_episodes(episodes, now=now, key_learnings=True)
            if ids:
                text += f"\n\n(Threads: {ids}. load_thread gives a thread's exact messages.)"
            if weak:
                text += (
                    f"\n\n(These fit the query only weakly (match {result.match or 0.0:.2f}): "
                    "a question in other words than the conversation's scores this low even "
                    "when its answer is here, but nothing here may answer it either. Read them "
                    "before relying on them.)"
                )
            if abstain and result.match is not None and not result.abstain_applied:
                text += (
                    "\n\n(Abstention is not available for this dataset's language or the "
                    "memory's model: these are the closest memories, and may not fit.)"
                )
        if not result.settled:
            text += (
                "\n\n(Memory of this dataset is still being written: "
                + (
                    "episodes are being summarised"
                    if result.episodes_pending
                    else "passages of recent episodes are being indexed"
                )
                + ". Asking again in a few seconds may answer better.)"
            )
        return _result(
            text,
            RecallOutput(
                dataset=ds,
                episode_count=result.episode_count,
                now=now,
                episodes=[_episode_out(e) for e in episodes],
                match=result.match,
                abstained=result.abstained,
                abstain_applied=result.abstain_applied,
                settling=not result.settled,
                weak_match=weak,
            ),
        )

    # ---------------------------------------------------------------- recall_procedures

    @server.tool(
        name="recall_procedures",
        title="How did we do this before?",
        description=(
            "Before acting on a task with tools, ask how it was done before: the procedures "
            "learned from earlier conversations that succeeded, best fit to `task` first. "
            "Each has its goal (the request it served, in the user's words), its numbered "
            "steps (the tool, what it was for, whether it changes something, and where each "
            "argument's value came from: the user, an earlier tool's result, or you) and its "
            "support (how often it worked and failed). Follow one only when its goal matches "
            "the task, with this conversation's values. Procedures that failed more often "
            "than they worked are left out."
        ),
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True),
    )
    def recall_procedures(
        task: Annotated[
            str | None,
            Field(
                description="The task, in words (e.g. the user's request); omit for the "
                "most supported procedures."
            ),
        ] = None,
        limit: Annotated[
            int | None,
            Field(ge=1, le=MAX_RECALL, description="How many procedures (default 3)."),
        ] = None,
        dataset: Dataset = None,
    ) -> Annotated[CallToolResult, ProceduresOutput]:
        ds = dataset_of(dataset)
        wanted = (task or "").strip() or None
        found = call(lambda c: c.recall_procedures(ds, wanted, limit=limit))
        if not found:
            text = (
                f"No procedures in dataset {ds} yet: they are learned from conversations with "
                "tool calls (saved with remember) whose outcome was recorded as a success "
                "(record_outcome)."
            )
        else:
            fit = "fit to this task first" if wanted else "most supported first"
            text = f"{len(found)} procedure(s) of dataset {ds}, {fit}.\n\n"
            text += render_procedures(found)
            text += (
                "\n\n(The values are the earlier conversations': use this conversation's. "
                "load_thread shows a source thread's messages.)"
            )
        return _result(
            text,
            ProceduresOutput(
                dataset=ds, task=wanted, procedures=[_procedure_out(p) for p in found]
            ),
        )

    # ---------------------------------------------------------------- search_episodes

    @server.tool(
        name="search_episodes",
        title="Search episodes",
        description=(
            "Find past episodes by their words alone (names, identifiers, exact phrases), "
            "best text match first, with no preference for recent ones. Prefer recall for "
            "ordinary questions; use this to look up a specific thing, e.g. when recall's "
            "preference for recent episodes hides an older one. Returns each episode's time, "
            "thread and summary."
        ),
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True),
    )
    def search_episodes(
        query: Annotated[str, Field(min_length=1, description="Words to look for.")],
        limit: Annotated[
            int, Field(ge=1, le=MAX_RECALL, description="How many episodes (default 5).")
        ] = 5,
        dataset: Dataset = None,
    ) -> Annotated[CallToolResult, SearchOutput]:
        ds = dataset_of(dataset)
        found = call(lambda c: c.search_episodes(ds, query, limit=limit))
        if not found:
            text = f"No episodes of dataset {ds} match {query!r}."
        else:
            blocks = []
            for i, s in enumerate(found, start=1):
                e = s.episode
                label = f'thread "{e.thread_label}" ' if e.thread_label else "thread "
                blocks.append(
                    f"{i}. [{_when(e.ended_at)}, {label}{e.thread_id}, "
                    f"match {s.relevance_score:.2f}]\n{e.summary.strip()}"
                )
            text = f"{len(found)} episode(s) of dataset {ds} matching {query!r}:\n\n" + (
                "\n\n".join(blocks)
            )
        return _result(text, SearchOutput(dataset=ds, episodes=[_episode_out(s) for s in found]))

    # ---------------------------------------------------------------- list_threads

    @server.tool(
        name="list_threads",
        title="List recent threads",
        description=(
            "List the most recently active conversation threads, newest first, with their "
            "ids, labels, message counts and last activity. Use it to find a thread_id to "
            "continue with remember or to read with load_thread."
        ),
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True),
    )
    def list_threads(
        limit: Annotated[int, Field(ge=1, le=100, description="How many threads.")] = 10,
        dataset: Dataset = None,
    ) -> Annotated[CallToolResult, ThreadsOutput]:
        ds = dataset_of(dataset)
        threads = call(lambda c: c.recent_threads(ds, limit))
        if not threads:
            text = f"Dataset {ds} has no threads yet."
        else:
            lines = [f"{len(threads)} most recently active thread(s) of dataset {ds}:"]
            for t in threads:
                label = f'"{t.label}" ' if t.label else ""
                lines.append(
                    f"- {label}{t.thread_id}: {t.message_count} messages "
                    f"({t.captured_sequence} summarised), last message "
                    f"{_when(t.last_message_at)}"
                )
            text = "\n".join(lines)
        return _result(text, ThreadsOutput(dataset=ds, threads=[_thread_out(t) for t in threads]))

    # ---------------------------------------------------------------- load_thread

    @server.tool(
        name="load_thread",
        title="Load a thread",
        description=(
            "Read one thread's messages verbatim, oldest first, with their sequence, time "
            "and speaker, and the tools called and their results. Use it when a summary from recall is not enough and the exact "
            "words matter. Returns the last `limit` messages, or `limit` messages from "
            "start_sequence on."
        ),
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True),
    )
    def load_thread(
        thread_id: Annotated[str, Field(description="The thread to read.")],
        limit: Annotated[
            int, Field(ge=1, le=MAX_LOAD, description="How many messages (default 50).")
        ] = 50,
        start_sequence: Annotated[
            int | None,
            Field(
                ge=1,
                description="First message to return (1 is the first); omit for the "
                "last `limit` messages.",
            ),
        ] = None,
        dataset: Dataset = None,
    ) -> Annotated[CallToolResult, LoadThreadOutput]:
        ds = dataset_of(dataset)

        def run(c: EpisodicClient) -> tuple[Thread, list[SdkMessage]]:
            thread = thread_of(c, thread_id, ds)
            first = start_sequence or max(1, thread.message_count - limit + 1)
            if thread.message_count == 0 or first > thread.message_count:
                return thread, []
            return thread, c.load_session(
                thread.thread_id, start_sequence=first, end_sequence=first + limit - 1
            )

        thread, messages = call(run)
        label = f' "{thread.label}"' if thread.label else ""
        head = (
            f"Thread{label} {thread.thread_id} (dataset {thread.dataset}): "
            f"{thread.message_count} messages, {thread.captured_sequence} summarised into "
            "episodes"
        )
        if messages:
            head += f"; messages {messages[0].sequence}-{messages[-1].sequence}:"
            lines = [head]
            lines += [_message_line(m) for m in messages]
            text = "\n".join(lines)
        else:
            text = head + "; no messages in that range."
        return _result(
            text,
            LoadThreadOutput(
                thread=_thread_out(thread),
                messages=[
                    MessageOut(
                        sequence=m.sequence,
                        role=m.role,
                        name=_speaker(m),
                        content=m.content,
                        created_at=m.created_at,
                        tool_calls=[
                            ToolCallOut(id=c.id, name=c.name, arguments=c.arguments)
                            for c in m.tool_calls
                        ],
                        tool_call_id=m.tool_call_id or None,
                    )
                    for m in messages
                ],
            ),
        )

    return server


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("episodic")
    except Exception:  # not installed as a distribution (a source tree)
        return ""


# --------------------------------------------------------------------------- running


def _valid_id(value: object) -> bool:
    """A JSON-RPC id MCP allows: a string or an integer (not null, a number with a fraction,
    or a boolean)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _jsonrpc_error(id_: str | int | None, code: int, message: str) -> SessionMessage:
    return SessionMessage(
        JSONRPCError(jsonrpc="2.0", id=id_, error=ErrorData(code=code, message=message))
    )


def _invalid_request(value: object, err: ValidationError) -> SessionMessage:
    """The -32600 answer to JSON ``value`` that is no valid JSON-RPC message (``err`` says
    why), with the request's id when it is a request with a valid one."""
    if isinstance(value, list):
        reason = "batches are not supported: send one JSON-RPC message per line"
        return _jsonrpc_error(None, INVALID_REQUEST, f"Invalid request: {reason}")
    if not isinstance(value, dict):
        reason = "a JSON-RPC message is a JSON object"
        return _jsonrpc_error(None, INVALID_REQUEST, f"Invalid request: {reason}")
    raw_id = value.get("id")
    id_ = raw_id if "method" in value and _valid_id(raw_id) else None
    problems = err.errors(include_url=False)
    kind = "JSONRPCRequest" if "id" in value else "JSONRPCNotification"
    if "method" not in value:
        kind = "JSONRPCResponse"
    if problems[0]["type"] == "json_invalid":  # what Python's json reads, jiter does not
        reason = (
            f"{problems[0]['msg']} (a lone surrogate escape such as \\ud800 is no Unicode text)"
        )
    elif value.get("jsonrpc") != "2.0":
        reason = '"jsonrpc" must be "2.0"'
    elif "id" in value and not _valid_id(raw_id):
        reason = "id must be a string or an integer"
    else:
        mine = [p for p in problems if p["loc"][:1] == (kind,)] or problems
        reason = "; ".join(
            f"{'.'.join(str(part) for part in p['loc'][1:]) or 'message'}: {p['msg']}"
            for p in mine[:3]
        )
    return _jsonrpc_error(id_, INVALID_REQUEST, f"Invalid request: {reason}")


def _answer_to_line(line: str) -> SessionMessage | None:
    """The error answering a line of stdio input that is no valid JSON-RPC message, or None
    for one the server is to serve: -32700 (id null) for a line that is not JSON, -32600
    for JSON that is no valid message (JSON-RPC 2.0). The SDK reads a request with an
    invalid id as a notification, which gets no answer either: so is one with an ``id``."""
    try:
        message = jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as err:
        try:
            value = json.loads(line)  # Python's reader: lone surrogates are JSON to it
        except (ValueError, RecursionError):
            reason = err.errors(include_url=False)[0]["msg"]
            return _jsonrpc_error(None, PARSE_ERROR, f"Parse error: {reason}")
        return _invalid_request(value, err)
    if isinstance(message, JSONRPCNotification):
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):  # pragma: no cover - jiter read it
            return None
        if isinstance(value, dict) and "id" in value:
            reason = "id must be a string or an integer"
            return _jsonrpc_error(None, INVALID_REQUEST, f"Invalid request: {reason}")
    return None


class _UnownedText(io.TextIOWrapper):
    """A text layer whose close leaves the binary stream open (it is not ours to close)."""

    def close(self) -> None:
        with suppress(ValueError):
            self.detach()


class _CheckedLines:
    """stdin's lines for the SDK's stdio transport, JSON-RPC messages only: a line that is
    none is answered here, on the transport's write stream, and not passed on (the SDK
    turns it into an exception the server drops, so the host would wait for an answer
    until its own timeout). Blank lines are no messages and get no answer."""

    def __init__(self, source: anyio.AsyncFile[str]) -> None:
        self._source = source
        self._answers: Any = None
        self._ready = anyio.Event()

    def answer_on(self, write_stream: Any) -> None:
        self._answers = write_stream
        self._ready.set()

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self._source:
            if not line.strip():
                continue
            answer = _answer_to_line(line)
            if answer is None:
                yield line
                continue
            await self._ready.wait()
            try:
                await self._answers.send(answer)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return


@contextmanager
def _stdin_for_the_wire() -> Iterator[IO[bytes]]:
    """The host's messages on fd 0, read through a private duplicate while fd 0 points at
    the null device, as the SDK's stdio transport does when it reads stdin itself (nothing
    the server runs can read them); fd 0 is restored on exit. The duplicate is never
    closed: a worker thread may still block on it (the SDK's reason too)."""
    try:
        wire = os.dup(0)
    except OSError:
        yield sys.stdin.buffer
        return
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        yield os.fdopen(wire, "rb", closefd=False)
    finally:
        os.dup2(wire, 0)


async def _serve_stdio(server: MCPServer[Any]) -> None:
    """``server.run("stdio")`` (MCPServer.run_stdio_async) with stdin's lines checked
    first (:class:`_CheckedLines`): the SDK's stdio_server takes the lines from us and
    still owns stdout. ``_lowlevel_server`` is what run_stdio_async runs (mcp is pinned)."""
    lowlevel = server._lowlevel_server
    with _stdin_for_the_wire() as wire:
        text = _UnownedText(wire, encoding="utf-8", errors="replace")
        lines = _CheckedLines(anyio.wrap_file(text))
        async with stdio_server(stdin=cast(Any, lines)) as (read_stream, write_stream):
            lines.answer_on(write_stream)
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


async def _serve_http(server: MCPServer[Any], host: str, port: int, path: str) -> None:
    """Streamable HTTP on ``host:port`` at ``path``. The socket is bound first, so the
    line announcing the URL names the real port (``--port 0`` picks a free one)."""
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=path, host=host)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    print(f"episodic mcp: streamable HTTP on http://{shown}:{bound}{path}", file=sys.stderr)
    sys.stderr.flush()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


def serve(
    client: EpisodicClient,
    *,
    dataset: str | None = None,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    path: str = "/mcp",
) -> None:
    """Runs the MCP server until the host disconnects (stdio) or it is interrupted (HTTP)."""
    server = build_server(client, dataset or os.environ.get(DATASET_ENV) or None)
    if transport == "stdio":
        anyio.run(_serve_stdio, server)
    else:
        anyio.run(_serve_http, server, host, port, path)
