"""Every RPC of every service × every kind of caller, generated from the contracts: a new
RPC is in the matrix the moment it is in a .proto, and one that confines callers wrongly
(mem0's delete that wiped every user's memories) cannot land.

Cases: no key, a malformed key, a revoked key, an expired key, a key of the right role for
*another* dataset, a key whose role is too low, and the right key. Expected: UNAUTHENTICATED;
PERMISSION_DENIED for a role too low, a global RPC or a dataset the request names;
NOT_FOUND — word for word the answer for an id that does not exist — for a thread or
episode of another dataset; and the right key is admitted. Nothing any refused call did
may have changed a table, and nothing of the other dataset may appear in any answer.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor import MethodDescriptor
from sqlalchemy import Engine, text

from episodic import procedural
from episodic.access import Role, Rule, rule_of
from episodic.store import entities, erasure, events, keys, procedures
from episodic.testing.keys import test_vault as vault_of_tests
from episodic.v1 import (
    admin_service_pb2,
    episode_pb2,
    ingest_service_pb2,
    recall_service_pb2,
    scheduler_service_pb2,
    summariser_service_pb2,
)
from tests.recall.factory import make_episode

#: The process serving each gRPC service.
PROCESS = {
    "episodic.v1.IngestService": "ingest",
    "episodic.v1.AdminService": "ingest",
    "episodic.v1.SchedulerService": "scheduler",
    "episodic.v1.SummariserService": "summariser",
    "episodic.v1.RecallService": "recall",
}
DATASET_A = "tenant_a/alice"
DATASET_B = "tenant_b/bob"
SECRET_A = "A-ONLY-51c2e8"  # words only dataset A ever said
SECRET_B = "B-ONLY-7f3a9c"  # words only dataset B ever said
# Dataset A's entities: "atlas" is an alias of "project atlas" (SplitEntity splits it off),
# "orion" is merged into "pro tier" (MergeEntities), "project atlas" has a timeline.
ENTITIES_A = ["atlas", "orion", "pro tier", "project atlas"]


def all_methods() -> list[MethodDescriptor]:
    pool = descriptor_pool.Default()
    found = []
    for name in PROCESS:
        found.extend(pool.FindServiceByName(name).methods)
    return found


def test_every_rpc_of_every_proto_is_in_the_matrix() -> None:
    """The services of the contracts are exactly the ones this matrix knows how to start."""
    pool = descriptor_pool.Default()
    declared = {
        service.full_name
        for module in (
            admin_service_pb2,
            ingest_service_pb2,
            recall_service_pb2,
            scheduler_service_pb2,
            summariser_service_pb2,
        )
        for service in module.DESCRIPTOR.services_by_name.values()
    }
    assert declared == set(PROCESS), "add the new service's process to PROCESS"
    for method in all_methods():
        assert rule_of(method) is not None, f"{method.full_name} declares no access rule"
    assert pool is not None


@dataclass
class World:
    """Dataset A's ids (the target of every call), the keys, and B's ids."""

    thread_a: str
    episode_a: str
    thread_b: str
    episode_b: str
    keys: dict[str, str] = field(default_factory=dict)
    throwaway_keys: list[str] = field(default_factory=list)
    #: An event of A: listed under its id as episodes are, and taken by their by-id RPCs.
    event_a: str = ""
    #: A procedure learned in A (its episode's stretch called a tool and succeeded).
    procedure_a: str = ""


def _mint(engine: Engine, role: Role, datasets: list[str], **kw: Any) -> str:
    with engine.begin() as conn:
        return keys.create_key(conn, role=role, datasets=datasets, **kw).secret


def _learned_procedure(engine: Engine, episode: Any) -> str:
    """A procedure of A, learned from its episode's stretch (as the Summariser would)."""
    step = procedural.Step("cancel_order", "cancel it", True, (("order_id", "user"),))
    candidate = procedural.Candidate(
        episode_id=str(episode.episode_id),
        thread_id=str(episode.thread_id),
        signature=procedural.signature_of([step]),
        goal=f"{SECRET_A}: cancel my order",
        steps=(step,),
    )
    with engine.begin() as conn:
        row = (
            conn.execute(
                text(
                    "SELECT dataset, episode_id, thread_id, start_sequence, end_sequence "
                    "FROM episodes WHERE episode_id = :e"
                ),
                {"e": episode.episode_id},
            )
            .mappings()
            .one()
        )
        vault = vault_of_tests()
        procedures.store_candidate(conn, vault.for_write(conn, DATASET_A), row, candidate, None)
        procedures.record_outcome(
            conn,
            vault,
            dataset=DATASET_A,
            thread_id=episode.thread_id,
            episode_id=None,
            outcome="success",
            score=None,
            note="",
            actor="test",
        )
    return str(procedural.procedure_id(DATASET_A, candidate.signature))


