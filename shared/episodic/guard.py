"""The door of every episodic server: who is calling, may they, and not too fast.

:class:`Guard` turns a call's metadata into a :class:`~episodic.access.Principal`
(``authorization: Bearer <key>``), enforces the RPC's declared rule (least role; keys for
every dataset for global RPCs) and the key's rate limits. Dataset confinement happens in
the handlers (:func:`episodic.access.require_dataset` and friends), which see the data.

Keys are looked up in the database and trusted for ``auth_cache_ttl`` seconds per replica
(unknown keys too, so a flood of bad keys costs one query each per TTL): a revoked key is
refused everywhere within that time. Rate limits are token buckets per key and replica.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import Engine

from episodic.access import ANONYMOUS, Principal, Rule, method_rules
from episodic.errors import PermissionDenied, ResourceExhausted, Unauthenticated
from episodic.store.keys import find_key, principal_of

__all__ = ["Guard", "RateLimiter", "bearer_token", "is_loopback"]

#: Keys remembered per replica (least recently used ones are looked up again).
CACHE_SIZE = 10_000
#: Rate limit buckets hold this many seconds' worth of calls or bytes (the burst).
BURST_SECONDS = 2.0
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def is_loopback(host: str) -> bool:
    """Whether a bind address is reachable from this machine only."""
    return host.strip() in _LOOPBACK or host.startswith("127.")


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    """The key of ``authorization: Bearer <key>`` (None without one)."""
    for name, value in metadata or ():
        if name.lower() == "authorization":
            text = value.decode() if isinstance(value, bytes) else value
            scheme, _, token = text.strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            raise Unauthenticated(
                "the authorization metadata must read 'Bearer <key>'", reason="BAD_CREDENTIALS"
            )
    return None


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """Token buckets per key: ``per_second`` refill, ``BURST_SECONDS`` worth of capacity.
    0 means no limit."""

    def __init__(self, per_second: float, what: str) -> None:
        self.per_second = per_second
        self.what = what
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    def take(self, key: str, amount: float = 1.0, now: float | None = None) -> None:
        """Spends ``amount``; ResourceExhausted with the wait when the bucket is short."""
        if self.per_second <= 0:
            return
        now = time.monotonic() if now is None else now
        capacity = self.per_second * BURST_SECONDS
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = _Bucket(capacity, now)
            bucket.tokens = min(capacity, bucket.tokens + (now - bucket.updated) * self.per_second)
            bucket.updated = now
            if amount <= bucket.tokens or (amount > capacity and bucket.tokens >= capacity):
                # A single request larger than the burst passes when the bucket is full
                # (it could never pass otherwise); it then owes the difference.
                bucket.tokens -= amount
                return
            wait = (amount - bucket.tokens) / self.per_second
        raise ResourceExhausted(
            f"this API key ({key}) is over its limit of {self.per_second:g} {self.what} per "
            f"second; retry in {wait:.2f} s",
            retry_after=wait,
            reason="RATE_LIMITED",
        )


class Guard:
    """Admits or refuses calls to the RPCs of ``service_names`` (see the module)."""

    def __init__(
        self,
        engine: Engine | None,
        service_names: Iterable[str],
        *,
        required: bool,
        cache_ttl: float = 5.0,
        requests_per_second: float = 0.0,
        bytes_per_second: float = 0.0,
    ) -> None:
        self.engine = engine
        self.rules: dict[str, Rule | None] = method_rules(tuple(sorted(service_names)))
        self.required = required
        self.cache_ttl = cache_ttl
        self.calls = RateLimiter(requests_per_second, "calls")
        self.bytes = RateLimiter(bytes_per_second, "request bytes")
        self._cache: OrderedDict[str, tuple[Principal | None, float]] = OrderedDict()
        self._lock = threading.Lock()

    def governs(self, method: str) -> bool:
        """Whether ``method`` is one of ours (health and reflection are open)."""
        return method in self.rules

    def unguarded_methods(self) -> list[str]:
        """RPCs that declare no access rule (a server with any refuses to start)."""
        return sorted(m for m, rule in self.rules.items() if rule is None)

    def admit(
        self,
        method: str,
        metadata: Iterable[tuple[str, str | bytes]] | None,
        request_bytes: int = 0,
    ) -> Principal:
        """The principal of a call to ``method``, or UNAUTHENTICATED / PERMISSION_DENIED /
        RESOURCE_EXHAUSTED."""
        rule = self.rules.get(method)
        if rule is None:  # fail closed: an RPC without a rule serves nobody
            raise PermissionDenied(f"{method} declares no access rule")
        token = bearer_token(metadata)
        if token is None:
            if self.required:
                raise Unauthenticated(
                    "this call needs an API key: send the gRPC metadata "
                    "'authorization: Bearer <key>' (`episodic keys create` makes one)",
                    reason="MISSING_CREDENTIALS",
                )
            principal = ANONYMOUS  # development mode on loopback
        else:
            principal = self.authenticate(token)
        if not principal.role.allows(rule.role):
            raise PermissionDenied(
                f"{method.rsplit('/', 1)[-1]} needs a {rule.role.label} key; this one "
                f"({principal.prefix}) is {principal.role.label}",
                reason="ROLE_TOO_LOW",
            )
        if rule.global_scope and not principal.all_datasets:
            raise PermissionDenied(
                f"{method.rsplit('/', 1)[-1]} spans every dataset; this key "
                f"({principal.prefix}) covers only {', '.join(principal.datasets)}",
                reason="DATASET_NOT_ALLOWED",
            )
        if principal is not ANONYMOUS:
            self.calls.take(principal.prefix)
            self.bytes.take(principal.prefix, float(request_bytes))
        return principal

    def authenticate(self, token: str) -> Principal:
        """The principal of an API key (UNAUTHENTICATED when unknown, revoked or expired)."""
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(token)
            if cached is not None and cached[1] > now:
                self._cache.move_to_end(token)
                principal: Principal | None = cached[0]
            else:
                cached = None
        if cached is None:
            principal = self._lookup(token)
            with self._lock:
                self._cache[token] = (principal, now + self.cache_ttl)
                while len(self._cache) > CACHE_SIZE:
                    self._cache.popitem(last=False)
        if principal is None:
            raise Unauthenticated(
                "the API key is unknown, revoked or expired", reason="BAD_CREDENTIALS"
            )
        return principal

    def _lookup(self, token: str) -> Principal | None:
        if self.engine is None:
            return None
        with self.engine.connect() as conn:
            row = find_key(conn, token)
        return principal_of(row) if row is not None else None
