"""The tools' arguments and answers as pydantic models: a message to remember with its tool
calls (:class:`MessageIn`, OpenAI's chat format), and the structured content of each tool's
answer (``…Output``), which MCPServer publishes as the tool's output schema."""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator


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
