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
  their embedding and tsvector (for passage-level BM25: the best passage of a long thread
  matters more than the thread's average), keyed by thread and position, so they outlive
  the episode that wrote them: the next episode of the thread only embeds its own window
  and reuses the rest.

The summariser calls :func:`index_episode` in the transaction that completes the episode.
Recall works without it (the summary's embedding and text stand in), only less well.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Connection, Engine, text

from episodic.errors import NotFound
from episodic.providers.types import speaker_from_metadata

if TYPE_CHECKING:
    from episodic.providers.types import Embedder

__all__ = [
    "CHUNK_MESSAGES",
    "CHUNK_WORDS",
    "MAX_INDEXED_CHARS",
    "TEXT_SEARCH_CONFIG",
    "Chunk",
    "IndexResult",
    "PreparedIndex",
    "index_episode",
    "index_missing",
    "indexed_text",
    "make_chunks",
    "prepare_episode_index",
    "write_episode_index",
]

#: PostgreSQL text search configuration of the lexical index and of queries (they must
#: agree). 'english' stems and drops stop words; other languages still match word for word.
TEXT_SEARCH_CONFIG = "english"
#: A chunk holds at most this many consecutive messages…
CHUNK_MESSAGES = 4
#: …and at most this many words (all-MiniLM-L6-v2 reads 256 word pieces, ~190 words).
CHUNK_WORDS = 180
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
    chunks and a fact split across two messages is still seen whole once.
    """
    pieces = _pieces(messages)
    chunks: list[Chunk] = []
    i = 0
    while i < len(pieces):
        j, words = i, 0
        while j < len(pieces) and j - i < CHUNK_MESSAGES:
            if j > i and words + pieces[j][3] > CHUNK_WORDS:
                break
            words += pieces[j][3]
            j += 1
        chunks.append(
            Chunk(
                start_sequence=pieces[i][0],
                start_offset=pieces[i][1],
                end_sequence=pieces[j - 1][0],
                text="\n".join(p[2] for p in pieces[i:j]),
            )
        )
        if j >= len(pieces):
            break
        i += max(1, (j - i) // 2)
    return chunks


def indexed_text(content: str, metadata: Any = None) -> str:
    """The text of a message as indexed: ``"<speaker>: <content>"`` when the message names
    its speaker, else the content."""
    speaker = speaker_from_metadata(metadata)
    return f"{speaker}: {content}" if speaker else content


# The same rule in SQL, for the lexical document built inside the database.
_SQL_SPEAKER = (
    "coalesce(CASE WHEN jsonb_typeof(m.metadata->'name') = 'string' "
    "AND btrim(m.metadata->>'name') <> '' THEN btrim(m.metadata->>'name') || ': ' END, "
    "CASE WHEN jsonb_typeof(m.metadata->'speaker') = 'string' "
    "AND btrim(m.metadata->>'speaker') <> '' THEN btrim(m.metadata->>'speaker') || ': ' END, "
    "'')"
)


@dataclass(frozen=True)
class PreparedIndex:
    """The slow half of indexing (chunks embedded), ready to be written."""

    episode_id: uuid.UUID
    thread_id: uuid.UUID
    dataset: str
    chunks: list[Chunk]
    vectors: np.ndarray


def prepare_episode_index(
    conn: Connection, episode_id: uuid.UUID | str, embedder: Embedder
) -> PreparedIndex:
    """Reads the thread's messages up to the episode's ``end_sequence`` that no chunk covers
    yet and embeds them. Needs no transaction and holds no lock, so the summariser can run
    it next to its other slow work; :func:`write_episode_index` stores the result."""
    episode_uuid = uuid.UUID(str(episode_id))
    row = (
        conn.execute(
            text("SELECT thread_id, dataset, end_sequence FROM episodes WHERE episode_id = :id"),
            {"id": episode_uuid},
        )
        .mappings()
        .first()
    )
    if row is None:
        raise NotFound(f"episode {episode_uuid} does not exist", episode_id=str(episode_uuid))
    covered = conn.execute(
        text("SELECT coalesce(max(end_sequence), 0) FROM message_chunks WHERE thread_id = :t"),
        {"t": row["thread_id"]},
    ).scalar_one()
    messages = conn.execute(
        text(
            "SELECT sequence, content, metadata FROM messages WHERE thread_id = :t "
            "AND sequence > :covered AND sequence <= :end ORDER BY sequence"
        ),
        {"t": row["thread_id"], "covered": covered, "end": row["end_sequence"]},
    ).all()
    chunks = make_chunks([(m[0], indexed_text(m[1], m[2])) for m in messages])
    vectors = (
        embedder.embed([c.text for c in chunks])
        if chunks
        else np.zeros((0, embedder.dimension), dtype=np.float32)
    )
    return PreparedIndex(episode_uuid, row["thread_id"], row["dataset"], chunks, vectors)


def write_episode_index(conn: Connection, prepared: PreparedIndex) -> IndexResult:
    """Stores prepared chunks (skipping any already stored) and rebuilds the episode's
    lexical document from its current summary, key learnings and the thread's messages.
    Run it in the completion transaction, after the summary is written."""
    added = 0
    if prepared.chunks:
        added = conn.execute(
            text(
                f"""
                INSERT INTO message_chunks (thread_id, start_sequence, start_offset,
                    end_sequence, dataset, embedding, search_vector, search_length)
                SELECT :t, u.s, u.o, u.e, :dataset, u.v, tv.v,
                       (SELECT coalesce(sum(coalesce(array_length(x.positions, 1), 1)), 0)
                        FROM unnest(tv.v) AS x)
                FROM unnest(CAST(:starts AS bigint[]), CAST(:offsets AS integer[]),
                            CAST(:ends AS bigint[]), CAST(:vectors AS vector[]),
                            CAST(:texts AS text[])) AS u(s, o, e, v, txt)
                CROSS JOIN LATERAL (SELECT to_tsvector('{TEXT_SEARCH_CONFIG}', u.txt) AS v) tv
                ON CONFLICT DO NOTHING
                """
            ),
            {
                "t": prepared.thread_id,
                "dataset": prepared.dataset,
                "starts": [c.start_sequence for c in prepared.chunks],
                "offsets": [c.start_offset for c in prepared.chunks],
                "ends": [c.end_sequence for c in prepared.chunks],
                "vectors": list(prepared.vectors),
                "texts": [c.text for c in prepared.chunks],
            },
        ).rowcount
    # One statement builds the lexical document from the stored messages: no thread text
    # travels to Python and back.
    length = conn.execute(
        text(
            f"""
            WITH doc AS (
                SELECT to_tsvector('{TEXT_SEARCH_CONFIG}', coalesce(right(string_agg(
                           {_SQL_SPEAKER} || m.content, E'\\n' ORDER BY m.sequence),
                           :max_chars), ''))
                       || setweight(to_tsvector('{TEXT_SEARCH_CONFIG}', e.summary || E'\\n' ||
                           coalesce((SELECT string_agg(k, E'\\n')
                                     FROM jsonb_array_elements_text(e.key_learnings) AS k),
                                    '')), 'A') AS v
                FROM episodes e
                LEFT JOIN messages m
                       ON m.thread_id = e.thread_id AND m.sequence <= e.end_sequence
                WHERE e.episode_id = :id
                GROUP BY e.episode_id
            )
            UPDATE episodes e
               SET search_vector = doc.v,
                   search_length = (SELECT coalesce(sum(coalesce(array_length(t.positions, 1),
                                                                 1)), 0)
                                    FROM unnest(doc.v) AS t)
              FROM doc
             WHERE e.episode_id = :id
            RETURNING e.search_length
            """
        ),
        {"id": prepared.episode_id, "max_chars": MAX_INDEXED_CHARS},
    ).scalar_one_or_none()
    if length is None:
        raise NotFound(
            f"episode {prepared.episode_id} does not exist",
            episode_id=str(prepared.episode_id),
        )
    return IndexResult(
        episode_id=prepared.episode_id, chunks_added=added, search_length=int(length)
    )


def index_episode(conn: Connection, episode_id: uuid.UUID | str, embedder: Embedder) -> IndexResult:
    """Indexes an episode for Recall: :func:`prepare_episode_index` then
    :func:`write_episode_index` on the same connection.

    Contract:

    - Call it in the transaction that completes the episode, after the row has its final
      ``summary`` and ``key_learnings`` (before or after ``status = 'completed'``). The
      thread's messages up to ``end_sequence`` are stored by then (Ingest commits messages
      before an episode over them can exist).
    - It embeds, with ``embedder`` (of the schema's dimension), the thread's messages up to
      ``end_sequence`` that no chunk covers yet: normally just the episode's window (the
      first call on an older thread also covers its earlier windows). MiniLM embeds ~30
      chunks a second; to keep that out of the transaction, call
      :func:`prepare_episode_index` before it and :func:`write_episode_index` inside it.
    - Idempotent: chunks are keyed by thread and position (``ON CONFLICT DO NOTHING``) and
      the lexical document is rebuilt; a rolled-back transaction leaves nothing behind.
    - Raises NotFound for an unknown episode and ProviderError when the embedder fails
      (treat it like a failure to embed the summary: retry the episode).
    """
    return write_episode_index(conn, prepare_episode_index(conn, episode_id, embedder))


def index_missing(engine: Engine, embedder: Embedder, *, batch: int = 20) -> int:
    """Indexes every completed episode that has no lexical document yet (episodes completed
    before the summariser indexed them, or after a change of the index); returns how many.
    Each batch is its own transaction; embedding happens outside it."""
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
            prepared = [prepare_episode_index(conn, i, embedder) for i in ids]
        if not ids:
            return done
        with engine.begin() as conn:
            for item in prepared:
                write_episode_index(conn, item)
        done += len(ids)
