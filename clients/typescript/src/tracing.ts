/**
 * Client spans in OpenTelemetry's GenAI words, when the application traces — the Python
 * SDK's (`episodic.sdk.tracing`, names from `episodic.semconv`), for the TypeScript client.
 *
 * `@opentelemetry/api` is an optional peer dependency: loaded on the first call with a
 * dynamic import, and when it is not installed nothing here does anything. With it
 * installed but no tracer provider registered (the API's no-op default) nothing happens
 * either. Once the application registers a provider:
 *
 * - each attempt of a memory operation (Recall, SearchEpisodes, ListEpisodes, GetEpisode:
 *   `search_memory`; RecordEvent: `create_memory`; RetryEpisode: `update_memory`;
 *   DeleteEpisode, DeleteThread: `delete_memory`; DeleteDataset: `delete_memory_store`) is a
 *   CLIENT span named by its operation, with the standard's attributes read from the
 *   request and the answer (or `error.type`);
 * - every call (health checks excepted) carries the current trace context as a W3C
 *   `traceparent` header, so the service's span is a child of the caller's.
 *
 * Content (the query text, the records returned) goes on a span only with both switches
 * the Python SDK reads: `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` (the GenAI
 * instrumentations' switch) and `EPISODIC_GENAI_CAPTURE_ENCRYPTED_CONTENT` — the client
 * cannot tell whether a dataset is stored encrypted (by default every one is).
 */

import type * as OtelApi from "@opentelemetry/api";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Interceptor } from "@connectrpc/connect";

import type { Environment } from "./endpoints.js";
import { EpisodicError, codeName, translateError } from "./errors.js";

// --------------------------------------------------------------------------- names
// As episodic.semconv spells them (open-telemetry/semantic-conventions-genai@002c8a6,
// development stability); the unit test checks them against the Python module's.

/** The GenAI conventions' names this client writes (a subset of `episodic.semconv`). */
export const GENAI = Object.freeze({
  OPERATION_NAME: "gen_ai.operation.name",
  PROVIDER_NAME: "gen_ai.provider.name",
  ERROR_TYPE: "error.type",
  SERVER_ADDRESS: "server.address",
  SERVER_PORT: "server.port",
  MEMORY_STORE_ID: "gen_ai.memory.store.id",
  MEMORY_RECORD_ID: "gen_ai.memory.record.id",
  MEMORY_RECORD_COUNT: "gen_ai.memory.record.count",
  MEMORY_QUERY_TEXT: "gen_ai.memory.query.text",
  MEMORY_RECORDS: "gen_ai.memory.records",
  RETRIEVAL_TOP_K: "gen_ai.retrieval.top_k",
  RECORD_IDS: "episodic.memory.record_ids",
  RECORD_KIND: "episodic.memory.record_kind",
  MEMORY_PROVIDER: "episodic",
  CAPTURE_CONTENT_ENV: "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
  CAPTURE_ENCRYPTED_ENV: "EPISODIC_GENAI_CAPTURE_ENCRYPTED_CONTENT",
});

const SEARCH_MEMORY = "search_memory";
const CREATE_MEMORY = "create_memory";
const UPDATE_MEMORY = "update_memory";
const DELETE_MEMORY = "delete_memory";
const DELETE_MEMORY_STORE = "delete_memory_store";
/** What was deleted is not shown, whatever the switches say. */
const CONTENT_FREE = new Set([DELETE_MEMORY, DELETE_MEMORY_STORE]);

const SPAN_CONTENT = new Set(["true", "1", "yes", "span_only", "span_and_event"]);
const YES = new Set(["true", "1", "yes"]);

/** Whether the GenAI content switch asks for content on spans (`semconv.capture_content`). */
export function captureContent(env: Environment): boolean {
  return SPAN_CONTENT.has((env[GENAI.CAPTURE_CONTENT_ENV] ?? "").trim().toLowerCase());
}

/** Whether the operator also lets content of encrypted datasets onto spans. */
export function captureEncryptedContent(env: Environment): boolean {
  return YES.has((env[GENAI.CAPTURE_ENCRYPTED_ENV] ?? "").trim().toLowerCase());
}

// --------------------------------------------------------------------------- memory

/** What one memory operation says about itself (`episodic.semconv.Memory`). */
interface Memory {
  store?: string | undefined;
  record?: string | undefined;
  count?: number | undefined;
  topK?: number | undefined;
  recordIds?: string[];
  recordKind?: string;
  query?: string | undefined; // content
  records?: Record<string, unknown>[]; // content
}

// The generated messages, read loosely: the extractors see only the fields they name.
type Msg = any;
type Extract = (request: Msg, response: Msg) => Memory;

function scoredSearch(request: Msg, scored: Msg[] | undefined, topK: number | undefined): Memory {
  const episodes = scored ?? [];
  const ids: string[] = episodes.map((s: Msg) => String(s.episode?.episodeId ?? ""));
  return {
    store: request.dataset,
    count: ids.length,
    topK,
    record: ids.length === 1 ? ids[0] : undefined,
    recordIds: ids,
    query: request.query || undefined,
    records: episodes.map((s: Msg) => ({
      id: s.episode?.episodeId ?? "",
      content: s.episode?.summary ?? "",
      score: s.relevanceScore,
    })),
  };
}

