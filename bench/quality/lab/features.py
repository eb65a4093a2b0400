"""What the recall lab reads of its kept database: the request it asks for a LoCoMo
question (``lab_request``), every candidate's signals for every question asked of its own,
a foreign and (adversarial) its own dataset (``recall_features``, the rows the lab caches),
and what a reranker can read of each episode (``candidate_texts``)."""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np

from bench.harness import locomo
from bench.harness.report import log
from episodic.store.ranking_options import EXTRA_SIGNALS


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


def recall_features(
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
