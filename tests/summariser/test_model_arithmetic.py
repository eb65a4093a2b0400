"""The Summariser as a real process with the offline model: EPISODIC_EMBEDDING_COMPUTE
reaches its embedder, and what it stores is what that arithmetic gives."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import text

from episodic.providers.embedding import MiniLMEmbedder
from episodic.store.recall_index import chunk_document
from episodic.v1 import summariser_service_pb2 as pb
from episodic.v1 import summariser_service_pb2_grpc as g
from tests.summariser.helpers import CAR_CHAT, add, make_thread, open_episode


def _stored_chunk_vectors(engine, thread) -> np.ndarray:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT embedding::text FROM message_chunks WHERE dataset = 'user_42' "
                "AND thread_id = :t ORDER BY start_sequence, start_offset"
            ),
            {"t": thread},
        ).scalars()
        return np.array([[float(x) for x in r.strip("[]").split(",")] for r in rows])


@pytest.mark.parametrize("compute", ["int8", "float"])
def test_the_summariser_embeds_with_the_configured_arithmetic(spawn, engine, compute) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT)
    open_episode(engine, thread)
    service = spawn(
        "summariser",
        env={"EPISODIC_EMBEDDING_PROVIDER": "minilm", "EPISODIC_EMBEDDING_COMPUTE": compute},
    )
    done = g.SummariserServiceStub(service.channel()).ProcessPending(
        pb.ProcessPendingRequest(max_episodes=5)
    )
    assert done.completed == 1 and done.failed == 0

    stored = _stored_chunk_vectors(engine, thread)
    # The default chunk vectors: late chunking over the window (EPISODIC_CHUNK_VECTORS).
    chunks, document = chunk_document([(i, c) for i, (_, c) in enumerate(CAR_CHAT, 1)])
    assert stored.shape == (len(chunks), 384)
    (expected,) = MiniLMEmbedder(threads=1, compute=compute).embed_spans([document])
    other = MiniLMEmbedder(threads=1, compute="float" if compute == "int8" else "int8")
    np.testing.assert_allclose(stored, expected, atol=1e-4)
    assert not np.allclose(stored, other.embed_spans([document])[0], atol=1e-3)
