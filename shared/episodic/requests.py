"""Requests a server will not handle: bytes that are not a valid protobuf message of the
method's request type, and ``google.protobuf.Struct`` values nested too deep or too large.

grpcio parses a request before any handler or interceptor sees it, and answers a parse
failure with INTERNAL ("Exception deserializing request!") and an ERROR log with a
traceback — a client's bad bytes would look like our bug, and an anonymous caller could
flood the logs. :func:`guarded_deserializer` wraps every method's deserializer: a request
that cannot be used becomes an :class:`Unparsable` value instead of an exception, and the
error interceptor (:class:`episodic.serving.server.ErrorInterceptor`) answers it with
INVALID_ARGUMENT naming the problem, before the handler runs. Nothing is logged.

Struct bounds apply to every request of every service, whatever field holds the Struct
(found from the descriptors): a Struct nested deeper than :data:`MAX_STRUCT_DEPTH` levels
parses, but once stored it comes back inside responses that other clients cannot parse
(protobuf's default recursion limit is 100 message levels, and each JSON level is two or
three of them).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from google.protobuf import struct_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from episodic.errors import InvalidArgument

__all__ = [
    "MAX_STRUCT_BYTES",
    "MAX_STRUCT_DEPTH",
    "Unparsable",
    "check_structs",
    "guarded_deserializer",
]

#: Deepest nesting of objects and lists a Struct field may carry (JSON levels).
MAX_STRUCT_DEPTH = 16
#: Largest serialized size of one Struct field. Services apply stricter limits of their own
#: (Ingest: EPISODIC_MAX_METADATA_BYTES); this bounds every request, whatever its service.
MAX_STRUCT_BYTES = 256 * 1024

_STRUCT_TYPES = frozenset(
    {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
)


class Unparsable:
    """Stands in for a request that could not be used; the interceptor answers it."""

    __slots__ = ("field", "message")

    def __init__(self, message: str, field: str | None = None) -> None:
        self.message = message
        self.field = field

    def error(self) -> InvalidArgument:
        """The INVALID_ARGUMENT to answer with (reason MALFORMED_REQUEST)."""
        return InvalidArgument(self.message, field=self.field, reason="MALFORMED_REQUEST")


def guarded_deserializer(
    deserialize: Callable[[bytes], Any] | None,
) -> Callable[[bytes], Any] | None:
    """``deserialize``, answering an :class:`Unparsable` instead of raising, and checking
    every Struct of the parsed request (:func:`check_structs`)."""
    if deserialize is None:
        return None
    # Generated deserializers are bound to their message class: name it in the answer.
    descriptor = getattr(getattr(deserialize, "__self__", None), "DESCRIPTOR", None)
    kind = f"a valid {descriptor.full_name}" if descriptor is not None else "a valid request"

    def parse(data: bytes) -> Any:
        try:
            request = deserialize(data)
        except Exception as err:  # DecodeError, RecursionError, … : the client's bytes
            return Unparsable(
                f"the request is not {kind} ({type(err).__name__}: {err}); typical causes "
                "are invalid UTF-8 in a string field, a truncated or corrupted message, or "
                "nesting deeper than 100 levels"
            )
        if isinstance(request, Message):
            problem = check_structs(request)
            if problem is not None:
                return problem
        return request

    return parse


def check_structs(request: Message) -> Unparsable | None:
    """The first Struct-valued field of ``request`` (at any depth) that is nested deeper
    than :data:`MAX_STRUCT_DEPTH` or larger than :data:`MAX_STRUCT_BYTES`, as an
    :class:`Unparsable` naming the field; None when every Struct is fine."""
    # Each message's path is kept as a link to its parent's and spelled out only for an
    # answer: every message of an AddMessages batch is visited, and building its path as
    # text took two f-strings each.
    stack: list[tuple[Message, _Path | None]] = [(request, None)]
    while stack:
        message, path = stack.pop()
        for field in _struct_carriers(message.DESCRIPTOR):
            repeated = field.is_repeated
            if not repeated and not message.HasField(field.name):
                continue
            values = getattr(message, field.name)
            is_struct = (
                field.message_type is not None and field.message_type.full_name in _STRUCT_TYPES
            )
            for i, value in enumerate(values if repeated else (values,)):
                if is_struct:
                    problem = _struct_problem(value)
                    if problem is not None:
                        where = _spelled((path, field.name, i if repeated else None))
                        return Unparsable(f"{where} {problem}", where)
                else:
                    stack.append((value, (path, field.name, i if repeated else None)))
    return None


#: Where a message sits in a request: (its parent's path, its field's name, its index in a
#: repeated field or None).
_Path = tuple[Any, str, int | None]


def _spelled(path: _Path | None) -> str:
    """``path`` as a field path: ``messages[3].metadata``."""
    parts: list[str] = []
    while path is not None:
        path, name, index = path
        parts.append(name if index is None else f"{name}[{index}]")
    return ".".join(reversed(parts))


def _struct_problem(value: Message) -> str | None:
    """What is wrong with one Struct, Value or ListValue (to follow its field's path), or
    None. Called for the metadata of every message of a batch: the path is built only for
    an answer."""
    size = value.ByteSize()
    if size > MAX_STRUCT_BYTES:
        return f"is {size} bytes; the limit for a Struct is {MAX_STRUCT_BYTES}"
    if size < _BYTES_TO_EXCEED_DEPTH:
        return None  # too small to nest that deep: no walk (most metadata)
    depth = _json_depth(value)
    if depth > MAX_STRUCT_DEPTH:
        return f"nests objects and lists {depth} levels deep; the limit is {MAX_STRUCT_DEPTH}"
    return None


#: Each level of nesting below the first costs a Struct or ListValue at least 4 bytes
#: serialized: the entry's tag and length, then the Value's tag and length (a Struct's map
#: entry adds more; an empty key may be left out). So a Struct nested deeper than
#: MAX_STRUCT_DEPTH is at least this large, and a smaller one needs no walk — the walk is
#: ~6 µs for a three-key Struct, which every message of an AddMessages batch carries
#: (tests/test_struct_depth.py checks the bound on the tightest nestings).
_BYTES_TO_EXCEED_DEPTH = 4 * MAX_STRUCT_DEPTH


def _json_depth(value: Message) -> int:
    """Nesting of objects and lists in a Struct, Value or ListValue (an empty object is 1),
    computed without recursion. Only Values holding an object or a list are visited."""
    if isinstance(value, struct_pb2.Value):
        kind = value.WhichOneof("kind")
        if kind not in _NESTING_KINDS:
            return 0
        value = getattr(value, kind)
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > deepest:
            deepest = depth
        children = node.fields.values() if isinstance(node, struct_pb2.Struct) else node.values
        for child in children:
            kind = child.WhichOneof("kind")
            if kind == "struct_value":
                stack.append((child.struct_value, depth + 1))
            elif kind == "list_value":
                stack.append((child.list_value, depth + 1))
    return deepest


_NESTING_KINDS = frozenset({"struct_value", "list_value"})


@cache
def _struct_carriers(descriptor: Descriptor) -> tuple[FieldDescriptor, ...]:
    """The message fields of ``descriptor`` through which a Struct can be reached (cached:
    most request types have none, and then checking costs nothing)."""
    return tuple(
        f
        for f in descriptor.fields
        if f.message_type is not None
        and not f.message_type.GetOptions().map_entry  # no request maps Structs by key
        and _reaches_struct(f.message_type, frozenset())
    )


def _reaches_struct(descriptor: Descriptor, seen: frozenset[str]) -> bool:
    if descriptor.full_name in _STRUCT_TYPES:
        return True
    if descriptor.full_name in seen:
        return False
    seen = seen | {descriptor.full_name}
    return any(
        f.message_type is not None and _reaches_struct(f.message_type, seen)
        for f in descriptor.fields
    )
