"""The generators of the temporal questions that name a time alone, one per kind: days
(``today``, ``2 days ago``), weeks and months ago, weekdays, dates, months, spans of days,
and sessions by their order (``our third session``, ``the session before last``); each
draws a conversation's questions with its own random generator."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from datetime import date, datetime, timedelta

from bench.harness.locomo import Conversation, Session
from bench.quality.temporal.vocabulary import (
    DAY,
    GENERAL,
    HALF_WEEK,
    MONTHS,
    ORDINAL,
    ORDINAL_TIME,
    ORDINAL_WORDS,
    PER_CONVERSATION,
    WEEK,
    WEEK_MARGIN,
    WEEKDAYS,
    _ask,
    _at,
    _between,
    _date_words,
    _day_ref,
    _Draft,
    _general,
    _midnight,
    _month_window,
    _number,
    _shift_month,
    _suffixed,
    _TimeRef,
    _within,
)

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