function oneEpisode(field: string, kind?: string): Extract {
  return (request, response) => {
    const episode = response[field] ?? {};
    return {
      store: episode.dataset || undefined,
      record: episode.episodeId || request.episodeId,
      count: 1,
      ...(kind ? { recordKind: kind } : {}),
      records: [{ id: episode.episodeId ?? "", content: episode.summary ?? "" }],
    };
  };
}

function erased(request: Msg, response: Msg): Memory {
  const receipt = response.receipt ?? {};
  const deleted: Record<string, bigint> | undefined = receipt.rowsDeleted;
  const count =
    deleted && Object.keys(deleted).length
      ? Number(deleted["episodes"] ?? 0n) + Number(deleted["events"] ?? 0n)
      : undefined;
  return { store: receipt.dataset || request.dataset || undefined, count };
}

/** One RPC's memory operation and how its request and answer say what it touched. */
interface MemoryRpc {
  operation: string;
  extract: Extract;
}

/** Which RPC is which memory operation (`episodic.semconv.MEMORY_RPCS`); the others are
 * none (a thread and its messages are the raw material episodes are made of). */
export const MEMORY_RPCS: Readonly<Record<string, MemoryRpc>> = Object.freeze({
  "RecallService/Recall": {
    operation: SEARCH_MEMORY,
    extract: (req, res) => scoredSearch(req, res.episodes?.episodes, req.contextEpisodes || undefined),
  },
  "RecallService/SearchEpisodes": {
    operation: SEARCH_MEMORY,
    extract: (req, res) => scoredSearch(req, res.episodes, req.pageSize || undefined),
  },
  "RecallService/ListEpisodes": {
    operation: SEARCH_MEMORY,
    extract: (req, res) => {
      const episodes: Msg[] = res.episodes ?? [];
      return {
        store: req.dataset || undefined,
        count: episodes.length,
        topK: req.pageSize || undefined,
        recordIds: episodes.map((e) => String(e.episodeId)),
        records: episodes.map((e) => ({ id: e.episodeId, content: e.summary })),
      };
    },
  },
  "RecallService/GetEpisode": { operation: SEARCH_MEMORY, extract: oneEpisode("episode") },
  "IngestService/RecordEvent": {
    operation: CREATE_MEMORY,
    extract: (req, res) => {
      const event = res.event ?? {};
      return {
        store: req.dataset,
        record: event.episodeId || undefined,
        count: 1,
        recordKind: "event",
        records: [{ id: event.episodeId ?? "", content: event.summary ?? "" }],
      };
    },
  },
  "SchedulerService/DeleteEpisode": { operation: DELETE_MEMORY, extract: oneEpisode("episode") },
  "SchedulerService/RetryEpisode": { operation: UPDATE_MEMORY, extract: oneEpisode("episode") },
  "AdminService/DeleteThread": { operation: DELETE_MEMORY, extract: erased },
  "AdminService/DeleteDataset": { operation: DELETE_MEMORY_STORE, extract: erased },
});

function memoryAttributes(memory: Memory): OtelApi.Attributes {
  const out: OtelApi.Attributes = {};
  if (memory.store) out[GENAI.MEMORY_STORE_ID] = memory.store;
  if (memory.record) out[GENAI.MEMORY_RECORD_ID] = memory.record;
  if (memory.count !== undefined) out[GENAI.MEMORY_RECORD_COUNT] = memory.count;
  if (memory.topK) out[GENAI.RETRIEVAL_TOP_K] = memory.topK;
  if (memory.recordIds?.length) out[GENAI.RECORD_IDS] = [...memory.recordIds];
  if (memory.recordKind) out[GENAI.RECORD_KIND] = memory.recordKind;
  return out;
}

/** A low-cardinality `error.type`: the gRPC status name (`NOT_FOUND`, as Python's
 * `grpc.StatusCode` spells it), else the error's class name. */
export function errorType(err: unknown, method: string): string {
  if (err instanceof EpisodicError || err instanceof ConnectError) {
    const code = translateError(err, method).code;
    return code === Code.Canceled ? "CANCELLED" : codeName(code);
  }
  return err instanceof Error ? err.constructor.name : typeof err;
}

// --------------------------------------------------------------------------- loading

type Api = typeof OtelApi;

// A variable, not a literal: a bundler leaves the import to run time instead of failing
// the build of an application that does not install the optional peer.
const API_MODULE = "@opentelemetry/api";
let loaded: Api | null | undefined; // null: not installed
let loading: Promise<Api | null> | undefined;

function loadApi(): Api | null | Promise<Api | null> {
  if (loaded !== undefined) return loaded;
  loading ??= (import(API_MODULE) as Promise<Api>).then(
    (api) => (loaded = api),
    () => (loaded = null), // not installed: no tracing, nothing else changes
  );
  return loading;
}

