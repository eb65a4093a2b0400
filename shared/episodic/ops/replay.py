"""Replay an export through the current pipeline and report what changed —
``episodic replay`` (seed 003, "Replay for Eval": when you change the agent, re-run old
episodes and check the new output is still good).

What it does, on a scratch database (an embedded PostgreSQL in a temporary directory, or a
database created for the run on ``admin_url`` and dropped afterwards; never the suite's
own database):

1. **Stage.** Every thread of the export is written, with all its messages, into the
   dataset ``replay-old``, and — when recall queries are asked — its old episodes too,
   window by window, completed with their exported summary, key learnings, entities,
   event type and actor, embedded with the configured embedder and indexed for recall
   exactly like the summariser indexes (:mod:`episodic.store.recall_index`); once the
   replay knows the export's language (step 3), they are moved to its model like the
   Summariser moves a dataset (below).
2. **Simulate.** The threads are written again, into ``replay-new``, in time order across
   the whole export, through the same domain functions the services run: Ingest's
   ``create_thread``/``add_messages``/``end_thread`` and the Scheduler's
   ``record_thread_started``/``record_activity``/``request_episode``, with the Scheduler's
   clock injected. Before each event every timer due by then fires
   (``claim_due_timers``/``fire_timer`` at the event's time), so the inactivity timer
   (``EPISODIC_AUTO_EPISODE_INTERVAL``), the new-thread pull-forward and explicit ends
   (``EndThread``, reconstructed from the old explicit episodes and the thread's last end)
   happen when they would have. After the last event the remaining timers fire, as if the
   pipeline had been left running. The backstop never fires in a replay: it only covers
   threads whose timer notices were lost, and here none is.
3. **Summarise.** The summariser's :class:`Pipeline` (the configured LLM and embedder,
   ``EPISODIC_LLM_*`` / ``EPISODIC_EMBEDDING_*``) works through the new episodes in the
   order they were opened, retries included; semantic extraction is skipped.
4. **Compare**, per thread: the windows (old and new ``start..end`` lists), the current
   summaries (cosine similarity of the two summary texts' vectors, in the replayed
   dataset's model), and the entities of all summarised episodes (added, removed); per
   query: the top-k threads Recall ranks over the old and the new episodes (same ranking,
   same ``as_of``, the query embedded by each dataset's model) and their overlap.

Each dataset's model. As the Summariser does (services/summariser/spaces.py, issue 40), a
dataset whose language is not English is embedded by the multilingual model when one is on
(``EPISODIC_EMBEDDING_MULTILINGUAL``): the replay builds the same embedders
(:func:`~episodic.providers.factory.make_dataset_embedders`), the pipeline detects the
language and moves the new dataset to its model, and the old dataset, given that language,
is moved by the same :func:`follow_language` (uncapped, like ``episodic reindex --reembed
--dataset``), so both are compared in one space, the one the language calls for.

The clock. ``received`` (default) replays each message at the time the old suite received
it — the clock its timers ran on — so an unchanged pipeline reproduces the old windows.
``created`` replays at the messages' own timestamps (what the writer said they were,
e.g. the original times of a backfill): how the pipeline would have cut the conversation
had it been live.

Every write goes through the store's domain functions (never SQL of its own), so a change
of the schema or of how text is stored (sealed per dataset) is followed here for free; the
scratch dataset keys are random and never leave the process.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Connection, Engine

from episodic.config import Settings
from episodic.crypto import LocalKeyring, new_data_key
from episodic.ops.export import FORMAT, FORMAT_VERSION
from episodic.providers.factory import (
    late_chunks,
    make_dataset_embedders,
    make_embedder,
    make_summariser,
)
from episodic.providers.types import Embedder
from episodic.store import embedding_space, migrate, recall_queries
from episodic.store import episodes as states
from episodic.store.db import make_engine
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

__all__ = [
    "CLOCKS",
    "ExportReader",
    "QueryDiff",
    "ReplayError",
    "ReplayReport",
    "ThreadDiff",
    "replay",
    "scratch_database",
]

CLOCKS = ("received", "created")
OLD_DATASET = "replay-old"
NEW_DATASET = "replay-new"
SIMILARITY_MEASURE = (
    "cosine of the two current summaries' vectors, in the model of the replayed dataset's language"
)
_NAMESPACE = uuid.UUID("6f1d2c3e-8a4b-4c5d-9e6f-7a8b9c0d1e2f")
_TICK = timedelta(microseconds=1)
_BATCH = 500


class ReplayError(ValueError):
    """The input is not an export replay can read (a ValueError: the CLI answers 2)."""


# --------------------------------------------------------------------------- reading


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass
class Bundle:
    """One thread of an export: its record, messages and episodes."""

    thread: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)


class ExportReader:
    """Reads ``episodic export`` lines one thread at a time (the export writes a thread's
    messages and episodes right after it). ``header`` is the ``dataset`` line; ``complete``
    says whether the ``end`` line was seen (after :meth:`bundles` is exhausted)."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = enumerate(lines, start=1)
        self.header: dict[str, Any] = {}
        self.complete = False
        for number, record in self._records():
            if record.get("type") != "dataset":
                raise ReplayError(
                    f"line {number}: not an episodic export (the first record must be "
                    '{"type": "dataset", …}, as `episodic export` writes it)'
                )
            if record.get("format", FORMAT) != FORMAT:
                raise ReplayError(f"line {number}: format {record.get('format')!r} is not {FORMAT}")
            version = record.get("version")
            if not isinstance(version, int) or version > FORMAT_VERSION:
                raise ReplayError(
                    f"line {number}: export format version {version!r}; this replay reads "
                    f"up to {FORMAT_VERSION} (upgrade episodic)"
                )
            self.header = record
            break
        else:
            raise ReplayError("the export is empty")

    def _records(self) -> Iterator[tuple[int, dict[str, Any]]]:
        for number, raw in self._lines:
            text = raw.strip()
            if not text:
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as err:
                raise ReplayError(f"line {number}: not JSON: {err.msg}") from None
            if not isinstance(record, dict):
                raise ReplayError(f"line {number}: not a JSON object")
            yield number, record

    def bundles(self) -> Iterator[Bundle]:
        current: Bundle | None = None
        done: set[str] = set()
        for number, record in self._records():
            kind = record.get("type")
            if kind == "thread":
                if current is not None:
                    done.add(current.thread["thread_id"])
                    yield current
                thread_id = record.get("thread_id")
                if not isinstance(thread_id, str) or not thread_id or thread_id in done:
                    raise ReplayError(f"line {number}: a thread without an id, or listed twice")
                current = Bundle(record)
            elif kind in ("message", "episode"):
                if current is None or record.get("thread_id") != current.thread["thread_id"]:
                    raise ReplayError(
                        f"line {number}: a {kind} of thread {record.get('thread_id')} outside "
                        "that thread's block (replay reads exports as `episodic export` "
                        "writes them: each thread followed by its messages and episodes)"
                    )
                (current.messages if kind == "message" else current.episodes).append(record)
            elif kind == "end":
                self.complete = True
            # Other types (written by a newer exporter) are ignored.
        if current is not None:
            yield current


