"""The lexical half of recall's index: what an episode's document is made of
(:class:`IndexInput`, :func:`indexed_text`, :func:`head_text`), its blind tokens
(:func:`blind_vectors`: PostgreSQL stems, each lexeme becomes the dataset's token), the
query's tokens blinded the same way (:func:`query_tokens`, :func:`weighted_query_tokens`),
the speakers' word pairs, and the statement that stores the document.

Split out of :mod:`episodic.store.recall_index` (issue 42): the tokenising and blinding is
shared by the episode's document, its chunks, events and the queries, and must stay one
piece (the index and the queries agree token for token); :mod:`episodic.store.recall_index`
re-exports it. :data:`HEAD_ENTITIES` and :data:`SPEAKER_WORDS` are read here: a test or a
benchmark that changes them sets them on this module.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, text

from episodic.errors import NotFound
from episodic.providers.types import speaker_from_metadata
from episodic.store.index_language import DATASET_CONFIG, STEM_CONFIG
from episodic.tool_calls import rendered_content

if TYPE_CHECKING:
    from episodic.crypto import DatasetKey

__all__ = [
    "HEAD_ENTITIES",
    "MAX_INDEXED_CHARS",
    "SPEAKER_PAIR_SEPARATOR",
    "SPEAKER_WORDS",
    "IndexInput",
    "blind_vectors",
    "episode_document",
    "head_text",
    "indexed_text",
    "prepare_episode_document",
    "prepare_episode_documents",
    "query_tokens",
    "speaker_pair",
    "speaker_word_tokens",
    "weighted_query_tokens",
    "with_speaker_words",
    "write_episode_document",
]

#: Whether the episode's entities join its summary and key learnings in the document's
#: head (weight A, the field ``RankingOptions.head_share`` scores on its own). Measured
#: alone on LoCoMo (docs/concepts/recall.md); changing it needs a re-index.
HEAD_ENTITIES = False
#: Whether the episode's document also holds its speakers' words as pairs
#: (:func:`speaker_word_tokens`), which ``RankingOptions.speaker`` reads. Measured on
#: LoCoMo (docs/benchmarks.md "Ranking, fifth pass") and off: the signal did not earn its place in the
#: default ranking, and the pairs double the document's lexemes. Changing it needs a
#: re-index.
SPEAKER_WORDS = False
#: The lexical document keeps the newest this-many characters of a very long thread
#: (a tsvector holds at most 1 MB).
MAX_INDEXED_CHARS = 400_000


def indexed_text(content: str, metadata: Any = None, tools: Any = None) -> str:
    """The text of a message as indexed: ``"<speaker>: <content>"`` when the message names
    its speaker, else the content; its tool calls or its tool's name rendered with it
    (:func:`episodic.tool_calls.rendered_content`, as prompts show them)."""
    content = rendered_content(content, tools)
    speaker = speaker_from_metadata(metadata)
    return f"{speaker}: {content}" if speaker else content


@dataclass(frozen=True)
class IndexInput:
    """What an episode's index is built from: the thread's messages up to the episode's
    end, as indexed (:func:`indexed_text`), and the episode's summary and key learnings."""

    episode_id: uuid.UUID
    thread_id: uuid.UUID
    dataset: str
    end_sequence: int
    messages: Sequence[tuple[int, str]]  # (sequence, indexed text), in sequence order
    summary: str
    key_learnings: Sequence[str]
    entities: Sequence[str] = ()
    #: (sequence, speaker's name) of the messages that name their speaker: the document
    #: also holds each speaker's words as pairs (:func:`speaker_word_tokens`).
    speakers: Sequence[tuple[int, str]] = ()


def head_text(source: IndexInput) -> str:
    """The document's head (weight A): the summary and key learnings, and the entities
    when :data:`HEAD_ENTITIES` is on."""
    parts = [source.summary, *source.key_learnings]
    if HEAD_ENTITIES:
        parts += list(source.entities)
    return "\n".join(parts)


def _quote(token: str) -> str:
    return "'" + token.replace("\\", "\\\\").replace("'", "''") + "'"


