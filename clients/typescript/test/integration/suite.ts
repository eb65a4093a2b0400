/**
 * The suite the integration test talks to: either one already running (any
 * `EPISODIC_<SERVICE>_ADDRESS` set — CI can start it once and share it), or a fresh
 * `episodic up` with a temporary data directory and ports chosen by the services (port 0;
 * the banner says which), stopped with SIGINT as a user would with Ctrl-C.
 */

import { spawn, spawnSync } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { accessSync, constants, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { SERVICES, addressFromEnv } from "../../src/endpoints.js";
import type { ServiceName } from "../../src/endpoints.js";

/** The repository root (clients/typescript/dist/test/integration → four levels up). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../../../..");

const START_TIMEOUT_MS = 180_000;
const STOP_TIMEOUT_MS = 60_000;

export interface Suite {
  addresses: Record<ServiceName, string>;
  /** How the suite was found: "running" or the command started. */
  origin: string;
  /** Stops the suite we started (SIGINT) and resolves with its exit code and output;
   * undefined for a suite that was already running. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null; output: string } | undefined>;
  output(): string;
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(name: string): string | undefined {
  for (const dir of (process.env["PATH"] ?? "").split(delimiter)) {
    if (dir && executable(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

/** The `episodic` CLI: $EPISODIC_CLI (when set, only that), the repository's .venv, or
 * `episodic` on PATH. */
export function findCli(): string | undefined {
  const fromEnv = process.env["EPISODIC_CLI"];
  if (fromEnv) return executable(fromEnv) ? fromEnv : undefined;
  const venv = join(REPO_ROOT, ".venv", "bin", "episodic");
  if (executable(venv)) return venv;
  return onPath("episodic");
}

/** The command that starts the suite, as a shell command line, or undefined when none. */
export function upCommand(): string | undefined {
  const fromEnv = process.env["EPISODIC_UP_COMMAND"];
  if (fromEnv) return fromEnv;
  const cli = findCli();
  return cli ? `'${cli.replace(/'/g, "'\\''")}' up` : undefined;
}

export function runningSuiteConfigured(): boolean {
  return SERVICES.some((s) => process.env[`EPISODIC_${s.toUpperCase()}_ADDRESS`]);
}

/** Why the integration test cannot run here, or undefined when it can. */
export function skipReason(): string | undefined {
  if (runningSuiteConfigured() || upCommand()) return undefined;
  return (
    "episodic CLI not found (" +
    (process.env["EPISODIC_CLI"]
      ? `EPISODIC_CLI=${process.env["EPISODIC_CLI"]} is not executable`
      : "no .venv/bin/episodic in the repository, no `episodic` on PATH") +
    ", EPISODIC_UP_COMMAND unset, no EPISODIC_*_ADDRESS of a running suite): run `make install` " +
    "at the repository root, or set EPISODIC_UP_COMMAND to a command that runs `episodic up`"
  );
}

/** Starts the suite (`extraEnv`: variables for `episodic up` and its services, such as
 * EPISODIC_TRACE_FILE; unused for a suite that is already running). */
export async function startSuite(
  log: (line: string) => void,
  extraEnv: NodeJS.ProcessEnv = {},
): Promise<Suite> {
  if (runningSuiteConfigured()) {
    const addresses = Object.fromEntries(SERVICES.map((s) => [s, addressFromEnv(s)])) as Record<ServiceName, string>;
    return { addresses, origin: "running", stop: async () => undefined, output: () => "" };
  }
  const command = upCommand();
  if (!command) throw new Error(skipReason());
  const dataDir = mkdtempSync(join(tmpdir(), "episodic-ts-it-"));
  const env: NodeJS.ProcessEnv = { ...process.env, ...extraEnv, EPISODIC_DATA_DIR: dataDir };
  for (const s of SERVICES) {
    env[`EPISODIC_${s.toUpperCase()}_PORT`] = "0"; // each service picks a free port
    delete env[`EPISODIC_${s.toUpperCase()}_ADDRESS`];
  }
  // `exec` so that SIGINT reaches episodic itself, not a shell.
  const child: ChildProcess = spawn("/bin/sh", ["-c", `exec ${command}`], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const addresses: Partial<Record<ServiceName, string>> = {};
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
    child.on("exit", (code, signal) => done({ code, signal })),
  );
  const ready = new Promise<void>((resolveReady, rejectReady) => {
    const timer = setTimeout(
      () => rejectReady(new Error(`episodic up was not ready in ${START_TIMEOUT_MS / 1000}s:\n${output}`)),
      START_TIMEOUT_MS,
    );
    let pending = "";
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      pending += chunk.toString();
      const lines = pending.split("\n");
      pending = lines.pop() ?? "";
      for (const line of lines) {
        log(`[episodic up] ${line}`);
        const m = /^\s+(scheduler|ingest|summariser|recall)\s+grpc:\/\/(\S+):(\d+)\s*$/.exec(line);
        if (m) {
          const host = m[2] === "0.0.0.0" || m[2] === "[::]" ? "127.0.0.1" : m[2];
          addresses[m[1] as ServiceName] = `${host}:${m[3]}`;
        }
        if (line.includes("Press Ctrl-C to stop.")) {
          clearTimeout(timer);
          resolveReady();
        }
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      rejectReady(new Error(`episodic up exited (${code ?? signal}) before it was ready:\n${output}`));
    });
  });
  try {
    await ready;
  } catch (err) {
    child.kill("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  const missing = SERVICES.filter((s) => !addresses[s]);
  if (missing.length) throw new Error(`the banner did not name ${missing.join(", ")}:\n${output}`);
  let stopped: ReturnType<Suite["stop"]> | undefined;
  return {
    addresses: addresses as Record<ServiceName, string>,
    origin: command,
    output: () => output,
    stop() {
      stopped ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGINT");
        const timeout = new Promise<"timeout">((r) => setTimeout(() => r("timeout"), STOP_TIMEOUT_MS).unref());
        const result = await Promise.race([exited, timeout]);
        if (result === "timeout") {
          child.kill("SIGKILL");
          await exited;
          rmSync(dataDir, { recursive: true, force: true });
          throw new Error(`episodic up did not stop within ${STOP_TIMEOUT_MS / 1000}s of SIGINT:\n${output}`);
        }
        rmSync(dataDir, { recursive: true, force: true });
        return { ...result, output };
      })();
      return stopped;
    },
  };
}

