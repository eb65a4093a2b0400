"""One thread: its messages (``load_session``) grouped by the windows of its episodes
(``iter_episodes(dataset, thread_id=…)``), so the sequence windows are visible. Windows are
contiguous and disjoint, so every message belongs to at most one episode; the messages after
the last window are those no episode covers yet.

Tool calls (issue 39) are shown where they happened: an assistant message lists each call
it made (the tool's name and its arguments, pretty-printed JSON), and a tool message says
which tool answered and which call it answers, linked to that call when it is on the page."""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass

from episodic.console.views import BadRequest, Ctx, Page
from episodic.console.views.html import Safe, html, join, url, when
from episodic.console.views.layout import status_badge
from episodic.sdk.client import Episode, Message

MESSAGES_PER_PAGE = 500
#: The largest message sequence (a sequence is an int64 on the wire).
MAX_SEQUENCE = 2**63 - 1
SUMMARY_PREVIEW = 200


@dataclass
class Run:
    """Consecutive shown messages of one episode (or of none)."""

    episode: Episode | None
    number: int  # the episode's place in the thread, 1-based (0: none)
    messages: list[Message]


def group_by_window(messages: list[Message], episodes: list[Episode]) -> list[Run]:
    """Messages in order, cut into runs by the episode window each falls in."""
    ordered = sorted(episodes, key=lambda e: e.start_sequence)
    starts = [e.start_sequence for e in ordered]
    runs: list[Run] = []
    for message in messages:
        i = bisect.bisect_right(starts, message.sequence) - 1
        episode = None
        if i >= 0 and ordered[i].start_sequence <= message.sequence <= ordered[i].end_sequence:
            episode = ordered[i]
        if runs and runs[-1].episode is episode:
            runs[-1].messages.append(message)
        else:
            runs.append(Run(episode, i + 1 if episode else 0, [message]))
    return runs


def _preview(text: str, limit: int = SUMMARY_PREVIEW) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: Where each tool call shown on a page is: call id -> the element id of its entry.
CallAnchors = dict[str, str]


def call_anchors(messages: list[Message]) -> CallAnchors:
    """The element id of every call the shown messages made (ids made of the message's
    sequence and the call's place: a call id is the model's text, not ours to put in a URL)."""
    return {
        c.id: f"m-{m.sequence}-call-{i}"
        for m in messages
        for i, c in enumerate(m.tool_calls, start=1)
    }


def _arguments(text: str) -> str:
    """A call's arguments for reading: its JSON object pretty-printed, else as sent."""
    try:
        parsed = json.loads(text or "{}")
    except ValueError:
        return text
    if parsed == {}:
        return ""
    return json.dumps(parsed, indent=2, ensure_ascii=False)


def tool_calls_list(m: Message) -> Safe:
    """An assistant message's calls: each the tool's name, its id and its arguments."""
    if not m.tool_calls:
        return Safe("")
    items = []
    for i, c in enumerate(m.tool_calls, start=1):
        args = _arguments(c.arguments)
        items.append(
            html(
                '<li class="tool-call" id="m-{seq}-call-{i}"><p class="tool-head">'
                '<span class="tool-verb">calls</span> <code class="tool-name">{name}</code> '
                '<span class="muted">call <code class="call-id">{id}</code></span></p>'
                "{args}</li>",
                seq=m.sequence,
                i=i,
                name=c.name,
                id=c.id,
                args=html(
                    '<pre class="tool-args" aria-label="Arguments of {name}">{a}</pre>',
                    name=c.name,
                    a=args,
                )
                if args
                else Safe('<p class="tool-args muted">no arguments</p>'),
            )
        )
    return html(
        '<ol class="tool-calls" aria-label="Tool calls of message {seq}">{items}</ol>',
        seq=m.sequence,
        items=join(items),
    )


def _answers(m: Message, anchors: CallAnchors) -> Safe:
    """A tool message's header: the tool that answered, and the call it answers."""
    tool = html(' <code class="tool-name">{n}</code>', n=m.name) if m.name else Safe("")
    if not m.tool_call_id:
        return html('{tool} <span class="answers">result</span>', tool=tool)
    target = anchors.get(m.tool_call_id)
    call = (
        html('<a href="#{a}"><code class="call-id">{id}</code></a>', a=target, id=m.tool_call_id)
        if target
        else html('<code class="call-id">{id}</code>', id=m.tool_call_id)
    )
    return html('{tool} <span class="answers">result of call {call}</span>', tool=tool, call=call)


