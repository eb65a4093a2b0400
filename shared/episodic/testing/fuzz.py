"""Fuzzing every RPC of every episodic service, driven by the proto descriptors.

Nothing here names an RPC: whatever ``episodic.v1`` declares is covered, including RPCs and
services added later. Five parts, each usable on its own:

- **Discovery** — :func:`discover_rpcs` walks the generated ``*_pb2`` modules of a package
  and returns one :class:`Rpc` per method of every service (``DESCRIPTOR.services_by_name``).
- **Request strategies** — :func:`messages` builds a hypothesis strategy for *any* message
  type from its descriptor: every scalar kind with its edges (int64/uint64 limits, NaN and
  infinities, bools), enums in and out of range, strings (unicode, NUL, very long, UUIDs in
  several spellings, plausible datasets and page tokens), nested and repeated messages with
  bounded sizes, maps, oneofs, ``Struct``/``Value``/``ListValue`` with nesting, and
  ``Timestamp``/``Duration`` including out-of-range seconds and nanos. A :class:`Seeds`
  object biases string fields towards real values by field name (an existing thread_id,
  episode_id, dataset, page token, …) so a useful share of requests gets past validation
  into the deep code paths. :func:`plausible_request` builds one such request directly.
- **Byte mutations** — :data:`MUTATORS` and :func:`mutations` turn a serialized valid
  request into malformed wire bytes crafted by hand: bit flips, truncation, truncated and
  huge length prefixes, invalid UTF-8 in any (nested) string field, wrong and invalid wire
  types, overlong varints, out-of-range varints, ``Struct`` nested 40–150 levels built on
  the wire, deeply nested unknown groups, duplicated and unknown fields, garbage. Every
  mutation says what it did (:class:`Mutation`), so a failure report is readable without
  shrinking. :func:`mutation_strategy` offers the same as a hypothesis strategy.
- **Raw calls** — :func:`call_raw` sends request bytes to any RPC through a generic
  ``channel.unary_unary(path, request_serializer=None, response_deserializer=None)``, so
  bytes that no client library would produce reach the server's deserializer;
  :func:`served_services` asks a server (gRPC reflection) which services it serves.
- **Store fingerprints** — :func:`store_fingerprint` takes per-table row counts and content
  checksums of every table of a schema (discovered from the catalog), so a test can assert
  that a rejected call stored nothing; :func:`fingerprint_changes` says what differs.

Example (see ``tests/fuzz/test_rpc_fuzz.py`` for the whole harness)::

    for rpc in discover_rpcs():
        strategy = messages(rpc.input_type, seeds)
        ...
        for mutation in mutations(rpc.input_type, [valid.SerializeToString()], 20, rng):
            result = call_raw(channel, rpc.path, mutation.data)
"""

from __future__ import annotations

import base64
import importlib
import json
import math
import pkgutil
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import grpc
from google.protobuf import descriptor as pbd
from google.protobuf import message_factory, struct_pb2
from google.protobuf.message import Message
from hypothesis import strategies as st
from sqlalchemy import Engine, text

FD = pbd.FieldDescriptor

__all__ = [
    "MUTATORS",
    "CallResult",
    "Mutation",
    "Mutator",
    "Rpc",
    "Seeds",
    "StoreFingerprint",
    "WireField",
    "applicable_kinds",
    "call_raw",
    "datasets",
    "deep_struct_bytes",
    "describe",
    "discover_rpcs",
    "durations",
    "encode_in",
    "encode_len",
    "encode_tag",
    "encode_varint",
    "enum_of",
    "enum_values",
    "field_paths",
    "fingerprint_changes",
    "floats",
    "integers",
    "json_objects",
    "json_values",
    "message_class",
    "message_depth",
    "message_of",
    "messages",
    "mutated_cursors",
    "mutation_strategy",
    "mutations",
    "nested",
    "overlong_varint",
    "page_tokens",
    "plausible_request",
    "plausible_strings",
    "scan_fields",
    "served_services",
    "store_fingerprint",
    "strings_for",
    "struct_from",
    "timestamps",
    "uuid_strings",
    "value_from",
    "weighted",
    "wire_type_of",
]

# ---------------------------------------------------------------------------------------
# Discovery
# ---------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------
# Seeds: real values that make generated requests reach deep code paths
# ---------------------------------------------------------------------------------------


@dataclass
class Seeds:
    """Known-good string values by field name, taken from a seeded database.

    ``core`` values are also used by :func:`plausible_request` (identities a request needs
    to be valid: dataset, thread_id, episode_id, content, query); ``extra`` values only by
    the strategies (page tokens, entities, idempotency keys: valid only in some contexts).
    A field named ``thread_ids`` uses the values of ``thread_id`` and the other way round.
    """

    core: dict[str, list[str]] = field(default_factory=dict)
    extra: dict[str, list[str]] = field(default_factory=dict)

    def _lookup(self, table: Mapping[str, list[str]], name: str) -> list[str]:
        for key in (name, name.removesuffix("s"), name + "s"):
            if table.get(key):
                return list(table[key])
        return []

    def core_for(self, name: str) -> list[str]:
        return self._lookup(self.core, name)

    def for_field(self, name: str) -> list[str]:
        return self.core_for(name) + self._lookup(self.extra, name)


# ---------------------------------------------------------------------------------------
# Value strategies
# ---------------------------------------------------------------------------------------

INT_RANGES: dict[int, tuple[int, int]] = {
    FD.TYPE_INT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FD.TYPE_INT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FD.TYPE_UINT32: (0, 2**32 - 1),
    FD.TYPE_FIXED32: (0, 2**32 - 1),
    FD.TYPE_UINT64: (0, 2**64 - 1),
    FD.TYPE_FIXED64: (0, 2**64 - 1),
}
INT_EDGES = (
    0, 1, -1, 2, 9, 10, 11, 99, 100, 101, 999, 1000, 1001, 2**15, 2**31 - 1, -(2**31), 2**31,
    2**32 - 1, 2**32, 2**53, 2**53 + 1, 2**63 - 1, -(2**63), 2**63, 2**64 - 1,
)  # fmt: skip

