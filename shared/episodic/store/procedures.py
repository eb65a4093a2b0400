"""Procedural memory's tables: outcomes, candidates and the procedures derived from them.

``procedure_candidates`` holds what each episode's stretch of tool use taught (one row per
episode, written by the Summariser's extraction stage); ``outcomes`` how threads and
stretches turned out (RecordOutcome). ``procedures`` is derived: :func:`rebuild` recomputes
a dataset's procedures from its candidates and their outcomes, in the transaction of
whatever changed them (a candidate stored, an outcome recorded or corrected, a thread
erased, a procedure deleted), under a per-dataset transaction lock so two changes of one
dataset recompute one after the other. A procedure's id is derived from its dataset and
signature, so it survives recomputation.

Every text that comes from a conversation (goals, steps, notes) is sealed with the
dataset's key, like messages.
"""

from __future__ import annotations

import contextlib
import uuid
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, text

from episodic import procedural
from episodic.crypto import DatasetKey, json_text, open_json
from episodic.errors import InvalidArgument, NotFound, ProviderError
from episodic.procedural import Candidate, Step, WindowTurn
from episodic.providers.dataset_embedders import DatasetEmbedders
from episodic.providers.types import Embedder
from episodic.store import audit, embedding_space
from episodic.store.distribution import across_datasets
from episodic.store.recall_index import hold_language
from episodic.store.relevance import cosine_scale_for, on_reference_scale
from episodic.store.vault import Vault
from episodic.tool_calls import from_payload

__all__ = [
    "NIL_EPISODE",
    "OUTCOMES",
    "delete_procedure",
    "get_procedure",
    "has_tool_calls",
    "list_procedures",
    "load_turns",
    "rebuild",
    "recall_procedures",
    "record_outcome",
    "relearn",
    "store_candidate",
]

OUTCOMES = ("success", "failure", "partial")
#: ``outcomes.episode_id`` of an outcome for the whole thread.
NIL_EPISODE = uuid.UUID(int=0)
MAX_NOTE_CHARS = 2000


def _to_reference(conn: Connection, dataset: str) -> Callable[[float], float]:
    """Maps the cosines of the dataset's embedder (its own model, else the store's) onto
    MiniLM's scale (store/relevance.py), on which :data:`episodic.procedural.FAILURE_MATCH`
    and a procedure's relevance read."""
    model = embedding_space.dataset_model(conn, dataset)
    if model is None:
        space = embedding_space.read(conn)
        model = space.model if space is not None else None
    scale = cosine_scale_for(model) if model is not None else None
    return lambda cosine: on_reference_scale(cosine, scale)


#: A candidate's outcome (``c``): its episode's own (``oe``), else its thread's (``ot``,
#: bound to ``:nil``). One definition for the rebuild and the ranking.
_OUTCOME_JOINS = (
    "LEFT JOIN outcomes oe ON oe.dataset = c.dataset AND oe.thread_id = c.thread_id "
    "  AND oe.episode_id = c.episode_id "
    "LEFT JOIN outcomes ot ON ot.dataset = c.dataset AND ot.thread_id = c.thread_id "
    "  AND ot.episode_id = :nil "
)
_OUTCOME = "coalesce(oe.outcome, ot.outcome)"


def _vector(value: Any) -> np.ndarray | None:
    """A stored vector as numpy (the driver hands pgvector's Vector, or an array)."""
    if value is None:
        return None
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, dtype=float)


def _db_now(conn: Connection) -> datetime:
    """The database's clock for this transaction (bound into writes: see record_outcome)."""
    return conn.execute(text("SELECT now()")).scalar_one()  # type: ignore[no-any-return]


def _lock(conn: Connection, dataset: str) -> None:
    """Serialises the recomputations of one dataset's procedures (transaction-scoped)."""
    key = zlib.crc32(f"episodic procedures {dataset}".encode()) - 2**31
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})


# ---- the extraction's input ------------------------------------------------------------


def has_tool_calls(conn: Connection, episode: Any) -> bool:
    """Whether the episode's window holds a tool call (one probe of the thread's calls)."""
    return (
        conn.execute(
            text(
                "SELECT 1 FROM message_tool_calls WHERE dataset = :d AND thread_id = :t "
                "AND sequence BETWEEN :s AND :e LIMIT 1"
            ),
            {
                "d": episode["dataset"],
                "t": episode["thread_id"],
                "s": episode["start_sequence"],
                "e": episode["end_sequence"],
            },
        ).first()
        is not None
    )


