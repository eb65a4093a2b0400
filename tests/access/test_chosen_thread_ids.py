"""A thread id a dataset-confined key chooses must be a random UUID (version 4 or 7).

Thread ids are global, so CreateThread with an id that another dataset holds answers
ALREADY_EXISTS where a free id is created (the one difference the existence-oracle test
allows, by design). For a random id that difference tells nothing a caller did not know
already (it must have learned the id to ask). For an id made from names it is an oracle:
uuid5 of a dataset and a session name — what applications derive, and what ``episodic
import`` made before thread keys (``backfill.thread_uuid``, whose namespace is public) —
can be computed by anyone, and the answer told a key of dataset B whether dataset A had
imported or held that session. A confined key now gets INVALID_ARGUMENT for such an id,
the same whether it exists or not, naming ``idempotency_key``, the dataset's own way to
name a thread. A key for every dataset (an operator restoring an export with
``--keep-thread-ids``, or the loopback development mode) may still choose any id: it sees
every dataset anyway."""

from __future__ import annotations

import os
import time
import uuid

import grpc
import pytest

from episodic.access import Role
from episodic.ops.backfill import thread_uuid
from episodic.v1 import ingest_service_pb2 as pb
from episodic.v1 import ingest_service_pb2_grpc as pb_grpc
from tests.access.test_matrix import DATASET_A, DATASET_B, _mint


def _uuid7() -> uuid.UUID:
    """A version 7 UUID (Python 3.12 has no uuid7): 48 bits of Unix milliseconds, then
    random bits."""
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    value = (value & ~(0xF << 76)) | (7 << 76)  # the version
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # the RFC 4122 variant
    return uuid.UUID(int=value)


def test_a_confined_key_may_choose_only_random_thread_ids(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    writer_b = _mint(engine, Role.WRITER, [DATASET_B])
    admin_all = _mint(engine, Role.ADMIN, ["*"])
    ingest = spawn(
        "ingest", env={"EPISODIC_AUTH": "required", "EPISODIC_RATE_LIMIT_UNAUTHENTICATED": "0"}
    )
    channel = ingest.channel()
    stub = pb_grpc.IngestServiceStub(channel)

    def create(key: str, thread_id: object) -> tuple[grpc.StatusCode, str]:
        try:
            stub.CreateThread(
                pb.CreateThreadRequest(dataset=DATASET_B, thread_id=str(thread_id)),
                timeout=30,
                metadata=(("authorization", f"Bearer {key}"),),
            )
        except grpc.RpcError as err:
            return err.code(), (err.details() or "").replace(str(thread_id), "ID")
        return grpc.StatusCode.OK, ""

    # Dataset A imported session "chat-1" before thread keys: its thread has the derived id.
    imported = thread_uuid(DATASET_A, "chat-1")
    made = stub.CreateThread(
        pb.CreateThreadRequest(dataset=DATASET_A, thread_id=imported),
        timeout=30,
        metadata=(("authorization", f"Bearer {admin_all}"),),
    )
    assert made.thread.thread_id == imported

    # B's key asks about it, and about a session A never had: the same refusal, which names
    # the way to name a thread (before: ALREADY_EXISTS for the first, OK for the second).
    held = create(writer_b, imported)
    never = create(writer_b, thread_uuid(DATASET_A, "chat-2"))
    assert held == never
    code, message = held
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "version 4 or 7" in message and "idempotency_key" in message, message
    assert DATASET_A not in message
    # Other guessable kinds: a name-based (version 3) and a time-and-address (version 1) id.
    assert create(writer_b, uuid.uuid3(uuid.NAMESPACE_DNS, "x"))[0] == code
    assert create(writer_b, uuid.uuid1())[0] == code
    # Random ids are taken as before.
    assert create(writer_b, uuid.uuid4()) == (grpc.StatusCode.OK, "")
    assert create(writer_b, _uuid7()) == (grpc.StatusCode.OK, "")
    # A key for every dataset may restore any id.
    assert create(admin_all, thread_uuid(DATASET_B, "restored")) == (grpc.StatusCode.OK, "")
    channel.close()


@pytest.mark.parametrize("version", [4, 7])
def test_the_uuid7_helper_makes_the_version_it_says(version: int) -> None:
    made = _uuid7() if version == 7 else uuid.uuid4()
    assert made.version == version and made.variant == uuid.RFC_4122
