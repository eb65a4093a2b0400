#!/usr/bin/env node
// TypeScript vs Python per-call latency against the SAME running suite, in the same run:
// starts `episodic up` (or uses the suite named by EPISODIC_*_ADDRESS), then alternates
// bench/latency.mjs and bench/latency.py for several rounds (the machine is noisy; each
// round starts a fresh process and its own dataset), and prints both side by side.
//
//   npm run build && node bench/compare.mjs [--rounds 3] [--n 500] [--warmup 50]
//   PYTHON=/path/to/python (default: the repository's .venv/bin/python)
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { REPO_ROOT, startSuite } from "../dist/test/integration/suite.js";

const here = dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "3" },
    n: { type: "string", default: "500" },
    warmup: { type: "string", default: "50" },
  },
});
const python = process.env.PYTHON ?? join(REPO_ROOT, ".venv", "bin", "python");
if (!existsSync(python)) throw new Error(`no Python at ${python} (set PYTHON)`);

const suite = await startSuite(() => undefined);
const env = { ...process.env };
for (const [service, address] of Object.entries(suite.addresses)) {
  env[`EPISODIC_${service.toUpperCase()}_ADDRESS`] = address;
}
const args = ["--n", values.n, "--warmup", values.warmup, "--json"];
const runs = { typescript: [], python: [] };
try {
  for (let round = 1; round <= Number(values.rounds); round++) {
    for (const [name, cmd, script] of [
      ["typescript", process.execPath, join(here, "latency.mjs")],
      ["python", python, join(here, "latency.py")],
    ]) {
      const r = spawnSync(cmd, [script, ...args], { env, encoding: "utf8" });
      if (r.status !== 0) throw new Error(`${name} failed:\n${r.stdout}\n${r.stderr}`);
      const result = JSON.parse(r.stdout.trim().split("\n").at(-1));
      runs[name].push(result);
      const f = (s) =>
        `p50 ${s.p50.toFixed(2)} / p99 ${s.p99.toFixed(2)} ms (cpu ${s.cpu_ms_per_call.toFixed(2)})`;
      console.log(`round ${round} ${name.padEnd(10)} Recall ${f(result.recall)}   AddMessages ${f(result.add_messages)}`);
    }
  }
} finally {
  const stopped = await suite.stop();
  if (stopped && stopped.code !== 0) console.error(`episodic up exited with ${stopped.code}`);
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`\nmedian over ${values.rounds} rounds of n=${values.n} sequential calls (ms):`);
console.log(
  "client      Recall p50  Recall p99  Recall cpu  AddMessages p50  AddMessages p99  AddMessages cpu",
);
for (const [name, rs] of Object.entries(runs)) {
  const m = (call, p, w) => median(rs.map((r) => r[call][p])).toFixed(p.startsWith("cpu") ? 3 : 2).padStart(w);
  console.log(
    `${name.padEnd(10)}  ${m("recall", "p50", 10)}  ${m("recall", "p99", 10)}  ${m("recall", "cpu_ms_per_call", 10)}  ` +
      `${m("add_messages", "p50", 15)}  ${m("add_messages", "p99", 15)}  ${m("add_messages", "cpu_ms_per_call", 15)}`,
  );
}
console.log("(cpu: the client process's own CPU time per call, ms)");
