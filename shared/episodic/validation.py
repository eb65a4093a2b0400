"""Input checks shared by the servicers. Each raises InvalidArgument with a message that
names the field and says what a valid value looks like."""

from __future__ import annotations

import base64
import json
import re
import uuid
from typing import Any

from episodic.errors import InvalidArgument

#: A dataset name, the one grammar of every RPC, the CLI, imports and key scopes: segments
#: of ASCII letters, digits and ``_ . : @ -`` joined by ``/`` (a tenant's datasets share a
#: prefix, e.g. ``acme/user_42``, which API keys can be scoped to), none of them empty and
#: none only dots (``ten/../dsB`` would read as another tenant's name wherever a path is
#: made of it), at most MAX_DATASET_CHARS long. ASCII only: no control, invisible or
#: look-alike characters, nothing to normalise. Matched with fullmatch: ``$`` alone would
#: also accept a trailing newline.
_SEGMENT = r"(?!\.+(?:/|\Z))[A-Za-z0-9_.:@-]+"
DATASET_PATTERN = re.compile(rf"{_SEGMENT}(?:/{_SEGMENT})*")
MAX_DATASET_CHARS = 128
MAX_PAGE_TOKEN_CHARS = 1024


def check_text(value: str, field: str) -> None:
    """INVALID_ARGUMENT for text PostgreSQL cannot store (a NUL character), naming
    ``field``; before it reaches a statement, whose error would read as our bug."""
    if "\x00" in value:
        raise InvalidArgument(
            f"{field} contains a NUL character, which cannot be stored", field=field
        )


def parse_uuid(value: str, field: str) -> uuid.UUID:
    """Parses a required UUID field."""
    if not value:
        raise InvalidArgument(f"{field} is required", field=field)
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        raise InvalidArgument(
            f"{field} {value[:80]!r} is not a UUID (expected e.g. "
            "'0b7f3e0c-6a3c-4c1e-9a57-2f1b8f4e5d21')",
            field=field,
        ) from None


def parse_optional_uuid(value: str, field: str) -> uuid.UUID | None:
    return parse_uuid(value, field) if value else None


def check_dataset(value: str, field: str = "dataset") -> str:
    if not value:
        raise InvalidArgument(f"{field} is required", field=field)
    if len(value) > MAX_DATASET_CHARS or not DATASET_PATTERN.fullmatch(value):
        raise InvalidArgument(
            f"{field} {value[:80]!r} is not valid: use 1-{MAX_DATASET_CHARS} characters of "
            "letters, digits and _ . : @ -, with / between segments, none of them only dots "
            "(e.g. acme/user_42)",
            field=field,
        )
    return value


def page_size(value: int, *, default: int, maximum: int, field: str = "page_size") -> int:
    """AIP-132: negative is an error, 0 means the default, large values are capped."""
    if value < 0:
        raise InvalidArgument(f"{field} must not be negative (got {value})", field=field)
    if value == 0:
        return default
    return min(value, maximum)


def encode_page_token(cursor: dict[str, Any]) -> str:
    raw = json.dumps(cursor, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def cursor_int(cursor: dict[str, Any], key: str, *, bits: int = 64) -> int:
    """A page token's integer, one the column it is compared with can hold (``bits``: 32 for
    ``integer``, 64 for ``bigint``): a token is the caller's to edit, and a value out of the
    column's range reached PostgreSQL as an INTERNAL error. ValueError (KeyError when it is
    missing) otherwise: the caller answers that the token is malformed."""
    value = cursor[key]
    bound = 2 ** (bits - 1)
    if isinstance(value, bool) or not isinstance(value, int) or not -bound <= value < bound:
        raise ValueError(f"page_token's {key} is not a {bits}-bit integer")
    return value


def cursor_text(cursor: dict[str, Any], key: str) -> str:
    """A page token's text, one PostgreSQL can take: no NUL, no lone surrogate (JSON's
    "\\ud800" decodes to one, which no UTF-8 encoder writes). ValueError (KeyError when
    missing) otherwise."""
    value = cursor[key]
    if not isinstance(value, str) or "\x00" in value:
        raise ValueError(f"page_token's {key} is not text")
    value.encode()  # a lone surrogate: UnicodeEncodeError, a ValueError
    return value


def decode_page_token(token: str, *, expect: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Opaque page tokens carry the cursor and the request's filters; a token used with
    other filters than it was made for is INVALID_ARGUMENT (AIP-158)."""
    if not token:
        return None
    if len(token) > MAX_PAGE_TOKEN_CHARS:
        raise InvalidArgument("page_token is too long to be one of ours", field="page_token")
    try:
        padded = token + "=" * (-len(token) % 4)
        cursor = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if not isinstance(cursor, dict):
            raise ValueError
    except (ValueError, json.JSONDecodeError, UnicodeDecodeError):
        raise InvalidArgument(
            "page_token is malformed; pass next_page_token from the previous response unchanged",
            field="page_token",
        ) from None
    for key, value in (expect or {}).items():
        if cursor.get(key) != value:
            raise InvalidArgument(
                f"page_token belongs to another request (its {key} differs: a token only "
                "continues the call and filters that returned it); start again without a token",
                field="page_token",
            )
    return cursor
