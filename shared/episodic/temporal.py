"""Time in the query: the time expressions of a recall query, resolved against ``as_of``.

Agents ask "what did we discuss 2 days ago?", "in our eighth session", "between May 8th
and June 9th", "the last 3 decisions about pricing". :func:`understand` finds such
expressions in the query text and turns each into a **time window** or an **ordinal**
(which session, counted from the first or the last), and gives back the query without
those words, so the words that name a time do not also compete as topic words.

Finding an expression is a small set of patterns (below); turning a date phrase into a
date is **dateparser**'s job (a maintained library with many formats and languages:
"May 8th", "8 May", "the 8th of May", "2023-05-08", "8 mai"), called with
``PREFER_DATES_FROM=past`` and ``RELATIVE_BASE=as_of``. Windows for relative phrases are
computed here, because their meaning is a rule of ours, not a parse.

Rules (all in UTC; a window is half-open, ``[start, end)``; nothing after ``as_of`` counts):

- ``today`` / ``earlier today`` / ``this morning``: as_of's day. ``yesterday``: the day
  before; ``the day before yesterday`` and ``N days ago``: N days before.
- ``last week``: the previous ISO week (Monday to Monday); ``this week``: the current one.
  ``N weeks ago`` (``a week ago``): the 7 days centred N weeks before as_of.
- ``last month``, ``a month ago``, ``N months ago``: the whole calendar month N months before
  as_of's month; ``this month``: the current one. ``last year`` / ``N years ago`` likewise.
- ``last Tuesday``, ``this past Tuesday``, ``on Tuesday``: the most recent Tuesday strictly
  before as_of's date.
- A month without a year (``in July``) is the most recent July that has begun by as_of; with
  a year, that month. A date without a year (``May 8th``) is the most recent one on or
  before as_of's date; a date is the whole day.
- ``between X and Y`` / ``from X to|through|until Y``: every day from X to Y, both included;
  X without a year is the most recent such date on or before Y.
- Sessions (threads, in order of their first message): ``our first/third/12th session``,
  ``the third time we talked`` → that one; ``our last/latest/most recent session``,
  ``the previous session`` → the latest; ``N sessions ago`` → the Nth latest (``the session
  before last`` = 2). ``session``, ``conversation``, ``chat`` and ``time`` are synonyms.
  With a topic left over (``the first time we talked about Atlas``), the ordinal counts the
  episodes that match the topic instead of all sessions.
- ``the last|first N decisions|milestones|events …``: the N latest (or earliest) episodes
  of that event type (any type for ``events``/``sessions``) matching the rest.
- A time whose window the calendar cannot hold (before 0001-01-01 or from 10000-01-01 on:
  ``December 31, 9999``, ``yesterday`` as of 0001-01-01) is not read, like a year alone
  (``in 9999``) or a number of days too large to be one (``99999999999 days ago``): its
  words stay in the query, and no part of them is read as a smaller time.

When nothing but time is left of the query ("what did we discuss 2 days ago?"), the query
is *time only*: Recall returns the episodes of the window in time order.

A time narrows the search only when it names when something was *said*: the question is
about the conversation (we, discuss, talk, tell, mention, share, decide, session…), names
nothing but time, or names a session. "When did Ann go camping in June?" names when
something *happened*, which a later conversation may tell; it is ranked as written (LoCoMo
has many such questions, and a window there hides the answer).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

__all__ = [
    "Ordinal",
    "QueryTime",
    "TimeExpression",
    "understand",
    "warm_up",
]

_NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "couple of": 2,
    "few": 3,
}
_ORDINAL_WORDS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
    "eleventh": 11,
    "twelfth": 12,
    "thirteenth": 13,
    "fourteenth": 14,
    "fifteenth": 15,
    "sixteenth": 16,
    "seventeenth": 17,
    "eighteenth": 18,
    "nineteenth": 19,
    "twentieth": 20,
    "thirtieth": 30,
}
_LATEST_WORDS = ("last", "latest", "most recent", "previous", "final")
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTH_ABBREVIATIONS = (
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
)
#: Event types the query can name in the plural ("the last 3 decisions").
_EVENT_NOUNS = {
    "decisions": "decision",
    "decision": "decision",
    "milestones": "milestone",
    "milestone": "milestone",
    "tool calls": "tool_call",
    "feedback": "feedback",
    "plans": "plan",
    "events": None,
    "sessions": None,
    "conversations": None,
    "chats": None,
    "times": None,
    "episodes": None,
}

#: The same, in the singular ("the last decision about pricing").
_EVENT_NOUN = {
    "decision": "decision",
    "milestone": "milestone",
    "plan": "plan",
    "tool call": "tool_call",
    "feedback": "feedback",
    "event": None,
}

_NUM = r"(?P<n>\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|couple of|few)"
_MONTH = r"(?:" + "|".join(_MONTHS + _MONTH_ABBREVIATIONS) + r")\.?"
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_YEAR = r"(?:,?\s+\d{4})"
# A date in words: "May 8th", "May 8, 2023", "8 May", "8 May 2023", "the 8th of May".
_DATE = (
    rf"(?:{_MONTH}\s+{_DAY}{_YEAR}?|(?:the\s+)?{_DAY}\s+(?:of\s+)?{_MONTH}{_YEAR}?"
    r"|\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{4})"
)
_SESSION_WORDS = r"sessions?|conversations?|chats?|times?|talks?"
_SESSION = rf"(?:{_SESSION_WORDS})"
_ORD = (
    r"(?P<ord>"
    + "|".join(sorted(_ORDINAL_WORDS, key=len, reverse=True))
    + r"|\d{1,3}(?:st|nd|rd|th)"
    r"|last|latest|most recent|previous|final)"
)

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "date_span",
        re.compile(
            rf"\b(?:between|from)\s+(?P<a>{_DATE})\s+(?:and|to|through|thru|until|till|-)\s+"
            rf"(?P<b>{_DATE})",
            re.I,
        ),
    ),
    ("sessions_ago", re.compile(rf"\b{_NUM}\s+{_SESSION}\s+ago\b", re.I)),
    (
        "session_before_last",
        re.compile(r"\bthe\s+(?:session|conversation|chat|time)\s+before\s+last\b", re.I),
    ),
    (
        "last_n",
        re.compile(
            r"\b(?:the\s+)?(?P<dir>last|latest|first|most recent)\s+(?P<n>\d{1,3}|two|three|four|"
            r"five|six|seven|eight|nine|ten|few|couple of)\s+(?P<noun>"
            + "|".join(sorted(_EVENT_NOUNS, key=len, reverse=True))
            + r")\b",
            re.I,
        ),
    ),
    (
        "last_event",
        re.compile(
            r"\b(?:the\s+)?(?P<dir>last|latest|first|most recent)\s+(?P<noun>decision|milestone|"
            r"event|plan|tool call|feedback)\b",
            re.I,
        ),
    ),
    (
        "session_ordinal",
        re.compile(rf"\b(?:(?:our|the|my|that)\s+)?{_ORD}\s+(?P<noun>{_SESSION_WORDS})\b", re.I),
    ),
    (
        "relative_day",
        re.compile(
            rf"\b(?:earlier today|this morning|this afternoon|tonight|today|the day before "
            rf"yesterday|yesterday|last night|{_NUM}\s+days?\s+ago)\b",
            re.I,
        ),
    ),
    (
        "relative_week",
        re.compile(rf"\b(?:last week|this week|the past week|{_NUM}\s+weeks?\s+ago)\b", re.I),
    ),
    (
        "relative_month",
        re.compile(rf"\b(?:last month|this month|{_NUM}\s+months?\s+ago)\b", re.I),
    ),
    (
        "relative_year",
        re.compile(rf"\b(?:last year|this year|{_NUM}\s+years?\s+ago)\b", re.I),
    ),
    (
        "weekday",
        re.compile(
            r"\b(?:(?:last|this past|on|past)\s+)?(?P<wd>" + "|".join(_WEEKDAYS) + r")\b", re.I
        ),
    ),
    ("absolute_date", re.compile(rf"\b(?:on\s+)?(?P<d>{_DATE})\b", re.I)),
    (
        "month",
        re.compile(
            r"\b(?:(?:in|during|back in|of)\s+)?(?P<m>"
            + "|".join(_MONTHS)
            + r")(?P<y>\s+\d{4})?\b",
            re.I,
        ),
    ),
]

# Words that carry no topic once the time is taken out of a question.
_FILLER = frozenset(
    [
        "a",
        "about",
        "after",
        "again",
        "all",
        "am",
        "an",
        "and",
        "any",
        "anything",
        "are",
        "as",
        "ask",
        "asked",
        "at",
        "be",
        "been",
        "before",
        "bring",
        "brought",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "done",
        "during",
        "else",
        "ever",
        "for",
        "from",
        "get",
        "got",
        "had",
        "happen",
        "happened",
        "has",
        "have",
        "he",
        "her",
        "here",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "just",
        "know",
        "last",
        "let",
        "like",
        "me",
        "mention",
        "mentioned",
        "more",
        "most",
        "my",
        "new",
        "no",
        "not",
        "now",
        "of",
        "on",
        "once",
        "one",
        "or",
        "our",
        "out",
        "over",
        "please",
        "recall",
        "recap",
        "remember",
        "remind",
        "said",
        "say",
        "says",
        "she",
        "should",
        "so",
        "some",
        "something",
        "speak",
        "spoke",
        "summarise",
        "summarize",
        "summary",
        "talk",
        "talked",
        "talking",
        "tell",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "thing",
        "things",
        "this",
        "those",
        "time",
        "times",
        "to",
        "told",
        "up",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "conversation",
        "conversations",
        "session",
        "sessions",
        "chat",
        "chats",
        "chatted",
        "discuss",
        "discussed",
        "discussing",
        "discussion",
        "go",
        "went",
        "earlier",
        "later",
        "again",
        "back",
        "topic",
        "topics",
        "us",
    ]
)


@dataclass(frozen=True)
class TimeExpression:
    """A time named in the query: its words, kind, and the window it resolves to."""

    text: str
    kind: str
    start: datetime | None = None
    end: datetime | None = None  # exclusive


@dataclass(frozen=True)
class Ordinal:
    """Which session(s) or matching episode(s), by order in time."""

    text: str
    position: int  # 1-based: first = 1 (from_end False), last = 1 (from_end True)
    from_end: bool
    count: int = 1  # how many from that position ("the last 3 decisions")
    scope: str = "sessions"  # "sessions" (threads in order) or "matches" (matching episodes)
    event_type: str | None = None  # "the last 3 decisions": decision


@dataclass(frozen=True)
class QueryTime:
    """What :func:`understand` read from a query."""

    query: str
    remainder: str  # the query without its time words, for ranking
    expressions: tuple[TimeExpression, ...] = ()
    start: datetime | None = None
    end: datetime | None = None  # exclusive
    ordinal: Ordinal | None = None
    time_only: bool = False  # nothing but time: order the window by time
    #: Whether the time names when something was *said* (then it narrows the search):
    #: "what did we decide last week", "what did Ann tell Bo in July", "our third session".
    #: "When did Ann go camping in June?" names when something *happened*, which any later
    #: conversation may tell: such a query is ranked as written.
    applied: bool = True
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def found(self) -> bool:
        return bool(self.expressions) or self.ordinal is not None


# ---- calendar helpers --------------------------------------------------------------------


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def _day_window(day: date) -> tuple[datetime, datetime]:
    return _midnight(day), _midnight(day + timedelta(days=1))


def _month_window(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    nxt = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return start, nxt


def _shift_month(year: int, month: int, by: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) - by
    return index // 12, index % 12 + 1


def _number(text: str | None) -> int:
    if text is None:
        return 1
    value = text.strip().lower()
    return int(value) if value.isdigit() else _NUMBER_WORDS.get(value, 1)


def _ordinal(text: str) -> tuple[int, bool]:
    """(position, from_end) of an ordinal word: "third" → (3, False), "last" → (1, True)."""
    value = text.strip().lower()
    if value in _LATEST_WORDS:
        return 1, True
    if value in _ORDINAL_WORDS:
        return _ORDINAL_WORDS[value], False
    return int(re.sub(r"\D", "", value)), False


# ---- dates in words, through dateparser --------------------------------------------------

_parser_lock = threading.Lock()
_parse: Callable[..., Any] | None = None


def _dateparser() -> Callable[..., Any]:
    global _parse
    with _parser_lock:
        if _parse is None:
            import dateparser

            _parse = dateparser.parse
        return _parse


def warm_up() -> None:
    """Loads dateparser's language data (a few hundred ms), so the first query does not."""
    _parse_date("May 8th", datetime(2026, 1, 1, tzinfo=UTC))


