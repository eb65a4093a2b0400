"""The chunk index a Summariser worker owes: the completed episodes whose chunks it embeds
after the pass's completions, in groups and slices, yielding to due episodes between
slices (time to memory), holding it against other workers, and resuming what a stopped
pass left.

Split out of :mod:`.pipeline` (issue 42) as :class:`ChunkBacklog`, a part of
:class:`~.pipeline.Pipeline` (its base class; the methods moved verbatim and read the
pipeline's attributes, declared below): the backlog's grouping, slicing and yielding were
tuned on their own (issue 49, docs/benchmarks-history.md). :mod:`.pipeline` re-exports
its constants.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from typing import Any

from opentelemetry import trace
from sqlalchemy import Connection, Engine

from episodic import metrics
from episodic.errors import describe_error
from episodic.providers.dataset_embedders import DatasetEmbedders
from episodic.providers.embedding import CachedEmbedder
from episodic.providers.types import SpanDocument
from episodic.store import embedding_space, episodes
from episodic.store.db import is_database_outage, is_lock_conflict
from episodic.store.recall_index import (
    MAX_CHUNK_ATTEMPTS,
    ChunkWork,
    chunk_document,
    hold_chunk_work,
    index_pending_chunks,
    pending_chunks,
    pending_messages,
    take_chunk_work,
)
from episodic.store.vault import Vault

__all__ = [
    "BACKLOG_GROUP_CHARS",
    "BACKLOG_YIELD_TO_ANY_CHARS",
    "BACKLOG_YIELD_TO_NONE_CHARS",
    "CHARS_PER_TOKEN",
    "YIELD_CHECK_SECONDS",
    "ChunkBacklog",
]

#: The pipeline's logger and tracer: the Pipeline's messages and spans keep their names
#: whichever of its modules writes them.
log = logging.getLogger(__name__.rpartition(".")[0] + ".pipeline")
tracer = trace.get_tracer("episodic.summariser")

#: The deferred chunk index is stored in groups of about this many characters of messages
#: (at least one episode; a thread's windows one group after the other, since a later
#: window's chunks are cut after the earlier one's are stored): what a group embeds is
#: sliced and may yield between slices, and storing it frees its messages. A giant
#: thread's later windows used to be embedded inside the store step, yielding to no one
#: (issue 49: a victim's episode waited 47.9 s behind them).
BACKLOG_GROUP_CHARS = 256 * 1024
#: Below this many characters of messages owed, the chunk index yields to any due episode
#: (time to memory: a dataset's own next episode first). Above it, only to another
#: dataset's: a tenant that wrote more than its index keeps up with waits for its own
#: index, not the others.
BACKLOG_YIELD_TO_ANY_CHARS = 4 * 1024 * 1024
#: Above this many characters owed, the chunk index yields to no one until it is below
#: again: the backlog's messages are held in memory (each pass adds at most a batch of
#: windows, 256 KiB each at most), so this bounds the worker's memory under any load.
BACKLOG_YIELD_TO_NONE_CHARS = 32 * 1024 * 1024
#: The chunk index asks the database whether to yield at most this often (seconds): a giant
#: window is a thousand slices, and a question per slice cost more than the slices.
YIELD_CHECK_SECONDS = 0.05

#: Characters per model token, roughly, for English text through MiniLM's WordPiece: how a
#: slice of the chunk index is sized without tokenising it twice.
CHARS_PER_TOKEN = 4


class ChunkBacklog:
    """The chunk index part of :class:`~.pipeline.Pipeline`: the backlog it owes, indexed
    a group at a time (:meth:`index_backlog`), held (:meth:`hold_backlog`), resumed after
    a stopped pass (:meth:`resume_chunks`)."""

    # Set by Pipeline.__init__.
    engine: Engine
    vault: Vault
    embedder: CachedEmbedder
    embedders: DatasetEmbedders
    index_for_recall: bool
    chunk_grace: timedelta
    chunk_slice_tokens: int
    late_chunks: bool
    backlog_yield_to_any_chars: int
    backlog_yield_to_none_chars: int
    yield_check_seconds: float
    _backlog: list[ChunkWork]
    _backlog_lock: threading.Lock
    _yield_checked_at: float

    def index_backlog(
        self, *, may_yield: bool = True, progress_first: bool = False, now: datetime | None = None
    ) -> bool:
        """Embeds and stores the chunk index this worker owes, a group at a time (see
        :data:`BACKLOG_GROUP_CHARS`), oldest first; returns False when it stopped because
        an episode became due (what it embedded stays in the cache, the rest in the
        backlog). ``progress_first``: embed one slice before the first check."""
        progressed = False
        while True:
            with self._backlog_lock:
                work = list(self._backlog)
            if not work:
                return True
            group = _next_group(work, BACKLOG_GROUP_CHARS)
            if not self._index_group(
                group,
                may_yield=may_yield,
                progress_first=progress_first and not progressed,
                now=now,
            ):
                return False
            progressed = True

    def _index_group(
        self, group: list[ChunkWork], *, may_yield: bool, progress_first: bool, now: datetime | None
    ) -> bool:
        """Embeds ``group``'s chunks slice by slice (through the shared cache), asking
        before each slice whether to yield (:meth:`_should_yield`), then stores them
        (:meth:`index_chunks`, which finds every vector cached) and settles them."""
        try:
            if self.late_chunks:
                # Late chunking: a slice is one or more episodes' documents (each read whole).
                documents = self._uncached_chunk_documents(group)
                slices: Iterator[list[Any]] = _document_slices(documents, self.chunk_slice_tokens)
            else:
                slices = _slices(self._uncached_chunk_texts(group), self.chunk_slice_tokens)
            for i, piece in enumerate(slices):
                if may_yield and (i > 0 or not progress_first) and self._should_yield(now):
                    return False
                with (
                    tracer.start_as_current_span("embed.chunks", attributes={"texts": len(piece)}),
                    metrics.embedding(self.embedder.name, "chunks"),
                ):
                    if self.late_chunks:
                        self.embedder.embed_spans(piece)
                    else:
                        self.embedder.embed(piece)
        except Exception as err:
            if is_database_outage(err):
                raise
            # Left marked chunks_pending: resume_chunks indexes them after the grace.
            log.warning("chunk index of %d episode(s) failed: %s", len(group), describe_error(err))
            self._settle(group)
            return True
        self._settle(group)
        # Every vector is in the cache now (the slices were timed as the model work).
        self.index_chunks(group, timed=False)
        return True

    def hold_backlog(self) -> int:
        """Keeps other workers' :meth:`resume_chunks` off the chunk index this worker owes
        (:func:`~episodic.store.recall_index.hold_chunk_work`); the heartbeat calls it."""
        with self._backlog_lock:
            work = list(self._backlog)
        if not work:
            return 0
        with self.engine.begin() as conn:
            return hold_chunk_work(conn, work)

    def owe(self, work: list[ChunkWork]) -> None:
        """Adds completed episodes' chunk work to the backlog."""
        if not work:
            return
        with self._backlog_lock:
            self._backlog.extend(work)

    def _settle(self, work: list[ChunkWork]) -> None:
        """Takes ``work`` (indexed now, or given up to resume_chunks) off the backlog."""
        done = {id(w) for w in work}
        with self._backlog_lock:
            self._backlog[:] = [w for w in self._backlog if id(w) not in done]

    def _should_yield(self, now: datetime | None) -> bool:
        """Whether the chunk index should stop for a due episode: by how much it owes
        (:data:`BACKLOG_YIELD_TO_ANY_CHARS`, :data:`BACKLOG_YIELD_TO_NONE_CHARS`), to any
        due episode, to another dataset's only, or to none."""
        checked = time.monotonic()
        if checked - self._yield_checked_at < self.yield_check_seconds:
            return False
        self._yield_checked_at = checked
        with self._backlog_lock:
            owed = sum(_chars(w) for w in self._backlog)
            datasets = sorted({w.dataset for w in self._backlog})
        if owed > self.backlog_yield_to_none_chars:
            return False
        with self.engine.connect() as conn:
            if owed <= self.backlog_yield_to_any_chars:
                return episodes.any_due(conn, now)
            return episodes.any_due(conn, now, excluding=datasets)

    def _uncached_chunk_texts(self, work: list[ChunkWork]) -> list[str]:
        """The texts of the backlog's chunks the cache has no vector for, shortest first
        (slices of similar lengths pad little). Only each thread's earliest window: a later
        one is cut after it is stored (index_pending_chunks embeds those itself)."""
        texts: list[str] = []
        with self.engine.connect() as conn:
            for item in self._in_store_model(conn, _earliest_window_per_thread(work)):
                chunks = pending_chunks(
                    conn, item.dataset, item.thread_id, item.messages, item.end_sequence
                )
                texts.extend(c.text for c in chunks)
        missing = (
            self.embedder.uncached(texts)
            if isinstance(self.embedder, CachedEmbedder)
            else list(dict.fromkeys(texts))
        )
        return sorted(missing, key=len)

    def _in_store_model(self, conn: Connection, work: Iterable[ChunkWork]) -> list[ChunkWork]:
        """The items of ``work`` whose dataset is embedded by the store's model: only those
        are embedded ahead in slices (the cache in front of that model); another model's
        (a dataset in another language) are embedded when they are stored."""
        if self.embedders.multilingual is None:
            return list(work)
        return [w for w in work if embedding_space.dataset_model(conn, w.dataset) is None]

    def _uncached_chunk_documents(self, work: list[ChunkWork]) -> list[SpanDocument]:
        """Late chunking's :meth:`_uncached_chunk_texts`: the documents (one per episode,
        each thread's earliest window) the cache has no span vectors for, shortest first."""
        documents: list[SpanDocument] = []
        with self.engine.connect() as conn:
            for item in self._in_store_model(conn, _earliest_window_per_thread(work)):
                pending = pending_messages(
                    conn, item.dataset, item.thread_id, item.messages, item.end_sequence
                )
                if pending:
                    documents.append(chunk_document(pending)[1])
        return sorted(self.embedder.uncached_documents(documents), key=lambda d: len(d.text))

    def index_chunks(self, work: list[ChunkWork], *, timed: bool = True) -> bool:
        """Embeds and stores the chunks of completed episodes (one model call for all) and
        clears their ``chunks_pending``; False when it failed. A provider failure is
        logged and leaves the marks for :meth:`resume_chunks` (the episodes stay
        completed and recallable by their summaries)."""
        if not work:
            return True
        try:
            with (
                tracer.start_as_current_span("index.chunks", attributes={"episodes": len(work)}),
                metrics.embedding(self.embedder.name, "chunks") if timed else nullcontext(),
            ):
                index_pending_chunks(self.engine, self.embedders, work, late=self.late_chunks)
            return True
        except Exception as err:
            # A lock it could not get (a language switch, a held row) is this batch's alone:
            # the marks stay, and resume_chunks indexes them later.
            if is_database_outage(err) and not is_lock_conflict(err):
                raise
            log.warning("chunk index of %d episode(s) failed: %s", len(work), describe_error(err))
            return False

    def resume_chunks(self, limit: int, now: datetime | None = None) -> int:
        """Indexes the chunks of up to ``limit`` episodes that a stopped pass completed but
        did not index (still ``chunks_pending`` ``chunk_grace`` after completing, and not
        taken by another worker for as long); returns how many episodes it indexed. Each
        take is counted and committed first, so a window whose indexing kills the worker
        is given up after :data:`MAX_CHUNK_ATTEMPTS` takes instead of crash-looping it."""
        if not self.index_for_recall:
            return 0
        before = (now or datetime.now(UTC)) - self.chunk_grace
        with self.engine.begin() as conn:
            taken = take_chunk_work(
                conn,
                self.vault,
                completed_before=before,
                retake_before=before,
                limit=limit,
                now=now,
            )
        if taken.abandoned:
            metrics.chunk_indexes_abandoned(len(taken.abandoned))
            log.error(
                "gave up the chunk index of %d episode(s) after %d attempts each: %s",
                len(taken.abandoned),
                MAX_CHUNK_ATTEMPTS,
                ", ".join(str(e) for e in taken.abandoned),
            )
        if not taken.work:
            return 0
        log.info("indexing the chunks of %d episode(s) a stopped pass left", len(taken.work))
        return len(taken.work) if self.index_chunks(taken.work) else 0


