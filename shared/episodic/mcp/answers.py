"""What a tool answers (:func:`tool_result`): concise text for the model and structured content
for applications, built from the SDK's results — episodes, procedures, threads and messages
as the models of :mod:`episodic.mcp.schemas` and as text, with relative and absolute
times."""

from datetime import datetime

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

from episodic.mcp.schemas import (
    EpisodeOut,
    ProcedureOut,
    ProcedureSourceOut,
    ProcedureStepOut,
    ThreadOut,
)
from episodic.render import absolute_time, relative_time
from episodic.sdk.client import Episode as SdkEpisode
from episodic.sdk.client import Message as SdkMessage
from episodic.sdk.client import ScoredEpisode, ScoredProcedure, Thread
from episodic.tool_calls import render_call


def episode_out(item: SdkEpisode | ScoredEpisode) -> EpisodeOut:
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


def procedure_out(item: ScoredProcedure) -> ProcedureOut:
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


def thread_out(t: Thread) -> ThreadOut:
    return ThreadOut(
        thread_id=t.thread_id,
        dataset=t.dataset,
        label=t.label,
        message_count=t.message_count,
        summarised_count=t.captured_sequence,
        created_at=t.created_at,
        last_message_at=t.last_message_at,
    )


def speaker_of(m: SdkMessage) -> str | None:
    name = m.metadata.get("name") or m.metadata.get("speaker")
    if isinstance(name, str) and name.strip():
        return name
    return m.name or None  # a tool message: the tool's name


def message_line(m: SdkMessage) -> str:
    """A message as load_thread shows it: its words, then each call it made
    (``[called name(arg="value") id call_1]``); a tool's result says which call it answers."""
    who = speaker_of(m)
    if m.role == "tool":
        answers = f", answers {m.tool_call_id}" if m.tool_call_id else ""
        speaker = f"tool {m.name}{answers}" if m.name else f"tool{answers}"
    else:
        speaker = f"{who} ({m.role})" if who else m.role
    parts = [m.content] if m.content else []
    parts += [f"[called {render_call(c)} id {c.id}]" for c in m.tool_calls]
    return f"#{m.sequence} [{when_of(m.created_at)}] {speaker}: {' '.join(parts)}"


def when_of(value: datetime | None, now: datetime | None = None) -> str:
    if value is None:
        return "unknown time"
    return f"{relative_time(value, now)}, {absolute_time(value)}"


def tool_result(text: str, output: BaseModel) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=output.model_dump(mode="json"),
    )


def recall_count(summaries: int, events: int, episode_count: int) -> str:
    """What a recall answer shows, counted as the dataset counts it: ``episode_count``
    counts its episodes, not its events, so the events shown are counted apart."""
    parts = []
    if summaries or not events:
        total = max(episode_count, summaries)
        parts.append(f"{summaries} of {total} episode{'' if total == 1 else 's'}")
    if events:
        parts.append(f"{events} event{'' if events == 1 else 's'}")
    return " and ".join(parts)
