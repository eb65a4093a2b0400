"""The Summariser's orchestration: claim pending episodes, summarise and embed them,
complete them, index their chunks; then run semantic extraction over each completed
episode's window.

Every state change is a transition of :mod:`episodic.store.episodes` (claim, complete,
record_failure, release, the semantic claim and finish). What this module adds is the
order and the slow work: the LLM and the embedder run outside any transaction, so a slow
provider holds no locks; the completion re-checks the claim and gives up quietly if the
claim was lost (for example reclaimed as orphaned by the Scheduler).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from opentelemetry import trace
from sqlalchemy import Connection, Engine, RowMapping, text

from episodic import genai, loops, metrics, procedural
from episodic.crypto import DatasetKey
from episodic.errors import ProviderError, describe_error
from episodic.procedural import ProcedureWriter
from episodic.providers.dataset_embedders import DatasetEmbedders
from episodic.providers.embedding import CachedEmbedder, token_access
from episodic.providers.entities import normalise_entities
from episodic.providers.types import (
    ChatMessage,
    Embedder,
    SpanDocument,
    Summariser,
    SummaryRequest,
    SummaryResult,
    speaker_from_metadata,
)
from episodic.store import embedding_space, entities, episodes, languages
from episodic.store import procedures as procedure_store
from episodic.store.db import is_database_outage, is_lock_conflict
from episodic.store.recall_index import (
    MAX_CHUNK_ATTEMPTS,
    MAX_INDEXED_CHARS,
    ChunkWork,
    IndexInput,
    LanguageSwitching,
    chunk_document,
    dataset_config,
    hold_chunk_work,
    index_pending_chunks,
    pending_chunks,
    pending_messages,
    prepare_episode_document,
    take_chunk_work,
    write_episode_document,
)
from episodic.store.sql import worker_id
from episodic.store.vault import Vault
from episodic.telemetry import link_from
from episodic.tool_calls import rendered_content

from . import spaces
from .events import EventWork
from .semantic import SemanticExtractor, WindowMessage

log = logging.getLogger(__name__)
tracer = trace.get_tracer("episodic.summariser")


@dataclass(frozen=True)
class Loaded:
    """What :meth:`Pipeline.process` reads before the slow work: the summary request and
    the key that seals the result."""

    request: SummaryRequest
    key: DatasetKey


@dataclass
class PassResult:
    completed: int = 0
    failed: int = 0
    semantic_processed: int = 0
    events_embedded: int = 0  # events given their vector (services/summariser/events.py)
    turns_classified: int = 0  # turns the classifier read
    chunks_resumed: int = 0  # episodes whose chunk index a crashed pass had left undone
    # Episodes whose chunk index this worker still owes: the pass yielded to a due episode
    # (the next pass claims it, then goes on with these).
    chunks_deferred: int = 0
    # Claims handed back unprocessed: the pass reached a second turn of a dataset while
    # another dataset had an episode due (the next pass claims them in turn again).
    handed_back: int = 0

    @property
    def did_work(self) -> bool:
        """Whether another pass right away may find more to do (the worker's drain loop)."""
        return bool(
            self.completed
            or self.failed
            or self.semantic_processed
            or self.events_embedded
            or self.turns_classified
            or self.chunks_resumed
            or self.chunks_deferred
            or self.handed_back
        )


# ---- reading -----------------------------------------------------------------------------


#: The older messages of a thread a summary reads besides its window: the newest that fit in
#: this many characters — what the lexical document keeps of a thread anyway
#: (recall_index.MAX_INDEXED_CHARS), and more than an LLM is sent
#: (EPISODIC_LLM_MAX_INPUT_CHARS). With the window's cap (episodes.MAX_WINDOW_MESSAGES,
#: MAX_WINDOW_BYTES) it bounds what summarising one episode holds in memory, however long
#: its thread (issue 49: 133,000 messages read whole took 6.9 GB).
SUMMARY_CONTEXT_CHARS = MAX_INDEXED_CHARS
#: Older messages are read newest first, this many per statement, until the budget is met.
CONTEXT_PAGE = 500

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


def _chat_messages(rows: list[Any]) -> list[ChatMessage]:
    return [
        ChatMessage(
            r["sequence"],
            r["role"],
            # Tool calls and results are part of what happened (episodic.tool_calls).
            rendered_content(r["content"], r.get("tools")),
            r["created_at"],
            speaker_from_metadata(r["metadata"]),
        )
        for r in rows
    ]


def load_summary_request(conn: Connection, vault: Vault, episode: RowMapping) -> SummaryRequest:
    """The episode's window, the newest older messages of the thread that fit in
    :data:`SUMMARY_CONTEXT_CHARS` (read a page at a time, so a long thread is never read
    whole), and the previous summary."""
    dataset = episode["dataset"]
    columns = "SELECT sequence, role, content, created_at, metadata, tools FROM messages "
    window = conn.execute(
        text(
            columns + "WHERE dataset = :d AND thread_id = :t "
            "AND sequence BETWEEN :start AND :end ORDER BY sequence"
        ),
        {
            "d": dataset,
            "t": episode["thread_id"],
            "start": episode["start_sequence"],
            "end": episode["end_sequence"],
        },
    ).mappings()
    messages = _chat_messages(vault.open_rows(conn, dataset, list(window), "messages"))
    context: list[ChatMessage] = []
    budget, before = SUMMARY_CONTEXT_CHARS, episode["start_sequence"]
    while budget > 0:
        page = conn.execute(
            text(
                columns + "WHERE dataset = :d AND thread_id = :t AND sequence < :before "
                "ORDER BY sequence DESC LIMIT :n"
            ),
            {"d": dataset, "t": episode["thread_id"], "before": before, "n": CONTEXT_PAGE},
        ).mappings()
        older = _chat_messages(vault.open_rows(conn, dataset, list(page), "messages"))
        for message in older:
            if budget <= 0:
                break
            context.append(message)
            budget -= len(message.content)
        if len(older) < CONTEXT_PAGE:
            break
        before = older[-1].sequence
    messages = [*reversed(context), *messages]
    previous = (
        conn.execute(
            text(
                "SELECT summary FROM episodes WHERE dataset = :d AND thread_id = :t "
                "AND end_sequence < :start AND completed_at IS NOT NULL "
                "ORDER BY end_sequence DESC LIMIT 1"
            ),
            {"d": dataset, "t": episode["thread_id"], "start": episode["start_sequence"]},
        )
        .mappings()
        .all()
    )
    label = (
        conn.execute(
            text("SELECT label FROM threads WHERE dataset = :d AND thread_id = :t"),
            {"d": dataset, "t": episode["thread_id"]},
        )
        .mappings()
        .all()
    )
    previous_summary = vault.open_rows(conn, dataset, list(previous), "episodes")
    thread = vault.open_rows(conn, dataset, list(label), "threads")
    return SummaryRequest(
        messages=messages,
        window_start_sequence=episode["start_sequence"],
        previous_summary=(previous_summary[0]["summary"] if previous_summary else "") or None,
        thread_label=(thread[0]["label"] if thread else "") or "",
    )


def load_window(conn: Connection, vault: Vault, episode: RowMapping) -> list[WindowMessage]:
    """Only the episode's own window: semantic extraction never re-reads older messages."""
    rows = conn.execute(
        text(
            "SELECT sequence, role, content, created_at FROM messages WHERE dataset = :d "
            "AND thread_id = :t AND sequence BETWEEN :start AND :end ORDER BY sequence"
        ),
        {
            "d": episode["dataset"],
            "t": episode["thread_id"],
            "start": episode["start_sequence"],
            "end": episode["end_sequence"],
        },
    ).mappings()
    return [
        WindowMessage(r["sequence"], r["role"], r["content"], r["created_at"])
        for r in vault.open_rows(conn, episode["dataset"], list(rows), "messages")
    ]


def indexed_messages(request: SummaryRequest) -> list[tuple[int, str]]:
    """The thread as read for the summary, as the recall index reads it."""
    return [(m.sequence, f"{m.name}: {m.content}" if m.name else m.content) for m in request.rows]


def index_input(episode: RowMapping, request: SummaryRequest, result: Any) -> IndexInput:
    """What the episode's recall index is built from, out of what the summariser has in
    hand (the thread as read for the summary, and the summary)."""
    return IndexInput(
        episode_id=episode["episode_id"],
        thread_id=episode["thread_id"],
        dataset=episode["dataset"],
        end_sequence=episode["end_sequence"],
        messages=indexed_messages(request),
        summary=result.summary,
        key_learnings=list(result.key_learnings),
        entities=list(result.entities),
        speakers=[(m.sequence, " ".join(m.name.split())) for m in request.rows if m.name],
    )


# ---- the pipeline ------------------------------------------------------------------------


class _Heartbeat:
    """Renews the worker's claims every ``interval`` while a batch is being worked on (see
    :func:`episodic.store.episodes.renew_claims`), and holds the chunk index it owes
    (:meth:`Pipeline.hold_backlog`). A failed renewal is only logged: the work goes on,
    and at worst the claim is reclaimed and the result dropped."""

    def __init__(self, pipeline: Pipeline, interval: float) -> None:
        self.pipeline = pipeline
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="claim-heartbeat", daemon=True)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                with self.pipeline.engine.begin() as conn:
                    episodes.renew_claims(conn, self.pipeline.worker)
                self.pipeline.hold_backlog()
            except Exception as err:
                log.warning("could not renew claims: %s", describe_error(err))


