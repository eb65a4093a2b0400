/**
 * A port of the Python SDK's tests/sdk/test_render.py: the TypeScript renderer must produce
 * exactly the same text (parity check).
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";

import { EpisodeSchema, ScoredEpisodeSchema } from "../../src/gen/episodic/v1/episode_pb.js";
import type { Episode } from "../../src/gen/episodic/v1/episode_pb.js";
import { absoluteTime, relativeTime, renderEpisodes } from "../../src/render.js";

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