EDGE_STRINGS = (
    "",
    " ",
    "\x00",
    "a\x00b",
    "\t\r\n",
    "é",
    "😀",
    "\u202eevil",
    "\ufeffbom",
    "\uffff",
    "\U0010ffff",
    "'; DROP TABLE threads; --",
    "%s%n%x%d",
    "${jndi:ldap://x/a}",
    "../../etc/passwd",
    "null",
    "NaN",
    "-1",
    "0",
    "{}",
    "[]",
    "\\",
    '"',
    "<script>",
    "ROLE_USER",
)
# Lengths just inside and outside the limits the services enforce (dataset 128, label 200,
# page token 1024, metadata 16 KiB, content 64 KiB) and beyond.
LONG_LENGTHS = (128, 129, 200, 201, 1024, 1025, 16_385, 65_536, 65_537, 100_000)
WORDS = (
    "pricing", "decided", "Pro", "tier", "$29", "project", "Atlas", "annual", "billing",
    "Berlin", "office", "March", "car", "budget", "we", "agreed", "on", "the", "user",
    "prefers", "dentist", "next", "week", "what", "did", "about", "?",
)  # fmt: skip
DATASET_ALPHABET = "abcxyzABC0129_.:@-"
TIMESTAMP_MIN = -62_135_596_800  # 0001-01-01T00:00:00Z
TIMESTAMP_MAX = 253_402_300_799  # 9999-12-31T23:59:59Z
DURATION_MAX = 315_576_000_000  # ±10,000 years
# Timestamp seconds at and beyond the representable range (plus near-future ones per call).
SECONDS_EDGES = (0, -1, TIMESTAMP_MIN, TIMESTAMP_MIN - 1, TIMESTAMP_MAX, TIMESTAMP_MAX + 1,
                 2**31, 2**63 - 1, -(2**63))  # fmt: skip
NANOS_EDGES = (0, 1, 999_999_999, 1_000_000_000, -1, -999_999_999, 2**31 - 1, -(2**31))


