/**
 * A port of the Python SDK's tests/sdk/test_render.py: the TypeScript renderer must produce
 * exactly the same text (parity check).
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";

import {
  EpisodeSchema,
  ProcedureSchema,
  ScoredEpisodeSchema,
  ScoredProcedureSchema,
} from "../../src/gen/episodic/v1/episode_pb.js";
import type { Episode, Procedure } from "../../src/gen/episodic/v1/episode_pb.js";
import { RecallResponseSchema } from "../../src/gen/episodic/v1/recall_service_pb.js";
import { absoluteTime, relativeTime, renderEpisodes, renderProcedures } from "../../src/render.js";

const NOW = new Date(Date.UTC(2026, 4, 17, 10, 10));
const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

function ago(ms: number): Date {
  return new Date(NOW.getTime() - ms);
}

function episode(summary: string, ended: Date, label = "", learnings: string[] = []): Episode {
  const at = timestampFromDate(ended);
  return create(EpisodeSchema, {
    episodeId: "e",
    threadId: "t",
    dataset: "ds",
    summary,
    keyLearnings: learnings,
    eventType: "conversation",
    actor: "user",
    messageCount: 2n,
    startSequence: 1n,
    endSequence: 2n,
    startedAt: at,
    endedAt: at,
    createdAt: at,
    updatedAt: at,
    threadLabel: label,
  });
}

describe("relativeTime", () => {
  const cases: [number, string][] = [
    [5 * SECOND, "just now"],
    [1 * MINUTE, "1 minute ago"],
    [59 * MINUTE, "59 minutes ago"],
    [2 * HOUR, "2 hours ago"],
    [30 * HOUR, "yesterday"],
    [3 * DAY, "3 days ago"],
    [15 * DAY, "2 weeks ago"],
    [95 * DAY, "3 months ago"],
    [800 * DAY, "2 years ago"],
    [-5 * HOUR, "in 5 hours"],
    [-3 * DAY, "in 3 days"],
  ];
  for (const [delta, text] of cases) {
    it(`${delta} ms before now is "${text}"`, () => {
      assert.equal(relativeTime(ago(delta), NOW), text);
    });
  }

  it("accepts protobuf Timestamps for both times", () => {
    assert.equal(relativeTime(timestampFromDate(ago(3 * DAY)), timestampFromDate(NOW)), "3 days ago");
  });

  it("floors months and years like Python's float floor division", () => {
    // 517.48 days: Python's 517.48 // 30.44 is 16.0 although 517.48 / 30.44 rounds to 17.0.
    assert.equal(relativeTime(ago(44_710_272 * SECOND), NOW), "16 months ago");
    assert.equal(relativeTime(ago(730.5 * DAY), NOW), "2 years ago");
  });
});

describe("absoluteTime", () => {
  it("is UTC", () => {
    assert.equal(absoluteTime(new Date("2026-05-14T16:22:00+02:00")), "2026-05-14 14:22 UTC");
    assert.equal(absoluteTime(new Date("2026-05-14T14:22:00Z")), "2026-05-14 14:22 UTC");
    assert.equal(absoluteTime(timestampFromDate(new Date("2026-05-14T14:22:59.999Z"))), "2026-05-14 14:22 UTC");
  });
});

describe("renderEpisodes", () => {
  it("timeline is chronological with relative and absolute time", () => {
    const recent = episode("Agent escalated invoice #42 to finance.", ago(2 * HOUR), "support-#412");
    const older = episode(
      "User confirmed the Pro tier at $29.",
      new Date(Date.UTC(2026, 4, 14, 14, 22)),
      "billing-q2",
      ["user chose Pro"],
    );
    const scored = [
      create(ScoredEpisodeSchema, { episode: recent, relevanceScore: 0.9, similarity: 0.8, recency: 0.9 }),
      create(ScoredEpisodeSchema, { episode: older, relevanceScore: 0.5, similarity: 0.6, recency: 0.2 }),
    ];
    assert.equal(
      renderEpisodes(scored, { now: NOW }),
      '[2 days ago, 2026-05-14 14:22 UTC, thread "billing-q2"]\n' +
        "User confirmed the Pro tier at $29.\n\n" +
        '[2 hours ago, 2026-05-17 08:10 UTC, thread "support-#412"]\n' +
        "Agent escalated invoice #42 to finance.",
    );
    const withLearnings = renderEpisodes([older], { now: NOW, keyLearnings: true });
    assert.ok(withLearnings.endsWith("User confirmed the Pro tier at $29.\n- user chose Pro"), withLearnings);
    const unlabelled = renderEpisodes([{ ...older, threadLabel: "" }], { now: NOW });
    assert.ok(unlabelled.startsWith("[2 days ago, 2026-05-14 14:22 UTC]\n"), unlabelled);
  });

  it("past_conversation keeps the given order", () => {
    const a = episode("First summary.", new Date(Date.UTC(2026, 4, 1)));
    const b = episode("Second summary.", new Date(Date.UTC(2026, 3, 2)));
    assert.equal(
      renderEpisodes([a, b], { style: "past_conversation" }),
      "Past conversation 1 (2026-05-01):\nFirst summary.\n\n" +
        "Past conversation 2 (2026-04-02):\nSecond summary.",
    );
    assert.equal(renderEpisodes([], { style: "past_conversation" }), "");
    assert.throws(
      () => renderEpisodes([a], { style: "other" as "timeline" }),
      /unknown style 'other'; use 'timeline' or 'past_conversation'/,
    );
  });

  it("renders wire ScoredEpisodes", () => {
    const message = create(ScoredEpisodeSchema, {
      episode: create(EpisodeSchema, {
        summary: "From the wire.",
        threadLabel: "x",
        endedAt: timestampFromDate(ago(3 * DAY)),
      }),
    });
    assert.equal(
      renderEpisodes([message], { now: NOW }),
      '[3 days ago, 2026-05-14 10:10 UTC, thread "x"]\nFrom the wire.',
    );
  });

  // Beyond the Python tests: details where JavaScript differs from Python by default.
  it("accepts a RecallResult-like object, plain objects, and episodes without a time", () => {
    const result = { episodes: [create(ScoredEpisodeSchema, {})], episodeCount: 1 };
    assert.equal(renderEpisodes(result, { now: NOW }), "");
    assert.equal(
      renderEpisodes([{ summary: " Plain. ", endedAt: ago(2 * DAY) }, { summary: "No time." }], { now: NOW }),
      "No time.\n\n[2 days ago, 2026-05-15 10:10 UTC]\nPlain.",
    );
  });

  it("strips whitespace like Python's str.strip()", () => {
    // U+FEFF is whitespace to JS trim() but not to Python; U+001F and U+0085 the reverse.
    assert.equal(renderEpisodes([{ summary: "\u001f\u0085 a \ufeff" }]), "a \ufeff");
  });
});

interface ProcedureOverrides {
  goal?: string;
  steps?: never[];
  successCount?: number;
  failureCount?: number;
  partialCount?: number;
}

function procedure(init: ProcedureOverrides = {}): Procedure {
  return create(ProcedureSchema, {
    procedureId: "p1",
    dataset: "shop",
    goal: "Please cancel my order #W1,\n I bought it by mistake",
    exampleGoals: ["Please cancel my order #W1,\n I bought it by mistake", "cancel #W2"],
    steps: [
      {
        tool: "get_order_details",
        purpose: "get order details",
        writes: false,
        arguments: [{ name: "order_id", source: "user" }],
      },
      {
        tool: "cancel_pending_order",
        purpose: "Cancelling it now.",
        writes: true,
        arguments: [
          { name: "order_id", source: "tool:get_order_details" },
          { name: "reason", source: "agent" },
        ],
      },
    ],
    successCount: 2,
    failureCount: 1,
    partialCount: 0,
    ...init,
  });
}

// A port of tests/sdk/test_render.py's procedure tests: the same text, byte for byte.
describe("renderProcedures", () => {
  it("renders goal, numbered steps with their arguments' sources, and support", () => {
    const scored = [
      create(ScoredProcedureSchema, { procedure: procedure(), relevance: 0.8234 }),
      create(ScoredProcedureSchema, {
        procedure: procedure({ goal: "Return the kettle", steps: [], successCount: 1, failureCount: 0, partialCount: 3 }),
        relevance: 0.4,
      }),
    ];
    assert.equal(
      renderProcedures(scored),
      "How this was done before:\n\n" +
        "1. Goal: Please cancel my order #W1, I bought it by mistake\n" +
        "   Worked twice, failed once (relevance 0.82).\n" +
        // The extractor's fallback purpose (the tool's name in words) is not said twice.
        "   1. get_order_details [order_id from the user]\n" +
        "   2. cancel_pending_order (changes something): Cancelling it now. " +
        "[order_id from get_order_details's result, reason chosen by the agent]\n\n" +
        "2. Goal: Return the kettle\n" +
        "   Worked once, partly worked 3 times (relevance 0.40).",
    );
    // A plain Procedure has no relevance; examples add the other requests it served.
    const text = renderProcedures([procedure()], { heading: "", examples: true });
    assert.deepEqual(text.split("\n").slice(0, 3), [
      "1. Goal: Please cancel my order #W1, I bought it by mistake",
      "   Worked twice, failed once.",
      "   Also used for: cancel #W2",
    ]);
    assert.equal(renderProcedures([]), "");
  });

  it("renders a recall's answer, and plain objects whose arguments map names to sources", () => {
    const wire = create(ScoredProcedureSchema, {
      procedure: {
        goal: "cancel an order",
        successCount: 3,
        steps: [{ tool: "cancel_pending_order", writes: true, arguments: [{ name: "order_id", source: "user" }] }],
      },
      relevance: 0.5,
    });
    const expected =
      "How this was done before:\n\n" +
      "1. Goal: cancel an order\n" +
      "   Worked 3 times (relevance 0.50).\n" +
      "   1. cancel_pending_order (changes something) [order_id from the user]";
    assert.equal(renderProcedures([wire]), expected);
    assert.equal(renderProcedures(create(RecallResponseSchema, { procedures: [wire] })), expected);
    // A RecallResult iterates over its episodes: its procedures are what is rendered.
    const result = { episodes: [], procedures: [wire], [Symbol.iterator]: () => [][Symbol.iterator]() };
    assert.equal(renderProcedures(result), expected);
    const plain = {
      procedure: {
        goal: "cancel an order",
        successCount: 3,
        steps: [{ tool: "cancel_pending_order", writes: true, arguments: { order_id: "user" } }],
      },
      relevance: 0.5,
    };
    assert.equal(renderProcedures([plain]), expected);
  });

  it("rounds a relevance exactly halfway like Python's format (to even)", () => {
    const at = (relevance: number) =>
      renderProcedures([{ procedure: { goal: "g", successCount: 1 }, relevance }]).split("\n")[3];
    assert.equal(at(0.125), "   Worked once (relevance 0.12).");
    assert.equal(at(0.375), "   Worked once (relevance 0.38).");
    assert.equal(at(0.835), "   Worked once (relevance 0.83)."); // 0.83499999… in binary
    assert.equal(at(0.826), "   Worked once (relevance 0.83).");
  });
});
