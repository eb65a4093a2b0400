"""The door of every episodic server: who is calling, may they, and not too fast.

:class:`Guard` turns a call's metadata into a :class:`~episodic.access.Principal`
(``authorization: Bearer <key>``), enforces the RPC's declared rule (least role; keys for
every dataset for global RPCs) and the key's rate limits. Dataset confinement happens in
the handlers (:func:`episodic.access.require_dataset` and friends), which see the data.

Keys are looked up in the database and trusted for ``auth_cache_ttl`` seconds per replica
(unknown keys too, so a flood of bad keys costs one query each per TTL): a revoked key is
refused everywhere within that time. Rate limits are token buckets per key and replica.

What one caller can cost the others is bounded:

- known keys and unknown ones are remembered apart, so a flood of bad keys never pushes a
  good key out of the cache (and back to a database lookup per call);
- calls refused for their key (unknown, revoked, expired; none where keys are required)
  spend a budget per client address; an address that spent it gets no lookup for a key
  the replica does not know until the budget refills (good keys never spend it);
- one key runs calls worth at most ``max_calls_in_flight`` at once on a replica (a long
  query is worth more: :func:`call_cost`), so however slow or costly its calls it never
  holds every handler thread, nor every core;
- one key keeps a replica's handlers busy for at most ``handler_seconds_per_second`` on
  average (the time its calls took, spent when each ends; bursts of two seconds' worth):
  what a call costs counts, whatever made it costly (a long query, a dataset of 100,000
  episodes, a slow plan), so a key at its limits leaves the rest of the replica to others.
"""

from __future__ import annotations

import random
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Engine

from episodic.access import ANONYMOUS, Principal, Role, Rule, method_rules
from episodic.errors import EpisodicError, PermissionDenied, ResourceExhausted, Unauthenticated
from episodic.store.keys import find_key, principal_of

__all__ = ["Guard", "RateLimiter", "bearer_token", "call_cost", "is_loopback", "peer_address"]

#: Keys remembered per replica (least recently used ones are looked up again), known and
#: unknown ones each.
CACHE_SIZE = 10_000
#: How long a caller over its in-flight cap is asked to wait before trying again (at
#: least; jittered up to three times that).
IN_FLIGHT_RETRY_AFTER = 0.05
#: The longest the door holds its refusal of a caller that came back before its last retry
#: hint ran out (a hostile client ignores hints; each answer costs the replica's event loop
#: as much as serving a small call would, under the interpreter lock every call shares).
MAX_HOLD = 1.0
#: Rate limit buckets hold this many seconds' worth of calls or bytes (the burst).
BURST_SECONDS = 2.0
#: A key's handler time left (seconds) below which its next call waits: a call starts
#: while any is left, and what it takes beyond is owed (see Guard.running).
BUSY_MINIMUM = 0.001
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def is_loopback(host: str) -> bool:
    """Whether a bind address is reachable from this machine only."""
    return host.strip() in _LOOPBACK or host.startswith("127.")


#: Characters of a query worth one slot of a key's calls in flight: Recall's work grows
#: with the query (measured by the issue: 8,192 characters of dates, 531 ms), so a long one
#: holds as many slots as it costs, and one key's long queries run one at a time.
QUERY_CHARS_PER_SLOT = 512


def call_cost(request: object) -> int:
    """What a call is worth in slots of its key's calls in flight: 1, and a request with a
    query (Recall, search) one more per :data:`QUERY_CHARS_PER_SLOT` characters of it."""
    query = getattr(request, "query", None)
    if isinstance(query, str):
        return 1 + len(query) // QUERY_CHARS_PER_SLOT
    return 1


