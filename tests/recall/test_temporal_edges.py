"""Time in the query at the ends of the calendar: episodic.temporal never raises, for any
query and any as_of from 0001-01-01 to 9999-12-31 (UTC). A time whose window the calendar
cannot hold is not read, as a bare year ("in 9999") or a number of days too large to be one
("99999999999 days ago") is not: not found, its words left in the query. No services needed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from episodic.temporal import MAX_TIME_EXPRESSIONS, understand

NOW = datetime(2023, 7, 12, 15, 30, tzinfo=UTC)
FIRST = datetime.min.replace(tzinfo=UTC)  # 0001-01-01T00:00:00Z
LAST = datetime.max.replace(tzinfo=UTC)  # 9999-12-31T23:59:59.999999Z

# The calendar's ends, as the probe that found the bug asked for them, and a few more.
EDGES = [
    FIRST,
    datetime(1, 1, 1, 12, tzinfo=UTC),
    datetime(1, 12, 31, tzinfo=UTC),
    datetime(9999, 1, 1, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
    LAST,
    datetime(1, 1, 1, 5, tzinfo=timezone(timedelta(hours=5))),  # 0001-01-01T00:00Z
    datetime(9999, 12, 31, 18, 59, tzinfo=timezone(timedelta(hours=-5))),  # 23:59Z
]

# Phrases the module reads (its docstring and tests/recall/test_time_queries.py), and some
# it does not, in questions and alone.
PHRASES = [
    "what did we discuss 2 days ago?",
    "in our eighth session",
    "between May 8th and June 9th",
    "the last 3 decisions about pricing",
    "today",
    "earlier today",
    "this morning",
    "this afternoon",
    "tonight",
    "last night",
    "yesterday",
    "what did we discuss yesterday?",
    "the day before yesterday",
    "anything earlier today?",
    "what happened 3 days ago",
    "999 days ago",
    "99999999999 days ago",
    "last week",
    "this week",
    "the past week",
    "a week ago",
    "2 weeks ago",
    "999 weeks ago",
    "what did we plan last week",
    "What did we decide about pricing last week?",
    "last month",
    "this month",
    "a month ago",
    "3 months ago",
    "999 months ago",
    "last year",
    "this year",
    "10 years ago",
    "999 years ago",
    "last Tuesday",
    "this past Tuesday",
    "on Tuesday",
    "on Wednesday",
    "past Sunday",
    "in July",
    "in August",
    "in August 2021",
    "back in December",
    "during March",
    "in January 0001",
    "in December 9999",
    "in 9999",
    "end of 9999",
    "on May 8th",
    "May 8th",
    "8 May",
    "8 May 2023",
    "May 8, 2023",
    "the 8th of May",
    "on December 4",
    "on December 20",
    "31 February",
    "February 29",
    "on 2023-05-08",
    "0001-01-01",
    "January 1, 0001",
    "9999-12-31",
    "12/31/9999",
    "December 31, 9999",
    "what happened on December 31, 9999?",
    "the weekend of december 31 9999",
    "between May 8th and June 9th",
    "from December 20 to January 5",
    "between December 30 and December 31, 9999",
    "from January 1, 0001 to January 2, 0001",
    "between yesterday and tomorrow",
    "what did we talk about in our tenth session?",
    "the 3rd conversation",
    "what did Ann say the last time we talked",
    "3 sessions ago",
    "the chat before last",
    "the first time we talked about Atlas",
    "the last decision about pricing",
    "When did Caroline go camping in June?",
    "pricing in July",
    "what is my plan for next Tuesday?",
    "May I ask about the pricing plan?",
    "",
]


def _unread(query: str, as_of: datetime) -> None:
    got = understand(query, as_of)
    assert not got.found, (query, as_of, got.expressions)
    assert got.start is None and got.end is None
    # the words stay in the query, for ranking ("" when none of them is a topic word)
    assert got.remainder in (query, ""), got.remainder


@pytest.mark.parametrize(
    "query",
    [
        "December 31, 9999",
        "9999-12-31",
        "12/31/9999",
        "in December 9999",
        "what happened on December 31, 9999?",
        "the weekend of december 31 9999",
        "between December 30 and December 31, 9999",
        # the module's own precedents, which already behaved
        "in 9999",
        "end of 9999",
        "99999999999 days ago",
    ],
)
def test_a_date_past_the_calendars_end_is_not_read(query: str) -> None:
    """The day 9999-12-31 ends at 10000-01-01, which no datetime holds."""
    for as_of in (NOW, LAST, FIRST):
        _unread(query, as_of)


@pytest.mark.parametrize(
    "query",
    [
        "yesterday",
        "last week",
        "the past week",
        "a week ago",
        "on December 4",
        "31 February",
        "10 years ago",
        "last year",
        "last month",
        "in July",
        "last Tuesday",
        "the 8th of May",
        "between yesterday and tomorrow",
    ],
)
def test_a_time_before_the_calendars_start_is_not_read(query: str) -> None:
    _unread(query, FIRST)


def test_no_part_of_an_unreadable_date_is_read_as_a_smaller_time() -> None:
    """Not "December" (the most recent one) for "December 31, 9999", nor two dates that do
    not overlap for a span that starts before year 1."""
    _unread("what happened on December 31, 9999?", NOW)
    assert understand("the weekend of december 31 9999", NOW).remainder == (
        "the weekend of december 31 9999"
    )
    _unread("from December 20 to January 5", datetime(1, 12, 31, tzinfo=UTC))
    _unread("February 29", datetime(1, 12, 31, tzinfo=UTC))  # the last one: before year 1


def test_what_the_calendar_holds_is_still_read_at_its_ends() -> None:
    def window(query: str, as_of: datetime) -> tuple[datetime | None, datetime | None]:
        got = understand(query, as_of)
        assert got.found, query
        return got.start, got.end

    assert window("December 30, 9999", NOW) == (
        datetime(9999, 12, 30, tzinfo=UTC),
        datetime(9999, 12, 31, tzinfo=UTC),
    )
    assert window("in November 9999", NOW) == (
        datetime(9999, 11, 1, tzinfo=UTC),
        datetime(9999, 12, 1, tzinfo=UTC),
    )
    assert window("January 1, 0001", NOW) == (FIRST, datetime(1, 1, 2, tzinfo=UTC))
    assert window("today", FIRST) == (FIRST, datetime(1, 1, 2, tzinfo=UTC))
    assert window("this year", FIRST) == (FIRST, datetime(2, 1, 1, tzinfo=UTC))
    assert window("yesterday", datetime(1, 1, 2, 8, tzinfo=UTC)) == (
        FIRST,
        datetime(1, 1, 2, tzinfo=UTC),
    )
    assert window("on December 4", datetime(1, 12, 31, tzinfo=UTC)) == (
        datetime(1, 12, 4, tzinfo=UTC),
        datetime(1, 12, 5, tzinfo=UTC),
    )
    assert window("last year", LAST) == (
        datetime(9998, 1, 1, tzinfo=UTC),
        datetime(9999, 1, 1, tzinfo=UTC),
    )
    # as of the calendar's last day, "today" would end at 10000-01-01: not read
    _unread("today", LAST)
    _unread("this month", LAST)


def _within(start: datetime, end: datetime) -> bool:
    """A window found is aware, in the calendar, and not reversed."""
    return start.tzinfo is not None and FIRST <= start < end <= LAST


@pytest.mark.parametrize("as_of", [*EDGES, NOW], ids=lambda a: a.isoformat())
def test_no_phrase_raises_near_the_calendars_ends(as_of: datetime) -> None:
    """Every phrase, alone and in a question, as of each end of the calendar: no exception,
    and every window found lies in the calendar, start before end."""
    problems = []
    for phrase in PHRASES:
        for query in (phrase, f"what did we discuss {phrase}?", f"{phrase} and {phrase}"):
            try:
                got = understand(query, as_of)
            except Exception as error:  # the test lists every failure
                problems.append(f"{query!r}: {type(error).__name__}: {error}")
                continue
            for e in got.expressions:
                if (e.start is None) != (e.end is None):
                    problems.append(f"{query!r}: half a window {e}")
                elif e.start is not None and e.end is not None and not _within(e.start, e.end):
                    problems.append(f"{query!r}: window {e.start} .. {e.end}")
            if (got.start is None) != (got.end is None):
                problems.append(f"{query!r}: half a query window {got.start} .. {got.end}")
            elif got.start is not None and got.end is not None and not _within(got.start, got.end):
                problems.append(f"{query!r}: query window {got.start} .. {got.end}")
            if not got.found and got.remainder not in (query, ""):
                problems.append(f"{query!r}: nothing found, yet the remainder {got.remainder!r}")
    assert not problems, "\n".join(problems)


def test_a_query_of_many_dates_reads_only_the_first_few_and_says_so() -> None:
    # Each date costs dateparser about a millisecond under the interpreter lock that every
    # call of the replica shares: a query of hundreds of dates (issue 49's flood) must not.
    dates = [f"2023-{m:02d}-{d:02d}" for m in range(1, 13) for d in range(1, 29)]
    read = understand("what did we say on " + " and ".join(dates), NOW)
    assert len(read.expressions) == MAX_TIME_EXPRESSIONS
    assert [e.text.removeprefix("on ") for e in read.expressions] == dates[:MAX_TIME_EXPRESSIONS]
    assert any(f"first {MAX_TIME_EXPRESSIONS} time expressions" in n for n in read.notes)

    few = understand("what did we say on " + " and ".join(dates[:MAX_TIME_EXPRESSIONS]), NOW)
    assert len(few.expressions) == MAX_TIME_EXPRESSIONS
    assert not any("time expressions were read" in n for n in few.notes)
