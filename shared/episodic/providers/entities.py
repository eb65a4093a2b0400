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
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

__all__ = ["KIND_WORDS", "normalise_entities", "normalise_entity"]

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
