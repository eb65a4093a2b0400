"""What one caller can cost the others at the door (issue 49), against real keys:

* bad keys are remembered apart: a flood of them never pushes a good key out of the cache
  (which would cost the good key a database lookup per call);
* calls with a key the replica does not know are limited per client address before the
  lookup they cost, and a known key from the same address is not;
* one key runs at most ``max_calls_in_flight`` calls at once; more answer
  RESOURCE_EXHAUSTED with a retry hint, and other keys are not affected.
"""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from episodic.access import Role
from episodic.errors import ResourceExhausted, Unauthenticated
from episodic.serving import guard as guard_module
from episodic.serving.guard import Guard, peer_address
from episodic.store import keys
from episodic.v1 import recall_service_pb2  # noqa: F401 - registers the service's descriptor

RECALL = "episodic.v1.RecallService"
METHOD = f"/{RECALL}/Recall"


def _key(engine: Engine, dataset: str) -> str:
    with engine.begin() as conn:
        return keys.create_key(conn, role=Role.READER, datasets=[dataset]).secret


def _bearer(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


class Counting(Guard):
    """A guard that counts its database lookups."""

    lookups = 0

    def _lookup(self, token: str):  # type: ignore[no-untyped-def]
        self.lookups += 1
        return super()._lookup(token)


def test_peer_addresses_drop_the_port() -> None:
    assert peer_address("ipv4:10.0.0.7:51234") == "10.0.0.7"
    assert peer_address("ipv6:[::1]:51234") == "[::1]"
    assert peer_address("unix:/tmp/s") == "unix"
    assert peer_address("") == "unknown"


def test_a_flood_of_bad_keys_does_not_push_a_good_key_out(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(guard_module, "CACHE_SIZE", 3)
    good = _key(engine, "door-a")
    door = Counting(engine, [RECALL], required=True, cache_ttl=60)
    door.admit(METHOD, _bearer(good), peer="ipv4:10.0.0.1:1")
    assert door.lookups == 1
    for n in range(10):
        with pytest.raises(Unauthenticated):
            door.admit(METHOD, _bearer(f"ek_bogus{n}_x"), peer="ipv4:10.0.0.9:1")
    assert door.lookups == 11
    door.admit(METHOD, _bearer(good), peer="ipv4:10.0.0.1:1")
    assert door.lookups == 11  # still known: no lookup


def test_an_address_refused_too_often_gets_no_more_lookups(engine: Engine) -> None:
    good, fresh = _key(engine, "door-b"), _key(engine, "door-b2")
    door = Counting(engine, [RECALL], required=True, cache_ttl=60, unauthenticated_per_second=1)
    attacker = "ipv4:10.0.0.1:2"
    door.admit(METHOD, _bearer(good), peer=attacker)  # good keys spend nothing…
    for n in range(2):  # …refusals do: a burst holds two seconds' worth
        with pytest.raises(Unauthenticated):
            door.admit(METHOD, _bearer(f"ek_bad{n}_x"), peer=attacker)
    lookups = door.lookups
    with pytest.raises(ResourceExhausted) as refused:
        door.admit(METHOD, _bearer("ek_bad9_x"), peer=attacker)
    assert refused.value.reason == "RATE_LIMITED" and refused.value.retry_after
    assert "10.0.0.1" in str(refused.value) and door.lookups == lookups  # no lookup
    with pytest.raises(ResourceExhausted):  # no key at all: the same budget
        door.admit(METHOD, [], peer=attacker)
    with pytest.raises(ResourceExhausted):  # nor a key it does not know, until it refills
        door.admit(METHOD, _bearer(fresh), peer=attacker)
    # A key already known goes on from that address; another address has its own budget.
    door.admit(METHOD, _bearer(good), peer=attacker)
    door.admit(METHOD, _bearer(fresh), peer="ipv4:10.0.0.2:1")
    with pytest.raises(Unauthenticated):
        door.admit(METHOD, _bearer("ek_bad7_x"), peer="ipv4:10.0.0.2:1")


def test_a_good_key_is_looked_up_again_whatever_its_address_did(engine: Engine) -> None:
    """Behind a gateway, tenants share an address: one tenant's bad keys must not lock the
    others out when their keys' cache entries expire."""
    good = _key(engine, "door-gateway")
    door = Counting(engine, [RECALL], required=True, cache_ttl=0, unauthenticated_per_second=1)
    gateway = "ipv4:10.0.0.4:1"
    door.admit(METHOD, _bearer(good), peer=gateway)
    for n in range(2):
        with pytest.raises(Unauthenticated):
            door.admit(METHOD, _bearer(f"ek_gw{n}_x"), peer=gateway)
    with pytest.raises(ResourceExhausted):
        door.admit(METHOD, _bearer("ek_gw9_x"), peer=gateway)
    lookups = door.lookups
    door.admit(METHOD, _bearer(good), peer=gateway)  # expired (TTL 0): looked up again
    assert door.lookups == lookups + 1


def test_good_keys_never_spend_the_budget(engine: Engine) -> None:
    """A backend using many users' keys from one address, each looked up again every TTL."""
    many = [_key(engine, f"door-many-{n}") for n in range(6)]
    door = Counting(engine, [RECALL], required=True, cache_ttl=0, unauthenticated_per_second=1)
    for _ in range(3):
        for token in many:
            door.admit(METHOD, _bearer(token), peer="ipv4:10.0.0.3:1")
    assert door.lookups == 18


def test_one_key_runs_at_most_its_cap_of_calls_at_once(engine: Engine) -> None:
    busy, other = _key(engine, "door-c"), _key(engine, "door-d")
    door = Guard(engine, [RECALL], required=True, max_calls_in_flight=2)
    principal = door.admit(METHOD, _bearer(busy), peer="ipv4:10.0.0.1:1")
    neighbour = door.admit(METHOD, _bearer(other), peer="ipv4:10.0.0.1:1")
    with door.running(principal), door.running(principal):
        with pytest.raises(ResourceExhausted) as full, door.running(principal):
            pass
        assert full.value.reason == "TOO_MANY_IN_FLIGHT"
        assert full.value.retry_after and 0.05 <= full.value.retry_after <= 0.15
        with door.running(neighbour):  # another key is not affected
            pass
    with door.running(principal):  # the calls ended: room again
        pass
    assert door._in_flight == {}


def test_the_services_own_key_is_not_capped(engine: Engine) -> None:
    """Ingest sends its notices to the Scheduler from every handler at once, under the one
    service key: capping it would drop notices under load."""
    with engine.begin() as conn:
        service = keys.create_key(conn, role=Role.SERVICE, datasets=["*"]).secret
    door = Guard(engine, [RECALL], required=True, max_calls_in_flight=1)
    principal = door.authenticate(service)
    with door.running(principal), door.running(principal), door.running(principal):
        pass


def test_a_long_query_is_worth_more_of_the_keys_slots(engine: Engine) -> None:
    from types import SimpleNamespace

    from episodic.serving.guard import QUERY_CHARS_PER_SLOT, call_cost

    assert call_cost(SimpleNamespace(query="pricing")) == 1
    assert call_cost(SimpleNamespace(thread_id="t")) == 1
    assert call_cost(SimpleNamespace(query="x" * QUERY_CHARS_PER_SLOT * 3)) == 4
    busy = _key(engine, "door-e")
    door = Guard(engine, [RECALL], required=True, max_calls_in_flight=4)
    principal = door.authenticate(busy)
    long_query = call_cost(SimpleNamespace(query="2026-01-01 " * 2000))
    # Worth more than the cap: it runs alone.
    with door.running(principal, long_query), pytest.raises(ResourceExhausted):
        door.running(principal, 1).__enter__()
    with door.running(principal, 2), door.running(principal, 2), pytest.raises(ResourceExhausted):
        door.running(principal, 1).__enter__()
    assert door._in_flight == {}


def test_a_key_that_kept_the_handlers_busy_waits_for_its_time_and_others_do_not(
    engine: Engine,
) -> None:
    """What a call cost counts, whatever made it costly: a key whose calls took longer than
    its handler time per second is refused (with the wait) until it has paid, another key
    is not, and the services' own key never is."""
    slow, other = _key(engine, "door-f"), _key(engine, "door-g")
    door = Guard(engine, [RECALL], required=True, handler_seconds_per_second=0.2)
    principal = door.authenticate(slow)
    neighbour = door.authenticate(other)
    clock = [1000.0]
    monotonic = guard_module.time.monotonic
    guard_module.time.monotonic = lambda: clock[0]  # type: ignore[assignment]
    try:
        with door.running(principal):
            clock[0] += 1.0  # one call that took a second: the 0.4 s burst, and owing
        with pytest.raises(ResourceExhausted) as refused, door.running(principal):
            pass
        assert refused.value.reason == "RATE_LIMITED"
        assert "EPISODIC_HANDLER_SECONDS_PER_KEY" in refused.value.message
        assert refused.value.retry_after == pytest.approx(0.4 / 0.2, rel=0.01)  # the debt
        with door.running(neighbour):  # another key's time is its own
            pass
        clock[0] += 2.1  # paid: 0.4 s owed (the floor: one burst), 0.2 s a second
        with door.running(principal):
            pass
        with engine.begin() as conn:
            service = keys.create_key(conn, role=Role.SERVICE, datasets=["*"]).secret
        own = door.authenticate(service)
        for _ in range(3):
            with door.running(own):
                clock[0] += 1.0
    finally:
        guard_module.time.monotonic = monotonic  # type: ignore[assignment]


def test_refusals_known_without_the_database_are_made_before_the_request_is_read(
    engine: Engine,
) -> None:
    """The door asks before it reads a call's request or takes a handler thread: no key, a
    key known bad, a key over its limits are refused there (the same answers admit would
    give); a key the replica has not seen, or one within its limits, is left to admit."""
    good, fresh = _key(engine, "door-h"), _key(engine, "door-i")
    door = Counting(
        engine, [RECALL], required=True, max_calls_in_flight=1, unauthenticated_per_second=50
    )
    peer = "ipv4:10.0.0.9:1"
    missing = door.refusal_before_reading(METHOD, [], peer)
    assert isinstance(missing, Unauthenticated) and missing.reason == "MISSING_CREDENTIALS"
    # Not 'Bearer <key>': answered, not raised (raised, it escaped the door as UNKNOWN).
    malformed = door.refusal_before_reading(METHOD, [("authorization", "Basic eDp5")], peer)
    assert isinstance(malformed, Unauthenticated) and malformed.reason == "BAD_CREDENTIALS"
    # Two keys in one call: which one counts is not for the caller to guess.
    twice = door.refusal_before_reading(METHOD, [*_bearer(good), *_bearer(fresh)], peer)
    assert isinstance(twice, Unauthenticated) and "2 authorization headers" in twice.message
    with pytest.raises(Unauthenticated):
        door.admit(METHOD, _bearer("ek_nope_" + "x" * 20), peer=peer)
    lookups = door.lookups
    bad = door.refusal_before_reading(METHOD, _bearer("ek_nope_" + "x" * 20), peer)
    assert isinstance(bad, Unauthenticated) and bad.reason == "BAD_CREDENTIALS"
    assert door.lookups == lookups  # no lookup for a key known bad
    # Not seen yet: admit decides (and looks it up) in the handler thread.
    assert door.refusal_before_reading(METHOD, _bearer(fresh), peer) is None
    principal = door.admit(METHOD, _bearer(good), peer=peer)
    assert door.refusal_before_reading(METHOD, _bearer(good), peer) is None
    with door.running(principal):
        busy = door.refusal_before_reading(METHOD, _bearer(good), peer)
        assert isinstance(busy, ResourceExhausted) and busy.reason == "TOO_MANY_IN_FLIGHT"
    assert door.refusal_before_reading(METHOD, _bearer(good), peer) is None
    assert door.refusal_before_reading("/grpc.health.v1.Health/Check", [], peer) is None


def test_a_caller_back_before_its_retry_hint_ran_out_is_answered_when_it_runs_out(
    engine: Engine,
) -> None:
    """A hostile client ignores retry hints and calls again at once, and answering each call
    costs the replica's event loop as much as serving a small one: the door holds the
    refusal of a key (or an address) that came back early until its last hint runs out, the
    new hint counting from the answer, so many threads of one key get about one refusal per
    hint between them (at most MAX_HOLD each). A caller that waited as told, and another
    key, are answered at once."""
    from episodic.serving.guard import MAX_HOLD

    greedy, other = _key(engine, "door-j"), _key(engine, "door-k")
    door = Guard(engine, [RECALL], required=True, max_calls_in_flight=1)
    peer = "ipv4:10.0.0.11:1"
    principal = door.admit(METHOD, _bearer(greedy), peer=peer)
    door.admit(METHOD, _bearer(other), peer=peer)
    clock = [2000.0]
    monotonic = guard_module.time.monotonic
    guard_module.time.monotonic = lambda: clock[0]  # type: ignore[assignment]
    try:
        with door.running(principal):
            first = door.refusal_before_reading(METHOD, _bearer(greedy), peer)
            assert isinstance(first, ResourceExhausted) and first.hold == 0.0
            clock[0] += 0.01  # back at once, ignoring the hint
            second = door.refusal_before_reading(METHOD, _bearer(greedy), peer)
            assert isinstance(second, ResourceExhausted)
            assert second.hold == pytest.approx(first.retry_after - 0.01)
            # Each early caller is held past the hints of those answered before it.
            holds = []
            for _ in range(40):
                early = door.refusal_before_reading(METHOD, _bearer(greedy), peer)
                assert isinstance(early, ResourceExhausted)
                holds.append(early.hold)
            assert holds == sorted(holds) and holds[-1] == MAX_HOLD
            assert door.refusal_before_reading(METHOD, _bearer(other), peer) is None
            clock[0] += 60.0  # waited: answered at once again
            waited = door.refusal_before_reading(METHOD, _bearer(greedy), peer)
            assert isinstance(waited, ResourceExhausted) and waited.hold == 0.0
    finally:
        guard_module.time.monotonic = monotonic  # type: ignore[assignment]
    # Within its limits a key is never held, whatever its hints said.
    assert door.refusal_before_reading(METHOD, _bearer(greedy), peer) is None
