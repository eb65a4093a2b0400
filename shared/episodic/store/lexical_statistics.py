"""BM25 and the lexical statistics of the ranking statement.

The SQL of a document's (a passage's) BM25 over the query's lexemes and of the share of
the query's weight it holds (RankingOptions.lexical_coverage); the query's lexemes as
tsquery operands; and what the approximate path reads from the whole filtered dataset
rather than from its candidates — BM25's statistics, the best BM25 and the best cosine —
for its scores to equal the exact path's. :mod:`episodic.store.ranking_sql` assembles
them into the statement.
"""

from __future__ import annotations

from episodic.store.kept_statistics import COMPLETE_BEFORE_SQL
from episodic.store.ranking_options import (
    BM25_B,
    BM25_K1,
    DEFAULT_RANKING,
    PASSAGE_BM25,
    RankingOptions,
)
from episodic.store.recall_filters import CANDIDATES

__all__ = [
    "LEXEME_QUERY",
    "QUOTED_LEXEME",
    "bm25",
    "dataset_best_cosine",
    "dataset_statistics",
    "document_length",
    "matched_idf",
    "only_query_lexemes",
    "query_idf",
    "query_lexemes_cte",
]

#: How many of each of the pool's words' kept best holders are read (:approx_postings).
_POSTINGS = "CAST(:approx_postings AS int)"

# A lexeme as a quoted tsquery operand ('it''s', backslashes doubled), so OR-ing the query's
# lexemes never re-parses or re-stems them.
QUOTED_LEXEME = r"""'''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || ''''"""

#: One query lexeme (``q.lexeme``) as a tsquery of its own.
LEXEME_QUERY = f"CAST({QUOTED_LEXEME.replace('lexeme', 'q.lexeme')} AS tsquery)"


def query_lexemes_cte(options: RankingOptions) -> str:
    """The CTE ``q``: the query's distinct lexemes (``:lexemes``); with weighted terms
    (``options.weighted_terms()``) also each one's ``weight`` (its best) and ``term`` (the
    query word's own lexeme it stands for: itself, or the word an irregular form expands;
    NULL for a feedback word, which no coverage counts). The ranking statement and the
    kept postings' read (lexical_pool.postings_statement) both start from it."""
    if not options.weighted_terms():
        return "q AS (SELECT DISTINCT lexeme FROM unnest(CAST(:lexemes AS text[])) AS lexeme)"
    return (
        "q AS (SELECT lexeme, max(weight) AS weight, min(term) AS term FROM unnest("
        "CAST(:lexemes AS text[]), CAST(:weights AS float8[]), CAST(:terms AS text[])) "
        "AS u(lexeme, weight, term) GROUP BY lexeme)"
    )


def _idf(df: str, stats: str) -> str:
    """BM25's idf of a lexeme whose document frequency is ``df`` (NULL: none holds it)."""
    return f"ln(1.0 + ({stats}.n - coalesce({df}, 0.0) + 0.5) / (coalesce({df}, 0.0) + 0.5))"


def matched_idf(df: str, stats: str, weight: str | None) -> str:
    """Summed over a document's (passage's) matching query lexemes: their idf (times their
    weight), the part of the query's weight it holds (RankingOptions.lexical_coverage)."""
    weighted = f"{weight} * " if weight else ""
    return f"sum({weighted}{_idf(f'{df}.df', stats)})"


def query_idf(options: RankingOptions) -> str:
    """A CTE ``query_idf`` (``doc``, ``passage``): the query's whole weight, the sum of its
    words' idf over the documents (passages) — a word the dataset lacks (df 0) included, and
    a word that stands for several lexemes (its irregular forms) counted once at its best —
    against which :func:`matched_idf` is a share. Reads ``q``, ``ddf``, ``pdf``, ``dstats``
    and ``pstats`` as both paths define them."""
    weighted = options.weighted_terms()
    weight = "q.weight * " if weighted else ""
    word = "coalesce(q.term, q.lexeme)" if weighted else "q.lexeme"

    def whole(df: str, stats: str) -> str:
        return (
            f"(SELECT coalesce(sum(w), 0.0) FROM (SELECT max({weight}{_idf('f.df', 's')}) AS w "
            f"FROM q LEFT JOIN {df} f ON f.lexeme = q.lexeme CROSS JOIN {stats} s "
            f"GROUP BY {word}) per_word)"
        )

    return f"""
        query_idf AS (
            SELECT {whole("ddf", "dstats")} AS doc, {whole("pdf", "pstats")} AS passage
        ),"""


