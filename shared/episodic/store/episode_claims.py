"""Claiming work: the Summariser's claims of due episodes and extractions (in turns, so one
dataset cannot starve the others; :func:`hand_back` when another dataset is waiting), and a
worker's renewal and release of the claims it holds, whatever their dataset. See the
transitions' table in :mod:`episodic.store.episodes`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, RowMapping, text

from episodic.store.distribution import across_datasets
from episodic.store.episode_states import notify_episodes
from episodic.store.shards import read_every_shard, run_in_groups
from episodic.store.sql import NOW


def claim_pending(
    conn: Connection, worker: str, limit: int, now: datetime | None = None
) -> list[RowMapping]:
    """Claims up to ``limit`` due pending episodes for ``worker``: one statement (a CTE with
    ``FOR NO KEY UPDATE SKIP LOCKED``, so replicas never claim the same row) that writes the
    claimant and the claim time, so the claim outlives the transaction.

    Fair across datasets: each dataset's due episodes take turns — every dataset's oldest
    first, then every dataset's second, … (oldest first within a turn) — so one dataset's
    backlog (a burst of 5,000 threads, a retry storm) delays another dataset's episode by
    one claim, not by the whole backlog. The rows come back in that order too: the worker
    summarises them one after the other."""
    rows = run_in_groups(
        conn,
        across_datasets("the Summariser claims pending episodes of every dataset")
        + f"""
        WITH turns AS (
            SELECT dataset, episode_id, next_attempt_at, created_at,
                row_number() OVER (
                    PARTITION BY dataset ORDER BY next_attempt_at, created_at
                ) AS turn
            FROM episodes
            WHERE IN_GROUP(episodes) AND status = 'pending'
              AND next_attempt_at <= {NOW}
        ),
        due AS (
            SELECT e.dataset, e.episode_id FROM episodes e
            JOIN turns t ON e.dataset = t.dataset AND e.episode_id = t.episode_id
            WHERE IN_GROUP(e) AND e.status = 'pending'
            ORDER BY t.turn, t.next_attempt_at, t.created_at
            LIMIT :limit
            FOR NO KEY UPDATE OF e SKIP LOCKED
        )
        UPDATE episodes e
        SET status = 'processing', claimed_by = :worker,
            claimed_at = now(),
            updated_at = now()
        FROM due WHERE IN_GROUP(e) AND e.dataset = due.dataset
          AND e.episode_id = due.episode_id AND e.status = 'pending'
        RETURNING e.*
        """,
        {"worker": worker, "limit": limit, "now": now},
        # Citus: the datasets with the longest-waiting episodes, a shard at a time.
        discover=across_datasets("the Summariser looks for datasets with episodes due")
        + f"SELECT dataset FROM episodes WHERE status = 'pending' AND next_attempt_at <= {NOW} "
        "GROUP BY dataset ORDER BY min(next_attempt_at) LIMIT :limit",
        limit=limit,
    )
    return in_turns(rows, key=lambda r: (r["next_attempt_at"], r["created_at"]))


def in_turns(rows: Sequence[RowMapping], key: Any) -> list[RowMapping]:
    """``rows`` in the order of fair turns: each dataset's first (by ``key``), then each
    dataset's second, …; within a turn, by ``key``."""
    by_dataset: dict[str, list[RowMapping]] = {}
    for row in sorted(rows, key=key):
        by_dataset.setdefault(row["dataset"], []).append(row)
    ordered = [
        (turn, key(row), row) for group in by_dataset.values() for turn, row in enumerate(group)
    ]
    ordered.sort(key=lambda item: (item[0], item[1]))
    return [row for _, _, row in ordered]


def any_due(
    conn: Connection, now: datetime | None = None, *, excluding: Sequence[str] = ()
) -> bool:
    """Whether some episode is due for a worker to claim (what :func:`claim_pending` would
    find, rows another worker is claiming included), of a dataset not in ``excluding``.

    The Summariser asks it between slices of its chunk index and between extractions, which
    yield to a due episode; and, with ``excluding`` its batch's datasets, before a second
    turn of a dataset in a batch, which it hands back when another dataset is waiting
    (:func:`hand_back`). An index-only probe of ``episodes_pending_idx`` per partition."""
    return bool(
        read_every_shard(
            conn,
            across_datasets("the Summariser asks whether any dataset has an episode due")
            + f"SELECT dataset FROM episodes WHERE status = 'pending' "
            f"AND next_attempt_at <= {NOW} AND NOT (dataset = ANY(:excluding)) LIMIT 1",
            {"now": now, "excluding": list(excluding)},
        )
    )