def load_turns(conn: Connection, vault: Vault, episode: Any) -> list[WindowTurn]:
    """The episode's window with its tool parts, as the extractor reads it."""
    rows = conn.execute(
        text(
            "SELECT sequence, role, content, tools, tool_call_id FROM messages "
            "WHERE dataset = :d AND thread_id = :t AND sequence BETWEEN :s AND :e "
            "ORDER BY sequence"
        ),
        {
            "d": episode["dataset"],
            "t": episode["thread_id"],
            "s": episode["start_sequence"],
            "e": episode["end_sequence"],
        },
    ).mappings()
    turns = []
    for r in vault.open_rows(conn, episode["dataset"], list(rows), "messages"):
        calls, name = from_payload(r["tools"])
        turns.append(
            WindowTurn(
                sequence=r["sequence"],
                role=r["role"],
                content=r["content"],
                tool_calls=calls,
                tool_call_id=r["tool_call_id"],
                name=name or None,
            )
        )
    return turns


def store_candidate(
    conn: Connection,
    key: DatasetKey,
    episode: Any,
    candidate: Candidate,
    embedding: np.ndarray | None,
) -> None:
    """Stores (or replaces: re-extraction) what the episode's stretch taught. A candidate
    an admin forgot (its procedure was deleted) stays forgotten."""
    conn.execute(
        text(
            "INSERT INTO procedure_candidates (dataset, episode_id, thread_id, start_sequence, "
            "end_sequence, signature, goal, steps, goal_embedding, extractor) VALUES "
            "(:d, :e, :t, :s, :end, :sig, :goal, :steps, :emb, :x) "
            "ON CONFLICT (dataset, episode_id) DO UPDATE SET signature = EXCLUDED.signature, "
            "goal = EXCLUDED.goal, steps = EXCLUDED.steps, "
            "goal_embedding = EXCLUDED.goal_embedding, extractor = EXCLUDED.extractor"
        ),
        {
            "d": episode["dataset"],
            "e": episode["episode_id"],
            "t": episode["thread_id"],
            "s": episode["start_sequence"],
            "end": episode["end_sequence"],
            "sig": candidate.signature,
            "goal": key.seal(candidate.goal, "procedure_candidates.goal"),
            "steps": key.seal(procedural.steps_json(candidate.steps), "procedure_candidates.steps"),
            "emb": None if embedding is None else np.asarray(embedding, dtype=np.float32),
            "x": candidate.extractor,
        },
    )


# ---- outcomes ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedOutcome:
    thread_id: uuid.UUID
    episode_id: uuid.UUID | None
    outcome: str
    changed: bool
    recorded_at: datetime


