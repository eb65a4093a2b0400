"""No existence oracle: a key confined to one dataset gets, from every RPC that takes an id,
the very answer for an id of another dataset that it gets for an id that never existed.

Thread, episode and event ids are global (id-only RPCs find the dataset by the id), so any
difference — a code, a word of a message — tells a confined key that the id exists
elsewhere. The RPCs are walked from the proto descriptors: every field named ``*_id`` or
``*_ids`` is an id, so a new RPC that takes one is covered the moment it is in a .proto.
The dataset field, where the request has one, names the key's own dataset (B); the ids are
dataset A's, then fresh ones, and the two answers must be the same once each id is replaced
by a placeholder.
"""

from __future__ import annotations

import uuid
from typing import Any

import grpc
from google.protobuf import text_format
from google.protobuf.descriptor import FieldDescriptor, MethodDescriptor
from grpc_status import rpc_status

from episodic import procedural
from episodic.access import Role, rule_of
from tests.access.test_matrix import (
    DATASET_A,
    DATASET_B,
    PROCESS,
    SECRET_A,
    World,
    _request,
    _world,
    all_methods,
)

#: Fields whose names end in ``_id`` but name no stored resource of a dataset.
NOT_IDS = {"tool_call_id"}

#: The one difference by design (docs/guides/security.md, "One dataset never sees another"): thread ids are
#: unique across datasets, so CreateThread with a caller's own id that another dataset holds
#: is ALREADY_EXISTS where a free id is created. The contract tells clients to choose only
#: unguessable ids and to name threads by ``idempotency_key`` instead. Closing it means
#: thread ids scoped by dataset, which every id-only RPC (and the service key's, which
#: covers every dataset) would then have to disambiguate. The answer may say nothing more
#: than that the id is taken: the test checks it names neither A nor what A said. A confined
#: key may choose only random ids (tests/access/test_chosen_thread_ids.py), so it is asked
#: only about ids it knew already; a derived (uuid5) id is refused alike, taken or not.
BY_DESIGN = {
    "episodic.v1.IngestService.CreateThread": ("ALREADY_EXISTS", "thread THREAD already exists")
}


def id_fields(method: MethodDescriptor) -> list[FieldDescriptor]:
    """The request fields of ``method`` that name a stored thing by id."""
    return [
        f
        for f in method.input_type.fields
        if f.type == FieldDescriptor.TYPE_STRING
        and (f.name.endswith("_id") or f.name.endswith("_ids"))
        and f.name not in NOT_IDS
    ]


def methods_taking_ids() -> list[MethodDescriptor]:
    """Every RPC a dataset-confined key may call that takes an id (global RPCs refuse such a
    key outright, whatever the id)."""
    out = []
    for method in all_methods():
        rule = rule_of(method)
        assert rule is not None
        if not rule.global_scope and id_fields(method):
            out.append(method)
    return out


def test_the_walk_finds_the_rpcs_that_take_ids() -> None:
    """A guard on the derivation itself: the known by-id RPCs are all in the walk."""
    names = {m.name for m in methods_taking_ids()}
    assert {
        "CreateThread",
        "AddMessages",
        "GetThread",
        "RecordEvent",
        "RecordOutcome",
        "GetEpisode",
        "ListEpisodes",
        "GetProcedure",
        "DeleteProcedure",
        "DeleteThread",
        "RetryEpisode",
        "RecordActivity",
        "Recall",
    } <= names


def _confined_key(world: World, method: MethodDescriptor) -> str:
    """A key of the role ``method`` needs, confined to dataset B."""
    rule = rule_of(method)
    assert rule is not None
    # The SERVICE RPCs (Scheduler triggers) also admit an admin key on its own datasets.
    role = Role.ADMIN if rule.role is Role.SERVICE else rule.role
    return world.keys[f"{role.label}_b"]


