"""The approximate path's two HNSW walks, run beside the lexical postings' read.

A large dataset's Recall (the approximate path with kept statistics) sends two
statements one after the other: the query words' kept postings, scored in numpy
(:mod:`episodic.store.lexical_pool`), then the ranking statement, which walked the HNSW
indexes of summaries and of chunks before scoring its candidates. The walks need only the
query's vector, yet were the statement's largest parts (~16–25 ms each on random vectors
at 100k episodes, docs/benchmarks-history.md "the walks beside the postings"). So
:class:`NearestWalks` starts them on connections of their own as the call begins; the
ranking statement then takes what they found as parameters (``walked``:
:func:`~episodic.store.ranking_sql.approximate_parts`).

Never a wait for the pool: a walk that has not started by the time the caller needs it
(its threads busy with other calls' walks, or no connection free) is taken back and run
on the caller's own connection, as if nothing had run beside. A busy process so degrades
to the statement's own pace, and a caller never holds its connection while waiting for
another (the pool's connections all held by callers whose walks wait for one).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from sqlalchemy import Connection, Engine

from episodic.store.ranking_sql import NEAREST_WALKS
from episodic.store.raw_statement import driver_form, fetch_all

#: Each walk's statement: the ids found, 16 bytes each (``uuid_send``), as the ranking
#: statement reads them back (``:nearest_episodes``, ``:nearest_threads``).
WALK_STATEMENTS = {
    "nearest_episodes": driver_form(
        "SELECT uuid_send(w.episode_id) AS id FROM (" + NEAREST_WALKS["nearest summaries"] + ") w"
    ),
    "nearest_threads": driver_form(
        "SELECT uuid_send(w.thread_id) AS id FROM (" + NEAREST_WALKS["nearest chunks"] + ") w"
    ),
}


def walk(conn: Connection, name: str, params: dict[str, object]) -> bytes:
    """One walk's ids on ``conn``. Never prepared: a prepared statement's generic plan
    does not know which partition the dataset is in, nor its query vector."""
    rows = fetch_all(conn, WALK_STATEMENTS[name], params, prepare=False)
    return b"".join(r["id"] for r in rows)


@dataclass(frozen=True)
class Walked:
    """What the walks found: the ranking statement's parameters."""

    nearest_episodes: bytes
    nearest_threads: bytes

    def params(self) -> dict[str, object]:
        return {"nearest_episodes": self.nearest_episodes, "nearest_threads": self.nearest_threads}


class _Walk:
    """One walk handed to the threads: run there once it holds a connection, or taken
    back by the caller if it has not started by then (never both)."""

    def __init__(self, engine: Engine, name: str, params: dict[str, object]) -> None:
        self._engine, self._name, self._params = engine, name, params
        self._context = otel_context.get_current()  # its span is the call's child
        self._lock = threading.Lock()
        self._state = "queued"  # → "running" (a thread has it) or "taken" (the caller)
        self._done = threading.Event()
        self._ids: bytes | None = None
        self._error: BaseException | None = None

    def run(self) -> None:
        """In a walks' thread."""
        token = otel_context.attach(self._context)
        try:
            with self._lock:
                if self._state != "queued":
                    return
            with self._engine.connect() as conn:  # may wait for the pool: the caller won't
                with self._lock:
                    if self._state != "queued":
                        return
                    self._state = "running"
                self._ids = walk(conn, self._name, self._params)
        except BaseException as err:  # handed to the caller
            self._error = err
        finally:
            self._done.set()
            otel_context.detach(token)

    def result(self, conn: Connection) -> bytes:
        """The walk's ids: waited for if a thread runs it, else run now on ``conn``."""
        with self._lock:
            taken = self._state == "queued"
            if taken:
                self._state = "taken"
        if taken:
            return walk(conn, self._name, self._params)
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._ids is not None
        return self._ids


class PendingWalks:
    """The walks of one call, started (:meth:`NearestWalks.start`)."""

    def __init__(self, walks: dict[str, _Walk]) -> None:
        self._walks = walks

    def result(self, conn: Connection) -> Walked:
        """What they found; a walk not started yet runs on ``conn`` now."""
        return Walked(**{name: w.result(conn) for name, w in self._walks.items()})


class NearestWalks:
    """Runs the walks of Recall's calls on ``engine``'s connections, ``threads`` at a time
    in the process (one call's two walks run side by side; beyond that, calls' walks
    queue, and are taken back by their callers)."""

    def __init__(self, engine: Engine, threads: int = 2) -> None:
        self._engine = engine
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="recall-walks")

    def start(self, params: dict[str, Any]) -> PendingWalks:
        """Starts the walks of a call with the ranking statement's ``params`` (the
        dataset, the query's vector, ``approx_nearest`` and the filters'); they are
        read with :meth:`PendingWalks.result`."""
        walks = {name: _Walk(self._engine, name, params) for name in WALK_STATEMENTS}
        for w in walks.values():
            try:
                self._pool.submit(w.run)
            except RuntimeError:  # closed: the caller takes the walk back
                break
        return PendingWalks(walks)

    def close(self) -> None:
        """Stops taking walks (those queued are taken back by their callers)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