def _world(engine: Engine) -> World:
    with engine.begin() as conn:
        a = make_episode(
            conn,
            DATASET_A,
            [f"{SECRET_A}: we agreed on the Pro tier at $29"],
            entities=ENTITIES_A,
        )
        entities.record_mentions(conn, vault_of_tests().for_write(conn, DATASET_A), ENTITIES_A)
        b = make_episode(conn, DATASET_B, [f"{SECRET_B}: my bank details are private"])
        stored, _ = events.record_event(
            conn,
            vault_of_tests(),
            events.NewEvent(DATASET_A, "agent", "decision", f"{SECRET_A}: Pro tier", (), None),
        )
    world = World(str(a.thread_id), str(a.episode_id), str(b.thread_id), str(b.episode_id))
    world.event_a = str(stored["episode_id"])
    world.procedure_a = _learned_procedure(engine, a)
    for role in (Role.READER, Role.WRITER, Role.ADMIN):
        world.keys[f"{role.label}_a"] = _mint(engine, role, [DATASET_A])
        world.keys[f"{role.label}_b"] = _mint(engine, role, [DATASET_B])
        # A tenant prefix covers every dataset under it.
        world.keys[f"{role.label}_tenant_a"] = _mint(engine, role, ["tenant_a/*"])
    world.keys["admin_all"] = _mint(engine, Role.ADMIN, ["*"])
    world.keys["admin_b_tenant"] = _mint(engine, Role.ADMIN, ["tenant_b/*"])
    world.keys["service"] = _mint(engine, Role.SERVICE, ["*"])
    revoked = _mint(engine, Role.ADMIN, ["*"])
    with engine.begin() as conn:
        keys.revoke_key(conn, revoked)
    world.keys["revoked"] = revoked
    world.keys["expired"] = _mint(
        engine, Role.ADMIN, ["*"], expires_at=datetime.now(UTC) + timedelta(seconds=1)
    )
    world.throwaway_keys = [_mint(engine, Role.READER, [DATASET_A]) for _ in range(3)]
    return world


def _request(method: MethodDescriptor, world: World, *, thread: str, episode: str) -> Any:
    """A valid request of ``method`` about dataset A (or about ``thread``/``episode``),
    filled from the field names of its type. A new RPC with fields this does not know
    gets an incomplete request, and its right-key case fails until they are added here."""
    cls = message_factory.GetMessageClass(method.input_type)
    request = cls()
    for f in method.input_type.fields:
        name = f.name
        if name == "dataset" and method.name != "ListAuditEvents":
            request.dataset = DATASET_A
        elif name == "thread_id" and method.input_type.name not in (
            "NewMessage",
            "CreateThreadRequest",  # optional there: the server picks one
        ):
            request.thread_id = thread
        elif name == "episode_id":
            request.episode_id = episode
        elif name == "include":
            request.include.append(recall_service_pb2.RECALL_INCLUDE_EPISODES)
        elif name == "query":
            request.query = "pricing"
        elif name == "messages":
            request.messages.add(role=episode_pb2.ROLE_USER, content="a new message")
        elif name == "role" and method.name == "CreateApiKey":
            request.role = 1  # reader
        elif name == "datasets":
            request.datasets.append(DATASET_A)
        elif name == "key":
            request.key = world.throwaway_keys[0]  # revoked only by the right-key call
        elif method.name == "RecordEvent" and name in ("actor", "event_type", "summary"):
            setattr(request, name, {"actor": "agent", "event_type": "decision"}.get(name, "x"))
        elif name == "into":
            request.into = "pro tier"
        elif name == "sources":
            request.sources.append("orion")
        elif name == "alias":
            request.alias = "atlas"
        elif name == "entity":
            request.entity = "project atlas"
        elif name == "outcome":
            request.outcome = episode_pb2.OUTCOME_SUCCESS
        elif name == "procedure_id":
            request.procedure_id = world.procedure_a
    return request


