"""Which embedding model made the store's vectors (its *embedding space*), and the checks
that keep every other model's vectors and queries out of it.

Vectors of two models do not compare, even at one dimension: MiniLM and
multilingual-e5-small are both 384-dimensional, so the dimension check
(:func:`~episodic.store.db.check_embedding_dimension`) lets a switch of
``EPISODIC_EMBEDDING_PROVIDER`` through, and Recall would then rank a new model's query
against the old model's vectors — by noise, with no error anywhere. The store records its
model in ``embedding_space`` (one row, migration 0014) and every process that embeds
checks it:

- **Starting** (the Summariser, Recall, ``episodic reindex``): the process's model must be
  the store's, or the one a re-embedding in progress moves the store to
  (:meth:`Space.compatible`). The first writer (Summariser, ``reindex``) to start on a
  store records its model (:func:`claim`; Recall only reads, as it may run on a read
  replica); a store from before migration 0014 is taken to hold the vectors of the first
  model that starts on it (nothing else could say).
- **Writing vectors** (each Summariser pass, ``reindex``): only the model the store is
  becoming (:attr:`Space.target`): during a re-embedding to B, a Summariser of B keeps
  completing episodes (their vectors are B's already) and one of the old model waits.
- **Answering** (Recall): a Recall started before the store was moved to another model
  answers FAILED_PRECONDITION once it notices (:class:`SpaceWatch`, every few seconds)
  rather than compare its queries with vectors it cannot read.

The fence (:data:`SPACE_LOCK`): a Summariser pass (the worker's, or one ProcessPending
asks for: :func:`writing`) holds this advisory lock *shared* while it writes vectors, and
a re-embedding takes it *exclusively* to record its target (it waits for the passes in
flight). A pass that starts afterwards reads the new target and,
if it is not its model, writes nothing. So once the re-embedding's mark is committed,
every vector written is the target model's, and re-embedding each thread once suffices
(services/summariser/reembed.py).

A dataset's own space (migration 0021, issue 40): a dataset whose language is not English
is embedded by the multilingual model when one is on (providers/dataset_embedders.py), and
``datasets.embedding_model`` names it (NULL: the store's model, which the above governs; a
store-wide re-embedding leaves the other datasets alone). It changes only under the
dataset's language lock held exclusively, in the transaction that re-embeds the dataset's
vectors (services/summariser/spaces.py); whatever writes a dataset's vectors holds that
lock shared and reads the model again under it (:func:`dataset_model` with ``for_write``
after :func:`~episodic.store.recall_index.dataset_config`), and embeds again when it
changed — as it stems again when the language changed. Recall reads it on each call and
embeds its query with that model, so a query never meets another model's vectors.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Engine, text

from episodic.errors import FailedPrecondition, SchemaMismatch

log = logging.getLogger(__name__)

#: The advisory lock of the fence (see the module docstring); migrations hold 7_263_110_425.
SPACE_LOCK = 7_263_110_426

#: How often a running Recall re-reads the space (seconds): one small read per interval.
WATCH_INTERVAL = 5.0


@dataclass(frozen=True)
class Space:
    """The ``embedding_space`` row."""

    model: str  # the embedder whose vectors the store holds
    dimension: int
    recorded_at: datetime
    epoch: int  # re-embeddings begun; a thread below it is not re-embedded in this one
    reembedding_to: str | None  # set while `episodic reindex --reembed` runs (or stopped)
    reembed_started_at: datetime | None

    @property
    def target(self) -> str:
        """The model whose vectors may be written now: the one the store is becoming."""
        return self.reembedding_to or self.model

    def compatible(self, model: str) -> bool:
        """Whether a process embedding with ``model`` may start (and Recall answer): its
        vectors are the store's, or those a re-embedding in progress is writing."""
        return model in (self.model, self.reembedding_to)

    def describe(self) -> str:
        if self.reembedding_to is None:
            return f"vectors of {self.model} (recorded {self.recorded_at:%Y-%m-%d %H:%M} UTC)"
        return (
            f"vectors of {self.model}, being re-embedded with {self.reembedding_to} "
            f"(since {self.reembed_started_at:%Y-%m-%d %H:%M} UTC)"
        )


_COLUMNS = "model, dimension, recorded_at, epoch, reembedding_to, reembed_started_at"


def read(conn: Connection, *, for_update: bool = False) -> Space | None:
    """The store's space, or None when no process has recorded one yet."""
    row = conn.execute(
        text(f"SELECT {_COLUMNS} FROM embedding_space" + (" FOR UPDATE" if for_update else ""))
    ).first()
    return None if row is None else Space(*row)


def claim(engine: Engine, model: str, dimension: int) -> Space:
    """The store's space, recording ``model`` as its model if none is recorded yet (two
    processes starting at once: the first insert wins, the other reads it)."""
    with engine.begin() as conn:
        inserted = conn.execute(
            text(
                "INSERT INTO embedding_space (model, dimension) VALUES (:m, :n) "
                f"ON CONFLICT (singleton) DO NOTHING RETURNING {_COLUMNS}"
            ),
            {"m": model, "n": dimension},
        ).first()
        if inserted is not None:
            log.info("recorded the store's embedding model: %s", model)
            return Space(*inserted)
        space = read(conn)
    assert space is not None  # the row is never deleted
    return space


