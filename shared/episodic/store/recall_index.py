"""Recall's search index of an episode, written when the episode completes.

An episode is found by what its thread said, not only by its summary: the summary's
embedding alone loses badly to BM25 over the raw messages (research/retrieval-baselines.md).
Two things are indexed, both over the **thread's messages up to the episode's
end_sequence**, not only the episode's window: a thread has one current (completed) episode
and completing it archives the earlier ones, so the current episode is the only entry that
can represent the earlier windows too (its summary is already a rolling summary of the
whole thread, seed 000 "Sequence windows").

- ``episodes.search_vector`` / ``search_length``: a tsvector of those messages plus the
  summary and key learnings (weight A), and its token count (BM25's document length).
- ``message_chunks``: overlapping runs of consecutive messages (up to
  :data:`CHUNK_MESSAGES` messages / :data:`CHUNK_WORDS` words, the embedder's window) with
  their embedding (of the chunk's own text, :func:`chunk_vectors`) and
  tsvector (for passage-level BM25: the best passage of a long thread
  matters more than the thread's average), keyed by thread and position, so they outlive
  the episode that wrote them: the next episode of the thread only embeds its own window
  and reuses the rest. With late chunking (``EPISODIC_CHUNK_VECTORS=late``, in-process
  MiniLM only) the window's text is read by the model once and each chunk's vector is
  pooled from its tokens (:func:`late_chunk_vectors`).

Both tsvectors hold **blind tokens**, not words (:func:`blind_vectors`): PostgreSQL parses
and stems the text as before, and each lexeme is replaced by an HMAC under the dataset's
key, so the index of an encrypted dataset reveals no words while BM25 ranks exactly as it
would over the words (equal words, equal tokens; queries are blinded the same way,
:func:`query_tokens`). A dataset stored in the clear keeps its lexemes as they are.

The summariser writes the lexical document in the transaction that completes the episode
(:func:`prepare_episode_document`, :func:`write_episode_document`) and marks the episode
``chunks_pending``; it embeds and stores the thread's new chunks right after, in the same
pass (:func:`index_pending_chunks`, which clears the mark in the transaction that stores
them). Why deferred: embedding the chunks is most of an episode's cost, and the episode is
recallable without them (its summary's vector and lexical document, the thread's older
chunks), so it becomes recallable that much sooner. A crash in between leaves the mark, and
the next pass of any worker indexes what it finds marked (:func:`take_chunk_work`), a
limited number of times.
:func:`index_episode` does everything at once for an episode whose summary is stored.
Recall works without any of it (the summary's embedding stands in), only less well.
"""

from __future__ import annotations

import uuid
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Connection, Engine, RowMapping, text

from episodic.errors import NotFound
from episodic.providers.dataset_embedders import DatasetEmbedders
from episodic.providers.embedding import token_access
from episodic.providers.types import SpanDocument, speaker_from_metadata
from episodic.store import embedding_space
from episodic.store.distribution import across_datasets
from episodic.store.sql import NOW
from episodic.tool_calls import rendered_content

if TYPE_CHECKING:
    from episodic.crypto import DatasetKey
    from episodic.providers.types import Embedder
from episodic.store.vault import Vault

__all__ = [
    "CHUNK_MESSAGES",
    "CHUNK_OVERLAP",
    "CHUNK_WORDS",
    "HEAD_ENTITIES",
    "MAX_INDEXED_CHARS",
    "SPEAKER_WORDS",
    "TEXT_SEARCH_CONFIG",
    "Chunk",
    "ChunkWork",
    "IndexInput",
    "IndexResult",
    "PreparedIndex",
    "blind_vectors",
    "chunk_document",
    "chunk_texts",
    "chunk_vectors",
    "dataset_config",
    "head_text",
    "hold_language",
    "index_episode",
    "index_missing",
    "index_pending_chunks",
    "indexed_text",
    "late_chunk_vectors",
    "load_index_input",
    "load_index_inputs",
    "make_chunks",
    "message_speakers",
    "pending_chunks",
    "pending_messages",
    "prepare_episode_document",
    "prepare_episode_documents",
    "prepare_episode_index",
    "query_tokens",
    "speaker_pair",
    "speaker_word_tokens",
    "take_chunk_work",
    "weighted_query_tokens",
    "write_episode_document",
    "write_episode_index",
]

