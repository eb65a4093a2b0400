"""Sentences, and which of them state a fact worth remembering — defined once, for the
extractive summariser's key learnings and for the semantic extractor's facts.

A *factual statement* (:func:`is_fact_statement`) is a sentence in which the speaker says
something about themselves that is worth keeping: about the speaker (first person, or
chat's dropped subject: "Gonna start a new job"), carrying a commitment or preference
("decided", "prefer", "booked", "allergic", …), a number, a date or a name, not a
question, and neither a fragment nor a paragraph (5–45 words).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "STOPWORDS",
    "SUBJECTLESS",
    "WORD",
    "Signals",
    "fact_strength",
    "is_fact_statement",
    "signals",
    "split_sentences",
    "words",
    "wordset",
]

# --------------------------------------------------------------------------- sentences


def wordset(text: str) -> frozenset[str]:
    """A set of words written as one whitespace-separated string (compact to read)."""
    return frozenset(text.split())


_ABBREVIATIONS = wordset(
    """
    mr mrs ms dr prof sr jr st vs etc e.g i.e approx inc ltd co no u.s a.m p.m fig
    """
)
# A sentence ends at . ! ? … (with closing quotes/brackets) followed by whitespace, or at a
# line break. "$3.5k" and "v1.2" have no space after the dot and stay whole.
_SENTENCE_END = re.compile(r"[.!?…]+[\"”’')\]]*(?=\s)|\n")
WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def _ends_with_abbreviation(piece: str) -> bool:
    last = piece.rsplit(None, 1)[-1].lower().rstrip(".")
    # "J. K. Rowling": a single capital letter followed by a dot is an initial.
    return last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha() and piece.endswith("."))


def split_sentences(text: str) -> list[str]:
    """Splits ``text`` into sentences with a regex (keeps abbreviations and initials whole)."""
    pieces: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        piece = text[start : match.end()].strip()
        if piece:
            pieces.append(piece)
        start = match.end()
    tail = text[start:].strip()
    if tail:
        pieces.append(tail)
    merged: list[str] = []
    for piece in pieces:
        if merged and _ends_with_abbreviation(merged[-1]) and not merged[-1].endswith("\n"):
            merged[-1] = f"{merged[-1]} {piece}"
        else:
            merged.append(piece)
    return merged


STOPWORDS = wordset(
    """
    a about above after again against all also am an and any are aren't as at be because
    been before being below between both but by can can't cannot could couldn't did
    didn't do does doesn't doing don't down during each even ever every few for from
    further get gets got had hadn't has hasn't have haven't having he he'd he'll he's
    her here here's hers herself him himself his how how's i i'd i'll i'm i've if in
    into is isn't it it's its itself just let's like lot lots me more most much must my
    myself no nor not now of off on once only or other ought our ours ourselves out over
    own really same she she'd she'll she's should shouldn't so some such than that
    that's the their theirs them themselves then there there's these they they'd they'll
    they're they've this those through to too under until up us very was wasn't we we'd
    we'll we're we've were weren't what what's when when's where where's which while who
    who's whom why why's will with won't would wouldn't yet you you'd you'll you're
    you've your yours yourself yourselves one thing things way still well
    """
)


def words(text: str) -> list[str]:
    return [w.lower().replace("’", "'") for w in WORD.findall(text)]


# --------------------------------------------------------------------------- signals

_COMMITMENT = re.compile(
    # "like"/"love" only as verbs of a person ("I'd love", "we really like"), not "stuff like".
    r"\b((?:i|we|i'd|we'd|i'm|we're|would|really|also|just|do|don't|didn't|always|never)\s+"
    r"(?:like|love|hate|enjoy|adore)\w*|"
    r"decid\w*|decision|prefer\w*|want\w*|need\w*|plan\w*|will|going to|"
    r"gonna|booked|book(?:ing)?|agree[ds]?|chose|choose|chosen|bought|buy(?:ing)?|signed|"
    r"sign(?:ed)? up|register\w*|moved?|moving|start(?:ed|ing)?|finish\w*|graduat\w*|"
    r"adopt(?:ed|ing)?|budget|allerg\w*|favou?rite|intend\w*|hope to|promise\w*|commit\w*|"
    r"switch\w*|settled|going with|go with|can't|cannot|won't|never|always|usually|mostly|"
    r"often|every (?:day|week|morning|evening)|too \w+ for (?:me|us)|rather|afford\w*|"
    r"not a fan|can't stand|allergic)\b",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'll|i'd|my|me|mine|we|we're|we've|our)\b", re.I)
SUBJECTLESS = re.compile(
    r"^(?:gonna|going to|planning|planned|thinking of|hoping to|trying to|working on|"
    r"started|starting|just (?:got|bought|booked|finished|started)|decided|booked|bought)\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"[$€£¥]\s?\d|\d")
_DATE = re.compile(
    r"\b(today|tomorrow|yesterday|tonight|weekend|next (?:week|month|year)|"
    r"last (?:week|month|year|night)|ago|monday|tuesday|wednesday|thursday|friday|saturday|"
    r"sunday|january|february|march|april|june|july|august|september|october|november|"
    r"december|\d{4}-\d{2}-\d{2})\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Signals:
    commitment: bool
    first_person: bool
    number: bool
    date: bool
    name: bool
    question: bool

    @property
    def count(self) -> int:
        return sum((self.commitment, self.first_person, self.number, self.date, self.name))


def signals(sentence: str) -> Signals:
    tokens = WORD.findall(sentence)
    # A capitalised word after the first one that is not "I"/"I'm": a name-like token.
    name = any(t[0].isupper() and t.lower().replace("’", "'") not in STOPWORDS for t in tokens[1:])
    return Signals(
        commitment=bool(_COMMITMENT.search(sentence)),
        first_person=bool(_FIRST_PERSON.search(sentence.replace("’", "'"))),
        number=bool(_NUMBER.search(sentence)),
        date=bool(_DATE.search(sentence)),
        name=name,
        question=sentence.rstrip(" \"”’')").endswith("?"),
    )


#: Fact statements are sentences of this many words.
FACT_WORDS = (5, 45)


def fact_strength(s: Signals) -> int:
    """How much a sentence says: a commitment counts double, each other signal once."""
    return 2 * s.commitment + s.first_person + s.number + s.date + s.name


def is_fact_statement(sentence: str, s: Signals | None = None) -> bool:
    """Whether ``sentence`` states a fact about its speaker (see the module docstring).
    ``s``: its :func:`signals`, when the caller computed them already."""
    s = s or signals(sentence)
    n = len(words(sentence))
    if s.question or not FACT_WORDS[0] <= n <= FACT_WORDS[1]:
        return False
    if not (s.first_person or SUBJECTLESS.match(sentence)):
        return False
    return s.commitment or s.number or s.date or s.name
