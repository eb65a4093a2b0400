/**
 * The client's behaviour without the real services: a fake gRPC server (node:http2)
 * scripts the answers. Errors and their ErrorInfo, retries only for idempotent calls,
 * deadlines, credentials, and how inputs become requests.
 */

import assert from "node:assert/strict";
import * as http2 from "node:http2";
import * as net from "node:net";
import { afterEach, beforeEach, describe, it } from "node:test";

import { timestampDate } from "@bufbuild/protobuf/wkt";

import { EpisodicClient } from "../../src/client.js";
import {
  AlreadyExistsError,
  Code,
  DeadlineExceededError,
  EpisodicError,
  FailedPreconditionError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
  ResourceExhaustedError,
  STREAM_RESET,
  UnauthenticatedError,
  UnavailableError,
} from "../../src/errors.js";
import { EpisodeStatus, Role, ThreadSchema } from "../../src/gen/episodic/v1/episode_pb.js";
import {
  AddMessagesRequestSchema,
  AddMessagesResponseSchema,
  CreateThreadRequestSchema,
  CreateThreadResponseSchema,
  GetThreadResponseSchema,
} from "../../src/gen/episodic/v1/ingest_service_pb.js";
import {
  ListEpisodesRequestSchema,
  ListEpisodesResponseSchema,
  RecallRequestSchema,
  RecallResponseSchema,
} from "../../src/gen/episodic/v1/recall_service_pb.js";
import { FakeServer, decode, ok } from "./fake-server.js";

const GET_THREAD = "/episodic.v1.IngestService/GetThread";
const CREATE_THREAD = "/episodic.v1.IngestService/CreateThread";
const ADD_MESSAGES = "/episodic.v1.IngestService/AddMessages";
const RECALL = "/episodic.v1.RecallService/Recall";
const LIST_EPISODES = "/episodic.v1.RecallService/ListEpisodes";
const THREAD_ID = "0b7f3e0c-6a3c-4c1e-9a57-2f1b8f4e5d21";

const fastRetry = { initialBackoffMs: 5, maxBackoffMs: 20 };

