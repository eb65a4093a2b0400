"""The store's embedding space: the model that made its vectors is recorded, a process of
another model cannot use it (starting, writing, answering), and ``episodic reindex
--reembed`` moves the store to another model — every vector exactly as the Summariser
would have written it, resumably, behind a fence that keeps the old model's writers out."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime

import grpc
import numpy as np
import pytest
from sqlalchemy import Engine, text

from episodic import access
from episodic.errors import SchemaMismatch
from episodic.providers import HashingEmbedder, MiniLMEmbedder
from episodic.services.summariser.pipeline import embedding_text
from episodic.services.summariser.reembed import begin, reembed
from episodic.services.summariser.servicer import SummariserServicer
from episodic.services.summariser.worker import Worker
from episodic.store import embedding_space
from episodic.store.embedding_space import SPACE_LOCK
from episodic.store.events import NewEvent, embed_pending, event_document, record_event
from episodic.store.recall_index import chunk_document, chunk_texts, indexed_text
from episodic.testing.keys import test_vault
from episodic.testing.processes import wait_until
from episodic.v1 import recall_service_pb2 as pb
from episodic.v1 import recall_service_pb2_grpc as pb_grpc
from episodic.v1 import summariser_service_pb2 as spb
from tests.recall.factory import make_episode
from tests.summariser.helpers import CAR_CHAT, add, make_pipeline, make_thread, open_episode

HASHING = HashingEmbedder(384)
LATER = [
    ("user", "Can we also look at insurance for the Corolla? Something under $100 a month."),
    ("assistant", "Sure: the quotes I found are $85 and $92 a month with a $500 deductible."),
]


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def _space(engine: Engine) -> embedding_space.Space:
    with engine.connect() as conn:
        space = embedding_space.read(conn)
    assert space is not None
    return space


def _summarised_thread(engine: Engine, dataset: str) -> uuid.UUID:
    """A thread with two episodes (the first archived) summarised by a Summariser of the
    hashing model, their chunks indexed, and an event recorded and embedded."""
    thread_id = make_thread(engine, dataset)
    pipeline = make_pipeline(engine)
    for turns in (CAR_CHAT, LATER):
        add(engine, thread_id, turns)
        open_episode(engine, thread_id)
        pipeline.run_once(10, yield_chunks=False)
    with engine.begin() as conn:
        record_event(
            conn,
            test_vault(),
            NewEvent(
                dataset=dataset,
                actor="user",
                event_type="decision",
                summary="Chose the Toyota Corolla Hybrid",
                entities=("Toyota Corolla Hybrid",),
                occurred_at=datetime.now(UTC),
                thread_id=thread_id,
            ),
        )
    assert embed_pending(engine, test_vault(), HASHING) == 1
    return thread_id


def _vectors(engine: Engine, sql: str, **params: object) -> list[tuple]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(sql), params)]


def _array(v: object) -> np.ndarray:
    return np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, np.float32)


def _close(a: object, b: object) -> bool:
    return bool(np.allclose(_array(a), _array(b), atol=1e-5))


def test_the_first_model_to_start_is_recorded_and_another_is_refused(engine) -> None:  # type: ignore[no-untyped-def]
    first = embedding_space.check_start(engine, "minilm:all-MiniLM-L6-v2-int8", 384, who="Recall")
    assert (first.model, first.dimension, first.reembedding_to) == (
        "minilm:all-MiniLM-L6-v2-int8",
        384,
        None,
    )
    assert embedding_space.check_start(engine, first.model, 384, who="Summariser") == first
    with pytest.raises(SchemaMismatch) as refused:
        embedding_space.check_start(engine, "e5:multilingual-e5-small-q4", 384, who="Recall")
    message = refused.value.message
    assert "minilm:all-MiniLM-L6-v2-int8" in message and "e5:multilingual-e5-small-q4" in message
    assert "episodic reindex --reembed" in message
    assert refused.value.reason == "EMBEDDING_MODEL_MISMATCH"
    assert _space(engine) == first  # the refused model recorded nothing


def test_reembed_rewrites_every_vector_as_the_summariser_would(engine, minilm) -> None:  # type: ignore[no-untyped-def]
    vault = test_vault()
    embedding_space.check_start(engine, HASHING.name, 384, who="Summariser")
    threads = [_summarised_thread(engine, "user_a"), _summarised_thread(engine, "user_b")]
    lexical_before = _vectors(
        engine, "SELECT episode_id, search_vector::text FROM episodes ORDER BY episode_id"
    )
    chunks_before = _vectors(
        engine,
        "SELECT thread_id, start_sequence, start_offset FROM message_chunks ORDER BY 1, 2, 3",
    )
    assert len(chunks_before) > 2

    said: list[str] = []
    done = reembed(engine, minilm, vault, progress=said.append)

    assert (done.model, done.previous, done.resumed) == (minilm.name, HASHING.name, False)
    assert said[-2].startswith(f"2 of 2 thread(s): 4 episode and {len(chunks_before)} chunk")
    assert said[-1] == "2 event vector(s)"
    assert (done.threads, done.episodes, done.chunks, done.events) == (
        2,
        4,
        len(chunks_before),
        2,
    )
    space = _space(engine)
    assert (space.model, space.reembedding_to, space.reembed_started_at) == (
        minilm.name,
        None,
        None,
    )
    with engine.connect() as conn:
        episodes = (
            conn.execute(
                text(
                    "SELECT dataset, status, summary, key_learnings, entities, embedding "
                    "FROM episodes"
                )
            )
            .mappings()
            .all()
        )
        assert sorted(e["status"] for e in episodes) == ["archived"] * 2 + ["completed"] * 2
        for e in episodes:
            opened = vault.open_one(conn, e, "episodes")
            expected = minilm.embed(
                [
                    embedding_text(
                        opened["summary"], opened["key_learnings"] or [], opened["entities"] or []
                    )
                ]
            )[0]
            assert _close(e["embedding"], expected)
        for thread_id in threads:
            dataset = conn.execute(
                text("SELECT dataset FROM threads WHERE thread_id = :t"), {"t": thread_id}
            ).scalar_one()
            rows = (
                conn.execute(
                    text(
                        "SELECT sequence, content, metadata FROM messages WHERE thread_id = :t "
                        "ORDER BY sequence"
                    ),
                    {"t": thread_id},
                )
                .mappings()
                .all()
            )
            messages = [
                (m["sequence"], indexed_text(m["content"], m["metadata"]))
                for m in vault.open_rows(conn, dataset, list(rows), "messages")
            ]
            chunks = conn.execute(
                text(
                    "SELECT start_sequence, start_offset, embedding FROM message_chunks "
                    "WHERE thread_id = :t"
                ),
                {"t": thread_id},
            ).all()
            texts = chunk_texts(messages, [(c[0], c[1]) for c in chunks])
            for start_sequence, start_offset, vector in chunks:
                expected = minilm.embed([texts[(start_sequence, start_offset)]])[0]
                assert _close(vector, expected)
        events = (
            conn.execute(
                text("SELECT dataset, summary, actor, entities, event_type, embedding FROM events")
            )
            .mappings()
            .all()
        )
        for ev in events:
            opened = vault.open_one(conn, ev, "events")
            assert _close(ev["embedding"], minilm.embed([event_document(opened)])[0])
        epochs = conn.execute(text("SELECT DISTINCT embedding_epoch FROM threads")).scalars()
        assert list(epochs) == [space.epoch]
    # Only the vectors changed: the chunks are the same rows, the lexical index the same.
    assert (
        _vectors(
            engine,
            "SELECT thread_id, start_sequence, start_offset FROM message_chunks ORDER BY 1, 2, 3",
        )
        == chunks_before
    )
    assert (
        _vectors(engine, "SELECT episode_id, search_vector::text FROM episodes ORDER BY episode_id")
        == lexical_before
    )


def test_late_chunk_vectors_are_read_again_per_window(engine, minilm) -> None:  # type: ignore[no-untyped-def]
    vault = test_vault()
    with engine.begin() as conn:
        made = make_episode(conn, "user_late", [c for _, c in CAR_CHAT], embedder=HASHING)
    reembed(engine, minilm, vault, late=True)
    with engine.connect() as conn:
        rows = (
            conn.execute(
                text(
                    "SELECT sequence, content, metadata FROM messages WHERE thread_id = :t "
                    "ORDER BY sequence"
                ),
                {"t": made.thread_id},
            )
            .mappings()
            .all()
        )
        messages = [
            (m["sequence"], indexed_text(m["content"], m["metadata"]))
            for m in vault.open_rows(conn, "user_late", list(rows), "messages")
        ]
        stored = {
            (r[0], r[1]): r[2]
            for r in conn.execute(
                text(
                    "SELECT start_sequence, start_offset, embedding FROM message_chunks "
                    "WHERE thread_id = :t"
                ),
                {"t": made.thread_id},
            )
        }
    chunks, document = chunk_document(messages)
    late = minilm.embed_spans([document])[0]
    assert {(c.start_sequence, c.start_offset) for c in chunks} == set(stored)
    for chunk, vector in zip(chunks, late, strict=True):
        assert _close(stored[(chunk.start_sequence, chunk.start_offset)], vector)
    # Read in context, not each chunk alone: the two differ.
    alone = minilm.embed([chunks[0].text])[0]
    assert not _close(stored[(chunks[0].start_sequence, chunks[0].start_offset)], alone)


def test_a_stopped_reembed_resumes_and_the_old_models_writers_wait(engine, minilm) -> None:  # type: ignore[no-untyped-def]
    vault = test_vault()
    embedding_space.check_start(engine, HASHING.name, 384, who="Summariser")
    with engine.begin() as conn:
        for i in range(5):
            make_episode(conn, f"user_{i}", [f"message {i} about the car"], embedder=HASHING)
    first = reembed(engine, minilm, vault, stop_after_threads=2)
    assert first.threads == 2
    space = _space(engine)
    assert (space.model, space.reembedding_to) == (HASHING.name, minilm.name)
    # While it runs (or is stopped), only the target model may write vectors; a Recall of
    # either model may start; a third model may not.
    with engine.connect() as conn:
        assert embedding_space.may_write(conn, minilm.name)[0]
        assert not embedding_space.may_write(conn, HASHING.name)[0]
    embedding_space.check_start(engine, HASHING.name, 384, who="Recall")
    embedding_space.check_start(engine, minilm.name, 384, who="Summariser")
    with pytest.raises(SchemaMismatch, match="being re-embedded with"):
        embedding_space.check_start(engine, "openai:other", 384, who="Recall")
    # A Summariser of the old model claims nothing: the due episode waits for the target's.
    thread_id = make_thread(engine, "user_waiting")
    add(engine, thread_id, CAR_CHAT)
    open_episode(engine, thread_id)
    old = make_pipeline(engine)
    assert not old.may_write_vectors()
    assert old.run_once(10, yield_chunks=False).completed == 0
    # ... and `episodic status` says why (the embedder's health).
    health = SummariserServicer(engine, old, old.summariser, HASHING).CheckProviders(
        spb.CheckProvidersRequest(), None
    )
    assert not health.embedder.ok and "summarising paused" in health.embedder.error
    assert "being re-embedded with" in health.embedder.error
    assert make_pipeline(engine, embedder=minilm).run_once(10, yield_chunks=False).completed == 1

    second = reembed(engine, minilm, vault)
    assert second.resumed
    # The three threads left, and the one the target's Summariser wrote meanwhile (its
    # vectors were minilm's already; re-embedding it again is harmless).
    assert second.threads == 4
    space = _space(engine)
    assert (space.model, space.reembedding_to) == (minilm.name, None)
    assert old.may_write_vectors() is False
    with pytest.raises(SchemaMismatch, match="holds vectors of minilm"):
        embedding_space.check_start(engine, HASHING.name, 384, who="Recall")


def test_a_reembed_waits_for_the_summariser_passes_in_flight(engine) -> None:  # type: ignore[no-untyped-def]
    embedding_space.check_start(engine, HASHING.name, 384, who="Summariser")
    waited = threading.Event()
    began: list[embedding_space.Space] = []
    with engine.connect() as pass_in_flight:
        pass_in_flight.execute(text("SELECT pg_advisory_lock_shared(:k)"), {"k": SPACE_LOCK})
        runner = threading.Thread(
            target=lambda: began.append(begin(engine, "minilm:x", 384, wait=waited.set))
        )
        runner.start()
        assert waited.wait(30), "the re-embedding did not notice the pass in flight"
        # Until the pass ends, the target is not recorded: the pass still writes its own.
        assert _space(engine).reembedding_to is None
        assert runner.is_alive()
        pass_in_flight.execute(text("SELECT pg_advisory_unlock_shared(:k)"), {"k": SPACE_LOCK})
        pass_in_flight.commit()
    runner.join(30)
    assert not runner.is_alive()
    assert began[0].reembedding_to == "minilm:x"
    assert _space(engine).reembedding_to == "minilm:x"


def _fence_holders(engine: Engine) -> int:
    """How many sessions hold the re-embedding's fence shared (Summariser passes)."""
    with engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                    "AND mode = 'ShareLock' AND granted AND classid = CAST(:hi AS oid) "
                    "AND objid = CAST(:lo AS oid) AND objsubid = 1"
                ),
                {"hi": SPACE_LOCK >> 32, "lo": SPACE_LOCK & 0xFFFFFFFF},
            ).scalar_one()
        )


