"""Erasure: DeleteDataset and DeleteThread leave no trace of what they erase — found by
scanning every column of every table — and leave everything else byte for byte as it was,
while the pipeline runs and other writers keep writing."""

from __future__ import annotations

import statistics
import threading
import time
import uuid

import grpc
import pytest
from sqlalchemy import text

from episodic.sdk.client import EpisodicClient, EpisodicRpcError, NewMessage
from episodic.store import erasure
from episodic.store.vault import DatasetErasing
from episodic.testing.keys import test_vault
from episodic.testing.processes import wait_until
from episodic.testing.scan import find, snapshot

pytestmark = pytest.mark.citus  # erasure runs on Citus too (make test-citus)

A, B, C = "erase_me", "keep_me", "busy_neighbour"
THREADS_A = 12
MESSAGES = 12


def _fill(client: EpisodicClient, dataset: str, threads: int, word: str) -> list[str]:
    """Threads with ``word`` (unique to the dataset) in every message, ended."""
    ids = []
    for t in range(threads):
        thread = client.create_thread(dataset, label=f"{word} label {t}", metadata={"who": word})
        client.add_messages(
            thread.thread_id,
            [
                NewMessage(
                    "user" if i % 2 == 0 else "assistant",
                    f"I prefer {word} number {t}-{i}; remember my {word} plan for Friday.",
                    metadata={"name": f"{word}person"},
                )
                for i in range(MESSAGES)
            ],
        )
        client.end_thread(thread.thread_id)
        ids.append(thread.thread_id)
    return ids


def _settled(client: EpisodicClient, dataset: str, threads: int) -> bool:
    status = client.pipeline_status(dataset, check_providers=False)
    done = status.status_counts.get("completed", 0)
    busy = status.status_counts.get("pending", 0) + status.status_counts.get("processing", 0)
    semantic_busy = status.semantic_status_counts.get(
        "pending", 0
    ) + status.semantic_status_counts.get("processing", 0)
    return done >= threads and not busy and not semantic_busy


def test_erasing_a_dataset_under_load_leaves_no_trace(suite, engine) -> None:  # type: ignore[no-untyped-def]
    # In the clear, so that a surviving row would show its words to the scan; the
    # encrypted case is below.
    client = suite({"EPISODIC_ENCRYPTION": "off", "EPISODIC_ERASURE_BATCH_ROWS": "25"}, loops=True)
    threads_a = _fill(client, A, THREADS_A, "zanzibarite")
    threads_b = _fill(client, B, 3, "quokkaberry")
    wait_until(lambda: _settled(client, A, THREADS_A) and _settled(client, B, 3), timeout=120)
    # Work in flight when the erasure starts: uncaptured messages with timers, and a
    # pending episode the summariser may be holding.
    for thread_id in threads_a[:3]:
        client.add_messages(thread_id, [("user", "one more zanzibarite thought")])
    client.end_thread(threads_a[0])
    busy = client.create_thread(C, label="neighbour")

    with engine.connect() as conn:
        before = snapshot(conn)
        a_messages = conn.execute(
            text(
                "SELECT count(*) FROM messages m JOIN threads t USING (dataset, thread_id) "
                "WHERE t.dataset = :a"
            ),
            {"a": A},
        ).scalar_one()
        a_episodes = [
            str(e)
            for e in conn.execute(
                text("SELECT episode_id FROM episodes WHERE dataset = :a"), {"a": A}
            ).scalars()
        ]
    b_ids = [B, *threads_b]

    # Load: a neighbour keeps writing (its latency is measured), and a racer keeps adding
    # messages to the dataset being erased.
    stop = threading.Event()
    latencies: dict[str, list[float]] = {"before": [], "during": []}
    phase = ["before"]
    neighbour_errors: list[str] = []
    acked_to_a: list[int] = []
    refused_to_a: list[str] = []

    def neighbour() -> None:
        n = 0
        while not stop.is_set():
            started = time.perf_counter()
            try:
                client.add_messages(busy.thread_id, [("user", f"neighbour note {n}")])
            except EpisodicRpcError as err:
                neighbour_errors.append(f"{err.code.name}: {err}")
            latencies[phase[0]].append(time.perf_counter() - started)
            n += 1

    def racer() -> None:
        n = 0
        while not stop.is_set():
            thread_id = threads_a[n % len(threads_a)]
            try:
                client.add_messages(thread_id, [("user", f"late zanzibarite {n}")])
                acked_to_a.append(1)
            except EpisodicRpcError as err:
                refused_to_a.append(err.code.name)
            n += 1

    workers = [threading.Thread(target=neighbour), threading.Thread(target=racer)]
    for w in workers:
        w.start()
    wait_until(lambda: len(latencies["before"]) >= 20, timeout=30)
    phase[0] = "during"
    receipt = client.delete_dataset(A)
    stop.set()
    for w in workers:
        w.join()

    # Every message acknowledged to A, before or during the erasure, was erased (counted);
    # the rest were refused as gone — never left behind.
    assert set(refused_to_a) <= {"NOT_FOUND"}, refused_to_a
    assert receipt.rows_deleted["messages"] == a_messages + len(acked_to_a)
    assert receipt.rows_deleted["threads"] == THREADS_A
    assert receipt.rows_deleted["episodes"] >= THREADS_A
    assert receipt.rows_deleted["message_chunks"] > 0 and receipt.rows_deleted["facts"] > 0
    assert receipt.rows_deleted["datasets"] == 1
    assert not receipt.data_key_destroyed  # stored in the clear: there was no key
    assert receipt.finished_at >= receipt.started_at
    assert len(receipt.digest) == 64 and receipt.dataset == A
    assert not neighbour_errors, neighbour_errors[:3]

    with engine.connect() as conn:
        # Nothing of A anywhere: not its name, ids, or words, in any column of any table.
        hits = find(conn, [A, "zanzibarite", *threads_a, *a_episodes])
        assert not hits, hits
        after = snapshot(conn)
        # The audit log keeps the receipt under a pseudonym.
        kept = conn.execute(
            text("SELECT dataset, details FROM audit_events WHERE action = 'dataset.erase'")
        ).one()
    assert kept[0] == erasure.pseudonym(A)
    assert kept[1]["digest"] == receipt.digest and kept[1]["rows"]["threads"] == THREADS_A
    # B, which nobody touched, is byte for byte what it was.
    for table, rows in before.items():
        b_rows = {r for r in rows if any(i in r for i in b_ids)}
        assert b_rows <= after[table], f"{table}: rows of {B} changed or vanished"
    assert client.get_thread(threads_b[0]).dataset == B

    during, calm = latencies["during"], latencies["before"]
    print(
        f"\nerasure: {sum(receipt.rows_deleted.values())} rows "
        f"({dict(receipt.rows_deleted)}) in "
        f"{(receipt.finished_at - receipt.started_at).total_seconds():.2f} s; "
        f"{len(acked_to_a)} racing messages acknowledged and erased, "
        f"{len(refused_to_a)} refused as gone; neighbour AddMessages p50 "
        f"{statistics.median(calm) * 1000:.1f} ms before, "
        f"{statistics.median(during) * 1000:.1f} ms during (max {max(during) * 1000:.1f} ms, "
        f"{len(during)} calls, 0 errors)"
    )