def _read_date(text: str, base: datetime) -> datetime | None:
    parsed: datetime | None = _dateparser()(
        text,
        languages=["en"],
        settings={
            "PREFER_DATES_FROM": "past",
            "RELATIVE_BASE": base.astimezone(UTC).replace(tzinfo=None),
            "PREFER_DAY_OF_MONTH": "first",
            "RETURN_AS_TIMEZONE_AWARE": False,
            "DATE_ORDER": "MDY",
        },
    )
    return parsed


#: The Gregorian calendar repeats every 400 years (146097 days, a whole number of weeks).
_CYCLE = 400


def _parse_date(text: str, base: datetime) -> date | None:
    """The most recent date ``text`` names on or before ``base`` (or the date it names);
    None if ``text`` names no date. Raises OverflowError if that date is before year 1."""
    cleaned = re.sub(r"(\d)(st|nd|rd|th)\b", r"\1", text.strip(), flags=re.I)
    cleaned = re.sub(r"^the\s+", "", cleaned, flags=re.I)
    with_year = re.search(r"\d{4}", text) is not None
    parsed = _read_date(cleaned, base)
    if parsed is None:
        # dateparser answers None, not an error, when the most recent such date is before
        # year 1 ("December 20" as of 0001-01-05): the same words read 400 years later
        # tell that case (out of range) from words that name no date.
        if (
            not with_year
            and base.year <= _CYCLE
            and _read_date(cleaned, base.replace(year=base.year + _CYCLE)) is not None
        ):
            raise OverflowError(f"the most recent {text!r} is before year 1")
        return None
    day = parsed.date()
    if not with_year and day > base.date():
        # Without a year, a date after as_of means the same date a year earlier.
        if day.year == date.min.year:
            raise OverflowError(f"the most recent {text!r} is before year 1")
        try:
            day = day.replace(year=day.year - 1)
        except ValueError:
            day = day.replace(year=day.year - 1, day=28)
    return day


