"""The tools that write memory: ``remember``, ``end_thread``, ``record_outcome`` and
``record_event``."""

# No ``from __future__ import annotations``: MCPServer reads the tools' annotations, and
# those name values of :func:`register_write_tools`'s scope (the dataset help text).

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from episodic.mcp.answers import tool_result, when_of
from episodic.mcp.arguments import parse_time
from episodic.mcp.memory import Memory
from episodic.mcp.schemas import (
    EndThreadOutput,
    MessageIn,
    RecordEventOutput,
    RecordOutcomeOutput,
    RememberOutput,
)
from episodic.sdk.client import EpisodicClient, Thread


def register_write_tools(server: MCPServer[Any], memory: Memory) -> None:
    """Registers ``remember``, ``end_thread``, ``record_outcome`` and ``record_event`` on
    ``server``, each over ``memory``."""
    call, dataset_of, thread_of = memory.call, memory.dataset_of, memory.thread_of
    Dataset = Annotated[str | None, Field(description=memory.dataset_help)]

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

        started: list[str] = []  # the thread this call created, if any

        def run(c: EpisodicClient) -> tuple[Thread, bool, Any]:
            if thread_id:
                thread = thread_of(c, thread_id, ds)
                return thread, False, c.add_messages(thread.thread_id, items)
            thread = c.create_thread(ds, label=label or "")
            started.append(thread.thread_id)
            return thread, True, c.add_messages(thread.thread_id, items)

        try:
            thread, created, result = call(run)
        except ToolError as err:
            if not started:
                raise
            # The messages were refused after their thread was created (a writer cannot
            # delete it): name it, so the corrected call fills it rather than leaving one
            # more empty thread in list_threads each time the model tries again.
            raise ToolError(
                f"{err} — thread {started[0]} was started for these messages and holds "
                f"none of them: pass thread_id={started[0]} with the corrected messages "
                "rather than starting another"
            ) from None
        seqs = result.sequences
        span = f"{seqs[0]}" if len(seqs) == 1 else f"{seqs[0]}-{seqs[-1]}"
        start = f"started thread {thread.thread_id}" if created else f"thread {thread.thread_id}"
        name = f' "{thread.label}"' if thread.label else ""
        text = (
            f"Remembered {len(seqs)} message(s) in {start}{name} (dataset {thread.dataset}), "
            f"sequence {span}. Pass thread_id={thread.thread_id} to continue this "
            "conversation; call end_thread when it is done."
        )
        return tool_result(
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
        return tool_result(
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
        return tool_result(
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
            f"({when_of(event.ended_at)}); recall returns it with the episodes."
        )
        return tool_result(
            text,
            RecordEventOutput(
                event_id=event.episode_id,
                dataset=ds,
                occurred_at=event.ended_at,
                stored=result.stored,
            ),
        )