# --------------------------------------------------------------------------- the scratch DB


def _libpq(url: str) -> str:
    for prefix in ("postgresql+psycopg://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql://" + url[len(prefix) :]
    return url


def _with_database(url: str, database: str) -> str:
    head, _, query = url.partition("?")
    return f"{head.rsplit('/', 1)[0]}/{database}" + (f"?{query}" if query else "")


@contextlib.contextmanager
def scratch_database(admin_url: str | None, embedding_dimension: int) -> Iterator[str]:
    """A migrated database that is dropped afterwards: on the server of ``admin_url``
    (a user that may create databases), else on an embedded PostgreSQL in a temporary
    directory (the ``embedded`` extra), stopped afterwards."""
    import psycopg

    with tempfile.TemporaryDirectory(prefix="episodic-replay-") as tmp:
        server = None
        if admin_url:
            base = _libpq(admin_url)
        else:
            from episodic.ops.runtime import EmbeddedPostgres

            server = EmbeddedPostgres(Path(tmp) / "pgdata")
            base = server.start()
        name = f"episodic_replay_{uuid.uuid4().hex[:12]}"
        try:
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            try:
                url = _with_database(base, name)
                migrate.upgrade(url, embedding_dimension)
                yield url
            finally:
                with psycopg.connect(base, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            if server is not None:
                server.stop()


# --------------------------------------------------------------------------- the plan


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


# --------------------------------------------------------------------------- the report


@dataclass
class Window:
    start: int
    end: int
    trigger: str
    status: str

    def __str__(self) -> str:
        return f"{self.start}-{self.end}"


@dataclass
class ThreadDiff:
    """How one thread's episodes changed."""

    thread_id: str
    label: str
    messages: int
    old_windows: list[Window]
    new_windows: list[Window]
    summary_similarity: float | None
    entities_added: list[str]
    entities_removed: list[str]
    uncovered_at_export: list[int] | None = None  # [start, end] no old episode covered
    skipped: str = ""

    @property
    def windows_identical(self) -> bool:
        return [(w.start, w.end) for w in self.old_windows] == [
            (w.start, w.end) for w in self.new_windows
        ]


@dataclass
class QueryDiff:
    """The top-k threads of one query over the old and the new episodes."""

    query: str
    k: int
    old: list[str]
    new: list[str]

    @property
    def overlap(self) -> float:
        """Shared threads over the ranks filled (1.0 when both are empty)."""
        filled = max(len(self.old), len(self.new))
        return len(set(self.old) & set(self.new)) / filled if filled else 1.0


@dataclass
class ReplayReport:
    dataset: str
    exported_at: str | None
    export_complete: bool
    clock: str
    settings: dict[str, Any]
    threads: list[ThreadDiff]
    queries: list[QueryDiff]
    old_episodes: int
    new_episodes: int
    failed_episodes: int

    def as_json(self) -> dict[str, Any]:
        similarities = [t.summary_similarity for t in self.threads if t.summary_similarity]
        return {
            "dataset": self.dataset,
            "exported_at": self.exported_at,
            "export_complete": self.export_complete,
            "clock": self.clock,
            "settings": self.settings,
            "summary_similarity_measure": SIMILARITY_MEASURE,
            "totals": {
                "threads": len(self.threads),
                "threads_replayed": sum(1 for t in self.threads if not t.skipped),
                "windows_identical": sum(
                    1 for t in self.threads if not t.skipped and t.windows_identical
                ),
                "old_episodes": self.old_episodes,
                "new_episodes": self.new_episodes,
                "new_episodes_failed": self.failed_episodes,
                "mean_summary_similarity": (
                    round(sum(similarities) / len(similarities), 4) if similarities else None
                ),
                "mean_overlap": (
                    round(sum(q.overlap for q in self.queries) / len(self.queries), 4)
                    if self.queries
                    else None
                ),
            },
            "threads": [
                {
                    "thread_id": t.thread_id,
                    "label": t.label,
                    "messages": t.messages,
                    "skipped": t.skipped or None,
                    "windows_identical": t.windows_identical,
                    "old_windows": [vars(w) for w in t.old_windows],
                    "new_windows": [vars(w) for w in t.new_windows],
                    "uncovered_at_export": t.uncovered_at_export,
                    "summary_similarity": t.summary_similarity,
                    "entities_added": t.entities_added,
                    "entities_removed": t.entities_removed,
                }
                for t in self.threads
            ],
            "recall": [
                {
                    "query": q.query,
                    "k": q.k,
                    "old": q.old,
                    "new": q.new,
                    "overlap": round(q.overlap, 4),
                }
                for q in self.queries
            ],
        }

    def render(self) -> str:
        data = self.as_json()
        totals = data["totals"]
        out = [
            f"replay of dataset {self.dataset} (exported {self.exported_at or '?'}"
            + ("" if self.export_complete else ", INCOMPLETE export: no end line")
            + f"), clock: {self.clock}",
            "pipeline: " + ", ".join(f"{k} {v}" for k, v in self.settings.items() if k != "recall"),
            f"episodes: {self.old_episodes} old, {self.new_episodes} new"
            + (f" ({self.failed_episodes} failed)" if self.failed_episodes else ""),
            f"windows identical in {totals['windows_identical']} of "
            f"{totals['threads_replayed']} threads",
        ]
        if totals["mean_summary_similarity"] is not None:
            out.append(
                f"summary similarity ({SIMILARITY_MEASURE}): mean "
                f"{totals['mean_summary_similarity']:.3f}"
            )
        out.append("")
        for t in self.threads:
            name = t.thread_id + (f' "{t.label}"' if t.label else "")
            if t.skipped:
                out.append(f"  {name}: skipped ({t.skipped})")
                continue
            mark = "same windows" if t.windows_identical else "WINDOWS DIFFER"
            similarity = (
                f", summary similarity {t.summary_similarity:.3f}"
                if t.summary_similarity is not None
                else ""
            )
            count = f"{t.messages} message" + ("" if t.messages == 1 else "s")
            out.append(f"  {name}: {count}, {mark}{similarity}")
            if not t.windows_identical:
                out.append(f"      old: {_windows(t.old_windows)}")
                out.append(f"      new: {_windows(t.new_windows)}")
            if t.uncovered_at_export:
                start, end = t.uncovered_at_export
                out.append(f"      messages {start}-{end} had no old episode at export")
            if t.entities_added or t.entities_removed:
                changes = [f"+{e}" for e in t.entities_added] + [
                    f"-{e}" for e in t.entities_removed
                ]
                out.append(f"      entities: {' '.join(changes)}")
        if self.queries:
            out.append("")
            out.append(
                f"recall, top {self.queries[0].k} threads (old → new), mean overlap "
                f"{totals['mean_overlap']:.2f}:"
            )
            labels = {t.thread_id: t.label for t in self.threads}

            def ranked(ids: list[str]) -> str:
                return ", ".join(
                    f"{i[:8]}" + (f' "{labels[i]}"' if labels.get(i) else "") for i in ids
                )

            for q in self.queries:
                out.append(f"  {q.query!r}: overlap {q.overlap:.2f}")
                out.append(f"      old: {ranked(q.old) or '(none)'}")
                out.append(f"      new: {ranked(q.new) or '(none)'}")
        return "\n".join(out)


def _windows(windows: list[Window]) -> str:
    return " ".join(f"{w.start}-{w.end} ({w.trigger})" for w in windows) or "(none)"


# --------------------------------------------------------------------------- the run


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


class _Run:
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
                created_at=_time(e.get("created_at")),
            )
            for e in bundle.episodes
        ]
        old.sort(key=lambda e: (e.start, e.end))
        thread = _Thread(
            source_id=source_id,
            new_id=_thread_uuid(source_id),
            old_id=uuid.uuid5(_NAMESPACE, "old:" + source_id),
            label=str(record.get("label") or ""),
            metadata=_dict(record.get("metadata")),
            created_at=_time(record.get("created_at")),
            ended_at=_time(record.get("ended_at")),
            received=[_time(m.get("received_at")) for m in messages],
            written=[_time(m.get("created_at")) for m in messages],
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
                    metadata=_dict(m.get("metadata")),
                    created_at=_time(m.get("created_at")),
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


def _settings_summary(settings: Settings, embedder: Embedder, dataset_model: str) -> dict[str, Any]:
    """The settings the replay ran with; ``dataset_model``: the model that embedded the
    replayed dataset (its language's, which may not be the store's ``embedder``)."""

    def seconds(value: timedelta) -> str:
        return f"{value.total_seconds():g}s"

    return {
        "summariser": settings.llm.llm_provider,
        "embedder": embedder.name,
        "dataset_embedder": dataset_model,
        "auto_episode_interval": seconds(settings.scheduler.auto_episode_interval),
        "sibling_pull_forward": seconds(settings.scheduler.sibling_pull_forward),
        "max_retries": settings.recovery.max_retries,
        "recall": {
            "similarity_weight": settings.recall.similarity_weight,
            "recency_weight": settings.recall.recency_weight,
            "ranking_fusion": settings.recall.ranking_fusion,
            "recency_span": settings.recall.recency_span,
        },
    }


def replay(
    lines: Iterable[str],
    *,
    settings: Settings,
    queries: list[str] | None = None,
    k: int = 5,
    clock: str = "received",
    admin_url: str | None = None,
    report: Callable[[str], None] = lambda _: None,
) -> ReplayReport:
    """Replays the export ``lines`` (see the module docstring) and reports the differences.
    ``report`` receives progress lines."""
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {', '.join(CLOCKS)}")
    if k < 1:
        raise ValueError("k must be at least 1")
    queries = [q for q in (queries or []) if q.strip()]
    reader = ExportReader(lines)
    dimension = settings.database.embedding_dimension
    embedder = make_embedder(settings.embedding, dimension, bulk=True)
    with scratch_database(admin_url, dimension) as url:
        engine = make_engine(url, pool_size=2, application_name="episodic-replay")
        try:
            run = _Run(
                engine, settings, embedder, with_recall=bool(queries), clock=clock, report=report
            )
            for bundle in reader.bundles():
                run.stage(bundle)
                if len(run.threads) % 100 == 0:
                    report(f"staged {len(run.threads)} thread(s)")
            exported_at = _time(reader.header.get("exported_at"))
            if exported_at is not None and (run.latest is None or exported_at > run.latest):
                run.latest = exported_at
            report(f"staged {len(run.threads)} thread(s); replaying them in time order")
            run.simulate()
            report("summarising the new episodes")
            run.summarise()
            report("comparing")
            threads, found = run.compare(queries, k)
            with engine.connect() as conn:
                dataset_model = run.embedder_of(conn, NEW_DATASET).name
        finally:
            engine.dispose()
    return ReplayReport(
        dataset=str(reader.header.get("dataset") or ""),
        exported_at=reader.header.get("exported_at"),
        export_complete=reader.complete,
        clock=clock,
        settings=_settings_summary(settings, embedder, dataset_model),
        threads=threads,
        queries=found,
        old_episodes=sum(len(t.old_windows) for t in threads),
        new_episodes=sum(len(t.new_windows) for t in threads),
        failed_episodes=sum(1 for t in threads for w in t.new_windows if w.status == "failed"),
    )