def document_length(alias: str) -> str:
    """An episode's document length in lexemes: its stored ``search_length``, else counted
    from its lexical document (``alias.tsv``; an episode indexed before lengths were kept)."""
    return (
        f"coalesce({alias}.search_length, (SELECT sum(coalesce(array_length(u.positions, 1), 1))"
        f" FROM unnest({alias}.tsv) u))::float8"
    )


def dataset_statistics(
    options: RankingOptions = DEFAULT_RANKING, *, kept: bool = False, lexical_pool: bool = False
) -> tuple[str, str, str]:
    """What the approximate path takes from the whole filtered dataset rather than from its
    candidates, for its scores to equal the exact path's (which computes them over every
    filtered episode): BM25's statistics and the best BM25, by which the lexical signals
    are normalised. Returns CTEs to precede the pool (``dataset_dterms``, ``dataset_pterms``:
    every document and passage holding a selective query lexeme, found through the GIN
    indexes on ``search_vector``, with the lexemes' counts; ``ddf`` and ``pdf``; their
    exact BM25 per episode, whose best the pool takes; ``best_document``,
    ``best_passage``) and the bodies of ``dstats`` and ``pstats``. The counts and average lengths come from index-only scans of the
    covering indexes of 0013 (no document, vector or chunk row read). A passage is an
    (episode, chunk of its thread up to the episode's end) pair, as on the exact path.

    ``kept`` (a request without filters, whose statistics are the whole dataset's): the
    counts and frequencies are read from the dataset's kept statistics
    (:mod:`episodic.store.kept_statistics`) when it has them, and counted as above when it
    has none; the CTE ``kept`` then holds their one row, or none.

    ``lexical_pool`` (with ``kept``; :mod:`episodic.store.lexical_pool`): Recall has read
    the kept statistics and scored the pool words' postings itself, so nothing is read
    here: the counts, the frequencies, when they were counted and the best BM25 are
    parameters (``LexicalPool.params``)."""
    if lexical_pool and not kept:
        raise ValueError("a lexical pool is chosen from kept statistics")
    passages_of = _passages_of_candidates()
    # Weighted query lexemes (RankingOptions.weighted_terms) score as on the exact path.
    weight, weight_join, matched = None, "", "count(*)::float8"
    if options.weighted_terms():
        weight, weight_join = "qw.weight", " JOIN q qw ON qw.lexeme = t.lexeme"
        matched = "count(DISTINCT qw.term)::float8"
    # ``search_length`` alone: it is written with ``search_vector`` (recall_index), so the
    # exact path's fallback (counting the document's lexemes) never applies.
    # The best BM25 is computed over the documents (passages) holding a selective query
    # lexeme (at most :approx_selective_df holders): reading every holder of a word most
    # documents contain would cost what the exact path costs. A document holding only
    # common words scores little (their idf is small); the candidates' best covers it.
    counted_ddf = f"""SELECT count(*)::float8 AS df FROM ({CANDIDATES}) x
                WHERE x.search_vector @@ {LEXEME_QUERY}"""
    counted_pdf = f"""SELECT count(*)::float8 AS df FROM {passages_of}
                WHERE m.search_vector @@ {LEXEME_QUERY}"""
    counted_dstats = f"""SELECT count(*)::float8 AS n, greatest(avg(x.search_length), 1.0) AS avgdl
            FROM ({CANDIDATES}) x"""
    counted_pstats = f"""SELECT count(*)::float8 AS n,
                   greatest(avg(greatest(m.search_length, 1)), 1.0) AS avgdl
            FROM {passages_of}"""
    if not kept:
        frequencies = f"""
        ddf AS (
            SELECT q.lexeme, df.df FROM q CROSS JOIN LATERAL ({counted_ddf}) df
        ),
        pdf AS (
            SELECT q.lexeme, df.df FROM q CROSS JOIN LATERAL ({counted_pdf}) df
        ),"""
        dstats, pstats = counted_dstats, counted_pstats
    else:
        # Each count below runs only when nothing is kept: a CASE evaluates the subquery of
        # the branch it takes, and a one-time filter skips its scan.
        frequencies = f"""
        kept AS MATERIALIZED (
            SELECT k.documents::float8 AS dn, k.document_length AS davg,
                   k.passages::float8 AS pn, k.passage_length AS pavg,
                   {COMPLETE_BEFORE_SQL} AS complete_before
            FROM kept_statistics k WHERE k.dataset = :dataset
        ),
        -- Each query word's frequencies (its postings are read for the pool's words only:
        -- kept_postings, below).
        kept_terms AS MATERIALIZED (
            SELECT q.lexeme, t.documents::float8 AS ddf, t.passages::float8 AS pdf
            FROM q LEFT JOIN kept_term_statistics t
              ON t.dataset = :dataset AND t.token = q.lexeme
        ),
        ddf AS (
            SELECT q.lexeme, CASE WHEN EXISTS (SELECT 1 FROM kept)
                THEN coalesce(q.ddf, 0.0) ELSE ({counted_ddf}) END AS df
            FROM kept_terms q
        ),
        pdf AS (
            SELECT q.lexeme, CASE WHEN EXISTS (SELECT 1 FROM kept)
                THEN coalesce(q.pdf, 0.0) ELSE ({counted_pdf}) END AS df
            FROM kept_terms q
        ),"""
        dstats = f"""SELECT dn AS n, davg AS avgdl FROM kept
            UNION ALL
            SELECT counted.n, counted.avgdl FROM ({counted_dstats}) counted
            WHERE NOT EXISTS (SELECT 1 FROM kept)"""
        pstats = f"""SELECT pn AS n, pavg AS avgdl FROM kept
            UNION ALL
            SELECT counted.n, counted.avgdl FROM ({counted_pstats}) counted
            WHERE NOT EXISTS (SELECT 1 FROM kept)"""
    if lexical_pool:
        # Recall read the kept statistics with the postings (lexical_pool.KeptCounts):
        # the statement scores with that snapshot, and reads nothing kept itself.
        ctes = """
        kept AS MATERIALIZED (
            SELECT CAST(:kept_documents AS float8) AS dn,
                   CAST(:kept_document_length AS float8) AS davg,
                   CAST(:kept_passages AS float8) AS pn,
                   CAST(:kept_passage_length AS float8) AS pavg,
                   CAST(:kept_complete_before AS timestamptz) AS complete_before
        ),
        kept_terms AS MATERIALIZED (
            SELECT u.lexeme, u.ddf, u.pdf
            FROM unnest(CAST(:kept_lexemes AS text[]), CAST(:kept_ddf AS float8[]),
                        CAST(:kept_pdf AS float8[])) AS u(lexeme, ddf, pdf)
        ),
        ddf AS (SELECT lexeme, ddf AS df FROM kept_terms),
        pdf AS (SELECT lexeme, pdf AS df FROM kept_terms),
        dataset_dstats AS MATERIALIZED (SELECT dn AS n, davg AS avgdl FROM kept),
        dataset_pstats AS MATERIALIZED (SELECT pn AS n, pavg AS avgdl FROM kept),
        -- The dataset's best BM25, found by Recall over the pool words' postings.
        best_document AS (
            SELECT CAST(:best_document AS float8) AS score,
                   CAST(:best_document_idf AS float8) AS idf
        ),
        best_passage AS (
            SELECT CAST(:best_passage AS float8) AS score,
                   CAST(:best_passage_idf AS float8) AS idf
        ),"""
        return ctes, "SELECT n, avgdl FROM dataset_dstats", "SELECT n, avgdl FROM dataset_pstats"
    # With kept statistics the postings score the holders (below): no selective word is
    # read through the GIN indexes (a NULL tsquery matches nothing; and a one-time filter
    # skips the scans, whose parallel plan otherwise started a worker for nothing, ~11 ms).
    unless_kept = " AND NOT EXISTS (SELECT 1 FROM kept)" if kept else ""
    postings = (
        f"""
        -- The pool's words' postings in impact order: their best holders, best first,
        -- with their weights (kept_statistics.BEST_KEPT).
        kept_postings AS MATERIALIZED (
            SELECT t.token AS lexeme,
                   t.best_documents[1:{_POSTINGS}] AS documents,
                   t.document_weights[1:{_POSTINGS}] AS document_weights,
                   t.best_passages[1:{_POSTINGS}] AS passages,
                   t.passage_weights[1:{_POSTINGS}] AS passage_weights
            FROM kept_term_statistics t
            WHERE t.dataset = :dataset AND t.token IN (SELECT lexeme FROM pool_words)
        ),"""
        if kept
        else ""
    )
    ctes = f"""{frequencies}
        -- The query words whose holders the pool reads: the rarest :approx_words (a long
        -- query's common words would each bring thousands of holders, for little: their
        -- idf is small, and every candidate is scored over all the query's words anyway).
        pool_words AS MATERIALIZED (
            SELECT d.lexeme FROM ddf d JOIN pdf p ON p.lexeme = d.lexeme
            WHERE d.df + p.df > 0 ORDER BY d.df + p.df, d.lexeme LIMIT :approx_words
        ),{postings}
        selective AS (
            SELECT (SELECT string_agg({QUOTED_LEXEME}, ' | ')::tsquery FROM ddf
                    WHERE df > 0 AND df <= :approx_selective_df{unless_kept}
                      AND lexeme IN (SELECT lexeme FROM pool_words)) AS doc_tq,
                   (SELECT string_agg({QUOTED_LEXEME}, ' | ')::tsquery FROM pdf
                    WHERE df > 0 AND df <= :approx_selective_df{unless_kept}
                      AND lexeme IN (SELECT lexeme FROM pool_words)) AS passage_tq
        ),
        dataset_dterms AS MATERIALIZED (
            SELECT x.episode_id, x.search_length::float8 AS dl, u.lexeme,
                   coalesce(array_length(u.positions, 1), 1)::float8 AS tf
            FROM ({CANDIDATES}) x
            CROSS JOIN LATERAL unnest({only_query_lexemes("x.search_vector")}) AS u
            WHERE x.search_vector @@ (SELECT doc_tq FROM selective){unless_kept}
        ),
        dataset_pterms AS MATERIALIZED (
            SELECT x.episode_id, m.start_sequence, m.start_offset,
                   greatest(m.search_length, 1)::float8 AS dl, u.lexeme,
                   coalesce(array_length(u.positions, 1), 1)::float8 AS tf
            FROM {passages_of}
            CROSS JOIN LATERAL unnest({only_query_lexemes("m.search_vector")}) AS u
            WHERE m.search_vector @@ (SELECT passage_tq FROM selective){unless_kept}
        ),
        dataset_dstats AS MATERIALIZED (
            {dstats}
        ),
        dataset_pstats AS MATERIALIZED (
            {pstats}
        ),
        -- The exact document and best-passage BM25 (and how many query words each holds)
        -- of every holder of a selective word, or with kept statistics of every holder
        -- the query words' postings list: the best of them normalise the lexical signal,
        -- and the pool takes the best of them by their lexical score. ``floor``: a score
        -- some passage of the episode reaches (its best).
        dataset_doc_bm25 AS MATERIALIZED (
            SELECT t.episode_id, {bm25("t", "ddf", "t.dl", "s", weight)} AS score,
                   {matched} AS matched, {matched_idf("ddf", "s", weight)} AS matched_idf
            FROM dataset_dterms t JOIN ddf ON ddf.lexeme = t.lexeme{weight_join}
            CROSS JOIN dataset_dstats s
            GROUP BY t.episode_id{_kept_postings(weight, weight_join, matched) if kept else ""}
        ),
        dataset_passage_bm25 AS MATERIALIZED (
            SELECT episode_id, max(score) AS score, max(matched) AS matched,
                   max(matched_idf) AS matched_idf, max(score) AS floor,
                   max(matched_idf) AS floor_idf FROM (
                SELECT t.episode_id, {bm25("t", "pdf", "t.dl", "s", weight, passage=True)} AS score,
                       {matched} AS matched, {matched_idf("pdf", "s", weight)} AS matched_idf
                FROM dataset_pterms t JOIN pdf ON pdf.lexeme = t.lexeme{weight_join}
                CROSS JOIN dataset_pstats s
                GROUP BY t.episode_id, t.start_sequence, t.start_offset) per_passage
            GROUP BY episode_id{_kept_postings(weight, weight_join, matched, passage=True) if kept else ""}
        ),
        best_document AS (
            SELECT max(score) AS score, max(matched_idf) AS idf FROM dataset_doc_bm25
        ),
        best_passage AS (
            SELECT max(floor) AS score, max(floor_idf) AS idf FROM dataset_passage_bm25
        ),"""
    doc_stats = "SELECT n, avgdl FROM dataset_dstats"
    passage_stats = "SELECT n, avgdl FROM dataset_pstats"
    return ctes, doc_stats, passage_stats


