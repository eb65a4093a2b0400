"""Value strategies: hypothesis strategies for scalars, strings and well-known types.

Every scalar kind with its edges (int64/uint64 limits, NaN and infinities), strings (unicode,
NUL, very long, UUIDs in several spellings, plausible datasets and page tokens, real cursors
with one value changed), enums in and out of range, ``Timestamp``/``Duration`` at and past
their range, and JSON-like data for ``Struct``/``Value``/``ListValue``. :class:`Seeds` biases
strings towards real values by field name, so a useful share of requests gets past
validation into the deep code paths. The message strategies
(:mod:`~episodic.testing.fuzz.strategies`) pick from these by field type.
"""

from __future__ import annotations

import base64
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from google.protobuf import descriptor as pbd
from google.protobuf import struct_pb2
from google.protobuf.message import Message
from hypothesis import strategies as st

from episodic.testing.fuzz.discovery import FD


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
