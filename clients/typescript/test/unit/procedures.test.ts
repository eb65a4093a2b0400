/**
 * Procedural memory (issue 39) against the fake gRPC server: OpenAI-format messages with
 * tool calls become the request's ToolCalls (arguments as text or an object), messages read
 * back convert to OpenAI's format, RecordOutcome and the procedure calls send what they
 * should and are repeated on UNAVAILABLE only when that is safe — like the Python SDK.
 */

import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";

import { create } from "@bufbuild/protobuf";

import { EpisodicClient, outcomeName, toOpenAI, writeActions } from "../../src/client.js";
import { Code, NotFoundError, UnavailableError } from "../../src/errors.js";
import {
  DeleteProcedureRequestSchema,
  DeleteProcedureResponseSchema,
} from "../../src/gen/episodic/v1/admin_service_pb.js";
import { MessageSchema, Outcome, Role } from "../../src/gen/episodic/v1/episode_pb.js";
import type { Procedure } from "../../src/gen/episodic/v1/episode_pb.js";
import {
  AddMessagesRequestSchema,
  AddMessagesResponseSchema,
  RecordOutcomeRequestSchema,
  RecordOutcomeResponseSchema,
} from "../../src/gen/episodic/v1/ingest_service_pb.js";
import {
  GetProcedureRequestSchema,
  GetProcedureResponseSchema,
  ListProceduresRequestSchema,
  ListProceduresResponseSchema,
  RecallInclude,
  RecallRequestSchema,
  RecallResponseSchema,
} from "../../src/gen/episodic/v1/recall_service_pb.js";
import { FakeServer, decode, ok } from "./fake-server.js";

const INGEST = "/episodic.v1.IngestService";
const RECALL_SERVICE = "/episodic.v1.RecallService";
const ADD_MESSAGES = `${INGEST}/AddMessages`;
const RECORD_OUTCOME = `${INGEST}/RecordOutcome`;
const RECALL = `${RECALL_SERVICE}/Recall`;
const LIST_PROCEDURES = `${RECALL_SERVICE}/ListProcedures`;
const GET_PROCEDURE = `${RECALL_SERVICE}/GetProcedure`;
const DELETE_PROCEDURE = "/episodic.v1.AdminService/DeleteProcedure";
const THREAD_ID = "0b7f3e0c-6a3c-4c1e-9a57-2f1b8f4e5d21";
const PROCEDURE_ID = "5d0c1a52-8a43-5b0e-9e0f-3c1d2b4a6f70";

const PROCEDURE = {
  procedureId: PROCEDURE_ID,
  dataset: "shop",
  goal: "Please cancel my order #W1",
  steps: [
    { tool: "get_order_details", writes: false, arguments: [{ name: "order_id", source: "user" }] },
    { tool: "cancel_pending_order", writes: true, arguments: [{ name: "order_id", source: "user" }] },
  ],
  successCount: 2,
  failureCount: 1,
  sources: [{ threadId: THREAD_ID, episodeId: "e1", outcome: Outcome.SUCCESS }],
  extractor: "rules",
};

// A chat completion's messages, as an agent framework holds them.
const OPENAI_CHAT = [
  { role: "user", content: "Please cancel my order #W7." },
  {
    role: "assistant",
    content: null,
    tool_calls: [
      {
        id: "call_a",
        type: "function",
        function: { name: "get_order_details", arguments: '{"order_id": "#W7"}' },
      },
    ],
  },
  { role: "tool", tool_call_id: "call_a", content: '{"status": "pending"}' },
  {
    role: "assistant",
    content: "Cancelling it.",
    // Arguments as an object are sent as JSON text; camelCase works too.
    toolCalls: [{ id: "call_b", name: "cancel_pending_order", arguments: { order_id: "#W7", reason: "twice" } }],
  },
  { role: "tool", toolCallId: "call_b", name: "cancel_pending_order", content: '{"status": "cancelled"}' },
] as const;

