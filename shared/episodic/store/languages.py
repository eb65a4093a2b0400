"""A dataset's language: which PostgreSQL text-search configuration parses and stems its
text for Recall's lexical index and its queries (``datasets.text_search_config``,
migration 0007).

A language is named by its ISO 639-1 code ("fr"), a BCP 47 tag ("fr-CA": the language
part counts) or PostgreSQL's own configuration name ("french"). A language PostgreSQL has
no stemmer for falls back to ``simple``: words as written, lowercased, no stop words — it
still matches word for word, in any script.

Changing a dataset's language re-tokenises what is already indexed (the episodes'
documents and the thread chunks' lexical vectors; the embeddings stay), in the caller's
transaction, so the index and the queries always use the same configuration.

A dataset nobody set a language for is **detected** from its text (migration 0015,
``datasets.language_origin``): the Summariser reads each new episode's messages
(:func:`detect_language`, Google's Compact Language Detector 2 from the ``pycld2`` wheel:
no download, ~0.1 µs a character) until it is sure, then sets the dataset's language once
(:func:`settle_detected_language`). Without it, a user writing French is stemmed as English
and judged by ``abstain``'s English curves. A language set through SetDatasetPolicy is never
overridden; setting it to ``auto`` hands it back to detection.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

import pycld2
from sqlalchemy import Connection, text

from episodic.errors import InvalidArgument
from episodic.store.recall_index import (
    TEXT_SEARCH_CONFIG,
    blind_vectors,
    chunk_texts,
    dataset_config,
    load_index_input,
    prepare_episode_document,
)

if TYPE_CHECKING:
    from episodic.store.vault import Vault

__all__ = [
    "AUTO",
    "FALLBACK_CONFIG",
    "ISO_639_1",
    "dataset_config",
    "detect_language",
    "hand_back_to_detection",
    "language_origin",
    "resolve_language",
    "set_language",
    "settle_detected_language",
]

log = logging.getLogger(__name__)

#: The language SetDatasetPolicy takes to hand a dataset's language back to detection.
AUTO = "auto"

#: The configuration of a language PostgreSQL has no stemmer for.
FALLBACK_CONFIG = "simple"
#: ISO 639-1 codes of the languages PostgreSQL's built-in (Snowball) configurations stem.
ISO_639_1 = {
    "ar": "arabic",
    "ca": "catalan",
    "da": "danish",
    "de": "german",
    "el": "greek",
    "en": "english",
    "es": "spanish",
    "eu": "basque",
    "fi": "finnish",
    "fr": "french",
    "ga": "irish",
    "hi": "hindi",
    "hu": "hungarian",
    "hy": "armenian",
    "id": "indonesian",
    "it": "italian",
    "lt": "lithuanian",
    "nb": "norwegian",
    "ne": "nepali",
    "nl": "dutch",
    "nn": "norwegian",
    "no": "norwegian",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
    "yi": "yiddish",
}
_LANGUAGE = re.compile(r"^[a-z]{2,8}(?:[-_][a-z0-9]{1,8})*$")


def resolve_language(conn: Connection, language: str) -> str:
    """The text-search configuration for ``language`` on this server: its stemmer when
    PostgreSQL has one, else ``simple``. INVALID_ARGUMENT for what is not a language name."""
    value = language.strip().lower()
    if not _LANGUAGE.match(value):
        raise InvalidArgument(
            f"language {language[:40]!r} is not a language name: use an ISO 639-1 code "
            "('fr'), a BCP 47 tag ('pt-BR') or a PostgreSQL configuration ('french')",
            field="language",
        )
    primary = re.split(r"[-_]", value)[0]
    candidate = ISO_639_1.get(primary, value if "-" not in value else primary)
    found = conn.execute(
        text("SELECT cfgname FROM pg_ts_config WHERE cfgname = :n"), {"n": candidate}
    ).scalar()
    return str(found) if found else FALLBACK_CONFIG


#: Detection decides only on at least this many letters: CLD2 is unreliable on a few words
#: (a "hi, thanks!" episode says nothing), and a wrong language, once detected, stays.
MIN_DETECT_LETTERS = 200
#: …and only when its language holds at least this share of the text (percent of bytes):
#: a conversation mixing two languages keeps the default.
MIN_DETECT_SHARE = 70
#: Detection reads at most this many characters (the first ones; CLD2 is linear in them).
MAX_DETECT_CHARS = 20_000


def detect_language(texts: Iterable[str]) -> str | None:
    """The language ``texts`` are written in, as CLD2's code ("fr", "de", "zh-Hant"; English
    is "en"), or None when the text cannot tell: fewer than :data:`MIN_DETECT_LETTERS`
    letters, CLD2 not reliable, or no language holding :data:`MIN_DETECT_SHARE` % of it.

    Measured on the hand-written French, Spanish and German set and on LoCoMo's English
    (bench/data/multilingual.jsonl, ../shared/bench/locomo10.jsonl): every one of 425
    sessions right; single messages 99.5 % (most misses are a few words)."""
    sample = "\n".join(texts)[:MAX_DETECT_CHARS]
    if sum(ch.isalpha() for ch in sample) < MIN_DETECT_LETTERS:
        return None
    try:
        reliable, _, found = pycld2.detect(sample, isPlainText=True)
    except pycld2.error:
        # CLD2 refuses some code points (C1 controls, noncharacters) as "invalid UTF-8":
        # the words around them still say the language.
        printable = "".join(ch if ch.isprintable() else " " for ch in sample)
        try:
            reliable, _, found = pycld2.detect(printable, isPlainText=True)
        except pycld2.error:
            return None
    _, code, share, _ = found[0]
    if not reliable or code in ("un", "xxx") or share < MIN_DETECT_SHARE:
        return None
    return str(code)


def language_origin(conn: Connection, dataset: str) -> str | None:
    """Whose choice the dataset's configuration is: 'default' (nobody's: detection may set
    it), 'detected' or 'set' (migration 0015); None for a dataset not registered yet."""
    value = conn.execute(
        text("SELECT language_origin FROM datasets WHERE dataset = :d"), {"d": dataset}
    ).scalar()
    return str(value) if value else None


def settle_detected_language(
    conn: Connection, vault: Vault, dataset: str, texts: Iterable[str]
) -> str | None:
    """Detects the language of ``texts`` (a new episode's messages) for a dataset whose
    language nobody chose, and when it can tell, makes it the dataset's language for good:
    its configuration (re-tokenising what is indexed when it changes) and origin
    'detected'. Returns the configuration it set, None when it did nothing (the dataset's
    language was chosen already, or the text cannot tell: the next episode asks again).

    One cheap read when the language is settled (every episode after the first pays only
    that); the dataset's row is locked only to write, and the origin read again under the
    lock, so two workers detecting at once settle it once."""
    if language_origin(conn, dataset) != "default":
        return None
    code = detect_language(texts)
    if code is None:
        return None
    origin = conn.execute(
        text("SELECT language_origin FROM datasets WHERE dataset = :d FOR UPDATE"),
        {"d": dataset},
    ).scalar()
    if origin != "default":
        return None
    config = resolve_language(conn, code)
    set_language(conn, vault, dataset, config, origin="detected")
    log.info("dataset %s: language detected from its text: %s (%s)", dataset, code, config)
    return config


def set_language(
    conn: Connection, vault: Vault, dataset: str, config: str, *, origin: str = "set"
) -> bool:
    """Sets the dataset's configuration (the row must exist: Vault.for_write registers it)
    and whose choice it is (``origin``: 'set' by a caller, 'detected', or 'default' when
    handed back to detection) and, when the configuration changed, re-tokenises its lexical
    index; returns whether it changed."""
    previous = conn.execute(
        text("SELECT text_search_config FROM datasets WHERE dataset = :d FOR UPDATE"),
        {"d": dataset},
    ).scalar_one()
    conn.execute(
        text(
            "UPDATE datasets SET text_search_config = :c, language_origin = :o, "
            "updated_at = now() WHERE dataset = :d"
        ),
        {"c": config, "o": origin, "d": dataset},
    )
    if previous == config:
        return False
    _retokenise(conn, vault, dataset)
    return True


def hand_back_to_detection(conn: Connection, vault: Vault, dataset: str) -> str:
    """SetDatasetPolicy's ``language: "auto"``: the dataset's language is nobody's choice
    again, detected at once from a sample of its messages when they can tell (else
    'english' until an episode can). Returns the configuration now in force."""
    key = vault.for_read(conn, dataset, fresh=True)
    sealed = conn.execute(
        # Any messages will do to tell a language: a sample, not the dataset.
        text("SELECT content FROM messages WHERE dataset = :d LIMIT 200"),
        {"d": dataset},
    ).scalars()
    code = detect_language([key.open(bytes(value), "messages.content") for value in sealed])
    if code is None:
        set_language(conn, vault, dataset, TEXT_SEARCH_CONFIG, origin="default")
        return TEXT_SEARCH_CONFIG
    config = resolve_language(conn, code)
    set_language(conn, vault, dataset, config, origin="detected")
    return config


def _retokenise(conn: Connection, vault: Vault, dataset: str) -> None:
    key = vault.for_read(conn, dataset)
    episode_ids = conn.execute(
        text(
            "SELECT episode_id FROM episodes WHERE dataset = :d AND status = 'completed' "
            "AND search_vector IS NOT NULL"
        ),
        {"d": dataset},
    ).scalars()
    for episode_id in list(episode_ids):
        source = load_index_input(conn, vault, episode_id)
        # the document as the index writes it (with its speakers' words, re-stemmed)
        document, length = prepare_episode_document(conn, key, source)
        conn.execute(
            text(
                "UPDATE episodes SET search_vector = CAST(:v AS tsvector), search_length = :n "
                "WHERE dataset = :d AND episode_id = :id"
            ),
            {"v": document, "n": length, "d": dataset, "id": episode_id},
        )
        starts = [
            (int(r[0]), int(r[1]))
            for r in conn.execute(
                text(
                    "SELECT start_sequence, start_offset FROM message_chunks "
                    "WHERE dataset = :d AND thread_id = :t"
                ),
                {"d": dataset, "t": source.thread_id},
            )
        ]
        texts = chunk_texts(source.messages, starts)
        ordered = sorted(texts)
        vectors = blind_vectors(conn, key, [(texts[s], "") for s in ordered])
        for (sequence, offset), (vector, n) in zip(ordered, vectors, strict=True):
            conn.execute(
                text(
                    "UPDATE message_chunks SET search_vector = CAST(:v AS tsvector), "
                    "search_length = :n WHERE dataset = :d AND thread_id = :t "
                    "AND start_sequence = :s AND start_offset = :o"
                ),
                {
                    "v": vector,
                    "n": n,
                    "d": dataset,
                    "t": source.thread_id,
                    "s": sequence,
                    "o": offset,
                },
            )
