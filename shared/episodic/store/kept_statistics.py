"""Recall's kept lexical statistics of a large dataset (migration 0022, issue 50).

The approximate path ranks with BM25 over the whole dataset's statistics: its documents'
(completed episodes') count and average length, its passages' (each episode with a chunk of
its thread up to the episode's end, as the exact path has them), and each query word's
document and passage frequency. Counted on every call, they cost what reading every
holder of a common word costs: about a second of a call at 100k episodes
(docs/benchmarks-history.md "A big tenant's Recall"). Kept, they cost an index probe per
query word.

- :func:`refresh` counts them for one dataset, with each word's postings in impact order
  (its :data:`BEST_KEPT` best holders and their BM25 weights: the approximate path scores
  the query words' holders from them; migration 0023), and replaces
  the dataset's rows in one transaction: a reader sees the old ones or the new ones, and a
  crash leaves the old ones. (Its two statements each read their own snapshot: an episode
  completed between them is in one count and not the other, a lag like any other.)
- :func:`due` names the datasets that need it: more completed episodes than the approximate
  path's threshold, and none kept yet or a count that has moved by more than
  ``stale_share`` since. The Scheduler's maintenance refreshes them
  (services/scheduler/sweeper.py); ``episodic reindex --statistics`` does it by hand.
- :func:`thread_erased` forgets a dataset's when one of its threads is erased (its words
  must not outlive it here either), and voids a count running meanwhile.

Recall reads them (:func:`~episodic.store.lexical_statistics.dataset_statistics`) for a
request without filters, whose statistics are the whole dataset's; a filtered request,
and a dataset with nothing kept, are counted as before. Kept statistics lag the dataset
by less than ``stale_share`` of its episodes: BM25's idf moves by about that share's
logarithm, and a word the dataset learnt since counts as absent (its holders are still
found by the other candidate sources, and scored as every candidate is).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from episodic.store import episode_counts
from episodic.store.distribution import across_datasets
from episodic.store.ranking_options import BM25_B, BM25_K1, PASSAGE_BM25
from episodic.store.shards import distributed, read_every_shard

__all__ = [
    "BEST_KEPT",
    "COMPLETE_BEFORE_SQL",
    "STALE_SHARE",
    "Refreshed",
    "drop",
    "due",
    "refresh",
    "thread_erased",
]

#: Per word, how many of its best holders are kept with their weights (documents, and
#: threads of chunks), best first: its postings in impact order, from which the approximate
#: path scores the query's words' holders (where it read every holder of the selective
#: words and ran ``ts_rank`` over every holder of any). Every holder of a word held by at
#: most this many, so such a word's holders score exactly as counted.
BEST_KEPT = 5000

#: The longest a count may run (100k episodes: 69 s on a quiet machine, 8 s of it the
#: counts, the rest the best holders).
COUNT_CEILING = timedelta(minutes=30)

#: How far a dataset's completed episodes may move (a share of the count kept) before its
#: statistics are counted again: 1 % of 100k is 1,000 episodes.
STALE_SHARE = 0.01


#: Where the refresh could not tell which completions its count holds
#: (:data:`_COMPLETE_BEFORE`): how long before the count began an episode completed may
#: have been committing still (the Summariser's transaction ceiling, with room).
SINCE_MARGIN = "10 minutes"

#: Of a row ``k`` of ``kept_statistics``: a moment before which every completed episode
#: (by ``completed_at``) is in the count. Recall reads those completed since apart (the
#: ``since the count`` part of store/ranking_sql.py).
COMPLETE_BEFORE_SQL = f"coalesce(k.complete_before, k.counted_at - interval '{SINCE_MARGIN}')"

# An episode's completed_at is its completing transaction's start (now()). A completion the
# count does not see committed after the count's snapshot, which is taken after this
# statement: so its transaction either was in progress here (its start is among these) or
# began after this transaction did. The least of those starts is then a moment before which
# every completed episode is in the count. Only this database's client sessions complete
# episodes (another database's long query, or autovacuum, would hold the bound back for
# nothing). NULL where a transaction could hide from it: a session this role may not see
# (no pg_read_all_stats), or a prepared transaction (no session; its start unknown).
_COMPLETE_BEFORE = """
    SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM pg_prepared_xacts
                                 WHERE database = current_database())
                 AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a
                                 WHERE a.datname = current_database()
                                   AND a.query = '<insufficient privilege>')
           THEN least(now(), (SELECT min(a.xact_start) FROM pg_stat_activity a
                              WHERE a.datname = current_database()
                                AND a.backend_type = 'client backend'
                                AND a.pid <> pg_backend_pid()))
           END
