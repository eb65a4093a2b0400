"""The read path's reads that do not rank: a dataset's size counted up to a bound
(:func:`count_up_to`), what a recall reads before its ranking in one statement
(:func:`read_opening`), its sessions in time order (:func:`threads_in_order`) and its
episodes newest first, keyset-paged (:func:`list_episodes`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, RowMapping, text

from episodic.crypto import DatasetKey
from episodic.store.episodes import episode_columns
from episodic.store.raw_statement import driver_form, fetch_all
from episodic.store.recall_index import TEXT_SEARCH_CONFIG

__all__ = [
    "Opening",
    "blinded_lexemes",
    "count_up_to",
    "list_episodes",
    "read_opening",
    "threads_in_order",
]

_EPISODE_COLUMNS = episode_columns("e", ":dataset")


def count_up_to(conn: Connection, dataset: str, bound: int) -> int:
    """How many completed episodes ``dataset`` has, counting no further than ``bound``
    (an index-only scan of at most ``bound`` entries: cheap however large the dataset)."""
    return int(
        conn.execute(
            text(
                "SELECT count(*) FROM (SELECT 1 FROM episodes WHERE dataset = :dataset "
                "AND status = 'completed' LIMIT :bound) x"
            ),
            {"dataset": dataset, "bound": bound},
        ).scalar_one()
    )


# ---- before the ranking: one round trip ----------------------------------------------
#
# A recall needs three things before its ranking statement: the dataset's key (to blind the
# query's words and open the rows), the query's lexemes (stemmed by the database, in the
# dataset's text search configuration), and, the first time a process sees the dataset,
# whether it is large enough for the approximate path. Sent one by one they were three
# round trips besides the ranking; :func:`read_opening` reads them in one.


@dataclass(frozen=True)
class Opening:
    """What :func:`read_opening` read, in one snapshot."""

    #: The dataset's ``datasets`` row key columns (``key_id``, ``master_key_id``,
    #: ``wrapped_key``), or None when the dataset has no row (stored in the clear).
    key_row: dict[str, Any] | None
    #: The query's distinct lexemes, each with whether it is a generic question word
    #: (:data:`episodic.query_focus.GENERIC_WORDS`); None when no query was given.
    lexemes: list[tuple[str, bool]] | None
    #: How many completed episodes the dataset has, counted no further than the bound
    #: asked for (:func:`count_up_to`); None when no bound was given.
    size: int | None
    #: Under ``RankingOptions.word_forms``: (lexeme of a form, lexeme of the query word it
    #: is a form of) for the forms asked for, in a dataset whose configuration is english
    #: (else none); None when none were asked for.
    forms: list[tuple[str, str]] | None = None
    #: Under ``RankingOptions.phrase``: the query's lexemes in the order written (stop words
    #: skipped), for its word pairs (:func:`~episodic.store.query_terms.phrase_pairs`); None
    #: when not asked for.
    ordered: list[str] | None = None


@lru_cache(maxsize=32)
def _opening_statement(
    with_query: bool,
    with_generic: bool,
    with_size: bool,
    with_forms: bool = False,
    with_order: bool = False,
) -> str:
    config = f"CAST(coalesce(d.text_search_config, '{TEXT_SEARCH_CONFIG}') AS regconfig)"
    size = (
        "(SELECT count(*) FROM (SELECT 1 FROM episodes WHERE dataset = :dataset "
        "AND status = 'completed' LIMIT :bound) x)"
        if with_size
        else "NULL::bigint"
    )
    # Stemming the generic words costs ~0.5 ms: only when the ranking weighs them.
    generic = (
        f"u.lexeme IN (SELECT g.lexeme FROM unnest(to_tsvector({config}, :generic)) g)"
        if with_generic
        else "false"
    )
    lexemes = (
        f"""(SELECT array_agg(ARRAY[u.lexeme, ({generic})::text] ORDER BY u.lexeme)
             FROM (SELECT DISTINCT lexeme FROM unnest(to_tsvector({config}, :q))) u)"""
        if with_query
        else "NULL::text[]"
    )
    # What query_terms reads for the word forms, in the same statement.
    forms = (
        f"""(SELECT array_agg(ARRAY[a.lexeme, o.lexeme])
             FROM unnest(CAST(:forms AS text[]), CAST(:words AS text[])) AS f(form, word)
             CROSS JOIN LATERAL unnest(to_tsvector({config}, f.form)) a
             CROSS JOIN LATERAL unnest(to_tsvector({config}, f.word)) o
             WHERE {config} = CAST('english' AS regconfig))"""
        if with_forms
        else "NULL::text[]"
    )
    # What query_phrase_pairs reads (the lexemes by position), in the same statement.
    ordered = (
        f"""(SELECT array_agg(u.lexeme ORDER BY p.position)
             FROM unnest(to_tsvector({config}, :q)) u
             CROSS JOIN LATERAL unnest(u.positions) AS p(position))"""
        if with_query and with_order
        else "NULL::text[]"
    )
    return driver_form(
        f"""
        SELECT d.dataset IS NOT NULL AS has_row, d.key_id, d.master_key_id, d.wrapped_key,
               {lexemes} AS lexemes, {size} AS size, {forms} AS forms, {ordered} AS ordered
        FROM (SELECT 1) one LEFT JOIN datasets d ON d.dataset = :dataset
        """
    )


def read_opening(
    conn: Connection,
    dataset: str,
    *,
    query: str | None,
    size_bound: int | None,
    generic: bool = False,
    forms: Sequence[tuple[str, str]] = (),
    ordered: bool = False,
) -> Opening:
    """The dataset's key row, ``query``'s lexemes (when given) and its size counted up to
    ``size_bound`` (when given), in one statement: what :func:`count_up_to`, the key lookup
    of :meth:`episodic.store.vault.Vault.for_read` and the lexemes of
    :func:`~episodic.store.recall_index.query_tokens` read, in the same configuration.
    ``generic``: also mark each lexeme that a generic question word stems to (for
    ``RankingOptions.weight_generic_terms``; else every lexeme is marked not generic).
    ``forms``: (form, word) pairs of :func:`episodic.query_focus.word_forms`, stemmed as
    :func:`~episodic.store.query_terms.query_terms` stems them (``RankingOptions.word_forms``).
    ``ordered``: also the query's lexemes in the order written (``RankingOptions.phrase``: its
    word pairs then cost no round trip of their own)."""
    from episodic.query_focus import GENERIC_WORDS

    params: dict[str, object] = {"dataset": dataset}
    if query is not None:
        params["q"] = query
        if generic:
            params["generic"] = GENERIC_WORDS
    if size_bound is not None:
        params["bound"] = size_bound
    with_forms = query is not None and bool(forms)
    if with_forms:
        params["forms"] = [f for f, _ in forms]
        params["words"] = [w for _, w in forms]
    with_order = query is not None and ordered
    statement = _opening_statement(
        query is not None, generic, size_bound is not None, with_forms, with_order
    )
    (row,) = fetch_all(conn, statement, params)
    lexemes = None
    if query is not None:
        lexemes = [(lexeme, marked == "true") for lexeme, marked in row["lexemes"] or []]
    return Opening(
        key_row=row if row["has_row"] else None,
        lexemes=lexemes,
        size=None if row["size"] is None else int(row["size"]),
        forms=[(a, o) for a, o in row["forms"] or []] if with_forms else None,
        ordered=list(row["ordered"] or []) if with_order else None,
    )


def blinded_lexemes(
    key: DatasetKey, lexemes: Sequence[tuple[str, bool]]
) -> list[tuple[str, float]]:
    """``lexemes`` (:attr:`Opening.lexemes`) as ``key``'s tokens with their query-side
    weights, sorted: what :func:`~episodic.store.recall_index.weighted_query_tokens`
    returns (its tokens alone are :func:`~episodic.store.recall_index.query_tokens`')."""
    from episodic.query_focus import GENERIC_WEIGHT

    return sorted(
        (key.token(lexeme), GENERIC_WEIGHT if generic else 1.0) for lexeme, generic in lexemes
    )


def threads_in_order(
    conn: Connection,
    dataset: str,
    *,
    as_of: datetime | None,
    since: datetime | None,
    until: datetime | None,
    position: int,
    from_end: bool,
    count: int,
) -> list[uuid.UUID]:
    """A dataset's sessions by order in time: its threads ordered by their first episode's
    start (archived episodes count: they keep the thread's early windows), those that had
    started by ``as_of`` (and started within ``since``..``until`` when given); ``count``
    threads from 1-based ``position``, counted from the latest when ``from_end``."""
    direction = "DESC" if from_end else "ASC"
    return list(
        conn.execute(
            text(
                f"""
                SELECT thread_id FROM (
                    SELECT thread_id, min(started_at) AS first_at FROM episodes
                    WHERE dataset = :dataset
                    GROUP BY thread_id
                ) t
                WHERE first_at <= coalesce(CAST(:as_of AS timestamptz), now())
                  AND (CAST(:since AS timestamptz) IS NULL OR first_at >= CAST(:since AS timestamptz))
                  AND (CAST(:until AS timestamptz) IS NULL OR first_at <= CAST(:until AS timestamptz))
                ORDER BY first_at {direction}, thread_id {direction}
                OFFSET :skip LIMIT :count
                """
            ),
            {
                "dataset": dataset,
                "as_of": as_of,
                "since": since,
                "until": until,
                "skip": max(position - 1, 0),
                "count": count,
            },
        ).scalars()
    )


def list_episodes(
    conn: Connection,
    dataset: str,
    *,
    status: str | None,
    thread_id: uuid.UUID | None,
    before: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> tuple[list[RowMapping], bool]:
    """A dataset's episodes newest first (by ``ended_at``, then id), keyset-paged; the bool
    says whether more follow."""
    rows = (
        conn.execute(
            text(
                f"SELECT {_EPISODE_COLUMNS} FROM episodes e "
                "WHERE e.dataset = :dataset "
                "AND (CAST(:status AS text) IS NULL OR e.status = CAST(:status AS text)) "
                "AND (CAST(:thread AS uuid) IS NULL OR e.thread_id = CAST(:thread AS uuid)) "
                "AND (CAST(:at AS timestamptz) IS NULL OR (e.ended_at, e.episode_id) < "
                "     (CAST(:at AS timestamptz), CAST(:id AS uuid))) "
                "ORDER BY e.ended_at DESC, e.episode_id DESC LIMIT :limit"
            ),
            {
                "dataset": dataset,
                "status": status,
                "thread": thread_id,
                "at": before[0] if before else None,
                "id": before[1] if before else None,
                "limit": limit + 1,
            },
        )
        .mappings()
        .all()
    )
    return list(rows[:limit]), len(rows) > limit