def hand_back(
    conn: Connection,
    claimed: Sequence[RowMapping],
    worker: str,
    *,
    delay: timedelta | None = None,
) -> int:
    """Hands processing claims of this worker back without counting a retry; returns how
    many it still held. With no ``delay``, as they were (due when they were due), so the
    next claim orders them with the other datasets' episodes again (each dataset's oldest
    first); with one, due again after it: the episode could not be written right now for
    a reason that is nobody's fault (its dataset's language is being switched, a row it
    needs is held by another session). Per dataset: one shard each on Citus."""
    handed = 0
    by_dataset: dict[str, list[Any]] = {}
    for episode in claimed:
        by_dataset.setdefault(episode["dataset"], []).append(episode["episode_id"])
    due_again = "" if delay is None else "next_attempt_at = now() + :delay, "
    for dataset, ids in sorted(by_dataset.items()):
        handed += conn.execute(
            text(
                "UPDATE episodes SET status = 'pending', claimed_by = NULL, claimed_at = NULL, "
                f"{due_again}updated_at = now() WHERE dataset = :dataset "
                "AND episode_id = ANY(:ids) AND status = 'processing' AND claimed_by = :worker"
            ),
            {"dataset": dataset, "ids": ids, "worker": worker, "delay": delay},
        ).rowcount
    return handed


def claim_semantic(conn: Connection, worker: str, limit: int) -> list[RowMapping]:
    """Semantic extraction only starts once summarisation succeeded (completed_at is set;
    an episode superseded right at completion is archived but did complete). Nothing here
    is time-dependent, so there is no injected clock."""
    return run_in_groups(
        conn,
        across_datasets("the Summariser claims pending extractions of every dataset")
        + """
        WITH due AS (
            SELECT dataset, episode_id FROM episodes
            WHERE IN_GROUP(episodes) AND semantic_status = 'pending'
              AND completed_at IS NOT NULL AND status IN ('completed', 'archived')
            ORDER BY completed_at
            LIMIT :limit
            FOR NO KEY UPDATE SKIP LOCKED
        )
        UPDATE episodes e
        SET semantic_status = 'processing', semantic_claimed_by = :worker,
            semantic_claimed_at = now(),
            updated_at = now()
        FROM due WHERE IN_GROUP(e) AND e.dataset = due.dataset
          AND e.episode_id = due.episode_id AND e.semantic_status = 'pending'
        RETURNING e.*
        """,
        {"worker": worker, "limit": limit},
        discover=across_datasets("the Summariser looks for datasets with extractions due")
        + "SELECT dataset FROM episodes WHERE semantic_status = 'pending' "
        "AND completed_at IS NOT NULL AND status IN ('completed', 'archived') "
        "GROUP BY dataset ORDER BY min(completed_at) LIMIT :limit",
        limit=limit,
    )


def renew_claims(conn: Connection, worker: str) -> int:
    """The worker's heartbeat: every claim it holds (summarisation and semantic) is fresh
    again, so the reclaim sweep — which takes claims older than the reclaim timeout —
    never takes work from a worker that is alive, however long a batch or an LLM call.
    On Citus shard by shard, the shards of a worker that is down left out."""
    return _update_my_claims(
        conn,
        worker,
        "UPDATE episodes SET claimed_at = now() "
        "WHERE IN_GROUP(episodes) AND status = 'processing' AND claimed_by = :w",
        "UPDATE episodes SET semantic_claimed_at = now() WHERE IN_GROUP(episodes) "
        "AND semantic_status = 'processing' AND semantic_claimed_by = :w",
        across_datasets("a Summariser worker renews its claims, whatever their dataset"),
    )


def release_claims(conn: Connection, worker: str) -> int:
    """Hands this worker's claims back (graceful shutdown): no retry is counted."""
    released = _update_my_claims(
        conn,
        worker,
        "UPDATE episodes SET status = 'pending', claimed_by = NULL, claimed_at = NULL, "
        "next_attempt_at = now(), updated_at = now() "
        "WHERE IN_GROUP(episodes) AND status = 'processing' AND claimed_by = :w",
        "UPDATE episodes SET semantic_status = 'pending', semantic_claimed_by = NULL, "
        "semantic_claimed_at = NULL, updated_at = now() WHERE IN_GROUP(episodes) "
        "AND semantic_status = 'processing' AND semantic_claimed_by = :w",
        across_datasets("a stopping Summariser worker releases its claims"),
    )
    if released:
        notify_episodes(conn, ["released"])
    return released


def _update_my_claims(
    conn: Connection, worker: str, summarising: str, extracting: str, marker: str
) -> int:
    """Runs ``summarising`` and ``extracting`` (UPDATEs of ``worker``'s claims, with
    ``IN_GROUP(episodes)`` filters) over every dataset; returns the rows they changed. One
    statement each on one PostgreSQL; on Citus one per shard holding a claim of the worker
    (:func:`episodic.store.shards.run_in_groups`: a worker that is down fails no other)."""
    changed = 0
    for statement, which in ((summarising, "claimed_by"), (extracting, "semantic_claimed_by")):
        changed += len(
            run_in_groups(
                conn,
                marker + statement + " RETURNING episode_id",
                {"w": worker},
                discover=across_datasets("a Summariser worker finds the datasets of its claims")
                + f"SELECT DISTINCT dataset FROM episodes WHERE {which} = :w",
            )
        )
    return changed
