"""The recall lab's latencies, timed in-process in one run: Recall with each ranking switch,
interleaved question by question (``latency``), and what the two second readers (the
packaged reranker, late interaction's word vectors) would add to a Recall call
(``rerank_latency``)."""

from __future__ import annotations

import time

import numpy as np

from bench.harness import locomo
from bench.quality.lab.features import candidate_texts, lab_request
from bench.quality.lab.late_interaction import NEAREST_CHUNKS
from bench.quality.lab.ranking import ranking_variants


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