def peer_address(peer: str) -> str:
    """The client's address in gRPC's ``context.peer()`` (``ipv4:10.0.0.7:51234``,
    ``ipv6:[::1]:51234``, ``unix:/path``), without its port: what per-client limits key on."""
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        return rest.rsplit(":", 1)[0]
    return kind or "unknown"


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    """The key of ``authorization: Bearer <key>`` (None without one). Two such headers are
    refused: which one a proxy or a handler reads first is not for the caller to guess (the
    first was taken silently)."""
    headers = [value for name, value in metadata or () if name.lower() == "authorization"]
    if not headers:
        return None
    if len(headers) > 1:
        raise Unauthenticated(
            f"the call carries {len(headers)} authorization headers; send one, 'Bearer <key>'",
            reason="BAD_CREDENTIALS",
        )
    value = headers[0]
    text = value.decode() if isinstance(value, bytes) else value
    scheme, _, token = text.strip().partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    raise Unauthenticated(
        "the authorization metadata must read 'Bearer <key>'", reason="BAD_CREDENTIALS"
    )


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

    def _refilled(self, key: str, now: float) -> _Bucket:
        """``key``'s bucket, refilled up to ``now`` (call with the lock held)."""
        capacity = self.per_second * BURST_SECONDS
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(capacity, now)
        bucket.tokens = min(capacity, bucket.tokens + (now - bucket.updated) * self.per_second)
        bucket.updated = now
        return bucket

    def check(self, key: str, message: str, at_least: float = 1.0) -> None:
        """ResourceExhausted (``message``, with the wait) when ``key``'s bucket holds less
        than ``at_least``; spends nothing: for a limit on what a call may turn out to cost
        (see :meth:`spend`)."""
        if self.per_second <= 0:
            return
        with self._lock:
            bucket = self._refilled(key, time.monotonic())
            if bucket.tokens >= at_least:
                return
            wait = (at_least - bucket.tokens) / self.per_second
        raise ResourceExhausted(
            f"{message}; retry in {wait:.2f} s", retry_after=wait, reason="RATE_LIMITED"
        )

    def spend(self, key: str, amount: float = 1.0, *, debt: bool = False) -> None:
        """Spends ``amount`` of ``key``'s bucket, without refusing: down to empty, or with
        ``debt`` below it (down to minus the burst), so that what one costly call took
        beyond the bucket is paid for by the wait before the next."""
        if self.per_second <= 0:
            return
        floor = -self.per_second * BURST_SECONDS if debt else 0.0
        with self._lock:
            bucket = self._refilled(key, time.monotonic())
            bucket.tokens = max(floor, bucket.tokens - amount)

    def take(self, key: str, amount: float = 1.0, now: float | None = None) -> None:
        """Spends ``amount``; ResourceExhausted with the wait when the bucket is short."""
        if self.per_second <= 0:
            return
        now = time.monotonic() if now is None else now
        capacity = self.per_second * BURST_SECONDS
        with self._lock:
            bucket = self._refilled(key, now)
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


def _missing_key() -> Unauthenticated:
    return Unauthenticated(
        "this call needs an API key: send the gRPC metadata "
        "'authorization: Bearer <key>' (`episodic keys create` makes one)",
        reason="MISSING_CREDENTIALS",
    )


