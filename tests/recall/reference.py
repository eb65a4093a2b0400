"""An independent, brute-force implementation of the documented ranking, in Python.

It reads the stored data (lexemes and lengths of the lexical documents, summary and chunk
vectors) and applies the formula of ``episodic.store.recall_queries`` to *every* episode
of the dataset. Tests compare the service's SQL against it: if candidate generation ever
dropped an episode the formula ranks in the top N, the two would disagree.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from sqlalchemy import Connection, text

from episodic.store.recall_queries import (
    BAND_EXPONENT,
    BM25_B,
    BM25_K1,
    DEFAULT_RANKING,
    LEARNED_WEIGHTS,
    LEXICAL_SHARE,
    RankingOptions,
)
from episodic.store.relevance import on_reference_scale
from episodic.testing.keys import test_vault


@dataclass(frozen=True)
class Ranked:
    episode_id: str
    relevance: float
    similarity: float
    recency: float


def _vec(literal: str | None) -> np.ndarray | None:
    return None if literal is None else np.array(json.loads(literal), dtype=np.float64)


def _bm25(docs: list[dict[str, int]], lengths: list[float], query: set[str]) -> list[float]:
    n = len(docs)
    if not n:
        return []
    avgdl = max(sum(lengths) / n, 1.0)
    scores = [0.0] * n
    for lex in query:
        df = sum(1 for d in docs if lex in d)
        if not df:
            continue
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        for i, d in enumerate(docs):
            f = float(d.get(lex, 0))
            if f:
                scores[i] += (
                    idf
                    * f
                    * (BM25_K1 + 1)
                    / (f + BM25_K1 * (1 - BM25_B + BM25_B * lengths[i] / avgdl))
                )
    return scores


def _best_share(docs: list[dict[str, int]], query: set[str]) -> float:
    """The largest share of the query's weight any of ``docs`` holds: the idf of the query
    words it contains over the idf of every query word (a word no document holds, df 0,
    included)."""
    n = len(docs)
    idf = {
        lex: math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        for lex, df in ((lex, sum(1 for d in docs if lex in d)) for lex in query)
    }
    whole = sum(idf.values())
    if not whole:
        return 1.0
    return min(
        1.0, max((sum(idf[lex] for lex in query if lex in d) for d in docs), default=0.0) / whole
    )


def reference_rank(
    conn: Connection,
    dataset: str,
    query: str | None,
    query_vector: np.ndarray | None,
    *,
    as_of: datetime,
    similarity_weight: float = 0.7,
    recency_weight: float = 0.3,
    options: RankingOptions = DEFAULT_RANKING,
) -> list[Ranked]:
    """Every completed episode of ``dataset`` that ended by ``as_of``, best first, ranked
    with ``options``' fusion and recency scale."""
    rows = (
        conn.execute(
            text(
                "SELECT episode_id, thread_id, end_sequence, ended_at, embedding::text AS emb, "
                "search_length FROM episodes WHERE dataset = :ds AND status = 'completed' "
                "AND ended_at <= :as_of"
            ),
            {"ds": dataset, "as_of": as_of},
        )
        .mappings()
        .all()
    )
    n = len(rows)
    if not n:
        return []
    days = [max((as_of - r["ended_at"]).total_seconds(), 0.0) / 86400.0 for r in rows]
    unit = 1.0  # the seed's: days
    if options.recency_span:  # the dataset's span: since its oldest candidate, ≥ 1 day
        oldest = min(r["ended_at"] for r in rows)
        unit = options.recency_span * max((as_of - oldest).total_seconds() / 86400.0, 1.0)
    recency = [1.0 / (1.0 + d / unit) for d in days]
    similarity = [0.0] * n
    if query and query.strip() and similarity_weight > 0:
        key = test_vault().for_read(conn, dataset)  # the index holds the key's tokens
        q_lexemes = {
            key.token(r[0])
            for r in conn.execute(
                text("SELECT lexeme FROM unnest(to_tsvector('english', CAST(:q AS text)))"),
                {"q": query},
            )
        }

        def lexemes(sql: str, params: dict) -> dict[str, int]:  # type: ignore[type-arg]
            return {lex: (cnt or 1) for lex, cnt in conn.execute(text(sql), params)}

        docs = [
            lexemes(
                "SELECT lexeme, array_length(positions, 1) FROM "
                "unnest((SELECT search_vector FROM episodes WHERE episode_id = :id))",
                {"id": r["episode_id"]},
            )
            for r in rows
        ]
        doc_lengths = [float(r["search_length"]) for r in rows]
        chunks = [
            conn.execute(
                text(
                    "SELECT search_vector::text AS tsv, search_length, embedding::text AS emb "
                    "FROM message_chunks WHERE thread_id = :t AND end_sequence <= :end"
                ),
                {"t": r["thread_id"], "end": r["end_sequence"]},
            )
            .mappings()
            .all()
            for r in rows
        ]
        passages = [
            (
                i,
                lexemes(
                    "SELECT lexeme, array_length(positions, 1) FROM unnest(CAST(:v AS tsvector))",
                    {"v": ch["tsv"]},
                ),
                float(max(ch["search_length"], 1)),
            )
            for i, episode_chunks in enumerate(chunks)
            for ch in episode_chunks
        ]
        document = _bm25(docs, doc_lengths, q_lexemes)
        per_passage = _bm25([p[1] for p in passages], [p[2] for p in passages], q_lexemes)
        passage = [0.0] * n
        passage_matched = [0] * n
        for (i, words, _), score in zip(passages, per_passage, strict=True):
            passage[i] = max(passage[i], score)
            passage_matched[i] = max(passage_matched[i], len(q_lexemes & words.keys()))
        nq = max(len(q_lexemes), 1)
        coverage = [len(q_lexemes & d.keys()) / nq for d in docs]
        passage_coverage = [m / nq for m in passage_matched]
        semantic = [0.0] * n
        if query_vector is not None:
            qv = np.asarray(query_vector, dtype=np.float64)
            for i, r in enumerate(rows):
                vectors = [_vec(r["emb"])] + [_vec(ch["emb"]) for ch in chunks[i]]
                cosines = [
                    float(v @ qv / (np.linalg.norm(v) * np.linalg.norm(qv)))
                    for v in vectors
                    if v is not None
                ]
                # fused on MiniLM's scale (RankingOptions.cosine_scale)
                semantic[i] = on_reference_scale(max([0.0, *cosines]), options.cosine_scale)
        top_doc, top_passage, top_sem = max(document), max(passage), max(semantic)
        doc_share = passage_share = 1.0
        if options.lexical_coverage:  # the largest share of the query's idf a candidate holds
            passage_words = [p[1] for p in passages]
            doc_share = _best_share(docs, q_lexemes)
            passage_share = _best_share(passage_words, q_lexemes)
        w = LEARNED_WEIGHTS
        # the ideal candidate: 1 on every signal but the cosine, the candidates' best
        ideal = sum(w.values()) - w["cosine"] + w["cosine"] * top_sem
        for i in range(n):
            lexical = (
                (document[i] / top_doc * doc_share if top_doc else 0.0)
                + (passage[i] / top_passage * passage_share if top_passage else 0.0)
            ) / 2
            sem_rel = semantic[i] / top_sem if top_sem else 0.0
            if options.fusion == "learned":
                fit = (
                    w["lexical"] * lexical
                    + w["semantic"] * sem_rel
                    + w["cosine"] * semantic[i]
                    + w["coverage"] * coverage[i]
                    + w["passage_coverage"] * passage_coverage[i]
                )
                matched = lexical > 0 or sem_rel > 0
                similarity[i] = math.exp(fit - ideal) if matched else 0.0
            else:
                rel = lexical * LEXICAL_SHARE + sem_rel * (1 - LEXICAL_SHARE)
                similarity[i] = min(1.0, rel) ** BAND_EXPONENT
    # Recency breaks ties inside the similarity band (RankingOptions.recency_band): its term
    # fades from whole at the best similarity to nothing `band` (a share of it) below.
    best, band = max(similarity), options.recency_band
    gate = [
        1.0 if not band or best <= 0 else min(1.0, max(0.0, 1 - (best - s) / (band * best)))
        for s in similarity
    ]
    ranked = [
        (
            similarity_weight * similarity[i] + recency_weight * recency[i] * gate[i],
            rows[i]["ended_at"],
            str(rows[i]["episode_id"]),
            i,
        )
        for i in range(n)
    ]
    # Same order as the SQL: relevance, then newer, then the larger id.
    ranked.sort(key=lambda x: x[2], reverse=True)
    ranked.sort(key=lambda x: (-x[0], -x[1].timestamp()))
    return [Ranked(eid, rel, similarity[i], recency[i]) for rel, _, eid, i in ranked]
