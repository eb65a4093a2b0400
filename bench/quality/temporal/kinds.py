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
    DraftQuestion,
    TimeRef,
    date_words,
    day_ref,
    fill_template,
    general_question,
    midnight,
    month_window,
    number_phrase,
    random_minute,
    sessions_within,
    shift_month,
    time_between_sessions,
    with_ordinal_suffix,
)

# -- the kinds


def relative_day_questions(
    conv: Conversation, rng: random.Random, names: tuple[str, str]
) -> list[DraftQuestion]:
    """Questions like "What did we talk about 2 days ago?", asked N days after a session."""
    out: list[DraftQuestion] = []
    for session in rng.sample(conv.sessions, len(conv.sessions)):
        if len(out) >= PER_CONVERSATION:
            break
        n = rng.choices(range(11), weights=(1, 4, 3, 2, 2, 1, 1, 1, 0.5, 0.5, 0.5))[0]
        day = session.started_at.date()
        asked = random_minute(rng, day + n * DAY, after=session.started_at if n == 0 else None)
        if asked is None:
            continue
        if n == 0:
            words = rng.choice(("today", "earlier today"))
        elif n == 1:
            words = "yesterday"
        elif n == 2 and rng.random() < 0.4:
            words = "the day before yesterday"
        else:
            words = f"{number_phrase(rng, n)} days ago"
        ref = day_ref(day, words)
        gold = sessions_within(conv.sessions, ref, asked)
        if gold != (session,):
            continue
        out.append(
            DraftQuestion(general_question(rng, names, ref, True), asked, gold, ref.expression)
        )
    return out


def _weeks_ago_ref(rng: random.Random, n: int, asked: datetime) -> TimeRef:
    words = "a week ago" if n == 1 else f"{number_phrase(rng, n)} weeks ago"
    centre = asked - n * WEEK
    return TimeRef(words, words, centre - HALF_WEEK, centre + HALF_WEEK)


def _last_week_ref(asked: datetime) -> TimeRef:
    monday = asked.date() - asked.weekday() * DAY
    return TimeRef("last week", "last week", midnight(monday - WEEK), midnight(monday))


def months_ago_ref(rng: random.Random, n: int, asked: datetime) -> TimeRef:
    """``last month`` / ``N months ago`` said at ``asked``: that whole calendar month."""
    words = f"{number_phrase(rng, n)} months ago"
    if n == 1:
        words = rng.choice(("last month", "a month ago"))
    start, end = month_window(*shift_month(asked.year, asked.month, -n))
    return TimeRef(words, words, start, end)