def message_item(m: Message, ctx: Ctx, anchors: CallAnchors | None = None) -> Safe:
    name = m.metadata.get("name") if isinstance(m.metadata, dict) else None
    answers = _answers(m, anchors or {}) if m.role == "tool" else Safe("")
    return html(
        '<li class="msg role-{role}" id="m-{seq}"><p class="meta">'
        '<span class="seq">#{seq}</span> <span class="role">{role}</span>{name}{answers} {at}'
        '</p><p class="text">{content}</p>{calls}</li>',
        role=m.role,
        seq=m.sequence,
        name=html(' <span class="name">{n}</span>', n=name) if name else "",
        answers=answers,
        at=when(m.created_at, ctx.now),
        content=m.content,
        calls=tool_calls_list(m),
    )


def _run_section(
    run: Run, total: int, first_shown: int, last_shown: int, ctx: Ctx, anchors: CallAnchors
) -> Safe:
    a, b = run.messages[0].sequence, run.messages[-1].sequence
    items = join(message_item(m, ctx, anchors) for m in run.messages)
    e = run.episode
    if e is None:
        return html(
            '<section class="window window-none" aria-labelledby="w-none-{a}">'
            '<h3 id="w-none-{a}" class="window-head"><span class="badge status-uncaptured">'
            "not in an episode yet</span> messages {a}–{b}</h3>"
            '<ol class="messages">{items}</ol></section>',
            a=a,
            b=b,
            items=items,
        )
    cut = []
    if e.start_sequence < first_shown:
        cut.append(f"starts at message {e.start_sequence}, above")
    if e.end_sequence > last_shown:
        cut.append(f"continues to message {e.end_sequence}, below")
    return html(
        '<section class="window window-{status}" aria-labelledby="w-{id}" id="window-{id}">'
        '<h3 id="w-{id}" class="window-head">{badge} Episode {n} of {total}: messages '
        '{start}–{end}{cut} <span class="muted">· {trigger} trigger · ended {ended}</span> '
        '<a href="{href}">details<span class="sr-only"> of episode {n}</span></a></h3>'
        "{summary}"
        '<ol class="messages">{items}</ol></section>',
        status=e.status,
        id=e.episode_id,
        badge=status_badge(e.status),
        n=run.number,
        total=total,
        start=e.start_sequence,
        end=e.end_sequence,
        cut=f" ({'; '.join(cut)})" if cut else "",
        trigger=e.trigger,
        ended=when(e.ended_at, ctx.now),
        href=url("/episode", id=e.episode_id),
        summary=html('<p class="window-summary">{s}</p>', s=_preview(e.summary))
        if e.summary
        else (
            html('<p class="window-summary error-text">error: {s}</p>', s=e.error)
            if e.error
            else ""
        ),
        items=items,
    )


def episodes_table(episodes: list[Episode], ctx: Ctx) -> Safe:
    ordered = sorted(episodes, key=lambda e: e.start_sequence)
    rows = [
        html(
            '<tr><th scope="row"><a href="{href}">Episode {n}</a></th><td>{a}–{b}</td>'
            "<td>{badge}</td><td>{trigger}</td><td>{ended}</td><td>{summary}</td></tr>",
            href=url("/episode", id=e.episode_id),
            n=i,
            a=e.start_sequence,
            b=e.end_sequence,
            badge=status_badge(e.status),
            trigger=e.trigger,
            ended=when(e.ended_at, ctx.now),
            summary=_preview(e.summary or (f"error: {e.error}" if e.error else ""), 120),
        )
        for i, e in enumerate(ordered, start=1)
    ]
    if not rows:
        return Safe('<p class="empty">No episode covers this thread yet.</p>')
    return html(
        '<table class="list" id="thread-episodes"><caption>Episodes of this thread, in window '
        'order</caption><thead><tr><th scope="col">Episode</th><th scope="col">Window '
        '(messages)</th><th scope="col">Status</th><th scope="col">Trigger</th>'
        '<th scope="col">Ended</th><th scope="col">Summary</th></tr></thead>'
        "<tbody>{rows}</tbody></table>",
        rows=join(rows),
    )