def weighted(*options: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """Draws from one of ``options`` with probability proportional to its weight."""
    pool = [strategy for weight, strategy in options for _ in range(weight)]
    return st.sampled_from(pool).flatmap(lambda s: s)


def integers(lo: int, hi: int) -> st.SearchStrategy[int]:
    """Small values (page sizes, sequences), the edges inside [lo, hi], and anything."""
    edges = sorted({e for e in (*INT_EDGES, lo, hi, lo + 1, hi - 1) if lo <= e <= hi})
    return weighted(
        (4, st.integers(max(lo, 0), min(hi, 20))),
        (3, st.sampled_from(edges)),
        (2, st.integers(lo, hi)),
    )


def floats(width: Literal[16, 32, 64] = 64) -> st.SearchStrategy[float]:
    edges = [0.0, -0.0, 0.5, 1.0, -1.0, 1.0000001, 2.0, math.nan, math.inf, -math.inf]
    if width == 64:
        edges += [1e308, 5e-324, -1e308]
    return weighted(
        (3, st.sampled_from(edges)),
        (3, st.floats(0.0, 1.0, width=width)),  # weights and scores live here
        (2, st.floats(width=width)),
    )


def uuid_strings() -> st.SearchStrategy[str]:
    """Canonical UUIDs mostly, plus spellings a lenient parser might accept or choke on."""
    canonical = st.uuids().map(str)
    return weighted(
        (6, canonical),
        (1, st.uuids().map(lambda u: u.hex)),
        (1, canonical.map(str.upper)),
        (1, canonical.map(lambda u: "{" + u + "}")),
        (1, canonical.map(lambda u: "urn:uuid:" + u)),
        (1, canonical.map(lambda u: u[:-1])),  # one digit short
        (1, canonical.map(lambda u: u + " ")),
        (1, canonical.map(lambda u: u + "\x00")),
        (
            1,
            st.sampled_from(
                [
                    "00000000-0000-0000-0000-000000000000",
                    "ffffffff-ffff-ffff-ffff-ffffffffffff",
                    "0b7f3e0c-6a3c-4c1e-9a57-2f1b8f4e5d2g",
                ]
            ),
        ),
    )


def datasets() -> st.SearchStrategy[str]:
    """Dataset-shaped names: valid ones, the 128/129-character boundary, and near misses."""
    return weighted(
        (5, st.text(DATASET_ALPHABET, min_size=1, max_size=24)),
        (1, st.sampled_from(["a" * 128, "a" * 129, "user 42", "user/42", "user_42\n", "ü"])),
    )


def page_tokens() -> st.SearchStrategy[str]:
    """Base64 JSON like the services' own cursors, plus non-JSON and non-base64 text."""
    cursor = st.dictionaries(
        st.sampled_from(["after", "at", "id", "dataset", "thread", "end", "status", "x"]),
        st.one_of(
            st.integers(-(2**70), 2**70),
            st.text(max_size=30),
            st.none(),
            st.booleans(),
            st.lists(st.integers(), max_size=2),
        ),
        max_size=5,
    )
    as_token = cursor.map(_encode_cursor)
    return weighted(
        (4, as_token),
        (1, st.sampled_from(["%%%", "e30", "W10", "bnVsbA", "MQ", "a" * 1025])),
        (1, st.binary(max_size=40).map(lambda b: base64.urlsafe_b64encode(b).decode())),
    )


CURSOR_EDGES: tuple[Any, ...] = (
    None, True, -1, 0, 1.5, 2**31, 2**63, 2**64, "", "x", [], {},
    "9999-12-31T23:59:59.999999+14:00", "0001-01-01T00:00:00-14:00", "0001-01-01",
    "2024-02-30T00:00:00", "2024-01-01T00:00:00", "nan", "00000000-0000-0000-0000-000000000000",
    "user_42", "a" * 2000,
)  # fmt: skip


def _decode_cursor(token: str) -> dict[str, Any] | None:
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _encode_cursor(cursor: Mapping[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(cursor).encode()).decode().rstrip("=")


def mutated_cursors(tokens: Sequence[str]) -> st.SearchStrategy[str]:
    """Real page tokens (base64 JSON cursors, like the services issue) with one value
    replaced by an edge value or one key dropped: they pass the token's own checks and
    reach the query behind them."""
    cursors = [c for c in (_decode_cursor(t) for t in tokens) if c]
    if not cursors:
        return st.sampled_from(list(tokens) or [""])

    def mutate(cursor: dict[str, Any], index: int, value: Any, drop: bool) -> str:
        out = dict(cursor)
        key = sorted(out)[index % len(out)]
        if drop:
            del out[key]
        else:
            out[key] = value
        return _encode_cursor(out)

    return st.builds(
        mutate,
        st.sampled_from(cursors),
        st.integers(0, 50),
        st.sampled_from(CURSOR_EDGES),
        st.integers(0, 9).map(lambda n: n == 0),
    )


def long_strings() -> st.SearchStrategy[str]:
    return st.builds(
        lambda unit, n: (unit * n)[:n],
        st.sampled_from(["a", "é", "😀", "\x00", "ab "]),
        st.sampled_from(LONG_LENGTHS),
    )


def sentences() -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(WORDS), min_size=1, max_size=14).map(" ".join)


def any_text(max_size: int = 40) -> st.SearchStrategy[str]:
    """Any unicode text (no lone surrogates: they cannot be serialized)."""
    return st.text(st.characters(codec="utf-8"), max_size=max_size)


def strings_for(name: str, seeds: Seeds | None = None) -> st.SearchStrategy[str]:
    """Strings for a field called ``name``: its seeded values often, values shaped like the
    name says (``*_id`` → UUIDs, ``dataset``, ``page_token``) and any text otherwise."""
    known = (seeds or Seeds()).for_field(name)
    base = name.removesuffix("s")
    shaped: st.SearchStrategy[str]
    if base.endswith("_id") or base == "id":
        shaped = uuid_strings()
    elif "dataset" in base:
        shaped = datasets()
    elif "token" in base:
        shaped = page_tokens()
    else:
        shaped = sentences()
    options: list[tuple[int, st.SearchStrategy[Any]]] = [
        (4, shaped),
        (3, any_text()),
        (1, st.sampled_from(EDGE_STRINGS)),
        (1, long_strings()),
    ]
    if known:
        options.append((8, st.sampled_from(known)))
        if "token" in base:
            options.append((6, mutated_cursors(known)))
    return weighted(*options)


def plausible_strings(name: str) -> st.SearchStrategy[str]:
    """Valid-looking strings for a field called ``name`` when no seeded value is known."""
    base = name.removesuffix("s")
    if base.endswith("_id") or base == "id":
        return st.uuids().map(str)
    if "dataset" in base:
        return st.text(DATASET_ALPHABET, min_size=1, max_size=24)
    if "token" in base:
        return st.just("")
    return sentences()


def enum_values(enum: pbd.EnumDescriptor) -> st.SearchStrategy[int]:
    """Declared values mostly; for open (proto3) enums also unknown numbers."""
    numbers = sorted(v.number for v in enum.values)
    declared = st.sampled_from(numbers)
    if enum.is_closed:
        return declared
    return weighted(
        (6, declared),
        (2, st.sampled_from([max(numbers) + 1, -1, 2**31 - 1, -(2**31), 1000])),
        (1, st.integers(-(2**31), 2**31 - 1)),
    )


def timestamps(anchor: float | None = None) -> st.SearchStrategy[Message]:
    """Timestamps around ``anchor`` (now) and at and beyond the representable range,
    with nanos in and out of [0, 1e9)."""
    from google.protobuf import timestamp_pb2

    now = int(anchor if anchor is not None else time.time())
    seconds = weighted(
        (6, st.integers(now - 400 * 86_400, now + 3_600)),  # backfill .. the near future
        (3, st.sampled_from([*SECONDS_EDGES, now + 299, now + 301, now + 86_400 * 365])),
        (1, st.integers(-(2**63), 2**63 - 1)),
    )
    nanos = weighted(
        (5, st.just(0)), (3, st.integers(0, 999_999_999)), (2, st.sampled_from(NANOS_EDGES))
    )
    return st.builds(timestamp_pb2.Timestamp, seconds=seconds, nanos=nanos)


def durations() -> st.SearchStrategy[Message]:
    from google.protobuf import duration_pb2

    seconds = weighted(
        (5, st.integers(-86_400, 86_400)),
        (2, st.sampled_from([DURATION_MAX, DURATION_MAX + 1, -DURATION_MAX - 1, 2**63 - 1])),
        (1, st.integers(-(2**63), 2**63 - 1)),
    )
    nanos = weighted((5, st.just(0)), (2, st.sampled_from(NANOS_EDGES)))
    return st.builds(duration_pb2.Duration, seconds=seconds, nanos=nanos)


class _NoKind:
    """Marks a google.protobuf.Value with no kind set (not even null)."""

    def __repr__(self) -> str:
        return "<Value without kind>"


NO_KIND = _NoKind()


def value_from(obj: Any) -> struct_pb2.Value:
    """A ``google.protobuf.Value`` from JSON-like data (plus :data:`NO_KIND`)."""
    value = struct_pb2.Value()
    if obj is NO_KIND:
        pass
    elif obj is None:
        value.null_value = struct_pb2.NULL_VALUE
    elif isinstance(obj, bool):
        value.bool_value = obj
    elif isinstance(obj, int | float):
        value.number_value = float(obj)
    elif isinstance(obj, str):
        value.string_value = obj
    elif isinstance(obj, list):
        for item in obj:
            value.list_value.values.add().CopyFrom(value_from(item))
    elif isinstance(obj, dict):
        value.struct_value.CopyFrom(struct_from(obj))
    else:
        raise TypeError(f"no Value for {type(obj).__name__}")
    return value


def struct_from(obj: Mapping[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    for key, item in obj.items():
        out.fields[key].CopyFrom(value_from(item))
    return out


def nested(depth: int, leaf: Any, *, key: str = "k", lists: bool = False) -> Any:
    """``{"k": {"k": … leaf}}`` (or ``[[…leaf]]``) ``depth`` levels deep."""
    out = leaf
    for _ in range(depth):
        out = [out] if lists else {key: out}
    return out


def json_values(max_leaves: int = 16) -> st.SearchStrategy[Any]:
    keys = weighted((4, any_text(12)), (1, st.sampled_from(["", "k", "\x00", "é", "a" * 300])))
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        floats(),
        st.integers(-(2**60), 2**60),
        weighted((4, any_text()), (1, st.sampled_from(EDGE_STRINGS))),
        st.just(NO_KIND),
    )

    def containers(kids: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.lists(kids, max_size=4) | st.dictionaries(keys, kids, max_size=4)

    return st.recursive(leaves, containers, max_leaves=max_leaves)


def json_objects() -> st.SearchStrategy[dict[str, Any]]:
    """Struct contents: ordinary objects, objects nested 1..50 levels (the decoder's default
    limit is 100 *messages*, three per Struct level), and objects past 16 KiB of JSON."""
    keys = weighted((4, any_text(12)), (1, st.sampled_from(["", "k", "\x00", "é"])))
    return weighted(
        (6, st.dictionaries(keys, json_values(), max_size=6)),
        (
            2,
            st.builds(
                lambda d, leaf, lists: {"deep": nested(d, leaf, lists=lists)},
                st.integers(1, 50),
                st.sampled_from([1, "x", None, True]),
                st.booleans(),
            ),
        ),
        (1, st.builds(lambda n: {"blob": "x" * n}, st.sampled_from([16_000, 16_385, 40_000]))),
    )


# ---------------------------------------------------------------------------------------
# Message strategies
# ---------------------------------------------------------------------------------------


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


def _is_map(f: FD) -> bool:
    return f.type == FD.TYPE_MESSAGE and message_of(f).GetOptions().map_entry


@dataclass
class _Builder:
    """Builds message strategies in one of two regimes: *hostile* (every field draws from
    its full range of edge cases) or *plausible* (values a validating server accepts as far
    as names and types tell, so the request reaches the code behind validation)."""

    seeds: Seeds
    max_depth: int
    max_repeated: int
    anchor: float | None
    plausible: bool = False

    def message(self, desc: pbd.Descriptor, depth: int) -> st.SearchStrategy[Message]:
        wkt = self._well_known(desc)
        if wkt is not None:
            return wkt
        cls = message_class(desc)
        # Past max_depth only required (proto2) fields are filled, so the message serializes.
        cutoff = depth >= self.max_depth
        plain = [
            (f, self.values(f, depth))
            for f in desc.fields
            if f.containing_oneof is None and (f.is_required or not cutoff)
        ]
        oneofs = (
            [] if cutoff else [[(f, self.values(f, depth)) for f in o.fields] for o in desc.oneofs]
        )
        if not plain and not oneofs:
            return st.builds(cls)
        presence = {f.full_name: self._presence(f) for f, _ in plain}
        if self.plausible:  # one element mostly: each extra one is another chance to fail
            lists_size = st.sampled_from([1, 1, 1, 0, 2])
        else:
            lists_size = weighted((4, st.integers(0, 2)), (1, st.integers(0, self.max_repeated)))

        @st.composite
        def build(draw: st.DrawFn) -> Message:
            msg = cls()
            for f, values in plain:
                if f.is_repeated:
                    items = [draw(values) for _ in range(draw(lists_size))]
                    _set_repeated(msg, f, items)
                elif f.is_required or draw(presence[f.full_name]):
                    _set_singular(msg, f, draw(values))
            for members in oneofs:  # proto3 `optional` fields are one-member oneofs
                choice = draw(st.integers(-1, len(members) - 1))
                if choice >= 0:
                    f, values = members[choice]
                    _set_singular(msg, f, draw(values))
            return msg

        return build()

    def _presence(self, f: FD) -> st.SearchStrategy[bool]:
        """How often a singular field is set: ~70 % when hostile; when plausible, fields the
        seeds know (ids, dataset, content) ~90 % and the rest (filters, options) ~40 %."""
        if not self.plausible:
            share = 7
        elif self.seeds.core_for(f.name):
            share = 9
        else:
            share = 4
        return st.integers(0, 9).map(lambda n: n < share)

    def values(self, f: FD, depth: int) -> st.SearchStrategy[Any]:
        """Values of one element of field ``f`` (a map field: (key, value) pairs)."""
        if _is_map(f):
            entry = message_of(f)
            return st.tuples(
                self.values(entry.fields_by_name["key"], depth + 1),
                self.values(entry.fields_by_name["value"], depth + 1),
            )
        if f.type == FD.TYPE_MESSAGE or f.type == FD.TYPE_GROUP:
            return self.message(message_of(f), depth + 1)
        if self.plausible:
            return self._plausible_values(f)
        if f.type == FD.TYPE_STRING:
            return strings_for(f.name, self.seeds)
        if f.type == FD.TYPE_BYTES:
            return st.binary(max_size=64)
        if f.type == FD.TYPE_BOOL:
            return st.booleans()
        if f.type == FD.TYPE_ENUM:
            return enum_values(enum_of(f))
        if f.type == FD.TYPE_DOUBLE:
            return floats(64)
        if f.type == FD.TYPE_FLOAT:
            return floats(32)
        lo, hi = INT_RANGES[f.type]
        return integers(lo, hi)

    def _plausible_values(self, f: FD) -> st.SearchStrategy[Any]:
        if f.type == FD.TYPE_STRING:
            known = self.seeds.for_field(f.name)
            shaped = plausible_strings(f.name)
            if not known:
                return shaped
            # The first seeded value most often, so related fields (a request's thread_id
            # and its messages' thread_id) tend to agree; sometimes a fresh value (an id
            # the client picks, as CreateThread allows).
            if "token" in f.name:  # real cursors, some pointing somewhere unusual
                return weighted((5, st.sampled_from(known)), (3, mutated_cursors(known)))
            return weighted((5, st.just(known[0])), (3, st.sampled_from(known)), (2, shaped))
        if f.type == FD.TYPE_BYTES:
            return st.binary(max_size=16)
        if f.type == FD.TYPE_BOOL:
            return st.booleans()
        if f.type == FD.TYPE_ENUM:
            numbers = [v.number for v in enum_of(f).values]
            nonzero = [n for n in numbers if n != 0] or numbers
            return weighted((4, st.sampled_from(nonzero)), (1, st.sampled_from(numbers)))
        if f.type in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
            return st.floats(0.0, 1.0, width=64 if f.type == FD.TYPE_DOUBLE else 32)
        return weighted((4, st.integers(0, 10)), (1, st.integers(0, 1000)))  # every int kind

    def _well_known(self, desc: pbd.Descriptor) -> st.SearchStrategy[Message] | None:
        name = desc.full_name
        if self.plausible:
            return self._plausible_well_known(name)
        if name == "google.protobuf.Timestamp":
            return timestamps(self.anchor)
        if name == "google.protobuf.Duration":
            return durations()
        if name == "google.protobuf.Struct":
            return json_objects().map(struct_from)
        if name == "google.protobuf.Value":
            return json_values().map(value_from)
        if name == "google.protobuf.ListValue":
            return st.lists(json_values(), max_size=4).map(lambda v: value_from(v).list_value)
        return None

    def _plausible_well_known(self, name: str) -> st.SearchStrategy[Message] | None:
        from google.protobuf import duration_pb2, timestamp_pb2

        now = int(self.anchor if self.anchor is not None else time.time())
        if name == "google.protobuf.Timestamp":  # the past year, to the second
            return st.builds(
                timestamp_pb2.Timestamp, seconds=st.integers(now - 365 * 86_400, now - 60)
            )
        if name == "google.protobuf.Duration":
            return st.builds(duration_pb2.Duration, seconds=st.integers(0, 86_400))
        if name in ("google.protobuf.Struct", "google.protobuf.Value"):
            leaves = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), sentences())
            objects = st.dictionaries(
                st.sampled_from(["source", "tags", "n", "lang"]),
                leaves | st.lists(leaves, max_size=3),
                max_size=3,
            )
            if name == "google.protobuf.Value":
                return objects.map(value_from)
            return objects.map(struct_from)
        if name == "google.protobuf.ListValue":
            return st.lists(sentences(), max_size=3).map(lambda v: value_from(v).list_value)
        return None


def _set_singular(msg: Message, f: FD, value: Any) -> None:
    if f.type == FD.TYPE_MESSAGE or f.type == FD.TYPE_GROUP:
        getattr(msg, f.name).CopyFrom(value)
    else:
        setattr(msg, f.name, value)


def _set_repeated(msg: Message, f: FD, items: list[Any]) -> None:
    container = getattr(msg, f.name)
    if _is_map(f):
        value_field = message_of(f).fields_by_name["value"]
        for key, value in items:
            if value_field.type == FD.TYPE_MESSAGE:
                container[key].CopyFrom(value)
            else:
                container[key] = value
    elif f.type == FD.TYPE_MESSAGE or f.type == FD.TYPE_GROUP:
        for item in items:
            container.add().CopyFrom(item)
    else:
        container.extend(items)


def messages(
    descriptor: pbd.Descriptor,
    seeds: Seeds | None = None,
    *,
    max_depth: int = 5,
    max_repeated: int = 4,
    anchor: float | None = None,
    plausible_share: float = 0.5,
) -> st.SearchStrategy[Message]:
    """Arbitrary instances of the message type ``descriptor``.

    A ``plausible_share`` of the requests (rounded to tenths) is drawn *plausible*: seeded
    values for the fields seeds know (mostly the first one, so related fields agree),
    shaped values elsewhere (canonical UUIDs for ``*_id``, valid datasets, words), declared
    enum values, small non-negative numbers, recent timestamps and small Structs — valid as
    far as names and types tell, to reach the code behind validation. The rest is
    *hostile*: singular fields set about 70 % of the time with values from their full range
    of edges, repeated fields and maps with 0..2 elements mostly and up to
    ``max_repeated``, message nesting cut at ``max_depth`` (``Struct`` nesting is drawn
    separately, up to 50 levels). ``seeds`` biases strings towards known values by field
    name in both; ``anchor`` (default: now) is the time timestamps lie around.
    """
    seeds = seeds or Seeds()
    hostile = _Builder(seeds, max_depth, max_repeated, anchor).message(descriptor, 0)
    if plausible_share <= 0:
        return hostile
    plausible = _Builder(seeds, max_depth, max_repeated, anchor, plausible=True)
    share = round(plausible_share * 10)
    return weighted((share, plausible.message(descriptor, 0)), (10 - share, hostile))


def plausible_request(
    descriptor: pbd.Descriptor,
    seeds: Seeds | None = None,
    *,
    full: bool = False,
    anchor: float | None = None,
    _depth: int = 0,
) -> Message:
    """One request shaped to pass validation as far as field names tell: seeded values for
    the fields seeds know, the first non-zero value of enums, one element in repeated
    fields. ``full`` also fills every other field (ids with UUIDs, text, timestamps an hour
    before ``anchor``, a small Struct), so byte mutations have nested fields to corrupt.
    Nothing guarantees the server accepts it (a seeded thread_id on CreateThread already
    exists): it is a well-formed starting point."""
    seeds = seeds or Seeds()
    msg = message_class(descriptor)()
    now = anchor if anchor is not None else time.time()
    oneof_done: set[str] = set()
    for f in descriptor.fields:
        oneof = f.containing_oneof
        if oneof is not None:
            if not full or oneof.full_name in oneof_done:
                continue
            oneof_done.add(oneof.full_name)
        value = _plausible_value(f, seeds, full, now, _depth)
        if value is None:
            continue
        if f.is_repeated:
            _set_repeated(msg, f, [value])
        else:
            _set_singular(msg, f, value)
    return msg


def _plausible_value(f: FD, seeds: Seeds, full: bool, now: float, depth: int) -> Any:
    if _is_map(f):
        if not full:
            return None
        entry = message_of(f)
        key = _plausible_value(entry.fields_by_name["key"], seeds, True, now, depth + 1)
        value = _plausible_value(entry.fields_by_name["value"], seeds, True, now, depth + 1)
        return (key, value)
    if f.type == FD.TYPE_MESSAGE:
        name = message_of(f).full_name
        if name == "google.protobuf.Timestamp":
            from google.protobuf import timestamp_pb2

            return timestamp_pb2.Timestamp(seconds=int(now) - 3600) if full else None
        if name == "google.protobuf.Duration":
            from google.protobuf import duration_pb2

            return duration_pb2.Duration(seconds=60) if full else None
        if name == "google.protobuf.Struct":
            return struct_from({"source": "fuzz", "n": 1, "tags": ["a"]}) if full else None
        if name == "google.protobuf.Value":
            return value_from("fuzz") if full else None
        if name == "google.protobuf.ListValue":
            return value_from(["fuzz"]).list_value if full else None
        if depth >= 4:
            return None
        inner = plausible_request(message_of(f), seeds, full=full, anchor=now, _depth=depth + 1)
        return inner if (full or inner.ListFields()) else None
    if f.type == FD.TYPE_STRING:
        known = seeds.core_for(f.name)
        if known:
            return known[0]
        if not full:
            return None
        base = f.name.removesuffix("s")
        if base.endswith("_id"):
            return str(uuid.uuid5(uuid.NAMESPACE_URL, f.full_name))
        return "fuzz"
    if f.type == FD.TYPE_ENUM:
        nonzero = [v.number for v in enum_of(f).values if v.number != 0]
        return nonzero[0] if nonzero else None
    if not full:
        return None
    if f.type == FD.TYPE_BYTES:
        return b"fuzz"
    if f.type == FD.TYPE_BOOL:
        return True
    if f.type in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
        return 0.5
    return 1


# ---------------------------------------------------------------------------------------
# Wire format
# ---------------------------------------------------------------------------------------

WIRE_VARINT, WIRE_I64, WIRE_LEN, WIRE_SGROUP, WIRE_EGROUP, WIRE_I32 = 0, 1, 2, 3, 4, 5
MAX_FIELD_NUMBER = 2**29 - 1
_VARINT_TYPES = {
    FD.TYPE_INT32, FD.TYPE_INT64, FD.TYPE_UINT32, FD.TYPE_UINT64, FD.TYPE_SINT32,
    FD.TYPE_SINT64, FD.TYPE_BOOL, FD.TYPE_ENUM,
}  # fmt: skip
_I64_TYPES = {FD.TYPE_FIXED64, FD.TYPE_SFIXED64, FD.TYPE_DOUBLE}
_I32_TYPES = {FD.TYPE_FIXED32, FD.TYPE_SFIXED32, FD.TYPE_FLOAT}


def encode_varint(value: int) -> bytes:
    """Base-128 varint; negative values as their 64-bit two's complement (10 bytes)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def overlong_varint(value: int, length: int) -> bytes:
    """``value`` padded with continuation bytes to ``length`` bytes; past 10 bytes no
    decoder may accept it."""
    raw = bytearray(encode_varint(value))
    if len(raw) >= length:
        return bytes(raw)
    raw[-1] |= 0x80
    raw.extend(b"\x80" * (length - len(raw) - 1))
    raw.append(0x00)
    return bytes(raw)


def encode_tag(number: int, wire_type: int) -> bytes:
    return encode_varint((number << 3) | wire_type)


def encode_len(number: int, payload: bytes) -> bytes:
    """A length-delimited field: tag, length, payload."""
    return encode_tag(number, WIRE_LEN) + encode_varint(len(payload)) + payload


def wire_type_of(f: FD) -> int:
    """The wire type a field is normally encoded with (packed repeated scalars aside)."""
    if f.type in _VARINT_TYPES:
        return WIRE_VARINT
    if f.type in _I64_TYPES:
        return WIRE_I64
    if f.type in _I32_TYPES:
        return WIRE_I32
    if f.type == FD.TYPE_GROUP:
        return WIRE_SGROUP
    return WIRE_LEN


@dataclass(frozen=True)
class WireField:
    """One top-level field occurrence in serialized bytes: ``data[start:end]``."""

    number: int
    wire_type: int
    start: int
    end: int


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint longer than 10 bytes")


def scan_fields(data: bytes) -> list[WireField]:
    """The top-level fields of well-formed wire bytes (ValueError when malformed)."""
    fields: list[WireField] = []
    pos = 0
    while pos < len(data):
        start = pos
        key, pos = _read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == WIRE_VARINT:
            _, pos = _read_varint(data, pos)
        elif wire_type == WIRE_I64:
            pos += 8
        elif wire_type == WIRE_I32:
            pos += 4
        elif wire_type == WIRE_LEN:
            length, pos = _read_varint(data, pos)
            pos += length
        elif wire_type == WIRE_SGROUP:
            depth = 1
            while depth:
                inner, pos = _read_varint(data, pos)
                inner_type = inner & 7
                if inner_type == WIRE_SGROUP:
                    depth += 1
                elif inner_type == WIRE_EGROUP:
                    depth -= 1
                elif inner_type == WIRE_VARINT:
                    _, pos = _read_varint(data, pos)
                elif inner_type == WIRE_I64:
                    pos += 8
                elif inner_type == WIRE_I32:
                    pos += 4
                elif inner_type == WIRE_LEN:
                    length, pos = _read_varint(data, pos)
                    pos += length
                else:
                    raise ValueError(f"invalid wire type {inner_type}")
        else:
            raise ValueError(f"invalid wire type {wire_type}")
        if pos > len(data):
            raise ValueError("truncated field")
        fields.append(WireField(number, wire_type, start, pos))
    return fields


Path = tuple[FD, ...]


def field_paths(
    descriptor: pbd.Descriptor, accept: Callable[[FD], bool], max_depth: int = 4
) -> list[Path]:
    """Every path of fields (outermost first, through nested messages and map entries) that
    ends in a field ``accept`` likes, at most ``max_depth`` fields long."""
    out: list[Path] = []

    def walk(desc: pbd.Descriptor, prefix: Path) -> None:
        for f in desc.fields:
            path = (*prefix, f)
            if accept(f):
                out.append(path)
            if f.type == FD.TYPE_MESSAGE and len(path) < max_depth:
                walk(message_of(f), path)

    walk(descriptor, ())
    return out


def encode_in(path: Path, leaf: bytes) -> bytes:
    """Wraps ``leaf`` — the complete encoding of ``path[-1]`` — in length-delimited
    encodings of the enclosing message fields, ready to append to a valid message (the
    parser merges it in)."""
    for f in reversed(path[:-1]):
        leaf = encode_len(f.number, leaf)
    return leaf


def path_name(path: Path) -> str:
    return ".".join(f.name for f in path) or "(top level)"


def deep_struct_bytes(depth: int, *, lists: bool = False) -> bytes:
    """The wire content of a ``google.protobuf.Struct`` nested ``depth`` levels
    (``{"k": {"k": …}}``, or ``{"k": [[[…]]]}`` with ``lists``), built without protobuf:
    a client library would refuse to build what the server must refuse to parse."""
    if lists:
        inner = b""  # ListValue content
        for _ in range(depth):
            inner = encode_len(1, encode_len(6, inner))  # values { list_value { … } }
        value = encode_len(6, inner)
    else:
        struct = b""
        for _ in range(depth):
            value = encode_len(5, struct)  # Value.struct_value
            struct = encode_len(1, encode_len(1, b"k") + encode_len(2, value))  # fields
        return struct
    return encode_len(1, encode_len(1, b"k") + encode_len(2, value))


# ---------------------------------------------------------------------------------------
# Mutations
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mutation:
    """Malformed request bytes and what was done to a valid request to get them."""

    kind: str
    detail: str
    data: bytes

    def describe(self) -> str:
        return f"{self.kind}: {self.detail} ({len(self.data)} bytes)"


Mutator = Callable[[bytes, pbd.Descriptor, random.Random], Mutation | None]

INVALID_UTF8 = (
    b"\xff\xfe",  # never valid
    b"\xc3\x28",  # bad continuation
    b"\xed\xa0\x80",  # UTF-16 surrogate
    b"\xf4\x90\x80\x80",  # beyond U+10FFFF
    b"\xc0\xaf",  # overlong '/'
    b"abc\x80",  # stray continuation after ASCII
    b"\xe2\x82",  # truncated sequence
)


def _is_string(f: FD) -> bool:
    return f.type == FD.TYPE_STRING


def _is_message(f: FD) -> bool:
    return f.type == FD.TYPE_MESSAGE


def _all_fields(f: FD) -> bool:
    return True


def _unused_number(desc: pbd.Descriptor, rng: random.Random) -> int:
    used = {f.number for f in desc.fields}
    top = max(used, default=0)
    choices = [n for n in (top + 1, 99, 1000, 19_000, MAX_FIELD_NUMBER) if n not in used]
    return rng.choice(choices)


def _place(desc: pbd.Descriptor, rng: random.Random, inner: bytes) -> tuple[bytes, str]:
    """``inner`` (field encodings) at the top level or as the content of a random nested
    message field: returns the bytes to append and where they went."""
    paths = field_paths(desc, _is_message, max_depth=3)
    if paths and rng.random() < 0.5:
        path = rng.choice(paths)
        return encode_in(path, encode_len(path[-1].number, inner)), f"inside {path_name(path)}"
    return inner, "at top level"


def _random_payload(wire_type: int, rng: random.Random) -> bytes:
    if wire_type == WIRE_VARINT:
        return encode_varint(rng.choice([0, 1, 2**63 - 1, 2**64 - 1, rng.getrandbits(40)]))
    if wire_type == WIRE_I64:
        return rng.randbytes(8)
    if wire_type == WIRE_I32:
        return rng.randbytes(4)
    payload = rng.choice([b"", b"x", rng.randbytes(rng.randint(1, 16))])
    return encode_varint(len(payload)) + payload


def _bit_flip(base: bytes, desc: pbd.Descriptor, rng: random.Random) -> Mutation | None:
    if not base:
        return None
    data = bytearray(base)
    flips = rng.choice([1, 1, 2, 3, 8])
    positions = sorted(rng.randrange(len(data) * 8) for _ in range(flips))
    for bit in positions:
        data[bit // 8] ^= 1 << (bit % 8)
    return Mutation("bit_flip", f"flipped bits {positions}", bytes(data))


def _truncate(base: bytes, desc: pbd.Descriptor, rng: random.Random) -> Mutation | None:
    if len(base) < 2:
        return None
    cut = rng.randrange(1, len(base))
    return Mutation("truncate", f"kept {cut} of {len(base)} bytes", base[:cut])


def _truncated_length_prefix(
    base: bytes, desc: pbd.Descriptor, rng: random.Random
) -> Mutation | None:
    paths = field_paths(desc, lambda f: wire_type_of(f) == WIRE_LEN, max_depth=3)
    path = rng.choice(paths) if paths else None
    number = path[-1].number if path else _unused_number(desc, rng)
    tag = encode_tag(number, WIRE_LEN)
    variant = rng.choice(["unfinished varint", "longer than the rest", "nested"])
    if variant == "unfinished varint":
        tail = tag + rng.choice([b"\x80", b"\xff\xff", b"\x80\x80\x80"])
    elif variant == "longer than the rest":
        payload = rng.randbytes(rng.randint(0, 8))
        tail = tag + encode_varint(len(payload) + rng.randint(1, 1000)) + payload
    else:
        if path is None or len(path) < 2:
            tail = tag + b"\x80"
        else:  # the enclosing length is right; the inner prefix runs past it
            tail = encode_in(path, tag + encode_varint(50) + b"abc")
    where = path_name(path) if path else f"unknown field {number}"
    return Mutation("truncated_length_prefix", f"{variant} on {where}", base + tail)


def _invalid_utf8(base: bytes, desc: pbd.Descriptor, rng: random.Random) -> Mutation | None:
    paths = field_paths(desc, _is_string, max_depth=4)
    if not paths:
        return None
    path = rng.choice(paths)
    payload = rng.choice(INVALID_UTF8)
    tail = encode_in(path, encode_len(path[-1].number, payload))
    return Mutation("invalid_utf8", f"{payload!r} in {path_name(path)}", base + tail)


def _wrong_wire_type(base: bytes, desc: pbd.Descriptor, rng: random.Random) -> Mutation | None:
    paths = field_paths(desc, _all_fields, max_depth=3)
    if not paths:
        return None
    path = rng.choice(paths)
    natural = wire_type_of(path[-1])
    wire_type = rng.choice([w for w in (WIRE_VARINT, WIRE_I64, WIRE_LEN, WIRE_I32) if w != natural])
    leaf = encode_tag(path[-1].number, wire_type) + _random_payload(wire_type, rng)
    return Mutation(
        "wrong_wire_type",
        f"{path_name(path)} sent as wire type {wire_type} (is {natural})",
        base + encode_in(path, leaf),
    )


def _invalid_wire_type(base: bytes, desc: pbd.Descriptor, rng: random.Random) -> Mutation | None:
    number = rng.choice([f.number for f in desc.fields] or [1])
    variants = {
        "wire type 6": encode_tag(number, 6) + b"\x00",
        "wire type 7": encode_tag(number, 7) + b"\x00",
        "stray end-group": encode_tag(number, WIRE_EGROUP),
        "unterminated group": encode_tag(number, WIRE_SGROUP) + encode_tag(number, WIRE_VARINT),
        "field number 0": b"\x02\x01x",
        "field number 2^29": encode_varint((2**29 << 3) | WIRE_VARINT) + b"\x01",
    }
    name = rng.choice(sorted(variants))
    inner, where = _place(desc, rng, variants[name])
    return Mutation("invalid_wire_type", f"{name} (field {number}) {where}", base + inner)


def _overlong_varint(base: bytes, desc: pbd.Descriptor, rng: random.Random) -> Mutation | None:
    paths = field_paths(desc, lambda f: wire_type_of(f) == WIRE_VARINT, max_depth=3)
    length = rng.choice([10, 11, 12, 20])
    variant = rng.choice(["value", "tag", "length prefix"])
    if variant == "value" and paths:
        path = rng.choice(paths)
        leaf = encode_tag(path[-1].number, WIRE_VARINT) + overlong_varint(1, length)
        tail, where = encode_in(path, leaf), path_name(path)
    elif variant != "length prefix" or not desc.fields:
        variant = "tag"
        number = rng.choice([f.number for f in desc.fields] or [1])
        tail, where = _place(desc, rng, overlong_varint(number << 3, length) + b"\x01")
    else:
        number = rng.choice([f.number for f in desc.fields])
        inner = encode_tag(number, WIRE_LEN) + overlong_varint(1, length) + b"x"
        tail, where = _place(desc, rng, inner)
    return Mutation("overlong_varint", f"{length}-byte varint as {variant}, {where}", base + tail)


def _varint_edges(base: bytes, desc: pbd.Descriptor, rng: random.Random) -> Mutation | None:
    paths = field_paths(desc, lambda f: wire_type_of(f) == WIRE_VARINT, max_depth=3)
    if not paths:
        return None
    path = rng.choice(paths)
    value = rng.choice([2**64 - 1, 2**63, 2**63 - 1, 2**32, 2**31, 2**31 - 1, -1, 2])
    leaf = encode_tag(path[-1].number, WIRE_VARINT) + encode_varint(value)
    return Mutation(
        "varint_edges",
        f"{path_name(path)} = {value} on the wire",
        base + encode_in(path, leaf),
    )


def _huge_length_prefix(base: bytes, desc: pbd.Descriptor, rng: random.Random) -> Mutation | None:
    paths = field_paths(desc, lambda f: wire_type_of(f) == WIRE_LEN, max_depth=3)
    number = rng.choice(paths)[-1].number if paths else _unused_number(desc, rng)
    size = rng.choice([2**31 - 1, 2**31, 2**32 + 5, 2**62, 2**64 - 1, 64 * 2**20 + 1])
    inner = encode_tag(number, WIRE_LEN) + encode_varint(size) + b"abc"
    tail, where = _place(desc, rng, inner)
    return Mutation(
        "huge_length_prefix", f"field {number} claims {size} bytes {where}", base + tail
    )


def _deep_struct(base: bytes, desc: pbd.Descriptor, rng: random.Random) -> Mutation | None:
    names = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
    paths = field_paths(
        desc, lambda f: _is_message(f) and message_of(f).full_name in names, max_depth=3
    )
    if not paths:
        return None
    path = rng.choice(paths)
    depth = rng.choice([40, 50, 60, 64, 100, 150])
    lists = rng.random() < 0.3
    struct = deep_struct_bytes(depth, lists=lists)
    target = message_of(path[-1]).full_name
    if target == "google.protobuf.Value":
        content = encode_len(5, struct)
    elif target == "google.protobuf.ListValue":
        content = encode_len(1, encode_len(5, struct))
    else:
        content = struct
    tail = encode_in(path, encode_len(path[-1].number, content))
    shape = "lists" if lists else "objects"
    return Mutation(
        "deep_struct", f"{path_name(path)} nested {depth} levels of {shape}", base + tail
    )


def _deep_groups(base: bytes, desc: pbd.Descriptor, rng: random.Random) -> Mutation | None:
    number = _unused_number(desc, rng)
    depth = rng.choice([64, 100, 101, 150, 1000])
    inner = encode_tag(number, WIRE_SGROUP) * depth + encode_tag(number, WIRE_EGROUP) * depth
    tail, where = _place(desc, rng, inner)
    return Mutation(
        "deep_groups", f"unknown field {number}: {depth} nested groups {where}", base + tail
    )


def _duplicate_field(base: bytes, desc: pbd.Descriptor, rng: random.Random) -> Mutation | None:
    try:
        fields = scan_fields(base)
    except ValueError:
        return None
    if not fields:
        return None
    if rng.random() < 0.2:
        return Mutation("duplicate_field", "whole message twice (merge)", base + base)
    chosen = rng.choice(fields)
    chunk = base[chosen.start : chosen.end]
    copies = rng.choice([1, 2, 1000]) if len(chunk) <= 200 else rng.choice([1, 2])
    data = base[: chosen.end] + chunk * copies + base[chosen.end :]
    return Mutation("duplicate_field", f"field {chosen.number} repeated {copies} more times", data)


def _unknown_field(base: bytes, desc: pbd.Descriptor, rng: random.Random) -> Mutation | None:
    number = _unused_number(desc, rng)
    wire_type = rng.choice([WIRE_VARINT, WIRE_I64, WIRE_LEN, WIRE_I32])
    inner, where = _place(
        desc, rng, encode_tag(number, wire_type) + _random_payload(wire_type, rng)
    )
    return Mutation("unknown_field", f"field {number} wire type {wire_type} {where}", base + inner)


def _nested_garbage(base: bytes, desc: pbd.Descriptor, rng: random.Random) -> Mutation | None:
    paths = field_paths(desc, _is_message, max_depth=3)
    if not paths:
        return None
    path = rng.choice(paths)
    garbage = rng.randbytes(rng.choice([1, 3, 16, 64]))
    tail = encode_in(path, encode_len(path[-1].number, garbage))
    return Mutation(
        "nested_garbage", f"{len(garbage)} random bytes as {path_name(path)}", base + tail
    )


def _garbage(base: bytes, desc: pbd.Descriptor, rng: random.Random) -> Mutation | None:
    size = rng.choice([1, 2, 7, 64, 1024])
    return Mutation("garbage", f"{size} random bytes instead of the request", rng.randbytes(size))


def _splice(base: bytes, desc: pbd.Descriptor, rng: random.Random) -> Mutation | None:
    at = rng.randint(0, len(base))
    junk = rng.randbytes(rng.randint(1, 8))
    return Mutation("splice", f"{junk!r} inserted at byte {at}", base[:at] + junk + base[at:])


MUTATORS: dict[str, Mutator] = {
    "bit_flip": _bit_flip,
    "truncate": _truncate,
    "truncated_length_prefix": _truncated_length_prefix,
    "invalid_utf8": _invalid_utf8,
    "wrong_wire_type": _wrong_wire_type,
    "invalid_wire_type": _invalid_wire_type,
    "overlong_varint": _overlong_varint,
    "varint_edges": _varint_edges,
    "huge_length_prefix": _huge_length_prefix,
    "deep_struct": _deep_struct,
    "deep_groups": _deep_groups,
    "duplicate_field": _duplicate_field,
    "unknown_field": _unknown_field,
    "nested_garbage": _nested_garbage,
    "garbage": _garbage,
    "splice": _splice,
}
"""Every byte mutation by name. Each takes (valid bytes, the message descriptor, a seeded
``random.Random``) and returns a :class:`Mutation`, or None when it does not apply to the
type (no string field to corrupt, no Struct to nest …)."""


def applicable_kinds(descriptor: pbd.Descriptor, base: bytes = b"\x08\x01") -> list[str]:
    """The mutation kinds that apply to a message type."""
    rng = random.Random(0)
    return [name for name, m in MUTATORS.items() if m(base, descriptor, rng) is not None]


def mutations(
    descriptor: pbd.Descriptor,
    bases: Sequence[bytes],
    count: int,
    rng: random.Random,
    kinds: Sequence[str] | None = None,
) -> list[Mutation]:
    """``count`` mutations of the serialized valid requests ``bases``, cycling through the
    applicable ``kinds`` (default: all of :data:`MUTATORS`) so every kind is used as soon
    as ``count`` reaches their number; reproducible for a given ``rng`` seed."""
    if not bases:
        raise ValueError("mutations need at least one valid request to start from")
    names = list(kinds or MUTATORS)
    out: list[Mutation] = []
    misses = 0
    i = 0
    while len(out) < count and misses < len(names):
        name = names[i % len(names)]
        i += 1
        mutation = MUTATORS[name](rng.choice(list(bases)), descriptor, rng)
        if mutation is None:
            misses += 1
            continue
        misses = 0
        out.append(mutation)
    return out


def mutation_strategy(
    descriptor: pbd.Descriptor,
    bases: st.SearchStrategy[bytes] | Sequence[bytes],
    kinds: Sequence[str] | None = None,
) -> st.SearchStrategy[Mutation]:
    """The mutations as a hypothesis strategy (valid bytes from ``bases``, a kind, and a
    hypothesis-controlled random source for its parameters)."""
    base_strategy = bases if isinstance(bases, st.SearchStrategy) else st.sampled_from(bases)
    names = list(kinds or MUTATORS)

    def build(base: bytes, name: str, rng: random.Random) -> Mutation:
        mutation = MUTATORS[name](base, descriptor, rng)
        return mutation or Mutation("unchanged", f"{name} does not apply", base)

    return st.builds(
        build, base_strategy, st.sampled_from(names), st.randoms(use_true_random=False)
    )


# ---------------------------------------------------------------------------------------
# Raw calls
# ---------------------------------------------------------------------------------------


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
            if _is_map(f):
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
        if _is_map(f):
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


# ---------------------------------------------------------------------------------------
# Store fingerprints
# ---------------------------------------------------------------------------------------

StoreFingerprint = dict[str, tuple[int, str]]


def store_fingerprint(engine: Engine, schema: str = "public") -> StoreFingerprint:
    """Row count and an order-independent content checksum of every table in ``schema``,
    in one statement (one snapshot). Tables come from the catalog, so new tables are
    covered without changing the caller. Only tables that hold rows are read (plain tables
    and leaf partitions, ``relkind = 'r'``): a partitioned parent's rows are its
    partitions', and reading both planned every partition twice (3.4x the time of a
    snapshot, 52 -> 15 ms on the empty schema, which the fuzz suite takes twice a call)."""
    with engine.connect() as conn:
        tables = list(
            conn.execute(
                text(
                    "SELECT c.relname FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = :schema AND c.relkind = 'r' ORDER BY 1"
                ),
                {"schema": schema},
            ).scalars()
        )
        if not tables:
            return {}
        quote = conn.dialect.identifier_preparer.quote
        parts = [
            f"SELECT :t{i} AS name, count(*) AS n, "
            f"coalesce(sum(hashtextextended(x::text, 0)::numeric), 0)::text AS checksum "
            f"FROM {quote(schema)}.{quote(table)} AS x"
            for i, table in enumerate(tables)
        ]
        rows = conn.execute(
            text(" UNION ALL ".join(parts)), {f"t{i}": t for i, t in enumerate(tables)}
        ).all()
    return {str(name): (int(n), str(checksum)) for name, n, checksum in rows}


def fingerprint_changes(before: StoreFingerprint, after: StoreFingerprint) -> list[str]:
    """What differs between two fingerprints, one line per table."""
    changes = []
    for table in sorted(set(before) | set(after)):
        old, new = before.get(table), after.get(table)
        if old == new:
            continue
        if old is None or new is None:
            changes.append(f"{table}: table {'appeared' if old is None else 'vanished'}")
        elif old[0] != new[0]:
            changes.append(f"{table}: {old[0]} -> {new[0]} rows")
        else:
            changes.append(f"{table}: contents changed ({old[0]} rows)")
    return changes
