"""Temporal questions over LoCoMo: questions whose gold sessions are fixed by time.

Each question is asked at ``asked_at`` and names a time in words (its ``expression``); the
gold sessions (``evidence_threads``) are the sessions that time picks out. The generator is
deterministic for a given seed. A query parser is tested against the rules below, and
``validate`` checks every question against its own reading of them.

Resolution rules
----------------
All calendar arithmetic is in UTC. A session belongs to a window when its start time
(every message of a LoCoMo session carries that timestamp) lies in the half-open window
``[start, end)`` and is not after ``asked_at``: nothing that happens after the question
counts. Numbers are digits or words (``one`` to ``twelve``); ``a``/``an`` means one.
``expression`` is a verbatim substring of the question (ignoring case) without its leading
preposition (``on``, ``in``, ``during``, ``back in``); for the order kinds it is the ordinal
and its noun (``third session``, ``last time``) or the whole ``3 sessions ago`` /
``the session before last``. Asked times are whole minutes.

Days
  ``today`` / ``earlier today``: asked_at's calendar day (up to asked_at).
  ``yesterday``: the day before it; ``the day before yesterday`` and ``N days ago``: N days
  before it (the day before yesterday = 2 days ago).
Weekdays
  ``last Tuesday``, ``this past Tuesday`` and ``(on) Tuesday`` all mean the most recent
  Tuesday strictly before asked_at's date: asked on a Wednesday, the day before; asked on a
  Tuesday, seven days before. Questions are asked 1 to 6 days after that day.
Weeks
  ``last week``: the previous ISO calendar week (Monday 00:00 to Monday 00:00) before the
  week that holds asked_at. ``N weeks ago`` (``a week ago`` = 1): the 7-day span centred
  N weeks before asked_at, ``[asked_at - 7N days - 3.5 days, asked_at - 7N days + 3.5 days)``.
  Generated questions keep every session at least 12 hours away from the edges of those
  centred spans, so an implementation that rounds them to whole days agrees.
Months
  ``last month``, ``a month ago`` and ``N months ago``: the whole calendar month N months
  before asked_at's month (asked on 31 March, ``a month ago`` is February).
  ``July``: the most recent July that has begun by asked_at (the current month counts; the
  generator only asks after the month ended); ``July 2023``: that month.
Dates
  ``May 8th``, ``May 8``, ``8 May``, ``the 8th of May``: the most recent 8 May on or before
  asked_at's date (generated questions are asked at least a day later). With a year
  (``May 8, 2023``, ``May 8th, 2023``, ``8 May 2023``) that date. A date is the whole day.
Spans
  ``between X and Y``, ``from X to Y``, ``from X through Y``: every day from X to Y, both
  included. Y resolves like a single date; X without a year is the most recent such date on
  or before Y (so ``from December 20 to January 5`` crosses the new year). A year written
  only after Y (``from 8 May to 9 June 2023``) belongs to Y alone.
Sessions, by order
  The sessions that started at or before asked_at, by start time. ``our first session``,
  ``the third time we talked``, ``our 12th conversation``: the Nth of them.
  ``our last session``, ``the last time we talked``, ``our most recent chat``,
  ``our latest conversation``: the latest of them. ``N sessions ago`` (also
  ``conversations``/``chats``): the Nth latest, so ``1 session ago`` is the last session and
  ``the session before last`` is ``2 sessions ago``. ``session``, ``conversation``, ``chat``
  and ``time`` are interchangeable.
Topic and time (``topical_time``)
  The time words resolve as above; the gold sessions are those in the window whose messages
  mention the topic (``TemporalQuestion.topic``, matched as a whole phrase, singular or
  plural, outside image captions). The topic is mentioned in at least two sessions before
  asked_at, and in exactly the gold ones inside the window.

Usage (from the repository root)::

    .venv/bin/python -m bench.quality.temporal_questions [--out FILE] [--seed N] [--show N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

from bench.harness import locomo
from bench.harness.locomo import Conversation, Session

KINDS = (
    "relative_day",
    "relative_week_month",
    "weekday",
    "absolute_date",
    "month",
    "date_span",
    "session_ordinal",
    "sessions_ago",
    "topical_time",
)
#: Questions aimed for per conversation and kind (fewer where the data does not allow).
PER_CONVERSATION = 6
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
NUMBER_WORDS = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
)
ORDINAL_WORDS = (
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
)
DAY = timedelta(days=1)
WEEK = timedelta(days=7)
HALF_WEEK = timedelta(days=3.5)
#: How far every session stays from the edges of a centred "N weeks ago" span.
WEEK_MARGIN = timedelta(hours=12)

# -- question templates: {a}/{b} the two speakers, {t} the time phrase, {T} it capitalised
#    at the start of the question.
GENERAL = (
    "What did we talk about {t}?",
    "What did we discuss {t}?",
    "What did {a} and {b} talk about {t}?",
    "What did {a} and {b} discuss {t}?",
    "What did {a} and {b} chat about {t}?",
    "What did {a} tell {b} {t}?",
    "What did {a} share with {b} {t}?",
    "Remind me what {a} and {b} talked about {t}.",
    "What came up when {a} and {b} talked {t}?",
    "Can you recap what {a} and {b} talked about {t}?",
    "{T}, what did {a} and {b} talk about?",
    "{T}, what did we discuss?",
)
#: Templates that speak of one conversation, used only when the gold is one session.
SINGLE = (
    "What was {a}'s conversation with {b} {t} about?",
    "What was our chat {t} about?",
)
#: {o} an ordinal ("third", "last"), {n} the noun ("session", "conversation", "chat").
ORDINAL = (
    "What did we talk about in our {o} {n}?",
    "What did {a} and {b} discuss in their {o} {n}?",
    "What was our {o} {n} about?",
    "What did {a} tell {b} in their {o} {n}?",
    "In {a} and {b}'s {o} {n}, what did they talk about?",
    "Remind me what came up in our {o} {n}.",
)
#: The same with "the {o} time ...".
ORDINAL_TIME = (
    "What did we discuss the {o} time we talked?",
    "What did {a} and {b} talk about the {o} time they spoke?",
    "What came up the {o} time {a} and {b} chatted?",
    "What did {a} tell {b} the {o} time they talked?",
)
#: {s} the speaker who brought the topic up, {o} the other one, {p} the topic.
TOPICAL = (
    "What did {s} say about {p} {t}?",
    "What did {s} tell {o} about {p} {t}?",
    "What did {s} and {o} say about {p} {t}?",
    "What did we discuss about {p} {t}?",
    "What was said about {p} {t}?",
    "What did {s} share about {p} {t}?",
    "{T}, what did {s} mention about {p}?",
)


@dataclass(frozen=True)
class TemporalQuestion:
    """A question whose gold sessions are determined by the time it names."""

    qid: str
    conversation_id: str
    kind: str  # one of KINDS
    question: str
    asked_at: datetime  # aware, UTC
    evidence_threads: tuple[str, ...]  # gold thread ids, in time order
    expression: str  # the time words of the question, e.g. "2 days ago"
    topic: str | None = None  # topical_time only: the topic as written in the question

    def to_json(self) -> dict[str, object]:
        """A JSON-ready row (``asked_at`` as ISO 8601 with ``Z``)."""
        row: dict[str, object] = {
            "qid": self.qid,
            "conversation_id": self.conversation_id,
            "kind": self.kind,
            "question": self.question,
            "asked_at": self.asked_at.isoformat().replace("+00:00", "Z"),
            "evidence_threads": list(self.evidence_threads),
            "expression": self.expression,
        }
        if self.topic is not None:
            row["topic"] = self.topic
        return row


@dataclass(frozen=True)
class _TimeRef:
    """A time named in words and the window it resolves to."""

    phrase: str  # as put in the question, e.g. "on May 8th"
    expression: str  # the time words, e.g. "May 8th"
    start: datetime
    end: datetime  # exclusive


@dataclass(frozen=True)
class _Draft:
    """A question before it gets its id."""

    question: str
    asked_at: datetime
    gold: tuple[Session, ...]
    expression: str
    topic: str | None = None


@dataclass(frozen=True)
class _Topic:
    """A noun phrase mentioned in several sessions of one conversation."""

    phrase: str  # as put in a question: "the adoption agency", "social media"
    pattern: re.Pattern[str]
    threads: frozenset[str]
    speaker: tuple[tuple[str, str], ...]  # (thread id, who first mentions it there)


# -- calendar helpers


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def _at(rng: random.Random, day: date, after: datetime | None = None) -> datetime | None:
    """A random minute of ``day`` between 08:00 and 22:59, at least an hour after ``after``."""
    lo = _midnight(day) + timedelta(hours=8)
    if after is not None:
        lo = max(lo, after.replace(second=0, microsecond=0) + timedelta(hours=1))
    hi = _midnight(day) + timedelta(hours=22, minutes=59)
    if lo > hi:
        return None
    return lo + timedelta(minutes=rng.randint(0, int((hi - lo).total_seconds() // 60)))


def _within(sessions: Sequence[Session], ref: _TimeRef, asked_at: datetime) -> tuple[Session, ...]:
    """The sessions in the window of ``ref`` that started by ``asked_at``."""
    return tuple(
        s for s in sessions if ref.start <= s.started_at < ref.end and s.started_at <= asked_at
    )


def _shift_month(year: int, month: int, by: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + by
    return index // 12, index % 12 + 1


def _month_window(year: int, month: int) -> tuple[datetime, datetime]:
    ny, nm = _shift_month(year, month, 1)
    return _midnight(date(year, month, 1)), _midnight(date(ny, nm, 1))


def _day_ref(day: date, phrase: str, expression: str | None = None) -> _TimeRef:
    return _TimeRef(phrase, expression or phrase, _midnight(day), _midnight(day) + DAY)


# -- wording helpers


def _number(rng: random.Random, n: int) -> str:
    """``n`` as digits or, for small numbers, sometimes as a word."""
    return NUMBER_WORDS[n] if n < len(NUMBER_WORDS) and rng.random() < 0.5 else str(n)


def _suffixed(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 22nd."""
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th') }"