def _slices(texts: list[str], tokens: int) -> Iterator[list[str]]:
    """``texts`` (shortest first) in consecutive slices whose padded size (texts x the
    longest, the last) stays within ``tokens`` by a character estimate; at least one text
    each. The embedder packs each slice into its own runs."""
    piece: list[str] = []
    longest = 0  # characters of the piece's longest text
    for t in texts:
        with_t = max(longest, len(t))
        if piece and (len(piece) + 1) * with_t / CHARS_PER_TOKEN > tokens:
            yield piece
            piece, with_t = [], len(t)
        piece.append(t)
        longest = with_t
    if piece:
        yield piece


def _document_slices(documents: list[SpanDocument], tokens: int) -> Iterator[list[SpanDocument]]:
    """``documents`` in consecutive slices of about ``tokens`` tokens by a character
    estimate, at least one document each (a document is read whole)."""
    piece: list[SpanDocument] = []
    size = 0.0
    for document in documents:
        estimate = len(document.text) / CHARS_PER_TOKEN
        if piece and size + estimate > tokens:
            yield piece
            piece, size = [], 0.0
        piece.append(document)
        size += estimate
    if piece:
        yield piece


def _chars(item: ChunkWork) -> int:
    """The characters of messages a backlog entry holds."""
    return sum(len(text) for _, text in item.messages)


def _next_group(work: list[ChunkWork], chars: int) -> list[ChunkWork]:
    """The backlog's next group to store, in backlog order (oldest first): entries that
    are their thread's earliest window owed (a later window's chunks are cut after the
    earlier one's are stored), until about ``chars`` characters (at least one entry)."""
    earliest: dict[tuple[str, Any], ChunkWork] = {}
    for item in work:
        key = (item.dataset, item.thread_id)
        if key not in earliest or item.end_sequence < earliest[key].end_sequence:
            earliest[key] = item
    group: list[ChunkWork] = []
    size = 0
    for item in work:
        if earliest[(item.dataset, item.thread_id)] is not item:
            continue
        if group and size + _chars(item) > chars:
            break
        group.append(item)
        size += _chars(item)
    return group


def _earliest_window_per_thread(work: list[ChunkWork]) -> Iterator[ChunkWork]:
    """The backlog's work items, each thread's earliest window only (in window order): a
    later window's chunks are cut after the earlier one's are stored."""
    threads: set[tuple[str, Any]] = set()
    for item in sorted(work, key=lambda w: w.end_sequence):
        if (item.dataset, item.thread_id) not in threads:
            threads.add((item.dataset, item.thread_id))
            yield item