def test_process_pending_runs_its_pass_inside_the_fence(engine) -> None:  # type: ignore[no-untyped-def]
    pipeline = make_pipeline(engine)
    held: list[int] = []
    run_once = pipeline.run_once

    def observed(limit: int, now: datetime | None = None, **kw: bool):  # type: ignore[no-untyped-def]
        held.append(_fence_holders(engine))
        return run_once(limit, now, **kw)

    pipeline.run_once = observed  # type: ignore[method-assign]
    servicer = SummariserServicer(engine, pipeline, pipeline.summariser, HASHING)
    with access.running_as(access.ANONYMOUS):
        servicer.ProcessPending(spb.ProcessPendingRequest(max_episodes=5), None)
    assert held == [1]
    assert _fence_holders(engine) == 0


def test_the_worker_runs_each_pass_inside_the_fence(engine, db_url) -> None:  # type: ignore[no-untyped-def]
    """The worker holds the space's lock shared during each pass (what a re-embedding
    waits for), and not between passes."""
    pipeline = make_pipeline(engine)
    held: list[int] = []
    run_once = pipeline.run_once

    def observed(limit: int, now: datetime | None = None, **kw: bool):  # type: ignore[no-untyped-def]
        held.append(_fence_holders(engine))
        return run_once(limit, now, **kw)

    pipeline.run_once = observed  # type: ignore[method-assign]
    worker = Worker(pipeline, db_url, poll_interval=0.1, batch_size=10)
    worker.start()
    try:
        wait_until(lambda: held, timeout=30)
    finally:
        worker.stop(30)
    assert held[0] == 1
    assert _fence_holders(engine) == 0