def _date_words(rng: random.Random, day: date, with_year: bool, form: int | None = None) -> str:
    """``day`` written the way people do, with or without its year (``form``: which way)."""
    month = MONTHS[day.month - 1]
    if with_year:
        forms = (
            f"{month} {day.day}, {day.year}",
            f"{month} {_suffixed(day.day)}, {day.year}",
            f"{day.day} {month} {day.year}",
        )
    else:
        forms = (
            f"{month} {_suffixed(day.day)}",
            f"{month} {day.day}",
            f"{day.day} {month}",
            f"the {_suffixed(day.day)} of {month}",
        )
    return forms[form] if form is not None else rng.choice(forms)


def _ask(
    rng: random.Random,
    templates: Sequence[str],
    names: tuple[str, str],
    ref_phrase: str,
    **fields: str,
) -> str:
    """Fills a random template; fronted ones only when the phrase starts with a letter."""
    usable = [t for t in templates if not t.startswith("{T}") or ref_phrase[:1].isalpha()]
    template = rng.choice(usable)
    a, b = rng.sample(names, 2)
    front = ref_phrase[:1].upper() + ref_phrase[1:]
    return template.format(a=a, b=b, t=ref_phrase, T=front, **fields)


def _general(rng: random.Random, names: tuple[str, str], ref: _TimeRef, single: bool) -> str:
    return _ask(rng, GENERAL + SINGLE if single else GENERAL, names, ref.phrase)


