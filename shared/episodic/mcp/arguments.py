"""A tool call's arguments: ISO 8601 times (:func:`parse_time`), and the strict check of the
arguments against the tool's input schema that the server makes before a tool runs
(:func:`schema_problems`), with the words for what pydantic refuses
(:func:`arguments_error`). Each problem names its argument, for the model to correct."""

from datetime import UTC, datetime
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError


def parse_time(value: str | None, name: str) -> datetime | None:
    """An ISO 8601 argument (a date, or a time; naive means UTC), or None. A time that is
    not between 0001-01-01 and 9999-12-31 in UTC (what a timestamp holds), such as
    ``0001-01-01T00:00:00+14:00``, is a tool error naming the argument and the range."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.lower() == "now":
        return datetime.now(UTC)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ToolError(
            f"{name}={value!r} is not an ISO 8601 date or time; use e.g. 2026-05-14 or "
            "2026-05-14T14:22:00Z"
        ) from None
    if not parsed.tzinfo:
        return parsed.replace(tzinfo=UTC)
    try:
        parsed.astimezone(UTC)  # the conversion every later step makes
    except OverflowError:
        raise ToolError(
            f"{name}={value!r} is out of range: use a time between 0001-01-01T00:00:00Z and "
            "9999-12-31T23:59:59Z (in UTC)"
        ) from None
    return parsed


#: How many problems a refusal names one by one (50,000 unknown arguments made a 5.5 MB
#: answer): the model fixes the first few and is told about the rest when it calls again.
_NAMED_AT_MOST = 10


def schema_problems(
    schema: dict[str, Any], arguments: dict[str, Any], tool: str = "this tool"
) -> list[str]:
    """What in ``arguments`` the JSON schema of ``tool`` refuses, each naming its argument
    (an argument the schema does not name too)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    problems = []
    # The SDK's schemas allow other properties, and its parsing drops them: an argument the
    # tool does not have (min_relevance on recall) would be ignored without a word, and the
    # model would believe it applied.
    known = schema.get("properties")
    if isinstance(known, dict):
        for name in sorted(set(arguments) - set(known)):
            problems.append(
                f"`{name}` is not an argument of {tool}; its arguments are {', '.join(known)}"[:300]
            )
    for error in sorted(validator.iter_errors(arguments), key=lambda e: list(e.path)):
        where = ".".join(str(part) for part in error.absolute_path) or "arguments"
        if error.validator == "required":
            problems.append(f"{error.message}")
        elif error.validator == "anyOf" and error.context:
            # An optional argument (anyOf [its type, null]): of the right type but out of
            # its range, say the range; else say the type, not "null".
            beyond_type = [c for c in error.context if c.validator != "type"]
            if beyond_type:
                problems.append(f"`{where}`: {beyond_type[0].message}"[:300])
                continue
            kinds = [c.schema.get("type") for c in error.context if isinstance(c.schema, dict)]
            wanted = " or ".join(str(k) for k in kinds if k and k != "null") or "another value"
            problems.append(f"`{where}` must be {wanted}, not {error.instance!r}"[:300])
        else:
            problems.append(f"`{where}`: {error.message}"[:300])
    if len(problems) > _NAMED_AT_MOST:  # the refusal goes into the model's context
        problems[_NAMED_AT_MOST:] = [f"and {len(problems) - _NAMED_AT_MOST} more"]
    return problems


def arguments_error(tool: str, err: ValidationError) -> str:
    """Arguments the tool's input schema refuses, each named, in words (pydantic's own text
    names its model and links its docs)."""
    problems = []
    for problem in err.errors(include_url=False):
        where = ".".join(str(part) for part in problem["loc"]) or "arguments"
        if problem["type"] == "missing":
            problems.append(f"`{where}` is required")
        else:
            problems.append(f"`{where}`: {problem['msg']}")
    return (
        f"invalid arguments for {tool}: {'; '.join(problems)} (the tool's input schema says "
        "what each argument takes)"
    )
