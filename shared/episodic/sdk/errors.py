"""The SDK's errors: one class per gRPC status a caller handles, made from the status
and the server's ``google.rpc`` details (:func:`translate_error`)."""

from __future__ import annotations

from collections.abc import Mapping

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

# --------------------------------------------------------------------------- errors


class EpisodicRpcError(Exception):
    """A call failed. ``code`` is the gRPC status code, ``reason`` the server's
    ``google.rpc.ErrorInfo`` reason (e.g. ``INVALID_ARGUMENT``, ``PROVIDER_ERROR``; the
    code's name when the server sent none), ``metadata`` its details (``field`` names the
    offending request field)."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        reason: str = "",
        metadata: Mapping[str, str] | None = None,
        method: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{code.name}: {message}" + (f" ({method})" if method else ""))
        self.code = code
        self.message = message
        self.reason = reason or code.name
        self.metadata = dict(metadata or {})
        self.method = method
        #: Seconds the server asked the caller to wait (a google.rpc.RetryInfo), if any.
        self.retry_after = retry_after

    @property
    def field(self) -> str | None:
        """The request field the server blamed, when it named one."""
        return self.metadata.get("field")


class InvalidArgumentError(EpisodicRpcError):
    """INVALID_ARGUMENT: the request is wrong; repeating it will not help."""


class NotFoundError(EpisodicRpcError):
    """NOT_FOUND: the thread or episode does not exist."""


class UnauthenticatedError(EpisodicRpcError):
    """UNAUTHENTICATED: no API key, or one that is unknown, revoked or expired."""


class PermissionDeniedError(EpisodicRpcError):
    """PERMISSION_DENIED: the key's role or datasets do not allow the call."""


class ResourceExhaustedError(EpisodicRpcError):
    """RESOURCE_EXHAUSTED: a limit was reached; ``retry_after`` says when to try again
    (rate limits; the client waits and retries by itself first). Without ``retry_after``
    (a request too large) repeating it will not help."""


class AlreadyExistsError(EpisodicRpcError):
    """ALREADY_EXISTS: e.g. a thread with the chosen id exists."""


class FailedPreconditionError(EpisodicRpcError):
    """FAILED_PRECONDITION: e.g. retrying an episode that is not failed."""


class AbortedError(EpisodicRpcError):
    """ABORTED: the call ran into another one in progress (e.g. a second erasure of a
    dataset already being erased, reason ``ERASURE_IN_PROGRESS``) and did not take effect;
    try again once that one has finished."""


class UnavailableError(EpisodicRpcError):
    """UNAVAILABLE: the service (or its database or provider) is down; try again later."""


class DeadlineExceededError(EpisodicRpcError):
    """DEADLINE_EXCEEDED: the call did not finish within its timeout."""


_ERROR_TYPES: dict[grpc.StatusCode, type[EpisodicRpcError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.ABORTED: AbortedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
}


#: ``reason`` of an :class:`UnavailableError` made from a reset HTTP/2 stream.
STREAM_RESET = "STREAM_RESET"


def _stream_reset(code: grpc.StatusCode, message: str) -> bool:
    """Whether a status came from a reset HTTP/2 stream (an RST_STREAM frame) rather than
    from a server. grpcio reports one as INTERNAL (UNKNOWN in some versions) "Stream
    removed (... Received RST_STREAM with error code N)", which reads like a server's bug.
    Only the transport says that: every error our servers answer carries a
    ``google.rpc.Status`` (the caller checks there is none)."""
    return code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN) and (
        "RST_STREAM" in message or "Stream removed" in message
    )


def translate_error(err: grpc.RpcError, method: str) -> EpisodicRpcError:
    """The :class:`EpisodicRpcError` subclass for a failed call (``grpc.RpcError`` or
    ``grpc.aio.AioRpcError``), with the reason, metadata and RetryInfo the server sent.

    A reset stream is an :class:`UnavailableError` with reason ``STREAM_RESET``: like a
    dropped connection (which gRPC itself reports as UNAVAILABLE) the call may or may not
    have taken effect, and the client repeats it only when it is safe to (:func:`call`).
    """
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    message = (err.details() if hasattr(err, "details") else None) or str(err)
    reason, metadata, retry_after = "", {}, None
    try:
        status = rpc_status.from_call(err)  # type: ignore[arg-type]
    except Exception:  # a status without rich details, or not a call at all
        status = None
    if status is None and _stream_reset(code, message):
        return UnavailableError(
            grpc.StatusCode.UNAVAILABLE,
            f"the connection reset the call before it answered ({message}); it may or may "
            "not have taken effect",
            STREAM_RESET,
            {"grpc_code": code.name},
            method,
        )
    if status is not None:
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            retry = error_details_pb2.RetryInfo()
            if detail.Is(info.DESCRIPTOR) and detail.Unpack(info):
                reason, metadata = info.reason, dict(info.metadata)
            elif detail.Is(retry.DESCRIPTOR) and detail.Unpack(retry):
                retry_after = retry.retry_delay.ToTimedelta().total_seconds()
    return _ERROR_TYPES.get(code, EpisodicRpcError)(
        code, message, reason, metadata, method, retry_after
    )
