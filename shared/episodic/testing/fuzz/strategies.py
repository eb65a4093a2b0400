"""Message strategies: any request type, built from its descriptor.

:func:`messages` draws a share of requests *plausible* (values a validating server accepts as
far as field names and types tell, so the request reaches the code behind validation) and
the rest *hostile* (every field from its full range of edges, nesting and repeated fields
bounded). :func:`plausible_request` builds one well-formed request directly, the starting
point of the byte mutations (:mod:`~episodic.testing.fuzz.mutators`).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor as pbd
from google.protobuf.message import Message
from hypothesis import strategies as st

from episodic.testing.fuzz.discovery import FD, enum_of, is_map, message_class, message_of
from episodic.testing.fuzz.values import (
    INT_RANGES,
    Seeds,
    durations,
    enum_values,
    floats,
    integers,
    json_objects,
    json_values,
    mutated_cursors,
    plausible_strings,
    sentences,
    strings_for,
    struct_from,
    timestamps,
    value_from,
    weighted,
)


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
        if is_map(f):
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
    if is_map(f):
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
    if is_map(f):
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
