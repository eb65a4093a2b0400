#!/usr/bin/env node
// Per-call latency of the TypeScript client against a RUNNING suite (addresses from
// EPISODIC_*_ADDRESS / _PORT, like the SDK): N sequential Recall and AddMessages calls after
// a warm-up, on one connection per service. Prints p50/p99 (and mean, min, max) in ms, and
// the client process's own CPU time per call.
//
//   node bench/latency.mjs [--n 500] [--warmup 50] [--json]
//
// bench/latency.py runs the same workload with the Python SDK; bench/compare.mjs runs both
// against one `episodic up` in the same run.
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";

import { EpisodicClient } from "../dist/src/index.js";

const { values } = parseArgs({
  options: {
    n: { type: "string", default: "500" },
    warmup: { type: "string", default: "50" },
    json: { type: "boolean", default: false },
  },
});
const N = Number(values.n);
const WARMUP = Number(values.warmup);

function stats(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  // Nearest rank, as bench/latency.py computes it.
  const pct = (p) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
  const mean = sorted.reduce((a, b) => a + b, 0) / sorted.length;
  return {
    n: sorted.length,
    p50: pct(50),
    p99: pct(99),
    mean,
    min: sorted[0],
    max: sorted.at(-1),
    cpu_ms_per_call: samples.cpuMsPerCall,
  };
}

async function timed(n, fn) {
  const out = [];
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    await fn(i);
    out.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const cpu = process.cpuUsage(cpu0);
  out.cpuMsPerCall = (cpu.user + cpu.system) / 1000 / n; // the client's own CPU time
  return out;
}

const memory = new EpisodicClient();
try {
  await memory.waitReady(["ingest", "recall", "scheduler", "summariser"]);
  // One summarised episode to recall, the same content as bench/latency.py uses.
  const dataset = `bench_ts_${randomUUID().slice(0, 8)}`;
  const thread = await memory.startThread(dataset, { label: "bench" });
  await memory.addMessages(thread.threadId, [
    ["user", "I need a family car under $30k, SUVs feel too big."],
    ["assistant", "The Toyota Corolla Hybrid fits city commuting and your budget."],
  ]);
  await memory.endThread(thread.threadId);
  await memory.waitForEpisode(thread.threadId, { timeoutMs: 120_000 });
  const writes = await memory.startThread(dataset, { label: "bench-writes" });

  const recall = () => memory.recall(dataset, "car recommendations");
  const add = (i) => memory.addMessages(writes.threadId, [["user", `benchmark message ${i}`]]);
  await timed(WARMUP, recall);
  await timed(WARMUP, add);
  const result = {
    client: `typescript (node ${process.version}, @connectrpc/connect-node)`,
    recall: stats(await timed(N, recall)),
    add_messages: stats(await timed(N, add)),
  };
  if (values.json) {
    console.log(JSON.stringify(result));
  } else {
    console.log(result.client);
    for (const [name, s] of [["Recall", result.recall], ["AddMessages", result.add_messages]]) {
      console.log(
        `  ${name.padEnd(12)} n=${s.n}  p50 ${s.p50.toFixed(2)} ms  p99 ${s.p99.toFixed(2)} ms  ` +
          `mean ${s.mean.toFixed(2)}  min ${s.min.toFixed(2)}  max ${s.max.toFixed(2)}  ` +
          `client CPU ${s.cpu_ms_per_call.toFixed(3)} ms/call`,
      );
    }
  }
} finally {
  memory.close();
}
