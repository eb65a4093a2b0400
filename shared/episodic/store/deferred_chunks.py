"""The deferred chunk index: the episodes marked ``chunks_pending`` whose thread's new
chunks the summariser embeds and stores after completing them (:func:`index_pending_chunks`),
and how a worker takes up (:func:`take_chunk_work`), holds (:func:`hold_chunk_work`) and
at last gives up the ones a stopped or crashed worker left.

Split out of :mod:`episodic.store.recall_index` (issue 42): the marks, the attempts and the
hand-over between workers are a protocol of their own (issue 49), apart from how chunks
are cut and embedded (:mod:`episodic.store.message_chunks`);
:mod:`episodic.store.recall_index` re-exports it. The chunks' vectors are computed by
:func:`~episodic.store.message_chunks.vectors_of_chunks` as this module names it: a test that
replaces it for :func:`index_pending_chunks` sets it on this module.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Connection, Engine, RowMapping, text

from episodic.providers.dataset_embedders import DatasetEmbedders
from episodic.providers.embedding import token_access
from episodic.store import embedding_space
from episodic.store.distribution import across_datasets
from episodic.store.index_language import dataset_config
from episodic.store.lexical_document import blind_vectors, indexed_text
from episodic.store.message_chunks import insert_chunks, new_chunks, vectors_of_chunks
from episodic.store.sql import NOW
from episodic.store.vault import Vault

if TYPE_CHECKING:
    from episodic.crypto import DatasetKey
    from episodic.providers.types import Embedder

__all__ = [
    "CHUNKS_ABANDONED_ERROR",
    "MAX_CHUNK_ATTEMPTS",
    "ChunkWork",
    "TakenChunkWork",
    "hold_chunk_work",
    "index_pending_chunks",
    "take_chunk_work",
]


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
                new_chunks(
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
            together = vectors_of_chunks(
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
                    added += insert_chunks(
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