def test_erasing_an_encrypted_dataset_destroys_its_key(suite, engine) -> None:  # type: ignore[no-untyped-def]
    client = suite()
    thread = client.create_thread("secret_user", label="plans")
    client.add_messages(thread.thread_id, [("user", "my locker code is 4711")])
    with engine.connect() as conn:
        key_row = conn.execute(
            text("SELECT key_id, wrapped_key FROM datasets WHERE dataset = 'secret_user'")
        ).one()
        sealed = conn.execute(
            text("SELECT content FROM messages WHERE thread_id = :t"), {"t": thread.thread_id}
        ).scalar_one()
    assert key_row[0] is not None and bytes(sealed).startswith(b"\x01")
    assert b"4711" not in bytes(sealed)

    receipt = client.delete_dataset("secret_user")
    assert receipt.data_key_destroyed and receipt.rows_deleted["messages"] == 1
    with engine.connect() as conn:
        assert (
            conn.execute(
                text("SELECT count(*) FROM datasets WHERE dataset = 'secret_user'")
            ).scalar_one()
            == 0
        )
    # A copy of the sealed row (a backup) cannot be opened any more: the only wrapping of
    # its data key is gone, and a new dataset of the same name gets another key.
    client.create_thread("secret_user")
    with engine.connect() as conn:
        fresh = test_vault().for_read(conn, "secret_user", fresh=True)
    assert fresh.key_id != str(key_row[0])
    with pytest.raises(Exception):  # noqa: B017 - WrongKey or an authentication failure
        fresh.open(bytes(sealed), "messages.content")


def test_delete_thread_erases_one_thread_only(suite, engine) -> None:  # type: ignore[no-untyped-def]
    client = suite({"EPISODIC_ENCRYPTION": "off"})
    gone = client.create_thread("two_threads", label="walrusian")
    kept = client.create_thread("two_threads", label="kept")
    client.add_messages(gone.thread_id, [("user", "the walrusian secret")] * 3)
    client.add_messages(kept.thread_id, [("user", "an ordinary note")])
    client.end_thread(gone.thread_id)
    client.process_pending()
    with engine.connect() as conn:
        before = snapshot(conn)
    receipt = client.delete_thread(gone.thread_id)
    assert receipt.scope == "thread" and receipt.thread_id == gone.thread_id
    assert receipt.rows_deleted["messages"] == 3 and receipt.rows_deleted["threads"] == 1
    assert receipt.rows_deleted["episodes"] == 1
    with engine.connect() as conn:
        assert not find(conn, [gone.thread_id, "walrusian"])
        after = snapshot(conn)
    for table, rows in before.items():
        mine = {r for r in rows if kept.thread_id in r}
        assert mine <= after[table], table
    with pytest.raises(EpisodicRpcError) as err:
        client.get_thread(gone.thread_id)
    assert err.value.code == grpc.StatusCode.NOT_FOUND
    # The dataset lives on.
    assert client.get_thread(kept.thread_id).dataset == "two_threads"