# ---- each kind ---------------------------------------------------------------------------


def _relative_day(text: str, n: str | None, as_of: datetime) -> tuple[datetime, datetime]:
    value = text.lower()
    today = as_of.astimezone(UTC).date()
    if (
        "today" in value
        or "this morning" in value
        or "this afternoon" in value
        or "tonight" in value
    ):
        days = 0
    elif "day before yesterday" in value:
        days = 2
    elif "yesterday" in value or "last night" in value:
        days = 1
    else:
        days = _number(n)
    return _day_window(today - timedelta(days=days))


def _relative_week(text: str, n: str | None, as_of: datetime) -> tuple[datetime, datetime]:
    value = text.lower()
    today = as_of.astimezone(UTC).date()
    monday = today - timedelta(days=today.weekday())
    if value == "this week":
        return _midnight(monday), _midnight(monday + timedelta(days=7))
    if value in ("last week", "the past week"):
        if value == "the past week":
            return as_of - timedelta(days=7), as_of
        return _midnight(monday - timedelta(days=7)), _midnight(monday)
    centre = as_of - timedelta(days=7 * _number(n))
    return centre - timedelta(days=3.5), centre + timedelta(days=3.5)


def _relative_month(text: str, n: str | None, as_of: datetime) -> tuple[datetime, datetime]:
    value = text.lower()
    by = 0 if value == "this month" else 1 if value == "last month" else _number(n)
    year, month = _shift_month(as_of.year, as_of.month, by)
    return _month_window(year, month)


