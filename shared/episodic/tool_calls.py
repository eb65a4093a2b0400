"""Tool calls on messages, in OpenAI's chat format (the format agent frameworks emit).

An assistant message may carry ``tool_calls`` (each an ``id``, the tool's ``name`` and its
``arguments`` as JSON text) and then empty content; a tool message names the call it
answers (``tool_call_id``) and the tool (``name``). This module holds the shape and its
rules, shared by Ingest (which checks what it stores), the Summariser (which reads them back
to render prompts and learn procedures), export/import and the SDK.

Stored: ``messages.tools`` holds :func:`payload`'s JSON, sealed with the dataset's key like
content; ``messages.tool_call_id`` the answered call's id in the clear (an opaque id the
model API made up: Ingest checks that the call exists without opening sealed rows).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from episodic.errors import InvalidArgument
from episodic.validation import check_text

__all__ = [
    "MAX_CALL_ID_CHARS",
    "MAX_TOOL_CALLS",
    "ToolCall",
    "check_arguments",
    "check_call_id",
    "check_tool_name",
    "from_payload",
    "payload",
    "render_call",
    "rendered_content",
]

#: Most calls one assistant message may make.
MAX_TOOL_CALLS = 128
MAX_CALL_ID_CHARS = 128
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")
_CALL_ID = re.compile(r"[!-~]{1,128}")  # printable ASCII, no whitespace


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call an assistant message made."""

    id: str
    name: str
    arguments: str  # JSON text of an object, as the model wrote it

    @classmethod
    def from_openai(cls, value: Mapping[str, Any]) -> ToolCall:
        """A call as OpenAI writes it (``{"id", "type": "function", "function": {"name",
        "arguments"}}``) or flat (``{"id", "name", "arguments"}``), its arguments JSON text
        or an object. ValueError when it has no string ``id`` or function ``name`` (the
        rest is Ingest's to check: :func:`check_arguments`, :func:`check_call_id`)."""
        function = value.get("function", value)
        if not isinstance(function, Mapping) or not isinstance(value.get("id"), str):
            raise ValueError("needs an 'id' and a function 'name'")
        name, arguments = function.get("name"), function.get("arguments", "{}")
        if not isinstance(name, str):
            raise ValueError("needs a function 'name'")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        return cls(id=value["id"], name=name, arguments=arguments)

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict ({} when they are not a JSON object: stored ones are)."""
        try:
            value = json.loads(self.arguments or "{}")
        except (ValueError, RecursionError):  # stored before Ingest refused such text
            return {}
        return value if isinstance(value, dict) else {}


def check_call_id(value: str, field: str) -> str:
    if not _CALL_ID.fullmatch(value):
        raise InvalidArgument(
            f"{field} must be 1-{MAX_CALL_ID_CHARS} printable characters without spaces "
            f"(got {value[:40]!r})",
            field=field,
        )
    return value


def check_tool_name(value: str, field: str) -> str:
    if not _TOOL_NAME.fullmatch(value):
        raise InvalidArgument(
            f"{field} must be 1-128 characters of letters, digits and _ . : - (got {value[:40]!r})",
            field=field,
        )
    return value


def check_arguments(value: str, field: str) -> str:
    """The arguments' JSON text, checked to be an object; empty means no arguments ("{}")."""
    if not value.strip():
        return "{}"
    check_text(value, field)
    try:
        parsed = json.loads(value, parse_constant=_not_json)
    except _NotJSON as err:
        # NaN and Infinity: Python reads them, JSON (RFC 8259) has no such numbers, and a
        # stricter reader (JavaScript's JSON.parse, PostgreSQL's jsonb) of an export or a
        # prompt would refuse the whole message.
        raise InvalidArgument(
            f"{field} holds {err.constant}, which is not a JSON number; send it as a string "
            f'(e.g. {{"ratio": "{err.constant}"}}) or null',
            field=field,
        ) from None
    except json.JSONDecodeError as err:
        raise InvalidArgument(
            f"{field} is not JSON ({err.msg} at character {err.pos}); send the arguments "
            'as JSON text of an object, e.g. {"order_id": "#W1"}',
            field=field,
        ) from None
    except RecursionError:
        # Valid JSON nested deeper than Python's parser goes (~1,000 levels): no tool's
        # arguments are, and every later reader (procedures, prompts, export) parses them.
        raise InvalidArgument(
            f"{field} nests arrays and objects too deep to read; send the arguments as a "
            "JSON object of ordinary depth",
            field=field,
        ) from None
    except ValueError as err:
        # An integer of more digits than Python converts (sys.get_int_max_str_digits):
        # JSONDecodeError is a ValueError too, so this comes after it.
        raise InvalidArgument(
            f"{field} holds a number Python cannot read ({err}); send long numbers "
            'as strings, e.g. {"order_id": "123…"}',
            field=field,
        ) from None
    if not isinstance(parsed, dict):
        raise InvalidArgument(
            f"{field} must be a JSON object, not {type(parsed).__name__}", field=field
        )
    try:  # an escaped lone surrogate ("\ud800") reads as a string no UTF-8 can hold
        json.dumps(parsed, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(
            f"{field} escapes a lone UTF-16 surrogate (\\ud800-\\udfff without its pair), "
            "which is no character; send the text as UTF-8 or escape both halves of the pair",
            field=field,
        ) from None
    return value


class _NotJSON(ValueError):
    def __init__(self, constant: str) -> None:
        super().__init__(constant)
        self.constant = constant


def _not_json(constant: str) -> Any:
    raise _NotJSON(constant)


def payload(tool_calls: Sequence[ToolCall], name: str | None) -> dict[str, Any] | None:
    """What ``messages.tools`` holds for a message (None when it has no tool parts)."""
    if not tool_calls and not name:
        return None
    out: dict[str, Any] = {}
    if tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in tool_calls
        ]
    if name:
        out["name"] = name
    return out


def from_payload(value: Mapping[str, Any] | None) -> tuple[tuple[ToolCall, ...], str]:
    """The tool calls and the tool name a stored payload holds."""
    if not value:
        return (), ""
    calls = tuple(
        ToolCall(id=str(c["id"]), name=str(c["name"]), arguments=str(c.get("arguments") or "{}"))
        for c in value.get("tool_calls") or ()
    )
    return calls, str(value.get("name") or "")


def render_call(call: ToolCall) -> str:
    """A call as a prompt shows it: ``name(arg=value, …)``."""
    args = ", ".join(
        f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in call.parsed_arguments().items()
    )
    return f"{call.name}({args})"


def rendered_content(content: str, tools: Mapping[str, Any] | None) -> str:
    """A message's text as prompts and the recall index read it: an assistant's calls
    after its words (``[called name(arg=value)]``), a tool's result after the tool's name
    (``[name returned] …``). Content alone when the message has no tool parts."""
    calls, name = from_payload(tools)
    if calls:
        rendered = "\n".join(f"[called {render_call(c)}]" for c in calls)
        return f"{content}\n{rendered}" if content.strip() else rendered
    if name:
        return f"[{name} returned] {content}"
    return content
