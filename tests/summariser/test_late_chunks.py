"""Late chunking of Recall's chunk index (``EPISODIC_CHUNK_VECTORS=late``): the episode's
new messages read by MiniLM once, each chunk's vector pooled from its tokens; embedders
without token access keep embedding each chunk's text."""

from __future__ import annotations

import uuid

import numpy as np
from sqlalchemy import Engine, text

from episodic.providers.embedding import HashingEmbedder, MiniLMEmbedder
from episodic.providers.extractive import ExtractiveSummariser
from episodic.store.recall_index import chunk_document, indexed_text
from episodic.v1 import summariser_service_pb2 as pb
from episodic.v1 import summariser_service_pb2_grpc as g
from tests.summariser.helpers import CAR_CHAT, add, make_pipeline, make_thread, open_episode

#: Long enough for several overlapping chunks (each message is in two).
LONG_CHAT = CAR_CHAT * 2


def _stored_chunks(engine: Engine, thread_id: uuid.UUID) -> list[tuple[int, int, np.ndarray]]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT start_sequence, end_sequence, embedding FROM message_chunks "
                "WHERE thread_id = :t ORDER BY start_sequence, start_offset"
            ),
            {"t": thread_id},
        )
        return [(r[0], r[1], np.asarray(r[2].to_numpy(), dtype=np.float32)) for r in rows]


def _window() -> list[tuple[int, str]]:
    return [(i, indexed_text(c)) for i, (_, c) in enumerate(LONG_CHAT, start=1)]


def test_late_chunk_vectors_are_pooled_from_one_read_of_the_window(engine) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine, dataset="late-a")
    add(engine, thread, LONG_CHAT)
    open_episode(engine, thread)
    model = MiniLMEmbedder(threads=1)
    pipeline = make_pipeline(
        engine, summariser=ExtractiveSummariser(model), embedder=model, chunk_vectors="late"
    )
    assert pipeline.late_chunks
    assert pipeline.run_once(10).completed == 1

    chunks, document = chunk_document(_window())
    stored = _stored_chunks(engine, thread)
    assert [(s, e) for s, e, _ in stored] == [(c.start_sequence, c.end_sequence) for c in chunks]
    assert len(chunks) > 2
    (late,) = model.embed_spans([document])
    separate = model.embed([c.text for c in chunks])
    for (_, _, vector), want, own in zip(stored, late, separate, strict=True):
        np.testing.assert_allclose(vector, want, atol=1e-5)
        assert float(vector @ own) < 0.9999  # not the chunk's text embedded on its own


def test_an_embedder_without_token_access_embeds_each_chunk_separately(engine) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine, dataset="late-b")
    add(engine, thread, LONG_CHAT)
    open_episode(engine, thread)
    pipeline = make_pipeline(engine, chunk_vectors="late")  # the hashing embedder
    assert not pipeline.late_chunks
    assert pipeline.run_once(10).completed == 1
    chunks, _ = chunk_document(_window())
    want = HashingEmbedder(384).embed([c.text for c in chunks])
    stored = _stored_chunks(engine, thread)
    np.testing.assert_allclose(np.stack([v for _, _, v in stored]), want, atol=1e-5)


def test_the_setting_reaches_the_service(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    """EPISODIC_CHUNK_VECTORS=late in the Summariser process: its chunks carry late vectors."""
    thread = make_thread(engine, dataset="late-c")
    add(engine, thread, LONG_CHAT)
    open_episode(engine, thread)
    service = spawn(
        "summariser",
        env={"EPISODIC_EMBEDDING_PROVIDER": "minilm", "EPISODIC_CHUNK_VECTORS": "late"},
    )
    stub = g.SummariserServiceStub(service.channel())
    done = stub.ProcessPending(pb.ProcessPendingRequest(max_episodes=5), timeout=120)
    assert done.completed == 1
    _, document = chunk_document(_window())
    (late,) = MiniLMEmbedder(threads=1).embed_spans([document])
    stored = _stored_chunks(engine, thread)
    np.testing.assert_allclose(np.stack([v for _, _, v in stored]), late, atol=1e-5)
