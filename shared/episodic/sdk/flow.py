"""Flows: every call is written once as a generator that yields :class:`Rpc` and
:class:`Sleep` steps (:data:`Flow`), and :class:`ClientCore`, the state a driver runs them
with (see :mod:`episodic.sdk`)."""

from __future__ import annotations

import inspect
import os
import re
import threading
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar

import grpc

from episodic.sdk.channels import (
    DEFAULT_TIMEOUT,
    PROCESS_OF,
    RETRIED,
    STUBS,
    default_address,
    service_config,
)
from episodic.sdk.types import T
from episodic.tls import channel_credentials

# --------------------------------------------------------------------------- flows

R = TypeVar("R")


@dataclass(frozen=True)
class Rpc:
    """A step of a flow: one attempt of a unary call. The driver sends ``request`` to
    ``method`` of ``stub`` on the channel ``channel`` ("ingest", or "ingest:noretry" for a
    call that must not be repeated) within ``timeout`` seconds, with the client's
    credentials when ``authenticate``, and resumes the flow with the response message — or
    throws the call's :class:`EpisodicRpcError` into it."""

    channel: str
    stub: str
    method: str
    request: Any
    timeout: float
    authenticate: bool = True


@dataclass(frozen=True)
class Sleep:
    """A step of a flow: wait ``seconds``, then resume it."""

    seconds: float


@dataclass(frozen=True)
class Emit(Generic[T]):
    """A step of a streaming flow (``iter_episodes``): hand ``item`` to the caller."""

    item: T


Step: TypeAlias = Rpc | Sleep
#: A call written once for both clients: yields steps, receives each step's answer, and
#: returns the result.
Flow: TypeAlias = Generator[Step, Any, R]
#: A flow that hands out items one by one (an iterator in the blocking client, an async
#: iterator in the asyncio client).
Stream: TypeAlias = Generator[Step | Emit[T], Any, None]


def present_as_method(
    method: Callable[..., Any], flow: Callable[..., Any], owner: str, result: str
) -> None:
    """Makes a driver's ``method`` (already ``functools.wraps(flow)``) describe itself as
    the method of ``owner`` (``"module:Class"``) it is: ``self`` for the flow's client argument and ``result``
    (``"{}"``, ``"Awaitable[{}]"``, ``"Iterator[{}]"``, ...) in place of the flow's
    ``Flow[X]``/``Stream[X]``, so ``help()`` and ``inspect.signature`` show what a caller
    gets."""
    signature = inspect.signature(flow)
    annotation = signature.return_annotation
    match = re.fullmatch(r"(?:Flow|Stream)\[(.*)\]", str(annotation))
    if match:
        annotation = result.format(match.group(1))
    first, *rest = signature.parameters.values()
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[first.replace(name="self", annotation=inspect.Parameter.empty), *rest],
        return_annotation=annotation,
    )
    method.__module__, _, cls = owner.partition(":")
    method.__qualname__ = f"{cls}.{flow.__name__}"


def _health_stub(channel: Any) -> Any:
    from grpc_health.v1 import health_pb2_grpc  # only wait_ready needs it

    return health_pb2_grpc.HealthStub(channel)


_STUB_FACTORIES: dict[str, Callable[[Any], Any]] = {**STUBS, "health": _health_stub}


#: host:port, a bracketed IPv6 host, or either after gRPC's ``dns:///``: the port is the
#: last run of digits (a unix socket's path and other schemes are left to gRPC).
_HOST_PORT = re.compile(r"(?:dns:///)?(?:\[[^\]]*\]|[^:/\[\]]+):(\d+)")


def _check_port(service: str, address: str) -> None:
    """ValueError for a port no socket has: gRPC took ``localhost:99999`` as port 34463
    (99999 - 65536) and the calls went there."""
    matched = _HOST_PORT.fullmatch(address)
    if matched and not 0 < int(matched.group(1)) <= 65535:
        raise ValueError(
            f"the {service} address {address!r} has no port a server can listen on: use "
            "host:port with a port from 1 to 65535"
        )


