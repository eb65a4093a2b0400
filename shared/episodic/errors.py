"""Domain errors. Domain code raises these; one server interceptor maps them to gRPC
status codes with a ``google.rpc.ErrorInfo`` (AIP-193), so servicers never pick codes."""

from __future__ import annotations

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


class Unavailable(EpisodicError):
    code = grpc.StatusCode.UNAVAILABLE
    reason = "UNAVAILABLE"


class SchemaMismatch(EpisodicError):
    """The database schema does not fit this configuration; raised at startup."""

    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = "SCHEMA_MISMATCH"


class ProviderError(EpisodicError):
    """An LLM or embedding provider failed or answered something unusable."""

    code = grpc.StatusCode.UNAVAILABLE
    reason = "PROVIDER_ERROR"