class Pipeline:
    """One worker's view: claim, summarise, embed, complete; then semantic extraction.

    While it works on claimed episodes it renews its claims every ``heartbeat`` (a quarter
    of the reclaim timeout), so only a worker that is gone loses them. When the database
    goes away mid-batch, the batch stops (the outage is no episode's fault: no retry is
    counted) and the claims still held are handed back as soon as the database answers
    again, at the start of the next pass.
    """

    def __init__(
        self,
        engine: Engine,
        summariser: Summariser,
        embedder: Embedder,
        extractor: SemanticExtractor | None,
        *,
        vault: Vault,
        max_retries: int,
        retry_backoff: timedelta,
        worker: str | None = None,
        index_for_recall: bool = True,
        heartbeat: timedelta = timedelta(seconds=150),
        event_work: EventWork | None = None,
        chunk_grace: timedelta = timedelta(seconds=60),
        chunk_slice_tokens: int = 512,
        chunk_vectors: str = "separate",
        detect_language: bool = True,
        procedure_writer: ProcedureWriter | None = None,
        backlog_yield_to_any_chars: int = BACKLOG_YIELD_TO_ANY_CHARS,
        backlog_yield_to_none_chars: int = BACKLOG_YIELD_TO_NONE_CHARS,
        yield_check_seconds: float = YIELD_CHECK_SECONDS,
        multilingual: Embedder | None = None,
    ) -> None:
        self.engine = engine
        self.vault = vault
        self.summariser = summariser
        # With an LLM configured, it words procedures' goals and steps (tools stay exact).
        self.procedure_writer = procedure_writer
        # Every text is embedded once per pass: the service hands the summariser and the
        # pipeline the same CachedEmbedder (the summary's sentences, the index's chunks).
        self.embedder = (
            embedder if isinstance(embedder, CachedEmbedder) else CachedEmbedder(embedder)
        )
        # A dataset in another language than English is embedded by ``multilingual`` when
        # there is one (EPISODIC_EMBEDDING_MULTILINGUAL; services/summariser/spaces.py).
        if multilingual is not None and not isinstance(multilingual, CachedEmbedder):
            multilingual = CachedEmbedder(multilingual)
        self.embedders = DatasetEmbedders(self.embedder, multilingual)
        self.extractor = extractor
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.worker = worker or worker_id()
        # Recall searches what the thread said (chunk embeddings + a lexical document): the
        # document is written in the completion transaction, the chunks right after it
        # (the deferred chunk index, see episodic.store.recall_index).
        self.index_for_recall = index_for_recall
        # An episode still marked chunks_pending this long after it completed was left by
        # a pass that stopped (a crash): any worker's next pass indexes it.
        self.chunk_grace = chunk_grace
        # The chunk index this worker owes (completed episodes, oldest first), embedded in
        # slices of about this many tokens; between slices it yields to a due episode.
        self.chunk_slice_tokens = chunk_slice_tokens
        # EPISODIC_CHUNK_VECTORS: "late" pools each chunk's vector from one model pass over
        # the episode's new messages; only an embedder with token access (the in-process
        # MiniLM) can, any other embeds each chunk's text ("separate").
        if chunk_vectors not in ("late", "separate"):
            raise ValueError("chunk_vectors must be 'late' or 'separate'")
        self.late_chunks = chunk_vectors == "late" and token_access(self.embedder)
        # The worker's loop and ProcessPending may run passes at once: the backlog is shared
        # under a lock (indexing an episode twice is harmless: the second finds no mark).
        self._backlog: list[ChunkWork] = []
        self._backlog_lock = threading.Lock()
        # When the chunk index yields (see _should_yield): below the first bound, to any due
        # episode; below the second, to another dataset's; above it, to none.
        self.backlog_yield_to_any_chars = backlog_yield_to_any_chars
        self.backlog_yield_to_none_chars = backlog_yield_to_none_chars
        self.yield_check_seconds = yield_check_seconds
        self._yield_checked_at = float("-inf")  # monotonic
        self.heartbeat = heartbeat.total_seconds()
        self._release_owed = False
        # Events: embedding them, and the turn classifier (after episodes, never before).
        self.event_work = event_work
        # The space a pass last found it may not write to (logged once per change).
        self._held_back: embedding_space.Space | None = None
        # EPISODIC_DETECT_LANGUAGE: a dataset whose language nobody chose gets the one its
        # text is written in, before the episode's document is stemmed (store/languages.py).
        self.detect_language = detect_language

    def run_once(
        self, limit: int, now: datetime | None = None, *, yield_chunks: bool = True
    ) -> PassResult:
        """Claims up to ``limit`` due episodes and completes them, then works through the
        chunk index it owes, then semantic extraction. A database outage propagates (the
        caller retries later).

        Time to memory: the chunk index (most of the model work) is embedded in slices,
        and before each slice the pass asks whether an episode has become due; if one has,
        it returns at once (``chunks_deferred``) and the next pass claims and completes
        that episode before it goes on with the chunks. ``yield_chunks=False`` (an explicit
        ProcessPending) finishes the index whatever is due."""
        result = PassResult()
        if self._release_owed:  # claims left from a pass the database interrupted
            self.release()
            self._release_owed = False
        loops.step("claim_pending")
        with self.engine.begin() as conn:
            if not self.may_write_vectors(conn):
                return result
            claimed = episodes.claim_pending(conn, self.worker, limit, now)
        try:
            with _Heartbeat(self, self._heartbeat_interval()):
                loaded = self.load(claimed)
                # Each episode is completed (recallable) as soon as its summary is stored;
                # its chunks join the backlog, embedded after the pass's completions.
                owed: list[ChunkWork] = []
                served: set[str] = set()
                for i, episode in enumerate(claimed):
                    if episode["dataset"] in served and self._hand_back_for_others(
                        claimed[i:], served, now
                    ):
                        result.handed_back = len(claimed) - i
                        break
                    loops.step("summarise")
                    status = self.process(episode, loaded.get(episode["episode_id"]), owed)
                    served.add(episode["dataset"])
                    if status in ("completed", "archived"):
                        result.completed += 1
                    elif status is not None:
                        result.failed += 1
                self._owe(owed)
                loops.step("index_chunks")
                # A pass that claimed nothing, or handed claims back, embeds one slice
                # before it may yield: a due episode it cannot claim (another worker holds
                # it) or a stream of other datasets' must not stall the index.
                if (
                    not self.index_backlog(
                        may_yield=yield_chunks,
                        progress_first=not claimed or bool(result.handed_back),
                        now=now,
                    )
                    or result.handed_back
                ):
                    result.chunks_deferred = len(self._backlog)
                    # One extraction before yielding, as the index embeds one slice: under
                    # steady load something is always due, and facts and procedures would
                    # wait for the load to end (the 100k chaos run: ~1,500 episodes' facts
                    # held for minutes behind the index).
                    result.semantic_processed = self.run_semantic(1, now=now)
                    return result
                result.chunks_resumed = self.resume_chunks(limit)
                loops.step("semantic_extraction")
                result.semantic_processed = self.run_semantic(
                    limit, may_yield=yield_chunks, now=now
                )
            loops.step("events")
            self.run_events(result)
        except Exception as err:
            if is_database_outage(err):
                self._release_owed = True
            raise
        return result

    def _heartbeat_interval(self) -> float:
        """Claims are renewed every ``heartbeat``, and the chunk index owed is held well
        inside ``chunk_grace`` (other workers take what nobody held for that long)."""
        grace = self.chunk_grace.total_seconds()
        return self.heartbeat if grace <= 0 else max(0.5, min(self.heartbeat, grace / 4))

    def _hand_back_for_others(
        self, rest: list[RowMapping], served: set[str], now: datetime | None
    ) -> bool:
        """Fairness inside a batch: the claim gave each dataset's oldest episode before
        anyone's second, but a dataset that became due after the claim would wait behind
        the whole batch (a giant thread's windows: seconds each). Before a second turn of
        a dataset, when another dataset has an episode due, the rest of the batch is handed
        back and the next pass claims in turn again; True when it was."""
        batch = sorted(served | {e["dataset"] for e in rest})
        with self.engine.begin() as conn:
            if not episodes.any_due(conn, now, excluding=batch):
                return False
            handed = episodes.hand_back(conn, rest, self.worker)
        log.debug("handed %d claim(s) back: another dataset has an episode due", handed)
        return True

    def may_write_vectors(self, conn: Connection | None = None) -> bool:
        """Whether this pass may write vectors: the store holds (or is being re-embedded
        to) this worker's model (store/embedding_space.py). A worker of another model
        writes nothing and says so once; the episodes wait for a worker of the store's
        model. Asked in the transaction that claims the pass's episodes, under the
        re-embedding's fence (the worker's loop and ProcessPending hold it)."""
        with nullcontext(conn) if conn is not None else self.engine.connect() as reading:
            allowed, space = embedding_space.may_write(reading, self.embedder.name)
        if allowed:
            self._held_back = None
        elif space != self._held_back:
            self._held_back = space
            assert space is not None
            log.error(
                "summarising paused: %s",
                embedding_space.mismatch(space, self.embedder.name, "Summariser"),
            )
        return allowed

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

    def _owe(self, work: list[ChunkWork]) -> None:
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

    def load(self, claimed: list[RowMapping]) -> dict[Any, Loaded]:
        """Reads every claimed episode's thread on one connection. Best effort: an episode
        that cannot be read here is read again, and fails, in :meth:`process`.

        The episodes' texts are not embedded here in one batch for all of them: that would
        hold every episode's completion back until all were embedded (time to memory);
        each episode's sentences are one model call of their own (tens of sentences), and
        the chunks, most of the work, are batched across the pass after the completions."""
        loaded: dict[Any, Loaded] = {}
        threads: set[Any] = set()
        with self.engine.connect() as conn:
            for episode in claimed:
                if episode["thread_id"] in threads:
                    # A later window of a thread in this batch: what it reads (the previous
                    # summary) changes when the earlier one completes, so process() reads
                    # it then.
                    continue
                try:
                    request = load_summary_request(conn, self.vault, episode)
                    key = self.vault.for_read(conn, episode["dataset"])
                except Exception as err:
                    if is_database_outage(err):
                        raise
                    continue
                threads.add(episode["thread_id"])
                loaded[episode["episode_id"]] = Loaded(request, key)
        return loaded

    def process(
        self,
        episode: RowMapping,
        loaded: Loaded | None = None,
        deferred: list[ChunkWork] | None = None,
    ) -> str | None:
        """Summarises one claimed episode; returns its new status (None if the claim was lost).
        ``loaded``: what :meth:`load` read for it. The episode's chunks are appended to
        ``deferred`` for the caller to index (:meth:`index_chunks`); without it they are
        indexed here, right after the completion."""
        links = link_from(_carrier(episode.get("trace_context")))
        with tracer.start_as_current_span(
            "summarise episode",
            links=links,
            attributes={
                "episodic.episode_id": str(episode["episode_id"]),
                "episodic.thread_id": str(episode["thread_id"]),
                "episodic.window": f"{episode['start_sequence']}-{episode['end_sequence']}",
                genai.TRIGGER: str(episode.get("trigger") or ""),
            },
        ) as span:
            try:
                if loaded is None:
                    with self.engine.connect() as conn:
                        loaded = Loaded(
                            load_summary_request(conn, self.vault, episode),
                            # The key that opened the thread seals the result (a dataset
                            # erased and created meanwhile has no such episode any more:
                            # nothing is written).
                            self.vault.for_read(conn, episode["dataset"]),
                        )
                request, key = loaded.request, loaded.key
                with (
                    tracer.start_as_current_span(
                        "llm.summarise", attributes=genai.summariser_attributes(self.summariser)
                    ),
                    metrics.summarising(self.summariser.name),
                ):
                    result = self.summariser.summarise(request)
                if self.detect_language:
                    self.settle_language(episode["dataset"], request)
                model = self.follow_language(episode["dataset"])
                vector = self.summary_vector(result, model)
                document, stemmed_in = None, None
                if self.index_for_recall:
                    # The lexical document (no model: cheap) is written with the completion;
                    # the chunks' embeddings after it (index_chunks).
                    with (
                        tracer.start_as_current_span("index.document"),
                        self.engine.connect() as conn,
                    ):
                        stemmed_in = dataset_config(conn, episode["dataset"])
                        document = prepare_episode_document(
                            conn, key, index_input(episode, request, result)
                        )
                spellings = normalise_entities(result.entities)
                with (
                    genai.memory_span(
                        genai.CREATE_MEMORY,
                        store=episode["dataset"],
                        record=str(episode["episode_id"]),
                        links=links,
                    ),
                    self.engine.begin() as conn,
                ):
                    # The dataset's language, held before the thread's and the episodes'
                    # locks (as set_language takes it: see dataset_config), whether or not
                    # a document is written: the completion also archives the previous
                    # episode, whose document set_language may be re-stemming. When it
                    # changed since (detected or set by another process), the document is
                    # stemmed again, in the language now in force.
                    # Without waiting: a switch re-stems for minutes, and other datasets'
                    # episodes must not wait behind it (the episode is deferred instead).
                    config_now = dataset_config(
                        conn, episode["dataset"], for_write=True, wait=False
                    )
                    if document is not None and stemmed_in != config_now:
                        document = prepare_episode_document(
                            conn, key, index_input(episode, request, result)
                        )
                    # Likewise its model (moved with its language meanwhile: spaces.py).
                    model_now = embedding_space.dataset_model(conn, episode["dataset"])
                    if model_now != model:
                        vector = self.summary_vector(result, model_now)
                    status = episodes.complete(
                        conn,
                        episode,
                        self.worker,
                        key=key,
                        summary=result.summary,
                        key_learnings=result.key_learnings,
                        entities=spellings,
                        event_type=result.event_type,
                        actor=result.actor,
                        embedding=vector,
                    )
                    if status is not None:
                        # Merge on write: each spelling joins its canonical entity, in the
                        # transaction that stores the episode naming it.
                        entities.record_mentions(conn, key, spellings)
                    if status is not None and document is not None:
                        write_episode_document(
                            conn,
                            episode["dataset"],
                            episode["episode_id"],
                            *document,
                            chunks_pending=True,
                        )
                if status is not None and document is not None:
                    work = ChunkWork(
                        episode_id=episode["episode_id"],
                        thread_id=episode["thread_id"],
                        dataset=episode["dataset"],
                        end_sequence=episode["end_sequence"],
                        messages=indexed_messages(request),
                        key=key,
                    )
                    if deferred is None:
                        self.index_chunks([work])
                    else:
                        deferred.append(work)
                if status is None:
                    log.warning(
                        "claim on episode %s was lost; result dropped", episode["episode_id"]
                    )
                span.set_attribute("episodic.status", status or "lost")
                metrics.episode_processed(status)
                return status
            except Exception as err:  # any provider or data problem: count it, retry later
                span.record_exception(err)
                if isinstance(err, LanguageSwitching) or is_lock_conflict(err):
                    # Nobody's fault, and only this episode's: its dataset is being
                    # re-stemmed, or a row it needs is held (bounded by the lock timeout).
                    # It goes back, due again shortly, no retry counted; the pass goes on
                    # with the other datasets' episodes.
                    with self.engine.begin() as conn:
                        episodes.hand_back(conn, [episode], self.worker, delay=DEFER_DELAY)
                    log.info(
                        "episode %s deferred by %s: %s",
                        episode["episode_id"],
                        DEFER_DELAY,
                        describe_error(err),
                    )
                    span.set_attribute("episodic.status", "deferred")
                    return None
                if is_database_outage(err):
                    raise  # nobody's fault: the pass stops and hands its claims back
                message = episodes.error_text(err)
                log.warning("episode %s failed: %s", episode["episode_id"], message)
                span.set_attribute(genai.ERROR_TYPE, genai.error_type(err))
                with self.engine.begin() as conn:
                    status = episodes.record_failure(
                        conn,
                        episode["episode_id"],
                        self.worker,
                        message,
                        max_retries=self.max_retries,
                        backoff=self.retry_backoff,
                        dataset=episode["dataset"],
                    )
                span.set_attribute("episodic.status", status or "lost")
                metrics.episode_processed(status)
                return status

    def summary_vector(self, result: SummaryResult, model: str | None) -> Any:
        """The episode's vector in ``model`` (its dataset's; None: the store's): the
        summariser's own (pooled from the sentence vectors it chose the summary with, in
        the store's model) when it has one, else the embedding of what it wrote."""
        if model is None and result.vector is not None and not EMBED_ENTITIES:
            return result.vector
        embedder = self.embedders.get(model)
        with (
            tracer.start_as_current_span("embed.summary"),
            metrics.embedding(embedder.name, "summary"),
        ):
            return embedder.embed(
                [embedding_text(result.summary, result.key_learnings, result.entities)]
            )[0]

    def follow_language(self, dataset: str) -> str | None:
        """The dataset's embedding model (None: the store's), after moving it to the one its
        language calls for (spaces.py). A failure is logged and does not fail the episode:
        it is embedded in the dataset's model as it is, and the next episode asks again."""
        try:
            return spaces.follow_language(
                self.engine, self.vault, self.embedders, dataset, late=self.late_chunks
            ).model
        except Exception as err:
            if is_database_outage(err) and not is_lock_conflict(err):
                raise
            log.warning(
                "moving %s to its language's model failed: %s", dataset, describe_error(err)
            )
            with self.engine.connect() as conn:
                return embedding_space.dataset_model(conn, dataset)

    def settle_language(self, dataset: str, request: SummaryRequest) -> None:
        """Detects the dataset's language from what the thread read for the summary says
        (its user's and assistant's messages: system prompts and tool output are mostly
        English whatever the user writes), while nobody has chosen it (one cheap read once
        it is settled). A failure — a lock lost to another transaction included — is logged
        and does not fail the episode: it is stemmed as the dataset is, and the next
        episode asks again. Only the database going away stops the pass."""
        texts = [m.content for m in request.rows if m.role in languages.DETECTED_ROLES]
        try:
            with (
                tracer.start_as_current_span("language.detect"),
                self.engine.begin() as conn,
            ):
                languages.settle_detected_language(conn, self.vault, dataset, texts)
        except Exception as err:
            if is_database_outage(err) and not is_lock_conflict(err):
                raise
            log.warning("language detection for %s failed: %s", dataset, describe_error(err))

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

    def run_semantic(
        self, limit: int, *, may_yield: bool = True, now: datetime | None = None
    ) -> int:
        """Extracts from up to ``limit`` completed episodes, one claim at a time; after the
        first it stops when an episode is due (a giant thread's hundreds of windows must
        not hold back another dataset's time to memory), and the next pass goes on.
        Returns how many it extracted from."""
        done = 0
        while done < limit:
            if done and may_yield:
                with self.engine.connect() as conn:
                    if episodes.any_due(conn, now):
                        break
            with self.engine.begin() as conn:
                claimed = episodes.claim_semantic(conn, self.worker, 1)
            if not claimed:
                break
            self.process_semantic(claimed[0])
            done += 1
        return done

    def process_semantic(self, episode: RowMapping) -> str | None:
        """Semantic and procedural extraction of a completed episode's window: facts (when
        an extractor is configured) and, when the window called tools, the procedure
        candidate it teaches (offline, always), stored with the claim held."""
        with tracer.start_as_current_span(
            "semantic extraction", attributes={"episodic.episode_id": str(episode["episode_id"])}
        ):
            try:
                with self.engine.connect() as conn:
                    learned = self.learn_procedure(conn, episode)
                    if self.extractor is not None:
                        window = load_window(conn, self.vault, episode)
                    key = self.vault.for_read(conn, episode["dataset"])
                with self.engine.begin() as conn:
                    # The claim first: a worker whose claim was reclaimed while it was
                    # away (frozen, cut off) writes no facts.
                    if not episodes.hold_semantic_claim(
                        conn, episode["episode_id"], self.worker, dataset=episode["dataset"]
                    ):
                        log.info(
                            "extraction of %s: the claim was taken back meanwhile; nothing written",
                            episode["episode_id"],
                        )
                        return None
                    stored = 0
                    if self.extractor is not None:
                        stored += self.extractor.extract(conn, episode, window, key)
                    if learned is not None:
                        procedure_store.store_candidate(conn, key, episode, *learned)
                        procedure_store.rebuild(conn, key, episode["dataset"])
                        stored += 1
                    status = "completed" if stored else "skipped"
                    episodes.finish_semantic(
                        conn, episode["episode_id"], self.worker, status, dataset=episode["dataset"]
                    )
                metrics.extraction_finished(status)
                return status
            except Exception as err:
                if is_database_outage(err):
                    raise  # not the extraction's fault: handed back, not failed
                log.warning(
                    "semantic extraction of %s failed: %s",
                    episode["episode_id"],
                    episodes.error_text(err),
                )
                with self.engine.begin() as conn:
                    episodes.finish_semantic(
                        conn,
                        episode["episode_id"],
                        self.worker,
                        "failed",
                        episodes.error_text(err),
                        dataset=episode["dataset"],
                    )
                metrics.extraction_finished("failed")
                return "failed"

    def learn_procedure(
        self, conn: Connection, episode: RowMapping
    ) -> tuple[procedural.Candidate, np.ndarray] | None:
        """What the episode's stretch of tool use teaches (episodic.procedural), with its
        goal's embedding; None when the window called no tool."""
        if not procedure_store.has_tool_calls(conn, episode):
            return None
        turns = procedure_store.load_turns(conn, self.vault, episode)
        candidate = procedural.extract(
            turns, episode_id=str(episode["episode_id"]), thread_id=str(episode["thread_id"])
        )
        if candidate is None:
            return None
        if self.procedure_writer is not None:
            try:
                candidate = self.procedure_writer.write(turns, candidate)
            except ProviderError as err:  # the offline words stand; nothing is lost
                log.warning(
                    "%s could not word the procedure of %s; kept the extractor's: %s",
                    self.procedure_writer.name,
                    episode["episode_id"],
                    describe_error(err),
                )
        model = embedding_space.dataset_model(conn, episode["dataset"])
        return candidate, self.embedders.get(model).embed_query(candidate.goal)

    def run_events(self, result: PassResult) -> None:
        """Embeds new events and classifies new turns; a provider failure is logged and
        retried on the next pass (it never fails an episode)."""
        if self.event_work is None:
            return
        try:
            done = self.event_work.run_once()
        except Exception as err:
            if is_database_outage(err):
                raise
            log.warning("event work failed: %s", describe_error(err))
            return
        result.events_embedded = done.embedded
        result.turns_classified = done.turns_classified

    def release(self) -> int:
        with self.engine.begin() as conn:
            return episodes.release_claims(conn, self.worker)


