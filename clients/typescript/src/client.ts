/**
 * The TypeScript SDK: one client for the four services, mirroring the Python SDK
 * (`episodic.client`): deadlines on every call, retries on UNAVAILABLE for calls that are
 * safe to repeat, waits and retries when a rate limit refuses a call, automatic
 * idempotency keys, typed errors.
 *
 * Messages are the generated protobuf-es types (src/gen); this module only adds the small
 * surface around them.
 */

import { randomUUID } from "node:crypto";
import type * as http2 from "node:http2";

import { create } from "@bufbuild/protobuf";
import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { Code, createClient } from "@connectrpc/connect";
import type { CallOptions, Client, Interceptor, Transport } from "@connectrpc/connect";
import { Http2SessionManager, createGrpcTransport } from "@connectrpc/connect-node";

import { SERVICES, addressFromEnv } from "./endpoints.js";
import type { Environment, ServiceName } from "./endpoints.js";
import { DeadlineExceededError, UnavailableError, translateError } from "./errors.js";
import { tracingInterceptor } from "./tracing.js";
import {
  EpisodeStatus,
  EpisodeStatusSchema,
  EpisodeTrigger,
  Outcome,
  Role,
  RoleSchema,
  SemanticStatusSchema,
  EpisodeTriggerSchema,
} from "./gen/episodic/v1/episode_pb.js";
import type {
  Episode,
  Message,
  Procedure,
  ScoredEpisode,
  ScoredProcedure,
  SemanticStatus,
  Thread,
} from "./gen/episodic/v1/episode_pb.js";
import { AdminService, LanguageOrigin } from "./gen/episodic/v1/admin_service_pb.js";
import type {
  DatasetPolicy,
  DatasetSummary,
  ErasureReceipt,
  SetDatasetPolicyRequestSchema,
} from "./gen/episodic/v1/admin_service_pb.js";
import { IngestService, NewMessageSchema } from "./gen/episodic/v1/ingest_service_pb.js";
import type {
  EndThreadResponse,
  MessageReceipt,
  NewMessage as NewMessageProto,
} from "./gen/episodic/v1/ingest_service_pb.js";
import type { Entity } from "./gen/episodic/v1/entity_pb.js";
import { RecallInclude, RecallService } from "./gen/episodic/v1/recall_service_pb.js";
import type { QueryUnderstanding } from "./gen/episodic/v1/recall_service_pb.js";
import type { RecallRequestSchema } from "./gen/episodic/v1/recall_service_pb.js";
import { SchedulerService } from "./gen/episodic/v1/scheduler_service_pb.js";
import type { RunSweepResponse } from "./gen/episodic/v1/scheduler_service_pb.js";
import { SummariserService } from "./gen/episodic/v1/summariser_service_pb.js";
import type {
  GetPipelineStatusResponse,
  ProcessPendingResponse,
  ProviderHealth,
} from "./gen/episodic/v1/summariser_service_pb.js";
import { Health, HealthCheckResponse_ServingStatus } from "./gen/grpc/health/v1/health_pb.js";

/** Default deadline of every call, in milliseconds (the Python SDK's 10 s). */
export const DEFAULT_TIMEOUT_MS = 10_000;

// --------------------------------------------------------------------------- options

/** Exponential backoff on UNAVAILABLE for calls that are safe to repeat (gRPC A6 style:
 * each wait is random in [0, min(initial × multiplier^(n-1), max)]), always within the
 * call's deadline. */
export interface RetryPolicy {
  /** Attempts in all, the first included (default 5; 1 disables retries). */
  maxAttempts: number;
  initialBackoffMs: number;
  maxBackoffMs: number;
  multiplier: number;
}

export const DEFAULT_RETRY: Readonly<RetryPolicy> = Object.freeze({
  maxAttempts: 5,
  initialBackoffMs: 100,
  maxBackoffMs: 2000,
  multiplier: 2,
});

/** TLS settings (passed to `http2.connect`); `true` means TLS with the system's CAs. */
export type TlsOptions =
  | boolean
  | Pick<http2.SecureClientSessionOptions, "ca" | "cert" | "key" | "servername" | "rejectUnauthorized">;

export interface EpisodicClientOptions {
  /** `host:port` (or a full `http://` / `https://` URL) of each service; unset ones come
   * from `EPISODIC_<SERVICE>_ADDRESS` / `_PORT` or the default ports. */
  ingest?: string;
  recall?: string;
  scheduler?: string;
  summariser?: string;
  /** Default deadline of every call in ms (each method also takes `timeoutMs`). */
  timeoutMs?: number;
  /** Give every message without an idempotency key an `auto:<uuid>` one (default true),
   * which makes AddMessages safe to retry. */
  autoIdempotencyKeys?: boolean;
  /** Sent as `authorization: Bearer <key>` on every call. Defaults to `EPISODIC_API_KEY`.
   * A function is called before each call (for rotating tokens). */
  apiKey?: string | (() => string | Promise<string>);
  /** TLS for every service (default: plaintext HTTP/2, like `episodic up`). */
  tls?: TlsOptions;
  /** Retry policy for idempotent calls; `false` disables retries. */
  retry?: Partial<RetryPolicy> | false;
  /** How many times a call refused by a rate limit (RESOURCE_EXHAUSTED with a
   * `google.rpc.RetryInfo`) is repeated after the delay the server asks for, within its
   * deadline (default 3; 0 disables). Any call, since the refusal came before it ran. */
  rateLimitRetries?: number;
  /** Extra Connect interceptors (tracing, logging), run on every attempt. */
  interceptors?: Interceptor[];
  /** Where `EPISODIC_*` variables are read from (default `process.env`), and the GenAI
   * content switches of the client's spans (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`,
   * `EPISODIC_GENAI_CAPTURE_ENCRYPTED_CONTENT`), read at each call. */
  env?: Environment;
}

/** Per-call options every method takes. */
export interface CallOpts {
  /** Deadline of this call in ms, across its retries (default: the client's). */
  timeoutMs?: number;
  /** Aborts the call. */
  signal?: AbortSignal;
}

// --------------------------------------------------------------------------- inputs/results

export type RoleName = "system" | "user" | "assistant" | "agent" | "tool";

/** A tool call as OpenAI's chat format writes it (`{id, type: "function", function: {name,
 * arguments}}`) or flat (`{id, name, arguments}`); `arguments` is the JSON text of an
 * object, or the object itself (sent as JSON text). */
export type ToolCallInput =
  | { id: string; type?: "function"; function: { name: string; arguments?: string | JsonObject } }
  | { id: string; name: string; arguments?: string | JsonObject };

/** A message to add: `createdAt` backfills history (defaults to the receive time);
 * `idempotencyKey` makes a repeated add a no-op (generated when not given and the client's
 * `autoIdempotencyKeys` is on).
 *
 * A message in OpenAI's chat format is one as it is: an assistant message's `tool_calls`
 * (content may then be empty or null), a tool message's `tool_call_id` (the call it
 * answers) and `name` (the tool's) — or in camelCase, `toolCalls` and `toolCallId`. */
