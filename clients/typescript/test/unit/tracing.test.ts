/**
 * The client's spans against a fake server (issue 47): a memory operation is a CLIENT span
 * in OpenTelemetry's GenAI words, every call carries `traceparent`, content only with both
 * switches — and nothing at all until the application registers a tracer provider, or when
 * `@opentelemetry/api` (an optional peer) is not installed.
 *
 * The provider is registered globally in this test process (node --test runs each file in
 * its own), after the test that needs none.
 */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { after, before, beforeEach, describe, it } from "node:test";

import { context, trace, SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";

import { EpisodicClient } from "../../src/client.js";
import { NotFoundError } from "../../src/errors.js";
import { GENAI } from "../../src/tracing.js";
import { DeleteDatasetResponseSchema, DeleteThreadResponseSchema } from "../../src/gen/episodic/v1/admin_service_pb.js";
import { EpisodeStatus, ThreadSchema } from "../../src/gen/episodic/v1/episode_pb.js";
import { CreateThreadResponseSchema, RecordEventResponseSchema } from "../../src/gen/episodic/v1/ingest_service_pb.js";
import { RecallResponseSchema } from "../../src/gen/episodic/v1/recall_service_pb.js";
import { DeleteEpisodeResponseSchema, RetryEpisodeResponseSchema } from "../../src/gen/episodic/v1/scheduler_service_pb.js";
import { FakeServer, ok } from "./fake-server.js";

const RECALL = "/episodic.v1.RecallService/Recall";
const CREATE_THREAD = "/episodic.v1.IngestService/CreateThread";
const DELETE_EPISODE = "/episodic.v1.SchedulerService/DeleteEpisode";
const EPISODE_ID = "5d0c8a52-3f7e-4a63-9d61-0c7f4b3e2a19";
const DATASET = "traced_ts";

function recallAnswer() {
  return ok(RecallResponseSchema, {
    episodes: {
      episodes: [
        {
          episode: { episodeId: EPISODE_ID, dataset: DATASET, summary: "Pro tier for Atlas", status: EpisodeStatus.COMPLETED },
          relevanceScore: 0.9,
        },
      ],
      episodeCount: 1n,
    },
  });
}

function traceparentOf(span: ReadableSpan): string {
  const sc = span.spanContext();
  return `00-${sc.traceId}-${sc.spanId}-01`;
}

describe("client tracing", () => {
  let server: FakeServer;
  let address: string;
  let env: Record<string, string | undefined>;
  let client: EpisodicClient;

  before(async () => {
    server = new FakeServer();
    address = await server.start();
    server.on(RECALL, () => recallAnswer());
    server.on(CREATE_THREAD, () => ok(CreateThreadResponseSchema, { thread: { threadId: "t1", dataset: DATASET } }));
    env = {};
    client = new EpisodicClient({ ingest: address, recall: address, scheduler: address, summariser: address, env });
  });
  after(async () => {
    client.close();
    await server.stop();
  });

  it("sends no trace context while no tracer provider is registered", async () => {
    const found = await client.recall(DATASET, "Pro tier for Atlas", { limit: 2 });
    assert.deepEqual(
      found.episodes.map((s) => s.episode?.episodeId),
      [EPISODE_ID],
    );
    await client.startThread(DATASET);
    assert.ok(server.calls.length >= 2);
    for (const call of server.calls) assert.equal(call.headers["traceparent"], undefined, call.path);
  });

  describe("with a tracer provider registered", () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const contextManager = new AsyncLocalStorageContextManager();

    before(() => {
      // As an application does (NodeSDK or NodeTracerProvider.register() do the same, and
      // also register the W3C propagator; here none is: the client writes traceparent itself).
      context.setGlobalContextManager(contextManager.enable());
      trace.setGlobalTracerProvider(provider);
    });
    after(async () => {
      trace.disable();
      context.disable();
      await provider.shutdown();
    });
    beforeEach(() => {
      exporter.reset();
      server.calls.length = 0;
      delete env[GENAI.CAPTURE_CONTENT_ENV];
      delete env[GENAI.CAPTURE_ENCRYPTED_ENV];
    });

    it("makes recall a search_memory CLIENT span, the call's parent, inside the caller's span", async () => {
      const agent = trace.getTracer("agent");
      await agent.startActiveSpan("agent turn", async (turn) => {
        await client.startThread(DATASET); // not a memory operation: no span, the turn's context
        await client.recall(DATASET, "Pro tier for Atlas", { limit: 2 });
        turn.end();
      });
      const spans = exporter.getFinishedSpans();
      assert.deepEqual(spans.map((s) => s.name).sort(), ["agent turn", "search_memory"]);
      const turn = spans.find((s) => s.name === "agent turn")!;
      const search = spans.find((s) => s.name === "search_memory")!;
      assert.equal(search.kind, SpanKind.CLIENT);
      assert.equal(search.parentSpanContext?.spanId, turn.spanContext().spanId);
      assert.equal(search.spanContext().traceId, turn.spanContext().traceId);
      const port = Number(address.split(":")[1]);
      assert.deepEqual(search.attributes, {
        [GENAI.OPERATION_NAME]: "search_memory",
        [GENAI.PROVIDER_NAME]: "episodic",
        [GENAI.SERVER_ADDRESS]: "127.0.0.1",
        [GENAI.SERVER_PORT]: port,
        [GENAI.MEMORY_STORE_ID]: DATASET,
        [GENAI.RETRIEVAL_TOP_K]: 2,
        [GENAI.MEMORY_RECORD_COUNT]: 1,
        [GENAI.MEMORY_RECORD_ID]: EPISODE_ID,
        [GENAI.RECORD_IDS]: [EPISODE_ID],
      }); // content is opt-in: neither the query nor the records by default
      // The server sees the client span as the parent of its own; CreateThread, the turn.
      assert.equal(server.callsTo(RECALL)[0]!.headers["traceparent"], traceparentOf(search));
      assert.equal(server.callsTo(CREATE_THREAD)[0]!.headers["traceparent"], traceparentOf(turn));
    });

    it("puts the query and the records on the span only with both content switches", async () => {
      for (const [switches, shown] of [
        [{ [GENAI.CAPTURE_CONTENT_ENV]: "true" }, false],
        [{ [GENAI.CAPTURE_CONTENT_ENV]: "true", [GENAI.CAPTURE_ENCRYPTED_ENV]: "true" }, true],
      ] as const) {
        exporter.reset();
        Object.assign(env, switches);
        await client.recall(DATASET, "Pro tier for Atlas");
        const [span] = exporter.getFinishedSpans();
        assert.equal(span!.attributes[GENAI.MEMORY_QUERY_TEXT] === "Pro tier for Atlas", shown);
        const records = String(span!.attributes[GENAI.MEMORY_RECORDS] ?? "");
        assert.equal(records.includes(EPISODE_ID), shown, records);
        if (shown) {
          assert.deepEqual(JSON.parse(records), [{ id: EPISODE_ID, content: "Pro tier for Atlas", score: 0.9 }]);
        }
      }
    });

    it("names each memory operation as Python does, and a failure by its gRPC code", async () => {
      const episode = { episodeId: EPISODE_ID, dataset: DATASET, summary: "s" };
      server.on(DELETE_EPISODE, (call) =>
        call.body.length > 0 && Buffer.from(call.body).includes(Buffer.from(EPISODE_ID))
          ? ok(DeleteEpisodeResponseSchema, { episode })
          : { code: 5, message: "episode not found", reason: "NOT_FOUND" },
      );
      server.on("/episodic.v1.SchedulerService/RetryEpisode", () => ok(RetryEpisodeResponseSchema, { episode }));
      server.on("/episodic.v1.IngestService/RecordEvent", () =>
        ok(RecordEventResponseSchema, { event: { episodeId: "e1", dataset: DATASET, summary: "deployed" }, stored: true }),
      );
      const receipt = { dataset: DATASET, rowsDeleted: { episodes: 2n, events: 1n, messages: 5n } };
      server.on("/episodic.v1.AdminService/DeleteThread", () => ok(DeleteThreadResponseSchema, { receipt }));
      server.on("/episodic.v1.AdminService/DeleteDataset", () => ok(DeleteDatasetResponseSchema, { receipt }));

      await client.deleteEpisode(EPISODE_ID);
      const missing = await client.deleteEpisode("00000000-0000-0000-0000-000000000000").catch((e: unknown) => e);
      assert.ok(missing instanceof NotFoundError, String(missing));
      await client.retryEpisode(EPISODE_ID);
      await client.recordEvent(DATASET, "deployed", { eventType: "deploy" });
      await client.deleteThread("t1");
      await client.deleteDataset(DATASET);

      const spans = exporter.getFinishedSpans();
      assert.deepEqual(
        spans.map((s) => s.name),
        ["delete_memory", "delete_memory", "update_memory", "create_memory", "delete_memory", "delete_memory_store"],
      );
      const [deleted, failed, retried, event, thread, store] = spans as [ReadableSpan, ...ReadableSpan[]];
      assert.equal(deleted.attributes[GENAI.MEMORY_RECORD_ID], EPISODE_ID);
      assert.equal(deleted.attributes[GENAI.MEMORY_STORE_ID], DATASET);
      assert.equal(failed!.attributes[GENAI.ERROR_TYPE], "NOT_FOUND");
      assert.equal(failed!.status.code, SpanStatusCode.ERROR);
      assert.equal(retried!.attributes[GENAI.MEMORY_RECORD_ID], EPISODE_ID);
      assert.equal(event!.attributes[GENAI.MEMORY_RECORD_ID], "e1");
      assert.equal(event!.attributes[GENAI.RECORD_KIND], "event");
      for (const erased of [thread!, store!]) {
        assert.equal(erased.attributes[GENAI.MEMORY_STORE_ID], DATASET);
        assert.equal(erased.attributes[GENAI.MEMORY_RECORD_COUNT], 3); // episodes + events
      }
      assert.ok(spans.every((s) => s.kind === SpanKind.CLIENT));
      // Whatever the switches, what was deleted is not shown.
      assert.ok(spans.every((s) => !(GENAI.MEMORY_RECORDS in s.attributes)));
    });

    it("makes one span per attempt when a call is retried", async () => {
      const flaky = new FakeServer();
      const flakyAddress = await flaky.start();
      flaky.on(RECALL, (_, attempt) => (attempt === 1 ? { code: 14, message: "try again" } : recallAnswer()));
      const retrying = new EpisodicClient({ recall: flakyAddress, env, retry: { initialBackoffMs: 1, maxBackoffMs: 2 } });
      try {
        await retrying.recall(DATASET, "Atlas");
      } finally {
        retrying.close();
        await flaky.stop();
      }
      const spans = exporter.getFinishedSpans();
      assert.deepEqual(
        spans.map((s) => [s.name, s.attributes[GENAI.ERROR_TYPE]]),
        [
          ["search_memory", "UNAVAILABLE"],
          ["search_memory", undefined],
        ],
      );
      const [first, second] = flaky.calls.map((c) => c.headers["traceparent"]);
      assert.equal(first, traceparentOf(spans[0]!));
      assert.equal(second, traceparentOf(spans[1]!));
    });

    it("leaves health checks alone", async () => {
      server.on("/grpc.health.v1.Health/Check", () => ok(ThreadSchema, {})); // empty: UNKNOWN status
      await client.waitReady(["recall"], { timeoutMs: 300 }).catch(() => undefined);
      assert.ok(server.callsTo("/grpc.health.v1.Health/Check").length > 0);
      assert.ok(server.calls.every((c) => c.headers["traceparent"] === undefined));
      assert.deepEqual(exporter.getFinishedSpans(), []);
    });
  });
});