#: How much later an episode is due again when it could not be written for a reason that
#: is only its own and nobody's fault (its dataset's language being switched, a row held
#: by another session): long enough not to spin on it, short beside a switch.
DEFER_DELAY = timedelta(seconds=5)

#: Whether the episode's embedding also reads its entities (the names and things the window
#: mentions), so the summary's vector carries the names the extractive summary may not
#: quote. Measured alone on LoCoMo (docs/concepts/recall.md); a change needs re-embedding.
EMBED_ENTITIES = False


def embedding_text(summary: str, key_learnings: list[str], entities: list[str]) -> str:
    """What an episode's embedding represents: its summary and key learnings (and its
    entities, when :data:`EMBED_ENTITIES` is on)."""
    parts = [summary, *key_learnings]
    if EMBED_ENTITIES and entities:
        parts.append("Names: " + ", ".join(entities))
    return "\n".join(parts)


#: Characters per model token, roughly, for English text through MiniLM's WordPiece: how a
#: slice of the chunk index is sized without tokenising it twice.
CHARS_PER_TOKEN = 4


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


def _carrier(value: Any) -> dict[str, str] | None:
    """The trace context of the trigger that created the episode, stored on the row."""
    if isinstance(value, str):
        value = json.loads(value)
    return value if isinstance(value, dict) else None


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