/** The tracer of the registered provider, or undefined when none is registered. The
 * global provider is always the API's proxy; it has a delegate only once the application
 * set one (a copy of the API of another compatible version shares the same global). */
function registeredTracer(api: Api): OtelApi.Tracer | undefined {
  const provider = api.trace.getTracerProvider() as Partial<OtelApi.ProxyTracerProvider>;
  if (typeof provider.getDelegateTracer === "function") {
    return provider.getDelegateTracer("episodic.client");
  }
  return undefined;
}

const headerSetter: OtelApi.TextMapSetter<Headers> = {
  set: (carrier, key, value) => carrier.set(key, value),
};

/** `traceparent` (and `tracestate`) of `ctx`'s span, when the application registered no
 * propagator (the API's default propagates nothing, unlike Python's SDK). */
function injectW3C(api: Api, ctx: OtelApi.Context, header: Headers): void {
  if (header.has("traceparent")) return;
  const sc = api.trace.getSpanContext(ctx);
  if (!sc || !api.isSpanContextValid(sc)) return;
  const flags = (sc.traceFlags & 0xff).toString(16).padStart(2, "0");
  header.set("traceparent", `00-${sc.traceId}-${sc.spanId}-${flags}`);
  const state = sc.traceState?.serialize();
  if (state) header.set("tracestate", state);
}

function hostPort(baseUrl: string): { host: string; port: number | undefined } {
  try {
    const url = new URL(baseUrl);
    const port = url.port ? Number(url.port) : url.protocol === "https:" ? 443 : 80;
    return { host: url.hostname.replace(/^\[|\]$/g, ""), port };
  } catch {
    return { host: baseUrl, port: undefined };
  }
}

// --------------------------------------------------------------------------- interceptor

const HEALTH = "grpc.health.v1.Health";

/**
 * The Connect interceptor that traces a client's calls to one service at `baseUrl` (the
 * first of its interceptors, so the others run inside the span). `env` is where the
 * content switches are read, at each call.
 */
export function tracingInterceptor(baseUrl: string, env: Environment): Interceptor {
  const { host, port } = hostPort(baseUrl);
  return (next) => async (req) => {
    const apiOrPromise = loadApi();
    const api = apiOrPromise instanceof Promise ? await apiOrPromise : apiOrPromise;
    if (api === null || req.service.typeName === HEALTH) return next(req);
    const tracer = registeredTracer(api);
    if (tracer === undefined) return next(req); // no provider registered: tracing is off

    const service = req.service.typeName.slice(req.service.typeName.lastIndexOf(".") + 1);
    const spec = MEMORY_RPCS[`${service}/${req.method.name}`];
    const parent = api.context.active();
    if (spec === undefined) {
      // Not a memory operation: no span of ours, but the service's span is a child of the
      // caller's current one.
      api.propagation.inject(parent, req.header, headerSetter);
      injectW3C(api, parent, req.header);
      return next(req);
    }

    const attributes: OtelApi.Attributes = {
      [GENAI.OPERATION_NAME]: spec.operation,
      [GENAI.PROVIDER_NAME]: GENAI.MEMORY_PROVIDER,
      [GENAI.SERVER_ADDRESS]: host,
    };
    if (port !== undefined) attributes[GENAI.SERVER_PORT] = port;
    const store = (req.message as { dataset?: unknown }).dataset;
    if (typeof store === "string" && store) attributes[GENAI.MEMORY_STORE_ID] = store;
    const span = tracer.startSpan(spec.operation, { kind: api.SpanKind.CLIENT, attributes }, parent);
    const ctx = api.trace.setSpan(parent, span);
    api.propagation.inject(ctx, req.header, headerSetter);
    injectW3C(api, ctx, req.header);
    try {
      // Current while the call runs: an HTTP/2 instrumentation's span nests below it.
      const res = await api.context.with(ctx, () => next(req));
      try {
        if (!res.stream) {
          const memory = spec.extract(req.message, res.message);
          span.setAttributes(memoryAttributes(memory));
          if (!CONTENT_FREE.has(spec.operation) && captureContent(env) && captureEncryptedContent(env)) {
            if (memory.query) span.setAttribute(GENAI.MEMORY_QUERY_TEXT, memory.query);
            if (memory.records?.length) span.setAttribute(GENAI.MEMORY_RECORDS, JSON.stringify(memory.records));
          }
        }
      } catch {
        // telemetry never fails a call
      }
      span.end();
      return res;
    } catch (err) {
      try {
        span.setAttribute(GENAI.ERROR_TYPE, errorType(err, req.method.name));
        const message = err instanceof Error ? translateError(err, req.method.name).message : String(err);
        span.setStatus({ code: api.SpanStatusCode.ERROR, message: message.slice(0, 200) });
      } catch {
        // telemetry never fails a call
      }
      span.end();
      throw err;
    }
  };
}