export interface NewMessageInput {
  role: RoleName | Role;
  content?: string | null;
  metadata?: JsonObject;
  createdAt?: Date | Timestamp;
  idempotencyKey?: string;
  toolCalls?: readonly ToolCallInput[];
  tool_calls?: readonly ToolCallInput[] | null;
  toolCallId?: string;
  tool_call_id?: string | null;
  /** A tool message: the tool's name (defaults to the answered call's). */
  name?: string | null;
}

/** A message in OpenAI's chat format, as `toOpenAI` gives it back (a chat completion's
 * `messages` takes it as it is). */
export interface OpenAIMessage {
  role: string;
  content: string | null;
  tool_calls?: { id: string; type: "function"; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
  name?: string;
}

export type OutcomeName = "success" | "failure" | "partial";

export interface RecordOutcomeOptions extends CallOpts {
  /** A score in [0, 1] (a reward, a rating). */
  score?: number;
  /** Why, in a sentence (at most 2000 characters). */
  note?: string;
  /** One episode of the thread: the outcome of its stretch only (default: the thread). */
  episodeId?: string;
}

/** What `recordOutcome` recorded: `changed` is false when the same outcome (score and note
 * included) was already recorded. */
export interface OutcomeResult {
  threadId: string;
  /** The episode it is for; "" for the whole thread. */
  episodeId: string;
  outcome: OutcomeName;
  changed: boolean;
  recordedAt?: Timestamp;
}

/** A message as an object or a `[role, content]` pair. */
export type MessageInput = NewMessageInput | readonly [RoleName | Role, string];

/** One receipt per added message, in request order, and how many this call stored (the
 * rest were replays of an idempotency key). */
export interface AddMessagesResult {
  threadId: string;
  receipts: MessageReceipt[];
  storedCount: number;
  /** The messages' sequences, in request order. */
  sequences: bigint[];
}

/** The top episodes, best first, and how many current episodes the dataset holds. Iterable
 * over its episodes, and accepted by `renderEpisodes` as it is. */
export interface RecallResult extends Iterable<ScoredEpisode> {
  episodes: ScoredEpisode[];
  episodeCount: number;
  /** How likely the dataset holds an answer to the query at all (0..1, calibrated like each
   * episode's `relevance`; what `minMatch` compares). Undefined without a query or without
   * episodes or events to rank. */
  match?: number;
  /** The answer is empty because the thresholds (`minRelevance`, `minMatch`, `abstain`)
   * left out every episode and event there was: nothing fits, as opposed to nothing there. */
  abstained: boolean;
  /** `abstain` held. False when nothing was ranked by meaning (`match` undefined: no query, a
   * query naming only a time) and where Recall has no curves to abstain by (a dataset of another
   * language than English, an OpenAI embedder): every episode was then kept as without it. */
  abstainApplied: boolean;
  /** A current episode of the dataset (returned or not) still waits for its chunk index (the
   * passages Recall ranks beside the summaries): the same question may rank differently in a
   * few seconds. */
  chunksPending: boolean;
  /** Episodes of the dataset are queued or being summarised: their messages are in no answer
   * yet. */
  episodesPending: boolean;
  /** How the query was read: the time expressions found, the window or session ordinal
   * they resolved to, whether it was applied, and the text that was ranked. Undefined when
   * `literalQuery` was set or there was no query. */
  understanding?: QueryUnderstanding;
  /** With `includeProcedures`: the procedures that fit the query, best first (empty
   * otherwise); `renderProcedures` takes the result as it is. */
  procedures: ScoredProcedure[];
}

/** One page of a list; pass `nextPageToken` to get the next (empty on the last). */
export interface Page<T> extends Iterable<T> {
  items: T[];
  nextPageToken: string;
}

/** A page of the episodes mentioning `entity` (with its aliases), oldest first. */
export interface EntityTimelinePage extends Page<Episode> {
  entity?: Entity;
}

export type EpisodeStatusName = "pending" | "processing" | "completed" | "failed" | "archived";

export interface CreateThreadOptions extends CallOpts {
  label?: string;
  metadata?: JsonObject;
  /** A UUID chosen by the client (ALREADY_EXISTS when taken, in any dataset: thread ids
   * are global, so choose it unguessable; prefer `idempotencyKey`). */
  threadId?: string;
  /** Your own name for the thread (a session key), unique within the dataset: called
   * again with it, the thread it created is returned instead of a new one, so the call
   * is retried safely on UNAVAILABLE. */
  idempotencyKey?: string;
}

export interface ListMessagesOptions extends CallOpts {
  pageSize?: number;
  pageToken?: string;
  startSequence?: number | bigint;
  endSequence?: number | bigint;
}

export interface PageOptions extends CallOpts {
  pageSize?: number;
  pageToken?: string;
}

export interface RecallOptions extends CallOpts {
  /** How many episodes (server default 3, at most 100). */
  limit?: number;
  similarityWeight?: number;
  recencyWeight?: number;
  /** Only episodes whose span ends at or after this time. */
  since?: Date;
  /** Only episodes whose span starts at or before this time. */
  until?: Date;
  threadIds?: string[];
  /** All must be present; each matches every alias of its entity ("atlas" finds
   * "project Atlas") unless `exactEntities`. */
  entities?: string[];
  /** Match `entities` by their exact (normalised) spelling only. */
  exactEntities?: boolean;
  eventType?: string;
  /** Rank as if it were this time (nothing that ended later is returned). */
  asOf?: Date;
  /** Rank the query's words as written: no time expressions are read from it. */
  literalQuery?: boolean;
  /** Only the events recorded with this actor (summaries are then left out). */
  actor?: string;
  /** Leave events out: summaries only. */
  excludeEvents?: boolean;
  /** Leave out episodes whose calibrated relevance (`ScoredEpisode.relevance`) is below
   * this, so a question nothing in the dataset answers gets nothing; unset or 0 keeps every
   * episode (unset lets `abstain` choose; 0 overrides it). The README recommends a value
   * per embedder (0.4 with MiniLM). */
  minRelevance?: number;
  /** Answer with nothing when the request's match (the chance, from its best match, that
   * the dataset holds an answer at all) is below this; unset or 0 always answers (unset
   * lets `abstain` choose; 0 overrides it). */
  minMatch?: number;
  /** Apply the `minRelevance` and `minMatch` Recall recommends for its embedding model (a
   * question nothing answers then gets nothing); an explicit value, 0 included, takes
   * precedence. */
  abstain?: boolean;
  /** Also answer with the procedures that fit the query (`RecallResult.procedures`). */
  includeProcedures?: boolean;
  /** How many procedures with `includeProcedures` (server default 3, at most 20). */
  procedures?: number;
}

export interface RecallProceduresOptions extends CallOpts {
  /** How many procedures (server default 3, at most 20). */
  limit?: number;
}

export interface RecordEventOptions extends CallOpts {
  /** decision, tool_call, feedback, milestone, or a custom lowercase type. */
  eventType: string;
  /** Who acted (default "agent"). */
  actor?: string;
  entities?: string[];
  /** When it happened (default: now). */
  occurredAt?: Date;
  /** A thread of the same dataset it happened in. */
  threadId?: string;
  /** Unique per dataset; generated (auto:<uuid>) when `autoIdempotencyKeys` is on. */
  idempotencyKey?: string;
}

export interface RecordEventResult {
  /** The event (kind EPISODE_KIND_EVENT; `episodeId` is the event's id). */
  event: Episode;
  /** False when its idempotency key was stored before (a replay). */
  stored: boolean;
}

export interface ListEpisodesOptions extends PageOptions {
  status?: EpisodeStatusName | EpisodeStatus;
  threadId?: string;
}

export interface WaitForEpisodeOptions {
  /** The sequence the episode must cover (default: the thread's last message). */
  endSequence?: number | bigint;
  /** Give up after this long (default 60 s) with a DeadlineExceededError. */
  timeoutMs?: number;
  pollIntervalMs?: number;
  signal?: AbortSignal;
}

export interface ListDatasetsOptions extends PageOptions {
  /** Only datasets whose name starts with this, e.g. "acme/". */
  prefix?: string;
}

/** What SplitEntity left: the new entity and what remains of the old one. */
export interface EntitySplit {
  /** The new entity, named after the alias split off. */
  splitOff: Entity;
  /** What is left of the entity it was split from. */
  remaining: Entity;
}

/**
 * What `setDatasetPolicy` changes; a field left `undefined` keeps the dataset's current
 * value (the request names only the fields given, in its `update_mask`).
 */
export interface SetDatasetPolicyOptions extends CallOpts {
  /** The dataset's own retention in days; `null`: back to the global default. */
  retentionDays?: number | null;
  /** The dataset's own compaction age in days; `null`: back to the global default. */
  compactAfterDays?: number | null;
  /** The language of its text: "fr", "pt-BR", "german"; "auto": detected from its text. */
  language?: string;
}

export interface PipelineStatusOptions extends CallOpts {
  maxErrors?: number;
  /** Probe the LLM and embedder (default true; false avoids calling a remote LLM). */
  checkProviders?: boolean;
}

// --------------------------------------------------------------------------- names

function lowerName(schema: { value: Record<number, { localName: string } | undefined> }, n: number) {
  return schema.value[n]?.localName.toLowerCase() ?? String(n);
}

/** `EpisodeStatus.COMPLETED` → `"completed"` (Python's `Episode.status`). */
export function episodeStatusName(status: EpisodeStatus): string {
  return lowerName(EpisodeStatusSchema, status);
}
/** `SemanticStatus.SKIPPED` → `"skipped"`. */
export function semanticStatusName(status: SemanticStatus): string {
  return lowerName(SemanticStatusSchema, status);
}
/** `EpisodeTrigger.EXPLICIT` → `"explicit"`. */
export function triggerName(trigger: EpisodeTrigger): string {
  return lowerName(EpisodeTriggerSchema, trigger);
}
/** `Role.ASSISTANT` → `"assistant"`. */
export function roleName(role: Role): string {
  return lowerName(RoleSchema, role);
}
/** `Outcome.SUCCESS` → `"success"` (a procedure source's outcome, as the Python SDK names it). */
export function outcomeName(outcome: Outcome): string {
  switch (outcome) {
    case Outcome.SUCCESS:
      return "success";
    case Outcome.FAILURE:
      return "failure";
    case Outcome.PARTIAL:
      return "partial";
    default:
      return "unspecified";
  }
}

const OUTCOMES: Readonly<Record<OutcomeName, Outcome>> = {
  success: Outcome.SUCCESS,
  failure: Outcome.FAILURE,
  partial: Outcome.PARTIAL,
};

/** The tools of a procedure's steps that change something, in order (Python's
 * `Procedure.write_actions`). */
export function writeActions(procedure: Procedure | ScoredProcedure): string[] {
  const p = procedure.$typeName === "episodic.v1.ScoredProcedure" ? procedure.procedure : procedure;
  return (p?.steps ?? []).filter((s) => s.writes).map((s) => s.tool);
}

/** A tool call's name and arguments as JSON text, from either form. */
function toToolCall(value: ToolCallInput, where: string): { id: string; name: string; arguments: string } {
  const fn = "function" in value ? value.function : value;
  const name = fn?.name;
  if (typeof value.id !== "string" || typeof name !== "string") {
    throw new TypeError(`${where} needs an id and the tool's name (OpenAI's function.name, or name)`);
  }
  const args = fn.arguments ?? "{}";
  return { id: value.id, name, arguments: typeof args === "string" ? args : JSON.stringify(args) };
}

/**
 * A message read back in OpenAI's chat format (`role`, `content`, and `tool_calls` or
 * `tool_call_id`/`name`), as a chat completion's `messages` takes it — Python's
 * `Message.to_openai()`. An assistant message that only called tools has content null.
 */
export function toOpenAI(message: Message): OpenAIMessage {
  const out: OpenAIMessage = { role: roleName(message.role), content: message.content };
  if (message.toolCalls.length) {
    out.content = message.content || null;
    out.tool_calls = message.toolCalls.map((c) => ({
      id: c.id,
      type: "function" as const,
      function: { name: c.name, arguments: c.arguments },
    }));
  }
  if (message.toolCallId) out.tool_call_id = message.toolCallId;
  if (message.name) out.name = message.name;
  return out;
}
/** `LanguageOrigin.DETECTED` → `"detected"` (Python's `DatasetPolicy.language_origin`:
 * "default", "detected" or "set"; "" from a server that does not say). */
export function languageOriginName(origin: LanguageOrigin): string {
  switch (origin) {
    case LanguageOrigin.DEFAULT:
      return "default";
    case LanguageOrigin.DETECTED:
      return "detected";
    case LanguageOrigin.SET:
      return "set";
    default:
      return "";
  }
}

const ROLES: Readonly<Record<RoleName, Role>> = {
  system: Role.SYSTEM,
  user: Role.USER,
  assistant: Role.ASSISTANT,
  agent: Role.ASSISTANT,
  tool: Role.TOOL,
};

/** Episode statuses a list can filter on. `deleted` is reserved by the design and never
 * produced (a soft delete archives), so it is not offered. */
const STATUSES: Readonly<Record<EpisodeStatusName, EpisodeStatus>> = {
  pending: EpisodeStatus.PENDING,
  processing: EpisodeStatus.PROCESSING,
  completed: EpisodeStatus.COMPLETED,
  failed: EpisodeStatus.FAILED,
  archived: EpisodeStatus.ARCHIVED,
};
export const EPISODE_STATUSES = Object.keys(STATUSES) as EpisodeStatusName[];

function toRole(role: RoleName | Role): Role {
  if (typeof role === "number") return role;
  const value = ROLES[role.toLowerCase() as RoleName];
  if (value === undefined) {
    throw new RangeError(`unknown role '${role}'; use system, user, assistant or tool`);
  }
  return value;
}

function toStatus(status: EpisodeStatusName | EpisodeStatus | undefined): EpisodeStatus {
  if (status === undefined) return EpisodeStatus.UNSPECIFIED;
  if (typeof status === "number") return status;
  const value = STATUSES[status];
  if (value === undefined) {
    throw new RangeError(
      `unknown status '${status}'; use one of ${[...EPISODE_STATUSES].sort().join(", ")}`,
    );
  }
  return value;
}

/** A day count of a dataset policy: a whole number that fits an int32 (the server says
 * whether it is in range), refused before any call otherwise. */
function toDays(name: string, value: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < -(2 ** 31) || value >= 2 ** 31) {
    throw new TypeError(`${name} must be a whole number of days or null (got ${String(value)})`);
  }
  return value;
}

