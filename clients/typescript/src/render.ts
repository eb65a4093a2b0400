/**
 * Episodes as prompt text, with time the model can reason about — a port of the Python
 * SDK's `episodic.render` that produces exactly the same text.
 *
 * `timeline` (default) — each episode headed by a relative and an absolute timestamp and
 * its thread, oldest first so the model reads events in the order they happened:
 *
 *     [3 days ago, 2026-05-14 14:22 UTC, thread "billing-q2"]
 *     User confirmed the new pricing tier (Pro at $29) for project Atlas.
 *
 * `past_conversation` — the seed's plain form, in the order given (best first):
 *
 *     Past conversation 1 (2026-05-14):
 *     User confirmed the new pricing tier (Pro at $29) for project Atlas.
 */

import type { Timestamp } from "@bufbuild/protobuf/wkt";

export type RenderStyle = "timeline" | "past_conversation";

/** A point in time: a JavaScript Date or a protobuf Timestamp (as on the wire). */
export type TimeLike = Date | Timestamp;

/** What rendering reads from an episode: the generated `Episode` fits, and so does any
 * plain object with these fields. */
export interface EpisodeLike {
  summary?: string | undefined;
  threadLabel?: string | undefined;
  keyLearnings?: readonly string[] | undefined;
  endedAt?: TimeLike | undefined;
}

/** A scored episode (the generated `ScoredEpisode` fits): rendering reads its `episode`. */
export interface ScoredEpisodeLike {
  episode?: EpisodeLike | undefined;
}

export type RenderItem = EpisodeLike | ScoredEpisodeLike;

export interface RenderOptions {
  /** The time relative timestamps are measured from (default: now; pass the recall's
   * `asOf` when replaying history). */
  now?: TimeLike | undefined;
  style?: RenderStyle;
  /** Add the key learnings as `- ` bullets under each summary. */
  keyLearnings?: boolean;
}

// -- time, with Python's arithmetic (microsecond resolution, float floor division)

function micros(value: TimeLike): number {
  if (value instanceof Date) return value.getTime() * 1000;
  // A Timestamp: Python's ToDatetime keeps microseconds (nanoseconds are truncated).
  return Number(value.seconds) * 1_000_000 + Math.floor(value.nanos / 1000);
}

/** Python's `float // float`, which is not always `Math.floor(a / b)`. */
function floorDiv(a: number, b: number): number {
  let mod = a % b; // C fmod, like Python's float_floor_div
  let div = (a - mod) / b;
  if (mod !== 0 && b < 0 !== mod < 0) {
    mod += b;
    div -= 1;
  }
  if (div === 0) return 0;
  let floored = Math.floor(div);
  if (div - floored > 0.5) floored += 1;
  return floored;
}

function plural(n: number, unit: string): string {
  return `${n} ${unit}${n === 1 ? "" : "s"}`;
}

/**
 * `when` relative to `now` in words: "just now", "5 minutes ago", "2 hours ago",
 * "yesterday", "3 days ago", "2 weeks ago", "4 months ago", "2 years ago" (and "in …" for a
 * time after `now`, e.g. when rendering for an earlier `asOf`).
 */
export function relativeTime(when: TimeLike, now?: TimeLike): string {
  const nowMicros = now === undefined ? Date.now() * 1000 : micros(now);
  let seconds = (nowMicros - micros(when)) / 1_000_000;
  const future = seconds < 0;
  seconds = Math.abs(seconds);
  if (seconds < 60) return "just now";
  const minutes = seconds / 60;
  const hours = seconds / 3600;
  const days = seconds / 86400;
  let text: string;
  if (minutes < 60) {
    text = plural(Math.trunc(minutes), "minute");
  } else if (hours < 24) {
    text = plural(Math.trunc(hours), "hour");
  } else if (days < 2 && !future) {
    return "yesterday";
  } else if (days < 14) {
    text = plural(Math.trunc(days), "day");
  } else if (days < 60) {
    text = plural(floorDiv(days, 7), "week");
  } else if (days < 730) {
    text = plural(floorDiv(days, 30.44), "month");
  } else {
    text = plural(floorDiv(days, 365.25), "year");
  }
  return future ? `in ${text}` : `${text} ago`;
}