"""


@dataclass(frozen=True)
class Refreshed:
    """What :func:`refresh` kept for a dataset."""

    documents: int
    passages: int
    terms: int


# The dataset's completed episodes and their passages, as the approximate path's
# statistics define them (lexical_statistics.dataset_statistics without filters).

#: The dataset's completed episodes' documents.
_DOCUMENTS = """(SELECT e.dataset, e.episode_id, e.ended_at, e.search_vector, e.search_length
        FROM episodes e WHERE e.dataset = :dataset AND e.status = 'completed')"""

#: Each chunk of the dataset with how many completed episodes it is a passage of (those of
#: its thread that reach its end): one join
#: of the two tables, hashed (a probe per chunk reads the threads' range index, ~10x slower).
_CHUNKS = """(SELECT m.dataset, m.thread_id, m.search_vector, greatest(m.search_length, 1) AS dl,
               c.episodes
        FROM (SELECT m.dataset, m.thread_id, m.start_sequence, m.start_offset,
                     count(*) AS episodes
              FROM message_chunks m
              JOIN episodes e ON e.dataset = m.dataset AND e.thread_id = m.thread_id
                AND e.status = 'completed' AND m.end_sequence <= e.end_sequence
              WHERE m.dataset = :dataset AND e.dataset = :dataset
              GROUP BY m.dataset, m.thread_id, m.start_sequence, m.start_offset) c
        JOIN message_chunks m ON m.dataset = c.dataset AND m.thread_id = c.thread_id
          AND m.start_sequence = c.start_sequence AND m.start_offset = c.start_offset
        -- said again: neither PostgreSQL nor Citus carries it through the grouping, and
        -- without it each reads every partition (shard) of the table
        WHERE m.dataset = :dataset)"""

# Two statements (the totals, then the terms, which reference them), without CTEs, each
# row's dataset taken from the rows it counts: Citus then runs the whole INSERT ... SELECT
# on the dataset's shard (with a CTE, or the dataset as a parameter, it could not plan it).
_TOTALS = f"""
    INSERT INTO kept_statistics (dataset, documents, document_length, passages, passage_length)
    SELECT d.dataset, d.n, d.avgdl, coalesce(p.n, 0), coalesce(p.avgdl, 1.0)
    FROM (SELECT x.dataset, count(*) AS n, greatest(avg(x.search_length), 1.0) AS avgdl
          FROM {_DOCUMENTS} x GROUP BY x.dataset) d
    LEFT JOIN (SELECT c.dataset, sum(c.episodes) AS n,
                      greatest(sum(c.episodes * c.dl)::float8 / sum(c.episodes), 1.0) AS avgdl
               FROM {_CHUNKS} c GROUP BY c.dataset) p ON p.dataset = d.dataset
