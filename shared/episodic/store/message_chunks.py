"""The chunks of recall's index: a thread's messages cut into overlapping runs
(:data:`CHUNK_MESSAGES` messages / :data:`CHUNK_WORDS` words, the embedder's window), their
vectors (each chunk's own text embedded, or pooled from its tokens by late chunking), the
messages no stored chunk covers yet, and the statement that stores chunks.

Split out of :mod:`episodic.store.recall_index` (issue 42): how a thread is cut and
embedded is measured and changed on its own (docs/benchmarks.md), apart from the lexical
document and the deferred chunk work that call it; :mod:`episodic.store.recall_index`
re-exports it. :data:`CHUNK_MESSAGES` and :data:`CHUNK_OVERLAP` are read here: a test or a
benchmark that changes them sets them on this module.
"""

from __future__ import annotations

import uuid
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import Connection, text

from episodic.providers.types import SpanDocument

if TYPE_CHECKING:
    from episodic.providers.types import Embedder

__all__ = [
    "CHUNK_MESSAGES",
    "CHUNK_OVERLAP",
    "CHUNK_WORDS",
    "Chunk",
    "chunk_document",
    "chunk_texts",
    "chunk_vectors",
    "insert_chunks",
    "late_chunk_vectors",
    "make_chunks",
    "new_chunks",
    "pending_chunks",
    "pending_messages",
    "vectors_of_chunks",
]

#: A chunk holds at most this many consecutive messages…
CHUNK_MESSAGES = 4
#: …and at most this many words (all-MiniLM-L6-v2 reads 256 word pieces, ~190 words).
CHUNK_WORDS = 180
#: Whether each chunk starts half-way through the previous one (every message embedded in
#: two chunks, so a fact told across two messages is seen whole once) or right after it
#: (every message embedded once: half the model time of the index). Measured alone on
#: LoCoMo (docs/benchmarks.md "Summariser, fourth pass"); changing it needs a re-index.
CHUNK_OVERLAP = True


@dataclass(frozen=True)
class Chunk:
    """A run of consecutive message pieces: from word ``start_offset`` of message
    ``start_sequence`` to the end of the piece in message ``end_sequence``."""

    start_sequence: int
    start_offset: int
    end_sequence: int
    text: str


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


def new_chunks(
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


def vectors_of_chunks(
    chunks: Sequence[Chunk], documents: Sequence[SpanDocument | None], embedder: Embedder
) -> np.ndarray:
    """The vectors of ``chunks``: late (pooled from ``documents``, whose spans are the
    chunks in order) when there are documents, else each chunk's text embedded."""
    late = [d for d in documents if d is not None]
    if late:
        return late_chunk_vectors(late, embedder)
    return chunk_vectors(chunks, embedder)


def insert_chunks(
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