def _relative_year(text: str, n: str | None, as_of: datetime) -> tuple[datetime, datetime]:
    value = text.lower()
    by = 0 if value == "this year" else 1 if value == "last year" else _number(n)
    year = as_of.year - by
    return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)


def _weekday(name: str, as_of: datetime) -> tuple[datetime, datetime]:
    today = as_of.astimezone(UTC).date()
    wanted = _WEEKDAYS.index(name.lower())
    back = (today.weekday() - wanted) % 7 or 7  # strictly before today
    return _day_window(today - timedelta(days=back))


def _month(name: str, year: str | None, as_of: datetime) -> tuple[datetime, datetime]:
    month = _MONTHS.index(name.lower()) + 1
    if year:
        return _month_window(int(year), month)
    y = as_of.year if month <= as_of.month else as_of.year - 1
    return _month_window(y, month)


# ---- understanding a query ---------------------------------------------------------------


#: Kinds that name a calendar time, which a word before them can point into the future.
_CALENDAR_KINDS = frozenset({"weekday", "absolute_date", "month", "date_span"})
_FUTURE = re.compile(r"\b(?:next|coming|upcoming|until|till|by|before|after)\s+$", re.I)

_LEADING = re.compile(r"(?:\b(?:in|on|at|during|from|since|over|back in|of|for)\s+)$", re.I)