function utcDate(value: TimeLike): Date {
  return new Date(Math.floor(micros(value) / 1000));
}

function pad(n: number, width = 2): string {
  return String(n).padStart(width, "0");
}

function isoDay(d: Date): string {
  return `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
}

/** `2026-05-14 14:22 UTC`. */
export function absoluteTime(when: TimeLike): string {
  const d = utcDate(when);
  return `${isoDay(d)} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())} UTC`;
}

// -- episodes

// Python's str.strip(): the characters str.isspace() accepts, which differ from JS trim().
const PY_SPACE = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const PY_STRIP = new RegExp(`^[${PY_SPACE}]+|[${PY_SPACE}]+$`, "g");

function strip(text: string | undefined): string {
  return (text ?? "").replace(PY_STRIP, "");
}

function episodeOf(item: RenderItem): EpisodeLike {
  // A ScoredEpisode carries the episode; an Episode is one.
  if ("episode" in item) return item.episode ?? {};
  return item as EpisodeLike;
}

function endedAt(episode: EpisodeLike): TimeLike | undefined {
  return episode.endedAt ?? undefined;
}

/**
 * One episode in the timeline style: a header with relative and absolute time and the
 * thread's label (when it has one), then the summary (and its key learnings as bullets
 * when `keyLearnings`).
 */
export function renderEpisode(
  item: RenderItem,
  options: { now?: TimeLike | undefined; keyLearnings?: boolean } = {},
): string {
  const episode = episodeOf(item);
  const ended = endedAt(episode);
  const parts: string[] = [];
  if (ended !== undefined) parts.push(relativeTime(ended, options.now), absoluteTime(ended));
  const label = episode.threadLabel ?? "";
  if (label) parts.push(`thread "${label}"`);
  const header = parts.length ? `[${parts.join(", ")}]` : "";
  const body = strip(episode.summary);
  const lines = [header, body].filter((line) => line);
  if (options.keyLearnings) lines.push(...(episode.keyLearnings ?? []).map((k) => `- ${k}`));
  return lines.join("\n");
}

function itemsOf(
  episodes: Iterable<RenderItem> | { episodes: Iterable<RenderItem> },
): RenderItem[] {
  if (Symbol.iterator in episodes) return [...(episodes as Iterable<RenderItem>)];
  return [...(episodes as { episodes: Iterable<RenderItem> }).episodes];
}

/**
 * Renders episodes (generated `Episode`/`ScoredEpisode` messages, a `RecallResult`, or plain
 * objects with `summary`, `threadLabel`, `keyLearnings`, `endedAt`) as one prompt block.
 *
 * `style: "timeline"` sorts the episodes oldest first and heads each with
 * `[3 days ago, 2026-05-14 14:22 UTC, thread "billing-q2"]`; `style: "past_conversation"`
 * keeps the given order and writes the seed's `Past conversation N (YYYY-MM-DD):`.
 * Episodes are separated by a blank line; no episodes render as an empty string.
 */
export function renderEpisodes(
  episodes: Iterable<RenderItem> | { episodes: Iterable<RenderItem> },
  options: RenderOptions = {},
): string {
  const items = itemsOf(episodes);
  const style = options.style ?? "timeline";
  const keyLearnings = options.keyLearnings ?? false;
  if (style === "past_conversation") {
    return items
      .map((item, i) => {
        const episode = episodeOf(item);
        const ended = endedAt(episode);
        const day = ended !== undefined ? ` (${isoDay(utcDate(ended))})` : "";
        let block = `Past conversation ${i + 1}${day}:\n${strip(episode.summary)}`;
        if (keyLearnings) block += (episode.keyLearnings ?? []).map((k) => `\n- ${k}`).join("");
        return block;
      })
      .join("\n\n");
  }
  if (style !== "timeline") {
    throw new RangeError(`unknown style '${String(style)}'; use 'timeline' or 'past_conversation'`);
  }
  const key = (item: RenderItem): number => {
    const ended = endedAt(episodeOf(item));
    return ended === undefined ? Number.NEGATIVE_INFINITY : micros(ended);
  };
  // Array.prototype.sort is stable, like Python's sorted().
  const ordered = [...items].sort((a, b) => key(a) - key(b) || 0);
  return ordered.map((item) => renderEpisode(item, { now: options.now, keyLearnings })).join("\n\n");
}

// -- procedures

/** What rendering reads from a procedure step: the generated `ProcedureStep` fits (its
 * `arguments` a list of `{name, source}`), and so does a plain object whose `arguments`
 * maps each name to its source. */
export interface ProcedureStepLike {
  tool?: string | undefined;
  purpose?: string | undefined;
  writes?: boolean | undefined;
  arguments?: readonly { name: string; source: string }[] | Readonly<Record<string, string>> | undefined;
}

/** What rendering reads from a procedure (the generated `Procedure` fits). */
export interface ProcedureLike {
  goal?: string | undefined;
  exampleGoals?: readonly string[] | undefined;
  steps?: readonly ProcedureStepLike[] | undefined;
  successCount?: number | undefined;
  failureCount?: number | undefined;
  partialCount?: number | undefined;
}

/** A procedure with its fit to a query (the generated `ScoredProcedure` fits). */
export interface ScoredProcedureLike {
  procedure?: ProcedureLike | undefined;
  relevance?: number | undefined;
}

export type ProcedureItem = ProcedureLike | ScoredProcedureLike;

export interface RenderProceduresOptions {
  /** The block's first line (default "How this was done before:"; "" for none). */
  heading?: string;
  /** Add the other requests each procedure served ("Also used for: …"). */
  examples?: boolean;
}

const PY_WHITESPACE = new RegExp(`[${PY_SPACE}]+`, "g");

/** Python's `" ".join(text.split())`. */
function squash(text: string | undefined): string {
  return strip((text ?? "").replace(PY_WHITESPACE, " "));
}

/** Python's `f"{x:.2f}"`: toFixed, except that an exact tie rounds to even as Python does
 * (toFixed rounds it up: 0.125 → "0.13", Python "0.12"). */
function fixed2(x: number): string {
  const scaled = x * 200;
  if (Number.isInteger(scaled) && scaled % 2 !== 0 && Number.isInteger(x * 8)) {
    const down = Math.floor(x * 100);
    return ((down % 2 === 0 ? down : down + 1) / 100).toFixed(2);
  }
  return x.toFixed(2);
}

function procedureOf(item: ProcedureItem): ProcedureLike {
  // A ScoredProcedure carries the procedure; a Procedure is one.
  if ("procedure" in item) return item.procedure ?? {};
  return item as ProcedureLike;
}

function argumentsOf(step: ProcedureStepLike): [string, string][] {
  const value = step.arguments ?? [];
  if (Array.isArray(value)) return value.map((a: { name: string; source: string }) => [a.name, a.source]);
  return Object.entries(value as Record<string, string>);
}

/** Where an argument's value came from, in words. */
function sourceWords(source: string): string {
  if (source === "user") return "from the user";
  if (source === "agent") return "chosen by the agent";
  if (source.startsWith("tool:")) return `from ${source.slice(5)}'s result`;
  return source ? `from ${source}` : "from the conversation";
}