def mismatch(space: Space, model: str, who: str) -> str:
    """What a person reads when ``who`` (embedding with ``model``) may not use the store."""
    if space.reembedding_to is not None:
        return (
            f"the store holds {space.describe()}, and this {who} embeds with {model}. "
            f"Start it with the settings of {space.reembedding_to}, and finish the "
            f"re-embedding with `episodic reindex --reembed` under those settings."
        )
    return (
        f"the store holds vectors of {space.model}, but this {who} embeds with {model}: two "
        "models' vectors do not compare. Set EPISODIC_EMBEDDING_PROVIDER (and "
        f"EPISODIC_EMBEDDING_MODEL) back to {space.model}'s, or move the store to {model} "
        "with `episodic reindex --reembed` run under these settings (docs: concepts/episodes.md, "
        "Changing the embedding model)."
    )


def check_start(
    engine: Engine, model: str, dimension: int, *, who: str, record: bool = True
) -> Space | None:
    """Refuses to start (SchemaMismatch) a ``who`` whose model the store cannot use.
    ``record``: record ``model`` on a store that has none (a writer: the Summariser,
    ``reindex``); Recall only reads (it may run on a read replica), and a store with no
    model recorded yet is one it may answer from."""
    if record:
        space: Space | None = claim(engine, model, dimension)
    else:
        with engine.connect() as conn:
            space = read(conn)
    if space is not None and not space.compatible(model):
        raise SchemaMismatch(mismatch(space, model, who), reason="EMBEDDING_MODEL_MISMATCH")
    return space


def check_writer(engine: Engine, model: str, dimension: int, *, who: str) -> Space:
    """:func:`check_start` for a one-off writer (``episodic reindex``): it must also be the
    model the store is becoming, since it would write vectors at once."""
    space = check_start(engine, model, dimension, who=who)
    assert space is not None  # recorded by check_start
    if space.target != model:
        raise SchemaMismatch(mismatch(space, model, who), reason="EMBEDDING_MODEL_MISMATCH")
    return space


@contextmanager
def writing(engine: Engine) -> Iterator[None]:
    """Holds the fence shared while a pass that writes vectors runs (on a connection of
    ``engine`` held meanwhile): a re-embedding cannot record its target until it ends."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("SELECT pg_advisory_lock_shared(:k)"), {"k": SPACE_LOCK})
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock_shared(:k)"), {"k": SPACE_LOCK})


def may_write(conn: Connection, model: str) -> tuple[bool, Space | None]:
    """Whether vectors of ``model`` may be written now (the store's target, or no space
    recorded: a scratch store), with the space read."""
    space = read(conn)
    return (space is None or space.target == model), space


def dataset_model(conn: Connection, dataset: str) -> str | None:
    """The model that made ``dataset``'s vectors when it is not the store's, else None (a
    dataset not registered yet included). A writer reads it in the transaction that writes
    the vectors, after taking the dataset's language lock shared (``dataset_config`` with
    ``for_write``): the model cannot change before that transaction ends."""
    value = conn.execute(
        text("SELECT embedding_model FROM datasets WHERE dataset = :d"), {"d": dataset}
    ).scalar()
    return str(value) if value else None


def set_dataset_model(conn: Connection, dataset: str, model: str | None) -> None:
    """Records ``model`` (None: the store's) as the one that made every vector of
    ``dataset``: only in the transaction that re-embedded them, holding the dataset's
    language lock exclusively (services/summariser/spaces.py)."""
    conn.execute(
        text("UPDATE datasets SET embedding_model = :m, updated_at = now() WHERE dataset = :d"),
        {"m": model, "d": dataset},
    )


class SpaceWatch:
    """Recall's check, each call, that the store still holds vectors its queries compare
    with: the space is read again at most every ``interval`` seconds."""

    def __init__(self, engine: Engine, model: str, *, interval: float = WATCH_INTERVAL) -> None:
        self.engine = engine
        self.model = model
        self.interval = interval
        self._space: Space | None = None
        self._read_at = float("-inf")
        self._lock = threading.Lock()

    def require(self) -> None:
        """Raises FailedPrecondition when the store has moved to another model."""
        now = time.monotonic()
        if now - self._read_at >= self.interval:
            with self._lock:
                if now - self._read_at >= self.interval:
                    with self.engine.connect() as conn:
                        self._space = read(conn)
                    self._read_at = time.monotonic()
        space = self._space
        if space is not None and not space.compatible(self.model):
            raise FailedPrecondition(
                mismatch(space, self.model, "Recall")
                + " A Recall started before the change must be restarted.",
                reason="EMBEDDING_MODEL_MISMATCH",
            )
