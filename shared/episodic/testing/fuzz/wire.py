"""The protobuf wire format, written and read by hand.

The byte mutations (:mod:`~episodic.testing.fuzz.mutators`) build bytes no client library
would produce — invalid wire types, overlong varints, ``Struct`` nested past any decoder's
limit — so they need the encoding without protobuf: varints, tags, length-delimited
fields, a scan of the top-level fields of serialized bytes, and the paths of fields
through nested messages at which to place a corrupted leaf.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf import descriptor as pbd

from episodic.testing.fuzz.discovery import FD, message_of

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