def _literal(
    key: DatasetKey, lexemes: Sequence[tuple[str, list[int] | None, list[str] | None]]
) -> tuple[str, int]:
    """A tsvector literal of ``lexemes`` (lexeme, positions, weights) with every lexeme
    replaced by its token, and its length (positions counted, BM25's document length)."""
    parts: list[str] = []
    length = 0
    for lexeme, positions, weights in lexemes:
        token = _quote(key.token(lexeme))
        if not positions:
            parts.append(token)
            length += 1
            continue
        marks = weights or ["D"] * len(positions)
        parts.append(
            token
            + ":"
            + ",".join(f"{p}{w if w != 'D' else ''}" for p, w in zip(positions, marks, strict=True))
        )
        length += len(positions)
    return " ".join(parts), length


def blind_vectors(
    conn: Connection,
    key: DatasetKey,
    documents: Sequence[tuple[str, str]],
    *,
    config: str | None = None,
) -> list[tuple[str, int]]:
    """tsvectors of ``documents`` — (body, head) pairs; the head gets weight A, as
    ``to_tsvector(body) || setweight(to_tsvector(head), 'A')`` in the dataset's text-search
    configuration (or ``config``) — with every lexeme replaced by ``key``'s token, as
    literals with their lengths. Stemming happens before blinding, so a sealed dataset is
    stemmed like a clear one in any language.

    PostgreSQL parses, stems and positions the text exactly as it always did (one round
    trip; the text is a statement parameter, never stored); only the lexemes are blinded,
    so BM25 over tokens ranks exactly as BM25 over words. For a dataset in the clear the
    token is the lexeme itself.
    """
    if not documents:
        return []
    grouped: list[list[tuple[str, list[int] | None, list[str] | None]]] = [[] for _ in documents]
    for row in conn.execute(
        text(
            f"""
            WITH cfg AS (SELECT {STEM_CONFIG} AS c)
            SELECT t.i, u.lexeme, u.positions, u.weights
            FROM cfg, unnest(CAST(:bodies AS text[]), CAST(:heads AS text[]))
                 WITH ORDINALITY AS t(body, head, i)
            CROSS JOIN LATERAL unnest(
                to_tsvector(cfg.c, t.body) || setweight(to_tsvector(cfg.c, t.head), 'A')) AS u
            """
        ),
        {
            "bodies": [d[0] for d in documents],
            "heads": [d[1] for d in documents],
            "dataset": key.dataset,
            "config": config,
        },
    ):
        grouped[int(row[0]) - 1].append((row[1], row[2], row[3]))
    return [_literal(key, lexemes) for lexemes in grouped]


def query_tokens(conn: Connection, key: DatasetKey, query: str) -> list[str]:
    """The query's distinct lexemes (the index's parser and stemmer: the dataset's
    configuration), as ``key``'s tokens."""
    lexemes = conn.execute(
        text(f"SELECT DISTINCT lexeme FROM unnest(to_tsvector({DATASET_CONFIG}, :q))"),
        {"q": query, "dataset": key.dataset},
    ).scalars()
    return sorted(key.token(lexeme) for lexeme in lexemes)


def weighted_query_tokens(conn: Connection, key: DatasetKey, query: str) -> list[tuple[str, float]]:
    """The query's distinct lexemes as ``key``'s tokens (like :func:`query_tokens`), each
    with its query-side weight: :data:`episodic.query_focus.GENERIC_WEIGHT` for the lexemes
    of :data:`~episodic.query_focus.GENERIC_WORDS` (stemmed in the same statement, with the
    dataset's configuration), 1 for the rest."""
    from episodic.query_focus import GENERIC_WEIGHT, GENERIC_WORDS

    rows = conn.execute(
        text(
            f"""
            WITH cfg AS (SELECT {DATASET_CONFIG} AS c)
            SELECT DISTINCT u.lexeme,
                   u.lexeme IN (SELECT g.lexeme FROM cfg, unnest(to_tsvector(cfg.c, :generic)) g)
            FROM cfg, unnest(to_tsvector(cfg.c, :q)) u
            """
        ),
        {"q": query, "generic": GENERIC_WORDS, "dataset": key.dataset},
    ).all()
    return sorted(
        (key.token(lexeme), GENERIC_WEIGHT if generic else 1.0) for lexeme, generic in rows
    )


def episode_document(source: IndexInput) -> tuple[str, str]:
    """The episode's lexical document as (body, head): the thread's messages up to its end
    (the newest MAX_INDEXED_CHARS), and its head (:func:`head_text`, weight A)."""
    body = "\n".join(m[1] for m in source.messages if m[0] <= source.end_sequence)
    return body[-MAX_INDEXED_CHARS:], head_text(source)


