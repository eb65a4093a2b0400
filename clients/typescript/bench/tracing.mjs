#!/usr/bin/env node
// What the client's GenAI spans cost on the caller's side (issue 47): N sequential Recall
// calls against the unit tests' fake server (in this process, so only the client's work
// differs), in alternating rounds with no tracer provider registered (the interceptor
// passes through) and with one (BasicTracerProvider, a SimpleSpanProcessor into an
// InMemorySpanExporter: a span and a traceparent per call). Prints each mode's mean and
// p50 per call and the ratio traced / untraced, measured in the same run.
//
//   npm run build && node bench/tracing.mjs [--n 2000] [--rounds 5]
import { parseArgs } from "node:util";

import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";

import { EpisodicClient } from "../dist/src/index.js";
import { RecallResponseSchema } from "../dist/src/gen/episodic/v1/recall_service_pb.js";
import { FakeServer, ok } from "../dist/test/unit/fake-server.js";

const { values } = parseArgs({
  options: { n: { type: "string", default: "2000" }, rounds: { type: "string", default: "5" } },
});
const N = Number(values.n);
const ROUNDS = Number(values.rounds);

const server = new FakeServer();
const address = await server.start();
const answer = ok(RecallResponseSchema, {
  episodes: { episodes: [{ episode: { episodeId: "e1", dataset: "bench", summary: "s" }, relevanceScore: 0.5 }] },
});
server.on("/episodic.v1.RecallService/Recall", () => answer);
const client = new EpisodicClient({ recall: address, env: {} });
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

async function round(traced) {
  if (traced) trace.setGlobalTracerProvider(provider);
  else trace.disable();
  const samples = [];
  for (let i = 0; i < N; i++) {
    const t = process.hrtime.bigint();
    await client.recall("bench", "query", { limit: 3 });
    samples.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  exporter.reset();
  server.calls.length = 0;
  return samples;
}

await round(false); // warm-up of both paths
await round(true);
const all = { off: [], on: [] };
for (let r = 0; r < ROUNDS; r++) {
  all.off.push(...(await round(false)));
  all.on.push(...(await round(true)));
}
const summary = (s) => {
  const sorted = [...s].sort((a, b) => a - b);
  return { mean: s.reduce((a, b) => a + b, 0) / s.length, p50: sorted[Math.floor(sorted.length / 2)] };
};
const off = summary(all.off);
const on = summary(all.on);
console.log(`recall × ${N * ROUNDS} per mode, ${ROUNDS} alternating rounds, fake server in-process`);
console.log(`no provider : mean ${off.mean.toFixed(3)} ms  p50 ${off.p50.toFixed(3)} ms`);
console.log(`traced      : mean ${on.mean.toFixed(3)} ms  p50 ${on.p50.toFixed(3)} ms`);
console.log(`ratio traced/untraced: mean ${(on.mean / off.mean).toFixed(3)}  p50 ${(on.p50 / off.p50).toFixed(3)}`);
client.close();
await server.stop();