def _ask(
    services: dict[str, Any],
    world: World,
    method: MethodDescriptor,
    ids: dict[str, str],
) -> tuple[str, str]:
    """``method`` with B named as the dataset and ``ids`` (placeholder → id) in its id
    fields; the code and the message with every id put back to its placeholder."""
    request = _request(method, world, thread=ids["THREAD"], episode=ids["EPISODE"])
    for f in method.input_type.fields:
        if f.name == "dataset":
            request.dataset = DATASET_B
    for f in id_fields(method):
        value = {
            "thread_id": ids["THREAD"],
            "thread_ids": ids["THREAD"],
            "episode_id": ids["EPISODE"],
            "procedure_id": ids["PROCEDURE"],
        }[f.name]
        if f.is_repeated:
            getattr(request, f.name).append(value)
        else:
            setattr(request, f.name, value)
    address = services[PROCESS[method.containing_service.full_name]].address
    with grpc.insecure_channel(address) as channel:
        stub = channel.unary_unary(
            f"/{method.containing_service.full_name}/{method.name}",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=lambda b: b,
        )
        key = _confined_key(world, method)
        try:
            stub(request, timeout=30, metadata=(("authorization", f"Bearer {key}"),))
            code, answer = grpc.StatusCode.OK, ""
        except grpc.RpcError as err:
            # The whole google.rpc.Status: its ErrorInfo's metadata must not differ either.
            status = rpc_status.from_call(err)  # type: ignore[arg-type]
            code = err.code()
            answer = err.details() or ""
            if status is not None:
                answer += " | " + text_format.MessageToString(status, as_one_line=True)
    for leak in (SECRET_A, DATASET_A):
        assert leak not in answer, f"{method.full_name} told a key for B about A: {answer!r}"
    for placeholder, value in ids.items():
        answer = answer.replace(value, placeholder)
    return code.name, answer


def test_no_rpc_that_takes_an_id_tells_another_datasets_id_from_a_missing_one(
    spawn, engine
) -> None:  # type: ignore[no-untyped-def]
    world = _world(engine)
    env = {"EPISODIC_AUTH": "required", "EPISODIC_RATE_LIMIT_UNAUTHENTICATED": "0"}
    scheduler = spawn("scheduler", env=env)
    services = {
        "scheduler": scheduler,
        "ingest": spawn(
            "ingest",
            env={
                **env,
                "EPISODIC_SCHEDULER_ADDRESS": scheduler.address,
                "EPISODIC_SERVICE_KEY": world.keys["service"],
            },
        ),
        "summariser": spawn("summariser", env=env),
        "recall": spawn("recall", env=env),
    }
    # Dataset A's ids; an event of A in the episode slot (these RPCs take both); B's own
    # thread beside A's episode or event (RecordOutcome ties an episode to a thread). Each
    # against ids that never existed (B's own thread kept).
    of_a = {"THREAD": world.thread_a, "EPISODE": world.episode_a, "PROCEDURE": world.procedure_a}
    events_of_a = {**of_a, "EPISODE": world.event_a}
    own_thread = [
        {**of_a, "THREAD": world.thread_b},
        {**events_of_a, "THREAD": world.thread_b},
    ]
    problems = []
    walked = 0
    for method in methods_taking_ids():
        names = {f.name for f in id_fields(method)}
        # B's own thread only where it sits beside an episode id (a lone thread id of B's
        # is no question, and DeleteThread would erase it).
        mixed = own_thread if {"thread_id", "episode_id"} <= names else []
        for theirs in (of_a, events_of_a, *mixed):
            ghost = {
                "THREAD": theirs["THREAD"]
                if theirs["THREAD"] == world.thread_b
                else str(uuid.uuid4()),
                "EPISODE": str(uuid.uuid4()),
                # A procedure id as A's are made, of a procedure nobody learned.
                "PROCEDURE": str(procedural.procedure_id(DATASET_A, uuid.uuid4().hex)),
            }
            other = _ask(services, world, method, theirs)
            missing = _ask(services, world, method, ghost)
            walked += 1
            if method.full_name in BY_DESIGN and missing[0] == "OK":
                code, message = BY_DESIGN[method.full_name]
                if other[0] != code or not other[1].startswith(message + " |"):
                    problems.append(f"{method.full_name}: answers {other}, not {message!r}")
            elif other != missing:
                problems.append(
                    f"{method.full_name}: an id of another dataset answers {other}, "
                    f"an id that never existed {missing}"
                )
    assert walked >= 2 * 13 + 2
    assert not problems, "existence leaks:\n" + "\n".join(problems)
