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

Procedures (how the agent did something before, issue 39) render as one block an agent reads
before acting: each procedure's goal, its numbered steps (the tool, what it was for, whether
it changes something, and where each argument's value came from) and its support::

    How this was done before:

    1. Goal: Please cancel my order #W1, I bought it by mistake
       Worked twice, failed once (relevance 0.82).
       1. get_order_details: Let me look the order up. [order_id from the user]
       2. cancel_pending_order (changes something) [order_id from the user, reason chosen
          by the agent]
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal

__all__ = [
    "absolute_time",
    "relative_time",
    "render_episode",
    "render_episodes",
    "render_procedure",
    "render_procedures",
]

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


# -- procedures


def _procedure(item: Any) -> Any:
    # A ScoredProcedure (SDK or protobuf) carries the procedure; a Procedure is one.
    return getattr(item, "procedure", item)


def _arguments(step: Any) -> list[tuple[str, str]]:
    # A dict name -> source on an SDK ProcedureStep; repeated ProcedureArgument on the wire.
    value = getattr(step, "arguments", None) or {}
    if isinstance(value, dict):
        return [(str(k), str(v)) for k, v in value.items()]
    return [(a.name, a.source) for a in value]


def _source(source: str) -> str:
    """Where an argument's value came from, in words."""
    if source == "user":
        return "from the user"
    if source == "agent":
        return "chosen by the agent"
    if source.startswith("tool:"):
        return f"from {source[5:]}'s result"
    return f"from {source}" if source else "from the conversation"


def _times(n: int, what: str) -> str:
    return f"{what} {'once' if n == 1 else 'twice' if n == 2 else f'{n} times'}"


def _support(procedure: Any, relevance: float | None) -> str:
    """ "Worked twice, failed once (relevance 0.82)." """
    parts = [_times(int(getattr(procedure, "success_count", 0) or 0), "worked")]
    failed = int(getattr(procedure, "failure_count", 0) or 0)
    partly = int(getattr(procedure, "partial_count", 0) or 0)
    if partly:
        parts.append(_times(partly, "partly worked"))
    if failed:
        parts.append(_times(failed, "failed"))
    text = ", ".join(parts)
    text = text[0].upper() + text[1:]
    if relevance is not None:
        text += f" (relevance {relevance:.2f})"
    return text + "."


def _step(n: int, step: Any) -> str:
    tool = getattr(step, "tool", "") or "tool"
    head = f"{n}. {tool}" + (" (changes something)" if getattr(step, "writes", False) else "")
    purpose = " ".join((getattr(step, "purpose", "") or "").split())
    # The offline extractor's fallback purpose is the tool's name in words: say it once.
    if purpose and purpose.lower().replace(" ", "_") != tool.lower():
        head += f": {purpose}"
    arguments = ", ".join(f"{name} {_source(source)}" for name, source in _arguments(step))
    return f"{head} [{arguments}]" if arguments else head


def render_procedure(
    item: Any, *, number: int | None = None, examples: bool = False, indent: str = ""
) -> str:
    """One procedure (an SDK ``Procedure``/``ScoredProcedure`` or its protobuf message):
    ``Goal: …`` (prefixed ``N.`` when ``number`` is given), its support (and relevance when
    scored), then its numbered steps. ``examples`` adds the other requests it served."""
    procedure = _procedure(item)
    relevance = getattr(item, "relevance", None) if item is not procedure else None
    goal = " ".join((getattr(procedure, "goal", "") or "").split())
    pad = " " * (len(f"{number}. ") if number is not None else 0)
    lines = [f"{number}. Goal: {goal}" if number is not None else f"Goal: {goal}"]
    lines.append(f"{pad}{_support(procedure, relevance)}")
    if examples:
        others = [" ".join(g.split()) for g in getattr(procedure, "example_goals", []) or []]
        lines += [f"{pad}Also used for: {g}" for g in others if g and g != goal]
    for i, step in enumerate(getattr(procedure, "steps", []) or [], start=1):
        lines.append(f"{pad}{_step(i, step)}")
    return "\n".join(indent + line for line in lines)


def render_procedures(
    procedures: Iterable[Any], *, heading: str = "How this was done before:", examples: bool = False
) -> str:
    """Procedures (SDK ``Procedure``/``ScoredProcedure`` objects, a ``RecallResult`` or
    ``RecallResponse`` with procedures, or their protobuf messages) as one prompt block, in
    the order given (a recall's is best first)::

        How this was done before:

        1. Goal: Please cancel my order #W1, I bought it by mistake
           Worked twice, failed once (relevance 0.82).
           1. get_order_details [order_id from the user]
           2. cancel_pending_order (changes something): Cancelling it. [order_id from the
              user, reason chosen by the agent]

    Each step names its tool, what it was for, whether it changes something, and where
    each argument's value came from ("from the user", "from get_order_details's result",
    "chosen by the agent"): the values themselves are the past conversation's, not the
    next one's. No procedures render as an empty string (so nothing is added to a prompt).
    """
    items = list(getattr(procedures, "procedures", procedures))
    if not items:
        return ""
    blocks = [render_procedure(p, number=i, examples=examples) for i, p in enumerate(items, 1)]
    return "\n\n".join([heading, *blocks]) if heading else "\n\n".join(blocks)