def test_erasure_errors_are_clear(suite) -> None:  # type: ignore[no-untyped-def]
    client = suite()
    with pytest.raises(EpisodicRpcError) as err:
        client.delete_dataset("never_written")
    assert err.value.code == grpc.StatusCode.NOT_FOUND and "holds nothing" in err.value.message
    with pytest.raises(EpisodicRpcError) as err:
        client.delete_dataset("")
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(EpisodicRpcError) as err:
        client.delete_thread("not-a-uuid")
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(EpisodicRpcError) as err:
        client.delete_thread(str(uuid.uuid4()))
    assert err.value.code == grpc.StatusCode.NOT_FOUND


def test_no_thread_is_created_in_a_dataset_being_erased(engine) -> None:  # type: ignore[no-untyped-def]
    vault = test_vault()
    with engine.begin() as conn:
        vault.for_write(conn, "closing")
        conn.execute(text("UPDATE datasets SET erasing_since = now() WHERE dataset = 'closing'"))
    with engine.begin() as conn, pytest.raises(DatasetErasing) as err:
        vault.for_write(conn, "closing")
    assert err.value.reason == "DATASET_ERASING"


def test_a_summariser_finishing_an_erased_thread_writes_nothing(engine) -> None:  # type: ignore[no-untyped-def]
    from tests.summariser.helpers import CAR_CHAT, add, make_pipeline, make_thread, open_episode

    thread = make_thread(engine, dataset="racy")
    add(engine, thread, CAR_CHAT)
    open_episode(engine, thread)
    pipeline = make_pipeline(engine)
    from episodic.store import episodes

    with engine.begin() as conn:
        [claimed] = episodes.claim_pending(conn, pipeline.worker, 1)
    erasure.erase_thread(engine, thread, dataset="racy", actor="test")
    assert pipeline.process(claimed) is None  # the claim is gone with the episode
    with engine.connect() as conn:
        for table in ("threads", "messages", "episodes", "message_chunks", "facts"):
            left = conn.execute(
                text(f"SELECT count(*) FROM {table} WHERE thread_id = :t"), {"t": thread}
            ).scalar_one()
            assert left == 0, table


def test_an_interrupted_erasure_is_finished_by_the_lifecycle_sweep(suite, engine) -> None:  # type: ignore[no-untyped-def]
    client = suite()
    thread = client.create_thread("half_gone")
    client.add_messages(thread.thread_id, [("user", "hello")])
    with engine.begin() as conn:  # as if an eraser had marked it and then crashed
        conn.execute(
            text(
                "UPDATE datasets SET erasing_since = now() - interval '1 hour', "
                "updated_at = now() - interval '1 hour' WHERE dataset = 'half_gone'"
            )
        )
    with pytest.raises(EpisodicRpcError) as err:
        client.create_thread("half_gone")
    assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert err.value.reason == "DATASET_ERASING"
    client.run_sweep()
    with engine.connect() as conn:
        assert not find(conn, ["half_gone", thread.thread_id])
        event = conn.execute(
            text("SELECT key_prefix FROM audit_events WHERE action = 'dataset.erase'")
        ).scalar_one()
    assert event.startswith("scheduler:")
    assert client.pipeline_status(check_providers=False).lifecycle.erasures_resumed == 1


def test_an_erase_longer_than_the_idle_transaction_timeout_returns_its_receipt(db_url) -> None:  # type: ignore[no-untyped-def]
    """The erase's lock is held on a connection of its own, idle while the erase runs on
    others. It was idle inside a transaction: after EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT
    (60 s) PostgreSQL ended its session, the lock went with it, and the unlock's error
    replaced the receipt of an erase that had finished (UNAVAILABLE for every erase of a
    large dataset)."""
    from episodic.store.db import make_engine

    quick = make_engine(
        db_url, pool_size=3, session_settings={"idle_in_transaction_session_timeout": "300ms"}
    )
    try:
        vault = test_vault()
        with quick.begin() as conn:
            vault.for_write(conn, "slow_erase")
            for _ in range(3):
                conn.execute(
                    text(
                        "INSERT INTO threads (thread_id, dataset, label) "
                        "VALUES (:t, 'slow_erase', '')"
                    ),
                    {"t": uuid.uuid4()},
                )

        def slow(receipt: erasure.Receipt) -> None:  # an erase that outlasts the timeout
            with quick.connect() as conn:
                conn.execute(text("SELECT pg_sleep(0.8)"))

        receipt = erasure.erase_dataset(quick, "slow_erase", actor="test", progress=slow)
        assert receipt.finished_at is not None and receipt.rows["threads"] == 3
        with quick.connect() as conn:  # and the lock is free for the next eraser
            key = erasure._advisory_key("slow_erase")
            assert conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar()
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
    finally:
        quick.dispose()
