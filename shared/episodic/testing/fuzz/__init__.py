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

Its modules, one part each: :mod:`~episodic.testing.fuzz.discovery` (:class:`Rpc`,
:func:`discover_rpcs`, the descriptor helpers), :mod:`~episodic.testing.fuzz.values` (the
value strategies and :class:`Seeds`), :mod:`~episodic.testing.fuzz.strategies` (the message
strategies, :func:`plausible_request`), :mod:`~episodic.testing.fuzz.wire` (the wire format
written and read by hand), :mod:`~episodic.testing.fuzz.mutators` (the byte mutations),
:mod:`~episodic.testing.fuzz.calls` (raw calls, reflection, :func:`describe`) and
:mod:`~episodic.testing.fuzz.fingerprints` (the store fingerprints).
"""

from episodic.testing.fuzz.calls import (
    CallResult,
    call_raw,
    describe,
    message_depth,
    served_services,
)
from episodic.testing.fuzz.discovery import Rpc, discover_rpcs, enum_of, message_class, message_of
from episodic.testing.fuzz.fingerprints import (
    StoreFingerprint,
    fingerprint_changes,
    store_fingerprint,
)
from episodic.testing.fuzz.mutators import (
    MUTATORS,
    Mutation,
    Mutator,
    applicable_kinds,
    mutation_strategy,
    mutations,
)
from episodic.testing.fuzz.strategies import messages, plausible_request
from episodic.testing.fuzz.values import (
    Seeds,
    datasets,
    durations,
    enum_values,
    floats,
    integers,
    json_objects,
    json_values,
    mutated_cursors,
    nested,
    page_tokens,
    plausible_strings,
    strings_for,
    struct_from,
    timestamps,
    uuid_strings,
    value_from,
    weighted,
)
from episodic.testing.fuzz.wire import (
    WireField,
    deep_struct_bytes,
    encode_in,
    encode_len,
    encode_tag,
    encode_varint,
    field_paths,
    overlong_varint,
    scan_fields,
    wire_type_of,
)

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
