/**
 * The client's GenAI spans against the real suite (issue 47): `episodic up` writing its
 * spans to a file (EPISODIC_TRACE_FILE), an application tracing with an in-memory exporter.
 * The recall is a `search_memory` CLIENT span naming the episode it returned, and the
 * Recall service's span is its child — one trace across the processes; a write's server
 * span is a child of the application's span. The names match Python's `episodic.semconv`.
 *
 * Skips with a message when no episodic CLI is found, or when the suite is one already
 * running (its span file is not ours to read).
 */

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { context, trace, SpanKind } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";

import { EpisodicClient } from "../../src/index.js";
import { GENAI, MEMORY_RPCS } from "../../src/tracing.js";
import { runPython, runningSuiteConfigured, skipReason, startSuite } from "./suite.js";
import type { Suite } from "./suite.js";

const log = (line: string) => console.log(`[tracing] ${line}`);

interface FileSpan {
  trace_id: string;
  span_id: string;
  parent_span_id: string | null;
  name: string;
  kind: string;
  attributes: Record<string, unknown>;
}

function readSpans(path: string): FileSpan[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line.trim())
    .map((line) => JSON.parse(line) as FileSpan);
}

/** The one SERVER span `name` of trace `traceId`, polled for until `timeoutMs` (the
 * services write their spans when they end, after the answer). */
async function serverSpan(path: string, name: string, traceId: string, timeoutMs = 20_000): Promise<FileSpan> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = readSpans(path).filter((s) => s.kind === "SERVER" && s.name === name && s.trace_id === traceId);
    if (found.length) {
      assert.equal(found.length, 1, JSON.stringify(found));
      return found[0]!;
    }
    if (Date.now() > deadline) throw new Error(`no SERVER span ${name} of trace ${traceId} in ${path} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const skip = skipReason() ?? (runningSuiteConfigured() ? "a running suite (EPISODIC_*_ADDRESS): its span file is not ours" : undefined);

describe("client spans against episodic up", { skip, timeout: 300_000 }, () => {
  let suite: Suite;
  let memory: EpisodicClient;
  let spansDir: string;
  let spansFile: string;
  const dataset = `ts_trace_${randomUUID().slice(0, 8)}`;
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

  before(async () => {
    spansDir = mkdtempSync(join(tmpdir(), "episodic-ts-spans-"));
    spansFile = join(spansDir, "spans.jsonl");
    suite = await startSuite((line) => console.log(line), { EPISODIC_TRACE_FILE: spansFile });
    memory = new EpisodicClient({ ...suite.addresses, env: {} });
    await memory.waitReady();
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    trace.setGlobalTracerProvider(provider);
  });

  after(async () => {
    trace.disable();
    context.disable();
    await provider.shutdown();
    memory?.close();
    await suite?.stop();
    if (spansDir) rmSync(spansDir, { recursive: true, force: true });
  });

  it("recall is a search_memory span naming the episode, parent of the Recall service's span", async () => {
    const agent = trace.getTracer("agent");
    const { turn, episodeId } = await agent.startActiveSpan("agent turn", async (turn) => {
      const thread = await memory.startThread(dataset);
      await memory.addMessages(thread.threadId, [
        ["user", "We agreed on the Pro tier for project Atlas."],
        ["assistant", "Noted: Pro tier for Atlas, billed yearly."],
      ]);
      await memory.endThread(thread.threadId);
      const episode = await memory.waitForEpisode(thread.threadId, { timeoutMs: 120_000 });
      const found = await memory.recall(dataset, "Pro tier for Atlas", { limit: 3 });
      assert.deepEqual(
        found.episodes.map((s) => s.episode?.episodeId),
        [episode.episodeId],
      );
      turn.end();
      return { turn, episodeId: episode.episodeId };
    });

    const spans = exporter.getFinishedSpans();
    const searches = spans.filter((s) => s.attributes[GENAI.OPERATION_NAME] === "search_memory");
    // waitForEpisode may read episodes too (search_memory as well): the recall is the last.
    const search = searches.at(-1)!;
    log(`client spans: ${spans.map((s) => s.name).join(", ")}`);
    assert.equal(search.name, "search_memory");
    assert.equal(search.kind, SpanKind.CLIENT);
    assert.equal(search.parentSpanContext?.spanId, turn.spanContext().spanId);
    assert.equal(search.attributes[GENAI.MEMORY_STORE_ID], dataset);
    assert.equal(search.attributes[GENAI.RETRIEVAL_TOP_K], 3);
    assert.equal(search.attributes[GENAI.MEMORY_RECORD_COUNT], 1);
    assert.equal(search.attributes[GENAI.MEMORY_RECORD_ID], episodeId);
    assert.deepEqual(search.attributes[GENAI.RECORD_IDS], [episodeId]);
    assert.equal(search.attributes[GENAI.SERVER_PORT], Number(suite.addresses.recall.split(":").at(-1)));
    assert.ok(!(GENAI.MEMORY_QUERY_TEXT in search.attributes) && !(GENAI.MEMORY_RECORDS in search.attributes));

    const traceId = turn.spanContext().traceId;
    const served = await serverSpan(spansFile, "/episodic.v1.RecallService/Recall", traceId);
    assert.equal(served.parent_span_id, search.spanContext().spanId);
    const created = await serverSpan(spansFile, "/episodic.v1.IngestService/CreateThread", traceId);
    assert.equal(created.parent_span_id, turn.spanContext().spanId);
  });

  it("spells the names and maps the RPCs as Python's episodic.semconv does", () => {
    const python = runPython(
      "import json; from episodic import semconv as s; print(json.dumps({" +
        "'names': {k: getattr(s, k) for k in " +
        JSON.stringify(Object.keys(GENAI)).replace(/"/g, "'") +
        "}, 'rpcs': {k: v.operation for k, v in s.MEMORY_RPCS.items()}}))",
      [],
      suite.addresses,
    );
    if (python === undefined) return; // no interpreter beside the CLI
    const theirs = JSON.parse(python) as { names: Record<string, string>; rpcs: Record<string, string> };
    assert.deepEqual(theirs.names, { ...GENAI });
    assert.deepEqual(
      theirs.rpcs,
      Object.fromEntries(Object.entries(MEMORY_RPCS).map(([k, v]) => [k, v.operation])),
    );
  });
});
