"""API keys: minting, lookup, listing and revocation (table ``api_keys``).

A key reads ``ek_<prefix>_<secret>``: the prefix (10 hex characters) is public — it finds
the row and names the key in logs and audits — and the secret (256 random bits) is shown
once and stored only as its SHA-256. With that much entropy a slow password hash would add
nothing but latency; comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, RowMapping, text

from episodic.access import Principal, Role, check_scopes
from episodic.errors import InvalidArgument, NotFound
from episodic.validation import check_text

__all__ = [
    "KEY_PATTERN",
    "MintedKey",
    "create_key",
    "find_key",
    "get_key",
    "list_keys",
    "principal_of",
    "revoke_key",
]

KEY_PATTERN = re.compile(r"ek_([0-9a-f]{10})_([A-Za-z0-9_-]{43})")
_PREFIX_PATTERN = re.compile(r"(?:ek_)?([0-9a-f]{10})")
MAX_NAME_CHARS = 200
_COLUMNS = "key_id, prefix, name, role, datasets, created_at, expires_at, revoked_at, created_by"


@dataclass(frozen=True)
class MintedKey:
    """A new key: its stored row and the secret, which exists nowhere else."""

    row: RowMapping
    secret: str


def _hash(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def create_key(
    conn: Connection,
    *,
    role: Role,
    datasets: Sequence[str],
    name: str = "",
    expires_at: datetime | None = None,
    created_by: str = "",
) -> MintedKey:
    """Mints a key. ``datasets``: names, ``acme/*`` prefixes or ``*`` (validated)."""
    scopes = check_scopes(datasets)
    check_text(name, "name")
    if len(name) > MAX_NAME_CHARS:
        raise InvalidArgument(f"name is longer than {MAX_NAME_CHARS} characters", field="name")
    prefix = secrets.token_hex(5)
    secret = secrets.token_urlsafe(32)
    row = (
        conn.execute(
            text(
                "INSERT INTO api_keys (key_id, prefix, secret_hash, name, role, datasets, "
                "expires_at, created_by) VALUES (:id, :prefix, :hash, :name, :role, "
                ":datasets, :expires, :by) "
                f"RETURNING {_COLUMNS}"
            ),
            {
                "id": uuid.uuid4(),
                "prefix": prefix,
                "hash": _hash(secret),
                "name": name,
                "role": role.label,
                "datasets": list(scopes),
                "expires": expires_at,
                "by": created_by,
            },
        )
        .mappings()
        .one()
    )
    return MintedKey(row=row, secret=f"ek_{prefix}_{secret}")


def find_key(conn: Connection, token: str) -> RowMapping | None:
    """The active key ``token`` is (not revoked, not expired on the database clock), or
    None for anything else — a malformed token, an unknown prefix, a wrong secret."""
    match = KEY_PATTERN.fullmatch(token)
    if match is None:
        return None
    prefix, secret = match.groups()
    row = (
        conn.execute(
            text(
                f"SELECT {_COLUMNS}, secret_hash, "
                "(revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())) AS active "
                "FROM api_keys WHERE prefix = :prefix"
            ),
            {"prefix": prefix},
        )
        .mappings()
        .first()
    )
    if row is None or not hmac.compare_digest(bytes(row["secret_hash"]), _hash(secret)):
        return None
    return row if row["active"] else None


def principal_of(row: RowMapping) -> Principal:
    """The principal a key row stands for."""
    return Principal(
        prefix=f"ek_{row['prefix']}",
        role=Role.parse(row["role"]),
        datasets=tuple(row["datasets"]),
        key_id=str(row["key_id"]),
    )


def get_key(conn: Connection, key: str) -> RowMapping:
    """A key by its id, its public prefix (with or without ``ek_``) or the key itself."""
    token = KEY_PATTERN.fullmatch(key)
    prefix = token.group(1) if token else None
    if prefix is None and (match := _PREFIX_PATTERN.fullmatch(key)):
        prefix = match.group(1)
    key_id = None
    if prefix is None:
        try:
            key_id = uuid.UUID(key)
        except ValueError:
            raise InvalidArgument(
                "key must be a key id (UUID), a public prefix (ek_0123456789) or the key",
                field="key",
            ) from None
    row = (
        conn.execute(
            text(
                f"SELECT {_COLUMNS} FROM api_keys "
                "WHERE prefix = CAST(:prefix AS text) OR key_id = CAST(:id AS uuid)"
            ),
            {"prefix": prefix, "id": key_id},
        )
        .mappings()
        .first()
    )
    if row is None:  # named by what is public: the id, or the prefix (never a secret)
        named = f"with id {key_id}" if key_id is not None else f"ek_{prefix}"
        raise NotFound(f"no API key {named}", field="key")
    return row


def revoke_key(conn: Connection, key: str) -> RowMapping:
    """Revokes a key (by id, prefix or the key); a revoked key is returned unchanged."""
    row = get_key(conn, key)
    revoked = (
        conn.execute(
            text(
                "UPDATE api_keys SET revoked_at = now() "
                f"WHERE key_id = :id AND revoked_at IS NULL RETURNING {_COLUMNS}"
            ),
            {"id": row["key_id"]},
        )
        .mappings()
        .first()
    )
    return revoked or row


def list_keys(
    conn: Connection,
    *,
    include_inactive: bool,
    before: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> tuple[list[RowMapping], bool]:
    """Keys newest first (keyset-paged); the bool says whether more follow."""
    rows = (
        conn.execute(
            text(
                f"SELECT {_COLUMNS} FROM api_keys "
                "WHERE (CAST(:all AS boolean) OR (revoked_at IS NULL "
                "       AND (expires_at IS NULL OR expires_at > now()))) "
                "AND (CAST(:at AS timestamptz) IS NULL "
                "     OR (created_at, key_id) < (CAST(:at AS timestamptz), CAST(:id AS uuid))) "
                "ORDER BY created_at DESC, key_id DESC LIMIT :limit"
            ),
            {
                "all": include_inactive,
                "at": before[0] if before else None,
                "id": before[1] if before else None,
                "limit": limit + 1,
            },
        )
        .mappings()
        .all()
    )
    return list(rows[:limit]), len(rows) > limit