"""


def _weight(tf: str, length: str, average: str, *, passage: bool) -> str:
    """A word's BM25 weight in a document (passage) but its idf, which is the word's own:
    what orders the word's holders as the ranking statement's BM25 does
    (lexical_statistics.bm25)."""
    k1, b = PASSAGE_BM25 if passage and PASSAGE_BM25 else (BM25_K1, BM25_B)
    return f"{tf} * ({k1} + 1.0) / ({tf} + {k1} * (1.0 - {b} + {b} * {length} / {average}))"


_TF = "coalesce(array_length(u.positions, 1), 1)::float8"

#: Each passage of the dataset — a chunk and a completed episode of its thread that reaches
#: its end — with the episode's end: one join of the two tables, hashed.
_PASSAGES = """(SELECT m.dataset, e.episode_id, e.ended_at, m.search_vector,
               greatest(m.search_length, 1) AS dl
        FROM message_chunks m
        JOIN episodes e ON e.dataset = m.dataset AND e.thread_id = m.thread_id
          AND e.status = 'completed' AND m.end_sequence <= e.end_sequence
        WHERE m.dataset = :dataset AND e.dataset = :dataset)"""


# Per word: how many documents and passages hold it, and its postings in impact order:
# its best holders by its BM25 weight with the weights (BEST_KEPT of each: documents, and
# episodes by their best passage holding it), the most recent first among equal weights
# (recency is the ranking's other signal). The rank is over (dataset, word), so that Citus
# runs the window on the dataset's shard.
@lru_cache(maxsize=4)
def _terms_sql(best_kept: int) -> str:
    """The statement that keeps the dataset's words (:data:`BEST_KEPT` postings each)."""
    return f"""
    INSERT INTO kept_term_statistics
        (dataset, token, documents, passages, best_documents, document_weights,
         best_passages, passage_weights)
    SELECT t.dataset, t.token, sum(t.documents), sum(t.passages),
           coalesce(array_agg(t.episode_id ORDER BY t.rank)
                    FILTER (WHERE t.documents > 0 AND t.rank <= {best_kept}), '{{}}'),
           coalesce(array_agg(t.weight ORDER BY t.rank)
                    FILTER (WHERE t.documents > 0 AND t.rank <= {best_kept}), '{{}}'),
           coalesce(array_agg(t.episode_id ORDER BY t.rank)
                    FILTER (WHERE t.documents = 0 AND t.rank <= {best_kept}), '{{}}'),
           coalesce(array_agg(t.weight ORDER BY t.rank)
                    FILTER (WHERE t.documents = 0 AND t.rank <= {best_kept}), '{{}}')
    FROM (SELECT d.dataset, d.token, 1 AS documents, 0 AS passages, d.episode_id, d.weight,
                 row_number() OVER (PARTITION BY d.dataset, d.token
                                    ORDER BY d.weight DESC NULLS LAST, d.ended_at DESC,
                                             d.episode_id) AS rank
          FROM (SELECT x.dataset, x.episode_id, x.ended_at, u.lexeme AS token,
                       {_weight(_TF, "x.search_length", "k.document_length", passage=False)}
                           AS weight
                FROM {_DOCUMENTS} x
                JOIN kept_statistics k ON k.dataset = x.dataset AND k.dataset = :dataset
                CROSS JOIN LATERAL unnest(x.search_vector) AS u) d
          UNION ALL
          SELECT p.dataset, p.token, 0, p.passages, p.episode_id, p.weight,
                 row_number() OVER (PARTITION BY p.dataset, p.token
                                    ORDER BY p.weight DESC NULLS LAST, p.ended_at DESC,
                                             p.episode_id)
          FROM (SELECT m.dataset, u.lexeme AS token, m.episode_id, m.ended_at,
                       count(*) AS passages,
                       max({_weight(_TF, "m.dl", "k.passage_length", passage=True)}) AS weight
                FROM {_PASSAGES} m
                JOIN kept_statistics k ON k.dataset = m.dataset AND k.dataset = :dataset
                CROSS JOIN LATERAL unnest(m.search_vector) AS u
                GROUP BY m.dataset, u.lexeme, m.episode_id, m.ended_at) p) t
    GROUP BY t.dataset, t.token
"""


_ERASURES = "SELECT threads_erased FROM datasets WHERE dataset = :d"


class _ErasedMeanwhile(Exception):
    """A thread of the dataset was erased while its statistics were counted."""