def _kept_postings(
    weight: str | None, weight_join: str, matched: str, *, passage: bool = False
) -> str:
    """With kept statistics: each episode in the query words' postings — of documents, or
    (``passage``) of each episode's best passage per word — scored over the words whose
    postings hold it (``idf`` × its kept weight). A document's is its BM25 for those
    words, so never above its own, and equal to it when every query word it holds lists it
    (always for a word held by at most ``BEST_KEPT``). A passage's sums each word's best
    passage of the episode, which may be different passages: an estimate, for the pool;
    its ``floor``, its best single word's, is a score one of its passages reaches (for the
    normalising maximum)."""
    weighted = f"{weight} * " if weight else ""
    # the frequencies, the statistics and kept_postings' holders and weights of the kind
    if passage:
        df, stats, postings, weights = "pdf", "dataset_pstats", "passages", "passage_weights"
    else:
        df, stats, postings, weights = "ddf", "dataset_dstats", "documents", "document_weights"
    idf = _idf(f"{df}.df", "s")
    floor = (
        f",\n                   max({weighted}{idf} * p.weight) AS floor, "
        f"max({weighted}{idf}) AS floor_idf"
        if passage
        else ""
    )
    return f"""
            UNION ALL
            SELECT p.episode_id, sum({weighted}{idf} * p.weight) AS score,
                   {matched} AS matched, {matched_idf(df, "s", weight)} AS matched_idf{floor}
            FROM kept_postings t JOIN {df} ON {df}.lexeme = t.lexeme{weight_join}
            CROSS JOIN {stats} s
            CROSS JOIN LATERAL unnest(t.{postings}, t.{weights})
                AS p(episode_id, weight)
            GROUP BY p.episode_id"""


