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
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sqlalchemy import Connection, text

from episodic.errors import InvalidArgument
from episodic.store.recall_index import (
    TEXT_SEARCH_CONFIG,
    blind_vectors,
    chunk_texts,
    load_index_input,
    prepare_episode_document,
)

if TYPE_CHECKING:
    from episodic.store.vault import Vault

__all__ = ["FALLBACK_CONFIG", "ISO_639_1", "dataset_config", "resolve_language", "set_language"]

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


def dataset_config(conn: Connection, dataset: str) -> str:
    """The dataset's configuration ('english' for a dataset not registered yet)."""
    value = conn.execute(
        text("SELECT text_search_config FROM datasets WHERE dataset = :d"), {"d": dataset}
    ).scalar()
    return str(value) if value else TEXT_SEARCH_CONFIG


def set_language(conn: Connection, vault: Vault, dataset: str, config: str) -> bool:
    """Sets the dataset's configuration (the row must exist: Vault.for_write registers it)
    and, when it changed, re-tokenises its lexical index; returns whether it changed."""
    previous = conn.execute(
        text("SELECT text_search_config FROM datasets WHERE dataset = :d FOR UPDATE"),
        {"d": dataset},
    ).scalar_one()
    if previous == config:
        return False
    conn.execute(
        text("UPDATE datasets SET text_search_config = :c, updated_at = now() WHERE dataset = :d"),
        {"c": config, "d": dataset},
    )
    _retokenise(conn, vault, dataset)
    return True


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