def _speakers(conv: Conversation) -> tuple[str, str]:
    """The two speakers, the one LoCoMo calls ``user`` first."""
    by_role: dict[str, str] = {}
    for session in conv.sessions:
        for m in session.messages:
            if m.name:
                by_role.setdefault(m.role, m.name)
    names = sorted(by_role.items())  # ("assistant", B), ("user", A)
    if len(names) != 2:
        raise ValueError(f"{conv.conversation_id}: expected two speakers, found {by_role}")
    return names[1][1], names[0][1]


def _between(rng: random.Random, sessions: Sequence[Session], j: int) -> datetime | None:
    """A time after session ``j`` (by at least an hour) and before session ``j + 1``.

    After the last session, a time up to ten days later.
    """
    start = sessions[j].started_at
    last_day = (
        sessions[j + 1].started_at.date() if j + 1 < len(sessions) else start.date() + 10 * DAY
    )
    for _ in range(8):
        day = start.date() + rng.randint(0, (last_day - start.date()).days) * DAY
        asked = _at(rng, day, after=start if day == start.date() else None)
        if asked is not None and (j + 1 == len(sessions) or asked < sessions[j + 1].started_at):
            return asked
    return None


# -- the kinds


def _relative_day(conv: Conversation, rng: random.Random, names: tuple[str, str]) -> list[_Draft]:
    """Questions like "What did we talk about 2 days ago?", asked N days after a session."""
    out: list[_Draft] = []
    for session in rng.sample(conv.sessions, len(conv.sessions)):
        if len(out) >= PER_CONVERSATION:
            break
        n = rng.choices(range(11), weights=(1, 4, 3, 2, 2, 1, 1, 1, 0.5, 0.5, 0.5))[0]
        day = session.started_at.date()
        asked = _at(rng, day + n * DAY, after=session.started_at if n == 0 else None)
        if asked is None:
            continue
        if n == 0:
            words = rng.choice(("today", "earlier today"))
        elif n == 1:
            words = "yesterday"
        elif n == 2 and rng.random() < 0.4:
            words = "the day before yesterday"
        else:
            words = f"{_number(rng, n)} days ago"
        ref = _day_ref(day, words)
        gold = _within(conv.sessions, ref, asked)
        if gold != (session,):
            continue
        out.append(_Draft(_general(rng, names, ref, True), asked, gold, ref.expression))
    return out


def _weeks_ago_ref(rng: random.Random, n: int, asked: datetime) -> _TimeRef:
    words = "a week ago" if n == 1 else f"{_number(rng, n)} weeks ago"
    centre = asked - n * WEEK
    return _TimeRef(words, words, centre - HALF_WEEK, centre + HALF_WEEK)


def _last_week_ref(asked: datetime) -> _TimeRef:
    monday = asked.date() - asked.weekday() * DAY
    return _TimeRef("last week", "last week", _midnight(monday - WEEK), _midnight(monday))


def _months_ago_ref(rng: random.Random, n: int, asked: datetime) -> _TimeRef:
    words = f"{_number(rng, n)} months ago"
    if n == 1:
        words = rng.choice(("last month", "a month ago"))
    start, end = _month_window(*_shift_month(asked.year, asked.month, -n))
    return _TimeRef(words, words, start, end)


