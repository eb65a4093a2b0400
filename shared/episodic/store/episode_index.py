"""An episode's whole index at once: prepared (chunks embedded, lexemes blinded, no
transaction) and written (chunks and document, in the caller's transaction), read from the
database for an episode whose summary is stored (:func:`load_index_input`,
:func:`index_episode`), and the backfill of every completed episode that has none
(:func:`index_missing`).

Split out of :mod:`episodic.store.recall_index` (issue 42): it composes the chunks
(:mod:`episodic.store.message_chunks`) and the lexical document
(:mod:`episodic.store.lexical_document`) for backfills, replays, the language switch and
the tests, while the summariser writes the two halves itself;
:mod:`episodic.store.recall_index` re-exports it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Connection, Engine, text

from episodic.errors import NotFound
from episodic.providers.dataset_embedders import DatasetEmbedders
from episodic.providers.embedding import token_access
from episodic.providers.types import speaker_from_metadata
from episodic.store import embedding_space
from episodic.store.index_language import dataset_config
from episodic.store.lexical_document import (
    IndexInput,
    blind_vectors,
    episode_document,
    indexed_text,
    with_speaker_words,
    write_episode_document,
)
from episodic.store.message_chunks import Chunk, insert_chunks, new_chunks, vectors_of_chunks
from episodic.store.vault import Vault

if TYPE_CHECKING:
    from episodic.crypto import DatasetKey
    from episodic.providers.types import Embedder

__all__ = [
    "IndexResult",
    "PreparedIndex",
    "index_episode",
    "index_missing",
    "load_index_input",
    "load_index_inputs",
    "message_speakers",
    "prepare_episode_index",
    "write_episode_index",
]


@dataclass(frozen=True)
class IndexResult:
    """What :func:`index_episode` wrote."""

    episode_id: uuid.UUID
    chunks_added: int
    search_length: int


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
    chunks, document = new_chunks(
        conn, source.dataset, source.thread_id, source.messages, source.end_sequence, late=late
    )
    vectors = vectors_of_chunks(chunks, [document], embedder)
    literals = blind_vectors(conn, key, [episode_document(source)] + [(c.text, "") for c in chunks])
    literals[0] = with_speaker_words(conn, key, source, literals[0])
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


def write_episode_index(conn: Connection, prepared: PreparedIndex) -> IndexResult:
    """Stores prepared chunks (skipping any already stored) and the episode's lexical
    document, all at once (:func:`index_episode`)."""
    added = insert_chunks(
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