def _bad_key() -> Unauthenticated:
    return Unauthenticated("the API key is unknown, revoked or expired", reason="BAD_CREDENTIALS")


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
        max_calls_in_flight: int = 0,
        unauthenticated_per_second: float = 0.0,
        handler_seconds_per_second: float = 0.0,
    ) -> None:
        self.engine = engine
        self.rules: dict[str, Rule | None] = method_rules(tuple(sorted(service_names)))
        self.required = required
        self.cache_ttl = cache_ttl
        self.calls = RateLimiter(requests_per_second, "calls")
        self.bytes = RateLimiter(bytes_per_second, "request bytes")
        self.strangers = RateLimiter(unauthenticated_per_second, "calls without a known key")
        self.busy = RateLimiter(handler_seconds_per_second, "handler seconds")
        self.max_calls_in_flight = max_calls_in_flight
        self._known: OrderedDict[str, tuple[Principal, float]] = OrderedDict()
        self._unknown: OrderedDict[str, float] = OrderedDict()
        self._in_flight: dict[str, int] = {}
        # Per key (its prefix) or client address: when the last retry hint the door gave it
        # runs out (monotonic), for :meth:`_held`.
        self._told: OrderedDict[str, float] = OrderedDict()
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
        peer: str = "",
    ) -> Principal:
        """The principal of a call to ``method`` from ``peer`` (gRPC's ``context.peer()``),
        or UNAUTHENTICATED / PERMISSION_DENIED / RESOURCE_EXHAUSTED."""
        rule = self.rules.get(method)
        if rule is None:  # fail closed: an RPC without a rule serves nobody
            raise PermissionDenied(f"{method} declares no access rule")
        token = self._presented_key(metadata, peer)
        if token is None:
            if self.required:
                self._refused(peer)
                raise _missing_key()
            principal = ANONYMOUS  # development mode on loopback
        else:
            principal = self.authenticate(token, peer)
        if not principal.role.allows(rule.role):
            raise PermissionDenied(
                f"{method.rsplit('/', 1)[-1]} needs a {rule.role.label} key; this one "
                f"({principal.prefix}) is {principal.role.label}",
                reason="ROLE_TOO_LOW",
            )
        if rule.global_scope and not principal.all_datasets:
            raise PermissionDenied(
                f"{method.rsplit('/', 1)[-1]} spans every dataset; this key "
                f"({principal.prefix}) covers only {principal.scope_text()}",
                reason="DATASET_NOT_ALLOWED",
            )
        if principal is not ANONYMOUS:
            self.calls.take(principal.prefix)
            self.bytes.take(principal.prefix, float(request_bytes))
        return principal

    def authenticate(self, token: str, peer: str = "") -> Principal:
        """The principal of an API key (UNAUTHENTICATED when unknown, revoked or expired).
        A key this replica has not seen good costs a lookup, which ``peer``'s address gets
        only while it has not spent its budget of refused calls (:meth:`_refused`)."""
        now = time.monotonic()
        with self._lock:
            known = self._known.get(token)
            if known is not None and known[1] > now:
                self._known.move_to_end(token)
                return known[0]
            refused_until = self._unknown.get(token)
        if known is None:
            # A key never seen good here, from an address over its budget of refusals: not
            # even a lookup. A good key whose entry expired is looked up again whatever the
            # address did: behind a gateway or a NAT, tenants share one.
            self._refused(peer, spend=False)
        if refused_until is None or refused_until <= now:
            principal = self._lookup(token)
            until = now + self.cache_ttl
            with self._lock:
                # Apart: bad keys never push good ones out (and back to a lookup a call).
                self._known.pop(token, None)
                self._unknown.pop(token, None)
                if principal is None:
                    self._unknown[token] = until
                else:
                    self._known[token] = (principal, until)
                for cache in (self._known, self._unknown):
                    while len(cache) > CACHE_SIZE:
                        cache.popitem(last=False)
            if principal is not None:
                return principal
        self._refused(peer)
        raise _bad_key()

    def refusal_before_reading(
        self, method: str, metadata: Iterable[tuple[str, str | bytes]] | None, peer: str = ""
    ) -> EpisodicError | None:
        """What :meth:`admit` and :meth:`running` would refuse, decided from what this
        replica already knows (no database): the door asks on its event loop before it
        reads the call's request or hands it to a handler thread, so a caller refused again
        and again — no key, a key known bad, a key over its limits — costs next to
        nothing, and the handlers stay with the callers they serve. None: nothing known
        refuses it; :meth:`admit` decides in the handler thread (and counts the call)."""
        rule = self.rules.get(method)
        if rule is None:
            return None
        now = time.monotonic()
        subject = peer_address(peer)  # who a refusal over a limit is held for
        try:
            token = self._presented_key(metadata, peer)
            if token is None:
                if not self.required:
                    return None
                self._refused(peer)
                return _missing_key()
            with self._lock:
                known = self._known.get(token)
                refused_until = self._unknown.get(token)
            if known is not None and known[1] > now:
                subject = "key " + known[0].prefix
                self._over_limits(known[0])
                return None
            if known is None and refused_until is not None and refused_until > now:
                self._refused(peer)
                return _bad_key()
            if known is None:
                self._refused(peer, spend=False)
            return None
        except ResourceExhausted as err:
            err.hold = self._held(subject, err.retry_after, now)
            return err
        except EpisodicError as err:
            return err

    def _held(self, subject: str, retry_after: float, now: float) -> float:
        """How long the door holds a refusal over a limit of ``subject`` (a key or a client
        address) before answering it: nothing for a caller that waited as its last hint
        said; for one that came back sooner, until that hint runs out (at most
        :data:`MAX_HOLD`). The new hint counts from the answer, so a key whose many threads
        all ignore their hints gets about one refusal per hint, however many it sends, and
        its held calls cost a timer each (they stay within the address's open calls,
        EPISODIC_MAX_CALLS_PER_PEER). An honest client (the SDKs wait as told) is never
        held; one of its threads that had no hint yet may be, but only for a call that is
        refused anyway."""
        with self._lock:
            hold = min(max(self._told.get(subject, 0.0) - now, 0.0), MAX_HOLD)
            self._told[subject] = now + hold + retry_after
            self._told.move_to_end(subject)
            while len(self._told) > CACHE_SIZE:
                self._told.popitem(last=False)
        return hold

    def _over_limits(self, principal: Principal) -> None:
        """ResourceExhausted when ``principal``'s key is already over a limit of this
        replica (its calls per second, its handler time, its calls in flight): checked,
        nothing spent."""
        if principal is ANONYMOUS or principal.role is Role.SERVICE:
            return
        key = principal.prefix
        self.calls.check(
            key,
            f"this API key ({key}) is over its limit of {self.calls.per_second:g} calls per second",
        )
        self._check_busy(key)
        cap = self.max_calls_in_flight
        if cap > 0:
            with self._lock:
                running = self._in_flight.get(key, 0)
            if running + 1 > cap:
                raise self._too_many_in_flight(key, running, 1)

    def _presented_key(
        self, metadata: Iterable[tuple[str, str | bytes]] | None, peer: str
    ) -> str | None:
        """The call's key (:func:`bearer_token`); a header that is not one 'Bearer <key>'
        is refused as a bad key is, and spends the same per-address budget."""
        try:
            return bearer_token(metadata)
        except Unauthenticated:
            self._refused(peer)
            raise

    def _refused(self, peer: str, *, spend: bool = True) -> None:
        """The per-address budget of calls refused for their key (:attr:`strangers`):
        checked before a lookup, spent by each refusal. A client whose keys are good never
        spends it, however many keys it uses and however often they are looked up again."""
        address = peer_address(peer)
        self.strangers.check(
            address,
            f"{address} sent more than {self.strangers.per_second:g} calls per second with "
            "an unknown key or none",
        )
        if spend:
            self.strangers.spend(address)

    @contextmanager
    def running(self, principal: Principal, cost: int = 1) -> Iterator[None]:
        """Counts a call of ``principal`` in flight on this replica while the block runs, as
        ``cost`` slots (:func:`call_cost`) of the key's ``max_calls_in_flight``, and spends
        the time it took from the key's handler time (:attr:`busy`); RESOURCE_EXHAUSTED
        (with a RetryInfo) when the slots are not free or that time is spent. A call
        costing more than the cap runs alone. Not limited: the development mode's anonymous
        caller, and the services' own key (Ingest's notices to the Scheduler come from
        every one of its handlers at once, under that one key)."""
        if principal is ANONYMOUS or principal.role is Role.SERVICE:
            yield
            return
        key = principal.prefix
        self._check_busy(key)
        slots = max(1, min(cost, self.max_calls_in_flight))
        if self.max_calls_in_flight > 0:
            with self._lock:
                running = self._in_flight.get(key, 0)
                full = running + slots > self.max_calls_in_flight
                if not full:
                    self._in_flight[key] = running + slots
            if full:
                raise self._too_many_in_flight(key, running, slots)
        started = time.monotonic()
        try:
            yield
        finally:
            self.busy.spend(key, time.monotonic() - started, debt=True)
            if self.max_calls_in_flight > 0:
                with self._lock:
                    left = self._in_flight[key] - slots
                    if left:
                        self._in_flight[key] = left
                    else:
                        del self._in_flight[key]

    def _check_busy(self, key: str) -> None:
        # Refused only once the time is spent (a call's cost is known when it ends): the
        # debt of a costly call is paid by the wait before the next.
        self.busy.check(
            key,
            f"this API key ({key}) kept this replica's handlers busy for more than "
            f"{self.busy.per_second:g} s per second (EPISODIC_HANDLER_SECONDS_PER_KEY)",
            at_least=BUSY_MINIMUM,
        )

    def _too_many_in_flight(self, key: str, running: int, slots: int) -> ResourceExhausted:
        # Jittered, so the callers refused together do not come back together.
        wait = IN_FLIGHT_RETRY_AFTER * random.uniform(1.0, 3.0)
        return ResourceExhausted(
            f"this API key ({key}) already has calls worth {running} of its "
            f"{self.max_calls_in_flight} running on this replica (this one is worth "
            f"{slots}); retry in {wait:.2f} s",
            retry_after=wait,
            reason="TOO_MANY_IN_FLIGHT",
        )

    def _lookup(self, token: str) -> Principal | None:
        if self.engine is None:
            return None
        with self.engine.connect() as conn:
            row = find_key(conn, token)
        return principal_of(row) if row is not None else None