function times(n: number, what: string): string {
  return `${what} ${n === 1 ? "once" : n === 2 ? "twice" : `${n} times`}`;
}

function support(procedure: ProcedureLike, relevance: number | undefined): string {
  const parts = [times(procedure.successCount ?? 0, "worked")];
  const partly = procedure.partialCount ?? 0;
  const failed = procedure.failureCount ?? 0;
  if (partly) parts.push(times(partly, "partly worked"));
  if (failed) parts.push(times(failed, "failed"));
  let text = parts.join(", ");
  text = text[0]!.toUpperCase() + text.slice(1);
  if (relevance !== undefined) text += ` (relevance ${fixed2(relevance)})`;
  return `${text}.`;
}

function stepLine(n: number, step: ProcedureStepLike): string {
  const tool = step.tool || "tool";
  let head = `${n}. ${tool}${step.writes ? " (changes something)" : ""}`;
  const purpose = squash(step.purpose);
  // The offline extractor's fallback purpose is the tool's name in words: say it once.
  if (purpose && purpose.toLowerCase().replaceAll(" ", "_") !== tool.toLowerCase()) head += `: ${purpose}`;
  const args = argumentsOf(step)
    .map(([name, source]) => `${name} ${sourceWords(source)}`)
    .join(", ");
  return args ? `${head} [${args}]` : head;
}

