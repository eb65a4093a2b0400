#!/usr/bin/env node
// Fails when the committed src/gen differs from what `buf generate` produces now (stale
// after a proto change, or edited by hand): regenerates into a temporary directory and
// compares every file.
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";

import { PACKAGE_DIR, generate } from "./generate.mjs";

function files(dir) {
  const out = [];
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const path = join(d, name);
      if (statSync(path).isDirectory()) walk(path);
      else out.push(relative(dir, path));
    }
  };
  walk(dir);
  return out.sort();
}

function clip(line) {
  if (line === undefined) return "<end of file>";
  return line.length > 160 ? `${line.slice(0, 157)}...` : line;
}

function firstDifference(a, b) {
  const left = a.split("\n");
  const right = b.split("\n");
  let first = -1;
  let count = 0;
  for (let i = 0; i < Math.max(left.length, right.length); i++) {
    if (left[i] !== right[i]) {
      if (first < 0) first = i;
      count++;
    }
  }
  if (first < 0) return "";
  return (
    `line ${first + 1} (${count} line(s) differ):\n` +
    `      committed: ${clip(left[first])}\n      generated: ${clip(right[first])}`
  );
}

const committedDir = join(PACKAGE_DIR, "src", "gen");
const tmp = mkdtempSync(join(tmpdir(), "episodic-gen-"));
try {
  generate(tmp);
  const freshDir = join(tmp, "clients", "typescript", "src", "gen");
  const committed = files(committedDir);
  const fresh = files(freshDir);
  const problems = [];
  for (const f of fresh.filter((f) => !committed.includes(f))) problems.push(`missing: src/gen/${f}`);
  for (const f of committed.filter((f) => !fresh.includes(f))) problems.push(`stale (no longer generated): src/gen/${f}`);
  for (const f of fresh.filter((f) => committed.includes(f))) {
    const a = readFileSync(join(committedDir, f), "utf8");
    const b = readFileSync(join(freshDir, f), "utf8");
    if (a !== b) problems.push(`differs: src/gen/${f} at ${firstDifference(a, b)}`);
  }
  if (problems.length) {
    console.error(`src/gen is out of date with proto/ (run \`npm run generate\`):\n  ${problems.join("\n  ")}`);
    process.exitCode = 1;
  } else {
    console.log(`src/gen is up to date (${fresh.length} files match buf generate).`);
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
