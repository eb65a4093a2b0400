"""A dataset's episodes on a timeline: time across, threads down (a page of the dataset's
threads, most recently active first). Each episode is a link in an inline SVG: hovering
shows its summary (the SVG title), clicking or Enter opens its details in a focusable panel
(htmx swaps them in and the console's script moves focus there; without scripts the link
loads the page with the panel filled). The same episodes are listed in a table too."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from episodic.console.views import Ctx, Page
from episodic.console.views.episode import details
from episodic.console.views.html import Safe, html, join, url, when
from episodic.console.views.layout import STATUS_LABELS, next_page_link, status_badge
from episodic.sdk.client import Episode, EpisodicRpcError, Thread

THREADS_PER_PAGE = 25
LABEL_W = 210
PLOT_W = 880
RIGHT_PAD = 30
ROW_H = 30
BAR_H = 18
AXIS_H = 44
MIN_MARK_W = 6
LABEL_CHARS = 28

#: Tick steps from a minute to a year; the first that gives at most MAX_TICKS is used.
TICK_STEPS = (
    60,
    5 * 60,
    15 * 60,
    3600,
    3 * 3600,
    6 * 3600,
    12 * 3600,
    86400,
    2 * 86400,
    7 * 86400,
    14 * 86400,
    30 * 86400,
    91 * 86400,
    182 * 86400,
    365 * 86400,
)
MAX_TICKS = 8


@dataclass(frozen=True)
class Row:
    thread: Thread
    episodes: list[Episode]
    error: str = ""


def _span(e: Episode) -> tuple[datetime | None, datetime | None]:
    start = e.started_at or e.ended_at or e.created_at
    end = e.ended_at or e.started_at or e.created_at
    return start, end


def _bounds(rows: list[Row]) -> tuple[datetime, datetime]:
    times = [t for r in rows for e in r.episodes for t in _span(e) if t is not None]
    if not times:
        now = datetime.now(UTC)
        return now - timedelta(days=1), now
    lo, hi = min(times), max(times)
    if hi - lo < timedelta(minutes=10):
        mid = lo + (hi - lo) / 2
        lo, hi = mid - timedelta(minutes=5), mid + timedelta(minutes=5)
    pad = (hi - lo) * 0.02
    return lo - pad, hi + pad


def _ticks(lo: datetime, hi: datetime) -> tuple[list[datetime], int]:
    span = (hi - lo).total_seconds()
    step = next((s for s in TICK_STEPS if span / s <= MAX_TICKS), None)
    if step is None:
        step = 365 * 86400 * math.ceil(span / (365 * 86400 * MAX_TICKS))
    first = math.ceil(lo.timestamp() / step) * step
    out = []
    t = first
    while t <= hi.timestamp():
        out.append(datetime.fromtimestamp(t, UTC))
        t += step
    return out, step


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _mark_label(e: Episode, number: int, thread: str) -> str:
    start, end = _span(e)
    when_text = ""
    if start and end:
        when_text = (
            f"{start.astimezone(UTC):%Y-%m-%d %H:%M} to {end.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
        )
    return (
        f"Episode {number} of thread {thread}: {STATUS_LABELS.get(e.status, e.status)}, "
        f"messages {e.start_sequence} to {e.end_sequence}, {when_text}, "
        f"event {e.event_type or 'none'}, trigger {e.trigger}. Show details"
    )


def _tooltip(e: Episode) -> str:
    lines = [
        f"{STATUS_LABELS.get(e.status, e.status)} · {e.event_type or 'no event type'} · "
        f"trigger {e.trigger} · messages {e.start_sequence}–{e.end_sequence}",
        _clip(" ".join((e.summary or e.error or "no summary").split()), 300),
    ]
    lines += [f"• {_clip(k, 120)}" for k in e.key_learnings[:3]]
    if len(e.key_learnings) > 3:
        lines.append(f"… and {len(e.key_learnings) - 3} more key learnings")
    if e.entities:
        lines.append("entities: " + _clip(", ".join(e.entities), 120))
    return "\n".join(lines)


def chart(rows: list[Row], dataset: str, page_token: str) -> Safe:
    """The SVG: an axis of time, a row per thread, a link per episode."""
    lo, hi = _bounds(rows)
    span = (hi - lo).total_seconds() or 1.0

    def x(t: datetime) -> float:
        return LABEL_W + (t - lo).total_seconds() / span * PLOT_W

    height = AXIS_H + ROW_H * max(1, len(rows)) + 10
    width = LABEL_W + PLOT_W + RIGHT_PAD
    ticks, step = _ticks(lo, hi)
    fmt = "%Y-%m-%d" if step >= 86400 else "%m-%d %H:%M"
    parts: list[Safe] = [
        Safe(
            "<defs>"
            '<pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(45)"><rect width="6" height="6" class="hatch-bg"/>'
            '<line x1="0" y1="0" x2="0" y2="6" class="hatch-line"/></pattern>'
            "</defs>"
        )
    ]
    for t in ticks:
        parts.append(
            html(
                '<g class="tick"><line x1="{x}" y1="{y1}" x2="{x}" y2="{y2}"/>'
                '<text x="{x}" y="18" text-anchor="middle">{label}</text></g>',
                x=f"{x(t):.1f}",
                y1=AXIS_H - 14,
                y2=height - 6,
                label=t.strftime(fmt),
            )
        )
    for i, row in enumerate(rows):
        y = AXIS_H + i * ROW_H
        label = row.thread.label or row.thread.thread_id[:8]
        parts.append(
            html(
                '<a href="{href}" class="row-label"><title>{full}</title>'
                '<text x="8" y="{ty}">{label}</text></a>'
                '<line class="row-line" x1="{x0}" y1="{ly}" x2="{x1}" y2="{ly}"/>',
                href=url("/thread", id=row.thread.thread_id),
                full=f"Thread {label} ({row.thread.message_count} messages)",
                ty=y + 19,
                label=_clip(label, LABEL_CHARS),
                x0=LABEL_W,
                x1=LABEL_W + PLOT_W,
                ly=y + ROW_H / 2,
            )
        )
        ordered = sorted(row.episodes, key=lambda e: e.start_sequence)
        for number, e in enumerate(ordered, start=1):
            start, end = _span(e)
            if start is None or end is None:
                continue
            x0 = x(start)
            w = max(MIN_MARK_W, x(end) - x0)
            parts.append(
                html(
                    '<a href="{href}" class="mark status-{status}" id="mark-{id}" '
                    'data-episode="{id}" data-details="{fragment}" aria-label="{aria}">'
                    "<title>{tip}</title>"
                    '<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="3"/></a>',
                    href=url(
                        "/timeline", dataset=dataset, page_token=page_token, episode=e.episode_id
                    )
                    + "#details",
                    status=e.status,
                    id=e.episode_id,
                    fragment=url("/episode", id=e.episode_id, fragment="details"),
                    aria=_mark_label(e, number, label),
                    tip=_tooltip(e),
                    x=f"{x0:.1f}",
                    y=y + (ROW_H - BAR_H) / 2,
                    w=f"{w:.1f}",
                    h=BAR_H,
                )
            )
    return html(
        '<div class="chart-scroll" tabindex="0" role="group" aria-label="Timeline chart, '
        'scrolls sideways">'
        '<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        'viewBox="0 0 {w} {h}" aria-labelledby="chart-title chart-desc">'
        '<title id="chart-title">Episodes of {ds} over time</title>'
        '<desc id="chart-desc">Time runs left to right from {lo} to {hi}; each row is a '
        "thread; each box is an episode spanning its first to last message. Every box is a "
        "link to its details.</desc>{parts}</svg></div>",
        w=width,
        h=height,
        ds=dataset,
        lo=lo.strftime("%Y-%m-%d %H:%M UTC"),
        hi=hi.strftime("%Y-%m-%d %H:%M UTC"),
        parts=join(parts),
    )


def _table(rows: list[Row], ctx: Ctx) -> Safe:
    items = []
    for row in rows:
        label = row.thread.label or row.thread.thread_id[:8]
        for e in sorted(row.episodes, key=lambda e: e.start_sequence):
            items.append(
                html(
                    '<tr><th scope="row"><a href="{href}">{thread}</a></th><td>{a}–{b}</td>'
                    "<td>{badge}</td><td>{started}</td><td>{ended}</td><td>{event}</td>"
                    '<td>{trigger}</td><td><a href="{ep}">details<span class="sr-only"> of '
                    "episode {short}</span></a></td></tr>",
                    href=url("/thread", id=row.thread.thread_id),
                    thread=label,
                    a=e.start_sequence,
                    b=e.end_sequence,
                    badge=status_badge(e.status),
                    started=when(e.started_at, ctx.now),
                    ended=when(e.ended_at, ctx.now),
                    event=e.event_type or "–",
                    trigger=e.trigger,
                    ep=url("/episode", id=e.episode_id),
                    short=e.episode_id[:8],
                )
            )
    return html(
        '<details class="as-table"><summary>The same episodes as a table ({n})</summary>'
        '<table class="list"><caption>Episodes on this page of the timeline</caption><thead>'
        '<tr><th scope="col">Thread</th><th scope="col">Window</th><th scope="col">Status</th>'
        '<th scope="col">Started</th><th scope="col">Ended</th><th scope="col">Event</th>'
        '<th scope="col">Trigger</th><th scope="col">Episode</th></tr></thead>'
        "<tbody>{items}</tbody></table></details>",
        n=len(items),
        items=join(items),
    )


LEGEND = Safe(
    '<ul class="legend chart-legend" aria-label="Legend">'
    '<li><svg width="28" height="14" aria-hidden="true"><rect class="swatch status-completed" '
    'x="1" y="1" width="26" height="12" rx="3"/></svg> current</li>'
    '<li><svg width="28" height="14" aria-hidden="true"><rect class="swatch status-archived" '
    'x="1" y="1" width="26" height="12" rx="3"/></svg> archived (hatched)</li>'
    '<li><svg width="28" height="14" aria-hidden="true"><rect class="swatch status-pending" '
    'x="1" y="1" width="26" height="12" rx="3"/></svg> pending (dashed outline)</li>'
    '<li><svg width="28" height="14" aria-hidden="true"><rect class="swatch status-processing" '
    'x="1" y="1" width="26" height="12" rx="3"/></svg> processing (dotted outline)</li>'
    '<li><svg width="28" height="14" aria-hidden="true"><rect class="swatch status-failed" '
    'x="1" y="1" width="26" height="12" rx="3"/></svg> failed (thick outline)</li></ul>'
)


def timeline(ctx: Ctx) -> Page:
    dataset = ctx.required("dataset")
    token = ctx.arg("page_token")
    selected = ctx.arg("episode")
    page = ctx.client.list_threads(dataset, page_size=THREADS_PER_PAGE, page_token=token)

    def row_of(thread: Thread) -> Row:
        try:
            items = ctx.client.list_episodes(
                dataset, thread_id=thread.thread_id, page_size=1000
            ).items
            # The chart draws windows of messages; events (one moment, no window) are not
            # drawn yet.
            return Row(thread, [e for e in items if not e.is_event])
        except EpisodicRpcError as err:
            return Row(thread, [], err.code.name)

    rows = [r for r in ctx.fan_out(row_of, page.items)]
    panel: Safe = Safe(
        '<p class="muted">Choose an episode in the chart (click, or Tab to it and press '
        "Enter) to see its summary, key learnings, entities, event type and trigger here.</p>"
    )
    if selected:
        panel = details(
            ctx.client.get_episode(selected),
            ctx,
            actions_back=url("/timeline", dataset=dataset, episode=selected),
        )
    count = sum(len(r.episodes) for r in rows)
    body = html(
        "<p>{count} episode{s} of {n} thread{ts} (most recently active first).</p>{legend}"
        '<div class="timeline-layout">{chart}'
        '<section id="details" class="details-panel" tabindex="-1" aria-label="Episode details">'
        "{panel}</section></div>{next}{table}",
        count=count,
        s="" if count == 1 else "s",
        n=len(rows),
        ts="" if len(rows) == 1 else "s",
        legend=LEGEND,
        chart=chart(rows, dataset, token)
        if rows
        else Safe('<p class="empty">No threads, so no episodes.</p>'),
        panel=panel,
        next=next_page_link("/timeline", page.next_page_token, "Older threads", dataset=dataset),
        table=_table(rows, ctx),
    )
    return Page(f"Timeline of {dataset}", body, section="timeline", dataset=dataset)