/** Runs the Python CLI (for the live render parity check); undefined when there is none. */
export function runCli(args: string[], addresses: Record<ServiceName, string>): string | undefined {
  const cli = findCli();
  if (!cli) return undefined;
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const s of SERVICES) env[`EPISODIC_${s.toUpperCase()}_ADDRESS`] = addresses[s];
  const result = spawnSync(cli, args, { env, encoding: "utf8", timeout: 60_000 });
  if (result.status !== 0) throw new Error(`${cli} ${args.join(" ")} failed: ${result.stderr}`);
  return result.stdout;
}

/** Runs a Python snippet with the interpreter beside the episodic CLI (the same install),
 * against the suite's addresses (for the live parity checks of what has no CLI command);
 * undefined when there is no such interpreter. */
export function runPython(code: string, args: string[], addresses: Record<ServiceName, string>): string | undefined {
  const cli = findCli();
  if (!cli) return undefined;
  const python = join(dirname(cli), "python");
  if (!executable(python)) return undefined;
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const s of SERVICES) env[`EPISODIC_${s.toUpperCase()}_ADDRESS`] = addresses[s];
  const result = spawnSync(python, ["-c", code, ...args], { env, encoding: "utf8", timeout: 60_000 });
  if (result.status !== 0) throw new Error(`${python} -c … failed: ${result.stderr}`);
  return result.stdout;
}