def record_outcome(
    conn: Connection,
    vault: Vault,
    *,
    dataset: str,
    thread_id: uuid.UUID,
    episode_id: uuid.UUID | None,
    outcome: str,
    score: float | None,
    note: str,
    actor: str,
) -> RecordedOutcome:
    """Records how the thread (or the episode's stretch) turned out; the last one stands.
    The same outcome again changes nothing (idempotent); another replaces it, is audited,
    and the dataset's procedures are recomputed."""
    if outcome not in OUTCOMES:
        raise InvalidArgument(
            "outcome is not set; use OUTCOME_SUCCESS, OUTCOME_FAILURE or OUTCOME_PARTIAL",
            field="outcome",
        )
    if score is not None and not 0.0 <= score <= 1.0:  # NaN fails this too
        raise InvalidArgument(f"score must be in [0, 1], got {score}", field="score")
    if len(note) > MAX_NOTE_CHARS:
        raise InvalidArgument(
            f"note is {len(note)} characters; the limit is {MAX_NOTE_CHARS}", field="note"
        )
    key = vault.for_write(conn, dataset)
    # The thread's row lock orders this with erasure (which deletes the thread under it).
    exists = conn.execute(
        text("SELECT 1 FROM threads WHERE dataset = :d AND thread_id = :t FOR SHARE"),
        {"d": dataset, "t": thread_id},
    ).first()
    if exists is None:
        raise NotFound(f"thread {thread_id} does not exist", thread_id=str(thread_id))
    if episode_id is not None:
        found = conn.execute(
            text(
                "SELECT 1 FROM episodes WHERE dataset = :d AND thread_id = :t AND episode_id = :e"
            ),
            {"d": dataset, "t": thread_id, "e": episode_id},
        ).first()
        if found is None:
            raise NotFound(
                f"episode {episode_id} is not an episode of thread {thread_id}",
                episode_id=str(episode_id),
            )
    previous = (
        conn.execute(
            text(
                "SELECT outcome, score, note, recorded_at FROM outcomes WHERE dataset = :d "
                "AND thread_id = :t AND episode_id = :e FOR UPDATE"
            ),
            {"d": dataset, "t": thread_id, "e": episode_id or NIL_EPISODE},
        )
        .mappings()
        .first()
    )
    if previous is not None:
        old_note = key.open(bytes(previous["note"]), "outcomes.note") if previous["note"] else ""
        if (previous["outcome"], previous["score"], old_note) == (outcome, score, note):
            return RecordedOutcome(thread_id, episode_id, outcome, False, previous["recorded_at"])
    # The clock is read first and bound: Citus refuses a clock in an upsert's SET.
    recorded_at = _db_now(conn)
    conn.execute(
        text(
            "INSERT INTO outcomes (dataset, thread_id, episode_id, outcome, score, note, "
            "recorded_at) VALUES (:d, :t, :e, :o, :score, :note, :at) "
            "ON CONFLICT (dataset, thread_id, episode_id) "
            "DO UPDATE SET outcome = EXCLUDED.outcome, score = EXCLUDED.score, "
            "note = EXCLUDED.note, recorded_at = EXCLUDED.recorded_at"
        ),
        {
            "at": recorded_at,
            "d": dataset,
            "t": thread_id,
            "e": episode_id or NIL_EPISODE,
            "o": outcome,
            "score": score,
            "note": key.seal(note, "outcomes.note") if note else None,
        },
    )
    audit.record(
        conn,
        key_prefix=actor,
        action="outcome.record",
        dataset=dataset,
        target=str(thread_id),
        details={
            "episode_id": str(episode_id) if episode_id else "",
            "outcome": outcome,
            "previous": previous["outcome"] if previous is not None else None,
            "score": score,
        },
    )
    rebuild(conn, key, dataset)
    return RecordedOutcome(thread_id, episode_id, outcome, True, recorded_at)


# ---- the derived procedures --------------------------------------------------------------


def rebuild(conn: Connection, key: DatasetKey, dataset: str) -> int:
    """Recomputes the dataset's procedures from its candidates and their outcomes (an
    episode's own outcome before its thread's); returns how many there are."""
    _lock(conn, dataset)
    rows = (
        conn.execute(
            text(
                "SELECT c.episode_id, c.thread_id, c.signature, c.goal, c.steps, "
                "c.goal_embedding, c.created_at, c.extractor, "
                f"{_OUTCOME} AS outcome FROM procedure_candidates c {_OUTCOME_JOINS}"
                "WHERE c.dataset = :d AND NOT c.forgotten"
            ),
            {"d": dataset, "nil": NIL_EPISODE},
        )
        .mappings()
        .all()
    )
    candidates = [
        Candidate(
            episode_id=str(r["episode_id"]),
            thread_id=str(r["thread_id"]),
            signature=r["signature"],
            goal=key.open(bytes(r["goal"]), "procedure_candidates.goal"),
            steps=tuple(
                Step.from_json(s)
                for s in open_json(key, bytes(r["steps"]), "procedure_candidates.steps")
            ),
            outcome=r["outcome"],
            embedding=_vector(r["goal_embedding"]),
            created_at=r["created_at"],
            extractor=r["extractor"],
        )
        for r in rows
    ]
    drafts = procedural.merge(candidates, to_reference=_to_reference(conn, dataset))
    now = _db_now(conn)
    kept = []
    for d in drafts:
        pid = procedural.procedure_id(dataset, d.signature)
        kept.append(d.signature)
        sources = [
            {"thread_id": c.thread_id, "episode_id": c.episode_id, "outcome": c.outcome}
            for c in d.sources
        ]
        conn.execute(
            text(
                "INSERT INTO procedures (dataset, procedure_id, signature, goal, example_goals, "
                "steps, sources, embedding, success_count, failure_count, partial_count, "
                "extractor, created_at, updated_at) VALUES (:d, :id, :sig, :goal, :examples, "
                ":steps, :sources, :emb, :ok, :bad, :partial, :x, :now, :now) "
                "ON CONFLICT (dataset, procedure_id) DO UPDATE SET goal = EXCLUDED.goal, "
                "example_goals = EXCLUDED.example_goals, steps = EXCLUDED.steps, "
                "sources = EXCLUDED.sources, embedding = EXCLUDED.embedding, "
                "success_count = EXCLUDED.success_count, failure_count = EXCLUDED.failure_count, "
                "partial_count = EXCLUDED.partial_count, extractor = EXCLUDED.extractor, "
                # Only a change of support moves updated_at (the clock is bound: Citus
                # refuses one in an upsert's SET).
                "updated_at = CASE WHEN (procedures.success_count, procedures.failure_count, "
                "procedures.partial_count) = (EXCLUDED.success_count, EXCLUDED.failure_count, "
                "EXCLUDED.partial_count) THEN procedures.updated_at "
                "ELSE EXCLUDED.updated_at END"
            ),
            {
                "d": dataset,
                "id": pid,
                "sig": d.signature,
                "goal": key.seal(d.goal, "procedures.goal"),
                "examples": key.seal(json_text(d.example_goals), "procedures.example_goals"),
                "steps": key.seal(procedural.steps_json(d.steps), "procedures.steps"),
                "sources": key.seal(json_text(sources), "procedures.sources"),
                "emb": None if d.embedding is None else np.asarray(d.embedding, dtype=np.float32),
                "ok": len(d.success),
                "bad": len(d.failure),
                "partial": len(d.partial),
                "x": d.extractor,
                "now": now,
            },
        )
    conn.execute(
        text(
            "DELETE FROM procedures WHERE dataset = :d "
            "AND NOT (signature = ANY(CAST(:kept AS text[])))"
        ),
        {"d": dataset, "kept": kept},
    )
    return len(kept)