def refresh(engine: Engine, dataset: str, *, best_kept: int = BEST_KEPT) -> Refreshed | None:
    """Counts ``dataset``'s statistics and keeps them in place of what was kept, in one
    transaction of its own, with ``best_kept`` postings per word. None, with nothing
    changed, when a thread of the dataset was erased while they were counted (they may
    hold its words), or the dataset is gone. Its count of completed episodes, which the
    writers keep, is counted again first (:func:`episode_counts.seed`, a short transaction
    of its own: this one is long, and the writers of completions wait for that lock)."""
    if episode_counts.seed(engine, dataset) is None:
        return None
    try:
        with engine.connect() as conn:
            # A transaction even on an engine made for autocommit (Recall's): the rows are
            # replaced at once, and the lock below lasts until the end.
            conn = conn.execution_options(isolation_level="READ COMMITTED")
            with conn.begin():
                # Longer than the Scheduler's statement and transaction ceiling (5 min): a
                # count of a very large dataset is long, holds no lock anyone waits for,
                # and would otherwise be cancelled on every pass, forever. (A transaction's
                # timeout set within it is not re-armed, only switched off: its statements'
                # ceiling bounds it instead.)
                conn.execute(
                    text(
                        "SELECT set_config(name, CASE name WHEN 'statement_timeout' "
                        "THEN :ceiling ELSE '0' END, true) FROM pg_settings "
                        "WHERE name IN ('statement_timeout', 'transaction_timeout')"
                    ),
                    {"ceiling": str(int(COUNT_CEILING.total_seconds() * 1000))},
                )
                # One refresh of a dataset at a time (the Scheduler's and a hand-run
                # reindex): the second waits, then replaces the first's rows.
                conn.execute(
                    text(
                        "SELECT pg_advisory_xact_lock("
                        "hashtextextended('kept_statistics:' || :d, 0))"
                    ),
                    {"d": dataset},
                )
                before = conn.execute(text(_ERASURES), {"d": dataset}).scalar()
                if before is None:
                    return None
                # Before the counts' snapshots (each statement of this READ COMMITTED
                # transaction takes its own). On Citus the count runs on a worker whose
                # transactions the coordinator does not list: the margin instead.
                complete_before = (
                    None if distributed(conn) else conn.execute(text(_COMPLETE_BEFORE)).scalar()
                )
                drop(conn, dataset)
                # Not RETURNING: Citus deparses it wrongly for an INSERT ... SELECT it
                # pushes down to the shard.
                conn.execute(text(_TOTALS), {"dataset": dataset})
                if complete_before is not None:
                    conn.execute(
                        text("UPDATE kept_statistics SET complete_before = :at WHERE dataset = :d"),
                        {"at": complete_before, "d": dataset},
                    )
                totals = conn.execute(
                    text("SELECT documents, passages FROM kept_statistics WHERE dataset = :d"),
                    {"d": dataset},
                ).first()
                terms = conn.execute(text(_terms_sql(best_kept)), {"dataset": dataset}).rowcount
                # An erasure bumps the tally in its last transaction: one that committed
                # since the first read shows here; one still running is waited for (its
                # row lock); one that begins after this waits for the commit, then drops
                # what this kept.
                after = conn.execute(text(_ERASURES + " FOR SHARE"), {"d": dataset}).scalar()
                if after != before:
                    raise _ErasedMeanwhile
    except _ErasedMeanwhile:
        return None
    if totals is None:
        return Refreshed(0, 0, 0)
    return Refreshed(int(totals.documents), int(totals.passages), int(terms))


def drop(conn: Connection, dataset: str) -> None:
    """Forgets what is kept of ``dataset`` (its terms go with it: ON DELETE CASCADE), in
    the caller's transaction."""
    conn.execute(text("DELETE FROM kept_statistics WHERE dataset = :d"), {"d": dataset})


def thread_erased(conn: Connection, dataset: str) -> None:
    """A thread of ``dataset`` is being erased (in the caller's transaction): what is kept
    of its words goes, and a count running meanwhile is not kept (:func:`refresh`)."""
    conn.execute(
        text("UPDATE datasets SET threads_erased = threads_erased + 1 WHERE dataset = :d"),
        {"d": dataset},
    )
    drop(conn, dataset)


def due(conn: Connection, *, above: int, stale_share: float = STALE_SHARE) -> list[str]:
    """The datasets of more than ``above`` completed episodes whose statistics are not kept,
    or were counted when their completed episodes were more than ``stale_share`` fewer or
    more than now, or whose count of completed episodes is not kept (a store migrated to
    revision 0025); on Citus, those of the workers that answer."""
    return read_every_shard(
        conn,
        across_datasets("the maintenance finds the large datasets whose statistics are due")
        + """
        SELECT c.dataset FROM (
            SELECT e.dataset, count(*) AS n FROM episodes e WHERE e.status = 'completed'
            GROUP BY e.dataset HAVING count(*) > :above) c
        LEFT JOIN kept_statistics k ON k.dataset = c.dataset
        LEFT JOIN episode_counts x ON x.dataset = c.dataset
        WHERE k.dataset IS NULL OR abs(c.n - k.documents) > :share * k.documents
           OR x.completed IS NULL
        ORDER BY c.dataset
        """,
        {"above": above, "share": stale_share},
    )
