"""Entity normalisation, used everywhere entities are stored, filtered or compared.

Seed 002 names "entity drift" ("project Atlas" vs "Atlas project") as a failure mode: the
same thing spelled two ways is two index keys, and an entity filter silently misses half
the episodes. Every writer (summarisers) and every reader (recall filters) therefore passes
entities through :func:`normalise_entity`, so both sides agree on one spelling.

Rules, applied in this order (and repeated until the result no longer changes, which makes
the function idempotent by construction):

1. Unicode NFKC (full-width letters, ligatures and compatibility forms become plain ones)
   and typographic apostrophes (’ ‘ ʼ) become ``'``.
2. Case folding (``str.casefold``: "Straße" and "STRASSE" agree).
3. Every run of whitespace (including non-breaking and zero-width-joiner-free Unicode
   spaces) becomes one space; leading and trailing whitespace is removed.
4. Surrounding punctuation is stripped ("“Atlas”," → "atlas"), except what carries meaning:
   a leading ``#``, ``@`` or currency sign (``#42``, ``@alice``, ``$30k``), a trailing
   ``%``, and a bracket whose partner is inside the entity (``atlas (v2)``).
5. ``kind: value`` forms lose the spaces around the colon: ``Project: Atlas`` →
   ``project:atlas``. A ``kind:value`` entity is otherwise kept as it is (lowercased).
6. A trailing *kind word* moves to the front, so word order drift collapses:
   ``Atlas project`` → ``project atlas`` (the same as ``Project Atlas``). Kind words:
   project, ticket, invoice, issue. Only for 2–4 word entities without a colon.

Nothing is translated between the spaced and the colon form: ``project atlas`` and
``project:atlas`` stay different keys; writers should pick one (the extractive summariser
writes ``project atlas``; the ``kind:#id`` form is used for ids such as ``invoice:#42``).

**Match keys** (:func:`entity_match_key`) are coarser: the entity canon
(:mod:`episodic.store.entities`) files every spelling with the same match key under one
canonical entity, so "project Atlas", "Atlas project", "the Atlas project" and "atlas" are
one entity. Applied to a normalised spelling, in this order:

a. ``kind:value`` forms and spellings starting with ``#``, ``@`` or a currency sign are
   their own key (an id is exact).
b. Hyphens and underscores between words become spaces (``atlas-web`` = ``atlas web``).
c. A leading article (``the``, ``a``, ``an``) is dropped.
d. A possessive ``'s`` (or a bare trailing ``'``) at the very end is dropped
   (``atlas's`` = ``atlas``); inside the name it stays ("alex's team" is not Alex).
e. Generic head nouns are dropped from either end — ``project``, ``team``, ``company``,
   ``corp``, ``corporation``, ``inc``, ``ltd``, ``llc`` (and their plurals) — when what
   remains holds a letter, no possessive and does not begin or end with a connector
   ("project 2" and "team 2" stay apart, as do "alex's team" and "alex", and "Team of
   Rivals" keeps its team).
f. Names joined by ``and`` or ``&`` are put in order: "Mark and Josh" = "Josh & Mark"
   (the same pair, listed either way).

It is deliberately conservative: no stemming (names end in s: Atlas, James), no prefixes or
edit distance ("alex" and "alexandra" stay two entities until an admin merges them), and
``ticket``, ``invoice`` and ``issue`` are not generic (``ticket #42`` and ``invoice #42``
are different things).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

__all__ = [
    "GENERIC_HEAD_NOUNS",
    "KIND_WORDS",
    "entity_match_key",
    "normalise_entities",
    "normalise_entity",
]

#: Words that name the kind of an entity; "<name> <kind>" is rewritten to "<kind> <name>".
KIND_WORDS: frozenset[str] = frozenset({"project", "ticket", "invoice", "issue"})

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
_WHITESPACE = re.compile(r"\s+", re.UNICODE)
_KIND_VALUE = re.compile(r"^([a-z][\w.-]*)\s*:\s*(\S.*)$")
_KEEP_LEADING = frozenset("#@$€£¥")
_KEEP_TRAILING = frozenset("%")
_PAIRS = {")": "(", "]": "[", "}": "{", "(": ")", "[": "]", "{": "}"}


def _is_strippable(ch: str) -> bool:
    # Punctuation (P*) and symbols (S*) at the edges are decoration ("•", "*", "→", quotes);
    # "Zs"-like invisible format characters (Cf, e.g. zero-width space) too.
    category = unicodedata.category(ch)
    return category[0] in "PS" or category == "Cf" or ch.isspace()


def _strip_edges(s: str) -> str:
    start, end = 0, len(s)
    while start < end:
        ch = s[start]
        if ch in _KEEP_LEADING or not _is_strippable(ch):
            break
        if ch in _PAIRS and _PAIRS[ch] in s[start + 1 : end]:
            break  # "(beta) plan": the bracket belongs to the name
        start += 1
    while end > start:
        ch = s[end - 1]
        if ch in _KEEP_TRAILING or not _is_strippable(ch):
            break
        if ch in _PAIRS and _PAIRS[ch] in s[start : end - 1]:
            break  # "atlas (v2)"
        end -= 1
    return s[start:end]


def _normalise_once(s: str) -> str:
    s = unicodedata.normalize("NFKC", s).translate(_APOSTROPHES).casefold()
    s = _WHITESPACE.sub(" ", s).strip()
    s = _strip_edges(s)
    s = _WHITESPACE.sub(" ", s).strip()
    match = _KIND_VALUE.match(s)
    if match:
        return f"{match.group(1)}:{match.group(2)}"
    words = s.split(" ")
    if 2 <= len(words) <= 4 and words[-1] in KIND_WORDS and words[0] not in KIND_WORDS:
        s = " ".join([words[-1], *words[:-1]])
    return s


def normalise_entity(entity: str) -> str:
    """Returns the canonical spelling of ``entity`` (see the module docstring for the rules).

    Idempotent: ``normalise_entity(normalise_entity(x)) == normalise_entity(x)``. Returns
    ``""`` for input that is only whitespace or punctuation.
    """
    current = entity
    # Each rule is idempotent on its own, but one rule can expose work for another (NFKC of a
    # case-folded character, whitespace uncovered by stripping); iterate to the fixed point.
    for _ in range(8):
        nxt = _normalise_once(current)
        if nxt == current:
            return nxt
        current = nxt
    return current


def normalise_entities(entities: Iterable[str]) -> list[str]:
    """Normalises every entity and returns them sorted, unique, without empty strings."""
    return sorted({n for n in (normalise_entity(e) for e in entities) if n})


#: Words that say what sort of thing a name is, not which one: dropped from match keys.
GENERIC_HEAD_NOUNS: frozenset[str] = frozenset(
    {"project", "team", "company", "corp", "corporation", "inc", "ltd", "llc"}
    | {"projects", "teams", "companies"}
)
_ARTICLES = frozenset({"the", "a", "an"})
_CONNECTORS = frozenset({"and", "&", "of", "for", "or"})
_JOINERS = re.compile(r"(?<=\w)[-_](?=\w)")
_EXACT_LEADING = frozenset("#@$€£¥")


def _is_possessive(word: str) -> bool:
    return word.endswith(("'s", "'")) and len(word) > 2


def entity_match_key(spelling: str) -> str:
    """The key under which the canon files ``spelling`` (see the module docstring, rules
    a–f). Takes any spelling (normalises it first); idempotent; ``""`` for nothing."""
    s = normalise_entity(spelling)
    if not s or ":" in s or s[0] in _EXACT_LEADING:
        return s
    words = _JOINERS.sub(" ", s).split()
    if len(words) > 1 and words[0] in _ARTICLES:
        words = words[1:]
    if words and _is_possessive(words[-1]):
        last = words[-1][:-2] if words[-1].endswith("'s") else words[-1][:-1]
        words = [*words[:-1], last] if last else words[:-1]

    def droppable(rest: list[str]) -> bool:
        # "Team of Rivals", "team and x": the noun is part of a longer name, not its kind.
        return (
            bool(rest)
            and any(ch.isalpha() for w in rest for ch in w)
            and not any(_is_possessive(w) for w in rest)
            and rest[0] not in _CONNECTORS
            and rest[-1] not in _CONNECTORS
        )

    while len(words) > 1 and words[0] in GENERIC_HEAD_NOUNS and droppable(words[1:]):
        words = words[1:]
    while len(words) > 1 and words[-1] in GENERIC_HEAD_NOUNS and droppable(words[:-1]):
        words = words[:-1]
    if len(words) > 1 and words[0] in _ARTICLES:  # "project the atlas" → "the atlas" → "atlas"
        words = words[1:]
    joined = " ".join("and" if w == "&" else w for w in words)
    parts = joined.split(" and ")
    if len(parts) > 1 and all(parts):
        return " and ".join(sorted(parts))
    return " ".join(words)