def _open(key: DatasetKey, row: Any) -> dict[str, Any]:
    out = dict(row)
    out["goal"] = key.open(bytes(row["goal"]), "procedures.goal")
    out["example_goals"] = open_json(key, bytes(row["example_goals"]), "procedures.example_goals")
    out["steps"] = [
        Step.from_json(s) for s in open_json(key, bytes(row["steps"]), "procedures.steps")
    ]
    out["sources"] = open_json(key, bytes(row["sources"]), "procedures.sources")
    return out


_COLUMNS = (
    "dataset, procedure_id, signature, goal, example_goals, steps, sources, success_count, "
    "failure_count, partial_count, extractor, created_at, updated_at"
)


def list_procedures(
    conn: Connection,
    vault: Vault,
    dataset: str,
    *,
    after: tuple[int, str] | None,
    limit: int,
) -> tuple[list[dict[str, Any]], bool]:
    """The dataset's procedures, most successes first (keyset paging)."""
    rows = (
        conn.execute(
            text(
                f"SELECT {_COLUMNS} FROM procedures WHERE dataset = :d "
                "AND (CAST(:ok AS integer) IS NULL OR (success_count, CAST(procedure_id AS text)) "
                "  < (CAST(:ok AS integer), CAST(:pid AS text))) "
                "ORDER BY success_count DESC, CAST(procedure_id AS text) DESC LIMIT :n"
            ),
            {
                "d": dataset,
                "ok": after[0] if after else None,
                "pid": after[1] if after else None,
                "n": limit + 1,
            },
        )
        .mappings()
        .all()
    )
    if not rows:
        return [], False
    key = vault.for_read(conn, dataset)
    return [_open(key, r) for r in rows[:limit]], len(rows) > limit


def get_procedure(
    conn: Connection, vault: Vault, dataset: str, procedure_id: uuid.UUID
) -> dict[str, Any]:
    row = (
        conn.execute(
            text(f"SELECT {_COLUMNS} FROM procedures WHERE dataset = :d AND procedure_id = :id"),
            {"d": dataset, "id": procedure_id},
        )
        .mappings()
        .first()
    )
    if row is None:
        raise NotFound(
            f"dataset {dataset!r} has no procedure {procedure_id}", procedure_id=str(procedure_id)
        )
    return _open(vault.for_read(conn, dataset), row)


