"""What every kind of temporal question shares (``bench.quality.temporal_questions`` states
the rules): the kinds, the words for months, weekdays, numbers and ordinals, the question
templates, a question's shape (``TemporalQuestion``, and a time named in words with its
window, ``TimeRef``), and the calendar and wording helpers the generators build
questions with."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

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
class TimeRef:
    """A time named in words and the window it resolves to."""

    phrase: str  # as put in the question, e.g. "on May 8th"
    expression: str  # the time words, e.g. "May 8th"
    start: datetime
    end: datetime  # exclusive


@dataclass(frozen=True)
class DraftQuestion:
    """A question before it gets its id."""

    question: str
    asked_at: datetime
    gold: tuple[Session, ...]
    expression: str
    topic: str | None = None


# -- calendar helpers


def midnight(day: date) -> datetime:
    """The start of ``day``, in UTC."""
    return datetime.combine(day, time(), tzinfo=UTC)


def random_minute(rng: random.Random, day: date, after: datetime | None = None) -> datetime | None:
    """A random minute of ``day`` between 08:00 and 22:59, at least an hour after ``after``."""
    lo = midnight(day) + timedelta(hours=8)
    if after is not None:
        lo = max(lo, after.replace(second=0, microsecond=0) + timedelta(hours=1))
    hi = midnight(day) + timedelta(hours=22, minutes=59)
    if lo > hi:
        return None
    return lo + timedelta(minutes=rng.randint(0, int((hi - lo).total_seconds() // 60)))


def sessions_within(
    sessions: Sequence[Session], ref: TimeRef, asked_at: datetime
) -> tuple[Session, ...]:
    """The sessions in the window of ``ref`` that started by ``asked_at``."""
    return tuple(
        s for s in sessions if ref.start <= s.started_at < ref.end and s.started_at <= asked_at
    )


def shift_month(year: int, month: int, by: int) -> tuple[int, int]:
    """The (year, month) ``by`` months after ``year``-``month`` (before it when negative)."""
    index = year * 12 + (month - 1) + by
    return index // 12, index % 12 + 1


def month_window(year: int, month: int) -> tuple[datetime, datetime]:
    """The month from its first midnight to the next month's (exclusive)."""
    ny, nm = shift_month(year, month, 1)
    return midnight(date(year, month, 1)), midnight(date(ny, nm, 1))


def day_ref(day: date, phrase: str, expression: str | None = None) -> TimeRef:
    """``day`` named by ``phrase`` (its time words ``expression``, else the phrase)."""
    return TimeRef(phrase, expression or phrase, midnight(day), midnight(day) + DAY)


# -- wording helpers


def number_phrase(rng: random.Random, n: int) -> str:
    """``n`` as digits or, for small numbers, sometimes as a word."""
    return NUMBER_WORDS[n] if n < len(NUMBER_WORDS) and rng.random() < 0.5 else str(n)


def with_ordinal_suffix(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 22nd."""
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th') }"


def date_words(rng: random.Random, day: date, with_year: bool, form: int | None = None) -> str:
    """``day`` written the way people do, with or without its year (``form``: which way)."""
    month = MONTHS[day.month - 1]
    if with_year:
        forms = (
            f"{month} {day.day}, {day.year}",
            f"{month} {with_ordinal_suffix(day.day)}, {day.year}",
            f"{day.day} {month} {day.year}",
        )
    else:
        forms = (
            f"{month} {with_ordinal_suffix(day.day)}",
            f"{month} {day.day}",
            f"{day.day} {month}",
            f"the {with_ordinal_suffix(day.day)} of {month}",
        )
    return forms[form] if form is not None else rng.choice(forms)


def fill_template(
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


def general_question(rng: random.Random, names: tuple[str, str], ref: TimeRef, single: bool) -> str:
    """A question about what was said at ``ref``; ``single``: the gold is one session, so
    the templates that speak of one conversation may be drawn too."""
    return fill_template(rng, GENERAL + SINGLE if single else GENERAL, names, ref.phrase)


def speaker_names(conv: Conversation) -> tuple[str, str]:
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


def time_between_sessions(
    rng: random.Random, sessions: Sequence[Session], j: int
) -> datetime | None:
    """A time after session ``j`` (by at least an hour) and before session ``j + 1``.

    After the last session, a time up to ten days later.
    """
    start = sessions[j].started_at
    last_day = (
        sessions[j + 1].started_at.date() if j + 1 < len(sessions) else start.date() + 10 * DAY
    )
    for _ in range(8):
        day = start.date() + rng.randint(0, (last_day - start.date()).days) * DAY
        asked = random_minute(rng, day, after=start if day == start.date() else None)
        if asked is not None and (j + 1 == len(sessions) or asked < sessions[j + 1].started_at):
            return asked
    return None
