"""What a recall query is about: its framing words set aside before ranking.

Agents ask "what did we discuss about the pricing model?", "do you remember what Ann said
about Lisbon?", "what kind of music does John like?". The framing ("what did we discuss
about", "do you remember", "what kind of") says *that* something was said, not *what*; as
topic words it pulls the query's embedding towards every conversation alike, and lexically
"discuss", "remember" or "kind" match whichever episode happens to use them.

Two query-side treatments, each a switch of the ranking (``RankingOptions`` in
:mod:`episodic.store.ranking_options`), measured alone on LoCoMo (docs/concepts/recall.md):

- :func:`strip_stop_phrases`: removes framing phrases from the text that is embedded and
  tokenised. The query is kept as written when nothing would be left.
- :data:`GENERIC_WORDS`: words that occur in questions about any topic (verbs of saying and
  doing, "kind", "thing"); their lexemes weigh :data:`GENERIC_WEIGHT` of a topic word's in
  the lexical score (stemmed with the dataset's configuration, so "talked" and "talking"
  are "talk"). Stop words proper ("what", "did") are already dropped by the text-search
  configuration.

Both are English rules: for a dataset in another language they change nothing (no phrase
matches; the generic words are stemmed with the dataset's configuration and rarely occur).

A third, on by default since the fourth pass: :func:`word_forms`, the irregular forms of the
query's words that the english stemmer keeps apart ("went" for "go", "broke" for "broken"),
OR-ed into the query's lexemes (``RankingOptions.word_forms``; english datasets only).

And for every language, on by default: :func:`strip_function_words` drops the function
words of the language the query itself is written in from the text matched lexically
(``RankingOptions.strip_function_words``). A dataset whose language is not known yet is
tokenised in English, which keeps "est-ce que je" or "qué" as words: they then matched
whichever session used them, and the lexical signal (relative to the best candidate) made
that match decide the ranking (issue 40).
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from importlib import resources

__all__ = [
    "GENERIC_WEIGHT",
    "GENERIC_WORDS",
    "PHRASE_WORDS",
    "function_words",
    "query_language",
    "query_phrases",
    "strip_function_words",
    "strip_stop_phrases",
    "word_form_groups",
    "word_forms",
]

_SAYING = (
    r"(?:discuss(?:ed)?|talk(?:ed)?|chat(?:ted)?|say|said|mention(?:ed)?|speak|spoke|"
    r"tell|told|share[ds]?|bring|brought|go|went|cover(?:ed)?)"
)
_WHO = r"(?:we|you|i|us|they)"

#: Framing phrases, matched case-insensitively on word boundaries, longest first.
_STOP_PHRASES = [
    # "what did we discuss about", "what have you told me regarding", "when did we talk about"
    rf"\b(?:what|when|where|how|why|who|which)\b(?:\s+\w+)?\s+\b(?:did|do|does|have|has|had|were|was)\s+"
    rf"{_WHO}\s+(?:ever\s+)?{_SAYING}(?:\s+(?:to\s+me|to\s+you|with\s+me|with\s+you|up))?"
    r"(?:\s+(?:about|regarding|concerning|on|of|over))?\b",
    # "do you remember (when|what|that|if)", "can you remind me (of|about)"
    r"\b(?:do|did|can|could|would)\s+(?:you|we)\s+(?:remember|recall|remind\s+me)"
    r"(?:\s+(?:of|about|when|what|that|if|whether|how|where|who))?\b",
    r"\b(?:can|could|would)\s+you\s+(?:tell|remind)\s+me(?:\s+(?:about|of|what|when|how|where))?\b",
    r"\b(?:tell|remind)\s+me(?:\s+(?:about|of|again))?\b",
    # "the conversation about", "our chat on", "the time we talked about"
    r"\b(?:the|our|that)\s+(?:conversation|discussion|chat|talk|session)s?\s+(?:about|on|regarding)\b",
    rf"\b{_WHO}\s+{_SAYING}\s+(?:about|regarding|on)\b",
    # "did Ann and Bo talk about (regarding)"
    rf"\b{_SAYING}\s+(?:about|regarding|concerning)(?:\s+(?:about|regarding))?\b",
    # "what kind of", "which type of", "some sort of"
    r"\b(?:what|which|some|any)\s+(?:kinds?|types?|sorts?)\s+of\b",
]
_PATTERN = re.compile("|".join(f"(?:{p})" for p in _STOP_PHRASES), re.IGNORECASE)
_CONTENT = re.compile(r"\w{2,}", re.UNICODE)
_ONLY_STOP_WORDS = re.compile(
    r"^(?:\s|\W|\b(?:what|when|where|how|why|who|which|is|are|was|were|the|a|an|it|that|"
    r"this|do|did|does|me|we|you|i|about|of)\b)*$",
    re.IGNORECASE,
)

#: Words of questions about any topic. Their lexemes count GENERIC_WEIGHT in the lexical
#: score when query term weighting is on.
GENERIC_WORDS = (
    "discuss talk chat say tell mention speak share remember recall think feel "
    "kind type sort thing stuff way lot something anything everything "
    "get go make do have take give put want like "
    "ever recently usually often sometimes really also "
    "time times thing things happen happened"
)
GENERIC_WEIGHT = 0.3


def strip_stop_phrases(query: str) -> str:
    """``query`` without its framing phrases, whitespace tidied; the query as written when
    only framing (or stop words) would be left."""
    stripped = _PATTERN.sub(" ", query)
    stripped = re.sub(r"\s+", " ", stripped).strip(" ,;:")
    if not _CONTENT.search(stripped) or _ONLY_STOP_WORDS.match(stripped):
        return query
    return stripped


#: A query's language is told from this many letters on (CLD2 is right on short questions
#: of the languages it knows: "Wo wollte ich eine Wohnung mieten?" is German).
MIN_QUERY_LETTERS = 12
#: Languages whose function words are shipped (data/function_words/<name>.txt), by the
#: code CLD2 gives: PostgreSQL's Snowball stop lists, and a hand-written Polish one.
FUNCTION_WORD_LANGUAGES = {
    "da": "danish",
    "nl": "dutch",
    "en": "english",
    "fi": "finnish",
    "fr": "french",
    "de": "german",
    "hu": "hungarian",
    "it": "italian",
    "no": "norwegian",
    "nb": "norwegian",
    "pt": "portuguese",
    "ru": "russian",
    "es": "spanish",
    "sv": "swedish",
    "tr": "turkish",
    "pl": "polish",
}
_WORDS = re.compile(r"\w+", re.UNICODE)


@cache
def function_words(language: str) -> frozenset[str]:
    """The function words of ``language`` (a file name of ``data/function_words``: a
    PostgreSQL configuration name, or ``polish``), lower case; empty for any other."""
    path = resources.files("episodic").joinpath(f"data/function_words/{language}.txt")
    if not path.is_file():
        return frozenset()
    return frozenset(w.strip().lower() for w in path.read_text(encoding="utf-8").split())


def query_language(query: str) -> str | None:
    """The language ``query`` is written in (CLD2's code, "fr"), or None when it cannot
    tell (too few letters, unreliable, no CLD2)."""
    from episodic.store.languages import detect_language

    return detect_language([query], min_letters=MIN_QUERY_LETTERS)


def strip_function_words(query: str) -> tuple[str, str | None]:
    """``query`` without the function words of the language it is written in, and that
    language's code (None when it cannot be told). An English query is left as it is: the
    english configuration drops its stop words itself, and English ranking was tuned on
    the query as written. The query is kept whole when nothing but function words (or
    nothing) would be left."""
    language = query_language(query)
    if language is None or language == "en":
        return query, language
    words = function_words(FUNCTION_WORD_LANGUAGES.get(language, ""))
    if not words:
        return query, language
    stripped = _WORDS.sub(lambda m: " " if m.group(0).lower() in words else m.group(0), query)
    stripped = re.sub(r"\s+", " ", stripped).strip()
    if not any(ch.isalnum() for ch in stripped):
        return query, language
    return stripped, language


#: The longest run of words :func:`query_phrases` offers as a name ("new york city").
PHRASE_WORDS = 3

_WORD = re.compile(r"[\w'’&.-]+")


def query_phrases(query: str) -> list[str]:
    """Every run of one to :data:`PHRASE_WORDS` consecutive words of ``query``, spelled as
    an entity is stored (:func:`episodic.providers.entities.normalise_entity`): the names
    and phrases the query could share with an episode's entities ("What did Caroline say
    about the LGBTQ support group?" offers "caroline", "lgbtq support group", …).
    Possessives are dropped ("Caroline's" is "caroline"); a run that normalises to nothing
    is left out."""
    from episodic.providers.entities import normalise_entity

    words = [re.sub(r"['’]s$", "", w).strip(".-") for w in _WORD.findall(query)]
    words = [w for w in words if w]
    out: set[str] = set()
    for size in range(1, PHRASE_WORDS + 1):
        for i in range(len(words) - size + 1):
            phrase = normalise_entity(" ".join(words[i : i + size]))
            if phrase:
                out.add(phrase)
    return sorted(out)


_FORMS_FILE = "data/irregular_forms.txt"


@lru_cache(maxsize=1)
def word_form_groups() -> dict[str, tuple[str, ...]]:
    """Each English word of :file:`episodic/data/irregular_forms.txt` (a hand-written table
    of irregular verbs and plurals: "break broke broken", "buy bought", "child children")
    mapped to the other forms of its group. The english stemmer reduces "talked" and
    "talking" to "talk" but keeps "broke" and "broken", or "bought" and "buy", apart: a
    question asking "what did Evan have broken?" then shares no lexeme with "my Prius broke
    down"."""
    text = resources.files("episodic").joinpath(_FORMS_FILE).read_text(encoding="utf-8")
    groups: dict[str, set[str]] = {}
    for line in text.splitlines():
        forms = line.split("#", 1)[0].lower().split()
        for form in forms:
            groups.setdefault(form, set()).update(f for f in forms if f != form)
    return {form: tuple(sorted(others)) for form, others in groups.items() if others}


def word_forms(query: str) -> list[tuple[str, str]]:
    """``(form, word)`` for every other form of every word of ``query`` found in
    :func:`word_form_groups` ("What did Evan have broken?" gives ("break", "broken") and
    ("broke", "broken")): the forms a query-side OR-expansion adds, each credited to the
    query word it stands for."""
    groups = word_form_groups()
    out: list[tuple[str, str]] = []
    for word in dict.fromkeys(w.lower() for w in _QUERY_WORD.findall(query)):
        out += [(form, word) for form in groups.get(word, ())]
    return out


_QUERY_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