def delete_procedure(
    conn: Connection,
    vault: Vault,
    dataset: str,
    procedure_id: uuid.UUID,
    *,
    actor: str,
) -> int:
    """Deletes a procedure and forgets the candidates of its signature (they are not
    learned again); returns how many were forgotten."""
    _lock(conn, dataset)
    signature = conn.execute(
        text("SELECT signature FROM procedures WHERE dataset = :d AND procedure_id = :id"),
        {"d": dataset, "id": procedure_id},
    ).scalar()
    if signature is None:
        raise NotFound(
            f"dataset {dataset!r} has no procedure {procedure_id}", procedure_id=str(procedure_id)
        )
    forgotten = conn.execute(
        text(
            "UPDATE procedure_candidates SET forgotten = true WHERE dataset = :d "
            "AND signature = :sig AND NOT forgotten"
        ),
        {"d": dataset, "sig": signature},
    ).rowcount
    audit.record(
        conn,
        key_prefix=actor,
        action="procedure.delete",
        dataset=dataset,
        target=str(procedure_id),
        details={"forgotten_sources": forgotten},
    )
    rebuild(conn, vault.for_write(conn, dataset), dataset)
    return int(forgotten)


def recall_procedures(
    conn: Connection,
    vault: Vault,
    dataset: str,
    *,
    query_vector: np.ndarray | None,
    limit: int,
) -> list[tuple[dict[str, Any], float]]:
    """The dataset's procedures that best fit the query, by the vote of the requests they
    served nearest the query (:func:`episodic.procedural.rank`: the cosines between the
    query and their successful candidates' goals); a procedure's relevance is its best
    cosine. Without a query, the most supported and recently used. Procedures with more
    failures than successes are left out."""
    rows: Sequence[Any]
    if query_vector is None:
        rows = (
            conn.execute(
                text(
                    f"SELECT {_COLUMNS}, 0.0 AS cosine FROM procedures WHERE dataset = :d "
                    "AND failure_count <= success_count "
                    "ORDER BY success_count DESC, updated_at DESC LIMIT :n"
                ),
                {"d": dataset, "n": limit},
            )
            .mappings()
            .all()
        )
    else:
        # Every request a shown procedure served, with its cosine to the query; the
        # nearest vote (procedural.rank), then the chosen procedures are read.
        served: dict[str, tuple[int, list[float]]] = {}
        for signature, support, cosine in conn.execute(
            text(
                "SELECT c.signature, p.success_count, "
                "1.0 - (c.goal_embedding <=> CAST(:q AS vector)) AS cosine "
                "FROM procedure_candidates c "
                "JOIN procedures p ON p.dataset = c.dataset AND p.signature = c.signature "
                + _OUTCOME_JOINS
                + "WHERE c.dataset = :d AND NOT c.forgotten AND c.goal_embedding IS NOT NULL "
                f"  AND {_OUTCOME} = 'success' "
                "  AND p.failure_count <= p.success_count"
            ),
            {"d": dataset, "q": np.asarray(query_vector, dtype=np.float32), "nil": NIL_EPISODE},
        ):
            served.setdefault(signature, (int(support), []))[1].append(float(cosine))
        ranked = procedural.rank((sig, ok, cs) for sig, (ok, cs) in served.items())[:limit]
        if not ranked:
            return []
        found = {
            r["signature"]: r
            for r in conn.execute(
                text(
                    f"SELECT {_COLUMNS} FROM procedures WHERE dataset = :d "
                    "AND signature = ANY(CAST(:s AS text[]))"
                ),
                {"d": dataset, "s": [sig for sig, _ in ranked]},
            ).mappings()
        }
        rows = [{**found[sig], "cosine": best} for sig, best in ranked if sig in found]
    if not rows:
        return []
    key = vault.for_read(conn, dataset)
    to_reference = _to_reference(conn, dataset)
    return [
        (
            _open(key, r),
            min(1.0, max(0.0, to_reference(float(r["cosine"]))))
            if query_vector is not None
            else 0.0,
        )
        for r in rows
    ]


def forget_thread(
    conn: Connection, dataset: str, thread_id: uuid.UUID
) -> tuple[dict[str, list[str]], list[str]]:
    """Erasure: deletes what the thread taught (its candidates, outcomes and call index).
    Returns the deleted rows' identities by table, and the signatures of the candidates it
    had (whose procedures the caller recomputes)."""
    signatures = sorted(
        set(
            conn.execute(
                text(
                    "SELECT signature FROM procedure_candidates WHERE dataset = :d "
                    "AND thread_id = :t"
                ),
                {"d": dataset, "t": thread_id},
            ).scalars()
        )
    )
    out: dict[str, list[str]] = {}
    for table, identity in (
        ("procedure_candidates", "episode_id::text"),
        ("outcomes", "episode_id::text"),
        ("message_tool_calls", "call_id || '.' || sequence::text"),
    ):
        out[table] = [
            f"{thread_id}/{i}"
            for i in conn.execute(
                text(
                    f"DELETE FROM {table} WHERE dataset = :d AND thread_id = :t "
                    f"RETURNING {identity}"
                ),
                {"d": dataset, "t": thread_id},
            ).scalars()
        ]
    return out, signatures


