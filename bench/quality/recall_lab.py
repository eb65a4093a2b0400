"""A fast harness for Recall's ranking and relevance: LoCoMo summarised once, kept, and
every question scored in-process against the same database.

    .venv/bin/python -m bench.quality.recall_lab [--data-dir /tmp/episodic-recall-lab] [--fit]

1. The first run starts an embedded PostgreSQL in ``--data-dir`` (kept between runs), and
   — once — the four services with the offline defaults, which ingest and summarise LoCoMo
   exactly as ``bench.quality.recall_quality`` does (one ended thread per session).
2. Every run asks each question (categories 1–4) of its own conversation's dataset, and of a
   *foreign* dataset (conversation i's questions of conversation i+1's, in file order),
   plus the adversarial category of its own dataset, through the read path's own code
   (``episodic.services.recall.domain.recall``, the SQL the service runs) with every
   candidate returned, and caches the per-candidate signals in ``features.json``.
3. From the cache it scores ranking variants and the calibrated relevance, on the two
   fixed halves of the conversations: **development** = positions 0, 2, 4, 6, 8 of
   locomo10.jsonl (conv-26, conv-41, conv-43, conv-47, conv-49), **held out** = the other
   five. ``--fit`` fits the relevance curve on the development half only and prints the
   constants to write into ``episodic/store/relevance.py``; every run also fits the match
   curve (``fit_match``, the gate ``min_match`` applies) and prints the abstention of
   pairs of thresholds, with the service's named-time exception applied (so they equal
   the service's). ``--confirm`` measures through a running Recall (``--confirm-at T``:
   that ``min_relevance``; ``--confirm-abstain``: ``abstain``, the service's own pair).
4. ``--fit-ranker`` fits the learned fusion (``recall_queries.LEARNED_WEIGHTS``) and
   chooses its temperature and ``recency_span`` on the development half, from the
   features of the first version's ranking (``--options off``: the seed's recency, from
   which each candidate's age is recovered), and prints every ranking variant on both
   halves.

The figures of the running suite come from ``bench.quality.recall_quality``; this harness is for
comparing variants quickly (and honestly: everything is reported on both halves).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import locomo
from bench.harness.lab_store import _database, _keep_keyring, confirm
from bench.harness.report import log
from bench.harness.suite import ingest_and_summarise, rrf
from episodic.store.ranking_options import EXTRA_SIGNALS


def _build(url: str, conversations: list[locomo.Conversation], *, ingest: bool = True) -> None:
    from episodic.sdk.client import EpisodicClient
    from episodic.store.db import make_engine
    from episodic.testing.processes import start_service

    engine = make_engine(url, pool_size=2)
    with ExitStack() as stack:
        stack.callback(engine.dispose)
        procs: dict[str, Any] = {}
        for svc in ("scheduler", "summariser", "recall", "ingest"):
            extra = {
                "EPISODIC_LOG_LEVEL": "WARNING",
                "EPISODIC_EMBEDDING_PROVIDER": "minilm",
                # a resumed build reclaims what an interrupted one had claimed
                "EPISODIC_ORPHAN_RECLAIM_AFTER": "5",
            }
            if svc == "ingest":
                extra["EPISODIC_SCHEDULER_ADDRESS"] = procs["scheduler"].address
            procs[svc] = start_service(svc, url, extra, timeout=180)
            stack.callback(procs[svc].terminate)
        client = EpisodicClient(
            ingest=procs["ingest"].address,
            recall=procs["recall"].address,
            scheduler=procs["scheduler"].address,
            summariser=procs["summariser"].address,
            timeout=120,
        )
        stack.callback(client.close)
        if not ingest:
            client.run_sweep()
        ingest_and_summarise(client, engine, conversations, ingest=ingest)


def _reindex(
    url: str,
    chunk_messages: int | None,
    head_entities: bool,
    embed_entities: bool,
    *,
    chunk_overlap: bool = True,
    reembed: bool = False,
    pooled_summary_vector: bool = False,
    resummarise: str = "",
    late_chunks: str = "",
    late_summary_vector: bool = False,
) -> int:
    """Rebuilds every completed episode's recall index (document and chunks) with the
    index switches of recall_index (passage granularity, overlap, entities in the head), so
    a variant of the index can be scored. ``reembed``: every chunk and episode vector again
    with the embedder of this environment (``EPISODIC_EMBEDDING_COMPUTE``). Run it on a
    copy of the kept database (``cp -a``): the variant replaces what was indexed.
    ``pooled_summary_vector``: each episode's vector becomes the mean of the vectors of the
    sentences its extractive summary quotes (the episode re-summarised from its thread:
    the summaries that no longer match the stored one are counted). ``late_chunks``
    ("WINDOW[/OVERLAP]" word pieces): every chunk's vector again by late chunking
    (``EPISODIC_CHUNK_VECTORS=late``) with model windows of that size.
    ``late_summary_vector``: each episode's vector pooled from the same late read of its
    window: the mean of the vectors of the sentences its summary and key learnings quote
    (:func:`_late_summary_vectors`)."""
    from sqlalchemy import text as sql

    from episodic.config import EmbeddingSettings
    from episodic.providers import make_embedder
    from episodic.store import lexical_document, message_chunks, recall_index
    from episodic.store.db import make_engine
    from episodic.testing.keys import test_vault

    # Set on the modules that read them (recall_index only re-exports them).
    if chunk_messages:
        message_chunks.CHUNK_MESSAGES = chunk_messages
    lexical_document.HEAD_ENTITIES = head_entities
    message_chunks.CHUNK_OVERLAP = chunk_overlap
    engine = make_engine(url, pool_size=2)
    embedder = make_embedder(EmbeddingSettings(embedding_threads=2), 384)
    vault = test_vault()
    if late_chunks:
        window, _, overlap = late_chunks.partition("/")
        embedder.window_tokens = int(window)  # type: ignore[attr-defined]
        if overlap:
            embedder.window_overlap = int(overlap)  # type: ignore[attr-defined]
    if resummarise:
        _resummarise(engine, embedder, vault, resummarise)
    with engine.begin() as conn:
        if chunk_messages or not chunk_overlap or reembed or late_chunks:
            conn.execute(sql("DELETE FROM message_chunks"))
        conn.execute(sql("UPDATE episodes SET search_vector = NULL WHERE status = 'completed'"))
    done = recall_index.index_missing(engine, embedder, vault, late=bool(late_chunks))
    if embed_entities or reembed:  # the episode's own vector, as the Summariser embeds it
        from episodic.services.summariser import episode_vector, pipeline

        episode_vector.EMBED_ENTITIES = embed_entities  # read there (pipeline re-exports it)
        with engine.begin() as conn:
            rows = conn.execute(
                sql(
                    "SELECT episode_id, dataset, summary, key_learnings, entities FROM episodes "
                    "WHERE status = 'completed'"
                )
            ).mappings()
            opened = [vault.open_one(conn, r, "episodes") for r in rows]
            texts = [
                pipeline.embedding_text(
                    e["summary"], list(e["key_learnings"] or []), list(e["entities"] or [])
                )
                for e in opened
            ]
            for e, vector in zip(opened, embedder.embed(texts), strict=True):
                conn.execute(
                    sql(
                        "UPDATE episodes SET embedding = CAST(:v AS vector) "
                        "WHERE dataset = :d AND episode_id = :id"
                    ),
                    {
                        "v": str([float(x) for x in vector]),
                        "d": e["dataset"],
                        "id": e["episode_id"],
                    },
                )
    if pooled_summary_vector:
        _pool_summary_vectors(engine, embedder, vault)
    if late_summary_vector:
        _late_summary_vectors(engine, embedder, vault)
    engine.dispose()
    return done


def _late_summary_vectors(engine: Any, embedder: Any, vault: Any) -> None:
    """Every completed episode's vector pooled from a late read of its window (the
    document late chunking reads: the window's messages as indexed, one per line): the
    normalised mean of the span vectors of the sentences the extractive summary (lexical
    sentences, the default) and its key learnings quote, each counted once per use. A
    quoted sentence not found verbatim in its message (clipped) pools its whole message."""
    from sqlalchemy import text as sql

    from episodic.config import LLMSettings
    from episodic.providers import extractive, make_summariser
    from episodic.providers.types import SpanDocument
    from episodic.services.summariser.pipeline import indexed_messages, load_summary_request

    summariser = make_summariser(LLMSettings(), embedder)
    found = whole = 0
    with engine.begin() as conn:
        rows = (
            conn.execute(
                sql(
                    "SELECT episode_id, dataset, thread_id, start_sequence, end_sequence "
                    "FROM episodes WHERE status = 'completed'"
                )
            )
            .mappings()
            .all()
        )
        for row in rows:
            request = load_summary_request(conn, vault, row)
            candidates = summariser._candidates(request)  # as summarise() chooses them
            if not candidates:
                continue
            vectors = extractive.lexical_vectors([c.text for c in candidates])
            _, quoted = summariser._summary(candidates, vectors, request.window_start_sequence)
            _, sources = summariser._key_learnings(candidates, vectors)
            lines = [m for m in indexed_messages(request) if m[0] >= row["start_sequence"]]
            starts, offset = {}, 0
            for sequence, line in lines:
                starts[sequence] = (offset, line)
                offset += len(line) + 1
            spans = []
            for i in quoted + sources:
                c = candidates[i]
                if c.message.sequence not in starts:
                    continue
                begin, line = starts[c.message.sequence]
                at = line.find(c.text)
                if at >= 0:
                    found += 1
                    spans.append((begin + at, begin + at + len(c.text)))
                else:
                    whole += 1
                    spans.append((begin, begin + len(line)))
            if not spans:
                continue
            document = SpanDocument("\n".join(line for _, line in lines), tuple(spans))
            (pooled,) = embedder.embed_spans([document])
            vector = pooled.sum(axis=0)
            vector /= max(float(np.linalg.norm(vector)), 1e-9)
            conn.execute(
                sql(
                    "UPDATE episodes SET embedding = CAST(:v AS vector) "
                    "WHERE dataset = :d AND episode_id = :id"
                ),
                {
                    "v": str([float(x) for x in vector]),
                    "d": row["dataset"],
                    "id": row["episode_id"],
                },
            )
    log(f"late summary vectors: {found} quoted sentences found in their message, {whole} whole")


def _each_resummarised(conn: Any, vault: Any, summariser: Any) -> Iterator[tuple[Any, Any, bool]]:
    """Every completed episode summarised again by ``summariser`` from its thread, as
    ``(row, result, whether the summary came out as stored)``."""
    from sqlalchemy import text as sql

    from episodic.services.summariser.pipeline import load_summary_request

    rows = (
        conn.execute(
            sql(
                "SELECT episode_id, dataset, thread_id, start_sequence, end_sequence, "
                "summary FROM episodes WHERE status = 'completed'"
            )
        )
        .mappings()
        .all()
    )
    for row in rows:
        stored = vault.open_one(conn, row, "episodes")["summary"]
        result = summariser.summarise(load_summary_request(conn, vault, row))
        yield row, result, result.summary == stored


def _resummarise(engine: Any, embedder: Any, vault: Any, sentence_vectors: str) -> None:
    """Every completed episode summarised again by the extractive summariser with
    ``sentence_vectors`` ("model", or "lexical": sentences compared by TF-IDF instead of
    the model; ``EPISODIC_SUMMARY_SENTENCE_VECTORS``) and this environment's embedder; its
    summary, key learnings, entities and vector replaced as the Summariser would have
    written them. The lexical documents are rebuilt by the re-index that follows."""
    from sqlalchemy import text as sql

    from episodic.config import LLMSettings
    from episodic.crypto import seal_json
    from episodic.providers import CachedEmbedder, extractive, make_summariser
    from episodic.services.summariser import pipeline

    summariser = make_summariser(
        LLMSettings(summary_sentence_vectors=sentence_vectors), CachedEmbedder(embedder)
    )
    same = differ = 0
    with engine.begin() as conn:
        for row, result, as_stored in _each_resummarised(conn, vault, summariser):
            same, differ = (same + 1, differ) if as_stored else (same, differ + 1)
            key = vault.for_read(conn, row["dataset"])
            entities = extractive.normalise_entities(result.entities)
            vector = embedder.embed(
                [pipeline.embedding_text(result.summary, result.key_learnings, result.entities)]
            )[0]
            conn.execute(
                sql(
                    "UPDATE episodes SET summary = :summary, key_learnings = :learnings, "
                    "entities = :entities, entity_tokens = CAST(:tokens AS text[]), "
                    "embedding = CAST(:v AS vector) WHERE dataset = :d AND episode_id = :id"
                ),
                {
                    "summary": key.seal(result.summary, "episodes.summary"),
                    "learnings": seal_json(key, result.key_learnings, "episodes.key_learnings"),
                    "entities": seal_json(key, entities, "episodes.entities"),
                    "tokens": sorted({key.token(e) for e in entities}),
                    "v": str([float(x) for x in vector]),
                    "d": row["dataset"],
                    "id": row["episode_id"],
                },
            )
    log(
        f"re-summarised ({sentence_vectors} sentences): {same} summaries as before, {differ} changed"
    )


def _pool_summary_vectors(engine: Any, embedder: Any, vault: Any) -> None:
    """Every completed episode re-summarised (extractive, this environment's embedder) with
    ``extractive.POOL_SUMMARY_VECTOR`` on; its vector replaced by the pooled one."""
    from sqlalchemy import text as sql

    from episodic.config import LLMSettings
    from episodic.providers import CachedEmbedder, extractive, make_summariser

    extractive.POOL_SUMMARY_VECTOR = True
    summariser = make_summariser(
        LLMSettings(summary_sentence_vectors="model"), CachedEmbedder(embedder)
    )
    same = differ = unpooled = 0
    with engine.begin() as conn:
        for row, result, as_stored in _each_resummarised(conn, vault, summariser):
            same, differ = (same + 1, differ) if as_stored else (same, differ + 1)
            if result.vector is None:
                unpooled += 1
                continue
            conn.execute(
                sql(
                    "UPDATE episodes SET embedding = CAST(:v AS vector) "
                    "WHERE dataset = :d AND episode_id = :id"
                ),
                {
                    "v": str([float(x) for x in result.vector]),
                    "d": row["dataset"],
                    "id": row["episode_id"],
                },
            )
    log(f"pooled summary vectors: {same} summaries as stored, {differ} differ, {unpooled} kept")


def lab_request(dataset: str, q: locomo.Question, *, limit: int = 10, ranking: Any = None) -> Any:
    """The RecallQuery the lab asks for ``q`` of ``dataset``: the service's default weights,
    the time the question was asked as ``as_of`` and for reading its time words, no events
    (LoCoMo has none, and a lab database kept from before the events migration has no
    events table); ``ranking`` None is the default ranking."""
    from episodic.config import RecallSettings
    from episodic.services.recall import domain
    from episodic.store.recall_queries import DEFAULT_RANKING, RecallFilters

    settings = RecallSettings()
    return domain.RecallQuery(
        dataset=dataset,
        query=q.question,
        include_episodes=True,
        limit=limit,
        similarity_weight=settings.similarity_weight,
        recency_weight=settings.recency_weight,
        filters=RecallFilters(as_of=q.asked_at),
        understanding=domain.read_time(q.question, q.asked_at, False),
        ranking=ranking if ranking is not None else DEFAULT_RANKING,
        events=None,
    )


def _features(
    url: str,
    conversations: list[locomo.Conversation],
    adversarial: dict,
    options: Any = None,
) -> list:
    """Every candidate's signals for every (question, dataset) pair asked, ranked with
    ``options`` (recall_queries.RankingOptions; None: Recall's default)."""
    from episodic.config import EmbeddingSettings
    from episodic.providers import make_embedder
    from episodic.services.recall import domain
    from episodic.store.db import make_engine
    from episodic.testing.keys import test_vault

    engine = make_engine(url, pool_size=2)
    vault = test_vault()
    embedder = make_embedder(EmbeddingSettings(embedding_threads=2), 384)
    from episodic.store.recall_queries import DEFAULT_RANKING

    options = options or DEFAULT_RANKING
    out: list[dict[str, Any]] = []
    n = len(conversations)
    with engine.connect() as conn:
        labels = {
            r["thread_id"]: r
            for r in (
                vault.open_one(conn, row, "threads")
                for row in conn.exec_driver_sql("SELECT * FROM threads").mappings().all()
            )
        }
        for i, conv in enumerate(conversations):
            foreign = conversations[(i + 1) % n]
            asks = [(q, conv, "own") for q in conv.questions]
            asks += [(q, foreign, "foreign") for q in conv.questions]
            asks += [(q, conv, "adversarial") for q in adversarial.get(conv.conversation_id, [])]
            requests = [
                lab_request(target.dataset, q, limit=domain.MAX_CONTEXT_EPISODES, ranking=options)
                for q, target, _ in asks
            ]
            # what the servicer embeds: the ranked query (time words and framing removed)
            vectors = embedder.embed([r.ranked_query or r.query or "" for r in requests])
            for (q, target, kind), vector, request in zip(asks, vectors, requests, strict=True):
                started = time.perf_counter()
                answer = domain.recall(conn, vault, request, vector)
                ms = (time.perf_counter() - started) * 1000
                out.append(
                    {
                        "conversation": conv.conversation_id,
                        "dataset": target.dataset,
                        "kind": kind,
                        "category": q.category,
                        "question": q.question,
                        "gold": list(q.evidence_threads) if kind == "own" else [],
                        "ms": ms,
                        "candidates": [
                            {
                                "label": labels[r["thread_id"]]["label"],
                                **{
                                    k: float(r[k])
                                    for k in (
                                        "relevance",
                                        "similarity",
                                        "recency",
                                        "lexical",
                                        "semantic",
                                        "cosine",
                                        "coverage",
                                        "passage_coverage",
                                        "absolute_relevance",
                                    )
                                },
                                # the optional signals, when their switch is on
                                **{k: float(r[k]) for k in EXTRA_SIGNALS if k in r},
                            }
                            for r in answer.rows
                        ],
                    }
                )
            log(f"  {conv.conversation_id}: {len(asks)} recalls")
    engine.dispose()
    return out


# -- variants -------------------------------------------------------------------------


def rank_default(c: list[dict]) -> list[str]:
    """Recall's own order: the candidates as it answered them (by relevance, unless a
    second look, ``RankingOptions.rerank_top``, reordered its first few)."""
    return [x["label"] for x in c]


def rank_rrf(c: list[dict]) -> list[str]:
    lex = [x["label"] for x in sorted(c, key=lambda x: -x["lexical"])]
    sem = [x["label"] for x in sorted(c, key=lambda x: -x["semantic"])]
    return rrf(lex, sem)


def rank_similarity_only(c: list[dict]) -> list[str]:
    return [x["label"] for x in sorted(c, key=lambda x: -x["similarity"])]


def rank_absolute(c: list[dict]) -> list[str]:
    return [x["label"] for x in sorted(c, key=lambda x: -x["absolute_relevance"])]


def fused(
    share: float = 0.5,
    ws: float = 0.7,
    wr: float = 0.3,
    wa: float = 0.0,
    recency_span: float = 0.0,
) -> Any:
    """Score fusion with another lexical share / weights, plus ``wa`` × calibrated
    relevance, recomputed from the cached relative signals; ``recency_span`` as
    RankingOptions' (the features must come from a run with the seed's recency)."""

    def rank(c: list[dict]) -> list[str]:
        span = max([1.0, *(1.0 / max(x["recency"], 1e-12) - 1.0 for x in c)])

        def score(x: dict) -> float:
            sim = min(1.0, share * x["lexical"] + (1 - share) * x["semantic"]) ** 3
            recency = x["recency"]
            if recency_span:
                days = 1.0 / max(recency, 1e-12) - 1.0
                recency = 1.0 / (1.0 + days / (recency_span * span))
            return ws * sim + wr * recency + wa * x["absolute_relevance"]

        return [x["label"] for x in sorted(c, key=lambda x: -score(x))]

    return rank


def rank_rrf_recency(c: list[dict]) -> list[str]:
    """RRF of lexical, semantic and recency ranks."""
    lex = [x["label"] for x in sorted(c, key=lambda x: -x["lexical"])]
    sem = [x["label"] for x in sorted(c, key=lambda x: -x["semantic"])]
    rec = [x["label"] for x in sorted(c, key=lambda x: -x["recency"])]
    return rrf(lex, sem, rec)


VARIANTS = {
    "default (score fusion, 0.7/0.3)": rank_default,
    "similarity only (no recency)": rank_similarity_only,
    "recency weight 0.1 (0.9/0.1)": fused(ws=0.9, wr=0.1),
    "lexical share 0.3 (semantic 0.7)": fused(share=0.3),
    "lexical share 0.7 (semantic 0.3)": fused(share=0.7),
    "rank fusion (RRF k=60) of lexical and semantic": rank_rrf,
    "rank fusion (RRF k=60) of lexical, semantic and recency": rank_rrf_recency,
    "calibrated relevance as the ranking": rank_absolute,
    "default + 0.5 x calibrated relevance": fused(wa=0.5),
    "score fusion, recency relative to the span (recency_span 8)": fused(recency_span=8.0),
}


def learned_variants(rows: list[dict], split: dict[str, set[str]]) -> dict[str, Any]:
    """The learned fusion's rows for the README (code's weights; the features must come
    from a run with the seed's recency, ``--options off``)."""
    from episodic.store.recall_queries import LEARNED_WEIGHTS, RECENCY_SPAN

    w = np.array([LEARNED_WEIGHTS[k] for k in LEARNED_SIGNALS])
    refit = fit_ranker(rows, split["dev"])
    return {
        "learned fusion, seed recency (1 / (1 + days))": learned(w),
        f"learned fusion + recency_span {RECENCY_SPAN:g} (the new default)": learned(
            w, RECENCY_SPAN
        ),
        "learned fusion, similarity only": learned(w, 0.0, 1.0, 0.0),
        "learned fusion relative to the best candidate (not the ideal), refitted": learned(
            refit * 0.5, 4.0, against_ideal=False
        ),
    }


_PHRASE_FIT = (
    ("lexical", 0.738),
    ("semantic", 0.547),
    ("cosine", 0.313),
    ("coverage", 0.308),
    ("passage_coverage", 0.394),
    ("phrase", 0.359),
)
_WORD_FORMS_FIT = (
    ("lexical", 0.735),
    ("semantic", 0.564),
    ("cosine", 0.325),
    ("coverage", 0.4),
    ("passage_coverage", 0.494),
)
_WORD_FORMS_PHRASE_FIT = (
    ("lexical", 0.699),
    ("semantic", 0.548),
    ("cosine", 0.315),
    ("coverage", 0.366),
    ("passage_coverage", 0.438),
    ("phrase", 0.364),
)


#: The fifth pass's fits (``--fit-rerank default+signals``, development half).
_RERANK_PHRASE: tuple[tuple[str, float], ...] = (
    ("lexical", 0.699),
    ("semantic", 0.551),
    ("cosine", 0.316),
    ("coverage", 0.37),
    ("passage_coverage", 0.436),
    ("phrase", 0.345),
)
_RERANK_SPEAKER: tuple[tuple[str, float], ...] = (
    ("lexical", 1.258),
    ("semantic", 1.099),
    ("cosine", 0.633),
    ("coverage", 0.568),
    ("passage_coverage", 0.815),
    ("speaker_coverage", 0.811),
)
_RERANK_BOTH: tuple[tuple[str, float], ...] = (
    ("lexical", 0.6),
    ("semantic", 0.533),
    ("cosine", 0.307),
    ("coverage", 0.265),
    ("passage_coverage", 0.364),
    ("phrase", 0.32),
    ("speaker_coverage", 0.384),
)


def ranking_variants() -> dict[str, Any]:
    """The ranking switches (recall_queries.RankingOptions) a run can flip with
    ``--options``: each is scored by recomputing every candidate's signals with it."""
    from dataclasses import replace

    from episodic.store.recall_queries import (
        DEFAULT_RANKING,
        THIRD_PASS_WEIGHTS,
        RankingOptions,
    )

    # the learned fusion's weights of the second and third passes (refitted in the fourth)
    earlier = dict(weights=THIRD_PASS_WEIGHTS)
    # the third pass's default (before word forms and the weights refitted with them)
    third = replace(DEFAULT_RANKING, word_forms=False, **earlier)
    variants = {
        "off": RankingOptions(),  # every switch off: Recall before this issue
        "default": DEFAULT_RANKING,
        "stop-phrases": RankingOptions(strip_stop_phrases=True),
        "term-weights": RankingOptions(weight_generic_terms=True),
        "head-field-0.2": RankingOptions(head_share=0.2),
        "head-field-0.4": RankingOptions(head_share=0.4),
        "learned": RankingOptions(fusion="learned", **earlier),
        "recency-span-8": RankingOptions(recency_span=8.0),
        "learned+recency-span-8": RankingOptions(fusion="learned", recency_span=8.0, **earlier),
        # the first version's order (seed recency, for --fit-ranker) with every optional
        # signal of the third pass computed, so the fit can try each alone and together
        "off+signals": RankingOptions(passage_depth=3, entity_match=True, feedback=3),
        "off+depth-2": RankingOptions(passage_depth=2),
        "off+depth-5": RankingOptions(passage_depth=5),
        "off+feedback-5": RankingOptions(feedback=5),
        # the second pass's default (before recency from a named time)
        "second-pass": RankingOptions(fusion="learned", recency_span=8.0, **earlier),
        "off+named-time": RankingOptions(named_time_recency=True),
        "third-pass": third,
        # the fourth pass: "default+…" is the third pass's default plus each switch
        "default+word-forms": replace(third, word_forms=True),
        "off+phrase": RankingOptions(phrase=True),
        "off+phrase+word-forms": RankingOptions(phrase=True, word_forms=True),
        # fitted by --fit-extras off+phrase / off+phrase+word-forms (dev half, named-time
        # recency): phrase added, the five signals refitted with word forms on (the new
        # default), and both
        "default+phrase-fit": replace(third, phrase=True, weights=_PHRASE_FIT),
        "default+word-forms-fit": replace(third, word_forms=True, weights=_WORD_FORMS_FIT),
        "default+word-forms+phrase-fit": replace(
            third, word_forms=True, phrase=True, weights=_WORD_FORMS_PHRASE_FIT
        ),
        "default+rm3-3": replace(third, expansion=3),
        "default+rm3-5": replace(third, expansion=5),
        "default+rm3-10": replace(third, expansion=10),
        "default+word-forms+rm3-3": replace(third, word_forms=True, expansion=3),
        # the fifth pass (on a copy re-indexed with the speakers' words): the seed's recency
        # for --fit-extras, then the fitted weights on today's default
        "off+speaker+word-forms": RankingOptions(speaker=True, word_forms=True),
        # today's default with both signals computed, not fused (for --fit-rerank)
        "off+speaker+phrase+word-forms": RankingOptions(speaker=True, phrase=True, word_forms=True),
        "default+signals": replace(DEFAULT_RANKING, phrase=True, speaker=True),
        # the fourth pass's default (before the second look)
        "fourth-pass": replace(DEFAULT_RANKING, phrase=False, rerank_top=0, rerank_weights=()),
    }
    # fitted by --fit-rerank default+signals (dev half): the second look at the top 5
    fitted = {
        "default+phrase-top5": (_RERANK_PHRASE, {"phrase": True}),
        "default+speaker-top5": (_RERANK_SPEAKER, {"speaker": True}),
        "default+speaker+phrase-top5": (_RERANK_BOTH, {"phrase": True, "speaker": True}),
    }
    for name, (weights, switches) in fitted.items():
        if weights:
            variants[name] = replace(
                DEFAULT_RANKING, rerank_top=5, rerank_weights=weights, **switches
            )
    return variants


# -- the learned fusion (recall_queries.LEARNED_WEIGHTS) --------------------------------

#: The signals of the learned fusion, in recall_queries.LEARNED_WEIGHTS' order.
LEARNED_SIGNALS = ("lexical", "semantic", "cosine", "coverage", "passage_coverage")


def _signals(candidates: list[dict], names: tuple[str, ...] = LEARNED_SIGNALS) -> np.ndarray:
    return np.array([[c[k] for k in names] for c in candidates], dtype=float)


#: The signals whose ideal is 1 (relative to the best candidate, or a share of the query's
#: words); the others' ideal is the candidates' best (recall_queries.similarity_sql).
_IDEAL_ONE = ("lexical", "semantic", "coverage", "passage_coverage")


def _days(candidates: list[dict]) -> np.ndarray:
    """Days since each candidate ended, from the seed's recency 1 / (1 + days): the
    features must come from a run with ``recency_span`` 0 (``--options off``)."""
    return np.array([1.0 / max(c["recency"], 1e-12) - 1.0 for c in candidates])


def fit_ranker(
    rows: list[dict],
    dev: set[str],
    l2: float = 1e-2,
    steps: int = 600,
    names: tuple[str, ...] = LEARNED_SIGNALS,
) -> np.ndarray:
    """Listwise logistic regression on the development half: per own question, a softmax
    over its candidates' linear scores, the gold sessions (uniformly) the target; gradient
    ascent on the mean log-likelihood with an L2 penalty. Returns the weights."""
    data = []
    for r in rows:
        if r["kind"] != "own" or r["conversation"] not in dev or not r["candidates"]:
            continue
        gold = np.array([c["label"] in r["gold"] for c in r["candidates"]], dtype=float)
        if gold.any():
            data.append((_signals(r["candidates"], names), gold / gold.sum()))
    w = np.zeros(len(names))
    for _ in range(steps):
        grad = -l2 * w
        for x, target in data:
            s = x @ w
            p = np.exp(s - s.max())
            grad += x.T @ (target - p / p.sum()) / len(data)
        w += 0.5 * grad
    return w


def learned(
    weights: np.ndarray,
    recency_span: float = 0.0,
    ws: float = 0.7,
    wr: float = 0.3,
    against_ideal: bool = True,
    names: tuple[str, ...] = LEARNED_SIGNALS,
    named_times: dict[str, tuple[float, float]] | None = None,
) -> Any:
    """The learned fusion as Recall computes it (exp(score − best score)), plus recency
    scaled like RankingOptions.recency_span (0: the seed's day scale). ``named_times``:
    per question, the window it names as days before it was asked (``named_time_windows``):
    recency 1 / (1 + days outside it), as RankingOptions.named_time_recency."""

    def rank(c: list[dict], question: str | None = None) -> list[str]:
        if not c:
            return []
        x = _signals(c, names)
        s = x @ weights
        # the ideal candidate: best on both relative signals, every query word matched in
        # its document and in one passage, the best cosine (and optional signal) among the
        # candidates
        ideal = x.max(axis=0)
        ideal[[i for i, n in enumerate(names) if n in _IDEAL_ONE]] = 1.0
        similarity = np.exp(s - (ideal @ weights if against_ideal else s.max()))
        similarity[(x[:, 0] <= 0) & (x[:, 1] <= 0)] = 0.0
        days = _days(c)
        if recency_span:
            recency = 1.0 / (1.0 + days / (recency_span * max(days.max(), 1.0)))
        else:
            recency = 1.0 / (1.0 + days)
        if named_times and question in named_times:
            latest, earliest = named_times[question]  # days before the question
            recency = 1.0 / (1.0 + np.maximum(np.maximum(days - earliest, latest - days), 0.0))
        score = ws * similarity + wr * recency
        order = sorted(range(len(c)), key=lambda i: (-score[i], days[i]))
        return [c[i]["label"] for i in order]

    rank.wants_question = True  # type: ignore[attr-defined]
    return rank


def choose_ranker(rows: list[dict], split: dict[str, set[str]]) -> str:
    """Fits the weights on the development half, then chooses the temperature (the scale
    of the weights) and recency_span on the same half by MRR with the seed's weights
    (0.7 / 0.3); prints both halves of every grid point for the README."""
    w = fit_ranker(rows, split["dev"])
    lines = [f"fitted on dev: {dict(zip(LEARNED_SIGNALS, np.round(w, 3).tolist(), strict=True))}"]
    best: tuple[float, float, float] = (-1.0, 0.0, 0.0)
    for t in (0.25, 0.5, 0.75, 1.0):
        for span in (0.0, 1.0, 2.0, 4.0, 8.0):
            cells = _scores(rows, split, learned(w * t, span))
            lines.append(f"temperature {t} recency_span {span}: " + " ".join(cells))
            if float(cells[2]) > best[0]:
                best = (float(cells[2]), t, span)
    _, t, span = best
    lines.append(
        f"chosen on dev MRR: temperature {t}, recency_span {span}; LEARNED_WEIGHTS = "
        f"{dict(zip(LEARNED_SIGNALS, np.round(w * t, 3).tolist(), strict=True))}"
    )
    return "\n".join(lines)


def choose_extras(
    rows: list[dict],
    split: dict[str, set[str]],
    named_times: dict[str, tuple[float, float]] | None = None,
) -> str:
    """The third pass: each optional signal (ranking_options.EXTRA_SIGNALS present in the
    features) alone, then together, added to the learned fusion: weights fitted on the
    development half, temperature and recency_span chosen there by MRR (as
    :func:`choose_ranker`), both halves printed. The features must come from a run with
    the seed's recency and the switches on (``--options off+signals``)."""
    present = [n for n in EXTRA_SIGNALS if rows and n in _first_candidate(rows)]
    groups: dict[str, tuple[str, ...]] = {"base (LEARNED_SIGNALS)": ()}
    if "cosine_depth" in present:
        groups["passage depth: cosine_depth + passage_depth"] = ("cosine_depth", "passage_depth")
        groups["passage depth: cosine_depth only"] = ("cosine_depth",)
        groups["passage depth: passage_depth only"] = ("passage_depth",)
    for name in ("entity_match", "feedback_cosine", "phrase", "speaker_coverage"):
        if name in present:
            groups[name] = (name,)
    groups["all present"] = tuple(present)
    lines = [
        "| signals added | weights (dev) | temperature, span | dev R@1 / R@5 / MRR "
        "| held out R@1 / R@5 / MRR |",
        "|---|---|---|---|---|",
    ]
    for label, extra in groups.items():
        names = (*LEARNED_SIGNALS, *extra)
        w = fit_ranker(rows, split["dev"], names=names)
        best: tuple[float, float, float, list[str]] = (-1.0, 0.0, 0.0, [])
        for t in (0.25, 0.5, 0.75, 1.0):
            for span in (0.0, 4.0, 8.0):
                cells = _scores(
                    rows, split, learned(w * t, span, names=names, named_times=named_times)
                )
                if float(cells[2]) > best[0]:
                    best = (float(cells[2]), t, span, cells)
        _, t, span, cells = best
        weights = dict(zip(names, np.round(w * t, 3).tolist(), strict=True))
        lines.append(
            f"| {label} | {weights} | {t}, {span:g} | {' / '.join(cells[:3])} "
            f"| {' / '.join(cells[3:])} |"
        )
    return "\n".join(lines)


def choose_rerank(rows: list[dict], split: dict[str, set[str]]) -> str:
    """The fifth pass: the learned fusion with the proximity and speaker signals (each,
    then both) fitted on the development half on features of Recall's default order with
    the signals computed (``--options default+signals``: its recency as Recall computed
    it), the temperature chosen there by MRR; printed on both halves fused over the whole
    list and as a second look at the default's top k (recall_queries.reorder_top)."""
    from dataclasses import replace

    from episodic.store.recall_queries import DEFAULT_RANKING, reorder_top

    def ordered(weights: dict[str, float], top: int) -> Any:
        options = replace(
            DEFAULT_RANKING,
            phrase=True,
            speaker=True,
            rerank_top=top,
            rerank_weights=tuple(weights.items()),
        )

        def rank(c: list[dict]) -> list[str]:
            return [x["label"] for x in reorder_top(c, options, 0.7, 0.3)]

        return rank

    lines = [
        f"Recall's default: {' / '.join(_scores(rows, split))}",
        "| signals | weights (dev) | fused over | dev R@1 / R@5 / MRR | held out R@1 / R@5 / MRR |",
        "|---|---|---|---|---|",
    ]
    groups = {"phrase": ("phrase",), "speaker": ("speaker_coverage",)}
    groups["both"] = ("phrase", "speaker_coverage")
    for label, extra in groups.items():
        names = (*LEARNED_SIGNALS, *extra)
        w = fit_ranker(rows, split["dev"], names=names)
        best: tuple[float, float] = (-1.0, 0.0)
        for t in (0.25, 0.5, 0.75, 1.0):
            weights = dict(zip(names, (w * t).tolist(), strict=True))
            mrr = float(_scores(rows, split, ordered(weights, 10**6))[2])
            if mrr > best[0]:
                best = (mrr, t)
        weights = dict(zip(names, np.round(w * best[1], 3).tolist(), strict=True))
        for top in (10**6, 3, 5, 10):
            cells = _scores(rows, split, ordered(weights, top))
            where = "every candidate" if top == 10**6 else f"the default's top {top}"
            lines.append(
                f"| {label} | {weights} | {where} | {' / '.join(cells[:3])} "
                f"| {' / '.join(cells[3:])} |"
            )
    return "\n".join(lines)


def named_time_windows(conversations: list[locomo.Conversation]) -> dict[str, tuple[float, float]]:
    """Per question that names when something happened (read, not applied: the read
    path's ``named_time``), the window as (days before the question of its end, of its
    start)."""
    from services.recall import domain

    out = {}
    for conv in conversations:
        for q in conv.questions:
            u = domain.read_time(q.question, q.asked_at, False)
            if u is None or u.applied or u.start is None or u.end is None or u.ordinal:
                continue
            out[q.question] = (
                (q.asked_at - u.end).total_seconds() / 86400,
                (q.asked_at - u.start).total_seconds() / 86400,
            )
    return out


def _first_candidate(rows: list[dict]) -> dict:
    return next(c for r in rows for c in r["candidates"])


def _scores(rows: list[dict], split: dict[str, set[str]], fn: Any = None) -> list[str]:
    cells = []
    for half in ("dev", "held-out"):
        s = locomo.Scores()
        for r in rows:
            if r["kind"] == "own" and r["conversation"] in split[half]:
                if fn is None:
                    got = rank_default(r["candidates"])
                elif getattr(fn, "wants_question", False):  # learned(..., named_times=…)
                    got = fn(r["candidates"], r["question"])
                else:
                    got = fn(r["candidates"])
                s.add(r["category"], got, tuple(r["gold"]))
        o = s.overall()
        cells += [f"{o['R@1']:.3f}", f"{o['R@5']:.3f}", f"{o['MRR']:.3f}"]
    return cells


def latency(url: str, conversations: list[locomo.Conversation], names: list[str]) -> str:
    """In-process Recall (embedding excluded: the same vector per question) with each of
    ``names``' switches, interleaved question by question, top 10 as the service asks."""
    from episodic.config import EmbeddingSettings
    from episodic.providers import make_embedder
    from episodic.services.recall import domain
    from episodic.store.db import make_engine
    from episodic.testing.keys import test_vault

    known = ranking_variants()
    engine = make_engine(url, pool_size=2)
    vault = test_vault()
    embedder = make_embedder(EmbeddingSettings(embedding_threads=2), 384)
    samples: dict[str, list[float]] = {n: [] for n in names}
    with engine.connect() as conn:
        for conv in conversations:
            for q in conv.questions:
                for name in names:
                    request = lab_request(conv.dataset, q, ranking=known[name])
                    vector = embedder.embed_query(request.ranked_query or q.question)
                    started = time.perf_counter()
                    domain.recall(conn, vault, request, vector)
                    samples[name].append((time.perf_counter() - started) * 1000)
    engine.dispose()
    lines = []
    base = names[0]
    for name in names:
        v = sorted(samples[name])
        b = sorted(samples[base])
        p50, p99 = v[len(v) // 2], v[int(len(v) * 0.99)]
        lines.append(
            f"{name}: p50 {p50:.2f} ms, p99 {p99:.2f} ms ({len(v)} calls); vs {base}: "
            f"{p50 / b[len(b) // 2]:.2f}x p50, {p99 / b[int(len(b) * 0.99)]:.2f}x p99"
        )
    return "\n".join(lines)


def score_options(caches: dict[str, Path], split: dict[str, set[str]]) -> str:
    """One row per ranking switch (or index variant): Recall's own order on its features."""
    lines = [
        "| variant | dev R@1 | dev R@5 | dev MRR | held-out R@1 | held-out R@5 | held-out MRR "
        "| p50 ms | p99 ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, path in caches.items():
        rows = json.loads(path.read_text())
        ms = sorted(r["ms"] for r in rows if r["kind"] == "own")
        cells = [*_scores(rows, split), f"{ms[len(ms) // 2]:.1f}", f"{ms[int(len(ms) * 0.99)]:.1f}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def score_variants(
    rows: list[dict], split: dict[str, set[str]], variants: dict[str, Any] | None = None
) -> str:
    lines = [
        "| variant | dev R@1 | dev R@5 | dev MRR | held-out R@1 | held-out R@5 | held-out MRR |"
    ]
    lines.append("|---|---|---|---|---|---|---|")
    for name, fn in (variants or VARIANTS).items():
        cells = []
        for half in ("dev", "held-out"):
            s = locomo.Scores()
            for r in rows:
                if r["kind"] == "own" and r["conversation"] in split[half]:
                    s.add(r["category"], fn(r["candidates"]), tuple(r["gold"]))
            o = s.overall()
            cells += [f"{o['R@1']:.3f}", f"{o['R@5']:.3f}", f"{o['MRR']:.3f}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: The curve's inputs: the episode's own three signals, then their best over the request's
#: candidates (``episodic.store.relevance``). The lab's rows hold every candidate of a
#: LoCoMo dataset (Recall asked for MAX_CONTEXT_EPISODES), so the best over them is the
#: statement's best over everything it scored.
_SIGNALS = ("cosine", "coverage", "passage_coverage")


def _x(c: dict) -> list[float]:
    return [c[k] for k in _SIGNALS] + list(c["best"])


def with_best(rows: list[dict]) -> list[dict]:
    """Each candidate's ``best``: the request's best of each signal (its context)."""
    for r in rows:
        best = tuple(max((c[k] for c in r["candidates"]), default=0.0) for k in _SIGNALS)
        for c in r["candidates"]:
            c["best"] = best
    return rows


def fit(rows: list[dict], dev: set[str], l2: float = 1e-3) -> tuple[float, list[float]]:
    """The relevance curve: logistic regression on the development half, gold episodes of
    own questions positives, every candidate of a foreign question a negative."""
    xs, ys = [], []
    for r in rows:
        if r["conversation"] not in dev:
            continue
        if r["kind"] == "own":
            for c in r["candidates"]:
                if c["label"] in r["gold"]:
                    xs.append(_x(c))
                    ys.append(1.0)
        elif r["kind"] == "foreign":
            for c in r["candidates"]:
                xs.append(_x(c))
                ys.append(0.0)
    return _logistic(xs, ys, l2)


def request_best(r: dict) -> list[float]:
    """The request's best of each signal over its candidates (what the match curve reads)."""
    return [max((c[k] for c in r["candidates"]), default=0.0) for k in _SIGNALS]


def fit_match(rows: list[dict], dev: set[str], l2: float = 1e-3) -> tuple[float, list[float]]:
    """The match curve (does the dataset hold an answer at all?): logistic regression on the
    development half over each request's best signals, a question asked of its own
    conversation a positive, the same question asked of another's a negative."""
    chosen = [r for r in rows if r["conversation"] in dev and r["kind"] in ("own", "foreign")]
    return _logistic(
        [request_best(r) for r in chosen], [float(r["kind"] == "own") for r in chosen], l2
    )


def _logistic(xs: list[list[float]], ys: list[float], l2: float) -> tuple[float, list[float]]:
    """Intercept and weights of an L2-regularised logistic regression (Newton steps),
    the two classes weighted equally."""
    x = np.hstack([np.ones((len(xs), 1)), np.array(xs)])
    y = np.array(ys)
    # balance the classes so the curve is not dominated by the many negatives
    w = np.where(y == 1, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    beta = np.zeros(x.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-x @ beta))
        grad = x.T @ (w * (p - y)) / len(y) + l2 * np.r_[0, beta[1:]]
        hess = (x.T * (w * p * (1 - p))) @ x / len(y) + l2 * np.diag(
            np.r_[0, np.ones(len(beta) - 1)]
        )
        beta -= np.linalg.solve(hess, grad)
    return float(beta[0]), [float(b) for b in beta[1:]]


def abstention_figures(
    rows: list[dict],
    split: dict[str, set[str]],
    threshold: float,
    rel: Any,
    match: Any = None,
    min_match: float = 0.0,
    named_times: dict[str, tuple[float, float]] | None = None,
) -> dict[str, dict[str, float]]:
    """Per half, unrounded: the shares of foreign and adversarial questions left with
    nothing, of real questions left with nothing, and R@5 / MRR of the real ones before and
    after, at ``threshold`` (and, with the ``match`` curve, ``min_match``: a request whose
    match is below it keeps nothing but the named time's episodes). ``named_times`` (the
    questions that name a time, :func:`named_time_windows`): as the Recall service does, an
    episode inside the named time is kept whatever its relevance — its recency is then
    exactly 1 (the features' default options rank recency from the named time); without
    it the figures overstate abstention and the R@5 lost."""
    out = {}
    for half in ("dev", "held-out"):
        chosen = [r for r in rows if r["conversation"] in split[half]]
        foreign = [r for r in chosen if r["kind"] == "foreign"]
        adv = [r for r in chosen if r["kind"] == "adversarial"]
        own = [r for r in chosen if r["kind"] == "own"]

        def kept(r: dict) -> list[dict]:
            named = named_times is not None and r["question"] in named_times
            gated = match is not None and match(request_best(r)) < min_match
            return [
                c
                for c in r["candidates"]
                if (not gated and rel(c) >= threshold) or (named and c["recency"] >= 1.0 - 1e-9)
            ]

        before, after = locomo.Scores(), locomo.Scores()
        for r in own:
            before.add(r["category"], rank_default(r["candidates"]), tuple(r["gold"]))
            after.add(r["category"], rank_default(kept(r)), tuple(r["gold"]))
        b, a = before.overall(), after.overall()
        out[half] = {
            "foreign": sum(not kept(r) for r in foreign) / max(len(foreign), 1),
            "foreign_n": len(foreign),
            "adversarial": sum(not kept(r) for r in adv) / max(len(adv), 1),
            "adversarial_n": len(adv),
            "own_empty": sum(not kept(r) for r in own) / max(len(own), 1),
            "r5_before": b["R@5"],
            "r5_after": a["R@5"],
            "mrr_before": b["MRR"],
            "mrr_after": a["MRR"],
        }
    return out


def abstention(
    rows: list[dict],
    split: dict[str, set[str]],
    threshold: float,
    rel: Any,
    match: Any = None,
    min_match: float = 0.0,
    named_times: dict[str, tuple[float, float]] | None = None,
) -> str:
    """:func:`abstention_figures` as lines, one per half."""
    parts = []
    for half, f in abstention_figures(
        rows, split, threshold, rel, match, min_match, named_times
    ).items():
        parts.append(
            f"{half}: foreign abstained {f['foreign']:.3f} ({f['foreign_n']}), adversarial "
            f"abstained {f['adversarial']:.3f} ({f['adversarial_n']}), real questions with "
            f"nothing {f['own_empty']:.3f}, R@5 {f['r5_before']:.3f} -> {f['r5_after']:.3f} "
            f"(lost {100 * (f['r5_before'] - f['r5_after']):.2f} points), "
            f"MRR {f['mrr_before']:.3f} -> {f['mrr_after']:.3f}"
        )
    return "\n".join(parts)


def choose_abstention(
    rows: list[dict],
    split: dict[str, set[str]],
    rel: Any,
    match: Any,
    named_times: dict[str, tuple[float, float]],
    max_lost: float = 1.0,
) -> str:
    """The rule behind ``relevance.Abstention`` and ``recommended_min_relevance``, as a
    table: for each value 0.01 apart, the figures of ``min_relevance`` alone and of both
    thresholds at that value; the chosen value of each is the highest at which the
    development half loses at most ``max_lost`` points of R@5, computed exactly."""
    lines = [
        "| value | min_relevance alone: foreign empty dev / held out, R@5 lost dev / held out "
        "| both (abstain): the same |",
        "|---|---|---|",
    ]
    chosen: dict[str, float] = {}
    for v in [x / 100 for x in range(1, 61)]:
        cells = []
        for name, figures in (
            ("alone", abstention_figures(rows, split, v, rel, None, 0.0, named_times)),
            ("both", abstention_figures(rows, split, v, rel, match, v, named_times)),
        ):
            lost = {h: 100 * (f["r5_before"] - f["r5_after"]) for h, f in figures.items()}
            if lost["dev"] <= max_lost + 1e-9:
                chosen[name] = v
            cells.append(
                f"{100 * figures['dev']['foreign']:.1f} % / "
                f"{100 * figures['held-out']['foreign']:.1f} %, "
                f"{lost['dev']:.3f} / {lost['held-out']:.3f}"
            )
        lines.append(f"| {v:.2f} | {cells[0]} | {cells[1]} |")
    lines.append(
        f"highest with at most {max_lost} point of R@5 lost on dev: min_relevance alone "
        f"{chosen.get('alone')}, both {chosen.get('both')}"
    )
    return "\n".join(lines)


# -- a local reranker over the top candidates (the sixth pass) ------------------------


def candidate_texts(url: str) -> dict:
    """What a reranker can read of every episode of the kept database, by (dataset, label):
    its summary and key learnings (``domain.rerank_text``) and its thread's chunks (the
    recall index's, ``recall_index.make_chunks`` over the messages it indexed) with their
    stored vectors, to pick the chunk nearest a question."""
    from sqlalchemy import text as sql

    from episodic.services.recall import domain
    from episodic.store import recall_index
    from episodic.store.db import make_engine
    from episodic.testing.keys import test_vault

    engine = make_engine(url, pool_size=2)
    vault = test_vault()
    out: dict[tuple[str, str], dict[str, Any]] = {}
    with engine.connect() as conn:
        threads = {
            r["thread_id"]: r
            for r in (
                vault.open_one(conn, row, "threads")
                for row in conn.exec_driver_sql("SELECT * FROM threads").mappings().all()
            )
        }
        episodes = (
            conn.exec_driver_sql("SELECT * FROM episodes WHERE status = 'completed'")
            .mappings()
            .all()
        )
        for raw in episodes:
            episode = vault.open_one(conn, raw, "episodes")
            dataset, thread_id = raw["dataset"], raw["thread_id"]
            messages = vault.open_rows(
                conn,
                dataset,
                list(
                    conn.execute(
                        sql(
                            "SELECT sequence, content, metadata FROM messages WHERE dataset = :d "
                            "AND thread_id = :t AND sequence <= :e ORDER BY sequence"
                        ),
                        {"d": dataset, "t": thread_id, "e": raw["end_sequence"]},
                    )
                    .mappings()
                    .all()
                ),
                "messages",
            )
            stored = conn.execute(
                sql(
                    "SELECT start_sequence, start_offset, embedding::text AS v FROM message_chunks "
                    "WHERE dataset = :d AND thread_id = :t AND end_sequence <= :e"
                ),
                {"d": dataset, "t": thread_id, "e": raw["end_sequence"]},
            ).all()
            texts = recall_index.chunk_texts(
                [
                    (m["sequence"], recall_index.indexed_text(m["content"], m["metadata"]))
                    for m in messages
                ],
                [(s, o) for s, o, _ in stored],
            )
            chunks = [(texts[(s, o)], json.loads(v)) for s, o, v in stored if (s, o) in texts]
            out[(dataset, threads[thread_id]["label"])] = {
                "summary": domain.rerank_text(episode),
                "chunks": [c for c, _ in chunks],
                "vectors": np.array([v for _, v in chunks], dtype=np.float32).reshape(-1, 384),
            }
    engine.dispose()
    return out


RERANK_INPUTS = ("summary", "chunk", "summary+chunk", "best-of-chunks")


def local_rerank_features(
    url: str, conversations: list[locomo.Conversation], rows: list[dict], top: int = 10
) -> list[dict]:
    """For every own question, the local reranker's score of each of Recall's top ``top``
    candidates, read four ways (``RERANK_INPUTS``): the summary (what the HTTP reranker
    reads), the chunk nearest the question (by the stored chunk vectors), both, and the
    best score over every chunk. Cached by the caller."""
    from bench.quality.packaged_reranker import PackagedReranker
    from episodic.config import EmbeddingSettings
    from episodic.providers import make_embedder

    embedder = make_embedder(EmbeddingSettings(embedding_threads=2), 384)
    reranker = PackagedReranker()
    asked = {(c.conversation_id, q.question): (c, q) for c in conversations for q in c.questions}
    own = [r for r in rows if r["kind"] == "own"]
    queries = {}
    for r in own:
        conv, q = asked[(r["conversation"], r["question"])]
        ranked = lab_request(conv.dataset, q).ranked_query
        queries[(r["conversation"], r["question"])] = ranked or q.question
    vectors = embedder.embed(list(queries.values()))
    qvec = dict(zip(queries, vectors, strict=True))
    texts = candidate_texts(url)
    out = []
    started = time.monotonic()
    for n, r in enumerate(own):
        key = (r["conversation"], r["question"])
        query = queries[key]
        v = np.asarray(qvec[key], dtype=np.float32)
        top_c = r["candidates"][:top]
        docs: dict[str, list[str]] = {
            name: [] for name in RERANK_INPUTS if name != "best-of-chunks"
        }
        every: list[tuple[int, str]] = []
        for i, c in enumerate(top_c):
            t = texts[(r["dataset"], c["label"])]
            best = t["chunks"][int(np.argmax(t["vectors"] @ v))] if t["chunks"] else ""
            docs["summary"].append(t["summary"])
            docs["chunk"].append(best or t["summary"])
            docs["summary+chunk"].append((t["summary"] + "\n" + best).strip())
            every += [(i, ch) for ch in t["chunks"]] or [(i, t["summary"])]
        scored = {name: reranker.scores(query, d) for name, d in docs.items()}
        each = reranker.scores(query, [ch for _, ch in every])
        best_of = [
            max(s for (i, _), s in zip(every, each, strict=True) if i == j)
            for j in range(len(top_c))
        ]
        scored["best-of-chunks"] = best_of
        head = [
            {**c, **{f"xenc_{name}": float(scored[name][i]) for name in RERANK_INPUTS}}
            for i, c in enumerate(top_c)
        ]
        out.append({**r, "candidates": head + r["candidates"][top:]})
        if n % 200 == 0:
            log(f"  local rerank: {n}/{len(own)} questions, {time.monotonic() - started:.0f}s")
    return out


def rerank_order(name: str, top: int, mix: float = 1.0) -> Any:
    """Recall's order with its best ``top`` reordered by ``mix`` × the reranker's score
    (min-max over those ``top``) + (1 − ``mix``) × Recall's own relevance (the same)."""

    def rank(c: list[dict]) -> list[str]:
        head, tail = c[:top], c[top:]
        if len(head) < 2:
            return [x["label"] for x in c]

        def norm(values: list[float]) -> list[float]:
            lo, hi = min(values), max(values)
            return [(x - lo) / (hi - lo) if hi > lo else 0.0 for x in values]

        given = norm([x[f"xenc_{name}"] for x in head])
        own = norm([x["relevance"] for x in head])
        score = [mix * g + (1 - mix) * o for g, o in zip(given, own, strict=True)]
        order = sorted(range(len(head)), key=lambda i: (-score[i], i))
        return [head[i]["label"] for i in order] + [x["label"] for x in tail]

    return rank


def choose_local_rerank(rows: list[dict], split: dict[str, set[str]]) -> str:
    """Every input and depth, pure reranker order and a mix with Recall's relevance whose
    share is chosen on the development half by MRR; both halves printed."""
    lines = [
        f"Recall's default: {' / '.join(_scores(rows, split))}",
        "| input | top k | mix (reranker share) | dev R@1 / R@5 / MRR | held out R@1 / R@5 / MRR |",
        "|---|---|---|---|---|",
    ]
    for name in RERANK_INPUTS:
        for top in (3, 5, 10):
            pure = _scores(rows, split, rerank_order(name, top))
            lines.append(
                f"| {name} | {top} | 1 (pure) | {' / '.join(pure[:3])} | {' / '.join(pure[3:])} |"
            )
            best = max(
                (float(_scores(rows, split, rerank_order(name, top, m))[2]), m)
                for m in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
            )
            cells = _scores(rows, split, rerank_order(name, top, best[1]))
            lines.append(
                f"| {name} | {top} | {best[1]:.1f} (dev MRR) | {' / '.join(cells[:3])} | {' / '.join(cells[3:])} |"
            )
    return "\n".join(lines)


#: Chunks per session read for the query-time variant of late interaction.
NEAREST_CHUNKS = 2


def late_interaction_features(
    url: str,
    conversations: list[locomo.Conversation],
    rows: list[dict],
    top: int = 10,
    read_chunks: bool = True,
) -> list[dict]:
    """An untried reading for the same-topic and paraphrase misses, with the embedder
    Recall already has: every word of a session read in context (late chunking at word
    granularity, ``MiniLMEmbedder.embed_spans`` with one span per word) and every word of
    the question the same way; a candidate's score is the idf-weighted mean over the
    question's words of the best cosine with any of its words (ColBERT's MaxSim, with a
    model not trained for it). Added to each of Recall's top ``top`` candidates as
    ``xenc_late-interaction``; a lab probe (the word vectors are computed here, not stored).
    ``read_chunks`` False: without the query-time reading of the nearest chunks (most of
    the run's time), for the stored forms alone."""
    import re

    from sqlalchemy import text as sql

    from episodic.config import EmbeddingSettings
    from episodic.providers import make_embedder
    from episodic.providers.types import SpanDocument
    from episodic.store import recall_index
    from episodic.store.db import make_engine
    from episodic.testing.keys import test_vault

    words = re.compile(r"\w+", re.UNICODE)
    embedder = make_embedder(EmbeddingSettings(embedding_threads=2), 384)
    engine = make_engine(url, pool_size=2)
    vault = test_vault()
    sessions: dict[tuple[str, str], tuple[list[str], np.ndarray]] = {}
    # each session's document and its words' character offsets: which stored word vectors
    # fall inside a chunk (a chunk's text is exactly its span of the document)
    places: dict[tuple[str, str], tuple[str, np.ndarray]] = {}
    started = time.monotonic()
    with engine.connect() as conn:
        labels = {
            r["thread_id"]: r["label"]
            for r in (
                vault.open_one(conn, row, "threads")
                for row in conn.exec_driver_sql("SELECT * FROM threads").mappings().all()
            )
        }
        episodes = (
            conn.exec_driver_sql(
                "SELECT dataset, thread_id, end_sequence FROM episodes WHERE status = 'completed'"
            )
            .mappings()
            .all()
        )
        for n, raw in enumerate(episodes):
            messages = vault.open_rows(
                conn,
                raw["dataset"],
                list(
                    conn.execute(
                        sql(
                            "SELECT sequence, content, metadata FROM messages WHERE dataset = :d "
                            "AND thread_id = :t AND sequence <= :e ORDER BY sequence"
                        ),
                        {"d": raw["dataset"], "t": raw["thread_id"], "e": raw["end_sequence"]},
                    )
                    .mappings()
                    .all()
                ),
                "messages",
            )
            document = "\n".join(
                recall_index.indexed_text(m["content"], m["metadata"]) for m in messages
            )
            found = list(words.finditer(document))
            (vectors,) = embedder.embed_spans(
                [SpanDocument(document, tuple((m.start(), m.end()) for m in found))]
            )
            sessions[(raw["dataset"], labels[raw["thread_id"]])] = (
                [m.group().lower() for m in found],
                vectors.astype(np.float16),
            )
            places[(raw["dataset"], labels[raw["thread_id"]])] = (
                document,
                np.array([m.start() for m in found], dtype=np.int64),
            )
            if n % 50 == 0:
                log(
                    f"  word vectors: {n}/{len(episodes)} sessions, {time.monotonic() - started:.0f}s"
                )
    engine.dispose()
    stored = _stored_word_forms(sessions)
    # the control a statement could serve: the same words against the stored chunk vectors
    chunks = candidate_texts(url)
    df: dict[str, dict[str, int]] = {}
    count: dict[str, int] = {}
    for (dataset, _), (ws, _) in sessions.items():
        count[dataset] = count.get(dataset, 0) + 1
        for w in set(ws):
            df.setdefault(dataset, {})[w] = df.get(dataset, {}).get(w, 0) + 1
    asked = {(c.conversation_id, q.question): (c, q) for c in conversations for q in c.questions}
    read: dict[str, np.ndarray] = {}

    def chunk_words(chunk: str) -> np.ndarray:
        if chunk not in read:
            spans = tuple((m.start(), m.end()) for m in words.finditer(chunk))
            read[chunk] = (
                embedder.embed_spans([SpanDocument(chunk, spans)])[0]
                if spans
                else np.zeros((0, 384))
            )
        return read[chunk]

    out = []
    for r in rows:
        if r["kind"] != "own":
            continue
        conv, q = asked[(r["conversation"], r["question"])]
        query = lab_request(conv.dataset, q).ranked_query or q.question
        found = list(words.finditer(query))
        if not found:
            out.append(r)
            continue
        (qv,) = embedder.embed_spans(
            [SpanDocument(query, tuple((m.start(), m.end()) for m in found))]
        )
        n_sessions = count[r["dataset"]]
        weight = np.array(
            [
                math.log((n_sessions + 1) / (df[r["dataset"]].get(m.group().lower(), 0) + 0.5))
                for m in found
            ]
        )
        weight = np.maximum(weight, 0.0)
        sentence = embedder.embed_query(query)
        head = []
        for c in r["candidates"][:top]:
            scores = {}
            near = chunks[(r["dataset"], c["label"])]
            # the session's NEAREST_CHUNKS chunks nearest the question, each read alone:
            # what could be computed at query time without stored word vectors
            picked = np.argsort(-(near["vectors"] @ sentence))[:NEAREST_CHUNKS]
            alone = [chunk_words(near["chunks"][i]) for i in picked] if read_chunks else []
            # the same chunks' words as the session's one read saw them (what a stored row
            # per episode window holds), float and as int8 of the 64-dimension projection
            within = {
                f"li-near{n}": _words_within(
                    places[(r["dataset"], c["label"])],
                    [near["chunks"][i] for i in picked[:n]],
                )
                for n in (1, NEAREST_CHUNKS)
            }
            session_words = sessions[(r["dataset"], c["label"])][1].astype(np.float32)
            near_forms = {}
            for form, mask in within.items():
                near_forms[form] = session_words[mask]
                near_forms[f"{form}-p64"] = _int8(_projected(session_words[mask], 64))
            alone_words = np.concatenate([a for a in alone if len(a)] or [np.zeros((0, 384))])
            if read_chunks:
                # what storing every chunk's own read (each chunk read alone, as the
                # Summariser's separate embedding does) could keep of the nearest two
                near_forms["nearest-chunks-int8"] = _int8(alone_words)
                for dims in (64, 128):
                    near_forms[f"nearest-chunks-p{dims}"] = _int8(_projected(alone_words, dims))
            for name, dv in (
                ("late-interaction", sessions[(r["dataset"], c["label"])][1]),
                *((form, kept[(r["dataset"], c["label"])]) for form, kept in stored.items()),
                *near_forms.items(),
                ("word-chunk", near["vectors"]),
                ("nearest-chunks", alone_words),
            ):
                query_words = qv
                if name.startswith("li-sign"):
                    query_words = qv @ WORD_ROTATION.T
                elif projected := re.search(r"-p(\d+)$", name):
                    query_words = _projected(qv, int(projected.group(1)))
                elif name.startswith("li-p"):
                    query_words = _projected(qv, int(name.split("-")[1][1:]))
                best = (
                    (query_words @ dv.astype(np.float32).T).max(axis=1)
                    if len(dv)
                    else np.zeros(len(qv))
                )
                scores[f"xenc_{name}"] = (
                    float((weight * best).sum() / weight.sum()) if weight.sum() > 0 else 0.0
                )
            head.append({**c, **scores})
        out.append({**r, "candidates": head + r["candidates"][top:]})
    log(f"  chunks found in their session's document: {WITHIN_FOUND}")
    return out


def _words_within(place: tuple[str, np.ndarray], chunks: list[str]) -> np.ndarray:
    """Which of a session's words (by their character offsets in its document) lie inside
    any of ``chunks`` (each found in the document by its text)."""
    document, starts = place
    mask = np.zeros(len(starts), dtype=bool)
    for chunk in chunks:
        at = document.find(chunk)
        WITHIN_FOUND[at >= 0] += 1
        if at >= 0:
            mask |= (starts >= at) & (starts < at + len(chunk))
    return mask


#: How many chunks _words_within found in their document (True) or not (False): logged.
WITHIN_FOUND = {True: 0, False: 0}


#: A fixed random rotation for the sign sketches (SimHash): the signs of a rotated vector
#: keep its angles better than the signs of the model's own coordinates.
WORD_ROTATION = np.linalg.qr(np.random.default_rng(2026).standard_normal((384, 384)))[0].T


def _projected(vectors: np.ndarray, dims: int) -> np.ndarray:
    """``vectors`` through the first ``dims`` rows of WORD_ROTATION (a random projection
    that keeps angles approximately, Johnson-Lindenstrauss), normalised again."""
    out = vectors.astype(np.float32) @ WORD_ROTATION[:dims].T
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def _int8(vectors: np.ndarray) -> np.ndarray:
    """What int8 with one scale per vector keeps of ``vectors``."""
    scale = np.abs(vectors).max(axis=1, keepdims=True) / 127.0
    return np.round(vectors / np.maximum(scale, 1e-12)) * scale


#: Dimensions of the projected forms.
PROJECTIONS = (32, 64, 128)


def _stored_word_forms(
    sessions: dict[tuple[str, str], tuple[list[str], np.ndarray]],
) -> dict[str, dict[tuple[str, str], np.ndarray]]:
    """What storing each session's word vectors could keep, read back as the arrays MaxSim
    uses: int8 with one scale per word (384 B a word), the signs of the rotated vector
    (``li-sign``, 48 B a word; the question's words rotated too and kept in float, an
    asymmetric product), the signs of the model's own coordinates, and each of those over
    the session's distinct words only (one vector per word form, the mean of its
    occurrences); and int8 of a random projection to each of PROJECTIONS dimensions
    (``li-p64-distinct``: dims + 4 bytes a distinct word; 128 also over every word)."""
    forms: dict[str, dict[tuple[str, str], np.ndarray]] = {
        "li-int8": {},
        "li-sign": {},
        "li-sign-raw": {},
        "li-distinct": {},
        "li-sign-distinct": {},
    }
    total = distinct_total = 0
    for key, (ws, vectors) in sessions.items():
        v = vectors.astype(np.float32)
        forms["li-int8"][key] = _int8(v)
        forms["li-sign"][key] = np.sign(v @ WORD_ROTATION.T)
        forms["li-sign-raw"][key] = np.sign(v)
        index: dict[str, list[int]] = {}
        for i, w in enumerate(ws):
            index.setdefault(w, []).append(i)
        mean = np.stack([v[ix].mean(axis=0) for ix in index.values()]) if index else v[:0]
        mean /= np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)
        forms["li-distinct"][key] = mean
        forms["li-sign-distinct"][key] = np.sign(mean @ WORD_ROTATION.T)
        for dims in PROJECTIONS:
            forms.setdefault(f"li-p{dims}-distinct", {})[key] = _int8(_projected(mean, dims))
        forms.setdefault("li-p128-all", {})[key] = _int8(_projected(v, 128))
        total += len(ws)
        distinct_total += len(index)
    log(
        f"  stored word forms: {total / max(len(sessions), 1):.0f} words a session, "
        f"{distinct_total / max(len(sessions), 1):.0f} distinct"
    )
    return forms


def choose_mix(rows: list[dict], split: dict[str, set[str]], name: str) -> str:
    """One reader's pure order and its mix with Recall's relevance over the top 3, 5, 10,
    the mix chosen on the development half by MRR; both halves printed."""
    lines = [
        f"Recall's default: {' / '.join(_scores(rows, split))}",
        "| input | top k | mix (its share) | dev R@1 / R@5 / MRR | held out R@1 / R@5 / MRR |",
        "|---|---|---|---|---|",
    ]
    for top in (3, 5, 10):
        pure = _scores(rows, split, rerank_order(name, top))
        lines.append(
            f"| {name} | {top} | 1 (pure) | {' / '.join(pure[:3])} | {' / '.join(pure[3:])} |"
        )
        best = max(
            (float(_scores(rows, split, rerank_order(name, top, m))[2]), m)
            for m in (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
        )
        cells = _scores(rows, split, rerank_order(name, top, best[1]))
        lines.append(
            f"| {name} | {top} | {best[1]:.2f} (dev MRR) | {' / '.join(cells[:3])} "
            f"| {' / '.join(cells[3:])} |"
        )
    return "\n".join(lines)


def choose_second_look(rows: list[dict], split: dict[str, set[str]], signal: str) -> str:
    """``signal`` (a key every one of the top 10 candidates carries) as a seventh signal of
    the second look (``recall_queries.reorder_top``): the six refitted with it by the
    listwise regression on the development half's top 10, the temperature chosen there by
    MRR, then the default's top 3, 5 or 10 reordered; both halves printed."""
    from episodic.store.recall_queries import DEFAULT_RANKING

    names = (*dict(DEFAULT_RANKING.rerank_weights), *((signal,) if signal else ()))
    head = [{**r, "candidates": r["candidates"][:10]} for r in rows]

    def ordered(weights: dict[str, float], top: int) -> Any:
        # reorder_top's arithmetic (RankingOptions accepts only the statement's signals):
        # 0.7 x exp(fit - ideal fit) + 0.3 x recency over the top k, the ideal 1 on the
        # relative signals and coverages, the best of the k on the cosine and this one
        def rank(c: list[dict]) -> list[str]:
            k = [x for x in c[:top] if all(n in x for n in weights)]
            if len(k) < 2:
                return [x["label"] for x in c]
            ideal = sum(
                w * (max(x[n] for x in k) if n in ("cosine", "phrase", signal) else 1.0)
                for n, w in weights.items()
            )

            def score(x: dict) -> float:
                fit = sum(w * x[n] for n, w in weights.items())
                similarity = math.exp(fit - ideal) if x["lexical"] > 0 or x["semantic"] > 0 else 0
                return 0.7 * similarity + 0.3 * x["recency"]

            reordered = sorted(k, key=score, reverse=True)
            return [x["label"] for x in reordered] + [x["label"] for x in c[len(k) :]]

        return rank

    w = fit_ranker(head, split["dev"], names=names)
    best = max(
        (float(_scores(rows, split, ordered(dict(zip(names, w * t, strict=True)), 5))[2]), t)
        for t in (0.25, 0.5, 0.75, 1.0)
    )
    weights = dict(zip(names, np.round(w * best[1], 3).tolist(), strict=True))
    lines = [
        f"Recall's default: {' / '.join(_scores(rows, split))}",
        f"weights (dev, temperature {best[1]}): {weights}",
        "| second look over | dev R@1 / R@5 / MRR | held out R@1 / R@5 / MRR |",
        "|---|---|---|",
    ]
    for top in (3, 5, 10):
        cells = _scores(rows, split, ordered(weights, top))
        lines.append(f"| top {top} | {' / '.join(cells[:3])} | {' / '.join(cells[3:])} |")
    return "\n".join(lines)


def rerank_latency(
    url: str, conversations: list[locomo.Conversation], every: int = 5, sessions: bool = True
) -> str:
    """What the two readers would add to a Recall call, timed in the same run, question by
    question (every ``every``-th question): in-process Recall top 10 (the default,
    embedding excluded as in ``latency``); the packaged reranker over Recall's top 5
    summaries, its document cache emptied each time (a first read) and warm; the late
    interaction's word vectors computed at query time for the top 10 sessions and the
    question (what it would cost without stored word vectors)."""
    import re

    from sqlalchemy import text as sql

    from bench.quality.packaged_reranker import PackagedReranker
    from episodic.config import EmbeddingSettings
    from episodic.providers import make_embedder
    from episodic.providers.types import SpanDocument
    from episodic.services.recall import domain
    from episodic.store import recall_index
    from episodic.store.db import make_engine
    from episodic.testing.keys import test_vault

    words = re.compile(r"\w+", re.UNICODE)
    engine = make_engine(url, pool_size=2)
    vault = test_vault()
    embedder = make_embedder(EmbeddingSettings(embedding_threads=2), 384)
    reranker = PackagedReranker(threads=2)
    samples: dict[str, list[float]] = {
        "recall": [],
        "xenc-cold": [],
        "xenc-warm": [],
        "li": [],
        "li-nearest-top10": [],
        "li-nearest-top3": [],
    }
    near = candidate_texts(url)
    with engine.connect() as conn:
        labels = {
            r["thread_id"]: r["label"]
            for r in (
                vault.open_one(conn, row, "threads")
                for row in conn.exec_driver_sql("SELECT * FROM threads").mappings().all()
            )
        }
        asked = [(c, q) for c in conversations for q in c.questions][::every]
        for conv, q in asked:
            request = lab_request(conv.dataset, q)
            query = request.ranked_query or q.question
            vector = embedder.embed_query(query)
            started = time.perf_counter()
            answer = domain.recall(conn, vault, request, vector)
            samples["recall"].append((time.perf_counter() - started) * 1000)
            rows = list(answer.rows)  # opened by domain.recall
            texts = [domain.rerank_text(r) for r in rows[:5]]
            reranker._cache.clear()
            started = time.perf_counter()
            reranker.scores(query, texts)
            samples["xenc-cold"].append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            reranker.scores(query, texts)
            samples["xenc-warm"].append((time.perf_counter() - started) * 1000)
            documents = []
            for r in answer.rows[:10] if sessions else []:
                messages = vault.open_rows(
                    conn,
                    conv.dataset,
                    list(
                        conn.execute(
                            sql(
                                "SELECT sequence, content, metadata FROM messages "
                                "WHERE dataset = :d AND thread_id = :t AND sequence <= :e "
                                "ORDER BY sequence"
                            ),
                            {"d": conv.dataset, "t": r["thread_id"], "e": r["end_sequence"]},
                        )
                        .mappings()
                        .all()
                    ),
                    "messages",
                )
                documents.append(
                    "\n".join(
                        recall_index.indexed_text(m["content"], m["metadata"]) for m in messages
                    )
                )
            documents.append(query)
            started = time.perf_counter()
            if not sessions:
                documents = []
            embedder.embed_spans(  # type: ignore[attr-defined]
                [
                    SpanDocument(d, tuple((m.start(), m.end()) for m in words.finditer(d)))
                    for d in documents
                ]
            )
            if sessions:
                samples["li"].append((time.perf_counter() - started) * 1000)
            for top in (10, 3):  # the nearest chunks of the top k, each read alone
                texts = []
                for r in answer.rows[:top]:
                    t = near[(conv.dataset, labels[r["thread_id"]])]
                    picked = np.argsort(-(t["vectors"] @ vector))[:NEAREST_CHUNKS]
                    texts += [t["chunks"][i] for i in picked]
                texts.append(query)
                started = time.perf_counter()
                embedder.embed_spans(  # type: ignore[attr-defined]
                    [
                        SpanDocument(d, tuple((m.start(), m.end()) for m in words.finditer(d)))
                        for d in texts
                    ]
                )
                samples[f"li-nearest-top{top}"].append((time.perf_counter() - started) * 1000)
    engine.dispose()
    lines = []
    base = sorted(samples["recall"])
    for name, values in samples.items():
        if not values:
            continue
        v = sorted(values)
        p50, p99 = v[len(v) // 2], v[int(len(v) * 0.99)]
        lines.append(
            f"{name}: p50 {p50:.1f} ms, p99 {p99:.1f} ms ({len(v)} questions); "
            f"{p50 / base[len(base) // 2]:.2f}x Recall's p50"
        )
    return "\n".join(lines)


def _reader_features(path: Path, base: Path, refresh: bool, compute: Any, label: str) -> list[dict]:
    """A second reader's features over the default run's candidates (``base``, the
    ``--options default`` cache), computed on the lab database once and kept at ``path``
    (again with ``refresh``); prints the load average before they are scored."""
    if refresh or not path.exists():
        if not base.exists():
            sys.exit(f"{base} is missing: run --options default first")
        with ExitStack() as stack:
            url = _database(data_dir=path.parent, stack=stack)
            started = time.monotonic()
            got = compute(url, json.loads(base.read_text()))
            log(f"{label} over {len(got)} questions in {time.monotonic() - started:.1f}s")
        path.write_text(json.dumps(got))
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return json.loads(path.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default="/tmp/episodic-recall-lab")
    parser.add_argument("--fit", action="store_true", help="fit the relevance curve (dev half)")
    parser.add_argument("--refresh", action="store_true", help="recompute the features")
    parser.add_argument(
        "--confirm", action="store_true", help="measure the recommended threshold over gRPC"
    )
    parser.add_argument(
        "--confirm-at",
        type=float,
        default=None,
        help="with --confirm: this min_relevance instead of the recommended one",
    )
    parser.add_argument(
        "--confirm-abstain",
        action="store_true",
        help="with --confirm: ask with abstain (the service's thresholds for its model)",
    )
    parser.add_argument(
        "--options",
        default="",
        help="comma-separated ranking switches to score, each alone (features recomputed "
        f"once per switch into features-NAME.json): {', '.join(ranking_variants())}",
    )
    parser.add_argument(
        "--reindex",
        action="store_true",
        help="rebuild the recall index of --data-dir (a copy!) with --chunk-messages / "
        "--head-entities first",
    )
    parser.add_argument(
        "--chunk-messages", type=int, default=0, help="messages per chunk (recall_index)"
    )
    parser.add_argument(
        "--head-entities", action="store_true", help="entities in the document's head"
    )
    parser.add_argument(
        "--no-chunk-overlap",
        action="store_true",
        help="chunks that do not overlap (recall_index.CHUNK_OVERLAP off)",
    )
    parser.add_argument(
        "--pooled-summary-vector",
        action="store_true",
        help="each episode's vector the mean of its quoted sentences' vectors "
        "(extractive.POOL_SUMMARY_VECTOR)",
    )
    parser.add_argument(
        "--resummarise",
        choices=["model", "lexical"],
        default="",
        help="with --reindex: every episode summarised again first, its sentences compared "
        "by the model or by TF-IDF (EPISODIC_SUMMARY_SENTENCE_VECTORS), with this "
        "environment's embedder",
    )
    parser.add_argument(
        "--late-chunks",
        default="",
        metavar="WINDOW[/OVERLAP]",
        help="with --reindex: every chunk's vector by late chunking (EPISODIC_CHUNK_VECTORS="
        "late), the model reading each episode's new messages in windows of WINDOW word "
        "pieces overlapping by OVERLAP (MiniLMEmbedder's default 32), e.g. 256 or 128/16",
    )
    parser.add_argument(
        "--late-summary-vector",
        action="store_true",
        help="with --reindex: each episode's vector pooled from a late read of its window "
        "(the sentences its summary and key learnings quote)",
    )
    parser.add_argument(
        "--reembed",
        action="store_true",
        help="re-embed every chunk and episode vector with this environment's embedder "
        "(e.g. EPISODIC_EMBEDDING_COMPUTE=float or int8)",
    )
    parser.add_argument(
        "--embed-entities",
        action="store_true",
        help="entities in the text of the episode's embedding (summariser pipeline)",
    )
    parser.add_argument(
        "--fit-ranker",
        action="store_true",
        help="fit the learned fusion's weights (recall_queries.LEARNED_WEIGHTS), its "
        "temperature and recency_span on the dev half, from features-off.json",
    )
    parser.add_argument(
        "--fit-extras",
        default="",
        help="NAME: fit the learned fusion with each optional signal of the features in "
        "features-NAME.json (a run of --options NAME with the seed's recency, e.g. "
        "off+signals) alone and together, on the dev half; print both halves",
    )
    parser.add_argument(
        "--speaker-words",
        action="store_true",
        help="with --reindex: the documents also hold their speakers' words "
        "(recall_index.SPEAKER_WORDS), which RankingOptions.speaker reads",
    )
    parser.add_argument(
        "--fit-rerank",
        default="",
        help="NAME: fit the second look at the top candidates (RankingOptions.rerank_top) "
        "with the proximity and speaker signals of features-NAME.json (a run of --options "
        "default+signals) on the dev half; print both halves",
    )
    parser.add_argument(
        "--latency",
        default="",
        help="comma-separated switches to time in-process, interleaved (the first is the "
        "baseline of the ratios), e.g. off,default",
    )
    parser.add_argument(
        "--bm25",
        default="",
        help="K1,B: score --options / --fit-ranker with these BM25 constants instead of "
        "recall_queries' (the features go to features-NAME-bm25-K1-B.json)",
    )
    parser.add_argument(
        "--expansion",
        default="",
        help="WEIGHT,TERMS: score --options with these RM3 constants instead of "
        "recall_queries.EXPANSION_WEIGHT / EXPANSION_TERMS (features-NAME-rm3-W-T.json)",
    )
    parser.add_argument(
        "--bm25-passage",
        default="",
        help="K1,B: BM25 constants for passages only (recall_queries.PASSAGE_BM25; "
        "features-NAME-pbm25-K1-B.json)",
    )
    parser.add_argument(
        "--local-rerank",
        action="store_true",
        help="score Recall's top 10 with the packaged local reranker (bench/quality/packaged_reranker.py; pip install nanoranker==1.2 first) "
        "read four ways (features-xenc.json, from features-default.json) and print every "
        "input, depth and mix on both halves, the mix chosen on the dev half",
    )
    parser.add_argument(
        "--late-interaction",
        action="store_true",
        help="score Recall's top 10 by the question's words' best in-context cosines with "
        "each session's words (features-li.json, from features-default.json)",
    )
    parser.add_argument(
        "--stored-word-forms",
        action="store_true",
        help="only the forms stored word vectors could take, as second-look signals, without "
        "the query-time chunk reading (features-li-forms.json)",
    )
    parser.add_argument(
        "--rerank-latency",
        action="store_true",
        help="time in the same run: in-process Recall top 10, the packaged reranker over its "
        "top 5, and the late interaction's word vectors for its top 10 (every 5th question)",
    )
    parser.add_argument(
        "--latency-every", type=int, default=5, help="--rerank-latency: every N-th question"
    )
    parser.add_argument(
        "--latency-without-sessions",
        action="store_true",
        help="--rerank-latency: skip the whole sessions' word vectors (seconds per question)",
    )
    args = parser.parse_args(argv)
    if args.speaker_words:
        from episodic.store import lexical_document

        lexical_document.SPEAKER_WORDS = True  # read there (recall_index re-exports it)
    suffix = ""
    # The constants are patched in the modules whose statement builders read them.
    if args.bm25_passage:
        from episodic.store import lexical_statistics

        pk1, pb = (float(v) for v in args.bm25_passage.split(","))
        lexical_statistics.PASSAGE_BM25 = (pk1, pb)
        suffix += f"-pbm25-{pk1:g}-{pb:g}"
    if args.expansion:
        from episodic.store import query_terms

        w, terms = args.expansion.split(",")
        query_terms.EXPANSION_WEIGHT, query_terms.EXPANSION_TERMS = float(w), int(terms)
        suffix += f"-rm3-{float(w):g}-{int(terms)}"
    if args.bm25:  # before any statement is built (they are cached with the constants)
        from episodic.store import lexical_statistics, ranking_options

        k1, b = (float(v) for v in args.bm25.split(","))
        # the episodes' BM25 (lexical_statistics.bm25), and the events' (store/events.py,
        # imported later, takes them from ranking_options)
        for module in (lexical_statistics, ranking_options):
            module.BM25_K1, module.BM25_B = k1, b
        suffix += f"-bm25-{k1:g}-{b:g}"
    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    _keep_keyring(data_dir)
    conversations = locomo.load()
    split = locomo.halves(conversations)
    cache = data_dir / "features.json"
    if args.reindex:
        with ExitStack() as stack:
            url = _database(data_dir, stack)
            started = time.monotonic()
            done = _reindex(
                url,
                args.chunk_messages or None,
                args.head_entities,
                args.embed_entities,
                chunk_overlap=not args.no_chunk_overlap,
                reembed=args.reembed,
                pooled_summary_vector=args.pooled_summary_vector,
                resummarise=args.resummarise,
                late_chunks=args.late_chunks,
                late_summary_vector=args.late_summary_vector,
            )
            log(f"re-indexed {done} episodes in {time.monotonic() - started:.1f}s")
        for old in data_dir.glob("features*.json"):
            old.unlink()
    if args.refresh or not cache.exists():
        with ExitStack() as stack:
            url = _database(data_dir, stack)
            import psycopg

            with psycopg.connect(url) as conn:
                threads, done = conn.execute(
                    "SELECT (SELECT count(*) FROM threads), "
                    "(SELECT count(*) FROM episodes WHERE status = 'completed')"
                ).fetchone()
            if done < sum(len(c.sessions) for c in conversations):
                _build(url, conversations, ingest=not threads)
            started = time.monotonic()
            rows = _features(url, conversations, locomo.adversarial_questions())
            log(f"features of {len(rows)} recalls in {time.monotonic() - started:.1f}s")
        cache.write_text(json.dumps(rows))
    if args.latency:
        with ExitStack() as stack:
            url = _database(data_dir, stack)
            print(f"load average before {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
            print(latency(url, conversations, [n.strip() for n in args.latency.split(",")]))
            print(f"load average after {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return 0
    if args.rerank_latency:
        with ExitStack() as stack:
            url = _database(data_dir, stack)
            print(f"load average before {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
            print(
                rerank_latency(
                    url, conversations, args.latency_every, not args.latency_without_sessions
                )
            )
            print(f"load average after {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return 0
    if args.stored_word_forms:
        rows = _reader_features(
            data_dir / f"features-li-forms{suffix}.json",
            data_dir / f"features-default{suffix}.json",
            args.refresh,
            lambda url, base: late_interaction_features(
                url, conversations, base, read_chunks=False
            ),
            "stored word forms",
        )
        print(choose_second_look(rows, split, "xenc_late-interaction"))
        for form in (
            "li-int8",
            "li-distinct",
            *(f"li-p{dims}-distinct" for dims in PROJECTIONS),
            "li-p128-all",
            "li-near1",
            "li-near1-p64",
            f"li-near{NEAREST_CHUNKS}",
            f"li-near{NEAREST_CHUNKS}-p64",
        ):
            print(f"stored word vectors as {form}:")
            print(choose_second_look(rows, split, f"xenc_{form}"))
        return 0
    if args.late_interaction:
        rows = _reader_features(
            data_dir / f"features-li{suffix}.json",
            data_dir / f"features-default{suffix}.json",
            args.refresh,
            lambda url, base: late_interaction_features(url, conversations, base),
            "late interaction",
        )
        print(choose_mix(rows, split, "late-interaction"))
        print(choose_second_look(rows, split, "xenc_late-interaction"))
        print(choose_mix(rows, split, "word-chunk"))
        print(choose_second_look(rows, split, "xenc_word-chunk"))
        print(choose_second_look(rows, split, ""))
        print(choose_mix(rows, split, "nearest-chunks"))
        print(choose_second_look(rows, split, "xenc_nearest-chunks"))
        for form in (
            "li-int8",
            "li-sign",
            "li-sign-raw",
            "li-distinct",
            "li-sign-distinct",
            "nearest-chunks-int8",
            "nearest-chunks-p128",
            "nearest-chunks-p64",
        ):
            print(f"stored word vectors as {form}:")
            print(choose_second_look(rows, split, f"xenc_{form}"))
        return 0
    if args.local_rerank:
        rows = _reader_features(
            data_dir / f"features-xenc{suffix}.json",
            data_dir / f"features-default{suffix}.json",
            args.refresh,
            lambda url, base: local_rerank_features(url, conversations, base),
            "local reranker",
        )
        print(choose_local_rerank(rows, split))
        return 0
    if args.fit_rerank:
        rows = json.loads((data_dir / f"features-{args.fit_rerank}{suffix}.json").read_text())
        print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(choose_rerank(rows, split))
        return 0
    if args.fit_extras:
        rows = json.loads((data_dir / f"features-{args.fit_extras}{suffix}.json").read_text())
        print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(choose_extras(rows, split))
        print("\nthe same with recency from the time a question names (the third pass's default):")
        print(choose_extras(rows, split, named_time_windows(conversations)))
        return 0
    if args.fit_ranker:
        off = data_dir / f"features-off{suffix}.json"
        if not off.exists():
            sys.exit(f"{off} is missing: run --options off first")
        rows = json.loads(off.read_text())
        print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(choose_ranker(rows, split))
        print(score_variants(rows, split, {**VARIANTS, **learned_variants(rows, split)}))
        return 0
    if args.options:
        chosen = [n.strip() for n in args.options.split(",") if n.strip()]
        known = ranking_variants()
        caches = {name: data_dir / f"features-{name}{suffix}.json" for name in chosen}
        missing = [n for n, path in caches.items() if args.refresh or not path.exists()]
        if missing:
            with ExitStack() as stack:  # one server for every switch
                url = _database(data_dir, stack)
                for name in missing:
                    started = time.monotonic()
                    got = _features(url, conversations, locomo.adversarial_questions(), known[name])
                    log(f"{name}: {len(got)} recalls in {time.monotonic() - started:.1f}s")
                    caches[name].write_text(json.dumps(got))
        print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(score_options(caches, split))
        return 0
    rows = with_best(json.loads(cache.read_text()))
    from episodic.store import relevance as relmod

    curve = relmod.curve_for(f"{os.environ.get('EPISODIC_EMBEDDING_PROVIDER', 'minilm')}:")
    coef: tuple[float, list[float]] = (
        curve.intercept,
        [*curve.coefficients, *curve.best_coefficients],
    )
    if args.fit:
        coef = fit(rows, split["dev"])
        print(
            f"fitted on dev: INTERCEPT = {coef[0]:.3f}, "
            f"COEFFICIENTS = {tuple(round(b, 3) for b in coef[1])}"
        )

    def rel(c: dict) -> float:
        z = coef[0] + sum(b * v for b, v in zip(coef[1], _x(c), strict=True))
        return 1 / (1 + math.exp(-max(min(z, 50), -50)))

    for r in rows:  # the curve in use (fitted or the code's), for the variants that use it
        for c in r["candidates"]:
            c["absolute_relevance"] = rel(c)
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    # the variants recompute recency from the seed's 1 / (1 + days): they are scored on
    # features-off.json by --fit-ranker; here only Recall's own order
    print(score_variants(rows, split, {"Recall's default": rank_default}))
    ms = sorted(r["ms"] for r in rows if r["kind"] == "own")
    print(
        f"in-process recall (all candidates): p50 {ms[len(ms) // 2]:.1f} ms, "
        f"p99 {ms[int(len(ms) * 0.99)]:.1f} ms"
    )
    named = named_time_windows(conversations)
    for t in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
        print(f"-- min_relevance {t}\n{abstention(rows, split, t, rel, named_times=named)}")
    # The request-level gate (relevance.MatchCurve): the code's unless --fit.
    match_coef = (
        fit_match(rows, split["dev"])
        if args.fit or curve.match is None
        else (curve.match.intercept, list(curve.match.coefficients))
    )
    print(
        f"match curve{' fitted on dev' if args.fit else ''}: INTERCEPT = {match_coef[0]:.3f}, "
        f"COEFFICIENTS = {tuple(round(b, 3) for b in match_coef[1])}"
    )

    def match(best: list[float]) -> float:
        z = match_coef[0] + sum(b * v for b, v in zip(match_coef[1], best, strict=True))
        return 1 / (1 + math.exp(-max(min(z, 50), -50)))

    print(choose_abstention(rows, split, rel, match, named))
    if args.confirm:
        provider = os.environ.get("EPISODIC_EMBEDDING_PROVIDER")
        with ExitStack() as stack:
            confirm(
                _database(data_dir, stack),
                conversations,
                split,
                {"EPISODIC_EMBEDDING_PROVIDER": provider} if provider else None,
                args.confirm_at,
                args.confirm_abstain,
            )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OTEL_TRACES_EXPORTER", "none")
    sys.exit(main())