// A child process where `@opentelemetry/*` cannot be resolved (as when the application
// does not install the optional peer): the client works and sends no trace context.
const BLOCK = `
import { register } from "node:module";
register("data:text/javascript," + encodeURIComponent(
  "export async function resolve(s, c, next) {" +
  " if (s.startsWith('@opentelemetry/')) throw Object.assign(new Error('blocked: ' + s), { code: 'ERR_MODULE_NOT_FOUND' });" +
  " return next(s, c); }"));
`;

describe("without @opentelemetry/api installed", () => {
  it("the client works and sends no trace context", async () => {
    const server = new FakeServer();
    const address = await server.start();
    server.on(RECALL, () => recallAnswer());
    const index = fileURLToPath(new URL("../../src/index.js", import.meta.url));
    const script = `
      let api = "importable";
      try { await import("@opentelemetry/api"); } catch { api = "blocked"; }
      const { EpisodicClient } = await import(${JSON.stringify(index)});
      const memory = new EpisodicClient({ recall: process.argv[1], env: {} });
      const found = await memory.recall("${DATASET}", "Atlas");
      memory.close();
      console.log(api, found.episodes.map((s) => s.episode.summary).join("|"));
    `;
    try {
      const stdout = await new Promise<string>((resolve, reject) =>
        execFile(
          process.execPath,
          ["--import", `data:text/javascript,${encodeURIComponent(BLOCK)}`, "--input-type=module", "-e", script, address],
          { timeout: 60_000 },
          (err, out, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(out)),
        ),
      );
      assert.equal(stdout.trim(), "blocked Pro tier for Atlas");
      assert.equal(server.callsTo(RECALL).length, 1);
      assert.equal(server.callsTo(RECALL)[0]!.headers["traceparent"], undefined);
    } finally {
      await server.stop();
    }
  });
});