def _call(address: str, method: MethodDescriptor, request: Any, key: str | None) -> tuple:
    with grpc.insecure_channel(address) as channel:
        path = f"/{method.containing_service.full_name}/{method.name}"
        stub = channel.unary_unary(
            path,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=lambda b: b,
        )
        metadata = (("authorization", f"Bearer {key}"),) if key else ()
        try:
            return grpc.StatusCode.OK, "", stub(request, timeout=30, metadata=metadata)
        except grpc.RpcError as err:
            return err.code(), err.details() or "", b""


def _low_role_key(rule: Rule) -> str:
    return {
        Role.READER: "service",  # the services' key makes no application calls
        Role.WRITER: "reader_a",
        Role.ADMIN: "writer_a",
        Role.SERVICE: "writer_a",
    }[rule.role]


def _right_key(rule: Rule) -> str:
    if rule.role is Role.SERVICE:
        return "service"
    if rule.global_scope:
        return "admin_all"
    return f"{rule.role.label}_tenant_a"  # through the tenant prefix


def _other_dataset_key(rule: Rule) -> str:
    if rule.role is Role.SERVICE:
        return "admin_b_tenant"  # an admin may trigger, but only on its own datasets
    return f"{rule.role.label}_b"


def _snapshot(engine: Engine) -> dict[str, tuple]:
    with engine.connect() as conn:
        tables = conn.execute(
            text("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
        ).scalars()
        out = {}
        for table in tables:
            if table == "alembic_version":
                continue
            out[table] = tuple(
                conn.execute(
                    text(
                        f"SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM \"{table}\" t"
                    )
                ).one()
            )
        return out


def test_access_matrix(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    world = _world(engine)
    env = {
        "EPISODIC_AUTH": "required",
        "EPISODIC_AUTH_CACHE_TTL": "0.2",
        # Hundreds of refused calls from one address in seconds, on purpose: the matrix
        # checks every rule, not the budget of refusals (tests/access/test_guard_limits.py).
        "EPISODIC_RATE_LIMIT_UNAUTHENTICATED": "0",
    }
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
    methods = all_methods()
    table: list[tuple[str, str, str, str]] = []
    problems: list[str] = []

    def check(
        method: MethodDescriptor,
        case: str,
        key: str | None,
        want: set,
        hidden: tuple[str, ...] = (),
        **kw: Any,
    ) -> tuple:
        """Calls ``method`` about dataset A with ``key``; ``hidden`` must not appear in the
        answer (what the key may not see)."""
        request = _request(
            method,
            world,
            thread=kw.pop("thread", world.thread_a),
            episode=kw.pop("episode", world.episode_a),
        )
        address = services[PROCESS[method.containing_service.full_name]].address
        code, details, body = _call(address, method, request, key)
        table.append((method.full_name, case, code.name, "ok" if code in want else "WRONG"))
        if code not in want:
            problems.append(f"{method.full_name} [{case}]: {code.name} {details!r}, want {want}")
        for leak in hidden:
            if leak in details or leak.encode() in body:
                problems.append(f"{method.full_name} [{case}]: answer mentions {leak!r}")
        return code, details

    a_only = (SECRET_A,)  # what A said never reaches a key for B
    b_only = (DATASET_B, SECRET_B, world.thread_b, world.episode_b)
    before = _snapshot(engine)
    denied = {grpc.StatusCode.UNAUTHENTICATED}
    for method in methods:
        rule = rule_of(method)
        assert rule is not None
        check(method, "no key", None, denied)
        check(method, "malformed key", "ek_not-a-key", denied)
        check(method, "unknown key", "ek_0123456789_" + "x" * 43, denied)
        check(method, "revoked key", world.keys["revoked"], denied)
        check(method, "expired key", world.keys["expired"], denied)
        check(
            method,
            "role too low",
            world.keys[_low_role_key(rule)],
            {grpc.StatusCode.PERMISSION_DENIED},
        )
        request = _request(method, world, thread=world.thread_a, episode=world.episode_a)
        names_a_dataset = any(f.name == "dataset" for f in method.input_type.fields)
        if rule.global_scope or (names_a_dataset and request.dataset):
            check(
                method,
                "other dataset",
                world.keys[_other_dataset_key(rule)],
                {grpc.StatusCode.PERMISSION_DENIED},
            )
        else:
            _, details = check(
                method,
                "other dataset",
                world.keys[_other_dataset_key(rule)],
                {grpc.StatusCode.NOT_FOUND},
                hidden=a_only,
            )
            # The very answer an id that does not exist gets.
            ghost_thread, ghost_episode = str(uuid.uuid4()), str(uuid.uuid4())
            _, ghost = check(
                method,
                "id that does not exist",
                world.keys["admin_all"] if rule.role is not Role.SERVICE else world.keys["service"],
                {grpc.StatusCode.NOT_FOUND},
                thread=ghost_thread,
                episode=ghost_episode,
            )
            normalised = ghost.replace(ghost_thread, world.thread_a).replace(
                ghost_episode, world.episode_a
            )
            if details != normalised:
                problems.append(
                    f"{method.full_name}: another dataset's id answers {details!r}, a missing "
                    f"id {ghost!r}: existence leaks"
                )
            if any(f.name == "episode_id" for f in method.input_type.fields):
                # An event's id, which these RPCs take too: hidden the same way.
                _, about_event = check(
                    method,
                    "other dataset's event",
                    world.keys[_other_dataset_key(rule)],
                    {grpc.StatusCode.NOT_FOUND},
                    hidden=a_only,
                    episode=world.event_a,
                )
                # (An RPC that also names the thread names it in both answers.)
                if about_event != ghost.replace(ghost_thread, world.thread_a).replace(
                    ghost_episode, world.event_a
                ):
                    problems.append(
                        f"{method.full_name}: another dataset's event answers "
                        f"{about_event!r}, a missing id {ghost!r}: existence leaks"
                    )
    assert _snapshot(engine) == before, "a refused call changed the database"

    admitted = {grpc.StatusCode.OK, grpc.StatusCode.FAILED_PRECONDITION}
    # Erasure last (a thread, then the whole dataset): every other call still finds A.
    last = {"DeleteProcedure": 1, "DeleteThread": 2, "DeleteDataset": 3}
    for method in sorted(methods, key=lambda m: last.get(m.name, 0)):
        rule = rule_of(method)
        assert rule is not None
        # A key for every dataset may see B; a key for tenant A never.
        check(
            method,
            "right key",
            world.keys[_right_key(rule)],
            admitted,
            hidden=() if rule.global_scope or rule.role is Role.SERVICE else b_only,
        )

    # Admin actions left their trace: which key, when, what, on what.
    with engine.connect() as conn:
        events = conn.execute(
            text("SELECT key_prefix, action, dataset, target, occurred_at FROM audit_events")
        ).all()
    actions = {(e.action, e.key_prefix) for e in events}
    admin_prefix = "ek_" + world.keys["admin_tenant_a"].split("_")[1]
    everything_prefix = "ek_" + world.keys["admin_all"].split("_")[1]
    assert ("episode.delete", admin_prefix) in actions
    # The retry was refused (the episode was not failed): nothing happened, nothing audited.
    assert not any(action == "episode.retry" for action, _ in actions)
    assert {("key.create", everything_prefix), ("key.revoke", everything_prefix)} <= actions
    assert ("sweep.run", everything_prefix) in actions
    assert all(e.occurred_at is not None for e in events)
    # A was erased at the end: its events keep what was done, by whom, but name a pseudonym.
    assert {("thread.erase", admin_prefix), ("dataset.erase", admin_prefix)} <= actions
    deleted = next(e for e in events if e.action == "episode.delete")
    assert (deleted.dataset, deleted.target) == (
        erasure.pseudonym(DATASET_A),
        erasure.pseudonym(world.episode_a),
    )

    print("\n".join(f"{m:<55} {c:<24} {code:<18} {v}" for m, c, code, v in table))
    print(f"{len(methods)} RPCs, {len(table)} calls")
    assert not problems, "\n".join(problems)
