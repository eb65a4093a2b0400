"""Which dataset owns a thread or an episode a request names by id — the check every by-id
RPC makes before it reads or changes anything (:func:`episodic.access.require_visible`).
The call then names the dataset it returns in every later statement.

The lookup itself searches as few datasets as it can, because on Citus a statement that
does not name its dataset runs on every shard (64 index probes in parallel: p50 6.6 ms
against 0.35 ms for one shard, issue 38):

1. A key scoped to dataset names (no ``*``, no ``acme/*``) searches those datasets only —
   one shard for a key of one dataset. It also never reads another dataset's rows: a
   scoped caller's lookup cannot tell another dataset's id from a missing one even inside
   the database.
2. Otherwise an id this process has seen before (:data:`THREAD_ROUTES`,
   :data:`RECORD_ROUTES`: created here, or found by an earlier lookup) is searched in its remembered dataset first — only when the caller
   may see that dataset, so a caller who may not gets the same path, and the same time,
   as for an id that does not exist. A route is a hint: the statement checks the row, and
   a stale route (the thread erased, the id reused elsewhere) falls through to 3.
3. Every dataset (``*_routing_idx``): the one statement here marked across datasets.

A missing id and another dataset's id get the very same NOT_FOUND, built here once.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Literal

from sqlalchemy import Connection, text

from episodic.access import ALL_DATASETS, Principal, current, require_visible
from episodic.errors import NotFound
from episodic.store.distribution import across_datasets

__all__ = [
    "RECORD_ROUTES",
    "THREAD_ROUTES",
    "Routes",
    "episode_not_found",
    "find_thread",
    "remember_thread",
    "require_record",
    "require_thread",
    "thread_not_found",
]


class Routes:
    """Which dataset each recently named id belongs to, in this process (bounded, least
    recently used first out; thread-safe). An id never changes dataset while it exists, so a
    route goes stale only when its row is erased (and the id perhaps reused elsewhere);
    every use checks the row, so a stale route costs a statement, never a wrong answer."""

    def __init__(self, capacity: int = 65_536) -> None:
        self.capacity = capacity
        self._routes: OrderedDict[uuid.UUID, str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: uuid.UUID) -> str | None:
        with self._lock:
            dataset = self._routes.get(key)
            if dataset is not None:
                self._routes.move_to_end(key)
            return dataset

    def remember(self, key: uuid.UUID, dataset: str) -> None:
        with self._lock:
            self._routes[key] = dataset
            self._routes.move_to_end(key)
            while len(self._routes) > self.capacity:
                self._routes.popitem(last=False)

    def forget(self, key: uuid.UUID) -> None:
        with self._lock:
            self._routes.pop(key, None)


#: This process's routes of thread ids, and of episode and event ids.
THREAD_ROUTES = Routes()
RECORD_ROUTES = Routes()

_NAMED = "dataset = ANY(CAST(:datasets AS text[]))"
_THREAD = "SELECT dataset FROM threads WHERE thread_id = :id AND {where}"
_RECORD = (
    "SELECT dataset, 'summary' FROM episodes WHERE episode_id = :id AND {where} "
    "UNION ALL SELECT dataset, 'event' FROM events WHERE event_id = :id AND {where} LIMIT 1"
)


def thread_not_found(thread_id: uuid.UUID) -> NotFound:
    """The answer for a thread id that does not exist — or that the caller may not see."""
    return NotFound(f"thread {thread_id} does not exist", thread_id=str(thread_id))


def episode_not_found(episode_id: uuid.UUID) -> NotFound:
    """The answer for an episode id that does not exist — or that the caller may not see."""
    return NotFound(f"episode {episode_id} does not exist", episode_id=str(episode_id))


def remember_thread(thread_id: uuid.UUID, dataset: str) -> None:
    """A thread this process just created or wrote to: its id-only calls here go straight
    to its dataset's shard."""
    THREAD_ROUTES.remember(thread_id, dataset)


def named_scope(principal: Principal) -> list[str] | None:
    """The datasets a key names, when it names every dataset it covers (no ``*``, no
    ``acme/*``): a by-id lookup for it searches these only."""
    scopes = principal.datasets
    if any(s == ALL_DATASETS or s.endswith("/*") for s in scopes):
        return None
    return sorted(scopes)


def _find(
    conn: Connection,
    key: uuid.UUID,
    template: str,
    routes: Routes,
    *,
    scope: list[str] | None,
    may_see: Callable[[str], bool],
    in_scope: str,
    anywhere: str,
) -> Any:
    """The first row of ``template`` for ``key``, searched as narrowly as the module's
    docstring says. ``in_scope`` and ``anywhere`` are the markers of the statements that
    may reach several datasets (several named ones; all)."""
    if scope is not None:
        marker = in_scope if len(scope) > 1 else ""
        return conn.execute(
            text(marker + template.format(where=_NAMED)), {"id": key, "datasets": scope}
        ).first()
    remembered = routes.get(key)
    # Only a route the caller may see: for one it may not, the path (and its time) must be
    # that of an id that does not exist, or the hint would tell that the id is in use.
    if remembered is not None and may_see(remembered):
        row = conn.execute(
            text(template.format(where=_NAMED)), {"id": key, "datasets": [remembered]}
        ).first()
        if row is not None:
            return row
        routes.forget(key)
    return conn.execute(text(anywhere + template.format(where="TRUE")), {"id": key}).first()


def find_thread(
    conn: Connection, thread_id: uuid.UUID, *, may_see: Callable[[str], bool]
) -> str | None:
    """The dataset of thread ``thread_id`` (None: no such thread), for a caller whose
    principal is not at hand (AddMessages' domain function, which authorizes afterwards
    under the thread's lock): a remembered route it ``may_see``, else every dataset."""
    row = _find(
        conn,
        thread_id,
        _THREAD,
        THREAD_ROUTES,
        scope=None,
        may_see=may_see,
        in_scope="",
        anywhere=across_datasets("AddMessages' routing lookup by thread id"),
    )
    return row[0] if row else None


def require_thread(conn: Connection, thread_id: uuid.UUID) -> str:
    """The dataset of thread ``thread_id`` if the caller may see it; NOT_FOUND otherwise."""
    principal = current()
    row = _find(
        conn,
        thread_id,
        _THREAD,
        THREAD_ROUTES,
        scope=named_scope(principal),
        may_see=principal.covers,
        in_scope=across_datasets("a by-id lookup in the datasets the caller's key names"),
        anywhere=across_datasets("the routing lookup of a request that names a thread by id"),
    )
    dataset = require_visible(row[0] if row else None, thread_not_found(thread_id))
    THREAD_ROUTES.remember(thread_id, dataset)
    return dataset


def require_record(
    conn: Connection, episode_id: uuid.UUID
) -> tuple[str, Literal["summary", "event"]]:
    """The dataset of ``episode_id`` and its kind when the caller may see it: a summarised
    episode, or an event (ListEpisodes and Recall list both under their ids); NOT_FOUND,
    the same for both, otherwise."""
    principal = current()
    row = _find(
        conn,
        episode_id,
        _RECORD,
        RECORD_ROUTES,
        scope=named_scope(principal),
        may_see=principal.covers,
        in_scope=across_datasets("a by-id lookup in the datasets the caller's key names"),
        anywhere=across_datasets("the routing lookup of a request that names an episode or event"),
    )
    dataset = require_visible(row[0] if row else None, episode_not_found(episode_id))
    assert row is not None
    RECORD_ROUTES.remember(episode_id, dataset)
    return dataset, row[1]
