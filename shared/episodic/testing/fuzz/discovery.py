"""Discovery: every RPC of every service, straight from the generated descriptors.

Nothing in the fuzzer names an RPC: :func:`discover_rpcs` walks the ``*_pb2`` modules, so an
RPC or a service added later is covered without a change here. The descriptor helpers
(:func:`message_class`, :func:`message_of`, :func:`enum_of`, :func:`is_map`) live beside it
because every other part of the fuzzer reads descriptors through them.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass

from google.protobuf import descriptor as pbd
from google.protobuf import message_factory
from google.protobuf.message import Message

FD = pbd.FieldDescriptor


@dataclass(frozen=True)
class Rpc:
    """One method of one service, straight from the descriptors."""

    service: str  # fully qualified, e.g. "episodic.v1.IngestService"
    method: str  # e.g. "CreateThread"
    input_type: pbd.Descriptor
    output_type: pbd.Descriptor
    client_streaming: bool = False
    server_streaming: bool = False

    @property
    def path(self) -> str:
        """The HTTP/2 path gRPC calls it by: ``/package.Service/Method``."""
        return f"/{self.service}/{self.method}"

    @property
    def name(self) -> str:
        """Short name for reports and test ids: ``IngestService.CreateThread``."""
        return f"{self.service.rsplit('.', 1)[-1]}.{self.method}"

    @property
    def unary(self) -> bool:
        return not (self.client_streaming or self.server_streaming)

    def request_class(self) -> type[Message]:
        return message_class(self.input_type)

    def parse_response(self, data: bytes) -> Message:
        return message_class(self.output_type).FromString(data)


def message_class(descriptor: pbd.Descriptor) -> type[Message]:
    """The generated (or dynamically built) Python class of a message descriptor."""
    return message_factory.GetMessageClass(descriptor)


def discover_rpcs(package: str = "episodic.v1") -> list[Rpc]:
    """Every RPC of every service declared in the ``*_pb2`` modules of ``package``, in a
    stable order (module, then declaration order)."""
    pkg = importlib.import_module(package)
    rpcs: list[Rpc] = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if not info.name.endswith("_pb2"):
            continue  # *_pb2_grpc modules hold stubs, not descriptors
        module = importlib.import_module(f"{package}.{info.name}")
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                rpcs.append(
                    Rpc(
                        service=service.full_name,
                        method=method.name,
                        input_type=method.input_type,
                        output_type=method.output_type,
                        client_streaming=bool(getattr(method, "client_streaming", False)),
                        server_streaming=bool(getattr(method, "server_streaming", False)),
                    )
                )
    return rpcs


def message_of(f: FD) -> pbd.Descriptor:
    """The message type of a message-typed field."""
    if f.message_type is None:
        raise TypeError(f"{f.full_name} is not a message field")
    return f.message_type


def enum_of(f: FD) -> pbd.EnumDescriptor:
    """The enum type of an enum-typed field."""
    if f.enum_type is None:
        raise TypeError(f"{f.full_name} is not an enum field")
    return f.enum_type


def is_map(f: FD) -> bool:
    return f.type == FD.TYPE_MESSAGE and message_of(f).GetOptions().map_entry
