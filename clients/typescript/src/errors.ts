/**
 * Typed errors: every failed call becomes an {@link EpisodicError} subclass chosen by its
 * gRPC code, carrying the server's `google.rpc.ErrorInfo` (reason and metadata) decoded
 * from `grpc-status-details-bin` with the generated ErrorInfo/Status schemas.
 */

import { fromBinary } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";

import { ErrorInfoSchema, RetryInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "./gen/google/rpc/status_pb.js";
import type { Status } from "./gen/google/rpc/status_pb.js";

export { Code };

/** `Code.InvalidArgument` → `"INVALID_ARGUMENT"` (the gRPC spelling, as Python prints it). */
export function codeName(code: Code): string {
  const name = Code[code] as string | undefined;
  if (name === undefined) return String(code);
  return name.replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

export interface EpisodicErrorInit {
  code: Code;
  message: string;
  reason?: string;
  domain?: string;
  metadata?: Readonly<Record<string, string>>;
  method?: string;
  /** How long the server asked the caller to wait, in ms (a google.rpc.RetryInfo). */
  retryAfterMs?: number;
  cause?: unknown;
}

/**
 * A call failed. `code` is the gRPC status code, `reason` the server's ErrorInfo reason
 * (e.g. `INVALID_ARGUMENT`, `IDEMPOTENCY_KEY_REUSED`; the code's name when the server sent
 * none), `metadata` the ErrorInfo metadata (`field` names the offending request field).
 * `message` reads `"<CODE>: <server message> (<Method>)"`; `rawMessage` is the server's text.
 */
export class EpisodicError extends Error {
  readonly code: Code;
  readonly codeName: string;
  readonly rawMessage: string;
  readonly reason: string;
  readonly domain: string;
  readonly metadata: Readonly<Record<string, string>>;
  readonly method: string;
  /** Milliseconds the server asked the caller to wait before trying again (a
   * `google.rpc.RetryInfo`), if it sent one: a rate limit's. */
  readonly retryAfterMs: number | undefined;

  constructor(init: EpisodicErrorInit) {
    const name = codeName(init.code);
    super(`${name}: ${init.message}${init.method ? ` (${init.method})` : ""}`, {
      cause: init.cause,
    });
    this.name = new.target.name;
    this.code = init.code;
    this.codeName = name;
    this.rawMessage = init.message;
    this.reason = init.reason || name;
    this.domain = init.domain ?? "";
    this.metadata = Object.freeze({ ...(init.metadata ?? {}) });
    this.method = init.method ?? "";
    this.retryAfterMs = init.retryAfterMs;
  }

  /** The request field the server blamed, when it named one. */
  get field(): string | undefined {
    return this.metadata["field"];
  }
}

/** INVALID_ARGUMENT: the request is wrong; repeating it will not help. */
export class InvalidArgumentError extends EpisodicError {}
/** NOT_FOUND: the thread or episode does not exist. */
export class NotFoundError extends EpisodicError {}
/** ALREADY_EXISTS: e.g. a thread with the chosen id exists, or an idempotency key was
 * reused with other content (reason `IDEMPOTENCY_KEY_REUSED`). */
export class AlreadyExistsError extends EpisodicError {}
/** FAILED_PRECONDITION: e.g. retrying an episode that is not failed. */
export class FailedPreconditionError extends EpisodicError {}
/** UNAVAILABLE: the service (or its database or provider) is down; try again later. */
export class UnavailableError extends EpisodicError {}
/** DEADLINE_EXCEEDED: the call did not finish within its timeout. */
export class DeadlineExceededError extends EpisodicError {}
/** UNAUTHENTICATED: no or a wrong API key. */
export class UnauthenticatedError extends EpisodicError {}
/** PERMISSION_DENIED: the API key may not do this. */
export class PermissionDeniedError extends EpisodicError {}
/** RESOURCE_EXHAUSTED: a limit was reached; `retryAfterMs` says when to try again (rate
 * limits; the client waits and retries by itself first, up to `rateLimitRetries` times).
 * Without `retryAfterMs` (a request too large) repeating it will not help. */
export class ResourceExhaustedError extends EpisodicError {}

const ERROR_TYPES: ReadonlyMap<Code, typeof EpisodicError> = new Map<Code, typeof EpisodicError>([
  [Code.InvalidArgument, InvalidArgumentError],
  [Code.NotFound, NotFoundError],
  [Code.AlreadyExists, AlreadyExistsError],
  [Code.FailedPrecondition, FailedPreconditionError],
  [Code.Unavailable, UnavailableError],
  [Code.DeadlineExceeded, DeadlineExceededError],
  [Code.Unauthenticated, UnauthenticatedError],
  [Code.PermissionDenied, PermissionDeniedError],
  [Code.ResourceExhausted, ResourceExhaustedError],
]);

/** The EpisodicError subclass for `code` (EpisodicError itself for the others). */
export function errorClassFor(code: Code): typeof EpisodicError {
  return ERROR_TYPES.get(code) ?? EpisodicError;
}

interface ErrorInfoLike {
  reason: string;
  domain: string;
  metadata: Record<string, string>;
}

function base64Decode(value: string): Uint8Array {
  // gRPC sends -bin headers as base64, usually without padding.
  return new Uint8Array(Buffer.from(value, "base64"));
}

/** The google.rpc.Status details of a failed call that Connect did not parse, straight
 * from the `grpc-status-details-bin` trailer (none when it is absent or malformed). */
function rawDetails(err: ConnectError): Status["details"] {
  const raw = err.metadata.get("grpc-status-details-bin");
  if (!raw) return [];
  try {
    return fromBinary(StatusSchema, base64Decode(raw)).details;
  } catch {
    return []; // A malformed trailer: fall back to the bare code and message.
  }
}

/** The first ErrorInfo of a failed call, from the details Connect parsed or, failing that,
 * straight from the `grpc-status-details-bin` trailer (a google.rpc.Status). */
export function errorInfoOf(err: ConnectError): ErrorInfoLike | undefined {
  const [info] = err.findDetails(ErrorInfoSchema);
  if (info) return info;
  for (const detail of rawDetails(err)) {
    const unpacked = anyUnpack(detail, ErrorInfoSchema);
    if (unpacked) return unpacked;
  }
  return undefined;
}

/** The delay, in ms, of the first google.rpc.RetryInfo of a failed call (found like
 * {@link errorInfoOf}); undefined when the server sent none. */
export function retryDelayOf(err: ConnectError): number | undefined {
  let [retry] = err.findDetails(RetryInfoSchema);
  if (!retry) {
    for (const detail of rawDetails(err)) {
      retry = anyUnpack(detail, RetryInfoSchema);
      if (retry) break;
    }
  }
  if (!retry) return undefined;
  const delay = retry.retryDelay;
  return delay ? Number(delay.seconds) * 1000 + delay.nanos / 1e6 : 0;
}

/** `reason` of an UnavailableError made from a reset HTTP/2 stream. */
export const STREAM_RESET = "STREAM_RESET";

/**
 * Whether a failure came from a reset HTTP/2 stream (an RST_STREAM frame) rather than from
 * a server: Connect reports one as INTERNAL "Stream closed with error code
 * NGHTTP2_INTERNAL_ERROR" (Node's words; Connect's own: "http/2 stream closed with error
 * code INTERNAL_ERROR (0x2)"), which reads like a server's bug. Every error the services answer
 * carries a google.rpc.Status in `grpc-status-details-bin`; a reset carries none.
 */
function isStreamReset(err: ConnectError): boolean {
  return (
    (err.code === Code.Internal || err.code === Code.Unknown) &&
    !err.metadata.has("grpc-status-details-bin") &&
    /stream closed with error code|RST_STREAM|stream removed/i.test(err.rawMessage)
  );
}

/**
 * Turns anything a Connect call threw into the matching EpisodicError. A reset stream is
 * an UnavailableError with reason `STREAM_RESET`: like a dropped connection, the call may
 * or may not have taken effect, so the client repeats it only when that is safe.
 */
export function translateError(err: unknown, method: string): EpisodicError {
  if (err instanceof EpisodicError) return err;
  const connectError = ConnectError.from(err);
  if (isStreamReset(connectError)) {
    return new UnavailableError({
      code: Code.Unavailable,
      message:
        `the connection reset the call before it answered (${connectError.rawMessage}); ` +
        "it may or may not have taken effect",
      reason: STREAM_RESET,
      metadata: { grpc_code: codeName(connectError.code) },
      method,
      cause: err,
    });
  }
  const info = errorInfoOf(connectError);
  const ErrorClass = errorClassFor(connectError.code);
  return new ErrorClass({
    code: connectError.code,
    message: connectError.rawMessage,
    reason: info?.reason ?? "",
    domain: info?.domain ?? "",
    metadata: info?.metadata ?? {},
    method,
    retryAfterMs: retryDelayOf(connectError),
    cause: err,
  });
}
