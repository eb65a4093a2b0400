"""The Struct depth guard (episodic.requests): the walk's answer and the size below which
the walk is skipped."""

from __future__ import annotations

import random
from typing import Any

import pytest
from google.protobuf import struct_pb2

from episodic.requests import _BYTES_TO_EXCEED_DEPTH, MAX_STRUCT_DEPTH, _json_depth, check_structs
from episodic.v1 import ingest_service_pb2 as pb


def reference_depth(value: Any) -> int:
    """JSON nesting of plain data, recursively (an empty object or list is 1)."""
    if isinstance(value, dict):
        return 1 + max((reference_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((reference_depth(v) for v in value), default=0)
    return 0


def struct(data: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(data)
    return s


def tightest(depth: int, kind: str) -> dict[str, Any]:
    """A Struct of ``depth`` levels with as few bytes as the format allows: empty keys,
    nothing but the nesting."""
    if depth == 1:
        return {}
    inner: Any = {} if kind == "objects" else []
    for level in range(depth - 3, -1, -1):
        wrap_list = kind == "lists" or (kind == "alternating" and level % 2)
        inner = [inner] if wrap_list else {"": inner}
    return {"": inner}


def random_json(rng: random.Random, budget: int) -> Any:
    roll = rng.random()
    if budget <= 0 or roll < 0.3:
        return rng.choice(["text", 1.5, True, None])
    if roll < 0.65:
        return {f"k{i}": random_json(rng, budget - 1) for i in range(rng.randint(0, 3))}
    return [random_json(rng, budget - 1) for _ in range(rng.randint(0, 3))]


def test_the_walk_agrees_with_a_recursive_count() -> None:
    rng = random.Random(20261201)
    for _ in range(500):
        data = {"root": random_json(rng, rng.randint(0, 20))}
        assert _json_depth(struct(data)) == reference_depth(data)
    value = struct_pb2.Value(string_value="leaf")
    assert _json_depth(value) == 0
    value = struct_pb2.Value()
    value.list_value.values.add().struct_value.update({"a": 1})
    assert _json_depth(value) == 2


@pytest.mark.parametrize("kind", ["objects", "lists", "alternating"])
def test_nothing_small_enough_to_skip_can_nest_too_deep(kind: str) -> None:
    for depth in range(1, 3 * MAX_STRUCT_DEPTH):
        value = struct(tightest(depth, kind))
        assert reference_depth(tightest(depth, kind)) == depth
        assert _json_depth(value) == depth
        if depth > MAX_STRUCT_DEPTH:
            # The skip is sound: every Struct nested too deep is at least this large.
            assert value.ByteSize() >= _BYTES_TO_EXCEED_DEPTH, (depth, value.ByteSize())


@pytest.mark.parametrize("kind", ["objects", "lists", "alternating"])
def test_the_tightest_too_deep_struct_is_refused_and_the_deepest_allowed_is_not(
    kind: str,
) -> None:
    def request(depth: int) -> pb.AddMessagesRequest:
        r = pb.AddMessagesRequest(thread_id="t")
        r.messages.add(content="hi").metadata.update(tightest(depth, kind))
        return r

    problem = check_structs(request(MAX_STRUCT_DEPTH + 1))
    assert problem is not None
    assert problem.field == "messages[0].metadata"
    assert f"{MAX_STRUCT_DEPTH + 1} levels deep" in problem.message
    assert check_structs(request(MAX_STRUCT_DEPTH)) is None


def test_the_answer_names_the_field_at_its_depth_in_the_request() -> None:
    """The path of the Struct nested too deep, through repeated and single fields."""
    too_deep = tightest(MAX_STRUCT_DEPTH + 1, "objects")
    batch = pb.AddMessagesRequest(thread_id="t")
    for i in range(5):
        message = batch.messages.add(content=f"m{i}")
        message.metadata.update(too_deep if i == 3 else {"source": "web"})
    problem = check_structs(batch)
    assert problem is not None and problem.field == "messages[3].metadata"
    assert problem.message.startswith("messages[3].metadata nests objects and lists")

    answer = pb.CreateThreadResponse()  # a Struct inside a single (not repeated) field
    answer.thread.metadata.update(too_deep)
    problem = check_structs(answer)
    assert problem is not None and problem.field == "thread.metadata"
    answer.thread.metadata.Clear()
    answer.thread.metadata.update({"fine": {"a": [1, 2]}})
    assert check_structs(answer) is None