class ClientCore:
    """What both clients hold: addresses, default deadline, credentials, channel options and
    the channels themselves (opened lazily, one per service and retry mode, by the
    driver's :meth:`_open_channel`)."""

    def __init__(
        self,
        ingest: str | None = None,
        recall: str | None = None,
        scheduler: str | None = None,
        summariser: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        auto_idempotency_keys: bool = True,
        channel_options: Sequence[tuple[str, Any]] = (),
        api_key: str | None = None,
        tls: bool | None = None,
        ca_file: str | None = None,
        client_cert_file: str | None = None,
        client_key_file: str | None = None,
        rate_limit_retries: int = 3,
    ) -> None:
        """Addresses are ``host:port``; unset ones come from :func:`default_address`."""
        env = os.environ
        self.api_key = api_key if api_key is not None else env.get("EPISODIC_API_KEY") or None
        ca_file = ca_file or env.get("EPISODIC_TLS_CA_FILE") or None
        client_cert_file = client_cert_file or env.get("EPISODIC_TLS_CLIENT_CERT_FILE") or None
        client_key_file = client_key_file or env.get("EPISODIC_TLS_CLIENT_KEY_FILE") or None
        self._credentials = (
            channel_credentials(ca_file, client_cert_file, client_key_file)
            if tls or (tls is None and ca_file)
            else None
        )
        self._metadata = (("authorization", f"Bearer {self.api_key}"),) if self.api_key else ()
        self.rate_limit_retries = rate_limit_retries
        self.addresses = {
            "ingest": ingest or default_address("ingest"),
            "recall": recall or default_address("recall"),
            "scheduler": scheduler or default_address("scheduler"),
            "summariser": summariser or default_address("summariser"),
        }
        for service, address in self.addresses.items():
            _check_port(service, address)
        self.timeout = timeout
        self.auto_idempotency_keys = auto_idempotency_keys
        self._options = list(channel_options)
        self._channels: dict[str, Any] = {}
        self._stubs: dict[tuple[str, str], Any] = {}
        # Guards both dicts: first calls from several threads must not each open (and
        # leak) a channel, and close() may run while another thread calls. (The asyncio
        # client never holds it across an await.)
        self._lock = threading.Lock()

    def _open_channel(
        self, address: str, credentials: grpc.ChannelCredentials | None, options: list[Any]
    ) -> Any:
        """Opens a channel of the driver's kind (grpc.Channel or grpc.aio.Channel)."""
        raise NotImplementedError

    def _channel(self, key: str) -> Any:
        """The channel for ``key`` ("ingest", or "ingest:noretry" for calls that must not
        be repeated), opened on first use. Thread-safe: concurrent first calls share one."""
        with self._lock:
            channel = self._channels.get(key)
            if channel is None:
                service = key.removesuffix(":noretry")
                address = self.addresses[PROCESS_OF.get(service, service)]
                channel = self._open_channel(address, self._credentials, self._options_for(key))
                self._channels[key] = channel
            return channel

    def _options_for(self, key: str) -> list[tuple[str, Any]]:
        service = key.removesuffix(":noretry")
        options = [*self._options, ("grpc.max_receive_message_length", 64 * 1024 * 1024)]
        if key.endswith(":noretry"):
            return [*options, ("grpc.enable_retries", 0)]
        name, methods = RETRIED[service]
        return [
            *options,
            ("grpc.enable_retries", 1),
            ("grpc.service_config", service_config(name, methods)),
        ]

    def _stub(self, channel_key: str, stub: str) -> Any:
        found = self._stubs.get((channel_key, stub))
        if found is not None:
            return found
        channel = self._channel(channel_key)
        with self._lock:
            found = self._stubs.get((channel_key, stub))
            if found is None:
                found = _STUB_FACTORIES[stub](channel)
                self._stubs[(channel_key, stub)] = found
            return found

    def _prepare(self, step: Rpc) -> tuple[Callable[..., Any], dict[str, Any]]:
        """The stub method a driver calls for ``step``, and its keyword arguments."""
        fn: Callable[..., Any] = getattr(self._stub(step.channel, step.stub), step.method)
        kwargs: dict[str, Any] = {"timeout": step.timeout}
        if step.authenticate:
            kwargs["metadata"] = self._metadata
        return fn, kwargs

    def _take_channels(self) -> list[Any]:
        """Forgets every channel (a later call opens them again) and returns them to close."""
        with self._lock:
            channels = list(self._channels.values())
            self._channels.clear()
            self._stubs.clear()
        return channels
