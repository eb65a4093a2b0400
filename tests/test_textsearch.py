"""pg_textsearch, issue 50's candidate for the heavy path's lexical part, builds from the
vendored source against the wheel's PostgreSQL, ranks our lexical documents (tsvectors, as
``episodic_bm25_text`` turns them into text) by BM25, and answers after a crash.

Marked slow (the first run compiles the extension: seconds quiet, about two minutes at load ~19):
``pytest -m slow tests/test_textsearch.py``. Skipped where it cannot be built (no source,
no compiler) unless ``CI`` is set, where that is a failure."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator

import psycopg
import pytest

from episodic.testing.textsearch import (
    BM25_TEXT_FUNCTION,
    TextsearchServer,
    TextsearchUnavailable,
    textsearch_server,
)

pytestmark = pytest.mark.slow

#: (episode, dataset, document words): 'zeta' is rare, 'alpha' in every document.
DOCUMENTS = [
    ("a", "big", "zeta zeta alpha"),
    ("b", "big", "zeta alpha beta gamma delta epsilon eta theta iota kappa"),
    ("c", "big", "alpha beta"),
    ("d", "big", "alpha gamma delta"),
    ("e", "other", "zeta zeta zeta"),  # another dataset: never in big's answer
]

TOP_K = """SELECT episode_id FROM docs WHERE dataset = %(ds)s
    ORDER BY episodic_bm25_text(search_vector) <@> %(q)s::bm25query LIMIT %(k)s"""


@pytest.fixture(scope="module")
def server() -> Iterator[TextsearchServer]:
    # Its own temporary directory, not pytest's: that one is closed to other users, and the
    # server runs as the wheel's system user when the tests run as root.
    try:
        with textsearch_server() as started:
            yield started
    except TextsearchUnavailable as e:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(e))


def _query(conn: psycopg.Connection, words: str) -> str:
    """A bm25query of ``words`` as the index holds them (md5 of each lexeme), naming the
    index (a bm25query with a WHERE clause needs it)."""
    row = conn.execute(
        "SELECT string_agg(md5(w), ' ') FROM unnest(string_to_array(%s, ' ')) w", (words,)
    ).fetchone()
    assert row is not None
    return f"docs_bm25_idx:{row[0]}"


def _bm25_order(dataset: str, word: str, documents: list[tuple[str, str, str]]) -> list[str]:
    """The holders of ``word`` in ``dataset``, best BM25 first (k1 1.2, b 0.75), statistics
    over the whole table (an index's statistics are its table's)."""
    n = len(documents)
    avgdl = sum(len(d.split()) for _, _, d in documents) / n
    df = sum(word in d.split() for _, _, d in documents)
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))

    def score(doc: str) -> float:
        tf, dl = doc.split().count(word), len(doc.split())
        return idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / avgdl))

    holders = [(e, d) for e, ds, d in documents if ds == dataset and word in d.split()]
    return [e for e, d in sorted(holders, key=lambda h: -score(h[1]))]


def _load(conn: psycopg.Connection, documents: list[tuple[str, str, str]]) -> None:
    for episode, dataset, words in documents:
        conn.execute(
            "INSERT INTO docs VALUES (%s, %s, to_tsvector('simple', %s))",
            (dataset, episode, words),
        )


def test_bm25_top_k_of_a_dataset_ranks_its_documents_by_bm25_and_survives_a_crash(
    server: TextsearchServer,
) -> None:
    with psycopg.connect(server.url(), autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS textsearch_test")
        admin.execute("CREATE DATABASE textsearch_test")
    url = server.url("textsearch_test")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pg_textsearch")
        conn.execute(BM25_TEXT_FUNCTION)
        conn.execute("CREATE TABLE docs (dataset text, episode_id text, search_vector tsvector)")
        _load(conn, DOCUMENTS[:3])
        conn.execute(
            "CREATE INDEX docs_bm25_idx ON docs USING bm25 "
            "((episodic_bm25_text(search_vector))) WITH (text_config = 'simple')"
        )
        _load(conn, DOCUMENTS[3:])  # after the build: written to the index as they come
        got = [r[0] for r in conn.execute(TOP_K, {"ds": "big", "q": _query(conn, "zeta"), "k": 2})]
        assert got == _bm25_order("big", "zeta", DOCUMENTS) == ["a", "b"]

    server.stop("immediate")  # as a crash: the index's last writes come back from the WAL
    server.start()
    with psycopg.connect(url, autocommit=True) as conn:
        q = _query(conn, "zeta")
        assert [r[0] for r in conn.execute(TOP_K, {"ds": "other", "q": q, "k": 5})] == ["e"]
        assert [r[0] for r in conn.execute(TOP_K, {"ds": "big", "q": q, "k": 2})] == ["a", "b"]