def _remove(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` without the spans, and without a preposition left dangling before one."""
    out, last = [], 0
    for a, b in sorted(spans):
        lead = _LEADING.search(text[last:a])
        if lead is not None:
            a = last + lead.start()
        out.append(text[last:a])
        last = b
    out.append(text[last:])
    return re.sub(r"\s{2,}", " ", " ".join(part.strip() for part in out)).strip(" ,;?!.")


def _content_words(text: str) -> list[str]:
    words = re.findall(r"[^\W_]+", text.lower())
    return [w for w in words if w not in _FILLER and not w.isdigit()]


#: Words that make a question about the conversation itself, so its time is when
#: something was said.
_ABOUT_CONVERSATION = re.compile(
    r"\b(?:we|us|our|discuss\w*|talk\w*|chat\w*|say|says|said|tell|told|mention\w*|"
    r"shar(?:e|ed|ing)|spoke|speak\w*|ask\w*|decid\w*|agree\w*|conversation\w*|"
    r"session\w*|remind\w*|recap\w*|summar\w*)\b",
    re.I,
)

_TOPIC = re.compile(
    r"\b(?:about|regarding|concerning|mentioned|mention|on the topic of)\b(.*)", re.I
)


def _topic(remainder: str) -> list[str]:
    """The content words after "about …" (what an ordinal counts among), if any."""
    m = _TOPIC.search(remainder)
    return _content_words(m.group(1)) if m else []


#: Kinds that resolve to a window (the others are ordinals).
_WINDOW_KINDS = frozenset(
    {
        "date_span",
        "relative_day",
        "relative_week",
        "relative_month",
        "relative_year",
        "weekday",
        "absolute_date",
        "month",
    }
)


def _window(
    kind: str, text: str, groups: dict[str, Any], as_of: datetime
) -> tuple[datetime, datetime] | None:
    """The window of an expression of a kind in :data:`_WINDOW_KINDS`, or None if its words
    name no time after all. Raises OverflowError or ValueError if the window falls outside
    the calendar (before 0001-01-01, or from 10000-01-01 on)."""
    if kind == "date_span":
        end_day = _parse_date(groups["b"], as_of)
        if end_day is None:
            return None
        start_day = _parse_date(groups["a"], _midnight(end_day) + timedelta(hours=23))
        if start_day is None:
            return None
        return _midnight(start_day), _midnight(end_day + timedelta(days=1))
    if kind == "relative_day":
        return _relative_day(text, groups.get("n"), as_of)
    if kind == "relative_week":
        return _relative_week(text.lower(), groups.get("n"), as_of)
    if kind == "relative_month":
        return _relative_month(text.lower(), groups.get("n"), as_of)
    if kind == "relative_year":
        return _relative_year(text.lower(), groups.get("n"), as_of)
    if kind == "weekday":
        return _weekday(groups["wd"], as_of)
    if kind == "absolute_date":
        day = _parse_date(groups["d"], as_of)
        return None if day is None else _day_window(day)
    if kind == "month":
        # "may" and "march" are also verbs: months only with a preposition or a year.
        if groups["m"].lower() in ("may", "march") and not (
            groups.get("y") or text.lower() not in ("may", "march")
        ):
            return None
        return _month(groups["m"], (groups.get("y") or "").strip() or None, as_of)
    raise AssertionError(f"not a window kind: {kind}")


#: How many time expressions :func:`understand` reads from one query. Each costs about a
#: millisecond of interpreter time (dateparser), under the interpreter lock every other call
#: of the replica shares: a query of thousands of dates cost ~460 ms of it, which one key's
#: calls in flight turned into every other tenant's wait (issue 49). A question names one
#: or two times; past this many, the rest of the query is ranked as words, and the answer
#: says so.
MAX_TIME_EXPRESSIONS = 8


def understand(query: str, as_of: datetime) -> QueryTime:
    """The time expressions of ``query`` resolved against ``as_of`` (aware), the window
    they make (intersected when there are several), an ordinal, and the query without
    those words. Reads at most :data:`MAX_TIME_EXPRESSIONS` of them."""
    as_of = as_of.astimezone(UTC)
    taken: list[tuple[int, int]] = []
    windows_read, cut = 0, False
    # Expressions whose window the calendar cannot hold (OverflowError or "year … is out of
    # range" while computing it). They are not read, the way a bare year ("in 9999") or an
    # "N days ago" too long to match ("99999999999 days ago") is not: not found, their words
    # left in the query for ranking. Not clamped: a window cut at 0001-01-01 or 9999-12-31
    # would be a time the query did not name, and would narrow the search to it. Their
    # spans stay blocked, so that no part of them is read as a smaller time ("December 31,
    # 9999" is not the most recent December).
    unreadable: list[tuple[int, int]] = []
    expressions: list[TimeExpression] = []
    ordinal: Ordinal | None = None

    def free(a: int, b: int) -> bool:
        return all(b <= x or a >= y for x, y in taken + unreadable)

    for kind, pattern in _PATTERNS:
        if cut:
            break  # past the cap nothing more is read: the rest of the query stays words
        for m in pattern.finditer(query):
            if not free(*m.span()):
                continue
            # "my plan for next Tuesday" is about the plan, not when we spoke. The words just
            # before the match (64 characters hold "upcoming" and its spaces): searching the
            # whole prefix for every match was quadratic in a long query.
            if kind in _CALENDAR_KINDS and _FUTURE.search(
                query[max(0, m.start() - 64) : m.start()]
            ):
                continue
            text = m.group(0).strip()
            groups = m.groupdict()
            window: tuple[datetime, datetime] | None = None
            if kind in _WINDOW_KINDS:
                if windows_read == MAX_TIME_EXPRESSIONS:
                    cut = True
                    break
                windows_read += 1
                try:
                    window = _window(kind, text, groups, as_of)
                except (OverflowError, ValueError):
                    unreadable.append(m.span())
                    continue
                if window is None:
                    continue
            elif kind in ("sessions_ago", "session_before_last"):
                n = 2 if kind == "session_before_last" else _number(groups.get("n"))
                ordinal = Ordinal(text=text, position=n, from_end=True)
            elif kind == "last_n":
                direction = groups["dir"].lower()
                noun = groups["noun"].lower()
                ordinal = Ordinal(
                    text=text,
                    position=1,
                    from_end=direction != "first",
                    count=_number(groups["n"]),
                    scope="matches"
                    if noun not in ("sessions", "conversations", "chats")
                    else "sessions",
                    event_type=_EVENT_NOUNS.get(noun),
                )
            elif kind == "last_event":
                ordinal = Ordinal(
                    text=text,
                    position=1,
                    from_end=groups["dir"].lower() != "first",
                    scope="matches",
                    event_type=_EVENT_NOUN.get(groups["noun"].lower()),
                )
            elif kind == "session_ordinal":
                position, from_end = _ordinal(groups["ord"])
                # "the third session" counts sessions; "the third time" may count the times
                # a topic came up (decided below, once the rest of the query is known).
                scope = (
                    "times" if groups["noun"].lower().startswith(("time", "talk")) else "sessions"
                )
                ordinal = Ordinal(text=text, position=position, from_end=from_end, scope=scope)
            taken.append(m.span())
            if window is not None:
                expressions.append(
                    TimeExpression(text=text, kind=kind, start=window[0], end=window[1])
                )
            elif ordinal is not None and ordinal.text == text:
                expressions.append(TimeExpression(text=text, kind=kind))
    remainder = _remove(query, taken) if taken else query
    windows = [(e.start, e.end) for e in expressions if e.start is not None and e.end is not None]
    start = max((w[0] for w in windows), default=None)
    end = min((w[1] for w in windows), default=None)
    notes: list[str] = []
    if cut:
        notes.append(
            f"only the first {MAX_TIME_EXPRESSIONS} time expressions were read; "
            "the rest of the query is ranked as words"
        )
    if start is not None and end is not None and start >= end:
        notes.append("the time expressions name windows that do not overlap")
    content = _content_words(remainder)
    if ordinal is not None and ordinal.scope == "times":
        # "the first time we talked about Atlas": counted among the episodes about Atlas;
        # "what did Ann and Bo discuss the fifth time they spoke": among all sessions.
        ordinal = replace(ordinal, scope="matches" if _topic(remainder) else "sessions")
    time_only = bool(taken) and not content
    applied = time_only or ordinal is not None or bool(_ABOUT_CONVERSATION.search(query))
    if not applied:
        notes.append(
            "the time seems to be when something happened, not when it was said: the query "
            "is ranked as written"
        )
    return QueryTime(
        query=query,
        remainder=remainder if content else "",
        expressions=tuple(expressions),
        start=start,
        end=end,
        ordinal=ordinal,
        time_only=time_only,
        applied=applied,
        notes=tuple(notes),
    )