#: PostgreSQL text search configuration of the lexical index and of queries (they must
#: agree) for a dataset that chose none: 'english' stems and drops stop words; other
#: languages still match word for word. A dataset's own is ``datasets.text_search_config``
#: (migration 0007, :mod:`episodic.store.languages`), read in the statement that tokenises.
TEXT_SEARCH_CONFIG = "english"
#: The dataset's configuration (``:dataset``) as a regconfig, inside a statement.
DATASET_CONFIG = (
    "CAST(coalesce((SELECT text_search_config FROM datasets WHERE dataset = :dataset), "
    f"'{TEXT_SEARCH_CONFIG}') AS regconfig)"
)
#: What the index's writers stem in: ``:config`` when the statement is given one (a
#: language switch re-stems in the configuration it has not stored yet), else the
#: dataset's (:data:`DATASET_CONFIG`).
STEM_CONFIG = (
    "CAST(coalesce(CAST(:config AS text), "
    "(SELECT text_search_config FROM datasets WHERE dataset = :dataset), "
    f"'{TEXT_SEARCH_CONFIG}') AS regconfig)"
)
#: The first key of the two-key advisory lock on a dataset's language (a key space of its
#: own: the one-key locks, the entity canon's and the erasure's, never collide with it).
LANGUAGE_LOCK_SPACE = 0x6C67
#: A chunk holds at most this many consecutive messages…
CHUNK_MESSAGES = 4
#: …and at most this many words (all-MiniLM-L6-v2 reads 256 word pieces, ~190 words).
CHUNK_WORDS = 180
#: Whether each chunk starts half-way through the previous one (every message embedded in
#: two chunks, so a fact told across two messages is seen whole once) or right after it
#: (every message embedded once: half the model time of the index). Measured alone on
#: LoCoMo (docs/benchmarks.md "Summariser, fourth pass"); changing it needs a re-index.
CHUNK_OVERLAP = True
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


@dataclass(frozen=True)
class Chunk:
    """A run of consecutive message pieces: from word ``start_offset`` of message
    ``start_sequence`` to the end of the piece in message ``end_sequence``."""

    start_sequence: int
    start_offset: int
    end_sequence: int
    text: str


@dataclass(frozen=True)
class IndexResult:
    """What :func:`index_episode` wrote."""

    episode_id: uuid.UUID
    chunks_added: int
    search_length: int


def _pieces(messages: Sequence[tuple[int, str]]) -> list[tuple[int, int, str, int]]:
    """Splits messages into pieces of at most CHUNK_WORDS words:
    (sequence, word offset, text, words)."""
    out: list[tuple[int, int, str, int]] = []
    for sequence, content in messages:
        words = content.split()
        if not words:
            continue
        if len(words) <= CHUNK_WORDS:
            out.append((sequence, 0, content.strip(), len(words)))
            continue
        for start in range(0, len(words), CHUNK_WORDS):
            part = words[start : start + CHUNK_WORDS]
            out.append((sequence, start, " ".join(part), len(part)))
    return out


def make_chunks(messages: Sequence[tuple[int, str]]) -> list[Chunk]:
    """Cuts ``(sequence, content)`` rows (in sequence order) into overlapping chunks.

    A chunk takes up to CHUNK_MESSAGES pieces within CHUNK_WORDS words (always at least
    one piece); the next chunk starts half-way through it, so every piece is in one or two
    chunks and a fact split across two messages is still seen whole once — or, without
    :data:`CHUNK_OVERLAP`, right after it (every piece in one chunk).
    """
    return [chunk for chunk, _, _ in _cut(_pieces(messages))]