def drop_signatures(conn: Connection, dataset: str, signatures: list[str]) -> list[str]:
    """Deletes the dataset's procedures of ``signatures`` (an erasure with no key to
    recompute them: the next change of the dataset's candidates learns them again)."""
    return [
        str(i)
        for i in conn.execute(
            text(
                "DELETE FROM procedures WHERE dataset = :d "
                "AND signature = ANY(CAST(:s AS text[])) RETURNING procedure_id"
            ),
            {"d": dataset, "s": signatures},
        ).scalars()
    ]


def erase_dataset_procedures(conn: Connection, dataset: str) -> list[str]:
    """Dataset erasure: its procedures (their candidates went with the threads)."""
    return [
        str(i)
        for i in conn.execute(
            text("DELETE FROM procedures WHERE dataset = :d RETURNING procedure_id"),
            {"d": dataset},
        ).scalars()
    ]


@dataclass(frozen=True)
class Relearned:
    datasets: int
    episodes: int
    candidates: int
    procedures: int


def relearn(
    engine: Engine,
    vault: Vault,
    embedders: DatasetEmbedders | Embedder,
    *,
    dataset: str | None = None,
    page: int = 200,
    writer: procedural.ProcedureWriter | None = None,
) -> Relearned:
    """Extracts again what every completed episode's window of tool use teaches (after the
    extractor or the embedder changed) and recomputes the procedures: each dataset in one
    transaction of its own, its episodes read a page at a time. A candidate an admin
    forgot stays forgotten. ``dataset``: only that one.

    Each dataset's goals are embedded by its own model (``datasets.embedding_model``, as the
    Summariser embeds them; ``embedders``, an Embedder alone: every dataset's), read under
    the dataset's language lock held shared, so a move to another model
    (services/summariser/spaces.py) runs wholly before or after; FailedPrecondition for a
    dataset whose model this process does not run."""
    if not isinstance(embedders, DatasetEmbedders):
        embedders = DatasetEmbedders(embedders)
    with engine.connect() as conn:
        datasets = (
            [dataset]
            if dataset is not None
            else list(
                conn.execute(
                    text(
                        across_datasets("relearning walks every dataset with tool calls")
                        + "SELECT DISTINCT dataset FROM message_tool_calls ORDER BY dataset"
                    )
                ).scalars()
            )
        )
    episodes = candidates = procedures = 0
    for name in datasets:
        with engine.begin() as conn:
            hold_language(conn, name, exclusive=False)  # before the dataset's row (for_write)
            embed_query = embedders.get(embedding_space.dataset_model(conn, name)).embed_query
            key = vault.for_write(conn, name)
            after = uuid.UUID(int=0)
            while True:
                rows = (
                    conn.execute(
                        text(
                            "SELECT dataset, episode_id, thread_id, start_sequence, "
                            "end_sequence FROM episodes WHERE dataset = :d "
                            "AND completed_at IS NOT NULL AND episode_id > :after "
                            "ORDER BY episode_id LIMIT :n"
                        ),
                        {"d": name, "after": after, "n": page},
                    )
                    .mappings()
                    .all()
                )
                for episode in rows:
                    episodes += 1
                    if not has_tool_calls(conn, episode):
                        continue
                    turns = load_turns(conn, vault, episode)
                    candidate = procedural.extract(
                        turns,
                        episode_id=str(episode["episode_id"]),
                        thread_id=str(episode["thread_id"]),
                    )
                    if candidate is None:
                        continue
                    if writer is not None:  # as the Summariser: the offline words on failure
                        with contextlib.suppress(ProviderError):
                            candidate = writer.write(turns, candidate)
                    store_candidate(conn, key, episode, candidate, embed_query(candidate.goal))
                    candidates += 1
                if len(rows) < page:
                    break
                after = rows[-1]["episode_id"]
            procedures += rebuild(conn, key, name)
    return Relearned(len(datasets), episodes, candidates, procedures)
