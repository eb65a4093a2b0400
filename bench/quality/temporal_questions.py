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
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.harness import locomo
from bench.harness.locomo import Conversation
from bench.quality.temporal.check import validate
from bench.quality.temporal.kinds import (
    absolute_date_questions,
    date_span_questions,
    month_questions,
    relative_day_questions,
    relative_week_month_questions,
    session_ordinal_questions,
    sessions_ago_questions,
    weekday_questions,
)
from bench.quality.temporal.topics import conversation_topics, topical_time_questions
from bench.quality.temporal.vocabulary import (
    KINDS,
    DraftQuestion,
    TemporalQuestion,
    speaker_names,
)

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
    kinds: dict[
        str, Callable[[Conversation, random.Random, tuple[str, str]], list[DraftQuestion]]
    ] = {
        "relative_day": relative_day_questions,
        "relative_week_month": relative_week_month_questions,
        "weekday": weekday_questions,
        "absolute_date": absolute_date_questions,
        "month": month_questions,
        "date_span": date_span_questions,
        "session_ordinal": session_ordinal_questions,
        "sessions_ago": sessions_ago_questions,
    }
    out: list[TemporalQuestion] = []
    for conv in conversations:
        names = speaker_names(conv)
        topics = conversation_topics(conv, summaries.get(conv.conversation_id, ""))
        for kind in KINDS:
            rng = random.Random(f"{seed}/{conv.conversation_id}/{kind}")
            if kind == "topical_time":
                drafts = topical_time_questions(conv, rng, names, topics)
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