def _cut(pieces: list[tuple[int, int, str, int]]) -> list[tuple[Chunk, int, int]]:
    """:func:`make_chunks` over pieces: each chunk with its first piece and the one after
    its last."""
    chunks: list[tuple[Chunk, int, int]] = []
    i = 0
    while i < len(pieces):
        chunk, j = _chunk_at(pieces, i)
        chunks.append((chunk, i, j))
        if j >= len(pieces):
            break
        i += max(1, (j - i) // 2) if CHUNK_OVERLAP else j - i
    return chunks


def chunk_document(messages: Sequence[tuple[int, str]]) -> tuple[list[Chunk], SpanDocument]:
    """The chunks of ``messages`` (:func:`make_chunks`) and the document late chunking
    reads: every piece once, one per line, with each chunk's span in it. A chunk's text is
    exactly its span of the document (both join the pieces with newlines)."""
    pieces = _pieces(messages)
    starts: list[int] = []
    offset = 0
    for piece in pieces:
        starts.append(offset)
        offset += len(piece[2]) + 1
    cut = _cut(pieces)
    spans = tuple((starts[i], starts[j - 1] + len(pieces[j - 1][2])) for _, i, j in cut)
    document = SpanDocument("\n".join(p[2] for p in pieces), spans)
    return [chunk for chunk, _, _ in cut], document


def _chunk_at(
    pieces: list[tuple[int, int, str, int]], i: int, stop: int | None = None
) -> tuple[Chunk, int]:
    """The chunk that starts at piece ``i`` (up to CHUNK_MESSAGES pieces within CHUNK_WORDS
    words, at least one, none from ``stop`` on) and the index of the piece after it."""
    stop = len(pieces) if stop is None else stop
    j, words = i, 0
    while j < stop and j - i < CHUNK_MESSAGES:
        if j > i and words + pieces[j][3] > CHUNK_WORDS:
            break
        words += pieces[j][3]
        j += 1
    chunk = Chunk(
        start_sequence=pieces[i][0],
        start_offset=pieces[i][1],
        end_sequence=pieces[j - 1][0],
        text="\n".join(p[2] for p in pieces[i:j]),
    )
    return chunk, j


def chunk_texts(
    messages: Sequence[tuple[int, str]],
    starts: Sequence[tuple[int, int]],
    ends: dict[tuple[int, int], int] | None = None,
) -> dict[tuple[int, int], str]:
    """The text of stored chunks again, from the thread's messages: a chunk is determined by
    where it starts (``(start_sequence, start_offset)``), because chunks are cut greedily
    from their first piece — among the messages there were when it was cut: ``ends`` (a
    chunk's stored ``end_sequence``) stops it there, where a window ended, rather than
    running on into the next window's messages. Starts not found among the pieces are left
    out."""
    pieces = _pieces(messages)
    at = {(p[0], p[1]): i for i, p in enumerate(pieces)}
    sequences = [p[0] for p in pieces]
    out = {}
    for s in starts:
        if s not in at:
            continue
        stop = None if ends is None or s not in ends else bisect_right(sequences, ends[s])
        out[s] = _chunk_at(pieces, at[s], stop)[0].text
    return out


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


@dataclass(frozen=True)
class PreparedIndex:
    """The slow half of indexing (chunks embedded, lexemes blinded), ready to be written."""

    episode_id: uuid.UUID
    thread_id: uuid.UUID
    dataset: str
    chunks: list[Chunk]
    vectors: np.ndarray
    chunk_vectors: list[str]  # tsvector literals of the chunks (blind tokens)
    chunk_lengths: list[int]
    document: str  # tsvector literal of the episode's document
    document_length: int


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


def chunk_vectors(chunks: Sequence[Chunk], embedder: Embedder) -> np.ndarray:
    """One unit vector per chunk: the embedding of the chunk's own text, in one model call
    (through the Summariser's shared :class:`~episodic.providers.embedding.CachedEmbedder`,
    which the worker has already filled in its batched call for every episode it holds).

    Why not pooled from the sentences the summary already embedded (which would make the
    index almost free): measured on LoCoMo, pooled chunk vectors cost R@3 -.015, R@5 -.006
    and MRR -.002, and Recall's calibrated relevance (store/relevance.py) was fitted on the
    chunks' own embeddings — its cosines would move. Quality first; the batching and the
    cache keep most of the speed.
    """
    if not chunks:
        return np.zeros((0, embedder.dimension), dtype=np.float32)
    return np.asarray(embedder.embed([c.text for c in chunks]), dtype=np.float32)


def late_chunk_vectors(documents: Sequence[SpanDocument], embedder: Embedder) -> np.ndarray:
    """One unit vector per span of ``documents`` (:func:`chunk_document`), in order: late
    chunking. Each document (an episode's new messages) is read by the model once, in
    windows, and each chunk's vector is the mean of its tokens' vectors
    (:meth:`~episodic.providers.embedding.MiniLMEmbedder.embed_spans`): every token
    embedded once instead of once per chunk that holds it, and each chunk read in its
    context. ``embedder`` must have token access
    (:func:`~episodic.providers.embedding.token_access`)."""
    parts = [v for v in embedder.embed_spans(list(documents)) if len(v)]  # type: ignore[attr-defined]
    if not parts:
        return np.zeros((0, embedder.dimension), dtype=np.float32)
    return np.asarray(np.concatenate(parts), dtype=np.float32)


def pending_messages(
    conn: Connection,
    dataset: str,
    thread_id: uuid.UUID,
    messages: Sequence[tuple[int, str]],
    end_sequence: int,
) -> list[tuple[int, str]]:
    """The thread's ``(sequence, indexed text)`` messages up to ``end_sequence`` that no
    stored chunk covers yet (normally just the episode's window)."""
    covered = conn.execute(
        text(
            "SELECT coalesce(max(end_sequence), 0) FROM message_chunks "
            "WHERE dataset = :d AND thread_id = :t"
        ),
        {"d": dataset, "t": thread_id},
    ).scalar_one()
    return [m for m in messages if covered < m[0] <= end_sequence]


def pending_chunks(
    conn: Connection,
    dataset: str,
    thread_id: uuid.UUID,
    messages: Sequence[tuple[int, str]],
    end_sequence: int,
) -> list[Chunk]:
    """The chunks of :func:`pending_messages`."""
    return make_chunks(pending_messages(conn, dataset, thread_id, messages, end_sequence))


def _new_chunks(
    conn: Connection,
    dataset: str,
    thread_id: uuid.UUID,
    messages: Sequence[tuple[int, str]],
    end_sequence: int,
    *,
    late: bool,
) -> tuple[list[Chunk], SpanDocument | None]:
    """:func:`pending_chunks`, and with ``late`` the document their vectors are pooled from."""
    pending = pending_messages(conn, dataset, thread_id, messages, end_sequence)
    if not late:
        return make_chunks(pending), None
    return chunk_document(pending)


def _vectors(
    chunks: Sequence[Chunk], documents: Sequence[SpanDocument | None], embedder: Embedder
) -> np.ndarray:
    """The vectors of ``chunks``: late (pooled from ``documents``, whose spans are the
    chunks in order) when there are documents, else each chunk's text embedded."""
    late = [d for d in documents if d is not None]
    if late:
        return late_chunk_vectors(late, embedder)
    return chunk_vectors(chunks, embedder)


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


def _document(source: IndexInput) -> tuple[str, str]:
    """The episode's lexical document as (body, head): the thread's messages up to its end
    (the newest MAX_INDEXED_CHARS), and its head (:func:`head_text`, weight A)."""
    body = "\n".join(m[1] for m in source.messages if m[0] <= source.end_sequence)
    return body[-MAX_INDEXED_CHARS:], head_text(source)


class LanguageSwitching(Exception):
    """The dataset's language is being switched right now (``set_language`` holds its
    language lock exclusively, re-stemming what is stored: minutes on a large dataset);
    raised by :func:`dataset_config` with ``wait=False`` instead of waiting for it."""

    def __init__(self, dataset: str) -> None:
        super().__init__(f"the language of dataset {dataset!r} is being switched")
        self.dataset = dataset


def dataset_config(
    conn: Connection, dataset: str, *, for_write: bool = False, wait: bool = True
) -> str:
    """The dataset's text-search configuration ('english' for a dataset not registered yet).

    ``for_write``: read to write what was stemmed in it. The dataset's language lock
    (:func:`hold_language`) is held shared until the caller's transaction ends, so
    :func:`episodic.store.languages.set_language` (which holds it exclusively while it
    re-stems what is stored) runs wholly before or after the write. A writer that stemmed
    its text outside the transaction compares this with the configuration it read then,
    and stems again when they differ: otherwise a language detected or set meanwhile would
    leave its rows in the old one. Take it before the dataset's row lock
    (:meth:`~episodic.store.vault.Vault.for_write`) and the thread's and the episodes'
    (set_language takes the dataset's row last, and updates episodes while it holds the
    lock). The row is also read ``FOR KEY SHARE``: it cannot be deleted underneath (a lock
    that waits for no update of the row, and that no update waits for).

    ``wait=False`` (background work that has other datasets to get on with): raises
    :class:`LanguageSwitching` at once when a switch holds (or waits for) the lock."""
    if for_write and not hold_language(conn, dataset, exclusive=False, wait=wait):
        raise LanguageSwitching(dataset)
    value = conn.execute(
        text(
            "SELECT text_search_config FROM datasets WHERE dataset = :d"
            + (" FOR KEY SHARE" if for_write else "")
        ),
        {"d": dataset},
    ).scalar()
    return str(value) if value else TEXT_SEARCH_CONFIG


def hold_language(conn: Connection, dataset: str, *, exclusive: bool, wait: bool = True) -> bool:
    """Takes the dataset's language lock until the transaction ends: shared by whatever
    writes stemmed text (:func:`dataset_config` with ``for_write``, RecordEvent),
    exclusive by a language switch (``set_language``). Not the dataset's row: a switch
    re-stems for minutes on a large dataset, and the row's lock would hold up every
    writer of the dataset meanwhile (CreateThread, the dataset's key) instead of only those
    that stem. ``wait=False``: only if it is free now; returns whether it was taken."""
    lock = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
    if not wait:
        lock = lock.replace("pg_advisory", "pg_try_advisory")
    taken = conn.execute(
        text(f"SELECT {lock}(:space, hashtext(:d))"),
        {"space": LANGUAGE_LOCK_SPACE, "d": dataset},
    ).scalar()
    return taken is not False


def prepare_episode_document(
    conn: Connection, key: DatasetKey, source: IndexInput
) -> tuple[str, int]:
    """The blinded tsvector literal of the episode's lexical document and its length (no
    embedding: cheap; the summariser writes it in the completion transaction)."""
    return _with_speaker_words(conn, key, source, blind_vectors(conn, key, [_document(source)])[0])


def prepare_episode_documents(
    conn: Connection,
    key: DatasetKey,
    sources: Sequence[IndexInput],
    *,
    config: str | None = None,
) -> list[tuple[str, int]]:
    """:func:`prepare_episode_document` of many episodes, stemmed in one statement (in
    ``config`` when given, else the dataset's configuration)."""
    documents = blind_vectors(conn, key, [_document(s) for s in sources], config=config)
    return [
        _with_speaker_words(conn, key, s, d, config=config)
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


def _with_speaker_words(
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


def prepare_episode_index(
    conn: Connection,
    key: DatasetKey,
    source: IndexInput,
    embedder: Embedder,
    *,
    late: bool = False,
) -> PreparedIndex:
    """Embeds the thread's messages that no chunk covers yet and builds the blinded
    lexical vectors of those chunks and of the episode's document. Needs no transaction
    and holds no lock; :func:`write_episode_index` stores the result. ``late``: the chunks'
    vectors by late chunking (:func:`late_chunk_vectors`)."""
    chunks, document = _new_chunks(
        conn, source.dataset, source.thread_id, source.messages, source.end_sequence, late=late
    )
    vectors = _vectors(chunks, [document], embedder)
    literals = blind_vectors(conn, key, [_document(source)] + [(c.text, "") for c in chunks])
    literals[0] = _with_speaker_words(conn, key, source, literals[0])
    return PreparedIndex(
        episode_id=source.episode_id,
        thread_id=source.thread_id,
        dataset=source.dataset,
        chunks=chunks,
        vectors=vectors,
        chunk_vectors=[v for v, _ in literals[1:]],
        chunk_lengths=[n for _, n in literals[1:]],
        document=literals[0][0],
        document_length=literals[0][1],
    )


def _insert_chunks(
    conn: Connection,
    dataset: str,
    thread_id: uuid.UUID,
    chunks: Sequence[Chunk],
    vectors: np.ndarray,
    tsvs: Sequence[str],
    lengths: Sequence[int],
) -> int:
    """Stores chunks, skipping any already stored (they are keyed by thread and position)."""
    if not chunks:
        return 0
    return conn.execute(
        text(
            """
            INSERT INTO message_chunks (thread_id, start_sequence, start_offset,
                end_sequence, dataset, embedding, search_vector, search_length)
            SELECT :t, u.s, u.o, u.e, :dataset, u.v, u.tsv, u.n
            FROM unnest(CAST(:starts AS bigint[]), CAST(:offsets AS integer[]),
                        CAST(:ends AS bigint[]), CAST(:vectors AS vector[]),
                        CAST(:tsvs AS tsvector[]), CAST(:lengths AS integer[]))
                 AS u(s, o, e, v, tsv, n)
            ON CONFLICT DO NOTHING
            """
        ),
        {
            "t": thread_id,
            "dataset": dataset,
            "starts": [c.start_sequence for c in chunks],
            "offsets": [c.start_offset for c in chunks],
            "ends": [c.end_sequence for c in chunks],
            "vectors": list(vectors),
            "tsvs": list(tsvs),
            "lengths": list(lengths),
        },
    ).rowcount


def write_episode_index(conn: Connection, prepared: PreparedIndex) -> IndexResult:
    """Stores prepared chunks (skipping any already stored) and the episode's lexical
    document, all at once (:func:`index_episode`)."""
    added = _insert_chunks(
        conn,
        prepared.dataset,
        prepared.thread_id,
        prepared.chunks,
        prepared.vectors,
        prepared.chunk_vectors,
        prepared.chunk_lengths,
    )
    write_episode_document(
        conn, prepared.dataset, prepared.episode_id, prepared.document, prepared.document_length
    )
    return IndexResult(
        episode_id=prepared.episode_id,
        chunks_added=added,
        search_length=prepared.document_length,
    )


# ---- the deferred chunk index --------------------------------------------------------------


@dataclass(frozen=True)
class ChunkWork:
    """A completed episode whose thread's new chunks are still to be indexed
    (``episodes.chunks_pending``), with what indexing them needs."""

    episode_id: uuid.UUID
    thread_id: uuid.UUID
    dataset: str
    end_sequence: int
    messages: Sequence[tuple[int, str]]  # (sequence, indexed text), in sequence order
    key: DatasetKey


def index_pending_chunks(
    engine: Engine,
    embedders: DatasetEmbedders | Embedder,
    work: Sequence[ChunkWork],
    *,
    late: bool = False,
) -> int:
    """Embeds and stores the new chunks of the episodes in ``work`` and clears their
    ``chunks_pending``; returns the chunks added. ``embedders``: each dataset's chunks go
    through its own model (an Embedder alone: every dataset's). ``late``: their vectors by
    late chunking (:func:`late_chunk_vectors`, one document per episode) where the model
    can (token access: MiniLM).

    All the episodes' chunks are embedded in one model call per model, outside any
    transaction; an episode whose dataset moved to another model meanwhile keeps its mark
    (indexed again by the next pass, in the new model). Each
    episode is then stored in its own short transaction, which first takes the thread's
    row ``FOR KEY SHARE`` (the lock the chunks' foreign key takes anyway: before the
    episode's row, so it cannot deadlock with a completion, which locks the thread and then
    the thread's episodes) and clears the mark; no mark (the episode was erased meanwhile,
    or another worker indexed it) means nothing is written. Idempotent: chunks are keyed
    by thread and position. Two windows of one thread are indexed one after the other, so
    the later one's chunks are cut after the earlier one's are stored, as if each had been
    indexed when it completed.
    """
    if not isinstance(embedders, DatasetEmbedders):
        embedders = DatasetEmbedders(embedders)
    added = 0
    remaining = sorted(work, key=lambda w: w.end_sequence)
    while remaining:
        this_round: list[ChunkWork] = []
        later: list[ChunkWork] = []
        threads: set[tuple[str, uuid.UUID]] = set()
        for item in remaining:
            (later if (item.dataset, item.thread_id) in threads else this_round).append(item)
            threads.add((item.dataset, item.thread_id))
        with engine.connect() as conn:
            models = [embedding_space.dataset_model(conn, w.dataset) for w in this_round]
            cut = [
                _new_chunks(
                    conn,
                    w.dataset,
                    w.thread_id,
                    w.messages,
                    w.end_sequence,
                    late=late and token_access(embedders.get(model)),
                )
                for w, model in zip(this_round, models, strict=True)
            ]
            chunks = [cs for cs, _ in cut]
            stemmed_in = [dataset_config(conn, w.dataset) for w in this_round]
            literals = [
                blind_vectors(conn, w.key, [(c.text, "") for c in cs])
                for w, cs in zip(this_round, chunks, strict=True)
            ]
        vectors: list[np.ndarray] = [np.zeros((0, 0), dtype=np.float32)] * len(this_round)
        for model in dict.fromkeys(models):  # one model call per model, in first-seen order
            mine = [i for i, m in enumerate(models) if m == model]
            together = _vectors(
                [c for i in mine for c in chunks[i]],
                [cut[i][1] for i in mine],
                embedders.get(model),
            )
            start = 0
            for i in mine:
                vectors[i] = together[start : start + len(chunks[i])]
                start += len(chunks[i])
        for item, cs, lits, config, model, own in zip(
            this_round, chunks, literals, stemmed_in, models, vectors, strict=True
        ):
            with engine.begin() as conn:
                # The dataset's language changed since they were stemmed: stem them again.
                # Without waiting for a language switch (LanguageSwitching): the caller
                # leaves the marks, and the episodes are indexed once it is over.
                if config != dataset_config(conn, item.dataset, for_write=True, wait=False):
                    lits = blind_vectors(conn, item.key, [(c.text, "") for c in cs])
                if model != embedding_space.dataset_model(conn, item.dataset):
                    continue  # embedded in a model the dataset left meanwhile: mark kept
                conn.execute(
                    text(
                        "SELECT 1 FROM threads WHERE dataset = :d AND thread_id = :t FOR KEY SHARE"
                    ),
                    {"d": item.dataset, "t": item.thread_id},
                )
                marked = conn.execute(
                    text(
                        "UPDATE episodes SET chunks_pending = false WHERE dataset = :d "
                        "AND episode_id = :id AND chunks_pending RETURNING episode_id"
                    ),
                    {"d": item.dataset, "id": item.episode_id},
                ).first()
                if marked is not None:
                    added += _insert_chunks(
                        conn,
                        item.dataset,
                        item.thread_id,
                        cs,
                        own,
                        [v for v, _ in lits],
                        [n for _, n in lits],
                    )
        remaining = later
    return added


#: How many times :func:`take_chunk_work` takes an episode's chunk index up again before it
#: gives it up: a window whose indexing kills the worker (out of memory, a crash in the
#: model) would otherwise be taken up on every restart, a crash loop (issue 49). The pass
#: that completed the episode tries first, so the chunks get this many tries and one more.
MAX_CHUNK_ATTEMPTS = 3

CHUNKS_ABANDONED_ERROR = (
    "chunk index given up after {attempts} attempts (each ended without storing it: a "
    "worker stopped, crashed or failed); the episode is recalled by its summary, and the "
    "thread's next episode indexes these messages with its own."
)


@dataclass(frozen=True)
class TakenChunkWork:
    """What :func:`take_chunk_work` took: the work to do now, and the episodes whose chunk
    index it gave up (their attempts used up)."""

    work: list[ChunkWork]
    abandoned: list[uuid.UUID]


def take_chunk_work(
    conn: Connection,
    vault: Vault,
    *,
    completed_before: Any,
    retake_before: Any,
    limit: int,
    now: Any = None,
) -> TakenChunkWork:
    """Takes up to ``limit`` episodes left marked ``chunks_pending`` that completed before
    ``completed_before`` (a worker that stopped between completing them and indexing their
    chunks; the grace keeps a live worker's own episodes out) and that nobody took or held
    (:func:`hold_chunk_work`) since ``retake_before``, oldest first, with their thread's messages read and opened.

    Each take counts (``chunk_attempts``) and is stamped (``chunk_attempted_at``), so two
    workers do not index one episode at once, and an episode past
    :data:`MAX_CHUNK_ATTEMPTS` has its mark cleared and its ``error`` set instead of being
    taken again. The caller commits before it embeds anything: a worker killed while
    indexing has counted its attempt."""
    rows = (
        conn.execute(
            text(
                across_datasets("the Summariser resumes chunk indexes left pending, any dataset")
                + "SELECT episode_id, thread_id, dataset, end_sequence FROM episodes "
                "WHERE chunks_pending AND completed_at < :before "
                "AND (chunk_attempted_at IS NULL OR chunk_attempted_at < :retake) "
                "ORDER BY completed_at LIMIT :n"
            ),
            {"before": completed_before, "retake": retake_before, "n": limit},
        )
        .mappings()
        .all()
    )
    taken: list[RowMapping] = []
    abandoned: list[uuid.UUID] = []
    for row in rows:
        # The take itself names the dataset (one shard on Citus), and only one of two
        # workers that read the same row gets it.
        attempts = conn.execute(
            text(
                "UPDATE episodes SET chunk_attempts = chunk_attempts + 1, "
                f"chunk_attempted_at = {NOW} "
                "WHERE dataset = :d AND episode_id = :id AND chunks_pending "
                "AND (chunk_attempted_at IS NULL OR chunk_attempted_at < :retake) "
                "RETURNING chunk_attempts"
            ),
            {"d": row["dataset"], "id": row["episode_id"], "retake": retake_before, "now": now},
        ).scalar()
        if attempts is None:
            continue
        if attempts > MAX_CHUNK_ATTEMPTS:
            conn.execute(
                text(
                    "UPDATE episodes SET chunks_pending = false, error = :error "
                    "WHERE dataset = :d AND episode_id = :id"
                ),
                {
                    "d": row["dataset"],
                    "id": row["episode_id"],
                    "error": CHUNKS_ABANDONED_ERROR.format(attempts=attempts - 1),
                },
            )
            abandoned.append(row["episode_id"])
            continue
        taken.append(row)
    return TakenChunkWork(work=_chunk_work(conn, vault, taken), abandoned=abandoned)


def hold_chunk_work(conn: Connection, work: Sequence[ChunkWork], now: Any = None) -> int:
    """Stamps ``chunk_attempted_at`` on the episodes whose chunk index a live worker owes
    (its backlog), without counting an attempt: :func:`take_chunk_work` of other workers
    keeps off them for its grace. The owner's heartbeat calls it, so a backlog that waits
    long behind other datasets' episodes is not taken for a stopped worker's (and counted
    towards its abandonment); a worker that is gone stops stamping, and the grace later
    its work is taken. Per dataset: one shard each on Citus. Returns the rows stamped."""
    by_dataset: dict[str, list[uuid.UUID]] = {}
    for item in work:
        by_dataset.setdefault(item.dataset, []).append(item.episode_id)
    held = 0
    for dataset, ids in sorted(by_dataset.items()):
        held += conn.execute(
            text(
                f"UPDATE episodes SET chunk_attempted_at = {NOW} "
                "WHERE dataset = :d AND episode_id = ANY(:ids) AND chunks_pending"
            ),
            {"d": dataset, "ids": sorted(ids), "now": now},
        ).rowcount
    return held


def _chunk_work(conn: Connection, vault: Vault, rows: Sequence[RowMapping]) -> list[ChunkWork]:
    """The :class:`ChunkWork` of taken episodes: their threads' messages that no stored
    chunk covers, read and opened."""
    out: list[ChunkWork] = []
    for row in rows:
        # Only what no stored chunk covers (what pending_messages keeps): a long thread's
        # older messages are never read again (issue 49: a pass resumed over a whole
        # 133,000-message thread reached ~23 GB).
        messages = (
            conn.execute(
                text(
                    "SELECT sequence, content, metadata, tools FROM messages WHERE dataset = :d "
                    "AND thread_id = :t AND sequence <= :end AND sequence > ("
                    "  SELECT coalesce(max(end_sequence), 0) FROM message_chunks "
                    "  WHERE dataset = :d AND thread_id = :t) "
                    "ORDER BY sequence"
                ),
                {"d": row["dataset"], "t": row["thread_id"], "end": row["end_sequence"]},
            )
            .mappings()
            .all()
        )
        opened = vault.open_rows(conn, row["dataset"], list(messages), "messages")
        out.append(
            ChunkWork(
                episode_id=row["episode_id"],
                thread_id=row["thread_id"],
                dataset=row["dataset"],
                end_sequence=row["end_sequence"],
                messages=[
                    (m["sequence"], indexed_text(m["content"], m["metadata"], m["tools"]))
                    for m in opened
                ],
                key=vault.for_read(conn, row["dataset"]),
            )
        )
    return out


def load_index_input(conn: Connection, vault: Vault, episode_id: uuid.UUID | str) -> IndexInput:
    """Reads (and opens) what :func:`prepare_episode_index` needs from the database: for
    an episode whose summary is stored (backfills, tests); the summariser passes what it
    has in hand instead."""
    episode_uuid = uuid.UUID(str(episode_id))
    row = (
        conn.execute(
            text(
                "SELECT episode_id, thread_id, dataset, end_sequence, summary, key_learnings, "
                "entities FROM episodes WHERE episode_id = :id"
            ),
            {"id": episode_uuid},
        )
        .mappings()
        .first()
    )
    if row is None:
        raise NotFound(f"episode {episode_uuid} does not exist", episode_id=str(episode_uuid))
    episode = vault.open_one(conn, row, "episodes")
    rows = (
        conn.execute(
            text(
                "SELECT sequence, content, metadata, tools FROM messages "
                "WHERE dataset = :d AND thread_id = :t AND sequence <= :end ORDER BY sequence"
            ),
            {"d": row["dataset"], "t": row["thread_id"], "end": row["end_sequence"]},
        )
        .mappings()
        .all()
    )
    messages = vault.open_rows(conn, row["dataset"], list(rows), "messages")
    return _index_input(episode, messages)


def load_index_inputs(
    conn: Connection, vault: Vault, dataset: str, episode_ids: Sequence[uuid.UUID]
) -> list[IndexInput]:
    """:func:`load_index_input` for many episodes of ``dataset`` in two statements;
    episodes no longer there (erased or purged since their ids were read) are left out."""
    episodes = vault.open_rows(
        conn,
        dataset,
        list(
            conn.execute(
                text(
                    "SELECT episode_id, thread_id, dataset, end_sequence, summary, "
                    "key_learnings, entities FROM episodes "
                    "WHERE dataset = :d AND episode_id = ANY(CAST(:ids AS uuid[]))"
                ),
                {"d": dataset, "ids": list(episode_ids)},
            ).mappings()
        ),
        "episodes",
    )
    if not episodes:
        return []
    rows = conn.execute(
        text(
            "SELECT w.i, m.sequence, m.content, m.metadata "
            "FROM unnest(CAST(:threads AS uuid[]), CAST(:ends AS bigint[])) "
            "WITH ORDINALITY AS w(t, e, i) "
            "JOIN messages m ON m.dataset = :d AND m.thread_id = w.t AND m.sequence <= w.e "
            "ORDER BY w.i, m.sequence"
        ),
        {
            "d": dataset,
            "threads": [e["thread_id"] for e in episodes],
            "ends": [e["end_sequence"] for e in episodes],
        },
    ).mappings()
    windows: dict[int, list[dict[str, Any]]] = {}  # episode's place (1-based) → messages
    for message in vault.open_rows(conn, dataset, list(rows), "messages"):
        windows.setdefault(int(message["i"]), []).append(message)
    return [_index_input(e, windows.get(i, [])) for i, e in enumerate(episodes, 1)]


def _index_input(episode: Any, messages: Sequence[Any]) -> IndexInput:
    """An :class:`IndexInput` of an opened episode row and its thread's opened messages."""
    return IndexInput(
        episode_id=uuid.UUID(str(episode["episode_id"])),
        thread_id=episode["thread_id"],
        dataset=episode["dataset"],
        end_sequence=episode["end_sequence"],
        messages=[
            (m["sequence"], indexed_text(m["content"], m["metadata"], m.get("tools")))
            for m in messages
        ],
        summary=episode["summary"],
        key_learnings=list(episode["key_learnings"] or []),
        entities=list(episode["entities"] or []),
        speakers=message_speakers(messages),
    )


def message_speakers(messages: Sequence[Any]) -> list[tuple[int, str]]:
    """(sequence, speaker) of the opened ``messages`` rows whose metadata names one."""
    out = []
    for m in messages:
        speaker = speaker_from_metadata(m.get("metadata"))
        if speaker:
            out.append((int(m["sequence"]), speaker))
    return out


def index_episode(
    conn: Connection,
    vault: Vault,
    episode_id: uuid.UUID | str,
    embedder: Embedder,
    *,
    late: bool = False,
) -> IndexResult:
    """Indexes an episode whose summary is stored: :func:`load_index_input`,
    :func:`prepare_episode_index` and :func:`write_episode_index` on one connection.

    Contract:

    - The summariser does the same in two halves: it prepares from what it has in hand
      before the completion transaction and writes inside it, after the summary.
    - It embeds, with ``embedder`` (of the schema's dimension), the thread's messages up to
      ``end_sequence`` that no chunk covers yet: normally just the episode's window (the
      first call on an older thread also covers its earlier windows).
    - Idempotent: chunks are keyed by thread and position (``ON CONFLICT DO NOTHING``) and
      the lexical document is rewritten; a rolled-back transaction leaves nothing behind.
    - Raises NotFound for an unknown episode and ProviderError when the embedder fails.
    """
    source = load_index_input(conn, vault, episode_id)
    key = vault.for_read(conn, source.dataset)
    return write_episode_index(conn, prepare_episode_index(conn, key, source, embedder, late=late))


def index_missing(
    engine: Engine,
    embedders: DatasetEmbedders | Embedder,
    vault: Vault,
    *,
    batch: int = 20,
    late: bool = False,
) -> int:
    """Indexes every completed episode that has no lexical document yet (episodes completed
    before the summariser indexed them, or after a change of the index); returns how many.
    Each batch is its own transaction; embedding happens outside it.

    ``embedders``: each dataset's chunks go through its own model (``datasets.
    embedding_model``, as :func:`index_pending_chunks`; an Embedder alone: every dataset's);
    FailedPrecondition for a dataset whose model this process does not run. ``late``: late
    chunking where that model can. A dataset whose model (or language) changed between the
    embedding and the write is prepared again under its language lock."""
    if not isinstance(embedders, DatasetEmbedders):
        embedders = DatasetEmbedders(embedders)

    def prepare(conn: Connection, key: DatasetKey, source: IndexInput) -> PreparedIndex:
        embedder = embedders.get(embedding_space.dataset_model(conn, source.dataset))
        return prepare_episode_index(
            conn, key, source, embedder, late=late and token_access(embedder)
        )

    done = 0
    while True:
        with engine.connect() as conn:
            ids = list(
                conn.execute(
                    text(
                        "SELECT episode_id FROM episodes WHERE status = 'completed' "
                        "AND search_vector IS NULL ORDER BY ended_at DESC LIMIT :n"
                    ),
                    {"n": batch},
                ).scalars()
            )
            prepared = []
            for episode_id in ids:
                source = load_index_input(conn, vault, episode_id)
                key = vault.for_read(conn, source.dataset)
                config = dataset_config(conn, source.dataset)
                model = embedding_space.dataset_model(conn, source.dataset)
                prepared.append((source, key, (config, model), prepare(conn, key, source)))
        if not ids:
            return done
        with engine.begin() as conn:
            # The datasets' languages held first (in one order), then each episode stemmed
            # and embedded again if its dataset's language or model changed since (see
            # dataset_config's for_write; a dataset's model moves under that lock).
            now = {
                d: (
                    dataset_config(conn, d, for_write=True),
                    embedding_space.dataset_model(conn, d),
                )
                for d in sorted({source.dataset for source, _, _, _ in prepared})
            }
            for source, key, then, item in prepared:
                if now[source.dataset] != then:
                    item = prepare(conn, key, source)
                write_episode_index(conn, item)
        done += len(ids)
