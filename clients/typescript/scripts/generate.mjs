#!/usr/bin/env node
// Regenerates src/gen from the contracts with `buf generate` and the repository's
// buf.gen.yaml (run from the repository root, where buf.yaml and buf.gen.yaml live).
//
//   node scripts/generate.mjs            write into src/gen (what `npm run generate` does)
//   node scripts/generate.mjs --out DIR  write into DIR/clients/typescript/src/gen instead
//
// buf: $BUF when set, else the pinned @bufbuild/buf from node_modules (no global tools).
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const PACKAGE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const REPO_ROOT = resolve(PACKAGE_DIR, "../..");

export function bufCommand() {
  if (process.env.BUF) return process.env.BUF;
  const local = join(PACKAGE_DIR, "node_modules", ".bin", process.platform === "win32" ? "buf.cmd" : "buf");
  if (existsSync(local)) return local;
  throw new Error("buf not found: run `npm ci` in clients/typescript (or set BUF=/path/to/buf)");
}

export function generate(outDir) {
  const plugin = join(PACKAGE_DIR, "node_modules", ".bin", "protoc-gen-es");
  if (!existsSync(plugin)) {
    throw new Error("protoc-gen-es not found: run `npm ci` in clients/typescript");
  }
  const args = ["generate", "--template", "buf.gen.yaml"];
  if (outDir) args.push("--output", outDir);
  const result = spawnSync(bufCommand(), args, { cwd: REPO_ROOT, stdio: "inherit" });
  if (result.error) throw result.error;
  if (result.status !== 0) throw new Error(`buf ${args.join(" ")} exited with ${result.status}`);
}

if (resolve(process.argv[1] ?? "") === fileURLToPath(import.meta.url)) {
  const i = process.argv.indexOf("--out");
  try {
    generate(i > 0 ? resolve(process.argv[i + 1]) : undefined);
  } catch (err) {
    console.error(`generate: ${err.message}`);
    process.exit(1);
  }
}
