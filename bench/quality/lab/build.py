"""The recall lab's kept database built and rebuilt: LoCoMo ingested and summarised once
through the services (``build_database``), and the recall index rebuilt as a variant of
itself on a copy (``reindex``: passages, entities, re-embedding, re-summarising, pooled and
late summary vectors) before ``bench.quality.recall_lab`` scores it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import numpy as np

from bench.harness import locomo
from bench.harness.report import log
from bench.harness.suite import ingest_and_summarise, start_suite


def build_database(
    url: str, conversations: list[locomo.Conversation], *, ingest: bool = True
) -> None:
    """LoCoMo's ``conversations`` ingested and summarised into the database at ``url``
    through the four services, started for it (``ingest`` False: resumes summarising what
    is there, after a sweep)."""
    from episodic.store.db import make_engine

    engine = make_engine(url, pool_size=2)
    with ExitStack() as stack:
        stack.callback(engine.dispose)
        _, client = start_suite(
            stack,
            url,
            {
                "EPISODIC_LOG_LEVEL": "WARNING",
                "EPISODIC_EMBEDDING_PROVIDER": "minilm",
                # a resumed build reclaims what an interrupted one had claimed
                "EPISODIC_ORPHAN_RECLAIM_AFTER": "5",
            },
            start_timeout=180,
            call_timeout=120,
        )
        if not ingest:
            client.run_sweep()
        ingest_and_summarise(client, engine, conversations, ingest=ingest)


def reindex(
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
