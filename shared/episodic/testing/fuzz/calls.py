"""Raw calls: request bytes to any RPC, past every client library's serializer.

:func:`call_raw` sends bytes through a generic ``channel.unary_unary`` without serializers,
so bytes no client would produce reach the server's deserializer, and returns the status
instead of raising; :func:`served_services` asks a server (gRPC reflection) which services
it serves, to route each RPC without a hard-coded map; :func:`describe` summarises a
(possibly huge) request on one line for a failure report.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import Message

from episodic.testing.fuzz.discovery import FD, enum_of, is_map, message_of


def served_services(channel: grpc.Channel, timeout: float = 10.0) -> set[str]:
    """The fully qualified services a server announces through gRPC server reflection
    (every episodic server enables it), so a caller can route each :class:`Rpc` to the
    process that serves it without a hard-coded map."""
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    stub: Any = reflection_pb2_grpc.ServerReflectionStub(channel)  # typeshed: untyped call
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    names: set[str] = set()
    for response in stub.ServerReflectionInfo(iter([request]), timeout=timeout):
        names.update(s.name for s in response.list_services_response.service)
    return names


@dataclass(frozen=True)
class CallResult:
    code: grpc.StatusCode
    details: str
    response: bytes | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.code == grpc.StatusCode.OK


def call_raw(
    channel: grpc.Channel,
    path: str,
    data: bytes,
    *,
    timeout: float = 30.0,
    metadata: Sequence[tuple[str, str | bytes]] | None = None,
) -> CallResult:
    """Sends ``data`` as the request of the unary RPC at ``path`` (``/pkg.Service/Method``)
    without serializing anything, and returns the status (never raises for RPC errors)."""
    method: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
        path, request_serializer=None, response_deserializer=None
    )
    started = time.monotonic()
    try:
        response = method(data, timeout=timeout, metadata=tuple(metadata or ()) or None)
    except grpc.RpcError as err:
        return CallResult(err.code(), err.details() or "", None, time.monotonic() - started)
    return CallResult(grpc.StatusCode.OK, "", bytes(response), time.monotonic() - started)


def describe(message: Message, limit: int = 400) -> str:
    """A one-line summary of a (possibly huge) message: long strings are cut and their
    length given, long lists show their size."""

    def short(f: FD, value: Any, depth: int) -> str:
        if isinstance(value, Message):
            return "{" + fields(value, depth + 1) + "}"
        if isinstance(value, str):
            return repr(value) if len(value) <= 40 else f"{value[:24]!r}…(len {len(value)})"
        if isinstance(value, bytes):
            return repr(value[:24]) + (f"…(len {len(value)})" if len(value) > 24 else "")
        if f.type == FD.TYPE_ENUM:
            known = enum_of(f).values_by_number.get(value)
            return known.name if known else f"{value}(unknown)"
        return repr(value)

    def fields(msg: Message, depth: int) -> str:
        if depth > 6:
            return "…"
        parts = []
        for f, value in msg.ListFields():
            if is_map(f):
                items = list(value.items())[:3]
                value_field = message_of(f).fields_by_name["value"]
                shown = ", ".join(f"{k!r}: {short(value_field, v, depth)}" for k, v in items)
                more = f", …{len(value)} entries" if len(value) > 3 else ""
                parts.append(f"{f.name}={{{shown}{more}}}")
            elif f.is_repeated:
                shown = ", ".join(short(f, v, depth) for v in list(value)[:3])
                more = f", …{len(value)} items" if len(value) > 3 else ""
                parts.append(f"{f.name}=[{shown}{more}]")
            else:
                parts.append(f"{f.name}={short(f, value, depth)}")
        return " ".join(parts)

    out = f"{message.DESCRIPTOR.name}{{{fields(message, 0)}}}"
    nesting = message_depth(message)
    suffix = f" [messages nested {nesting} deep]" if nesting > 6 else ""
    if len(out) + len(suffix) > limit:
        out = out[: max(0, limit - len(suffix) - 1)] + "…"
    return out + suffix


def message_depth(message: Message) -> int:
    """How deep messages nest inside ``message`` (1: no message fields set). Protobuf's
    decoders refuse more than 100 by default; a Struct level costs two or three."""
    deepest = 0
    for f, value in message.ListFields():
        if f.type not in (FD.TYPE_MESSAGE, FD.TYPE_GROUP):
            continue
        if is_map(f):
            items = list(value.values())
            if message_of(f).fields_by_name["value"].type != FD.TYPE_MESSAGE:
                deepest = max(deepest, 1)
                continue
            deepest = max([deepest, *(message_depth(v) + 1 for v in items)])
        elif f.is_repeated:
            deepest = max([deepest, *(message_depth(v) for v in value)])
        else:
            deepest = max(deepest, message_depth(value))
    return deepest + 1