def weeks_ref_for_session(
    rng: random.Random, sessions: Sequence[Session], session: Session
) -> tuple[TimeRef, datetime] | None:
    """A "last week" / "N weeks ago" reference whose window holds ``session`` alone."""
    n = rng.choice((0, 0, 1, 2, 2, 3, 4))  # 0: "last week"
    for _ in range(6):
        if n == 0:
            monday = session.started_at.date() - session.started_at.weekday() * DAY + WEEK
            asked = random_minute(rng, monday + rng.randint(0, 6) * DAY)
            if asked is None:
                continue
            ref = _last_week_ref(asked)
            if sessions_within(sessions, ref, asked) == (session,):
                return ref, asked
            continue
        # asked_at - 7n days must be within 3.5 days (minus the margin) of the session.
        slack = HALF_WEEK - WEEK_MARGIN
        lo = session.started_at + n * WEEK - slack
        minutes = int(2 * slack.total_seconds() // 60)
        asked = (lo + timedelta(minutes=rng.randint(0, minutes))).replace(second=0)
        ref = _weeks_ago_ref(rng, n, asked)
        wide = TimeRef("", "", ref.start - WEEK_MARGIN, ref.end + WEEK_MARGIN)
        narrow = TimeRef("", "", ref.start + WEEK_MARGIN, ref.end - WEEK_MARGIN)
        if (
            sessions_within(sessions, wide, asked)
            == sessions_within(sessions, narrow, asked)
            == (session,)
        ):
            return ref, asked
    return None


def _by_month(sessions: Sequence[Session]) -> dict[tuple[int, int], tuple[Session, ...]]:
    groups: dict[tuple[int, int], list[Session]] = defaultdict(list)
    for s in sessions:
        groups[(s.started_at.year, s.started_at.month)].append(s)
    return {k: tuple(v) for k, v in sorted(groups.items())}


def random_day_of_month(rng: random.Random, year: int, month: int) -> date:
    """A random day of ``year``-``month``."""
    start, end = month_window(year, month)
    return start.date() + rng.randint(0, (end - start).days - 1) * DAY


def relative_week_month_questions(
    conv: Conversation, rng: random.Random, names: tuple[str, str]
) -> list[DraftQuestion]:
    """Questions with "last week", "2 weeks ago", "a month ago", "8 months ago"."""
    out: list[DraftQuestion] = []
    # Weeks: one gold session alone in the window.
    for session in rng.sample(conv.sessions, len(conv.sessions)):
        if len(out) >= PER_CONVERSATION // 2:
            break
        found = weeks_ref_for_session(rng, conv.sessions, session)
        if found is None:
            continue
        ref, asked = found
        out.append(
            DraftQuestion(
                general_question(rng, names, ref, True), asked, (session,), ref.expression
            )
        )
    # Months: every session of the month (one to three of them).
    months = [(k, v) for k, v in _by_month(conv.sessions).items() if 1 <= len(v) <= 3]
    for (year, month), gold in rng.sample(months, len(months)):
        if len(out) >= PER_CONVERSATION:
            break
        n = rng.choices(range(1, 9), weights=(4, 3, 2, 2, 1, 1, 1, 1))[0]
        ay, am = shift_month(year, month, n)
        asked = random_minute(rng, random_day_of_month(rng, ay, am))
        assert asked is not None
        ref = months_ago_ref(rng, n, asked)
        if sessions_within(conv.sessions, ref, asked) != gold:
            continue
        out.append(
            DraftQuestion(
                general_question(rng, names, ref, len(gold) == 1), asked, gold, ref.expression
            )
        )
    return out


def weekday_ref(rng: random.Random, day: date, asked: datetime) -> TimeRef:
    """How to name ``day`` (1 to 6 days before ``asked``) by its weekday."""
    name = WEEKDAYS[day.weekday()]
    same_week = day.isocalendar()[:2] == asked.date().isocalendar()[:2]
    forms = ((f"on {name}", name), (f"this past {name}", None), (f"last {name}", None))
    phrase, words = rng.choices(forms, weights=(3, 2, 1) if same_week else (1, 1, 3))[0]
    return day_ref(day, phrase, words)


def weekday_questions(
    conv: Conversation, rng: random.Random, names: tuple[str, str]
) -> list[DraftQuestion]:
    """Questions like "What did we discuss last Tuesday?", asked 1 to 6 days after."""
    out: list[DraftQuestion] = []
    for session in rng.sample(conv.sessions, len(conv.sessions)):
        if len(out) >= PER_CONVERSATION:
            break
        day = session.started_at.date()
        asked = random_minute(rng, day + rng.randint(1, 6) * DAY)
        assert asked is not None
        ref = weekday_ref(rng, day, asked)
        gold = sessions_within(conv.sessions, ref, asked)
        if gold != (session,):
            continue
        out.append(
            DraftQuestion(general_question(rng, names, ref, True), asked, gold, ref.expression)
        )
    return out


def absolute_date_questions(
    conv: Conversation, rng: random.Random, names: tuple[str, str]
) -> list[DraftQuestion]:
    """Questions like "What did we talk about on May 8th?" or "... on 8 May 2023?"."""
    out: list[DraftQuestion] = []
    for i, session in enumerate(rng.sample(conv.sessions, len(conv.sessions))):
        if len(out) >= PER_CONVERSATION:
            break
        day = session.started_at.date()
        asked = random_minute(rng, day + rng.randint(1, 75) * DAY)
        assert asked is not None
        words = date_words(rng, day, with_year=i % 2 == 1)
        ref = day_ref(day, f"on {words}", words)
        gold = sessions_within(conv.sessions, ref, asked)
        if gold != (session,):
            continue
        out.append(
            DraftQuestion(general_question(rng, names, ref, True), asked, gold, ref.expression)
        )
    return out


def month_ref(rng: random.Random, year: int, month: int, with_year: bool) -> TimeRef:
    """A month named ("in July", "during May 2023"): the whole calendar month."""
    words = f"{MONTHS[month - 1]} {year}" if with_year else MONTHS[month - 1]
    prep = rng.choice(("in", "in", "during", "back in"))
    start, end = month_window(year, month)
    return TimeRef(f"{prep} {words}", words, start, end)


def month_questions(
    conv: Conversation, rng: random.Random, names: tuple[str, str]
) -> list[DraftQuestion]:
    """Questions like "What did we discuss in July?" about months with 1 to 3 sessions."""
    out: list[DraftQuestion] = []
    months = [(k, v) for k, v in _by_month(conv.sessions).items() if 1 <= len(v) <= 3]
    variants = [(k, v, with_year) for k, v in months for with_year in (False, True)]
    for (year, month), gold, with_year in rng.sample(variants, len(variants)):
        if len(out) >= PER_CONVERSATION + 1:
            break
        _, end = month_window(year, month)
        asked = random_minute(rng, end.date() + rng.randint(0, 120) * DAY)
        assert asked is not None
        ref = month_ref(rng, year, month, with_year)
        if sessions_within(conv.sessions, ref, asked) != gold:
            continue
        out.append(
            DraftQuestion(
                general_question(rng, names, ref, len(gold) == 1), asked, gold, ref.expression
            )
        )
    return out


def _span_ref(rng: random.Random, first: date, last: date) -> TimeRef:
    """A span of days such as "between May 8th and June 9th" (both days included)."""
    style = rng.choice(("none", "none", "end", "both"))
    if style == "end":
        # "from 8 May to 9 June 2023": the year once, after the end.
        a = f"{first.day} {MONTHS[first.month - 1]}"
        b = f"{last.day} {MONTHS[last.month - 1]} {last.year}"
    else:
        form = rng.randrange(4 if style == "none" else 3)  # the same style for both ends
        a = date_words(rng, first, with_year=style == "both", form=form)
        b = date_words(rng, last, with_year=style == "both", form=form)
    words = rng.choice((f"between {a} and {b}", f"from {a} to {b}", f"from {a} through {b}"))
    return TimeRef(words, words, midnight(first), midnight(last) + DAY)


def date_span_questions(
    conv: Conversation, rng: random.Random, names: tuple[str, str]
) -> list[DraftQuestion]:
    """Questions like "What did we discuss between May 8th and June 9th?" (1 to 3 sessions)."""
    out: list[DraftQuestion] = []
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
        asked = random_minute(rng, last + rng.randint(1, 45) * DAY)
        assert asked is not None
        ref = _span_ref(rng, first, last)
        if sessions_within(sessions, ref, asked) != gold:
            continue
        seen.add(key)
        out.append(
            DraftQuestion(
                general_question(rng, names, ref, len(gold) == 1), asked, gold, ref.expression
            )
        )
    return out


def _ordinal_words(rng: random.Random, k: int) -> str:
    """The ordinal of the (k+1)th session: "third", sometimes "3rd"; "14th" past twelve."""
    if k < len(ORDINAL_WORDS) and (k < 3 or rng.random() < 0.7):
        return ORDINAL_WORDS[k]
    return with_ordinal_suffix(k + 1)


def session_ordinal_questions(
    conv: Conversation, rng: random.Random, names: tuple[str, str]
) -> list[DraftQuestion]:
    """Questions about "our third session", "the first time we talked", "our last chat"."""
    out: list[DraftQuestion] = []
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
        asked = time_between_sessions(rng, sessions, j)
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
        out.append(DraftQuestion(question, asked, (gold,), expression))
    return out


def sessions_ago_questions(
    conv: Conversation, rng: random.Random, names: tuple[str, str]
) -> list[DraftQuestion]:
    """Questions about "3 sessions ago" or "the session before last" (the Nth latest)."""
    out: list[DraftQuestion] = []
    sessions = conv.sessions
    seen: set[tuple[str, str]] = set()
    for _ in range(40):
        if len(out) >= PER_CONVERSATION:
            break
        n = rng.choices(range(2, 7), weights=(4, 3, 2, 1, 1))[0]
        # Half the time just after the last session, otherwise between two sessions.
        j = len(sessions) - 1 if rng.random() < 0.5 else rng.randrange(n - 1, len(sessions))
        asked = time_between_sessions(rng, sessions, j)
        if asked is None:
            continue
        gold = sessions[j - n + 1]
        noun = rng.choice(("session", "conversation", "chat"))
        if n == 2 and rng.random() < 0.5:
            words = f"the {noun} before last"
            phrase = f"in {words}"
        else:
            words = f"{number_phrase(rng, n)} {noun}s ago"
            phrase = words
        if (gold.thread_id, words) in seen:
            continue
        seen.add((gold.thread_id, words))
        out.append(DraftQuestion(fill_template(rng, GENERAL, names, phrase), asked, (gold,), words))
    return out