/**
 * One procedure (a generated `Procedure`/`ScoredProcedure`, or a plain object like one):
 * `Goal: …` (prefixed `N.` when `number` is given), its support (and relevance when
 * scored), then its numbered steps — Python's `render_procedure`.
 */
export function renderProcedure(
  item: ProcedureItem,
  options: { number?: number; examples?: boolean; indent?: string } = {},
): string {
  const procedure = procedureOf(item);
  const relevance = "procedure" in item ? (item.relevance ?? 0) : undefined;
  const goal = squash(procedure.goal);
  const { number } = options;
  const pad = " ".repeat(number !== undefined ? `${number}. `.length : 0);
  const lines = [number !== undefined ? `${number}. Goal: ${goal}` : `Goal: ${goal}`];
  lines.push(`${pad}${support(procedure, relevance)}`);
  if (options.examples) {
    for (const other of procedure.exampleGoals ?? []) {
      const g = squash(other);
      if (g && g !== goal) lines.push(`${pad}Also used for: ${g}`);
    }
  }
  (procedure.steps ?? []).forEach((step, i) => lines.push(`${pad}${stepLine(i + 1, step)}`));
  const indent = options.indent ?? "";
  return lines.map((line) => indent + line).join("\n");
}

/**
 * Procedures (generated `Procedure`/`ScoredProcedure` messages, a `RecallResult` or
 * `RecallResponse` with procedures, or plain objects like them) as one prompt block, in the
 * order given (a recall's is best first) — exactly the text of the Python SDK's
 * `render_procedures`:
 *
 *     How this was done before:
 *
 *     1. Goal: Please cancel my order #W1, I bought it by mistake
 *        Worked twice, failed once (relevance 0.82).
 *        1. get_order_details [order_id from the user]
 *        2. cancel_pending_order (changes something): Cancelling it. [order_id from the
 *           user, reason chosen by the agent]
 *
 * Each step names its tool, what it was for, whether it changes something, and where each
 * argument's value came from; the values themselves are the past conversation's. No
 * procedures render as an empty string.
 */
export function renderProcedures(
  procedures: Iterable<ProcedureItem> | { procedures: Iterable<ProcedureItem> },
  options: RenderProceduresOptions = {},
): string {
  // A RecallResult is iterable over its episodes: its procedures are a field.
  const items =
    !Array.isArray(procedures) && "procedures" in procedures
      ? [...(procedures as { procedures: Iterable<ProcedureItem> }).procedures]
      : [...(procedures as Iterable<ProcedureItem>)];
  if (!items.length) return "";
  const heading = options.heading ?? "How this was done before:";
  const blocks = items.map((p, i) => renderProcedure(p, { number: i + 1, examples: options.examples ?? false }));
  return (heading ? [heading, ...blocks] : blocks).join("\n\n");
}
