"""Byte mutations: malformed wire bytes crafted by hand from a valid request.

Bit flips, truncation, truncated and huge length prefixes, invalid UTF-8 in any (nested)
string field, wrong and invalid wire types, overlong and out-of-range varints, ``Struct``
nested 40–150 levels built on the wire, deeply nested unknown groups, duplicated and
unknown fields, garbage. Every mutation says what it did (:class:`Mutation`), so a
failure report is readable without shrinking. :data:`MUTATORS` holds them by name;
:func:`mutations` and :func:`mutation_strategy` draw from them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from google.protobuf import descriptor as pbd
from hypothesis import strategies as st

from episodic.testing.fuzz.discovery import FD, message_of
from episodic.testing.fuzz.wire import (
    MAX_FIELD_NUMBER,
    WIRE_EGROUP,
    WIRE_I32,
    WIRE_I64,
    WIRE_LEN,
    WIRE_SGROUP,
    WIRE_VARINT,
    deep_struct_bytes,
    encode_in,
    encode_len,
    encode_tag,
    encode_varint,
    field_paths,
    overlong_varint,
    path_name,
    scan_fields,
    wire_type_of,
)


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
