"""The approximate path's lexical candidates, chosen from the kept postings by Recall itself.

A large dataset's kept statistics (:mod:`episodic.store.kept_statistics`) hold each word's
postings in impact order: its best holders with their BM25 weights. For a request without
filters the approximate statement scored the query words' holders from them in SQL —
``unnest`` of up to 5,000 holders a word, grouped by episode, documents and passages
joined, sorted for the best 400 — and at 100k episodes that was the statement's largest
part: 35–80 ms for ~24k (holder, weight) rows, ~2 µs a row in the executor
(docs/benchmarks-history.md "A big tenant's Recall: the lexical pool in the service").

So one small statement (:func:`postings_statement`) reads the pool's words' postings as
raw arrays (``array_send``: no per-element parsing), and :func:`choose_lexical_pool` does
the same arithmetic over them in numpy (~5 ms): it returns the episodes the statement's
``best lexical`` and ``densest`` parts would have taken, and the dataset's best document
and passage BM25 that normalise the lexical signal. The ranking statement then takes them
as parameters (:func:`~episodic.store.ranking_sql.recall_sql` with ``lexical_pool``) and
scores every candidate exactly, as before. Nothing kept: :func:`postings_statement`
returns no row, and the statement counts the statistics itself.

The postings statement also reads the kept counts and every query word's frequencies
(:class:`KeptCounts`), which the ranking statement scores with: the pool and the scores
come from one snapshot of what is kept, whatever a count replaces meanwhile.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from episodic.store.kept_statistics import COMPLETE_BEFORE_SQL
from episodic.store.lexical_statistics import query_lexemes_cte
from episodic.store.ranking_options import LEARNED_WEIGHTS, RankingOptions

__all__ = ["KeptCounts", "LexicalPool", "choose_lexical_pool", "postings_statement"]


def postings_statement(options: RankingOptions) -> str:
    """The dataset's kept statistics as the pool and the ranking statement need them: one
    row per query lexeme (``q`` of the ranking statement: its query weight and term) with
    the kept counts repeated (documents and passages, their average lengths, when they
    were counted) and the lexeme's document and passage frequencies; for the pool words —
    the rarest ``:approx_words`` the dataset holds, as the counted path chooses them
    (``pooled``) — also their first ``:approx_postings`` holders and weights, each list
    as ``array_send`` gives it (the binary array format: a 20-byte header, then each
    element as its 4-byte length and its bytes). No row when nothing is kept."""
    # q as the ranking statement has it; unweighted, each lexeme weighs 1 and is its own term
    weight, term = (
        ("q.weight", "q.term") if options.weighted_terms() else ("1.0::float8", "q.lexeme")
    )
    postings = "CAST(:approx_postings AS int)"
    return f"""
        WITH {query_lexemes_cte(options)},
        kept AS (
            SELECT k.documents::float8 AS dn, k.document_length AS davg,
                   k.passages::float8 AS pn, k.passage_length AS pavg,
                   {COMPLETE_BEFORE_SQL} AS complete_before
            FROM kept_statistics k WHERE k.dataset = :dataset
        ),
        words AS MATERIALIZED (
            SELECT q.lexeme, {weight} AS weight, {term} AS term,
                   coalesce(t.documents, 0)::float8 AS ddf,
                   coalesce(t.passages, 0)::float8 AS pdf
            FROM q LEFT JOIN kept_term_statistics t
              ON t.dataset = :dataset AND t.token = q.lexeme
        ),
        pool_words AS (
            SELECT w.lexeme FROM words w WHERE w.ddf + w.pdf > 0
            ORDER BY w.ddf + w.pdf, w.lexeme LIMIT :approx_words
        )
        SELECT kept.dn, kept.davg, kept.pn, kept.pavg, kept.complete_before,
               (SELECT count(*) FROM q) AS query_words,
               w.lexeme, w.weight, w.term, w.ddf, w.pdf, p.lexeme IS NOT NULL AS pooled,
               array_send({_first("t.best_documents", postings)}) AS documents,
               array_send({_first("t.document_weights", postings)}) AS document_weights,
               array_send({_first("t.best_passages", postings)}) AS passages,
               array_send({_first("t.passage_weights", postings)}) AS passage_weights
        FROM kept
        LEFT JOIN words w ON true
        LEFT JOIN pool_words p ON p.lexeme = w.lexeme
        LEFT JOIN kept_term_statistics t
          ON p.lexeme IS NOT NULL AND t.dataset = :dataset AND t.token = p.lexeme
        ORDER BY w.ddf + w.pdf, w.lexeme
    """


def _first(array: str, n: str) -> str:
    """The first ``n`` elements of ``array``: the array itself when it has no more (a slice
    copies it: ~1-2 ms for three words' lists)."""
    return f"CASE WHEN cardinality({array}) <= {n} THEN {array} ELSE {array}[1:{n}] END"


# array_send's layout for a one-dimensional array: ndim, flags, element type, length and
# lower bound (4 bytes each), then each element as its length and its bytes.
_HEADER = 20
_IDS = np.dtype([("length", ">i4"), ("value", "V16")])
_WEIGHTS = np.dtype([("length", ">i4"), ("value", ">f8")])


class _Unreadable(ValueError):
    """A list not in the layout :func:`_elements` reads (a NULL element, another width)."""


def _elements(raw: bytes | None, layout: np.dtype) -> np.ndarray:
    """The values of one ``array_send`` output: an empty array has no dimension (12
    bytes); a one-dimensional one has its 20-byte header, then each element's length and
    bytes. A NULL element (no weight is ever NULL: every document has its length) or
    another width is :class:`_Unreadable`."""
    if raw is None or len(raw) <= _HEADER:
        return np.empty(0, dtype=layout["value"])
    width = layout["value"].itemsize
    has_nulls = int.from_bytes(raw[4:8], "big")
    if has_nulls or (len(raw) - _HEADER) % layout.itemsize:
        raise _Unreadable("a kept list with NULL elements or of another width")
    elements = np.frombuffer(raw, dtype=layout, offset=_HEADER)
    if (elements["length"] != width).any():
        raise _Unreadable("a kept list with elements of another width")
    return elements["value"]


def _idf(n: float, df: float) -> float:
    """BM25's idf, as the statement's ``lexical_statistics._idf``."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True)
class KeptCounts:
    """The dataset's kept statistics as :func:`postings_statement` read them: the ranking
    statement scores with these (one snapshot with the pool's), not with a second read."""

    documents: float
    document_length: float
    passages: float
    passage_length: float
    #: every episode completed before this is in the counts (the ranking statement reads
    #: those completed since apart)
    complete_before: datetime
    #: every query lexeme, with its document and passage frequency (0: none holds it)
    lexemes: list[str]
    document_frequencies: list[float]
    passage_frequencies: list[float]

    def params(self) -> dict[str, object]:
        return {
            "kept_documents": self.documents,
            "kept_document_length": self.document_length,
            "kept_passages": self.passages,
            "kept_passage_length": self.passage_length,
            "kept_complete_before": self.complete_before,
            "kept_lexemes": self.lexemes,
            "kept_ddf": self.document_frequencies,
            "kept_pdf": self.passage_frequencies,
        }


@dataclass(frozen=True)
class LexicalPool:
    """What :func:`choose_lexical_pool` found: the episodes the pool takes for the query's
    words (the best by the lexical fit, then each pool word's densest holders: their ids'
    16 bytes each, one after the other — a parameter ~3 ms cheaper than as many UUIDs),
    the normalising maxima (None: no holder) and the kept statistics they were scored
    with."""

    episode_ids: bytes
    best_document: float | None
    best_document_idf: float | None
    best_passage: float | None
    best_passage_idf: float | None
    kept: KeptCounts

    def params(self) -> dict[str, object]:
        """The ranking statement's parameters for it."""
        return {
            "lexical_pool": self.episode_ids,
            "best_document": self.best_document,
            "best_document_idf": self.best_document_idf,
            "best_passage": self.best_passage,
            "best_passage_idf": self.best_passage_idf,
            **self.kept.params(),
        }


@dataclass
class _Scores:
    """One kind's (documents' or passages') aggregate per holder."""

    score: np.ndarray
    matched: np.ndarray
    matched_idf: np.ndarray
    floor: np.ndarray  # the best single word's score (a passage some holder reaches)
    floor_idf: np.ndarray


def choose_lexical_pool(
    rows: Sequence[Mapping[str, Any]], *, candidates: int, per_lexeme: int
) -> LexicalPool | None:
    """The lexical pool from :func:`postings_statement`'s ``rows`` (None: nothing kept, or
    a list it cannot read — the ranking statement then reads the kept lists itself),
    as the counted statement's kept parts chose it: every holder the postings list scored
    over the words whose lists hold it (idf × weight × its kept BM25 weight; a document's
    sum is its BM25 for those words, a passage's sums each word's best passage of the
    episode), the best ``candidates`` by the lexical fit of ``ranking_sql`` (the lexical
    and coverage parts of the learned fusion; ties: the earlier in the lists, which keep
    the latest first among equals), then each word's first ``per_lexeme`` documents and
    passages (its densest holders)."""
    if not rows:
        return None
    first = rows[0]
    dn, pn = float(first["dn"]), float(first["pn"])
    asked = [r for r in rows if r["lexeme"] is not None]  # every query lexeme
    kept = KeptCounts(
        documents=dn,
        document_length=float(first["davg"]),
        passages=pn,
        passage_length=float(first["pavg"]),
        complete_before=first["complete_before"],
        lexemes=[str(r["lexeme"]) for r in asked],
        document_frequencies=[float(r["ddf"]) for r in asked],
        passage_frequencies=[float(r["pdf"]) for r in asked],
    )
    words = [r for r in asked if r["pooled"]]
    # each kind's lists, word by word, in the order the holders are concatenated below
    try:
        lists = {
            kind: [
                (r, _elements(r[kind], _IDS), _elements(r[f"{kind[:-1]}_weights"], _WEIGHTS))
                for r in words
            ]
            for kind in ("documents", "passages")
        }
    except _Unreadable:  # never written so: the statement reads the lists itself, in SQL
        return None
    ids = [held for kind in lists.values() for _, held, _ in kind]
    if not sum(len(a) for a in ids):
        return LexicalPool(b"", None, None, None, None, kept)
    every = np.concatenate(ids)
    # Grouped as bytes (a void array sorts slower); the first occurrence of each keeps its
    # raw 16 bytes (the grouped values lose trailing NULs).
    _, first_at, holder = np.unique(every.view("S16"), return_index=True, return_inverse=True)
    holder = holder.reshape(-1)
    holders = len(first_at)
    # the distinct terms (a word's irregular forms count as the word), for "matched"
    terms = sorted({str(r["term"]) for r in words if r["term"] is not None})
    kinds: list[_Scores] = []
    segments: dict[str, list[np.ndarray]] = {}
    offset = 0
    for kind, n, df_column in (("documents", dn, "ddf"), ("passages", pn, "pdf")):
        scored = _Scores(
            score=np.zeros(holders),
            matched=np.zeros(holders),
            matched_idf=np.zeros(holders),
            floor=np.full(holders, -np.inf),
            floor_idf=np.full(holders, -np.inf),
        )
        held_terms = np.zeros((max(len(terms), 1), holders), dtype=bool)
        held = np.zeros(holders, dtype=bool)
        segments[kind] = []
        for r, listed, weights in lists[kind]:
            at = holder[offset : offset + len(listed)]
            offset += len(listed)
            segments[kind].append(at)
            if not len(at):
                continue
            idf = float(r["weight"]) * _idf(n, float(r[df_column]))
            contribution = idf * weights[: len(at)]
            # a list holds an episode once: fancy-indexed updates are exact
            scored.score[at] += contribution
            scored.matched_idf[at] += idf
            scored.floor[at] = np.maximum(scored.floor[at], contribution)
            scored.floor_idf[at] = np.maximum(scored.floor_idf[at], idf)
            held[at] = True
            if r["term"] is not None:
                held_terms[terms.index(str(r["term"])), at] = True
        scored.matched = held_terms.sum(axis=0).astype(float)
        for column in (scored.score, scored.floor, scored.floor_idf):
            column[~held] = np.nan
        kinds.append(scored)
    documents, passages = kinds
    best_document = _best(documents.score)
    best_passage_sum = _best(passages.score)
    query_words = max(int(first["query_words"]), 1)
    fit = (
        LEARNED_WEIGHTS["lexical"]
        / 2
        * (_relative(documents.score, best_document) + _relative(passages.score, best_passage_sum))
        + (
            LEARNED_WEIGHTS["coverage"] * documents.matched
            + LEARNED_WEIGHTS["passage_coverage"] * passages.matched
        )
        / query_words
    )
    # the best by the fit, ties by their place in the lists (only those at or above the
    # candidates-th fit sorted: the rest are out either way)
    if candidates <= 0:
        best = np.empty(0, dtype=np.int64)
    elif candidates < holders:
        bar = -np.partition(-fit, candidates - 1)[candidates - 1]
        best = np.flatnonzero(fit >= bar)
    else:
        best = np.arange(holders)
    best = best[np.lexsort((first_at[best], -fit[best]))][:candidates]
    chosen = best.tolist()
    seen = set(chosen)
    for kind in ("documents", "passages"):  # each word's densest holders
        for at in segments[kind]:
            for h in at[:per_lexeme].tolist():
                if h not in seen:
                    seen.add(h)
                    chosen.append(h)
    return LexicalPool(
        episode_ids=every[first_at[np.asarray(chosen, dtype=np.int64)]].tobytes(),
        best_document=best_document,
        best_document_idf=_best(documents.matched_idf, documents.score),
        best_passage=_best(passages.floor),
        best_passage_idf=_best(passages.floor_idf),
        kept=kept,
    )


def _best(values: np.ndarray, present: np.ndarray | None = None) -> float | None:
    """The greatest of ``values`` where a holder has one (``present``'s non-NaN, or the
    values' own); None when none has."""
    mask = ~np.isnan(values if present is None else present)
    return float(values[mask].max()) if mask.any() else None


def _relative(scores: np.ndarray, best: float | None) -> np.ndarray:
    """``coalesce(score / nullif(best, 0), 0)``."""
    if not best:
        return np.zeros(len(scores))
    return np.nan_to_num(scores / best, nan=0.0)
