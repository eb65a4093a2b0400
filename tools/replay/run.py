"""One replay on one scratch database (:class:`ReplayRun`): the steps of
:mod:`episodic.ops.replay`, each a part of the class — stage the export into
``replay-old``, simulate its threads into ``replay-new`` on the replay's clock, summarise
the new episodes, compare — and what the simulation keeps of each exported thread
(``_Thread``, ``_OldEpisode``, ``_Event``).

It runs the services' code in process (Ingest's, the Scheduler's and Recall's domain
functions, the Summariser's pipeline), by design, and is the one module of the replay that
does: tests/test_layers.py names it.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Connection, Engine

from episodic.config import Settings
from episodic.crypto import LocalKeyring, new_data_key
from episodic.providers.factory import (
    late_chunks,
    make_dataset_embedders,
    make_summariser,
)
from episodic.providers.types import Embedder
from episodic.store import embedding_space, recall_queries
from episodic.store import episodes as states
from episodic.store.languages import set_language
from episodic.store.recall_index import (
    IndexInput,
    dataset_config,
    indexed_text,
    message_speakers,
    prepare_episode_index,
    write_episode_index,
)
from episodic.store.recall_queries import RecallFilters
from episodic.store.sql import worker_id
from episodic.store.vault import Vault

from .reading import Bundle, as_dict, parse_time
from .report import QueryDiff, ThreadDiff, Window

# Installed, the services are the subpackage episodic.services; mypy sees the repository's
# top-level services/ package (pyproject's package-dir mapping), so it is told that name.
if TYPE_CHECKING:
    from services.ingest import domain as ingest
    from services.recall import domain as recall
    from services.scheduler import domain as scheduler
    from services.summariser.pipeline import Pipeline
    from services.summariser.spaces import follow_language
else:
    from episodic.services.ingest import domain as ingest
    from episodic.services.recall import domain as recall
    from episodic.services.scheduler import domain as scheduler
    from episodic.services.summariser.pipeline import Pipeline
    from episodic.services.summariser.spaces import follow_language

OLD_DATASET = "replay-old"
NEW_DATASET = "replay-new"
_NAMESPACE = uuid.UUID("6f1d2c3e-8a4b-4c5d-9e6f-7a8b9c0d1e2f")
_TICK = timedelta(microseconds=1)
_BATCH = 500


@dataclass
class _OldEpisode:
    start: int
    end: int
    trigger: str
    status: str
    summary: str
    entities: list[str]
    created_at: datetime | None


@dataclass
class _Thread:
    """What the simulation needs of one exported thread (no message content: that is
    staged in the scratch database)."""

    source_id: str
    new_id: uuid.UUID
    old_id: uuid.UUID
    label: str
    metadata: dict[str, Any]
    created_at: datetime | None
    ended_at: datetime | None
    received: list[datetime | None]  # per message, sequence order
    written: list[datetime | None]
    old: list[_OldEpisode]
    skipped: str = ""

    @property
    def message_count(self) -> int:
        return len(self.received)


@dataclass(order=True)
class _Event:
    at: datetime
    thread: int
    ordinal: int  # within the thread: start 0, message s at 2s, an end after s at 2s + 1
    kind: str = field(compare=False)  # start | messages | end | manual
    first: int = field(default=0, compare=False)
    last: int = field(default=0, compare=False)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0 or nb == 0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))


def _thread_uuid(source_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(source_id)
    except ValueError:
        return uuid.uuid5(_NAMESPACE, source_id)


class ReplayRun:
    """One replay on one scratch database. Every read and write of the store is a domain
    function of the services (see the module docstring)."""

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        embedder: Embedder,
        *,
        with_recall: bool,
        clock: str,
        report: Callable[[str], None],
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.embedder = embedder  # the store's model
        # Each dataset's model, as the Summariser's (a language other than English: the
        # multilingual one, when on); the dataset's datasets.embedding_model says which.
        self.embedders = make_dataset_embedders(settings.embedding, embedder)
        self.with_recall = with_recall
        self.clock = clock
        self.say = report
        # The scratch data is sealed like a deployment's, with a key that lives only here.
        self.vault = Vault(LocalKeyring({"replay": new_data_key()}, "replay"), encrypt=True)
        self.worker = worker_id()
        self.threads: list[_Thread] = []
        self.latest: datetime | None = None

    # -- 1. stage

    def stage(self, bundle: Bundle) -> None:
        record = bundle.thread
        source_id = str(record["thread_id"])
        messages = sorted(bundle.messages, key=lambda m: int(m.get("sequence") or 0))
        old = [
            _OldEpisode(
                start=int(e.get("start_sequence") or 0),
                end=int(e.get("end_sequence") or 0),
                trigger=str(e.get("trigger") or ""),
                status=str(e.get("status") or ""),
                summary=str(e.get("summary") or ""),
                entities=[str(x) for x in e.get("entities") or []],
                created_at=parse_time(e.get("created_at")),
            )
            for e in bundle.episodes
        ]
        old.sort(key=lambda e: (e.start, e.end))
        thread = _Thread(
            source_id=source_id,
            new_id=_thread_uuid(source_id),
            old_id=uuid.uuid5(_NAMESPACE, "old:" + source_id),
            label=str(record.get("label") or ""),
            metadata=as_dict(record.get("metadata")),
            created_at=parse_time(record.get("created_at")),
            ended_at=parse_time(record.get("ended_at")),
            received=[parse_time(m.get("received_at")) for m in messages],
            written=[parse_time(m.get("created_at")) for m in messages],
            old=old,
        )
        self.threads.append(thread)
        if [m.get("sequence") for m in messages] != list(range(1, len(messages) + 1)):
            thread.skipped = "its messages are not 1..n (compacted or partial)"
            return
        for t in [*thread.received, *thread.written, thread.created_at, thread.ended_at]:
            if t is not None and (self.latest is None or t > self.latest):
                self.latest = t
        with self.engine.begin() as conn:
            ingest.create_thread(
                conn,
                self.vault,
                dataset=OLD_DATASET,
                thread_id=thread.old_id,
                label=thread.label,
                metadata_json=json.dumps(thread.metadata),
            )
            written = 0
            for episode in old if self.with_recall else []:
                if episode.end > written:
                    self._stage_messages(conn, thread.old_id, messages[written : episode.end])
                    written = episode.end
                self._stage_episode(conn, thread, episode, bundle, messages)
            self._stage_messages(conn, thread.old_id, messages[written:])

    def _stage_messages(
        self, conn: Connection, thread_id: uuid.UUID, messages: list[dict[str, Any]]
    ) -> None:
        for i in range(0, len(messages), _BATCH):
            batch = [
                ingest.NewMessage(
                    role=str(m.get("role") or "user"),
                    content=str(m.get("content") or ""),
                    metadata=as_dict(m.get("metadata")),
                    created_at=parse_time(m.get("created_at")),
                )
                for m in messages[i : i + _BATCH]
            ]
            ingest.add_messages(conn, self.vault, thread_id, batch, self.settings.ingest)

    def _stage_episode(
        self,
        conn: Connection,
        thread: _Thread,
        episode: _OldEpisode,
        bundle: Bundle,
        messages: list[dict[str, Any]],
    ) -> None:
        """The old episode in the old dataset, as the summariser would have left it:
        opened over its window, then completed with the exported result and indexed for
        recall, or archived (it was never summarised, so recall never saw it)."""
        trigger = episode.trigger if episode.trigger in states.TRIGGERS else "manual"
        row = states.open_episode(conn, thread.old_id, trigger, dataset=OLD_DATASET)
        if row is None:
            return
        summarised = episode.status in ("completed", "archived") and episode.summary
        if not summarised:
            states.delete_episode(conn, row["episode_id"], dataset=OLD_DATASET)
            return
        claimed = states.claim_pending(conn, self.worker, 1)
        if not claimed or claimed[0]["episode_id"] != row["episode_id"]:
            raise RuntimeError("the scratch database has other pending episodes")
        source = next(
            e
            for e in bundle.episodes
            if int(e.get("start_sequence") or 0) == episode.start
            and int(e.get("end_sequence") or 0) == episode.end
        )
        learnings = [str(k) for k in source.get("key_learnings") or []]
        key = self.vault.for_read(conn, OLD_DATASET)
        text = episode.summary if not learnings else episode.summary + "\n" + "\n".join(learnings)
        status = states.complete(
            conn,
            claimed[0],
            self.worker,
            key=key,
            summary=episode.summary,
            key_learnings=learnings,
            entities=episode.entities,
            event_type=str(source.get("event_type") or ""),
            actor=str(source.get("actor") or ""),
            embedding=[float(x) for x in self.embedder.embed([text])[0]],
        )
        if status is None:
            return
        index = IndexInput(
            episode_id=row["episode_id"],
            thread_id=thread.old_id,
            dataset=OLD_DATASET,
            end_sequence=episode.end,
            messages=[
                (
                    int(m["sequence"]),
                    indexed_text(str(m.get("content") or ""), m.get("metadata"), m.get("tools")),
                )
                for m in messages[: episode.end]
            ],
            summary=episode.summary,
            key_learnings=learnings,
            entities=episode.entities,
            speakers=message_speakers(messages[: episode.end]),
        )
        late = late_chunks(self.settings.embedding, self.embedder)
        write_episode_index(conn, prepare_episode_index(conn, key, index, self.embedder, late=late))
        if episode.status == "archived" and episode is thread.old[-1]:
            # Deleted, not superseded.
            states.delete_episode(conn, row["episode_id"], dataset=OLD_DATASET)

    # -- 2. simulate

    def _events(self) -> list[_Event]:
        interval_clock = self.clock
        events: list[_Event] = []
        for index, thread in enumerate(self.threads):
            if thread.skipped:
                continue
            own: list[_Event] = []
            primary = thread.received if interval_clock == "received" else thread.written
            secondary = thread.written if interval_clock == "received" else thread.received
            times = [p or s for p, s in zip(primary, secondary, strict=True)]
            fallback = thread.created_at or self.latest or datetime.now(UTC)
            start = thread.created_at or (times[0] if times else None) or fallback
            if interval_clock == "created" and times and times[0] is not None:
                start = min(start, times[0])
            own.append(_Event(start, index, 0, "start"))
            for seq, at in enumerate(times, start=1):
                own.append(_Event(at or start, index, 2 * seq, "messages", seq, seq))
            for kind, checkpoint, at in self._ends(thread):
                own.append(_Event(at, index, 2 * checkpoint + 1, kind))
            own.sort(key=lambda e: e.ordinal)
            for before, event in itertools.pairwise(own):  # time never runs back
                event.at = max(event.at, before.at)
            events.extend(own)
        events.sort()
        return events

    def _ends(self, thread: _Thread) -> list[tuple[str, int, datetime]]:
        """The explicit ends of the old run: each explicit (or manual) episode's checkpoint
        at the time it was opened, and the thread's last EndThread; as (kind, the last
        message before it, when) on the replay's clock."""
        received = thread.received
        n = len(received)
        found: list[tuple[str, int, datetime | None]] = [
            ("end" if e.trigger == "explicit" else "manual", e.end, e.created_at)
            for e in thread.old
            if e.trigger in ("explicit", "manual") and 0 < e.end <= n
        ]
        if thread.ended_at is not None:
            before = sum(1 for r in received if r is not None and r <= thread.ended_at)
            found.append(("end", before, thread.ended_at))
        out: list[tuple[str, int, datetime]] = []
        for kind, checkpoint, opened in found:
            if self.clock == "received":
                low = received[checkpoint - 1] if checkpoint else thread.created_at
                high = received[checkpoint] if checkpoint < n else None
                at = opened or low
                if at is None:
                    continue
                if low is not None:
                    at = max(at, low)
                if high is not None:
                    at = min(at, high - _TICK)
            else:  # right after the checkpoint's message, as a live agent ends a thread
                at_or_none = (
                    thread.written[checkpoint - 1] or received[checkpoint - 1]
                    if checkpoint
                    else thread.created_at
                )
                if at_or_none is None:
                    continue
                at = at_or_none
            out.append((kind, checkpoint, at))
        return out

    def simulate(self) -> None:
        events = self._events()
        interval = self.settings.scheduler.auto_episode_interval
        i = 0
        while i < len(events):
            event = events[i]
            self._fire_due(event.at)
            thread = self.threads[event.thread]
            if event.kind != "messages":
                self._apply(thread, event)
                i += 1
                continue
            # Consecutive messages of one thread, none of them idle long enough for its
            # timer to fire in between, are one batch (nothing else can happen meanwhile
            # that changes this thread's episodes).
            last = event
            j = i + 1
            while (
                j < len(events)
                and events[j].kind == "messages"
                and events[j].thread == event.thread
                and events[j].at < last.at + interval
                and events[j].first - last.last == 1
                and events[j].first - event.first < _BATCH
            ):
                last = events[j]
                j += 1
            self._write(thread, event.first, last.last, last.at)
            i = j
        horizon = (self.latest or datetime.now(UTC)) + timedelta(days=3650)
        self._fire_due(horizon)

    def _apply(self, thread: _Thread, event: _Event) -> None:
        with self.engine.begin() as conn:
            if event.kind == "start":
                ingest.create_thread(
                    conn,
                    self.vault,
                    dataset=NEW_DATASET,
                    thread_id=thread.new_id,
                    label=thread.label,
                    metadata_json=json.dumps(thread.metadata),
                )
                scheduler.record_thread_started(
                    conn, thread.new_id, self.settings.scheduler, event.at, dataset=NEW_DATASET
                )
            elif event.kind == "end":
                _, owed = ingest.end_thread(conn, thread.new_id, dataset=NEW_DATASET)
                if owed:
                    scheduler.request_episode(
                        conn, thread.new_id, "explicit", event.at, dataset=NEW_DATASET
                    )
            else:
                scheduler.request_episode(
                    conn, thread.new_id, "manual", event.at, dataset=NEW_DATASET
                )

    def _write(self, thread: _Thread, first: int, last: int, at: datetime) -> None:
        with self.engine.begin() as conn:
            staged: list[dict[str, Any]] = []
            while len(staged) < last - first + 1:
                rows = ingest.list_messages(
                    conn,
                    self.vault,
                    thread.old_id,
                    dataset=OLD_DATASET,
                    after_sequence=first - 1 + len(staged),
                    end_sequence=last,
                    limit=last - first + 1 - len(staged),
                ).messages
                if not rows:
                    raise RuntimeError(f"staged messages of thread {thread.source_id} are missing")
                staged.extend(rows)
            batch = [
                ingest.NewMessage(
                    role=r["role"],
                    content=r["content"],
                    metadata=r["metadata"] or {},
                    created_at=r["created_at"],
                )
                for r in staged
            ]
            ingest.add_messages(conn, self.vault, thread.new_id, batch, self.settings.ingest)
        with self.engine.begin() as conn:
            scheduler.record_activity(
                conn, thread.new_id, self.settings.scheduler, at, dataset=NEW_DATASET
            )

    def _fire_due(self, now: datetime) -> None:
        limit = 1000
        while True:
            with self.engine.begin() as conn:
                timers = scheduler.claim_due_timers(conn, self.worker, limit, now)
            for timer in timers:
                with self.engine.begin() as conn:
                    # At its own deadline: episodes opened by timers keep their order.
                    scheduler.fire_timer(conn, timer, self.worker, min(timer.fire_at, now))
            if len(timers) < limit:
                return

    # -- 3. summarise

    def summarise(self) -> None:
        settings = self.settings
        pipeline = Pipeline(
            self.engine,
            make_summariser(settings.llm, self.embedder),
            self.embedder,
            None,
            vault=self.vault,
            max_retries=settings.recovery.max_retries,
            retry_backoff=settings.recovery.retry_backoff,
            worker=self.worker,
            index_for_recall=self.with_recall,
            chunk_vectors=settings.embedding.chunk_vectors,
            detect_language=settings.summariser.detect_language,
            multilingual=self.embedders.multilingual,
        )
        # Retries are due at once on this clock (the backoff would only make us wait).
        later = (self.latest or datetime.now(UTC)) + timedelta(days=3650)
        done = 0
        while True:
            result = pipeline.run_once(16, later)
            done += result.completed + result.failed
            if not (result.completed or result.failed or result.semantic_processed):
                break
            self.say(f"summarised {done} episode(s)")
        # The old episodes ranked in the language the new ones settled in (detected from
        # the text): a comparison of recall must not be one of stemming.
        with self.engine.begin() as conn:
            language = dataset_config(conn, NEW_DATASET)
            if language != dataset_config(conn, OLD_DATASET):
                set_language(conn, self.vault, OLD_DATASET, language)
                self.say(f"ranking both in the language detected: {language}")
        # And embedded in the model that language calls for (the old episodes were staged
        # before it was known; the new dataset may have settled too late for the pipeline
        # to move it): the Summariser's decision, applied whatever the dataset's size.
        for dataset in (NEW_DATASET, OLD_DATASET):
            followed = follow_language(
                self.engine,
                self.vault,
                self.embedders,
                dataset,
                late=late_chunks(self.settings.embedding, self.embedder),
                capped=False,
            )
            if followed.moved is not None:
                self.say(f"{dataset} moved to {followed.model or self.embedder.name}")

    def embedder_of(self, conn: Connection, dataset: str) -> Embedder:
        """The model ``dataset``'s vectors are in (its language's: :attr:`embedders`)."""
        return self.embedders.get(embedding_space.dataset_model(conn, dataset))

    # -- 4. compare

    def _episodes(self, conn: Connection, dataset: str, thread_id: uuid.UUID) -> list[Any]:
        rows, _ = recall_queries.list_episodes(
            conn, dataset, status=None, thread_id=thread_id, before=None, limit=100_000
        )
        opened = self.vault.open_rows(conn, dataset, list(rows), "episodes")
        return sorted(opened, key=lambda r: (r["start_sequence"], r["end_sequence"]))

    def compare(self, queries: list[str], k: int) -> tuple[list[ThreadDiff], list[QueryDiff]]:
        diffs: list[ThreadDiff] = []
        with self.engine.connect() as conn:
            for thread in self.threads:
                diffs.append(self._compare_thread(conn, thread))
            found = [self._compare_query(conn, q, k) for q in queries] if queries else []
        return diffs, found

    def _compare_thread(self, conn: Connection, thread: _Thread) -> ThreadDiff:
        old_windows = [Window(e.start, e.end, e.trigger, e.status) for e in thread.old]
        covered = max((e.end for e in thread.old), default=0)
        diff = ThreadDiff(
            thread_id=thread.source_id,
            label=thread.label,
            messages=thread.message_count,
            old_windows=old_windows,
            new_windows=[],
            summary_similarity=None,
            entities_added=[],
            entities_removed=[],
            uncovered_at_export=(
                [covered + 1, thread.message_count] if covered < thread.message_count else None
            ),
            skipped=thread.skipped,
        )
        if thread.skipped:
            return diff
        new = self._episodes(conn, NEW_DATASET, thread.new_id)
        diff.new_windows = [
            Window(r["start_sequence"], r["end_sequence"], r["trigger"], r["status"]) for r in new
        ]
        old_current = [e for e in thread.old if e.status == "completed" and e.summary]
        new_current = [r for r in new if r["status"] == "completed" and r["summary"]]
        if old_current and new_current:
            embedder = self.embedder_of(conn, NEW_DATASET)
            vectors = embedder.embed([old_current[-1].summary, new_current[-1]["summary"]])
            diff.summary_similarity = round(_cosine(vectors[0], vectors[1]), 4)
        old_entities = {
            x for e in thread.old if e.status in ("completed", "archived") for x in e.entities
        }
        new_entities = {
            str(x)
            for r in new
            if r["status"] in ("completed", "archived")
            for x in (r["entities"] or [])
        }
        diff.entities_added = sorted(new_entities - old_entities)
        diff.entities_removed = sorted(old_entities - new_entities)
        return diff

    def _compare_query(self, conn: Connection, query: str, k: int) -> QueryDiff:
        settings = self.settings.recall
        as_of = self.latest
        by_id = {str(t.new_id): t.source_id for t in self.threads}
        by_id |= {str(t.old_id): t.source_id for t in self.threads}
        ranked: dict[str, list[str]] = {}
        for dataset in (OLD_DATASET, NEW_DATASET):
            # As Recall: the query in the dataset's model, ranked with that model's curves.
            embedder = self.embedder_of(conn, dataset)
            answer = recall.recall(
                conn,
                self.vault,
                recall.RecallQuery(
                    dataset=dataset,
                    query=query,
                    include_episodes=True,
                    limit=k,
                    similarity_weight=settings.similarity_weight,
                    recency_weight=settings.recency_weight,
                    filters=RecallFilters(as_of=as_of),
                    ranking=recall.ranking_from(settings, embedder.name),
                ),
                embedder.embed_query(query),
            )
            ranked[dataset] = [
                by_id.get(str(r["thread_id"]), str(r["thread_id"])) for r in answer.rows
            ]
        return QueryDiff(query=query, k=k, old=ranked[OLD_DATASET], new=ranked[NEW_DATASET])