def _passages_of_candidates() -> str:
    """FROM items: every filtered episode (``x``) joined to the chunks of its thread up to
    its end (``m``): the exact path's passages."""
    return f"""({CANDIDATES}) x
              JOIN message_chunks m
                ON m.dataset = :dataset AND m.thread_id = x.thread_id
                AND m.end_sequence <= x.end_sequence"""


def dataset_best_cosine() -> str:
    """The best cosine between the query and any filtered summary or passage of the
    dataset, as the exact path's ``max(semantic)``: a read of every such vector (no index
    answers a maximum exactly; HNSW's nearest neighbours miss it on hard data)."""
    return f"""
        best_cosine AS (
            SELECT greatest(
                (SELECT max(1.0 - (x.embedding <=> (SELECT v FROM qv))) FROM ({CANDIDATES}) x),
                (SELECT max(1.0 - (m.embedding <=> (SELECT v FROM qv)))
                 FROM {_passages_of_candidates()}),
                0.0) AS cos
        ),"""


def only_query_lexemes(tsv: str) -> str:
    """The query's lexemes of ``tsv`` with their positions, without unnesting the rest:
    setweight marks them (weight B, unused elsewhere), ts_filter keeps only the marked."""
    return f"ts_filter(setweight({tsv}, 'B', (SELECT lexemes FROM qq)), '{{b}}')"


def bm25(
    terms: str,
    df: str,
    length: str,
    stats: str,
    weight: str | None = None,
    *,
    passage: bool = False,
) -> str:
    """Okapi BM25 summed over a document's (or passage's) matching terms, each term times
    its query-side ``weight`` expression when given; a ``passage``'s constants are
    :data:`PASSAGE_BM25` (when set), a document's BM25_K1 and BM25_B."""
    weighted = f"{weight} * " if weight else ""
    k1, b = PASSAGE_BM25 if passage and PASSAGE_BM25 else (BM25_K1, BM25_B)
    return (
        f"sum({weighted}ln(1.0 + ({stats}.n - {df}.df + 0.5) / ({df}.df + 0.5)) * {terms}.tf "
        f"* ({k1} + 1.0) / ({terms}.tf + {k1} * (1.0 - {b} "
        f"+ {b} * {length} / {stats}.avgdl)))"
    )
