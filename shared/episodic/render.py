"""Episodes as prompt text, with time the model can reason about (seed 002, "Temporal
Reasoning in Prompts"; seed 000, "Formatting").

Two styles:

``timeline`` (default) — each episode headed by a relative and an absolute timestamp and
its thread, oldest first so the model reads events in the order they happened::

    [3 days ago, 2026-05-14 14:22 UTC, thread "billing-q2"]
    User confirmed the new pricing tier (Pro at $29) for project Atlas.

    [2 hours ago, 2026-05-17 08:10 UTC, thread "support-#412"]
    Agent escalated invoice #42 to finance after 3 failed retries.

``past_conversation`` — the seed's plain form, in the order given (best first)::

    Past conversation 1 (2026-05-14):
    User confirmed the new pricing tier (Pro at $29) for project Atlas.

Events (episodes of kind "event": one moment, recorded by an agent or the turn classifier)
say so, with when they occurred to the minute and their type and actor::

    [2 days ago, 2026-05-15 09:30 UTC, decision by agent, thread "billing-q2"]
    Switched the Atlas invoices to annual billing.

    Event (2026-05-15 09:30 UTC, decision by agent):
    Switched the Atlas invoices to annual billing.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal

__all__ = ["absolute_time", "relative_time", "render_episode", "render_episodes"]

Style = Literal["timeline", "past_conversation"]


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'}"


def relative_time(when: datetime, now: datetime | None = None) -> str:
    """``when`` relative to ``now`` in words: "just now", "5 minutes ago", "2 hours ago",
    "yesterday", "3 days ago", "2 weeks ago", "4 months ago", "2 years ago" (and "in …"
    for a time after ``now``, e.g. when rendering for an earlier ``as_of``)."""
    now = _aware(now) if now is not None else datetime.now(UTC)
    seconds = (now - _aware(when)).total_seconds()
    future = seconds < 0
    seconds = abs(seconds)
    if seconds < 60:
        return "just now"
    minutes, hours, days = seconds / 60, seconds / 3600, seconds / 86400
    if minutes < 60:
        text = _plural(int(minutes), "minute")
    elif hours < 24:
        text = _plural(int(hours), "hour")
    elif days < 2 and not future:
        return "yesterday"
    elif days < 14:
        text = _plural(int(days), "day")
    elif days < 60:
        text = _plural(int(days // 7), "week")
    elif days < 730:
        text = _plural(int(days // 30.44), "month")
    else:
        text = _plural(int(days // 365.25), "year")
    return f"in {text}" if future else f"{text} ago"


def absolute_time(when: datetime) -> str:
    """``2026-05-14 14:22 UTC``; the year always in four digits (strftime's ``%Y`` prints
    year 1 as ``1`` on glibc: not a date a reader recognises)."""
    t = _aware(when).astimezone(UTC)
    return f"{t.year:04d}-{t.month:02d}-{t.day:02d} {t.hour:02d}:{t.minute:02d} UTC"


def _episode(item: Any) -> Any:
    # A ScoredEpisode carries the episode; an Episode (or a proto Episode) is one.
    return getattr(item, "episode", item)


def _ended_at(episode: Any) -> datetime | None:
    value = getattr(episode, "ended_at", None)
    if value is None or isinstance(value, datetime):
        return value
    # A protobuf Episode: a Timestamp field.
    if hasattr(episode, "HasField") and not episode.HasField("ended_at"):
        return None
    return value.ToDatetime(tzinfo=UTC)


def _is_event(episode: Any) -> bool:
    # "event" on an SDK Episode; EPISODE_KIND_EVENT (2) on a protobuf one.
    kind = getattr(episode, "kind", None)
    return kind == "event" or kind == 2


def _what(episode: Any) -> str:
    """An event's type and actor: "decision by agent"."""
    kind = getattr(episode, "event_type", "") or "event"
    actor = getattr(episode, "actor", "") or ""
    return f"{kind} by {actor}" if actor else kind


def render_episode(item: Any, now: datetime | None = None, *, key_learnings: bool = False) -> str:
    """One episode in the timeline style: a header with relative and absolute time and the
    thread's label (when it has one), then the summary (and its key learnings as bullets
    when ``key_learnings``)."""
    episode = _episode(item)
    ended = _ended_at(episode)
    parts = []
    if ended is not None:
        parts += [relative_time(ended, now), absolute_time(ended)]
    if _is_event(episode):
        parts.append(_what(episode))
    label = getattr(episode, "thread_label", "") or ""
    if label:
        parts.append(f'thread "{label}"')
    header = f"[{', '.join(parts)}]" if parts else ""
    body = (getattr(episode, "summary", "") or "").strip()
    lines = [line for line in (header, body) if line]
    if key_learnings:
        lines += [f"- {k}" for k in getattr(episode, "key_learnings", []) or []]
    return "\n".join(lines)


def render_episodes(
    episodes: Iterable[Any],
    now: datetime | None = None,
    style: Style = "timeline",
    *,
    key_learnings: bool = False,
) -> str:
    """Renders episodes (SDK ``Episode``/``ScoredEpisode`` objects, a ``RecallResult``, or
    protobuf ``Episode``/``ScoredEpisode`` messages) as one prompt block.

    ``now`` is the time relative timestamps are measured from (default: the current time;
    pass the recall's ``as_of`` when replaying history). ``style="timeline"`` sorts the
    episodes oldest first and heads each with ``[3 days ago, 2026-05-14 14:22 UTC, thread
    "billing-q2"]``; ``style="past_conversation"`` keeps the given order and writes the
    seed's ``Past conversation N (YYYY-MM-DD):``. Episodes are separated by a blank line;
    no episodes render as an empty string.
    """
    items = list(episodes)
    if style == "past_conversation":
        blocks = []
        for i, item in enumerate(items, start=1):
            episode = _episode(item)
            ended = _ended_at(episode)
            if _is_event(episode):
                when = f"{absolute_time(ended)}, " if ended else ""
                block = f"Event ({when}{_what(episode)}):\n{(episode.summary or '').strip()}"
            else:
                day = f" ({_aware(ended).astimezone(UTC).date().isoformat()})" if ended else ""
                block = f"Past conversation {i}{day}:\n{(episode.summary or '').strip()}"
            if key_learnings:
                block += "".join(f"\n- {k}" for k in episode.key_learnings or [])
            blocks.append(block)
        return "\n\n".join(blocks)
    if style != "timeline":
        raise ValueError(f"unknown style {style!r}; use 'timeline' or 'past_conversation'")
    far_past = datetime.min.replace(tzinfo=UTC)
    ordered = sorted(items, key=lambda it: _ended_at(_episode(it)) or far_past)
    return "\n\n".join(render_episode(it, now, key_learnings=key_learnings) for it in ordered)