describe("EpisodicClient against a fake server", () => {
  let server: FakeServer;
  let address: string;
  let client: EpisodicClient;

  beforeEach(async () => {
    // A fresh script and a fresh client per test.
    server = new FakeServer();
    address = await server.start();
    client = newClient();
  });
  afterEach(async () => {
    client.close();
    await server.stop();
  });

  function newClient(extra: ConstructorParameters<typeof EpisodicClient>[0] = {}): EpisodicClient {
    return new EpisodicClient({
      ingest: address,
      recall: address,
      scheduler: address,
      summariser: address,
      retry: fastRetry,
      env: {},
      ...extra,
    });
  }

  describe("errors", () => {
    const cases: [Code, typeof EpisodicError, string][] = [
      [Code.InvalidArgument, InvalidArgumentError, "INVALID_ARGUMENT"],
      [Code.NotFound, NotFoundError, "NOT_FOUND"],
      [Code.AlreadyExists, AlreadyExistsError, "ALREADY_EXISTS"],
      [Code.FailedPrecondition, FailedPreconditionError, "FAILED_PRECONDITION"],
      [Code.Unavailable, UnavailableError, "UNAVAILABLE"],
      [Code.DeadlineExceeded, DeadlineExceededError, "DEADLINE_EXCEEDED"],
      [Code.Unauthenticated, UnauthenticatedError, "UNAUTHENTICATED"],
      [Code.PermissionDenied, PermissionDeniedError, "PERMISSION_DENIED"],
      [Code.ResourceExhausted, ResourceExhaustedError, "RESOURCE_EXHAUSTED"],
      [Code.Internal, EpisodicError, "INTERNAL"],
    ];
    for (const [code, ErrorClass, name] of cases) {
      it(`${name} becomes ${ErrorClass.name}`, async () => {
        server.on(CREATE_THREAD, () => ({ code, message: `it is ${name} (100%)` }));
        const err = await client.createThread("ds").then(
          () => assert.fail("no error"),
          (e: unknown) => e,
        );
        assert.ok(err instanceof ErrorClass, String(err));
        assert.ok(err instanceof EpisodicError);
        assert.equal(err.name, ErrorClass.name);
        assert.equal(err.code, code);
        assert.equal(err.codeName, name);
        assert.equal(err.rawMessage, `it is ${name} (100%)`);
        assert.equal(err.message, `${name}: it is ${name} (100%) (CreateThread)`);
        assert.equal(err.reason, name, "the reason defaults to the code's name");
        assert.deepEqual(err.metadata, {});
        assert.equal(err.field, undefined);
        assert.equal(err.method, "CreateThread");
      });
    }

    it("carries the ErrorInfo from grpc-status-details-bin: reason, domain, metadata, field", async () => {
      server.on(ADD_MESSAGES, () => ({
        code: Code.AlreadyExists,
        message: "idempotency key 'k1' was already used",
        reason: "IDEMPOTENCY_KEY_REUSED",
        domain: "episodic.dev",
        metadata: { field: "messages[0].idempotency_key", idempotency_key: "k1", sequence: "1" },
      }));
      const err = await client
        .addMessages(THREAD_ID, [{ role: "user", content: "x", idempotencyKey: "k1" }])
        .then(() => assert.fail("no error"), (e: unknown) => e);
      assert.ok(err instanceof AlreadyExistsError);
      assert.equal(err.reason, "IDEMPOTENCY_KEY_REUSED");
      assert.equal(err.domain, "episodic.dev");
      assert.equal(err.field, "messages[0].idempotency_key");
      assert.deepEqual(err.metadata, {
        field: "messages[0].idempotency_key",
        idempotency_key: "k1",
        sequence: "1",
      });
    });
  });

  describe("retries", () => {
    it("a read is retried on UNAVAILABLE until it succeeds", async () => {
      server.on(GET_THREAD, (_call, attempt) =>
        attempt < 3
          ? { code: Code.Unavailable, message: "database is unreachable" }
          : ok(GetThreadResponseSchema, { thread: { threadId: THREAD_ID, dataset: "ds" } }),
      );
      const thread = await client.getThread(THREAD_ID);
      assert.equal(thread.threadId, THREAD_ID);
      assert.equal(server.callsTo(GET_THREAD).length, 3);
    });

    it("gives up after maxAttempts with the last UnavailableError", async () => {
      server.on(GET_THREAD, () => ({ code: Code.Unavailable, message: "down" }));
      await assert.rejects(client.getThread(THREAD_ID), UnavailableError);
      assert.equal(server.callsTo(GET_THREAD).length, 5);
    });

    it("only UNAVAILABLE is retried", async () => {
      server.on(GET_THREAD, () => ({ code: Code.Internal, message: "bug" }));
      await assert.rejects(client.getThread(THREAD_ID), (e: unknown) => e instanceof EpisodicError && e.code === Code.Internal);
      assert.equal(server.callsTo(GET_THREAD).length, 1);
    });

    it("a reset stream is UNAVAILABLE (STREAM_RESET) and a read is repeated past it", async () => {
      // Connect reports an RST_STREAM as INTERNAL, the code of a server's bug.
      server.on(GET_THREAD, (_call, attempt) =>
        attempt < 3
          ? { reset: http2.constants.NGHTTP2_INTERNAL_ERROR }
          : ok(GetThreadResponseSchema, { thread: { threadId: THREAD_ID, dataset: "ds" } }),
      );
      const thread = await client.getThread(THREAD_ID);
      assert.equal(thread.threadId, THREAD_ID);
      assert.equal(server.callsTo(GET_THREAD).length, 3);
    });

    it("a reset CreateThread is not repeated: it may have taken effect", async () => {
      server.on(CREATE_THREAD, () => ({ reset: http2.constants.NGHTTP2_INTERNAL_ERROR }));
      await assert.rejects(client.createThread("ds"), (e: unknown) => {
        assert.ok(e instanceof UnavailableError, String(e));
        assert.equal(e.reason, STREAM_RESET);
        assert.deepEqual(e.metadata, { grpc_code: "INTERNAL" });
        assert.match(e.message, /may or may not have taken effect/);
        return true;
      });
      assert.equal(server.callsTo(CREATE_THREAD).length, 1);
    });

    it("CreateThread is not idempotent: never retried", async () => {
      server.on(CREATE_THREAD, () => ({ code: Code.Unavailable, message: "down" }));
      await assert.rejects(client.createThread("ds"), UnavailableError);
      assert.equal(server.callsTo(CREATE_THREAD).length, 1);
    });

    it("AddMessages with automatic keys is retried, resending the same keys", async () => {
      server.on(ADD_MESSAGES, (call, attempt) => {
        const request = decode(AddMessagesRequestSchema, call);
        if (attempt === 1) return { code: Code.Unavailable, message: "down" };
        return ok(AddMessagesResponseSchema, {
          threadId: request.threadId,
          storedCount: 2,
          receipts: request.messages.map((m, i) => ({
            sequence: BigInt(i + 1),
            idempotencyKey: m.idempotencyKey,
            stored: true,
          })),
        });
      });
      const result = await client.addMessages(THREAD_ID, [
        ["user", "hello"],
        { role: "assistant", content: "hi", idempotencyKey: "mine" },
      ]);
      const [first, second] = server.callsTo(ADD_MESSAGES).map((c) => decode(AddMessagesRequestSchema, c));
      assert.ok(first && second);
      assert.deepEqual(
        first.messages.map((m) => m.idempotencyKey),
        second.messages.map((m) => m.idempotencyKey),
      );
      assert.match(first.messages[0]!.idempotencyKey, /^auto:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      assert.equal(first.messages[1]!.idempotencyKey, "mine");
      assert.deepEqual(result.sequences, [1n, 2n]);
      assert.equal(result.storedCount, 2);
      assert.equal(result.receipts.length, 2);
    });

    it("AddMessages without keys (autoIdempotencyKeys off) is not retried", async () => {
      client.close();
      client = newClient({ autoIdempotencyKeys: false });
      server.on(ADD_MESSAGES, () => ({ code: Code.Unavailable, message: "down" }));
      await assert.rejects(client.addMessages(THREAD_ID, [["user", "hello"]]), UnavailableError);
      assert.equal(server.callsTo(ADD_MESSAGES).length, 1);
      assert.equal(decode(AddMessagesRequestSchema, server.calls[0]!).messages[0]!.idempotencyKey, "");
    });

    it("retry: false disables retries", async () => {
      client.close();
      client = newClient({ retry: false });
      server.on(GET_THREAD, () => ({ code: Code.Unavailable, message: "down" }));
      await assert.rejects(client.getThread(THREAD_ID), UnavailableError);
      assert.equal(server.callsTo(GET_THREAD).length, 1);
    });

    it("a refused connection is UNAVAILABLE (retried, then reported)", async () => {
      const port = await new Promise<number>((resolve) => {
        const s = net.createServer().listen(0, "127.0.0.1", () => {
          const p = (s.address() as net.AddressInfo).port;
          s.close(() => resolve(p));
        });
      });
      const offline = new EpisodicClient({ ingest: `127.0.0.1:${port}`, retry: fastRetry, env: {} });
      await assert.rejects(offline.getThread(THREAD_ID), (e: unknown) => {
        assert.ok(e instanceof UnavailableError, String(e));
        return true;
      });
      offline.close();
    });
  });

  describe("deadlines", () => {
    it("every call sends its deadline as grpc-timeout", async () => {
      server.on(GET_THREAD, () => ok(GetThreadResponseSchema, { thread: { threadId: THREAD_ID } }));
      await client.getThread(THREAD_ID);
      await client.getThread(THREAD_ID, { timeoutMs: 1500 });
      const [byDefault, override] = server.callsTo(GET_THREAD).map((c) => String(c.headers["grpc-timeout"]));
      assert.match(byDefault!, /^\d+m$/);
      const ms = (v: string) => Number.parseInt(v, 10);
      assert.ok(ms(byDefault!) > 9000 && ms(byDefault!) <= 10000, byDefault);
      assert.ok(ms(override!) > 1000 && ms(override!) <= 1500, override);
    });

    it("a call that outlives its deadline fails with DeadlineExceededError", async () => {
      server.on(RECALL, () => ({ hang: true }));
      const started = Date.now();
      await assert.rejects(client.recall("ds", "q", { timeoutMs: 200 }), DeadlineExceededError);
      // It waited for the deadline (a hanging server never answers: without the deadline
      // the call would not end at all); no upper bound, which a loaded machine could break.
      const took = Date.now() - started;
      assert.ok(took >= 150, `took ${took} ms`);
    });

    it("retries stay within the call's deadline", async () => {
      client.close();
      client = newClient({ retry: { maxAttempts: 100, initialBackoffMs: 50, maxBackoffMs: 50 } });
      server.on(GET_THREAD, () => ({ code: Code.Unavailable, message: "down" }));
      // The deadline ends the retries, not maxAttempts: the last error is the server's
      // UNAVAILABLE, or DEADLINE_EXCEEDED when the deadline falls inside an attempt (a
      // loaded machine). No wall-clock assertion: the call count says it stopped early.
      await assert.rejects(
        client.getThread(THREAD_ID, { timeoutMs: 300 }),
        (e: unknown) => e instanceof UnavailableError || e instanceof DeadlineExceededError,
      );
      assert.ok(server.callsTo(GET_THREAD).length < 100);
    });
  });

  describe("credentials", () => {
    it("no API key: no authorization header", async () => {
      server.on(GET_THREAD, () => ok(GetThreadResponseSchema, { thread: {} }));
      await client.getThread(THREAD_ID);
      assert.equal(server.calls[0]!.headers["authorization"], undefined);
    });

    it("apiKey is sent as a bearer token on every call, retries included", async () => {
      client.close();
      client = newClient({ apiKey: "k-123" });
      server.on(GET_THREAD, (_c, attempt) =>
        attempt === 1 ? { code: Code.Unavailable, message: "down" } : ok(GetThreadResponseSchema, { thread: {} }),
      );
      server.on(CREATE_THREAD, () => ok(CreateThreadResponseSchema, { thread: {} }));
      await client.getThread(THREAD_ID);
      await client.createThread("ds");
      assert.deepEqual(
        server.calls.map((c) => c.headers["authorization"]),
        ["Bearer k-123", "Bearer k-123", "Bearer k-123"],
      );
    });

    it("EPISODIC_API_KEY is the default; a function is asked before each call", async () => {
      client.close();
      client = newClient({ env: { EPISODIC_API_KEY: "from-env" } });
      server.on(GET_THREAD, () => ok(GetThreadResponseSchema, { thread: {} }));
      await client.getThread(THREAD_ID);
      let n = 0;
      const rotating = newClient({ apiKey: async () => `token-${++n}` });
      await rotating.getThread(THREAD_ID);
      await rotating.getThread(THREAD_ID);
      rotating.close();
      assert.deepEqual(
        server.calls.map((c) => c.headers["authorization"]),
        ["Bearer from-env", "Bearer token-1", "Bearer token-2"],
      );
    });
  });

  describe("requests", () => {
    it("addMessages maps roles, metadata and backfill timestamps", async () => {
      server.on(ADD_MESSAGES, () => ok(AddMessagesResponseSchema, {}));
      const when = new Date("2026-01-02T03:04:05.678Z");
      await client.addMessages(THREAD_ID, [
        ["agent", "a"],
        { role: Role.TOOL, content: "b", metadata: { tool: "search", n: 2 }, createdAt: when },
        { role: "system", content: "c" },
      ]);
      const request = decode(AddMessagesRequestSchema, server.calls[0]!);
      assert.equal(request.threadId, THREAD_ID);
      assert.deepEqual(request.messages.map((m) => m.role), [Role.ASSISTANT, Role.TOOL, Role.SYSTEM]);
      assert.deepEqual(request.messages[1]!.metadata, { tool: "search", n: 2 });
      assert.equal(timestampDate(request.messages[1]!.createdAt!).toISOString(), when.toISOString());
      assert.equal(request.messages[0]!.createdAt, undefined);
    });

    it("startThread takes a label or options; close() ends connections and a later call reopens them", async () => {
      server.on(CREATE_THREAD, () => ok(CreateThreadResponseSchema, { thread: { threadId: THREAD_ID } }));
      await client.startThread("ds", "billing-q2");
      client.close();
      await client.startThread("ds", { label: "x", threadId: THREAD_ID, metadata: { a: 1 } });
      const [first, second] = server.callsTo(CREATE_THREAD).map((c) => decode(CreateThreadRequestSchema, c));
      assert.equal(first!.dataset, "ds");
      assert.equal(first!.label, "billing-q2");
      assert.equal(first!.threadId, "");
      assert.equal(second!.threadId, THREAD_ID);
      assert.deepEqual(second!.metadata, { a: 1 });
    });

    it("bad roles, statuses and counts are refused before any call", async () => {
      await assert.rejects(client.addMessages(THREAD_ID, [["robot" as "user", "x"]]), /unknown role 'robot'/);
      await assert.rejects(client.listEpisodes("ds", { status: "deleted" as "failed" }), /unknown status 'deleted'/);
      await assert.rejects(client.recentThreads("ds", -3), RangeError);
      assert.deepEqual(await client.recentThreads("ds", 0), []);
      assert.equal(server.calls.length, 0);
    });

    it("recall asks for episodes with the options given, and leaves unset weights unset", async () => {
      server.on(RECALL, () =>
        ok(RecallResponseSchema, { episodes: { episodes: [{ episode: { summary: "s" } }], episodeCount: 7n } }),
      );
      const since = new Date("2026-05-01T00:00:00Z");
      const result = await client.recall("ds", "pricing", {
        limit: 3,
        recencyWeight: 0.5,
        since,
        entities: ["project:atlas"],
        eventType: "decision",
        minRelevance: 0.4,
        minMatch: 0.35,
        abstain: true,
      });
      assert.equal(result.episodeCount, 7);
      assert.equal([...result].length, 1);
      const request = decode(RecallRequestSchema, server.calls[0]!);
      assert.equal(request.query, "pricing");
      assert.deepEqual(request.include, [1]);
      assert.equal(request.contextEpisodes, 3);
      assert.equal(request.similarityWeight, undefined);
      assert.equal(request.recencyWeight, 0.5);
      assert.equal(timestampDate(request.since!).getTime(), since.getTime());
      assert.deepEqual(request.entities, ["project:atlas"]);
      assert.equal(request.eventType, "decision");
      assert.equal(request.minRelevance, 0.4);
      assert.equal(request.minMatch, 0.35);
      assert.equal(request.abstain, true);
      assert.equal(result.match, undefined);
      assert.equal(result.abstained, false);
      assert.equal(result.abstainApplied, false);
    });

    it("recall leaves unset thresholds unset for abstain, and sends an explicit 0", async () => {
      server.on(RECALL, () => ok(RecallResponseSchema, { episodes: { episodes: [], episodeCount: 0n } }));
      await client.recall("ds", "pricing", { abstain: true });
      await client.recall("ds", "pricing", { abstain: true, minRelevance: 0, minMatch: 0 });
      const unset = decode(RecallRequestSchema, server.calls[0]!);
      assert.equal(unset.minRelevance, undefined);
      assert.equal(unset.minMatch, undefined);
      const zero = decode(RecallRequestSchema, server.calls[1]!);
      assert.equal(zero.minRelevance, 0);
      assert.equal(zero.minMatch, 0);
    });

    it("recall says how well the request matched and whether the thresholds emptied it", async () => {
      server.on(RECALL, () =>
        ok(RecallResponseSchema, {
          episodes: { episodes: [], episodeCount: 4n, match: 0.125, abstained: true, abstainApplied: true },
        }),
      );
      const result = await client.recall("ds", "what is my dog's name?", { abstain: true });
      assert.equal(result.episodes.length, 0);
      assert.equal(result.episodeCount, 4);
      assert.equal(result.match, 0.125);
      assert.equal(result.abstained, true);
      assert.equal(result.abstainApplied, true);
    });

    it("recall says whether the dataset is still being summarised or indexed", async () => {
      server.on(RECALL, () =>
        ok(RecallResponseSchema, { episodes: { episodes: [], episodeCount: 1n, chunksPending: true } }),
      );
      const settling = await client.recall("ds", "pricing");
      assert.equal(settling.chunksPending, true);
      assert.equal(settling.episodesPending, false);
      server.on(RECALL, () =>
        ok(RecallResponseSchema, { episodes: { episodes: [], episodeCount: 0n, episodesPending: true } }),
      );
      const summarising = await client.recall("ds", "pricing");
      assert.equal(summarising.chunksPending, false);
      assert.equal(summarising.episodesPending, true);
    });

    it("recall returns how the query was understood, and literalQuery turns the reading off", async () => {
      server.on(RECALL, () =>
        ok(RecallResponseSchema, {
          episodes: { episodes: [], episodeCount: 2n },
          understanding: {
            rankedQuery: "pricing",
            expressions: [{ text: "last week", kind: "relative_week" }],
            applied: true,
          },
        }),
      );
      const result = await client.recall("ds", "what did we decide about pricing last week?");
      assert.equal(result.understanding?.rankedQuery, "pricing");
      assert.equal(result.understanding?.expressions[0]?.text, "last week");
      assert.equal(result.understanding?.applied, true);
      assert.equal(decode(RecallRequestSchema, server.calls[0]!).literalQuery, false);
      await client.recall("ds", "last week", { literalQuery: true });
      assert.equal(decode(RecallRequestSchema, server.calls[1]!).literalQuery, true);
    });

    it("waitForEpisode polls ListEpisodes until the thread's last message is summarised", async () => {
      server.on(GET_THREAD, () =>
        ok(GetThreadResponseSchema, { thread: { threadId: THREAD_ID, dataset: "ds", messageCount: 4n } }),
      );
      server.on(LIST_EPISODES, (_call, attempt) =>
        ok(ListEpisodesResponseSchema, {
          episodes: [
            { episodeId: "old", endSequence: 2n, status: EpisodeStatus.COMPLETED },
            { episodeId: "new", endSequence: 4n, status: attempt < 3 ? EpisodeStatus.PENDING : EpisodeStatus.COMPLETED },
          ],
        }),
      );
      const episode = await client.waitForEpisode(THREAD_ID, { pollIntervalMs: 10 });
      assert.equal(episode.episodeId, "new");
      const polls = server.callsTo(LIST_EPISODES).map((c) => decode(ListEpisodesRequestSchema, c));
      assert.equal(polls.length, 3);
      assert.equal(polls[0]!.threadId, THREAD_ID);
      assert.equal(polls[0]!.dataset, "ds");
    });

    it("waitForEpisode gives up with DeadlineExceededError", async () => {
      server.on(GET_THREAD, () => ok(GetThreadResponseSchema, { thread: { dataset: "ds", messageCount: 1n } }));
      server.on(LIST_EPISODES, () => ok(ListEpisodesResponseSchema, {}));
      await assert.rejects(
        client.waitForEpisode(THREAD_ID, { timeoutMs: 100, pollIntervalMs: 20 }),
        (e: unknown) =>
          e instanceof DeadlineExceededError && /no summarised episode of thread/.test(e.message) && e.method === "waitForEpisode",
      );
    });
  });

  it("the generated Thread type is what comes back", async () => {
    server.on(GET_THREAD, () => ok(GetThreadResponseSchema, { thread: { threadId: THREAD_ID, label: "l" } }));
    const thread = await client.getThread(THREAD_ID);
    assert.equal(thread.$typeName, ThreadSchema.typeName);
    assert.equal(thread.label, "l");
  });
});