def _weeks_question(
    rng: random.Random, sessions: Sequence[Session], session: Session
) -> tuple[_TimeRef, datetime] | None:
    """A "last week" / "N weeks ago" reference whose window holds ``session`` alone."""
    n = rng.choice((0, 0, 1, 2, 2, 3, 4))  # 0: "last week"
    for _ in range(6):
        if n == 0:
            monday = session.started_at.date() - session.started_at.weekday() * DAY + WEEK
            asked = _at(rng, monday + rng.randint(0, 6) * DAY)
            if asked is None:
                continue
            ref = _last_week_ref(asked)
            if _within(sessions, ref, asked) == (session,):
                return ref, asked
            continue
        # asked_at - 7n days must be within 3.5 days (minus the margin) of the session.
        slack = HALF_WEEK - WEEK_MARGIN
        lo = session.started_at + n * WEEK - slack
        minutes = int(2 * slack.total_seconds() // 60)
        asked = (lo + timedelta(minutes=rng.randint(0, minutes))).replace(second=0)
        ref = _weeks_ago_ref(rng, n, asked)
        wide = _TimeRef("", "", ref.start - WEEK_MARGIN, ref.end + WEEK_MARGIN)
        narrow = _TimeRef("", "", ref.start + WEEK_MARGIN, ref.end - WEEK_MARGIN)
        if _within(sessions, wide, asked) == _within(sessions, narrow, asked) == (session,):
            return ref, asked
    return None


def _by_month(sessions: Sequence[Session]) -> dict[tuple[int, int], tuple[Session, ...]]:
    groups: dict[tuple[int, int], list[Session]] = defaultdict(list)
    for s in sessions:
        groups[(s.started_at.year, s.started_at.month)].append(s)
    return {k: tuple(v) for k, v in sorted(groups.items())}


def _random_day_of_month(rng: random.Random, year: int, month: int) -> date:
    start, end = _month_window(year, month)
    return start.date() + rng.randint(0, (end - start).days - 1) * DAY


def _relative_week_month(
    conv: Conversation, rng: random.Random, names: tuple[str, str]
) -> list[_Draft]:
    """Questions with "last week", "2 weeks ago", "a month ago", "8 months ago"."""
    out: list[_Draft] = []
    # Weeks: one gold session alone in the window.
    for session in rng.sample(conv.sessions, len(conv.sessions)):
        if len(out) >= PER_CONVERSATION // 2:
            break
        found = _weeks_question(rng, conv.sessions, session)
        if found is None:
            continue
        ref, asked = found
        out.append(_Draft(_general(rng, names, ref, True), asked, (session,), ref.expression))
    # Months: every session of the month (one to three of them).
    months = [(k, v) for k, v in _by_month(conv.sessions).items() if 1 <= len(v) <= 3]
    for (year, month), gold in rng.sample(months, len(months)):
        if len(out) >= PER_CONVERSATION:
            break
        n = rng.choices(range(1, 9), weights=(4, 3, 2, 2, 1, 1, 1, 1))[0]
        ay, am = _shift_month(year, month, n)
        asked = _at(rng, _random_day_of_month(rng, ay, am))
        assert asked is not None
        ref = _months_ago_ref(rng, n, asked)
        if _within(conv.sessions, ref, asked) != gold:
            continue
        out.append(_Draft(_general(rng, names, ref, len(gold) == 1), asked, gold, ref.expression))
    return out


def _weekday_ref(rng: random.Random, day: date, asked: datetime) -> _TimeRef:
    """How to name ``day`` (1 to 6 days before ``asked``) by its weekday."""
    name = WEEKDAYS[day.weekday()]
    same_week = day.isocalendar()[:2] == asked.date().isocalendar()[:2]
    forms = ((f"on {name}", name), (f"this past {name}", None), (f"last {name}", None))
    phrase, words = rng.choices(forms, weights=(3, 2, 1) if same_week else (1, 1, 3))[0]
    return _day_ref(day, phrase, words)


def _weekday(conv: Conversation, rng: random.Random, names: tuple[str, str]) -> list[_Draft]:
    """Questions like "What did we discuss last Tuesday?", asked 1 to 6 days after."""
    out: list[_Draft] = []
    for session in rng.sample(conv.sessions, len(conv.sessions)):
        if len(out) >= PER_CONVERSATION:
            break
        day = session.started_at.date()
        asked = _at(rng, day + rng.randint(1, 6) * DAY)
        assert asked is not None
        ref = _weekday_ref(rng, day, asked)
        gold = _within(conv.sessions, ref, asked)
        if gold != (session,):
            continue
        out.append(_Draft(_general(rng, names, ref, True), asked, gold, ref.expression))
    return out


def _absolute_date(conv: Conversation, rng: random.Random, names: tuple[str, str]) -> list[_Draft]:
    """Questions like "What did we talk about on May 8th?" or "... on 8 May 2023?"."""
    out: list[_Draft] = []
    for i, session in enumerate(rng.sample(conv.sessions, len(conv.sessions))):
        if len(out) >= PER_CONVERSATION:
            break
        day = session.started_at.date()
        asked = _at(rng, day + rng.randint(1, 75) * DAY)
        assert asked is not None
        words = _date_words(rng, day, with_year=i % 2 == 1)
        ref = _day_ref(day, f"on {words}", words)
        gold = _within(conv.sessions, ref, asked)
        if gold != (session,):
            continue
        out.append(_Draft(_general(rng, names, ref, True), asked, gold, ref.expression))
    return out


def _month_ref(rng: random.Random, year: int, month: int, with_year: bool) -> _TimeRef:
    words = f"{MONTHS[month - 1]} {year}" if with_year else MONTHS[month - 1]
    prep = rng.choice(("in", "in", "during", "back in"))
    start, end = _month_window(year, month)
    return _TimeRef(f"{prep} {words}", words, start, end)


def _month(conv: Conversation, rng: random.Random, names: tuple[str, str]) -> list[_Draft]:
    """Questions like "What did we discuss in July?" about months with 1 to 3 sessions."""
    out: list[_Draft] = []
    months = [(k, v) for k, v in _by_month(conv.sessions).items() if 1 <= len(v) <= 3]
    variants = [(k, v, with_year) for k, v in months for with_year in (False, True)]
    for (year, month), gold, with_year in rng.sample(variants, len(variants)):
        if len(out) >= PER_CONVERSATION + 1:
            break
        _, end = _month_window(year, month)
        asked = _at(rng, end.date() + rng.randint(0, 120) * DAY)
        assert asked is not None
        ref = _month_ref(rng, year, month, with_year)
        if _within(conv.sessions, ref, asked) != gold:
            continue
        out.append(_Draft(_general(rng, names, ref, len(gold) == 1), asked, gold, ref.expression))
    return out


def _span_ref(rng: random.Random, first: date, last: date) -> _TimeRef:
    """A span of days such as "between May 8th and June 9th" (both days included)."""
    style = rng.choice(("none", "none", "end", "both"))
    if style == "end":
        # "from 8 May to 9 June 2023": the year once, after the end.
        a = f"{first.day} {MONTHS[first.month - 1]}"
        b = f"{last.day} {MONTHS[last.month - 1]} {last.year}"
    else:
        form = rng.randrange(4 if style == "none" else 3)  # the same style for both ends
        a = _date_words(rng, first, with_year=style == "both", form=form)
        b = _date_words(rng, last, with_year=style == "both", form=form)
    words = rng.choice((f"between {a} and {b}", f"from {a} to {b}", f"from {a} through {b}"))
    return _TimeRef(words, words, _midnight(first), _midnight(last) + DAY)


def _date_span(conv: Conversation, rng: random.Random, names: tuple[str, str]) -> list[_Draft]:
    """Questions like "What did we discuss between May 8th and June 9th?" (1 to 3 sessions)."""
    out: list[_Draft] = []
    sessions = conv.sessions
    seen: set[tuple[str, ...]] = set()
    for _ in range(40):
        if len(out) >= PER_CONVERSATION:
            break
        i = rng.randrange(len(sessions))
        gold = sessions[i : i + rng.randint(1, 3)]
        key = tuple(s.thread_id for s in gold)
        if key in seen:
            continue
        first_gold, last_gold = gold[0].started_at.date(), gold[-1].started_at.date()
        before = sessions[i - 1].started_at.date() if i > 0 else first_gold - 30 * DAY
        after = (
            sessions[i + len(gold)].started_at.date()
            if i + len(gold) < len(sessions)
            else last_gold + 30 * DAY
        )
        # Boundaries on the gold days themselves half the time, else anywhere in the gaps.
        first, last = first_gold, last_gold
        if rng.random() < 0.5:
            first -= rng.randint(0, max(0, (first_gold - before).days - 1)) * DAY
            last += rng.randint(0, max(0, (after - last_gold).days - 1)) * DAY
        if last <= first or (last - first).days > 120:
            continue
        asked = _at(rng, last + rng.randint(1, 45) * DAY)
        assert asked is not None
        ref = _span_ref(rng, first, last)
        if _within(sessions, ref, asked) != gold:
            continue
        seen.add(key)
        out.append(_Draft(_general(rng, names, ref, len(gold) == 1), asked, gold, ref.expression))
    return out


def _ordinal_words(rng: random.Random, k: int) -> str:
    """The ordinal of the (k+1)th session: "third", sometimes "3rd"; "14th" past twelve."""
    if k < len(ORDINAL_WORDS) and (k < 3 or rng.random() < 0.7):
        return ORDINAL_WORDS[k]
    return _suffixed(k + 1)


def _session_ordinal(
    conv: Conversation, rng: random.Random, names: tuple[str, str]
) -> list[_Draft]:
    """Questions about "our third session", "the first time we talked", "our last chat"."""
    out: list[_Draft] = []
    sessions = conv.sessions
    seen: set[tuple[str, str]] = set()
    for _ in range(40):
        if len(out) >= PER_CONVERSATION:
            break
        roll = rng.random()
        if roll < 0.25:  # the latest session before asked_at
            j = rng.randrange(len(sessions))
            gold = sessions[j]
            ordinal = rng.choice(("last", "last", "most recent", "latest"))
        else:
            k = 0 if roll < 0.45 else rng.randrange(1, len(sessions))
            j = rng.randrange(k, len(sessions))
            gold = sessions[k]
            ordinal = _ordinal_words(rng, k)
        asked = _between(rng, sessions, j)
        if asked is None or (gold.thread_id, ordinal) in seen:
            continue
        seen.add((gold.thread_id, ordinal))
        a, b = rng.sample(names, 2)
        # "the third time we talked" reads well for the first few and the last.
        timely = ordinal in ("last", *ORDINAL_WORDS[:5])
        if timely and rng.random() < 0.5:
            question = rng.choice(ORDINAL_TIME).format(o=ordinal, a=a, b=b)
            expression = f"{ordinal} time"
        else:
            noun = rng.choice(("session", "conversation", "chat"))
            question = rng.choice(ORDINAL).format(o=ordinal, n=noun, a=a, b=b)
            expression = f"{ordinal} {noun}"
        out.append(_Draft(question, asked, (gold,), expression))
    return out


def _sessions_ago(conv: Conversation, rng: random.Random, names: tuple[str, str]) -> list[_Draft]:
    """Questions about "3 sessions ago" or "the session before last" (the Nth latest)."""
    out: list[_Draft] = []
    sessions = conv.sessions
    seen: set[tuple[str, str]] = set()
    for _ in range(40):
        if len(out) >= PER_CONVERSATION:
            break
        n = rng.choices(range(2, 7), weights=(4, 3, 2, 1, 1))[0]
        # Half the time just after the last session, otherwise between two sessions.
        j = len(sessions) - 1 if rng.random() < 0.5 else rng.randrange(n - 1, len(sessions))
        asked = _between(rng, sessions, j)
        if asked is None:
            continue
        gold = sessions[j - n + 1]
        noun = rng.choice(("session", "conversation", "chat"))
        if n == 2 and rng.random() < 0.5:
            words = f"the {noun} before last"
            phrase = f"in {words}"
        else:
            words = f"{_number(rng, n)} {noun}s ago"
            phrase = words
        if (gold.thread_id, words) in seen:
            continue
        seen.add((gold.thread_id, words))
        out.append(_Draft(_ask(rng, GENERAL, names, phrase), asked, (gold,), words))
    return out


# -- topics

_CAPTION = re.compile(r"\[shares image:[^\]]*\]")
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def _words(text: str) -> frozenset[str]:
    """A set of words written as one whitespace-separated string."""
    return frozenset(text.split())


_DETERMINERS = _words("a an the my her his our their this that these those your another any")
#: Second words of phrases that read as mass nouns, so take no article ("social media").
_MASS = _words(
    """media identity work management health music art advice care education research fitness
    therapy yoga food equipment gear software information knowledge support culture nature"""
)
#: Nouns in -ing that are counted, so do take "the" ("the community meeting").
_COUNT_ING = _words(
    "meeting wedding building gathering outing recording drawing evening morning ring sibling "
    "setting offering opening screening tasting reading"
)
_STOP = _words(
    """a an the and or but of to in on at for with by from as is was were be been being am are
    it its this that these those i you he she we they me him her us them my your his our their
    so very really just also too not no yes do does did done have has had will would can could
    should may might must about into over under up down out off again then once here there when
    where why how all any both each few more most other some such only own same than now get got
    go going went make made take took taking making doing having keep keeps first last next
    another one two three four lot lots thing things way something anything everything nothing
    feel felt like liked love loved who which what whom whose during towards toward near started
    stay passed helping people others while even looking together"""
)
#: First words that make evaluations rather than topics ("tough time", "positive impact").
_EVALUATIVE = _words(
    """positive big huge tough best kind little small strong perfect favorite favourite true
    important special real great loving long supportive inner wild right young different magical
    whole hard fun happy super awesome amazing beautiful wonderful incredible rewarding fulfilling
    upcoming recent new close good nice cool bad sweet deep fresh rough comfort"""
)
#: Second words too vague to be a topic.
_VAGUE = _words(
    """time times part parts thing things way ways difference impact change changes moment
    moments step steps experience lot bit day days week weeks month months year years mean means
    back ago since look looks sense word words"""
)


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _plural(word: str) -> str:
    if word.endswith("y") and word[-2:-1] not in tuple("aeiou"):
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    return word + "s"


def _plain(content: str) -> str:
    """A message's own words, lower-cased, without the captions of shared images."""
    return _CAPTION.sub(" ", content).lower()


def _topic_pattern(first: str, base: str) -> re.Pattern[str]:
    return re.compile(rf"\b{first}\s+(?:{base}|{_plural(base)})\b")


def _topics(conv: Conversation, summary: str) -> list[_Topic]:
    """Two-word noun phrases that several sessions mention and LoCoMo's summaries name.

    A phrase qualifies when it is mentioned in two to five sessions, appears in the
    conversation's session or event summaries (when those are available), follows a
    determiner at least once ("the adoption agency"), is neither an evaluation ("tough
    time") nor a fragment of a longer compound ("milk ice" of "milk ice cream").
    """
    names = {n.lower() for n in _speakers(conv)}
    threads: dict[tuple[str, str], set[str]] = defaultdict(set)
    surfaces: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    before: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    after: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for session in conv.sessions:
        for m in session.messages:
            words = _WORD.findall(_plain(m.content))
            for i in range(len(words) - 1):
                w1, w2 = words[i], words[i + 1]
                if (
                    w1 in _STOP
                    or w2 in _STOP
                    or w1 in _EVALUATIVE
                    or w2 in _VAGUE
                    or w1 in names
                    or w2 in names
                    or len(w1) < 3
                    or len(w2) < 3
                    or "'" in w1 + w2
                ):
                    continue
                key = (w1, _singular(w2))
                threads[key].add(session.thread_id)
                surfaces[key][f"{w1} {w2}"] += 1
                before[key][words[i - 1] if i > 0 else ""] += 1
                after[key][words[i + 2] if i + 2 < len(words) else ""] += 1
    # One text per session; " | " between messages keeps a phrase from spanning two.
    texts = {s.thread_id: " | ".join(_plain(m.content) for m in s.messages) for s in conv.sessions}
    out: list[_Topic] = []
    for key in sorted(threads):
        if not 2 <= len(threads[key]) <= 6:  # a cheap first cut; the pattern decides
            continue
        mentions = sum(surfaces[key].values())
        determined = sum(n for w, n in before[key].items() if w in _DETERMINERS)
        if determined == 0:
            continue
        (prev, prev_n), (nxt, next_n) = before[key].most_common(1)[0], after[key].most_common(1)[0]
        if prev and prev not in _STOP and prev not in _EVALUATIVE and 2 * prev_n >= mentions:
            continue
        if nxt and nxt not in _STOP and 2 * next_n >= mentions:
            continue
        pattern = _topic_pattern(*key)
        if summary and not pattern.search(summary):
            continue
        matched = [s for s in conv.sessions if pattern.search(texts[s.thread_id])]
        if not 2 <= len(matched) <= 5:
            continue
        # As most often written ("LGBTQ community"); "the" unless plural or a mass noun.
        anycase = re.compile(pattern.pattern, re.IGNORECASE)
        written = Counter(
            hit.group(0)
            for s in matched
            for m in s.messages
            for hit in anycase.finditer(_CAPTION.sub(" ", m.content))
        )
        surface = re.sub(r"\s+", " ", written.most_common(1)[0][0])
        second = surface.split()[1].lower()
        gerund = second.endswith("ing") and second not in _COUNT_ING
        bare = second != key[1] or gerund or second in _MASS
        phrase = surface if bare else f"the {surface}"
        speaker = tuple(
            (s.thread_id, next(m.name for m in s.messages if pattern.search(_plain(m.content))))
            for s in matched
        )
        out.append(_Topic(phrase, pattern, frozenset(s.thread_id for s in matched), speaker))
    return out


def _topical_time(
    conv: Conversation,
    rng: random.Random,
    names: tuple[str, str],
    topics: Sequence[_Topic],
) -> list[_Draft]:
    """Questions like "What did Caroline say about the adoption agency last week?".

    The topic is mentioned in several sessions by asked_at and the time picks one of them.
    Times whose window also holds other sessions are preferred, so that neither the topic
    nor the time alone finds the gold session.
    """
    by_id = {s.thread_id: s for s in conv.sessions}
    pairs = [(t, tid) for t in topics for tid in sorted(t.threads)]
    out: list[_Draft] = []
    used: set[str] = set()
    for topic, tid in rng.sample(pairs, len(pairs)):
        if len(out) >= PER_CONVERSATION:
            break
        if tid in used:
            continue
        gold = by_id[tid]
        mentioned = [s for s in conv.sessions if s.thread_id in topic.threads]
        candidates: list[tuple[_TimeRef, datetime]] = []
        for how in rng.sample(_TOPICAL_TIMES, len(_TOPICAL_TIMES)):
            found = _topical_ref(rng, how, gold, mentioned)
            if found is None:
                continue
            ref, asked = found
            in_window = _within(mentioned, ref, asked)
            known = [s for s in mentioned if s.started_at <= asked]
            if in_window == (gold,) and len(known) >= 2:
                candidates.append(found)
        if not candidates:
            continue
        ref, asked = max(candidates, key=lambda c: len(_within(conv.sessions, *c)) > 1)
        used.add(tid)
        speaker = dict(topic.speaker)[tid]
        other = names[1] if speaker == names[0] else names[0]
        question = _ask(rng, TOPICAL, names, ref.phrase, s=speaker, o=other, p=topic.phrase)
        out.append(_Draft(question, asked, (gold,), ref.expression, topic.phrase))
    return out


_TOPICAL_TIMES = ("weeks", "months_ago", "month", "days_ago", "weekday", "date")


def _topical_ref(
    rng: random.Random, how: str, gold: Session, mentioned: Sequence[Session]
) -> tuple[_TimeRef, datetime] | None:
    """A time reference of kind ``how`` (one of _TOPICAL_TIMES) that covers ``gold``."""
    day = gold.started_at.date()
    if how == "weeks":
        return _weeks_question(rng, mentioned, gold)
    if how == "months_ago":
        n = rng.choice((1, 1, 2, 3))
        year, month = _shift_month(day.year, day.month, n)
        asked = _at(rng, _random_day_of_month(rng, year, month))
        return (_months_ago_ref(rng, n, asked), asked) if asked else None
    if how == "month":
        _, end = _month_window(day.year, day.month)
        asked = _at(rng, end.date() + rng.randint(0, 60) * DAY)
        return (_month_ref(rng, day.year, day.month, rng.random() < 0.3), asked) if asked else None
    if how == "days_ago":
        n = rng.randint(1, 6)
        asked = _at(rng, day + n * DAY)
        words = "yesterday" if n == 1 else f"{_number(rng, n)} days ago"
        return (_day_ref(day, words), asked) if asked else None
    if how == "weekday":
        asked = _at(rng, day + rng.randint(1, 6) * DAY)
        return (_weekday_ref(rng, day, asked), asked) if asked else None
    asked = _at(rng, day + rng.randint(1, 60) * DAY)
    words = _date_words(rng, day, with_year=rng.random() < 0.3)
    return (_day_ref(day, f"on {words}", words), asked) if asked else None


# -- the whole set


def _default_raw_path() -> Path:
    """LoCoMo's original JSON (with the summaries), beside the JSONL the loader reads."""
    jsonl = Path(os.environ.get("EPISODIC_LOCOMO_PATH") or locomo.DEFAULT_PATH)
    return jsonl.with_name("locomo10.json")


def load_summaries(path: str | Path | None = None) -> dict[str, str]:
    """Per conversation id, its session and event summaries as one lower-cased text.

    Empty when LoCoMo's original JSON is not there; topics then come from the messages alone.
    """
    source = Path(path) if path else _default_raw_path()
    if not source.is_file():
        warnings.warn(f"{source} not found: topics are not checked against summaries", stacklevel=2)
        return {}
    out: dict[str, str] = {}
    for sample in json.loads(source.read_text(encoding="utf-8")):
        parts = [str(v) for v in sample.get("session_summary", {}).values()]
        for events in sample.get("event_summary", {}).values():
            for who, items in events.items():
                if who != "date":
                    parts.extend(str(e) for e in items)
        out[sample["sample_id"]] = "\n".join(parts).lower()
    return out


def build_temporal_questions(
    conversations: Sequence[Conversation],
    seed: int = 0,
    summaries: dict[str, str] | None = None,
) -> list[TemporalQuestion]:
    """Every kind of temporal question for each conversation, deterministic for ``seed``.

    ``summaries`` (see ``load_summaries``, read by default) vet the topics of
    ``topical_time`` questions.
    """
    if summaries is None:
        summaries = load_summaries()
    kinds: dict[str, Callable[[Conversation, random.Random, tuple[str, str]], list[_Draft]]] = {
        "relative_day": _relative_day,
        "relative_week_month": _relative_week_month,
        "weekday": _weekday,
        "absolute_date": _absolute_date,
        "month": _month,
        "date_span": _date_span,
        "session_ordinal": _session_ordinal,
        "sessions_ago": _sessions_ago,
    }
    out: list[TemporalQuestion] = []
    for conv in conversations:
        names = _speakers(conv)
        topics = _topics(conv, summaries.get(conv.conversation_id, ""))
        for kind in KINDS:
            rng = random.Random(f"{seed}/{conv.conversation_id}/{kind}")
            if kind == "topical_time":
                drafts = _topical_time(conv, rng, names, topics)
            else:
                drafts = kinds[kind](conv, rng, names)
            drafts.sort(key=lambda d: (d.asked_at, d.question))
            for i, d in enumerate(drafts, 1):
                out.append(
                    TemporalQuestion(
                        qid=f"{conv.conversation_id}/{kind}/{i:02d}",
                        conversation_id=conv.conversation_id,
                        kind=kind,
                        question=d.question,
                        asked_at=d.asked_at,
                        evidence_threads=tuple(
                            s.thread_id for s in sorted(d.gold, key=lambda s: s.started_at)
                        ),
                        expression=d.expression,
                        topic=d.topic,
                    )
                )
    return out


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
                return any(pattern.search(_CAPTION.sub(" ", m.content)) for m in s.messages)

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


def main(argv: Sequence[str] | None = None) -> int:
    """Writes the questions as JSONL, prints the counts per kind, and validates them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="JSONL file to write (default: standard output)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, default=0, help="also print N random questions")
    args = parser.parse_args(argv)

    conversations = locomo.load()
    questions = build_temporal_questions(conversations, seed=args.seed)
    lines = "".join(json.dumps(q.to_json()) + "\n" for q in questions)
    report = sys.stderr if args.out is None else sys.stdout
    if args.out is None:
        sys.stdout.write(lines)
    else:
        Path(args.out).write_text(lines, encoding="utf-8")
        print(f"wrote {len(questions)} questions to {args.out}", file=report)
    counts = Counter(q.kind for q in questions)
    for kind in KINDS:
        print(f"{kind:20} {counts[kind]:4}", file=report)
    print(f"{'total':20} {len(questions):4}", file=report)
    if args.show:
        for q in random.Random(args.seed).sample(questions, min(args.show, len(questions))):
            print(
                f"[{q.kind}] {q.question}  @ {q.asked_at:%a %Y-%m-%d %H:%M}"
                f"  -> {', '.join(q.evidence_threads)}  ({q.expression!r})",
                file=report,
            )
    validate(questions, conversations)
    print("validated", file=report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