describe("procedural memory against a fake server", () => {
  let server: FakeServer;
  let client: EpisodicClient;

  beforeEach(async () => {
    server = new FakeServer();
    const address = await server.start();
    client = new EpisodicClient({
      ingest: address,
      recall: address,
      scheduler: "127.0.0.1:1",
      summariser: "127.0.0.1:1",
      retry: { initialBackoffMs: 5, maxBackoffMs: 20 },
      env: {},
    });
  });
  afterEach(async () => {
    client.close();
    await server.stop();
  });

  it("addMessages sends OpenAI-format tool calls and the call a tool result answers", async () => {
    server.on(ADD_MESSAGES, () => ok(AddMessagesResponseSchema, {}));
    await client.addMessages(THREAD_ID, OPENAI_CHAT);
    const [user, read, readResult, write, writeResult] = decode(AddMessagesRequestSchema, server.calls[0]!).messages;
    assert.equal(user!.toolCalls.length, 0);
    assert.equal(read!.content, "", "null content is sent empty");
    assert.deepEqual(
      read!.toolCalls.map((c) => [c.id, c.name, c.arguments]),
      [["call_a", "get_order_details", '{"order_id": "#W7"}']],
    );
    assert.equal(readResult!.role, Role.TOOL);
    assert.equal(readResult!.toolCallId, "call_a");
    assert.equal(readResult!.name, "");
    assert.deepEqual(JSON.parse(write!.toolCalls[0]!.arguments), { order_id: "#W7", reason: "twice" });
    assert.equal(write!.content, "Cancelling it.");
    assert.deepEqual([writeResult!.toolCallId, writeResult!.name], ["call_b", "cancel_pending_order"]);
  });

  it("a tool call without the tool's name is refused before any call", async () => {
    await assert.rejects(
      client.addMessages(THREAD_ID, [
        ["user", "hi"],
        { role: "assistant", tool_calls: [{ id: "c", function: {} } as never] },
      ]),
      /messages\[1\]\.tool_calls\[0\] needs an id and the tool's name/,
    );
    assert.equal(server.calls.length, 0);
  });

  it("toOpenAI gives a message back in OpenAI's chat format", () => {
    const called = create(MessageSchema, {
      role: Role.ASSISTANT,
      content: "",
      toolCalls: [{ id: "call_a", name: "get_order_details", arguments: '{"order_id": "#W7"}' }],
    });
    assert.deepEqual(toOpenAI(called), {
      role: "assistant",
      content: null,
      tool_calls: [
        { id: "call_a", type: "function", function: { name: "get_order_details", arguments: '{"order_id": "#W7"}' } },
      ],
    });
    const result = create(MessageSchema, {
      role: Role.TOOL,
      content: '{"status": "pending"}',
      toolCallId: "call_a",
      name: "get_order_details",
    });
    assert.deepEqual(toOpenAI(result), {
      role: "tool",
      content: '{"status": "pending"}',
      tool_call_id: "call_a",
      name: "get_order_details",
    });
    assert.deepEqual(toOpenAI(create(MessageSchema, { role: Role.USER, content: "hi" })), {
      role: "user",
      content: "hi",
    });
  });

  it("recordOutcome sends the outcome, score, note and episode, and is repeated on UNAVAILABLE", async () => {
    server.on(RECORD_OUTCOME, (_call, attempt) =>
      attempt < 2
        ? { code: Code.Unavailable, message: "down" }
        : ok(RecordOutcomeResponseSchema, { threadId: THREAD_ID, outcome: Outcome.FAILURE, changed: true }),
    );
    const result = await client.recordOutcome(THREAD_ID, "failure", { score: 0, note: "refund never came", episodeId: "e1" });
    assert.deepEqual(
      { ...result, recordedAt: undefined },
      { threadId: THREAD_ID, episodeId: "", outcome: "failure", changed: true, recordedAt: undefined },
    );
    const sent = server.callsTo(RECORD_OUTCOME).map((c) => decode(RecordOutcomeRequestSchema, c));
    assert.equal(sent.length, 2, "the last outcome stands: repeating it is harmless");
    assert.equal(sent[0]!.outcome, Outcome.FAILURE);
    assert.equal(sent[0]!.score, 0, "a score of 0 is sent, not left unset");
    assert.equal(sent[0]!.note, "refund never came");
    assert.equal(sent[0]!.episodeId, "e1");
    await client.recordOutcome(THREAD_ID, Outcome.PARTIAL);
    const last = decode(RecordOutcomeRequestSchema, server.callsTo(RECORD_OUTCOME)[2]!);
    assert.equal(last.outcome, Outcome.PARTIAL);
    assert.equal(last.score, undefined, "no score: unset");
    await assert.rejects(client.recordOutcome(THREAD_ID, "great" as "success"), /unknown outcome 'great'/);
    assert.equal(server.callsTo(RECORD_OUTCOME).length, 3);
  });

  it("recallProcedures asks for procedures only; recall adds them to episodes when asked", async () => {
    server.on(RECALL, () =>
      ok(RecallResponseSchema, { procedures: [{ procedure: PROCEDURE, relevance: 0.8 }] }),
    );
    const found = await client.recallProcedures("shop", "cancel an order", { limit: 5 });
    assert.equal(found[0]!.procedure!.procedureId, PROCEDURE_ID);
    assert.equal(found[0]!.relevance, 0.8);
    assert.deepEqual(writeActions(found[0]!), ["cancel_pending_order"]);
    const both = await client.recall("shop", "cancel an order", { includeProcedures: true, procedures: 2 });
    assert.equal(both.procedures[0]!.procedure!.goal, PROCEDURE.goal);
    const plain = await client.recall("shop", "cancel an order");
    const [asked, withEpisodes, without] = server.callsTo(RECALL).map((c) => decode(RecallRequestSchema, c));
    assert.deepEqual(asked!.include, [RecallInclude.PROCEDURES]);
    assert.equal(asked!.query, "cancel an order");
    assert.equal(asked!.contextProcedures, 5);
    assert.deepEqual(withEpisodes!.include, [RecallInclude.EPISODES, RecallInclude.PROCEDURES]);
    assert.equal(withEpisodes!.contextProcedures, 2);
    assert.deepEqual(without!.include, [RecallInclude.EPISODES]);
    assert.equal(plain.procedures.length, 1, "what the server answers, as it is");
  });

  it("listProcedures pages, getProcedure reads one; both are repeated on UNAVAILABLE", async () => {
    const flaky = (answer: () => ReturnType<typeof ok>) => (_call: unknown, attempt: number) =>
      attempt < 3 ? { code: Code.Unavailable, message: "down" } : answer();
    server.on(LIST_PROCEDURES, flaky(() => ok(ListProceduresResponseSchema, { procedures: [PROCEDURE], nextPageToken: "p2" })));
    server.on(GET_PROCEDURE, flaky(() => ok(GetProcedureResponseSchema, { procedure: PROCEDURE })));
    const listed = await client.listProcedures("shop", { pageSize: 10, pageToken: "p1" });
    assert.deepEqual([...listed].map((p: Procedure) => p.procedureId), [PROCEDURE_ID]);
    assert.equal(listed.nextPageToken, "p2");
    const got = await client.getProcedure("shop", PROCEDURE_ID);
    assert.equal(got.successCount, 2);
    assert.equal(outcomeName(got.sources[0]!.outcome), "success");
    const request = decode(ListProceduresRequestSchema, server.callsTo(LIST_PROCEDURES)[0]!);
    assert.deepEqual([request.dataset, request.pageSize, request.pageToken], ["shop", 10, "p1"]);
    const get = decode(GetProcedureRequestSchema, server.callsTo(GET_PROCEDURE)[0]!);
    assert.deepEqual([get.dataset, get.procedureId], ["shop", PROCEDURE_ID]);
    assert.equal(server.callsTo(LIST_PROCEDURES).length, 3);
    assert.equal(server.callsTo(GET_PROCEDURE).length, 3);
  });

  it("deleteProcedure returns the stretches forgotten, is not repeated, and NOT_FOUND keeps its class", async () => {
    server.on(DELETE_PROCEDURE, (_call, attempt) =>
      attempt === 1
        ? ok(DeleteProcedureResponseSchema, { forgottenSources: 3 })
        : attempt === 2
          ? { code: Code.Unavailable, message: "down" }
          : { code: Code.NotFound, message: `procedure ${PROCEDURE_ID} does not exist` },
    );
    assert.equal(await client.deleteProcedure("shop", PROCEDURE_ID), 3);
    const sent = decode(DeleteProcedureRequestSchema, server.callsTo(DELETE_PROCEDURE)[0]!);
    assert.deepEqual([sent.dataset, sent.procedureId], ["shop", PROCEDURE_ID]);
    await assert.rejects(client.deleteProcedure("shop", PROCEDURE_ID), UnavailableError);
    assert.equal(server.callsTo(DELETE_PROCEDURE).length, 2, "an admin deletion is not repeated");
    await assert.rejects(client.deleteProcedure("shop", PROCEDURE_ID), NotFoundError);
  });
});