def thread(ctx: Ctx) -> Page:
    thread_id = ctx.required("id")
    try:
        first = max(1, int(ctx.arg("from", "1")))
    except ValueError:
        raise BadRequest("'from' must be a message number") from None
    if first > MAX_SEQUENCE:
        raise BadRequest(f"'from' must be a message number of at most {MAX_SEQUENCE}")
    t = ctx.client.get_thread(thread_id)
    last = min(first + MESSAGES_PER_PAGE - 1, MAX_SEQUENCE)
    futures = (
        ctx.pool.submit(
            ctx.client.load_session, thread_id, start_sequence=first, end_sequence=last
        ),
        # Windows only: the thread's events (one moment each) have none to group by.
        ctx.pool.submit(
            lambda: [
                e
                for e in ctx.client.iter_episodes(t.dataset, thread_id=thread_id)
                if not e.is_event
            ]
        ),
    )
    messages, episodes = futures[0].result(), futures[1].result()
    runs = group_by_window(messages, episodes)
    shown_last = messages[-1].sequence if messages else first
    anchors = call_anchors(messages)
    windows = (
        join(_run_section(r, len(episodes), first, shown_last, ctx, anchors) for r in runs)
        if runs
        else Safe('<p class="empty">No messages here.</p>')
    )
    pager = []
    if first > 1:
        pager.append(
            html(
                '<a href="{href}" rel="prev">← messages {a}–{b}</a>',
                href=url("/thread", id=thread_id, **{"from": max(1, first - MESSAGES_PER_PAGE)}),
                a=max(1, first - MESSAGES_PER_PAGE),
                b=first - 1,
            )
        )
    if t.message_count > last:
        pager.append(
            html(
                '<a href="{href}" rel="next">messages {a}–{b} →</a>',
                href=url("/thread", id=thread_id, **{"from": last + 1}),
                a=last + 1,
                b=min(t.message_count, last + MESSAGES_PER_PAGE),
            )
        )
    facts = html(
        '<dl class="facts"><dt>Thread</dt><dd><code>{id}</code></dd>'
        '<dt>Dataset</dt><dd><a href="{ds_href}">{ds}</a></dd>'
        "<dt>Messages</dt><dd>{count} ({captured} covered by episodes)</dd>"
        "<dt>Created</dt><dd>{created}</dd><dt>Last message</dt><dd>{last}</dd>"
        "<dt>Last ended (EndThread)</dt><dd>{ended}</dd></dl>",
        id=t.thread_id,
        ds_href=url("/dataset", dataset=t.dataset),
        ds=t.dataset,
        count=t.message_count,
        captured=t.captured_sequence,
        created=when(t.created_at, ctx.now),
        last=when(t.last_message_at, ctx.now),
        ended=when(t.ended_at, ctx.now),
    )
    legend = Safe(
        '<p class="legend" id="legend">Each box is one episode\'s window of messages; its '
        "heading names its status in words: "
        '<span class="badge status-completed">current</span> '
        '<span class="badge status-archived">archived</span> '
        '<span class="badge status-pending">pending</span> '
        '<span class="badge status-processing">processing</span> '
        '<span class="badge status-failed">failed</span> '
        '<span class="badge status-uncaptured">not in an episode yet</span></p>'
    )
    body = html(
        '{facts}<h2>Episodes</h2>{table}<h2 id="messages-heading">Messages {a}–{b} and their '
        'episode windows</h2>{legend}<nav class="pager" aria-label="Message pages">{pager}</nav>'
        '<div class="windows" aria-describedby="legend">{windows}</div>'
        '<nav class="pager" aria-label="Message pages, bottom">{pager}</nav>',
        facts=facts,
        table=episodes_table(episodes, ctx),
        a=first if messages else 0,
        b=shown_last if messages else 0,
        legend=legend,
        pager=join(pager, " · "),
        windows=windows,
    )
    title = f"Thread {t.label}" if t.label else f"Thread {t.thread_id[:8]}"
    return Page(title, body, section="threads", dataset=t.dataset)
