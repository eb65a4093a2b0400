"""A dataset's completed episodes, counted by its writers (migration 0025, issue 50).

Every Recall answers with the dataset's count of completed episodes, and its size guard
reads it. Counted on each call, it cost ~11 ms per 100k episodes. ``episode_counts`` keeps
it instead:

- A writer that moves episodes into or out of ``completed`` calls :func:`changed` in its
  own transaction, after its episodes' rows: the completion (one in, the thread's previous
  current one out), an operator's delete, an erasure. The call upserts the dataset's row,
  so the row exists and is locked until the writer commits. A change of zero (a thread's
  new current episode replacing the old one) needs no call.
- :func:`seed` counts a dataset's completed episodes under that row's lock. A writer
  whose :func:`changed` came first has committed before the count's snapshot (the lock
  waits for it), so the count holds its change; one whose :func:`changed` comes after
  waits for the seed's commit and adds its change to the count, which did not see it (it
  had not committed). The count is NULL until the first seed: Recall then counts as before.
- The Scheduler's maintenance seeds a large dataset's count with each refresh of its kept
  statistics (store/kept_statistics.py), and ``episodic reindex --statistics`` does too:
  a count kept wrong (a writer this module does not know of) is put right there, and
  :func:`seed` says by how much it was off.

Recall reads it within its one statement (:data:`COUNT_SQL`): the kept count when there
is one and the request is not ``as_of`` a past moment; the counted one otherwise.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

__all__ = ["COUNT_SQL", "Seeded", "changed", "kept", "seed"]

log = logging.getLogger(__name__)

# Every statement names its dataset as the row's key: one partition (shard) each.
_CHANGED = (
    "INSERT INTO episode_counts (dataset) VALUES (:d) "
    # NULL (not counted yet) plus anything stays NULL: the row is still locked, as the
    # protocol needs, and the seed counts the change.
    "ON CONFLICT (dataset) DO UPDATE SET completed = episode_counts.completed + :delta"
)

_COUNTED = "SELECT count(*) FROM episodes WHERE dataset = :d AND status = 'completed'"

#: The dataset's completed episodes as a scalar expression of Recall's statement (its
#: parameters ``:dataset`` and ``:as_of``). ``coalesce`` evaluates its second argument only
#: when the first is NULL, and PostgreSQL runs an uncorrelated subquery (an InitPlan) only
#: when its value is first needed: with a kept count, the dataset's episodes are not read.
COUNT_SQL = (
    "coalesce((SELECT kc.completed FROM episode_counts kc WHERE kc.dataset = :dataset "
    "AND CAST(:as_of AS timestamptz) IS NULL), "
    "(SELECT count(*) FROM episodes ce WHERE ce.dataset = :dataset "
    "AND ce.status = 'completed' AND (CAST(:as_of AS timestamptz) IS NULL "
    "OR ce.ended_at <= CAST(:as_of AS timestamptz))))"
)


@dataclass(frozen=True)
class Seeded:
    """What :func:`seed` counted, and what was kept before (None: nothing was)."""

    completed: int
    kept_before: int | None

    @property
    def drift(self) -> int:
        """How far the kept count had moved from the truth (0 when nothing was kept)."""
        return 0 if self.kept_before is None else self.kept_before - self.completed


def changed(conn: Connection, dataset: str, delta: int) -> None:
    """``delta`` episodes of ``dataset`` became completed (negative: stopped being), in the
    caller's transaction, which has already written them. Nothing for a change of zero."""
    if delta:
        conn.execute(text(_CHANGED), {"d": dataset, "delta": delta})


def seed(engine: Engine, dataset: str) -> Seeded | None:
    """Counts ``dataset``'s completed episodes and keeps the count, in a short transaction
    of its own (the writers of the dataset's completions wait for its count: ~11 ms per
    100k episodes). None when the dataset is gone."""
    with engine.connect() as conn:
        # A transaction even on an engine made for autocommit: the lock lasts to the end.
        conn = conn.execution_options(isolation_level="READ COMMITTED")
        with conn.begin():
            exists = conn.execute(
                text("SELECT 1 FROM datasets WHERE dataset = :d"), {"d": dataset}
            ).first()
            if exists is None:
                return None
            # Waits for a writer whose own upsert of the row is still uncommitted.
            conn.execute(
                text(
                    "INSERT INTO episode_counts (dataset) VALUES (:d) "
                    "ON CONFLICT (dataset) DO NOTHING"
                ),
                {"d": dataset},
            )
            before = conn.execute(
                text("SELECT completed FROM episode_counts WHERE dataset = :d FOR UPDATE"),
                {"d": dataset},
            ).scalar()
            # A statement after the lock: READ COMMITTED takes its snapshot now, so every
            # writer that changed the row before the lock has committed and is seen.
            completed = int(conn.execute(text(_COUNTED), {"d": dataset}).scalar_one())
            conn.execute(
                text(
                    "UPDATE episode_counts SET completed = :n, counted_at = now() "
                    "WHERE dataset = :d"
                ),
                {"d": dataset, "n": completed},
            )
    seeded = Seeded(completed, None if before is None else int(before))
    if seeded.drift:  # a writer that does not keep the count: put right, and said
        log.warning(
            "a dataset's kept count of completed episodes was %+d off (%d counted); "
            "kept as counted",
            seeded.drift,
            completed,
        )
    return seeded


def kept(conn: Connection, dataset: str) -> int | None:
    """The kept count of ``dataset``'s completed episodes (None: not counted yet)."""
    value = conn.execute(
        text("SELECT completed FROM episode_counts WHERE dataset = :d"), {"d": dataset}
    ).scalar()
    return None if value is None else int(value)