def prepare_episode_document(
    conn: Connection, key: DatasetKey, source: IndexInput
) -> tuple[str, int]:
    """The blinded tsvector literal of the episode's lexical document and its length (no
    embedding: cheap; the summariser writes it in the completion transaction)."""
    return with_speaker_words(
        conn, key, source, blind_vectors(conn, key, [episode_document(source)])[0]
    )


def prepare_episode_documents(
    conn: Connection,
    key: DatasetKey,
    sources: Sequence[IndexInput],
    *,
    config: str | None = None,
) -> list[tuple[str, int]]:
    """:func:`prepare_episode_document` of many episodes, stemmed in one statement (in
    ``config`` when given, else the dataset's configuration)."""
    documents = blind_vectors(conn, key, [episode_document(s) for s in sources], config=config)
    return [
        with_speaker_words(conn, key, s, d, config=config)
        for s, d in zip(sources, documents, strict=True)
    ]


#: Separates a speaker's lexeme from the word's in a speaker-word pair (PostgreSQL's
#: parser never leaves a space inside a lexeme, so a pair is never a word's lexeme).
SPEAKER_PAIR_SEPARATOR = " "


def speaker_pair(speaker_lexeme: str, word_lexeme: str) -> str:
    """The lexeme of "``speaker`` said ``word``" (before blinding)."""
    return f"{speaker_lexeme}{SPEAKER_PAIR_SEPARATOR}{word_lexeme}"


def speaker_word_tokens(
    conn: Connection, key: DatasetKey, source: IndexInput, *, config: str | None = None
) -> list[str]:
    """``key``'s tokens of every (speaker, word) pair the thread holds up to the episode's
    end: each lexeme of a message's own text paired with each lexeme of its speaker's name
    (``"carolin research"``: Caroline said "research"), in the dataset's text-search
    configuration; none unless :data:`SPEAKER_WORDS`. They join the episode's lexical document without positions (and are not
    counted in its length), so BM25 never sees them; Recall's speaker signal
    (``RankingOptions.speaker``) asks for the pairs of the person a question names ("What
    did Caroline research?"). Empty when no message names its speaker."""
    if not SPEAKER_WORDS:
        return []
    names = dict(source.speakers)
    said = [
        (names[sequence], text)
        for sequence, text in source.messages
        if sequence <= source.end_sequence and sequence in names
    ]
    if not said:
        return []
    rows = conn.execute(
        text(
            f"""
            WITH cfg AS (SELECT {STEM_CONFIG} AS c)
            SELECT DISTINCT s.lexeme, w.lexeme
            FROM cfg, unnest(CAST(:speakers AS text[]), CAST(:texts AS text[])) AS m(speaker, body)
            CROSS JOIN LATERAL unnest(to_tsvector(cfg.c, m.speaker)) s
            CROSS JOIN LATERAL unnest(to_tsvector(cfg.c, m.body)) w
            WHERE s.lexeme <> w.lexeme
            """
        ),
        {
            "speakers": [name for name, _ in said],
            "texts": [body[-MAX_INDEXED_CHARS:] for _, body in said],
            "dataset": key.dataset,
            "config": config,
        },
    ).all()
    return sorted({key.token(speaker_pair(a, b)) for a, b in rows})


def with_speaker_words(
    conn: Connection,
    key: DatasetKey,
    source: IndexInput,
    document: tuple[str, int],
    *,
    config: str | None = None,
) -> tuple[str, int]:
    """``document`` (literal, length) with the thread's speaker-word pairs added."""
    tokens = speaker_word_tokens(conn, key, source, config=config)
    if not tokens:
        return document
    literal, length = document
    return " ".join([literal, *(_quote(t) for t in tokens)]).strip(), length


def write_episode_document(
    conn: Connection,
    dataset: str,
    episode_id: uuid.UUID,
    document: str,
    length: int,
    *,
    chunks_pending: bool = False,
) -> None:
    """Stores the episode's lexical document; ``chunks_pending`` marks that the thread's new
    chunks are still to be indexed (:func:`index_pending_chunks` clears it)."""
    found = conn.execute(
        text(
            "UPDATE episodes SET search_vector = CAST(:v AS tsvector), search_length = :n, "
            "chunks_pending = :pending WHERE dataset = :d AND episode_id = :id "
            "RETURNING episode_id"
        ),
        {"v": document, "n": length, "pending": chunks_pending, "d": dataset, "id": episode_id},
    ).first()
    if found is None:
        raise NotFound(f"episode {episode_id} does not exist", episode_id=str(episode_id))
