"""Recall's statements as Recall sends them, for the bare-SQL floor the speed benchmarks time
beside Recall: the query's terms read as Recall reads them, SQLAlchemy's ``:name`` parameters
as psycopg's, and the statement sent in numbered placeholders with its rows in binary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import psycopg
from psycopg.rows import dict_row

#: The query's distinct lexemes and those of its words' irregular forms, as
#: store.recall_queries.query_terms asks for them (and Recall's opening statement reads
#: them): what the default ranking (``RankingOptions.word_forms``) sends.
TERMS_SQL = """
    WITH cfg AS (SELECT CAST(coalesce((SELECT text_search_config FROM datasets
                                       WHERE dataset = %(dataset)s), 'english') AS regconfig) AS c),
    terms AS (
        SELECT DISTINCT u.lexeme, NULL::text AS word
        FROM cfg, unnest(to_tsvector(cfg.c, %(query)s)) u
        UNION
        SELECT a.lexeme, o.lexeme
        FROM cfg, unnest(CAST(%(forms)s AS text[]), CAST(%(words)s AS text[])) AS f(form, word)
        CROSS JOIN LATERAL unnest(to_tsvector(cfg.c, f.form)) a
        CROSS JOIN LATERAL unnest(to_tsvector(cfg.c, f.word)) o
        WHERE cfg.c = CAST('english' AS regconfig)
    )
    SELECT t.lexeme, t.word,
           (SELECT array_agg(u.lexeme ORDER BY p.position)
            FROM cfg, unnest(to_tsvector(cfg.c, %(query)s)) u
            CROSS JOIN LATERAL unnest(u.positions) AS p(position)) AS ordered
    FROM terms t
"""


def query_term_params(conn: psycopg.Connection, dataset: str, query: str) -> dict[str, object]:
    """The ranking statement's ``lexemes``, ``weights`` and ``terms`` (and ``phrases``, the
    query's word pairs, under the default's second look) for ``query`` in a dataset stored
    in the clear (a lexeme is its own token), read as Recall reads them: one statement,
    then :func:`episodic.store.recall_queries.query_term_tokens` and ``phrase_pairs``."""
    from episodic.crypto import ClearKey
    from episodic.query_focus import word_forms
    from episodic.store.recall_queries import DEFAULT_RANKING, phrase_pairs, query_term_tokens

    forms = word_forms(query) if DEFAULT_RANKING.word_forms else []
    rows = conn.execute(
        TERMS_SQL,
        {
            "dataset": dataset,
            "query": query,
            "forms": [f for f, _ in forms],
            "words": [w for _, w in forms],
        },
    ).fetchall()
    terms = query_term_tokens(
        ClearKey(dataset),
        [(lexeme, False) for lexeme, word, _ in rows if word is None],
        [(lexeme, word) for lexeme, word, _ in rows if word is not None],
    )
    params: dict[str, object] = {
        "lexemes": [t for t, _, _ in terms],
        "weights": [w for _, w, _ in terms],
        "terms": [term for _, _, term in terms],
    }
    if DEFAULT_RANKING.phrase:  # the query's word pairs, from its lexemes in order
        params["phrases"] = phrase_pairs(ClearKey(dataset), list(rows[0][2] or []) if rows else [])
    return params


def psycopg_sql(sql: str) -> str:
    """SQLAlchemy's :name parameters as psycopg's %(name)s (casts like ::text untouched)."""
    sql = sql.replace("%", "%%")
    return re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", sql)


def as_recall_sends(
    conn: psycopg.Connection, statement: str | KeptStatement, params: dict[str, object]
) -> list[tuple[object, ...]]:
    """The rows of ``statement`` (psycopg's named form) sent as Recall sends it
    (``episodic.store.raw_statement.fetch_all``): in PostgreSQL's numbered placeholders,
    which psycopg does not parse again on every execute as it does a named statement over
    4 KB (~0.25 ms of CPU for the ranking statement), rows read in binary. The numbering
    is the bench's own (the floor does not depend on the checkout measured, which may be
    older than raw_statement.numbered)."""
    return sent_as_recall_sends(conn, statement, params).fetchall()


@dataclass(frozen=True)
class KeptStatement:
    """The approximate ranking statement for a request without filters, as Recall runs it
    (``episodic.store.recall_queries._rank_with``): the dataset's kept postings read first
    and the lexical pool chosen from them (``episodic.store.lexical_pool``), then the
    statement that takes the pool — or, when nothing is kept, the statement that counts
    the statistics itself. Each in psycopg's named form."""

    counted: str
    pooled: str
    postings: str

    @classmethod
    def of(cls, *, exact_cosine: bool = False) -> KeptStatement:
        """Recall's statements for the approximate path with a query vector."""
        from episodic.store.lexical_pool import postings_statement
        from episodic.store.recall_queries import DEFAULT_RANKING, recall_statement

        def statement(pooled: bool) -> str:
            return psycopg_sql(
                recall_statement(
                    with_query=True,
                    with_vector=True,
                    approximate=True,
                    exact_cosine=exact_cosine,
                    kept_statistics=True,
                    lexical_pool=pooled,
                )
            )

        return cls(
            counted=statement(False),
            pooled=statement(True),
            postings=psycopg_sql(postings_statement(DEFAULT_RANKING)),
        )

    def chosen(
        self, conn: psycopg.Connection, params: dict[str, object]
    ) -> tuple[str, dict[str, object]]:
        """The statement to send and its parameters, the pool read and chosen first."""
        from episodic.store.lexical_pool import choose_lexical_pool

        with conn.cursor(row_factory=dict_row, binary=True) as cursor:
            rows = cursor.execute(self.postings, params).fetchall()
        pool = choose_lexical_pool(
            rows,
            candidates=int(params["approx_candidates"]),  # type: ignore[call-overload]
            per_lexeme=int(params["approx_per_lexeme"]),  # type: ignore[call-overload]
        )
        if pool is None:
            return self.counted, params
        return self.pooled, {**params, **pool.params()}


def execute(
    conn: psycopg.Connection, statement: str | KeptStatement, params: dict[str, object]
) -> psycopg.Cursor[Any]:
    """``statement`` executed as psycopg sends a named statement (a :class:`KeptStatement`
    as Recall runs it)."""
    if isinstance(statement, KeptStatement):
        statement, params = statement.chosen(conn, params)
    return conn.execute(statement, params)


def sent_as_recall_sends(
    conn: psycopg.Connection, statement: str | KeptStatement, params: dict[str, object]
) -> psycopg.RawCursor[tuple[object, ...]]:
    """:func:`as_recall_sends`'s cursor, executed, its rows not yet read (its
    ``description`` names the columns)."""
    if isinstance(statement, KeptStatement):
        statement, params = statement.chosen(conn, params)
    sql, names = _numbered(statement)
    cursor = psycopg.RawCursor(conn)
    cursor.execute(sql, [params[name] for name in names], binary=True)
    return cursor


@lru_cache(maxsize=16)
def _numbered(statement: str) -> tuple[str, list[str]]:
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(0) == "%%":
            return "%"
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return re.sub(r"%%|%\((\w+)\)s", number, statement), names
