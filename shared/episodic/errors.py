"""Domain errors. Domain code raises these; one server interceptor maps them to gRPC
status codes with a ``google.rpc.ErrorInfo`` (AIP-193), so servicers never pick codes."""

from __future__ import annotations

import logging
import traceback
from typing import Any

import grpc

ERROR_DOMAIN = "episodic.dev"


class EpisodicError(Exception):
    """Base of every error a client should see with its own message."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL
    reason: str = "INTERNAL"

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        reason: str | None = None,
        **metadata: str,
    ) -> None:
        """``message`` is for a person; ``field`` names the offending request field;
        ``reason`` (UPPER_SNAKE) refines the class's reason for machines."""
        super().__init__(message)
        self.message = message
        if reason:
            self.reason = reason
        self.metadata = {k: str(v) for k, v in metadata.items()}
        if field:
            self.metadata["field"] = field


class DeadlineExceeded(EpisodicError):
    """The database did not answer within the call's deadline (or the statement ceiling)."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED
    reason = "DEADLINE_EXCEEDED"


class InvalidArgument(EpisodicError):
    code = grpc.StatusCode.INVALID_ARGUMENT
    reason = "INVALID_ARGUMENT"


class NotFound(EpisodicError):
    code = grpc.StatusCode.NOT_FOUND
    reason = "NOT_FOUND"


class AlreadyExists(EpisodicError):
    code = grpc.StatusCode.ALREADY_EXISTS
    reason = "ALREADY_EXISTS"


class FailedPrecondition(EpisodicError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = "FAILED_PRECONDITION"


class Aborted(EpisodicError):
    """Another operation on the same thing is under way; retry once it finished."""

    code = grpc.StatusCode.ABORTED
    reason = "ABORTED"


class Unavailable(EpisodicError):
    code = grpc.StatusCode.UNAVAILABLE
    reason = "UNAVAILABLE"


class Unauthenticated(EpisodicError):
    """No API key, or one that is unknown, revoked or expired."""

    code = grpc.StatusCode.UNAUTHENTICATED
    reason = "UNAUTHENTICATED"


class PermissionDenied(EpisodicError):
    """The key is valid but its role or datasets do not allow the call."""

    code = grpc.StatusCode.PERMISSION_DENIED
    reason = "PERMISSION_DENIED"


class ResourceExhausted(EpisodicError):
    """A limit was reached; ``retry_after`` (seconds) says when to try again, and travels
    as a ``google.rpc.RetryInfo`` detail beside the ErrorInfo."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    reason = "RESOURCE_EXHAUSTED"

    def __init__(self, message: str, *, retry_after: float, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after
        #: Seconds the door waits before sending this answer: set for a caller that came
        #: back before its last retry hint ran out (see Guard.refusal_before_reading).
        self.hold = 0.0


class ConfigurationError(EpisodicError):
    """The settings do not allow the service to start; raised at startup."""

    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = "CONFIGURATION_ERROR"


class SchemaMismatch(EpisodicError):
    """The database schema does not fit this configuration; raised at startup."""

    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = "SCHEMA_MISMATCH"


class ProviderError(EpisodicError):
    """An LLM or embedding provider failed or answered something unusable."""

    code = grpc.StatusCode.UNAVAILABLE
    reason = "PROVIDER_ERROR"


def describe_error(err: BaseException, limit: int = 500) -> str:
    """A description of ``err`` safe for logs and for an episode's ``error`` column: no
    user content and no SQL parameters.

    Our own errors carry messages written for people (they name fields, never quote stored
    content). A database error's text can quote the values it choked on ('invalid input
    syntax for type uuid: "…"', a key's value in a uniqueness violation), so it is reduced
    to its class and SQLSTATE. Anything else is ``Type: message``, capped at ``limit``.
    """
    if isinstance(err, EpisodicError):
        return f"{type(err).__name__}: {err.message}"[:limit]
    driver = getattr(err, "orig", None) or err  # sqlalchemy wraps the driver's error
    if type(driver).__module__.startswith("psycopg"):
        sqlstate = getattr(driver, "sqlstate", None)
        where = f" (SQLSTATE {sqlstate})" if sqlstate else ""
        return f"{type(err).__name__}: {type(driver).__name__}{where}"
    # Our code and SQLAlchemy's own errors (engines hide statement parameters).
    return f"{type(err).__name__}: {err}"[:limit]


def log_failure(logger: logging.Logger, what: str, err: BaseException) -> None:
    """Logs an unexpected failure at ERROR: ``what``, :func:`describe_error` of ``err`` and
    its traceback's frames — never the exception's own text, which may quote user content."""
    frames = "".join(traceback.format_tb(err.__traceback__))
    logger.error("%s: %s\n%s", what, describe_error(err), frames.rstrip())
