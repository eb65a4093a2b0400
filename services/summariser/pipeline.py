"""The Summariser's orchestration: claim pending episodes, summarise and embed them,
complete them, index their chunks; then run semantic extraction over each completed
episode's window.

Every state change is a transition of :mod:`episodic.store.episodes` (claim, complete,
record_failure, release, the semantic claim and finish). What this module adds is the
order and the slow work: the LLM and the embedder run outside any transaction, so a slow
provider holds no locks; the completion re-checks the claim and gives up quietly if the
claim was lost (for example reclaimed as orphaned by the Scheduler).

This module is the entry point the service, replay, the tests and the benchmarks import
(:class:`Pipeline`, :class:`PassResult`, :func:`embedding_text`); the rest lives in its
siblings, one seam each, and is re-exported here: :mod:`.reading` (what a summary reads of
the thread, :func:`load_summary_request`), :mod:`.chunk_backlog` (the chunk index a worker
owes: :class:`~.chunk_backlog.ChunkBacklog`, a base class of :class:`Pipeline`) and
:mod:`.episode_vector` (the summary's vector and the dataset's language:
:class:`~.episode_vector.EpisodeVector`, another, and :func:`embedding_text`) and
:mod:`.extraction` (semantic and procedural extraction:
:class:`~.extraction.SemanticExtraction`, the third). A test that replaces a name replaces
it in the module that reads it (``reading.SUMMARY_CONTEXT_CHARS``, ``reading.CONTEXT_PAGE``,
``episode_vector.EMBED_ENTITIES``), not here.
"""

from __future__ import annotations

import json
import logging
import threading
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from opentelemetry import trace
from sqlalchemy import Connection, Engine, RowMapping

from episodic import genai, loops, metrics
from episodic.crypto import DatasetKey
from episodic.errors import describe_error
from episodic.procedural import ProcedureWriter
from episodic.providers.dataset_embedders import DatasetEmbedders
from episodic.providers.embedding import CachedEmbedder, token_access
from episodic.providers.entities import normalise_entities
from episodic.providers.types import (
    Embedder,
    Summariser,
    SummaryRequest,
)
from episodic.store import embedding_space, entities, episodes
from episodic.store.db import is_database_outage, is_lock_conflict
from episodic.store.recall_index import (
    ChunkWork,
    LanguageSwitching,
    dataset_config,
    prepare_episode_document,
    write_episode_document,
)
from episodic.store.sql import worker_id
from episodic.store.vault import Vault
from episodic.telemetry import link_from

from .chunk_backlog import BACKLOG_GROUP_CHARS as BACKLOG_GROUP_CHARS
from .chunk_backlog import BACKLOG_YIELD_TO_ANY_CHARS as BACKLOG_YIELD_TO_ANY_CHARS
from .chunk_backlog import BACKLOG_YIELD_TO_NONE_CHARS as BACKLOG_YIELD_TO_NONE_CHARS
from .chunk_backlog import CHARS_PER_TOKEN as CHARS_PER_TOKEN
from .chunk_backlog import YIELD_CHECK_SECONDS as YIELD_CHECK_SECONDS
from .chunk_backlog import ChunkBacklog
from .episode_vector import EMBED_ENTITIES as EMBED_ENTITIES
from .episode_vector import EpisodeVector
from .episode_vector import embedding_text as embedding_text
from .events import EventWork
from .extraction import SemanticExtraction
from .reading import CONTEXT_PAGE as CONTEXT_PAGE
from .reading import SUMMARY_CONTEXT_CHARS as SUMMARY_CONTEXT_CHARS
from .reading import index_input as index_input
from .reading import indexed_messages as indexed_messages
from .reading import load_summary_request as load_summary_request
from .reading import load_window as load_window
from .semantic import SemanticExtractor

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


# ---- the pipeline ------------------------------------------------------------------------


def _heartbeat(pipeline: Pipeline, interval: float) -> AbstractContextManager[None]:
    """Renews the worker's claims every ``interval`` while a batch is being worked on (see
    :func:`episodic.store.episodes.renew_claims`), and holds the chunk index it owes
    (:meth:`Pipeline.hold_backlog`). A failed renewal is only logged: the work goes on,
    and at worst the claim is reclaimed and the result dropped."""

    def beat() -> None:
        try:
            with pipeline.engine.begin() as conn:
                episodes.renew_claims(conn, pipeline.worker)
            pipeline.hold_backlog()
        except Exception as err:
            log.warning("could not renew claims: %s", describe_error(err))

    return loops.beating("claim-heartbeat", interval, beat)


class Pipeline(ChunkBacklog, EpisodeVector, SemanticExtraction):
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
            with _heartbeat(self, self._heartbeat_interval()):
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
                self.owe(owed)
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


def _carrier(value: Any) -> dict[str, str] | None:
    """The trace context of the trigger that created the episode, stored on the row."""
    if isinstance(value, str):
        value = json.loads(value)
    return value if isinstance(value, dict) else None
