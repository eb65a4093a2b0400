"""The temporal questions' independent check (``validate``): each expression resolved again
from its words alone, by the rules ``bench.quality.temporal_questions`` states, and the
gold sessions compared with what it picks out."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

from bench.harness.locomo import Conversation, Session
from bench.quality.temporal.topics import IMAGE_CAPTION
from bench.quality.temporal.vocabulary import (
    KINDS,
    MONTHS,
    NUMBER_WORDS,
    ORDINAL_WORDS,
    WEEKDAYS,
    TemporalQuestion,
)

# -- an independent check: resolve each expression from its words alone

_MONTH_NUMBER = {m.lower(): i for i, m in enumerate(MONTHS, 1)}
_ORDINAL_NUMBER = {w: i for i, w in enumerate(ORDINAL_WORDS, 1)}
_MONTH_RX = "(" + "|".join(m.lower() for m in MONTHS) + ")"
_DATE_FORMS = (
    re.compile(
        rf"^(?:the )?(?P<d>\d{{1,2}})(?:st|nd|rd|th)? (?:of )?(?P<m>{_MONTH_RX})(?: (?P<y>\d{{4}}))?$"
    ),
    re.compile(rf"^(?P<m>{_MONTH_RX}) (?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?:,? (?P<y>\d{{4}}))?$"),
)


def _ref_count(word: str) -> int:
    if word in ("a", "an"):
        return 1
    return int(word) if word.isdigit() else NUMBER_WORDS.index(word)


def _ref_date(text: str, not_after: date) -> date | None:
    """A written date; without a year, the latest such date on or before ``not_after``."""
    for form in _DATE_FORMS:
        match = form.match(text)
        if match:
            month, day = _MONTH_NUMBER[match["m"]], int(match["d"])
            if match["y"]:
                return date(int(match["y"]), month, day)
            year = not_after.year
            while True:
                try:
                    candidate = date(year, month, day)
                except ValueError:  # 29 February
                    year -= 1
                    continue
                if candidate <= not_after:
                    return candidate
                year -= 1
    return None


def _ref_window(expression: str, asked_at: datetime) -> tuple[datetime, datetime] | None:
    """The [start, end) window of a time expression, or None when it is not a window."""
    text = expression.lower().strip()
    today = asked_at.date()

    def days(first: date, last: date) -> tuple[datetime, datetime]:
        return (
            datetime(first.year, first.month, first.day, tzinfo=UTC),
            datetime(last.year, last.month, last.day, tzinfo=UTC) + timedelta(days=1),
        )

    if text in ("today", "earlier today"):
        return days(today, today)
    if text == "yesterday":
        return days(today - timedelta(days=1), today - timedelta(days=1))
    if text == "the day before yesterday":
        return days(today - timedelta(days=2), today - timedelta(days=2))
    if m := re.fullmatch(r"(\w+) days? ago", text):
        d = today - timedelta(days=_ref_count(m[1]))
        return days(d, d)
    weekdays = [w.lower() for w in WEEKDAYS]
    if m := re.fullmatch(rf"(?:last |this past )?({'|'.join(weekdays)})", text):
        wanted = weekdays.index(m[1])
        d = today - timedelta(days=1)
        while d.weekday() != wanted:
            d -= timedelta(days=1)
        return days(d, d)
    if text == "last week":
        # The ISO week of the day a week ago is always the previous one.
        target = (today - timedelta(days=7)).isocalendar()[:2]
        recent = [today - timedelta(days=k) for k in range(1, 15)]
        in_week = [d for d in recent if d.isocalendar()[:2] == target]
        return days(min(in_week), max(in_week))
    if m := re.fullmatch(r"(\w+) weeks? ago", text):
        centre = asked_at - timedelta(weeks=_ref_count(m[1]))
        return centre - timedelta(hours=84), centre + timedelta(hours=84)
    if text == "last month" or (m := re.fullmatch(r"(\w+) months? ago", text)):
        back = 1 if text == "last month" else _ref_count(m[1])
        year, month = asked_at.year, asked_at.month
        for _ in range(back):
            year, month = (year - 1, 12) if month == 1 else (year, month - 1)
        return _ref_month(year, month)
    if m := re.fullmatch(rf"{_MONTH_RX}(?: (\d{{4}}))?", text):
        month = _MONTH_NUMBER[m[1]]
        if m[2]:
            return _ref_month(int(m[2]), month)
        year = asked_at.year if month <= asked_at.month else asked_at.year - 1
        return _ref_month(year, month)
    if m := re.fullmatch(r"(?:between|from) (.+?) (?:and|to|through) (.+)", text):
        last = _ref_date(m[2], today)
        first = _ref_date(m[1], last) if last else None
        return days(first, last) if first and last else None
    if d := _ref_date(text, today):
        return days(d, d)
    return None


def _ref_month(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def _ref_position(expression: str) -> int | None:
    """Which session an order expression names: 1 the first, -1 the latest, -2 the one before."""
    text = expression.lower()
    if m := re.fullmatch(r"(\w+) (?:session|conversation|chat)s? ago", text):
        return -_ref_count(m[1])
    if re.fullmatch(r"the (?:session|conversation|chat) before last", text):
        return -2
    if m := re.fullmatch(r"(.+) (?:session|conversation|chat|time)", text):
        word = m[1]
        if word in ("last", "most recent", "latest"):
            return -1
        if word in _ORDINAL_NUMBER:
            return _ORDINAL_NUMBER[word]
        if n := re.fullmatch(r"(\d+)(?:st|nd|rd|th)", word):
            return int(n[1])
    return None


def validate(questions: Sequence[TemporalQuestion], conversations: Sequence[Conversation]) -> None:
    """Asserts every question is consistent, resolving each expression independently.

    Gold threads exist; the expression is in the question; window expressions resolve to
    exactly the gold sessions (for ``topical_time``: the window's sessions that mention the
    topic, which at least one other earlier session also mentions); order expressions
    resolve to the gold session.
    """
    by_conv = {c.conversation_id: c for c in conversations}
    assert len({q.qid for q in questions}) == len(questions), "duplicate qids"
    for q in questions:
        where = f"{q.qid} ({q.question!r} at {q.asked_at.isoformat()})"
        conv = by_conv[q.conversation_id]
        assert q.kind in KINDS, where
        assert q.asked_at.utcoffset() == timedelta(0), where
        assert q.expression.lower() in q.question.lower(), where
        ids = {s.thread_id for s in conv.sessions}
        assert q.evidence_threads and set(q.evidence_threads) <= ids, where
        past = sorted(
            (s for s in conv.sessions if s.started_at <= q.asked_at), key=lambda s: s.started_at
        )
        if q.kind in ("session_ordinal", "sessions_ago"):
            position = _ref_position(q.expression)
            assert position is not None, f"{where}: cannot read {q.expression!r}"
            index = position - 1 if position > 0 else len(past) + position
            assert 0 <= index < len(past), where
            assert (past[index].thread_id,) == q.evidence_threads, where
            continue
        window = _ref_window(q.expression, q.asked_at)
        assert window is not None, f"{where}: cannot read {q.expression!r}"
        start, end = window
        inside = [s for s in past if start <= s.started_at < end]
        if q.kind == "topical_time":
            assert q.topic, where
            pattern = _ref_topic_pattern(q.topic)

            def mentions(s: Session, pattern: re.Pattern[str] = pattern) -> bool:
                return any(pattern.search(IMAGE_CAPTION.sub(" ", m.content)) for m in s.messages)

            inside = [s for s in inside if mentions(s)]
            assert sum(1 for s in past if mentions(s)) >= 2, f"{where}: topic not ambiguous"
        got = tuple(s.thread_id for s in inside)
        assert got == q.evidence_threads, f"{where}: resolved to {got}, gold {q.evidence_threads}"


def _ref_topic_pattern(topic: str) -> re.Pattern[str]:
    """The topic as a case-insensitive whole phrase, its last word singular or plural."""
    words = topic.lower().removeprefix("the ").split()
    last = words[-1]
    stems = {last}
    if last.endswith("ies"):
        stems.add(last[:-3] + "y")
    elif last.endswith("es"):
        stems.update((last[:-2], last[:-1]))
    elif last.endswith("s"):
        stems.add(last[:-1])
    forms = set()
    for stem in stems:
        forms.update((stem, stem + "s", stem + "es"))
        if stem.endswith("y"):
            forms.add(stem[:-1] + "ies")
    alternatives = "|".join(sorted(map(re.escape, forms)))
    head = r"\s+".join(map(re.escape, words[:-1]))
    return re.compile(rf"\b{head}\s+(?:{alternatives})\b", re.IGNORECASE)