function toTimestamp(value: Date | Timestamp): Timestamp {
  return value instanceof Date ? timestampFromDate(value) : value;
}

function page<T>(items: T[], nextPageToken: string): Page<T> {
  return { items, nextPageToken, [Symbol.iterator]: () => items[Symbol.iterator]() };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function baseUrl(address: string, tls: boolean): string {
  if (/^https?:\/\//i.test(address)) return address;
  return `${tls ? "https" : "http"}://${address}`;
}

// --------------------------------------------------------------------------- the client

/** The services the client calls: the four, and AdminService (served by Ingest). */
type ClientService = ServiceName | "admin";

type Services = {
  admin: Client<typeof AdminService>;
  ingest: Client<typeof IngestService>;
  recall: Client<typeof RecallService>;
  scheduler: Client<typeof SchedulerService>;
  summariser: Client<typeof SummariserService>;
};

const SERVICE_DESCRIPTORS = {
  admin: AdminService,
  ingest: IngestService,
  recall: RecallService,
  scheduler: SchedulerService,
  summariser: SummariserService,
} as const;

/** The process serving a service that shares another's address (and connection). */
const PROCESS_OF: Readonly<Record<ClientService, ServiceName>> = {
  admin: "ingest",
  ingest: "ingest",
  recall: "recall",
  scheduler: "scheduler",
  summariser: "summariser",
};

/**
 * A client for the four episodic services. Connections (one HTTP/2 session per service)
 * open lazily and are shared by concurrent calls; `close()` ends them (a later call opens
 * them again).
 */
export class EpisodicClient {
  readonly addresses: Readonly<Record<ServiceName, string>>;
  readonly timeoutMs: number;
  readonly autoIdempotencyKeys: boolean;
  readonly retryPolicy: Readonly<RetryPolicy> | null;
  readonly rateLimitRetries: number;

  private readonly tls: TlsOptions;
  private readonly apiKey: EpisodicClientOptions["apiKey"];
  private readonly interceptors: Interceptor[];
  private readonly env: Environment;
  private readonly sessions = new Map<ServiceName, Http2SessionManager>();
  private readonly transports = new Map<ServiceName, Transport>();
  private readonly clients = new Map<ClientService, unknown>();

  constructor(options: EpisodicClientOptions = {}) {
    const env = options.env ?? process.env;
    this.env = env;
    this.addresses = Object.freeze({
      ingest: options.ingest || addressFromEnv("ingest", env),
      recall: options.recall || addressFromEnv("recall", env),
      scheduler: options.scheduler || addressFromEnv("scheduler", env),
      summariser: options.summariser || addressFromEnv("summariser", env),
    });
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.autoIdempotencyKeys = options.autoIdempotencyKeys ?? true;
    this.retryPolicy =
      options.retry === false ? null : Object.freeze({ ...DEFAULT_RETRY, ...options.retry });
    this.rateLimitRetries = options.rateLimitRetries ?? 3;
    this.tls = options.tls ?? false;
    this.apiKey = options.apiKey ?? (env["EPISODIC_API_KEY"]?.trim() || undefined);
    this.interceptors = [...(options.interceptors ?? [])];
  }

  // -- plumbing

  private authInterceptor(): Interceptor | null {
    const key = this.apiKey;
    if (!key) return null;
    return (next) => async (req) => {
      const token = typeof key === "function" ? await key() : key;
      if (token) req.header.set("authorization", `Bearer ${token}`);
      return next(req);
    };
  }

  private transport(service: ServiceName): Transport {
    let transport = this.transports.get(service);
    if (transport === undefined) {
      const url = baseUrl(this.addresses[service], this.tls !== false);
      const nodeOptions: http2.SecureClientSessionOptions =
        typeof this.tls === "object" ? { ...this.tls } : {};
      const session = new Http2SessionManager(url, {}, nodeOptions);
      const auth = this.authInterceptor();
      // Tracing first: the other interceptors run inside its span (src/tracing.ts; a
      // pass-through unless the application registered an OpenTelemetry tracer provider).
      const tracing = tracingInterceptor(url, this.env);
      transport = createGrpcTransport({
        baseUrl: url,
        sessionManager: session,
        interceptors: auth ? [tracing, auth, ...this.interceptors] : [tracing, ...this.interceptors],
      });
      this.sessions.set(service, session);
      this.transports.set(service, transport);
    }
    return transport;
  }

  private client<S extends ClientService>(service: S): Services[S] {
    let client = this.clients.get(service) as Services[S] | undefined;
    if (client === undefined) {
      const transport = this.transport(PROCESS_OF[service]);
      client = createClient(SERVICE_DESCRIPTORS[service], transport) as Services[S];
      this.clients.set(service, client);
    }
    return client;
  }

  /**
   * Runs one call with a deadline (`timeoutMs`, else the client's), which covers every
   * attempt. When `retry` (the call is safe to repeat), repeats it on UNAVAILABLE with
   * backoff while attempts and the deadline allow. Refused by a rate limit
   * (RESOURCE_EXHAUSTED with a RetryInfo) before anything happened, any call is safe to
   * repeat: it is, once the server's delay has passed, up to `rateLimitRetries` times and
   * only if the deadline allows (the Python SDK's `call`). Every failure becomes an
   * EpisodicError.
   */
  private async call<S extends ClientService, T>(
    service: S,
    method: string,
    fn: (client: Services[S], options: CallOptions) => Promise<T>,
    opts: CallOpts | undefined,
    retry: boolean,
  ): Promise<T> {
    const timeoutMs = opts?.timeoutMs ?? this.timeoutMs;
    const deadline = Date.now() + timeoutMs;
    const policy = retry ? this.retryPolicy : null;
    const maxAttempts = policy ? Math.max(1, policy.maxAttempts) : 1;
    let backoff = policy?.initialBackoffMs ?? 0;
    let unavailable = 0; // attempts answered UNAVAILABLE
    let rateLimited = 0; // attempts refused by a rate limit
    const client = this.client(service);
    for (;;) {
      const remaining = Math.max(1, deadline - Date.now());
      let delay: number;
      try {
        return await fn(client, { timeoutMs: remaining, signal: opts?.signal });
      } catch (err) {
        // Decided on the translated error: a reset stream becomes UNAVAILABLE there.
        const error = translateError(err, method);
        if (opts?.signal?.aborted) throw error;
        if (error.code === Code.ResourceExhausted && error.retryAfterMs !== undefined) {
          delay = error.retryAfterMs;
          if (rateLimited >= this.rateLimitRetries || Date.now() + delay >= deadline) throw error;
          rateLimited++;
        } else if (policy && (error.code === Code.Unavailable || error.code === Code.Aborted)) {
          // ABORTED: lost to a concurrent change, did not take effect (safe calls only).
          unavailable++;
          if (unavailable >= maxAttempts) throw error;
          delay = Math.random() * Math.min(backoff, policy.maxBackoffMs);
          backoff *= policy.multiplier;
          if (Date.now() + delay >= deadline) throw error;
        } else {
          throw error;
        }
      }
      await sleep(delay, opts?.signal);
    }
  }

  /** Closes every connection (a later call opens them again). */
  close(): void {
    for (const session of this.sessions.values()) session.abort();
    this.sessions.clear();
    this.transports.clear();
    this.clients.clear();
  }

  /**
   * Waits until each named service answers its gRPC health check with SERVING; throws
   * UnavailableError naming the first one that does not within `timeoutMs` (default 30 s).
   */
  async waitReady(
    services: readonly ServiceName[] = SERVICES,
    { timeoutMs = 30_000 }: { timeoutMs?: number } = {},
  ): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (const service of services) {
      const health = createClient(Health, this.transport(service));
      for (;;) {
        try {
          const answer = await health.check({ service: "" }, { timeoutMs: 2000 });
          if (answer.status === HealthCheckResponse_ServingStatus.SERVING) break;
        } catch {
          // not up yet
        }
        if (Date.now() > deadline) {
          throw new UnavailableError({
            code: Code.Unavailable,
            message: `${service} at ${this.addresses[service]} is not serving`,
            method: "Health.Check",
          });
        }
        await sleep(100);
      }
    }
  }

  // -- threads and messages (Ingest)

  /** Creates a thread in `dataset`; starting a thread also tells the Scheduler the
   * dataset's other threads are probably over (their idle timers are pulled forward). */
  async createThread(dataset: string, options: CreateThreadOptions = {}): Promise<Thread> {
    const answer = await this.call(
      "ingest",
      "CreateThread",
      (c, o) =>
        c.createThread(
          {
            dataset,
            label: options.label ?? "",
            threadId: options.threadId ?? "",
            metadata: options.metadata,
            idempotencyKey: options.idempotencyKey ?? "",
          },
          o,
        ),
      options,
      Boolean(options.idempotencyKey),
    );
    return answer.thread!;
  }

  /** Starts a new conversation thread (same as `createThread`); the second argument is
   * the label or the options. */
  startThread(dataset: string, labelOrOptions: string | CreateThreadOptions = {}): Promise<Thread> {
    const options = typeof labelOrOptions === "string" ? { label: labelOrOptions } : labelOrOptions;
    return this.createThread(dataset, options);
  }

  /**
   * Appends messages to a thread in one durable batch, in order. Each is an object
   * (`role`, `content`, optionally `metadata`, `createdAt`, `idempotencyKey`) or a
   * `[role, content]` pair. A message in OpenAI's chat format keeps its tool calls: an
   * assistant message's `tool_calls` (arguments as JSON text or an object) and a tool
   * message's `tool_call_id`/`name`, so a chat completion's `messages` can be written as
   * they are. With `autoIdempotencyKeys` (the default) every message without
   * a key gets `auto:<uuid>`, so the call is retried safely on UNAVAILABLE and a replay
   * stores nothing twice.
   */
  async addMessages(
    threadId: string,
    messages: Iterable<MessageInput>,
    opts: CallOpts = {},
  ): Promise<AddMessagesResult> {
    const batch: NewMessageProto[] = [];
    for (const value of messages) {
      const m: NewMessageInput = Array.isArray(value)
        ? { role: value[0], content: value[1] }
        : (value as NewMessageInput);
      let key = m.idempotencyKey ?? "";
      if (!key && this.autoIdempotencyKeys) key = `auto:${randomUUID()}`;
      const calls = m.toolCalls ?? m.tool_calls ?? [];
      batch.push(
        create(NewMessageSchema, {
          role: toRole(m.role ?? "user"),
          content: m.content ?? "",
          idempotencyKey: key,
          metadata: m.metadata && Object.keys(m.metadata).length ? m.metadata : undefined,
          createdAt: m.createdAt === undefined ? undefined : toTimestamp(m.createdAt),
          toolCalls: calls.map((c, i) => toToolCall(c, `messages[${batch.length}].tool_calls[${i}]`)),
          toolCallId: m.toolCallId ?? m.tool_call_id ?? "",
          name: m.name ?? "",
        }),
      );
    }
    const safe = batch.every((m) => m.idempotencyKey !== "");
    const answer = await this.call(
      "ingest",
      "AddMessages",
      (c, o) => c.addMessages({ threadId, messages: batch }, o),
      opts,
      safe,
    );
    return {
      threadId: answer.threadId,
      receipts: answer.receipts,
      storedCount: answer.storedCount,
      sequences: answer.receipts.map((r) => r.sequence),
    };
  }

  /** Appends one message and returns its receipt (with its sequence). */
  async addMessage(
    threadId: string,
    role: RoleName | Role,
    content: string,
    options: CallOpts & Omit<NewMessageInput, "role" | "content"> = {},
  ): Promise<MessageReceipt> {
    const { timeoutMs, signal, ...rest } = options;
    const result = await this.addMessages(threadId, [{ role, content, ...rest }], {
      timeoutMs,
      signal,
    });
    return result.receipts[0]!;
  }

  /**
   * Records something the agent knows happened as an event episode, recalled beside the
   * summaries. Retried safely on UNAVAILABLE when it has an idempotency key (given, or
   * generated with `autoIdempotencyKeys`).
   */
  async recordEvent(
    dataset: string,
    summary: string,
    options: RecordEventOptions,
  ): Promise<RecordEventResult> {
    let key = options.idempotencyKey ?? "";
    if (!key && this.autoIdempotencyKeys) key = `auto:${randomUUID()}`;
    const answer = await this.call(
      "ingest",
      "RecordEvent",
      (c, o) =>
        c.recordEvent(
          {
            dataset,
            summary,
            eventType: options.eventType,
            actor: options.actor ?? "agent",
            entities: [...(options.entities ?? [])],
            occurredAt: options.occurredAt ? timestampFromDate(options.occurredAt) : undefined,
            threadId: options.threadId ?? "",
            idempotencyKey: key,
          },
          o,
        ),
      options,
      key !== "",
    );
    return { event: answer.event!, stored: answer.stored };
  }

  /**
   * Says how a thread turned out: "success", "failure" or "partial", with an optional
   * `score` in [0, 1] and `note`; `episodeId` narrows it to that episode's stretch. It may
   * come before or after the episode exists; sending it again replaces it (the last one
   * stands), so it is retried safely on UNAVAILABLE. Procedures are learned from the tool
   * calls of successes; failures count against the procedure they followed.
   */
  async recordOutcome(
    threadId: string,
    outcome: OutcomeName | Outcome,
    options: RecordOutcomeOptions = {},
  ): Promise<OutcomeResult> {
    const value = typeof outcome === "number" ? outcome : OUTCOMES[outcome];
    if (value === undefined) {
      throw new RangeError(`unknown outcome '${String(outcome)}'; use success, failure or partial`);
    }
    const answer = await this.call(
      "ingest",
      "RecordOutcome",
      (c, o) =>
        c.recordOutcome(
          {
            threadId,
            outcome: value,
            score: options.score,
            note: options.note ?? "",
            episodeId: options.episodeId ?? "",
          },
          o,
        ),
      options,
      true,
    );
    return {
      threadId: answer.threadId,
      episodeId: answer.episodeId,
      outcome: outcomeName(answer.outcome === Outcome.UNSPECIFIED ? value : answer.outcome) as OutcomeName,
      changed: answer.changed,
      recordedAt: answer.recordedAt,
    };
  }

  /** Marks the end of a stretch of conversation: an episode is queued over the messages no
   * episode covers yet. The thread stays writable (a checkpoint). */
  endThread(threadId: string, opts: CallOpts = {}): Promise<EndThreadResponse> {
    return this.call("ingest", "EndThread", (c, o) => c.endThread({ threadId }, o), opts, false);
  }

  /** One thread (NotFoundError when it does not exist). */
  async getThread(threadId: string, opts: CallOpts = {}): Promise<Thread> {
    const answer = await this.call("ingest", "GetThread", (c, o) => c.getThread({ threadId }, o), opts, true);
    return answer.thread!;
  }

  /** One page of a thread's messages in sequence order (page size 0: the server's, 100). */
  async listMessages(threadId: string, options: ListMessagesOptions = {}): Promise<Page<Message>> {
    const answer = await this.call(
      "ingest",
      "ListMessages",
      (c, o) =>
        c.listMessages(
          {
            threadId,
            pageSize: options.pageSize ?? 0,
            pageToken: options.pageToken ?? "",
            startSequence: BigInt(options.startSequence ?? 0),
            endSequence: BigInt(options.endSequence ?? 0),
          },
          o,
        ),
      options,
      true,
    );
    return page(answer.messages, answer.nextPageToken);
  }

  /** Every message of a thread in order, across pages (`timeoutMs` applies to each page). */
  async loadSession(
    threadId: string,
    options: Omit<ListMessagesOptions, "pageSize" | "pageToken"> = {},
  ): Promise<Message[]> {
    const out: Message[] = [];
    let pageToken = "";
    for (;;) {
      const p = await this.listMessages(threadId, { ...options, pageSize: 1000, pageToken });
      out.push(...p.items);
      pageToken = p.nextPageToken;
      if (!pageToken) return out;
    }
  }

  /** One page of a dataset's threads, most recently active first. */
  async listThreads(dataset: string, options: PageOptions = {}): Promise<Page<Thread>> {
    const answer = await this.call(
      "ingest",
      "ListThreads",
      (c, o) =>
        c.listThreads(
          { dataset, pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" },
          o,
        ),
      options,
      true,
    );
    return page(answer.threads, answer.nextPageToken);
  }

  /** The `n` most recently active threads of a dataset (none for `n` 0; a RangeError for a
   * negative `n`). */
  async recentThreads(dataset: string, n = 5, opts: CallOpts = {}): Promise<Thread[]> {
    if (n < 0) throw new RangeError(`n must not be negative (got ${n})`);
    if (n === 0) return [];
    const out: Thread[] = [];
    let pageToken = "";
    while (out.length < n) {
      const p = await this.listThreads(dataset, {
        ...opts,
        pageSize: Math.min(n - out.length, 1000),
        pageToken,
      });
      out.push(...p.items);
      pageToken = p.nextPageToken;
      if (!pageToken) break;
    }
    return out.slice(0, n);
  }

  // -- recall (Recall)

  /**
   * The dataset's most relevant current episodes, best first:
   * `relevance = similarity × similarityWeight + recency × recencyWeight` (server defaults
   * 0.7 and 0.3). Without `query`, plain recency order — which is how temporal questions
   * are asked: `recall(ds, undefined, { eventType: "decision", entities: ["pricing"], limit: 3 })`.
   * With `includeProcedures`, also the procedures that fit the query (`result.procedures`).
   */
  async recall(dataset: string, query?: string, options: RecallOptions = {}): Promise<RecallResult> {
    const request: MessageInitShape<typeof RecallRequestSchema> = {
      dataset,
      query: query ?? "",
      include: [RecallInclude.EPISODES],
      contextEpisodes: options.limit ?? 0,
      threadIds: [...(options.threadIds ?? [])],
      entities: [...(options.entities ?? [])],
      exactEntities: options.exactEntities ?? false,
      eventType: options.eventType ?? "",
      similarityWeight: options.similarityWeight,
      recencyWeight: options.recencyWeight,
      since: options.since ? timestampFromDate(options.since) : undefined,
      until: options.until ? timestampFromDate(options.until) : undefined,
      asOf: options.asOf ? timestampFromDate(options.asOf) : undefined,
      literalQuery: options.literalQuery ?? false,
      actor: options.actor ?? "",
      excludeEvents: options.excludeEvents ?? false,
      // Sent only when given: the fields have presence, and an unset one is abstain's.
      minRelevance: options.minRelevance,
      minMatch: options.minMatch,
      abstain: options.abstain ?? false,
      contextProcedures: options.procedures ?? 0,
    };
    if (options.includeProcedures) request.include = [RecallInclude.EPISODES, RecallInclude.PROCEDURES];
    const answer = await this.call("recall", "Recall", (c, o) => c.recall(request, o), options, true);
    const episodes = answer.episodes?.episodes ?? [];
    return {
      episodes,
      episodeCount: Number(answer.episodes?.episodeCount ?? 0n),
      match: answer.episodes?.match,
      abstained: answer.episodes?.abstained ?? false,
      abstainApplied: answer.episodes?.abstainApplied ?? false,
      chunksPending: answer.episodes?.chunksPending ?? false,
      episodesPending: answer.episodes?.episodesPending ?? false,
      understanding: answer.understanding,
      procedures: answer.procedures,
      [Symbol.iterator]: () => episodes[Symbol.iterator](),
    };
  }

  // -- procedural memory (Recall reads procedures; Admin deletes them)

  /**
   * How did we do this before? The dataset's procedures whose goals best fit `task` (the
   * most supported without one), best first, each with its relevance (0..1); procedures
   * that failed more often than they worked are left out. `renderProcedures` turns them
   * into a prompt block.
   */
  async recallProcedures(
    dataset: string,
    task?: string,
    options: RecallProceduresOptions = {},
  ): Promise<ScoredProcedure[]> {
    const answer = await this.call(
      "recall",
      "Recall",
      (c, o) =>
        c.recall(
          {
            dataset,
            query: task ?? "",
            include: [RecallInclude.PROCEDURES],
            contextProcedures: options.limit ?? 0,
          },
          o,
        ),
      options,
      true,
    );
    return answer.procedures;
  }

  /** One page of a dataset's procedures, most successes first. */
  async listProcedures(dataset: string, options: PageOptions = {}): Promise<Page<Procedure>> {
    const answer = await this.call(
      "recall",
      "ListProcedures",
      (c, o) =>
        c.listProcedures(
          { dataset, pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" },
          o,
        ),
      options,
      true,
    );
    return page(answer.procedures, answer.nextPageToken);
  }

  /** One procedure of `dataset` (NotFoundError when it has none of that id). */
  async getProcedure(dataset: string, procedureId: string, opts: CallOpts = {}): Promise<Procedure> {
    const answer = await this.call(
      "recall",
      "GetProcedure",
      (c, o) => c.getProcedure({ dataset, procedureId }, o),
      opts,
      true,
    );
    return answer.procedure!;
  }

  /** Deletes a procedure and forgets the stretches of conversation it was learned from
   * (they are not learned again; the conversations and episodes stay); returns how many
   * were forgotten. An admin call; not retried on UNAVAILABLE (a second call finds it gone). */
  async deleteProcedure(dataset: string, procedureId: string, opts: CallOpts = {}): Promise<number> {
    const answer = await this.call(
      "admin",
      "DeleteProcedure",
      (c, o) => c.deleteProcedure({ dataset, procedureId }, o),
      opts,
      false,
    );
    return answer.forgottenSources;
  }

  // -- episode administration (Recall reads, Scheduler writes)

  /** One page of a dataset's episodes, newest first; `status` e.g. "completed" or
   * "failed" (any when unset). */
  async listEpisodes(dataset: string, options: ListEpisodesOptions = {}): Promise<Page<Episode>> {
    const status = toStatus(options.status);
    const answer = await this.call(
      "recall",
      "ListEpisodes",
      (c, o) =>
        c.listEpisodes(
          {
            dataset,
            status,
            threadId: options.threadId ?? "",
            pageSize: options.pageSize ?? 0,
            pageToken: options.pageToken ?? "",
          },
          o,
        ),
      options,
      true,
    );
    return page(answer.episodes, answer.nextPageToken);
  }

  /** Every episode of a dataset (optionally of one status or thread), newest first. */
  async *iterEpisodes(
    dataset: string,
    options: Omit<ListEpisodesOptions, "pageSize" | "pageToken"> = {},
  ): AsyncGenerator<Episode> {
    let pageToken = "";
    for (;;) {
      const p = await this.listEpisodes(dataset, { ...options, pageSize: 1000, pageToken });
      yield* p.items;
      pageToken = p.nextPageToken;
      if (!pageToken) return;
    }
  }

  /** Everything about one entity, in order: a page of the current episodes mentioning it
   * under any alias, oldest first. `entity` is its id or any name of it ("atlas"). */
  async entityTimeline(
    dataset: string,
    entity: string,
    options: PageOptions = {},
  ): Promise<EntityTimelinePage> {
    const answer = await this.call(
      "recall",
      "EntityTimeline",
      (c, o) =>
        c.entityTimeline(
          { dataset, entity, pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" },
          o,
        ),
      options,
      true,
    );
    return { ...page(answer.episodes, answer.nextPageToken), entity: answer.entity };
  }

  /** Current episodes matching `query` by text alone (no recency), best first. */
  async searchEpisodes(
    dataset: string,
    query: string,
    options: CallOpts & { limit?: number } = {},
  ): Promise<ScoredEpisode[]> {
    const answer = await this.call(
      "recall",
      "SearchEpisodes",
      (c, o) => c.searchEpisodes({ dataset, query, pageSize: options.limit ?? 0 }, o),
      options,
      true,
    );
    return answer.episodes;
  }

  /** One episode in any status (archived ones too, for provenance). */
  async getEpisode(episodeId: string, opts: CallOpts = {}): Promise<Episode> {
    const answer = await this.call("recall", "GetEpisode", (c, o) => c.getEpisode({ episodeId }, o), opts, true);
    return answer.episode!;
  }

  /** Soft-deletes an episode (it becomes archived and leaves recall) and returns it; an event's
   * id (kind EVENT) erases the event for good, returned as it was, marked archived. */
  async deleteEpisode(episodeId: string, opts: CallOpts = {}): Promise<Episode> {
    const answer = await this.call(
      "scheduler",
      "DeleteEpisode",
      (c, o) => c.deleteEpisode({ episodeId }, o),
      opts,
      false,
    );
    return answer.episode!;
  }

  /** Puts a failed episode back to pending (FailedPreconditionError otherwise). */
  async retryEpisode(episodeId: string, opts: CallOpts = {}): Promise<Episode> {
    const answer = await this.call(
      "scheduler",
      "RetryEpisode",
      (c, o) => c.retryEpisode({ episodeId }, o),
      opts,
      false,
    );
    return answer.episode!;
  }

  /** Asks the Scheduler for an episode over the thread's uncaptured messages now (an
   * operator's manual trigger); undefined when there was nothing to capture. */
  async requestEpisode(threadId: string, opts: CallOpts = {}): Promise<Episode | undefined> {
    const answer = await this.call(
      "scheduler",
      "RequestEpisode",
      (c, o) => c.requestEpisode({ threadId, trigger: EpisodeTrigger.MANUAL }, o),
      opts,
      false,
    );
    return answer.episodeQueued ? answer.episode : undefined;
  }

  /** Tells the Scheduler a thread received messages (Ingest does this after every write);
   * returns when its idle timer fires. */
  async recordActivity(threadId: string, opts: CallOpts = {}): Promise<Timestamp | undefined> {
    const answer = await this.call(
      "scheduler",
      "RecordActivity",
      (c, o) => c.recordActivity({ threadId }, o),
      opts,
      false,
    );
    return answer.fireAt;
  }

  /** Tells the Scheduler a thread started (Ingest does this on CreateThread); returns how
   * many sibling timers were pulled forward. */
  async recordThreadStarted(threadId: string, opts: CallOpts = {}): Promise<number> {
    const answer = await this.call(
      "scheduler",
      "RecordThreadStarted",
      (c, o) => c.recordThreadStarted({ threadId }, o),
      opts,
      false,
    );
    return answer.timersPulledForward;
  }

  /** Runs one pass of the Scheduler's periodic work now (tests, operators). */
  runSweep(options: CallOpts & { asOf?: Date } = {}): Promise<RunSweepResponse> {
    return this.call(
      "scheduler",
      "RunSweep",
      (c, o) => c.runSweep({ asOf: options.asOf ? timestampFromDate(options.asOf) : undefined }, o),
      options,
      false,
    );
  }

  /** Makes the Summariser process up to `maxEpisodes` pending episodes now. */
  processPending(maxEpisodes = 0, opts: CallOpts = {}): Promise<ProcessPendingResponse> {
    return this.call(
      "summariser",
      "ProcessPending",
      (c, o) => c.processPending({ maxEpisodes }, o),
      opts,
      false,
    );
  }

  /** Whether the Summariser's LLM and embedding providers answer. */
  async checkProviders(
    opts: CallOpts = {},
  ): Promise<{ llm: ProviderHealth | undefined; embedder: ProviderHealth | undefined }> {
    const a = await this.call("summariser", "CheckProviders", (c, o) => c.checkProviders({}, o), opts, true);
    return { llm: a.llm, embedder: a.embedder };
  }

  /** Whether the pipeline moves, for one dataset or the whole suite: episodes per status,
   * backlog ages, overdue timers, recent errors and provider health. */
  pipelineStatus(
    dataset?: string,
    options: PipelineStatusOptions = {},
  ): Promise<GetPipelineStatusResponse> {
    return this.call(
      "summariser",
      "GetPipelineStatus",
      (c, o) =>
        c.getPipelineStatus(
          {
            dataset: dataset ?? "",
            maxErrors: options.maxErrors ?? 0,
            skipProviderChecks: options.checkProviders === false,
          },
          o,
        ),
      options,
      true,
    );
  }

  // -- administration (AdminService, served by Ingest; an admin key for the dataset)

  /** One page of the datasets, most recently active first (an admin key for every
   * dataset); `prefix` keeps those starting with it, e.g. "acme/". */
  async listDatasets(options: ListDatasetsOptions = {}): Promise<Page<DatasetSummary>> {
    const answer = await this.call(
      "admin",
      "ListDatasets",
      (c, o) =>
        c.listDatasets(
          {
            prefix: options.prefix ?? "",
            pageSize: options.pageSize ?? 0,
            pageToken: options.pageToken ?? "",
          },
          o,
        ),
      options,
      true,
    );
    return page(answer.datasets, answer.nextPageToken);
  }

  /** One page of a dataset's canonical entities, oldest first, with their aliases and
   * counts. */
  async listEntities(dataset: string, options: PageOptions = {}): Promise<Page<Entity>> {
    const answer = await this.call(
      "admin",
      "ListEntities",
      (c, o) =>
        c.listEntities(
          { dataset, pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" },
          o,
        ),
      options,
      true,
    );
    return page(answer.entities, answer.nextPageToken);
  }

  /** Merges `sources` into `into` (each an entity id or any alias): their aliases become
   * `into`'s. Not retried on UNAVAILABLE (a second merge of the same names finds them one
   * entity already and is refused). */
  async mergeEntities(
    dataset: string,
    into: string,
    sources: readonly string[],
    opts: CallOpts = {},
  ): Promise<Entity> {
    const answer = await this.call(
      "admin",
      "MergeEntities",
      (c, o) => c.mergeEntities({ dataset, into, sources: [...sources] }, o),
      opts,
      false,
    );
    return answer.entity!;
  }

  /** Splits `alias` off its entity into a new entity of its own (FailedPreconditionError
   * when it is the entity's only alias). Not retried on UNAVAILABLE. */
  async splitEntity(dataset: string, alias: string, opts: CallOpts = {}): Promise<EntitySplit> {
    const answer = await this.call(
      "admin",
      "SplitEntity",
      (c, o) => c.splitEntity({ dataset, alias }, o),
      opts,
      false,
    );
    return { splitOff: answer.splitOff!, remaining: answer.remaining! };
  }

  /** Erases a dataset — every thread, message, episode, embedding, fact and timer, and its
   * data key — and returns the receipt. Not retried on UNAVAILABLE: a second call while the
   * first runs gets ABORTED, after it NOT_FOUND. */
  async deleteDataset(dataset: string, opts: CallOpts = {}): Promise<ErasureReceipt> {
    const answer = await this.call(
      "admin",
      "DeleteDataset",
      (c, o) => c.deleteDataset({ dataset }, o),
      opts,
      false,
    );
    return answer.receipt!;
  }

  /** Erases one thread and everything derived from it; returns the receipt. Not retried
   * on UNAVAILABLE. */
  async deleteThread(threadId: string, opts: CallOpts = {}): Promise<ErasureReceipt> {
    const answer = await this.call(
      "admin",
      "DeleteThread",
      (c, o) => c.deleteThread({ threadId }, o),
      opts,
      false,
    );
    return answer.receipt!;
  }

  /** A dataset's retention and compaction policy, its language, and whether it is
   * encrypted. `retentionDays`/`compactAfterDays` are its own (undefined: the global
   * default); the `effective…` ones are in force (0: never). */
  async getDatasetPolicy(dataset: string, opts: CallOpts = {}): Promise<DatasetPolicy> {
    const answer = await this.call(
      "admin",
      "GetDatasetPolicy",
      (c, o) => c.getDatasetPolicy({ dataset }, o),
      opts,
      true,
    );
    return answer.policy!;
  }

  /**
   * Changes what is given of a dataset's policy and keeps the rest: its own retention and
   * compaction in days (`null`: back to the global default; `undefined`: unchanged), and
   * the language of its text ("fr", "pt-BR", "german"; "auto": detected from its text).
   * The request names the fields it changes (`update_mask`), so setting the language never
   * resets a retention — which also makes it safe to retry. Nothing given: the policy as it
   * is (a GetDatasetPolicy).
   */
  async setDatasetPolicy(dataset: string, options: SetDatasetPolicyOptions = {}): Promise<DatasetPolicy> {
    const request: MessageInitShape<typeof SetDatasetPolicyRequestSchema> = { dataset };
    const paths: string[] = [];
    if (options.retentionDays !== undefined) {
      paths.push("retention_days");
      if (options.retentionDays !== null) {
        request.retentionDays = toDays("retentionDays", options.retentionDays);
      }
    }
    if (options.compactAfterDays !== undefined) {
      paths.push("compact_after_days");
      if (options.compactAfterDays !== null) {
        request.compactAfterDays = toDays("compactAfterDays", options.compactAfterDays);
      }
    }
    if (options.language !== undefined && options.language !== null) {
      paths.push("language");
      request.language = options.language;
    }
    // An empty mask would mean every field (resetting both day counts): read instead.
    if (paths.length === 0) {
      return this.getDatasetPolicy(dataset, { timeoutMs: options.timeoutMs, signal: options.signal });
    }
    request.updateMask = { paths };
    const answer = await this.call(
      "admin",
      "SetDatasetPolicy",
      (c, o) => c.setDatasetPolicy(request, o),
      options,
      true,
    );
    return answer.policy!;
  }

  /**
   * Waits until the thread's episode covering `endSequence` (default: the thread's last
   * message) is summarised, and returns it — completed, or failed for good (or already
   * archived by a newer one). Polls ListEpisodes like the Python SDK; throws
   * DeadlineExceededError after `timeoutMs` (default 60 s).
   */
  async waitForEpisode(threadId: string, options: WaitForEpisodeOptions = {}): Promise<Episode> {
    const timeoutMs = options.timeoutMs ?? 60_000;
    const pollIntervalMs = options.pollIntervalMs ?? 200;
    const deadline = Date.now() + timeoutMs;
    const thread = await this.getThread(threadId, { signal: options.signal });
    const endSequence =
      options.endSequence === undefined ? thread.messageCount : BigInt(options.endSequence);
    const done = new Set([EpisodeStatus.COMPLETED, EpisodeStatus.FAILED, EpisodeStatus.ARCHIVED]);
    for (;;) {
      const p = await this.listEpisodes(thread.dataset, {
        threadId,
        pageSize: 50,
        signal: options.signal,
      });
      for (const episode of p.items) {
        if (episode.endSequence >= endSequence && done.has(episode.status)) return episode;
      }
      if (Date.now() > deadline) {
        throw new DeadlineExceededError({
          code: Code.DeadlineExceeded,
          message:
            `no summarised episode of thread ${threadId} up to message ${endSequence} ` +
            `after ${Math.round(timeoutMs / 1000)}s (are the scheduler and summariser running?)`,
          method: "waitForEpisode",
        });
      }
      await sleep(pollIntervalMs, options.signal);
    }
  }
}
