"""A message's metadata Struct becomes the same plain JSON data as protobuf's own
``json_format.MessageToDict`` gives (convert.struct_to_dict is a faster walk of it), and a
value JSON cannot hold is the caller's error, naming the field."""

from __future__ import annotations

import json
import math

import pytest
from google.protobuf import json_format, struct_pb2

from episodic import convert
from episodic.config import IngestSettings
from episodic.crypto import ClearKey, seal_json
from episodic.errors import InvalidArgument
from episodic.services.ingest import domain

SAMPLES = [
    {},
    {"source": "bench", "channel": "web", "lang": "en"},
    {"n": 1, "x": 2.5, "neg": -3, "big": 1e300, "tiny": 5e-324},
    {"flag": True, "off": False, "nothing": None},
    {"list": [1, "two", None, False, [3, [4]], {"k": "v"}], "empty_list": [], "empty": {}},
    {"deep": {"a": {"b": {"c": {"d": ["e", {"f": 0}]}}}}},
    {"unicode": "héllo ✓ 日本", "quote": 'say "hi"\\n', "": "empty key"},
]


@pytest.mark.parametrize("data", SAMPLES)
def test_the_same_data_as_message_to_dict(data: dict) -> None:  # type: ignore[type-arg]
    struct = struct_pb2.Struct()
    struct.update(data)
    converted = convert.struct_to_dict(struct)
    assert converted == json_format.MessageToDict(struct)
    # and the same JSON text, types included (1.0 stays a float, as before)
    assert json.dumps(converted) == json.dumps(json_format.MessageToDict(struct))


def test_a_value_without_a_kind_is_null_as_before() -> None:
    struct = struct_pb2.Struct()
    struct.fields["unset"].CopyFrom(struct_pb2.Value())
    assert convert.struct_to_dict(struct) == {"unset": None} == json_format.MessageToDict(struct)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_infinities_are_invalid_arguments_at_any_depth(bad: float) -> None:
    for data in ({"x": bad}, {"a": {"b": [1, bad]}}):
        struct = struct_pb2.Struct()
        struct.update(data)
        with pytest.raises(InvalidArgument) as caught:
            convert.struct_to_dict(struct, "messages[3].metadata")
        assert caught.value.metadata["field"] == "messages[3].metadata"
        assert "NaN or an infinity" in caught.value.message


def test_the_checked_metadata_json_is_what_is_sealed() -> None:
    data = SAMPLES[4] | SAMPLES[6]
    message = domain.NewMessage(role="user", content="hi", metadata=data)
    domain.check_new_messages([message], IngestSettings())
    key = ClearKey("ds")
    assert message.metadata_json is not None
    assert json.loads(message.metadata_json) == data
    # the text check_new_messages encoded is byte for byte what seal_json seals
    assert domain.sealed_metadata(key, message) == seal_json(key, data, "messages.metadata")