def test_a_running_recall_of_the_old_model_stops_answering_after_the_move(  # type: ignore[no-untyped-def]
    engine, spawn, minilm
) -> None:
    recall = spawn("recall")  # the hashing model
    with engine.connect() as conn:  # Recall only reads the space (it may run on a replica)
        assert embedding_space.read(conn) is None
    embedding_space.check_start(engine, HASHING.name, 384, who="Summariser")
    with engine.begin() as conn:
        make_episode(conn, "user_r", ["We agreed on the Pro tier at $29 per seat."])
    request = pb.RecallRequest(
        dataset="user_r", query="pricing", include=[pb.RECALL_INCLUDE_EPISODES]
    )
    with recall.channel() as channel:
        stub = pb_grpc.RecallServiceStub(channel)
        assert len(stub.Recall(request, timeout=30).episodes.episodes) == 1
        reembed(engine, minilm, test_vault())

        def refused() -> grpc.RpcError | None:
            try:
                stub.Recall(request, timeout=30)
            except grpc.RpcError as err:
                return err
            return None

        err = wait_until(refused, timeout=embedding_space.WATCH_INTERVAL * 6)
        assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert minilm.name in err.details() and "restarted" in err.details()
    with pytest.raises(RuntimeError, match="holds vectors of minilm"):
        spawn("recall")
    moved = spawn("recall", {"EPISODIC_EMBEDDING_PROVIDER": "minilm"})
    with moved.channel() as channel:
        found = pb_grpc.RecallServiceStub(channel).Recall(request, timeout=30).episodes.episodes
    assert len(found) == 1


def test_progress_says_the_time_left_at_the_rate_so_far() -> None:
    import time

    from episodic.services.summariser.reembed import _time_left

    now = time.monotonic()
    assert _time_left(now - 10, 1, 7) == ", about 1 min left"  # 60 s at 10 s a thread
    assert _time_left(now - 3600, 1, 4) == ", about 3 h 0 min left"
    assert _time_left(now, 0, 5) == "" and _time_left(now - 1, 5, 5) == ""
