"""The query's terms as the ranking statement binds them: its lexemes as the dataset's
tokens, with their weights in BM25 and the query word each stands for
(:func:`query_terms`, from the irregular word forms too), its adjacent word pairs
(:func:`query_phrase_pairs`), the (speaker, word) pairs it may name
(:func:`speaker_pair_params`), and the feedback words of the RM3-style expansion
(:func:`expansion_terms`).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from sqlalchemy import Connection, text

from episodic.crypto import DatasetKey
from episodic.store.lexical_statistics import LEXEME_QUERY
from episodic.store.ranking_options import (
    EXPANSION_POOL,
    EXPANSION_TERMS,
    EXPANSION_WEIGHT,
    PHRASE_PAIRS,
    PHRASE_WINDOW,
    RankingOptions,
)
from episodic.store.recall_filters import CANDIDATES, RecallFilters, filter_params
from episodic.store.recall_index import DATASET_CONFIG

__all__ = [
    "expansion_terms",
    "phrase_pairs",
    "query_lexemes",
    "query_phrase_pairs",
    "query_term_tokens",
    "query_terms",
    "speaker_pair_params",
]


def query_phrase_pairs(conn: Connection, key: DatasetKey, query: str) -> list[str]:
    """The query's adjacent word pairs (its lexemes in the order written, stop words
    skipped) as phrase tsqueries of ``key``'s tokens: the second within
    :data:`PHRASE_WINDOW` positions after the first ("When did Caroline go to the LGBTQ
    conference?" gives caroline→go, go→lgbtq, lgbtq→conference)."""
    rows = conn.execute(
        text(f"SELECT u.lexeme, u.positions FROM unnest(to_tsvector({DATASET_CONFIG}, :q)) u"),
        {"q": query, "dataset": key.dataset},
    ).all()
    order = [lexeme for _, lexeme in sorted((p, lexeme) for lexeme, ps in rows for p in ps)]
    return phrase_pairs(key, order)


def phrase_pairs(key: DatasetKey, order: Sequence[str]) -> list[str]:
    """:func:`query_phrase_pairs` from the query's lexemes in the order written
    (:attr:`Opening.ordered`); the first :data:`PHRASE_PAIRS` of them."""

    def quoted(lexeme: str) -> str:
        return "'" + key.token(lexeme).replace("\\", "\\\\").replace("'", "''") + "'"

    pairs = list(dict.fromkeys((a, b) for a, b in pairwise(order) if a != b))[:PHRASE_PAIRS]
    return [
        " | ".join(f"({quoted(a)} <{n}> {quoted(b)})" for n in range(1, PHRASE_WINDOW + 1))
        for a, b in pairs
    ]


def query_lexemes(conn: Connection, key: DatasetKey, query: str) -> list[str]:
    """The query's distinct lexemes (not blinded), in the dataset's configuration."""
    return [
        r[0]
        for r in conn.execute(
            text(f"SELECT DISTINCT lexeme FROM unnest(to_tsvector({DATASET_CONFIG}, :q))"),
            {"q": query, "dataset": key.dataset},
        )
    ]


def speaker_pair_params(
    key: DatasetKey, lexemes: Sequence[str], forms: Sequence[tuple[str, str]] = ()
) -> dict[str, object]:
    """The statement's parameters of ``RankingOptions.speaker``: every ordered pair of the
    query's distinct ``lexemes`` (one taken as a speaker's name, the other as a word, or
    a word's irregular form from ``forms``: (form, word) lexemes) as the token of the
    document's speaker-word pair (:func:`~episodic.store.recall_index.speaker_pair`), with
    the name and the query word it counts for; ``speaker_words``: how many other words a
    name can cover (the query's words less one). Which word is a name is not guessed:
    only a speaker's pairs are in a document."""
    from episodic.store.recall_index import speaker_pair

    own = sorted(set(lexemes))
    stands_for = [(w, w) for w in own] + [(f, w) for f, w in forms if w in own and f not in own]
    names, words, pairs = [], [], []
    for name in own:
        for lexeme, word in stands_for:
            if word != name:
                names.append(name)
                words.append(word)
                pairs.append("'" + _quoted_token(key.token(speaker_pair(name, lexeme))) + "'")
    return {
        "speaker_names": names,
        "speaker_words": words,
        "speaker_pairs": pairs,
        "speaker_word_count": max(len(own) - 1, 1),
    }


def _quoted_token(token: str) -> str:
    return token.replace("\\", "\\\\").replace("'", "''")


def query_terms(
    conn: Connection, key: DatasetKey, query: str, options: RankingOptions
) -> list[tuple[str, float, str]]:
    """The query's lexemes as ``key``'s tokens, each with its weight in BM25 and the token
    of the query word it stands for (``RankingOptions.weighted_terms``): the query's own
    lexemes stand for themselves and weigh 1, or
    :data:`episodic.query_focus.GENERIC_WEIGHT` for a generic word under
    ``weight_generic_terms``; under ``word_forms`` the stems of the irregular forms of its
    words (:func:`episodic.query_focus.word_forms`, only when the dataset's configuration
    is english) weigh 1 and stand for the word they are a form of."""
    from episodic.query_focus import GENERIC_WORDS, word_forms

    forms = word_forms(query) if options.word_forms else []
    rows = conn.execute(
        text(
            f"""
            WITH cfg AS (SELECT {DATASET_CONFIG} AS c)
            SELECT DISTINCT u.lexeme, NULL::text AS word,
                   u.lexeme IN (SELECT g.lexeme FROM cfg, unnest(to_tsvector(cfg.c, :generic)) g)
                       AS generic
            FROM cfg, unnest(to_tsvector(cfg.c, :q)) u
            UNION
            SELECT a.lexeme, o.lexeme, false
            FROM cfg, unnest(CAST(:forms AS text[]), CAST(:words AS text[])) AS f(form, word)
            CROSS JOIN LATERAL unnest(to_tsvector(cfg.c, f.form)) a
            CROSS JOIN LATERAL unnest(to_tsvector(cfg.c, f.word)) o
            WHERE cfg.c = CAST('english' AS regconfig)
            """
        ),
        {
            "q": query,
            "generic": GENERIC_WORDS if options.weight_generic_terms else "",
            "forms": [f for f, _ in forms],
            "words": [w for _, w in forms],
            "dataset": key.dataset,
        },
    ).all()
    return query_term_tokens(
        key,
        [(lexeme, generic) for lexeme, word, generic in rows if word is None],
        [(lexeme, word) for lexeme, word, _ in rows if word is not None],
    )


def query_term_tokens(
    key: DatasetKey,
    lexemes: Sequence[tuple[str, bool]],
    forms: Sequence[tuple[str, str]],
) -> list[tuple[str, float, str]]:
    """:func:`query_terms`' answer from the lexemes it read: the query's own ``lexemes``
    (each with whether it is generic) and the ``forms`` (lexeme of a form, lexeme of the
    query word it is a form of), as ``key``'s tokens — also what
    :func:`~episodic.store.episode_reads.read_opening` read for them."""
    from episodic.query_focus import GENERIC_WEIGHT

    own = dict(lexemes)
    out = {
        key.token(lexeme): (GENERIC_WEIGHT if generic else 1.0, key.token(lexeme))
        for lexeme, generic in own.items()
    }
    for lexeme, word in forms:
        if lexeme not in own and word in own:
            out.setdefault(key.token(lexeme), (1.0, key.token(word)))
    return sorted((token, weight, term) for token, (weight, term) in out.items())


def expansion_terms(
    conn: Connection,
    key: DatasetKey,
    filters: RecallFilters,
    first: Sequence[Any],
    lexemes: Sequence[str],
) -> list[tuple[str, float]]:
    """RM3-style feedback words (``RankingOptions.expansion``): the tokens of the ``first``
    pass's episodes' documents that are not among ``lexemes``, scored by their share of
    each document (tf / length, weighted by the episode's first-pass similarity) × their
    idf over the filtered dataset; the best :data:`EXPANSION_TERMS`, each with a weight of
    :data:`EXPANSION_WEIGHT` × its score / the best score."""
    weights = [max(float(r["similarity"]), 0.0) for r in first]
    if not first or sum(weights) <= 0:
        return []
    rows = conn.execute(
        text(
            f"""
            WITH fb AS (
                SELECT e.search_vector AS tsv, r.w,
                       greatest(coalesce(e.search_length, length(e.search_vector)), 1)::float8
                           AS dl
                FROM unnest(CAST(:ids AS uuid[]), CAST(:fbw AS float8[])) AS r(id, w)
                JOIN episodes e ON e.dataset = :dataset AND e.episode_id = r.id
            ),
            pool AS (
                SELECT u.lexeme,
                       sum(fb.w * coalesce(array_length(u.positions, 1), 1) / fb.dl) AS tf
                FROM fb CROSS JOIN LATERAL unnest(fb.tsv) u
                WHERE u.lexeme <> ALL (CAST(:lexemes AS text[]))
                GROUP BY u.lexeme ORDER BY tf DESC, u.lexeme LIMIT :pool
            ),
            n AS (SELECT count(*)::float8 AS n FROM ({CANDIDATES}) x)
            SELECT q.lexeme, q.tf * ln(1.0 + (n.n - d.df + 0.5) / (d.df + 0.5)) AS score
            FROM pool q CROSS JOIN n CROSS JOIN LATERAL (
                SELECT count(*)::float8 AS df FROM ({CANDIDATES}) x
                WHERE x.search_vector @@ {LEXEME_QUERY}) d
            ORDER BY score DESC, q.lexeme LIMIT :terms
            """
        ),
        {
            **filter_params(key, filters),
            "ids": [r["episode_id"] for r in first],
            "fbw": [w / sum(weights) for w in weights],
            "lexemes": list(lexemes),
            "pool": EXPANSION_POOL,
            "terms": EXPANSION_TERMS,
        },
    ).all()
    best = max((float(score) for _, score in rows), default=0.0)
    if best <= 0:
        return []
    return [(lexeme, EXPANSION_WEIGHT * float(score) / best) for lexeme, score in rows if score > 0]
