/**
 * The AdminService calls the Python SDK wraps (datasets, erasure, dataset policy, the entity
 * canon) and the rate-limit backoff, against the fake gRPC server: what each request holds
 * (SetDatasetPolicy's update_mask above all), which calls are repeated on UNAVAILABLE, and
 * how a RESOURCE_EXHAUSTED with a RetryInfo is waited out — within `rateLimitRetries` and
 * the call's deadline, like the Python SDK's `call`.
 */

import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";

import { EpisodicClient, languageOriginName } from "../../src/client.js";
import {
  Code,
  EpisodicError,
  FailedPreconditionError,
  NotFoundError,
  ResourceExhaustedError,
  UnavailableError,
} from "../../src/errors.js";
import {
  DeleteDatasetRequestSchema,
  DeleteDatasetResponseSchema,
  DeleteThreadRequestSchema,
  DeleteThreadResponseSchema,
  GetDatasetPolicyRequestSchema,
  GetDatasetPolicyResponseSchema,
  LanguageOrigin,
  ListDatasetsRequestSchema,
  ListDatasetsResponseSchema,
  ListEntitiesRequestSchema,
  ListEntitiesResponseSchema,
  MergeEntitiesRequestSchema,
  MergeEntitiesResponseSchema,
  SetDatasetPolicyRequestSchema,
  SetDatasetPolicyResponseSchema,
  SplitEntityRequestSchema,
  SplitEntityResponseSchema,
} from "../../src/gen/episodic/v1/admin_service_pb.js";
import { CreateThreadResponseSchema, GetThreadResponseSchema } from "../../src/gen/episodic/v1/ingest_service_pb.js";
import { SearchEpisodesResponseSchema } from "../../src/gen/episodic/v1/recall_service_pb.js";
import { FakeServer, decode, ok } from "./fake-server.js";

const ADMIN = "/episodic.v1.AdminService";
const LIST_DATASETS = `${ADMIN}/ListDatasets`;
const LIST_ENTITIES = `${ADMIN}/ListEntities`;
const MERGE_ENTITIES = `${ADMIN}/MergeEntities`;
const SPLIT_ENTITY = `${ADMIN}/SplitEntity`;
const DELETE_DATASET = `${ADMIN}/DeleteDataset`;
const DELETE_THREAD = `${ADMIN}/DeleteThread`;
const GET_POLICY = `${ADMIN}/GetDatasetPolicy`;
const SET_POLICY = `${ADMIN}/SetDatasetPolicy`;
const GET_THREAD = "/episodic.v1.IngestService/GetThread";
const CREATE_THREAD = "/episodic.v1.IngestService/CreateThread";
const SEARCH_EPISODES = "/episodic.v1.RecallService/SearchEpisodes";
const THREAD_ID = "0b7f3e0c-6a3c-4c1e-9a57-2f1b8f4e5d21";

const fastRetry = { initialBackoffMs: 5, maxBackoffMs: 20 };

const policy = {
  dataset: "ds",
  retentionDays: 30,
  effectiveRetentionDays: 30,
  effectiveCompactAfterDays: 0,
  encrypted: true,
  language: "french",
  languageOrigin: LanguageOrigin.SET,
};

