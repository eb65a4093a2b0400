"""The ``topical_time`` questions: the two-word topics several sessions of a conversation
mention (and LoCoMo's summaries name), found in its messages (``conversation_topics``), and the
questions that ask about one of them at a time that picks out one of its sessions
(``topical_time_questions``)."""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from bench.harness.locomo import Conversation, Session
from bench.quality.temporal.kinds import (
    month_ref,
    months_ago_ref,
    random_day_of_month,
    weekday_ref,
    weeks_ref_for_session,
)
from bench.quality.temporal.vocabulary import (
    DAY,
    PER_CONVERSATION,
    TOPICAL,
    DraftQuestion,
    TimeRef,
    date_words,
    day_ref,
    fill_template,
    month_window,
    number_phrase,
    random_minute,
    sessions_within,
    shift_month,
    speaker_names,
)

# -- topics


@dataclass(frozen=True)
class _Topic:
    """A noun phrase mentioned in several sessions of one conversation."""

    phrase: str  # as put in a question: "the adoption agency", "social media"
    pattern: re.Pattern[str]
    threads: frozenset[str]
    speaker: tuple[tuple[str, str], ...]  # (thread id, who first mentions it there)


#: The caption LoCoMo writes for a shared image; topics are found (and checked) without it.
IMAGE_CAPTION = re.compile(r"\[shares image:[^\]]*\]")
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
    return IMAGE_CAPTION.sub(" ", content).lower()


def _topic_pattern(first: str, base: str) -> re.Pattern[str]:
    return re.compile(rf"\b{first}\s+(?:{base}|{_plural(base)})\b")


def conversation_topics(conv: Conversation, summary: str) -> list[_Topic]:
    """Two-word noun phrases that several sessions mention and LoCoMo's summaries name.

    A phrase qualifies when it is mentioned in two to five sessions, appears in the
    conversation's session or event summaries (when those are available), follows a
    determiner at least once ("the adoption agency"), is neither an evaluation ("tough
    time") nor a fragment of a longer compound ("milk ice" of "milk ice cream").
    """
    names = {n.lower() for n in speaker_names(conv)}
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
            for hit in anycase.finditer(IMAGE_CAPTION.sub(" ", m.content))
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


def topical_time_questions(
    conv: Conversation,
    rng: random.Random,
    names: tuple[str, str],
    topics: Sequence[_Topic],
) -> list[DraftQuestion]:
    """Questions like "What did Caroline say about the adoption agency last week?".

    The topic is mentioned in several sessions by asked_at and the time picks one of them.
    Times whose window also holds other sessions are preferred, so that neither the topic
    nor the time alone finds the gold session.
    """
    by_id = {s.thread_id: s for s in conv.sessions}
    pairs = [(t, tid) for t in topics for tid in sorted(t.threads)]
    out: list[DraftQuestion] = []
    used: set[str] = set()
    for topic, tid in rng.sample(pairs, len(pairs)):
        if len(out) >= PER_CONVERSATION:
            break
        if tid in used:
            continue
        gold = by_id[tid]
        mentioned = [s for s in conv.sessions if s.thread_id in topic.threads]
        candidates: list[tuple[TimeRef, datetime]] = []
        for how in rng.sample(_TOPICAL_TIMES, len(_TOPICAL_TIMES)):
            found = _topical_ref(rng, how, gold, mentioned)
            if found is None:
                continue
            ref, asked = found
            in_window = sessions_within(mentioned, ref, asked)
            known = [s for s in mentioned if s.started_at <= asked]
            if in_window == (gold,) and len(known) >= 2:
                candidates.append(found)
        if not candidates:
            continue
        ref, asked = max(candidates, key=lambda c: len(sessions_within(conv.sessions, *c)) > 1)
        used.add(tid)
        speaker = dict(topic.speaker)[tid]
        other = names[1] if speaker == names[0] else names[0]
        question = fill_template(
            rng, TOPICAL, names, ref.phrase, s=speaker, o=other, p=topic.phrase
        )
        out.append(DraftQuestion(question, asked, (gold,), ref.expression, topic.phrase))
    return out


_TOPICAL_TIMES = ("weeks", "months_ago", "month", "days_ago", "weekday", "date")


def _topical_ref(
    rng: random.Random, how: str, gold: Session, mentioned: Sequence[Session]
) -> tuple[TimeRef, datetime] | None:
    """A time reference of kind ``how`` (one of _TOPICAL_TIMES) that covers ``gold``."""
    day = gold.started_at.date()
    if how == "weeks":
        return weeks_ref_for_session(rng, mentioned, gold)
    if how == "months_ago":
        n = rng.choice((1, 1, 2, 3))
        year, month = shift_month(day.year, day.month, n)
        asked = random_minute(rng, random_day_of_month(rng, year, month))
        return (months_ago_ref(rng, n, asked), asked) if asked else None
    if how == "month":
        _, end = month_window(day.year, day.month)
        asked = random_minute(rng, end.date() + rng.randint(0, 60) * DAY)
        return (month_ref(rng, day.year, day.month, rng.random() < 0.3), asked) if asked else None
    if how == "days_ago":
        n = rng.randint(1, 6)
        asked = random_minute(rng, day + n * DAY)
        words = "yesterday" if n == 1 else f"{number_phrase(rng, n)} days ago"
        return (day_ref(day, words), asked) if asked else None
    if how == "weekday":
        asked = random_minute(rng, day + rng.randint(1, 6) * DAY)
        return (weekday_ref(rng, day, asked), asked) if asked else None
    asked = random_minute(rng, day + rng.randint(1, 60) * DAY)
    words = date_words(rng, day, with_year=rng.random() < 0.3)
    return (day_ref(day, f"on {words}", words), asked) if asked else None
