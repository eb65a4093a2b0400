"""The tools that read memory: ``recall``, ``recall_procedures``, ``search_episodes``,
``list_threads`` and ``load_thread``."""

# No ``from __future__ import annotations``: MCPServer reads the tools' annotations, and
# those name values of :func:`register_read_tools`'s scope (the dataset help text).

from datetime import UTC, datetime
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from episodic.mcp.answers import (
    episode_out,
    message_line,
    procedure_out,
    recall_count,
    speaker_of,
    thread_out,
    tool_result,
    when_of,
)
from episodic.mcp.arguments import parse_time
from episodic.mcp.memory import Memory
from episodic.mcp.schemas import (
    LoadThreadOutput,
    MessageOut,
    ProceduresOutput,
    RecallOutput,
    SearchOutput,
    ThreadsOutput,
    ToolCallOut,
)
from episodic.render import absolute_time, render_episodes, render_procedures
from episodic.sdk.client import EpisodicClient, Thread
from episodic.sdk.client import Message as SdkMessage

MAX_RECALL = 20
MAX_LOAD = 500


def register_read_tools(server: MCPServer[Any], memory: Memory) -> None:
    """Registers ``recall``, ``recall_procedures``, ``search_episodes``, ``list_threads``
    and ``load_thread`` on ``server``, each over ``memory``."""
    call, dataset_of, thread_of = memory.call, memory.dataset_of, memory.thread_of
    Dataset = Annotated[str | None, Field(description=memory.dataset_help)]

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
        # was said scores near 0 however well it is answered (bench.quality.paraphrase_abstain:
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
            count = recall_count(len(episodes) - events, events, result.episode_count)
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
        return tool_result(
            text,
            RecallOutput(
                dataset=ds,
                episode_count=result.episode_count,
                now=now,
                episodes=[episode_out(e) for e in episodes],
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
        return tool_result(
            text,
            ProceduresOutput(dataset=ds, task=wanted, procedures=[procedure_out(p) for p in found]),
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
                    f"{i}. [{when_of(e.ended_at)}, {label}{e.thread_id}, "
                    f"match {s.relevance_score:.2f}]\n{e.summary.strip()}"
                )
            text = f"{len(found)} episode(s) of dataset {ds} matching {query!r}:\n\n" + (
                "\n\n".join(blocks)
            )
        return tool_result(text, SearchOutput(dataset=ds, episodes=[episode_out(s) for s in found]))

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
                    f"{when_of(t.last_message_at)}"
                )
            text = "\n".join(lines)
        return tool_result(
            text, ThreadsOutput(dataset=ds, threads=[thread_out(t) for t in threads])
        )

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
            lines += [message_line(m) for m in messages]
            text = "\n".join(lines)
        else:
            text = head + "; no messages in that range."
        return tool_result(
            text,
            LoadThreadOutput(
                thread=thread_out(thread),
                messages=[
                    MessageOut(
                        sequence=m.sequence,
                        role=m.role,
                        name=speaker_of(m),
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