describe("EpisodicClient's admin calls and rate limits against a fake server", () => {
  let server: FakeServer;
  let address: string;
  let client: EpisodicClient;

  beforeEach(async () => {
    server = new FakeServer();
    address = await server.start();
    client = newClient();
  });
  afterEach(async () => {
    client.close();
    await server.stop();
  });

  function newClient(extra: ConstructorParameters<typeof EpisodicClient>[0] = {}): EpisodicClient {
    // Only ingest is given: AdminService is served by the Ingest process.
    return new EpisodicClient({
      ingest: address,
      recall: address,
      scheduler: "127.0.0.1:1",
      summariser: "127.0.0.1:1",
      retry: fastRetry,
      env: {},
      ...extra,
    });
  }

  describe("datasets and the entity canon", () => {
    it("listDatasets pages with a prefix, on the Ingest address", async () => {
      server.on(LIST_DATASETS, () =>
        ok(ListDatasetsResponseSchema, {
          datasets: [{ dataset: "acme/a", threadCount: 2n, messageCount: 7n }],
          nextPageToken: "next",
        }),
      );
      const first = await client.listDatasets({ prefix: "acme/", pageSize: 10 });
      assert.deepEqual([...first].map((d) => d.dataset), ["acme/a"]);
      assert.equal(first.items[0]!.threadCount, 2n);
      assert.equal(first.nextPageToken, "next");
      await client.listDatasets({ pageToken: "next" });
      const [a, b] = server.callsTo(LIST_DATASETS).map((c) => decode(ListDatasetsRequestSchema, c));
      assert.deepEqual([a!.prefix, a!.pageSize, a!.pageToken], ["acme/", 10, ""]);
      assert.deepEqual([b!.prefix, b!.pageSize, b!.pageToken], ["", 0, "next"]);
    });

    it("listEntities pages a dataset's entities", async () => {
      server.on(LIST_ENTITIES, () =>
        ok(ListEntitiesResponseSchema, {
          entities: [{ entityId: "e1", name: "atlas", aliases: [{ alias: "project atlas", episodeCount: 3n }] }],
        }),
      );
      const p = await client.listEntities("ds", { pageSize: 5, pageToken: "t" });
      assert.equal(p.items[0]!.name, "atlas");
      assert.equal(p.items[0]!.aliases[0]!.alias, "project atlas");
      assert.equal(p.nextPageToken, "");
      const request = decode(ListEntitiesRequestSchema, server.calls[0]!);
      assert.deepEqual([request.dataset, request.pageSize, request.pageToken], ["ds", 5, "t"]);
    });

    it("mergeEntities and splitEntity send the names and return the entities", async () => {
      server.on(MERGE_ENTITIES, () => ok(MergeEntitiesResponseSchema, { entity: { entityId: "e1", name: "atlas" } }));
      server.on(SPLIT_ENTITY, () =>
        ok(SplitEntityResponseSchema, {
          splitOff: { entityId: "e2", name: "atlas v2" },
          remaining: { entityId: "e1", name: "atlas" },
        }),
      );
      const merged = await client.mergeEntities("ds", "atlas", ["project atlas", "e9"]);
      assert.equal(merged.entityId, "e1");
      const split = await client.splitEntity("ds", "atlas v2");
      assert.equal(split.splitOff.entityId, "e2");
      assert.equal(split.remaining.entityId, "e1");
      const merge = decode(MergeEntitiesRequestSchema, server.callsTo(MERGE_ENTITIES)[0]!);
      assert.deepEqual([merge.dataset, merge.into, merge.sources], ["ds", "atlas", ["project atlas", "e9"]]);
      const splitRequest = decode(SplitEntityRequestSchema, server.callsTo(SPLIT_ENTITY)[0]!);
      assert.deepEqual([splitRequest.dataset, splitRequest.alias], ["ds", "atlas v2"]);
    });

    it("errors keep their class: splitting an entity's only alias is FAILED_PRECONDITION", async () => {
      server.on(SPLIT_ENTITY, () => ({
        code: Code.FailedPrecondition,
        message: "'atlas' is the entity's only alias",
        reason: "FAILED_PRECONDITION",
      }));
      await assert.rejects(client.splitEntity("ds", "atlas"), (e: unknown) => {
        assert.ok(e instanceof FailedPreconditionError, String(e));
        assert.equal(e.method, "SplitEntity");
        assert.equal(e.retryAfterMs, undefined);
        return true;
      });
    });
  });

  describe("erasure", () => {
    it("deleteDataset and deleteThread return their receipts", async () => {
      const receipt = {
        receiptId: "r1",
        scope: "dataset",
        dataset: "ds",
        datasetDigest: "ab",
        rowsDeleted: { messages: 4n, threads: 1n },
        dataKeyDestroyed: true,
        auditEventsPseudonymised: 2n,
        digest: "cd",
      };
      server.on(DELETE_DATASET, () => ok(DeleteDatasetResponseSchema, { receipt }));
      server.on(DELETE_THREAD, () =>
        ok(DeleteThreadResponseSchema, { receipt: { ...receipt, scope: "thread", threadId: THREAD_ID } }),
      );
      const erased = await client.deleteDataset("ds");
      assert.equal(erased.scope, "dataset");
      assert.deepEqual(erased.rowsDeleted, { messages: 4n, threads: 1n });
      assert.equal(erased.dataKeyDestroyed, true);
      assert.equal(erased.auditEventsPseudonymised, 2n);
      const thread = await client.deleteThread(THREAD_ID);
      assert.equal(thread.scope, "thread");
      assert.equal(thread.threadId, THREAD_ID);
      assert.equal(decode(DeleteDatasetRequestSchema, server.callsTo(DELETE_DATASET)[0]!).dataset, "ds");
      assert.equal(decode(DeleteThreadRequestSchema, server.callsTo(DELETE_THREAD)[0]!).threadId, THREAD_ID);
    });

    it("destructive calls are not repeated on UNAVAILABLE; the reads and SetDatasetPolicy are", async () => {
      const unavailable = () => ({ code: Code.Unavailable, message: "down" });
      for (const path of [DELETE_DATASET, DELETE_THREAD, MERGE_ENTITIES, SPLIT_ENTITY]) server.on(path, unavailable);
      await assert.rejects(client.deleteDataset("ds"), UnavailableError);
      await assert.rejects(client.deleteThread(THREAD_ID), UnavailableError);
      await assert.rejects(client.mergeEntities("ds", "a", ["b"]), UnavailableError);
      await assert.rejects(client.splitEntity("ds", "a"), UnavailableError);
      for (const path of [DELETE_DATASET, DELETE_THREAD, MERGE_ENTITIES, SPLIT_ENTITY]) {
        assert.equal(server.callsTo(path).length, 1, path);
      }
      const flaky = <T>(answer: () => T) => (_call: unknown, attempt: number) => (attempt < 3 ? unavailable() : answer());
      server.on(LIST_DATASETS, flaky(() => ok(ListDatasetsResponseSchema, {})));
      server.on(LIST_ENTITIES, flaky(() => ok(ListEntitiesResponseSchema, {})));
      server.on(GET_POLICY, flaky(() => ok(GetDatasetPolicyResponseSchema, { policy })));
      server.on(SET_POLICY, flaky(() => ok(SetDatasetPolicyResponseSchema, { policy })));
      await client.listDatasets();
      await client.listEntities("ds");
      await client.getDatasetPolicy("ds");
      await client.setDatasetPolicy("ds", { retentionDays: 30 });
      for (const path of [LIST_DATASETS, LIST_ENTITIES, GET_POLICY, SET_POLICY]) {
        assert.equal(server.callsTo(path).length, 3, path);
      }
    });
  });

  describe("dataset policy", () => {
    beforeEach(() => {
      server.on(GET_POLICY, () => ok(GetDatasetPolicyResponseSchema, { policy }));
      server.on(SET_POLICY, () => ok(SetDatasetPolicyResponseSchema, { policy }));
    });

    const sent = () => server.callsTo(SET_POLICY).map((c) => decode(SetDatasetPolicyRequestSchema, c));

    it("getDatasetPolicy returns the policy: its own values, those in force, the language", async () => {
      const got = await client.getDatasetPolicy("ds");
      assert.equal(decode(GetDatasetPolicyRequestSchema, server.calls[0]!).dataset, "ds");
      assert.equal(got.retentionDays, 30);
      assert.equal(got.compactAfterDays, undefined, "unset: the global default");
      assert.equal(got.effectiveCompactAfterDays, 0, "0: never");
      assert.equal(got.encrypted, true);
      assert.equal(got.language, "french");
      assert.equal(languageOriginName(got.languageOrigin), "set");
      assert.equal(languageOriginName(LanguageOrigin.DETECTED), "detected");
      assert.equal(languageOriginName(LanguageOrigin.DEFAULT), "default");
      assert.equal(languageOriginName(LanguageOrigin.UNSPECIFIED), "");
    });

    it("names only the fields given in update_mask", async () => {
      await client.setDatasetPolicy("ds", { retentionDays: 30 });
      await client.setDatasetPolicy("ds", { language: "fr" });
      await client.setDatasetPolicy("ds", { compactAfterDays: 7, language: "auto", retentionDays: undefined });
      const [retention, language, both] = sent();
      assert.deepEqual(retention!.updateMask?.paths, ["retention_days"]);
      assert.equal(retention!.retentionDays, 30);
      assert.equal(retention!.compactAfterDays, undefined);
      assert.equal(retention!.language, undefined);
      assert.deepEqual(language!.updateMask?.paths, ["language"]);
      assert.equal(language!.language, "fr");
      assert.equal(language!.retentionDays, undefined);
      assert.deepEqual(both!.updateMask?.paths, ["compact_after_days", "language"]);
      assert.equal(both!.compactAfterDays, 7);
      assert.equal(both!.language, "auto");
      assert.equal(both!.dataset, "ds");
    });

    it("null names a day count and leaves it unset: back to the global default", async () => {
      await client.setDatasetPolicy("ds", { retentionDays: null, compactAfterDays: 0 });
      const [request] = sent();
      assert.deepEqual(request!.updateMask?.paths, ["retention_days", "compact_after_days"]);
      assert.equal(request!.retentionDays, undefined);
      assert.equal(request!.compactAfterDays, 0, "0 is a value (set), not the default");
    });

    it("given nothing, it only reads the policy (an empty mask would reset every field)", async () => {
      const got = await client.setDatasetPolicy("ds");
      await client.setDatasetPolicy("ds", { retentionDays: undefined, timeoutMs: 2000 });
      assert.equal(got.retentionDays, 30);
      assert.equal(server.callsTo(SET_POLICY).length, 0);
      assert.equal(server.callsTo(GET_POLICY).length, 2);
      const timeout = String(server.callsTo(GET_POLICY)[1]!.headers["grpc-timeout"]);
      assert.ok(Number.parseInt(timeout, 10) <= 2000, timeout);
    });

    it("a day count that is not a whole number is refused before any call", async () => {
      await assert.rejects(client.setDatasetPolicy("ds", { retentionDays: 1.5 }), TypeError);
      await assert.rejects(client.setDatasetPolicy("ds", { compactAfterDays: 2 ** 31 }), TypeError);
      await assert.rejects(client.setDatasetPolicy("ds", { retentionDays: "30" as unknown as number }), TypeError);
      assert.equal(server.calls.length, 0);
    });
  });

  describe("rate limits", () => {
    const limited = (delayMs: number) => ({
      code: Code.ResourceExhausted,
      message: "rate limit of key ek_abc exceeded",
      reason: "RATE_LIMITED",
      retryDelayMs: delayMs,
    });

    it("a call refused with a RetryInfo waits as long as the server asks, then succeeds", async () => {
      server.on(SEARCH_EPISODES, (_call, attempt) =>
        attempt <= 2 ? limited(50) : ok(SearchEpisodesResponseSchema, {}),
      );
      const started = Date.now();
      assert.deepEqual(await client.searchEpisodes("ds", "q"), []);
      assert.equal(server.callsTo(SEARCH_EPISODES).length, 3);
      assert.ok(Date.now() - started >= 95, `took ${Date.now() - started} ms`); // twice 50 ms
    });

    it("gives up after rateLimitRetries with the ResourceExhaustedError and its retryAfterMs", async () => {
      client.close();
      client = newClient({ rateLimitRetries: 1 });
      server.on(SEARCH_EPISODES, () => limited(50));
      await assert.rejects(client.searchEpisodes("ds", "q"), (e: unknown) => {
        assert.ok(e instanceof ResourceExhaustedError, String(e));
        assert.equal(e.reason, "RATE_LIMITED");
        assert.equal(e.retryAfterMs, 50);
        return true;
      });
      assert.equal(server.callsTo(SEARCH_EPISODES).length, 2);
    });

    it("3 retries by default; 0 disables them", async () => {
      server.on(GET_THREAD, () => limited(1));
      await assert.rejects(client.getThread(THREAD_ID), ResourceExhaustedError);
      assert.equal(client.rateLimitRetries, 3);
      assert.equal(server.callsTo(GET_THREAD).length, 4);
      const none = newClient({ rateLimitRetries: 0 });
      try {
        await assert.rejects(none.getThread(THREAD_ID), ResourceExhaustedError);
      } finally {
        none.close();
      }
      assert.equal(server.callsTo(GET_THREAD).length, 5);
    });

    it("any call is repeated, even one never retried on UNAVAILABLE: the refusal came first", async () => {
      server.on(CREATE_THREAD, (_call, attempt) =>
        attempt === 1 ? limited(10) : ok(CreateThreadResponseSchema, { thread: { threadId: THREAD_ID } }),
      );
      server.on(DELETE_DATASET, (_call, attempt) =>
        attempt === 1 ? limited(10) : ok(DeleteDatasetResponseSchema, { receipt: { scope: "dataset" } }),
      );
      assert.equal((await client.createThread("ds")).threadId, THREAD_ID);
      assert.equal((await client.deleteDataset("ds")).scope, "dataset");
      assert.equal(server.callsTo(CREATE_THREAD).length, 2);
      assert.equal(server.callsTo(DELETE_DATASET).length, 2);
    });

    it("not when the wait would pass the call's deadline", async () => {
      server.on(GET_THREAD, () => limited(5_000));
      await assert.rejects(client.getThread(THREAD_ID, { timeoutMs: 1_000 }), (e: unknown) => {
        assert.ok(e instanceof ResourceExhaustedError, String(e));
        assert.equal(e.retryAfterMs, 5_000);
        return true;
      });
      assert.equal(server.callsTo(GET_THREAD).length, 1); // it did not wait to try again
    });

    it("RESOURCE_EXHAUSTED without a RetryInfo (a request too large) is not repeated", async () => {
      server.on(GET_THREAD, () => ({ code: Code.ResourceExhausted, message: "too large", reason: "REQUEST_TOO_LARGE" }));
      await assert.rejects(client.getThread(THREAD_ID), (e: unknown) => {
        assert.ok(e instanceof ResourceExhaustedError, String(e));
        assert.equal(e.retryAfterMs, undefined);
        return true;
      });
      assert.equal(server.callsTo(GET_THREAD).length, 1);
    });

    it("a RetryInfo on another code does not make the call repeat", async () => {
      server.on(GET_THREAD, () => ({ code: Code.NotFound, message: "no thread", reason: "NOT_FOUND", retryDelayMs: 10 }));
      await assert.rejects(client.getThread(THREAD_ID), (e: unknown) => {
        assert.ok(e instanceof NotFoundError, String(e));
        assert.equal(e.retryAfterMs, 10);
        return true;
      });
      assert.equal(server.callsTo(GET_THREAD).length, 1);
    });

    it("rate-limit retries and UNAVAILABLE retries are counted apart, and the last answer is thrown", async () => {
      // limited, down, limited, down, answer: 2 rate-limit retries (of 3) and 2 UNAVAILABLE
      // retries (of the policy's 5 attempts), in one call.
      server.on(GET_THREAD, (_call, attempt) => {
        if (attempt === 1 || attempt === 3) return limited(5);
        if (attempt === 2 || attempt === 4) return { code: Code.Unavailable, message: "down" };
        return ok(GetThreadResponseSchema, { thread: { threadId: THREAD_ID } });
      });
      assert.equal((await client.getThread(THREAD_ID)).threadId, THREAD_ID);
      assert.equal(server.callsTo(GET_THREAD).length, 5);
    });

    it("a fractional RetryInfo keeps its precision (1.25 s)", async () => {
      server.on(GET_THREAD, () => limited(1_250));
      const err = await client.getThread(THREAD_ID, { timeoutMs: 100 }).catch((e: unknown) => e);
      assert.ok(err instanceof EpisodicError);
      assert.equal(err.retryAfterMs, 1_250);
    });
  });
});
