import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { DEFAULT_PORTS, addressFromEnv, resolveAddress } from "../../src/endpoints.js";
import { EpisodicClient } from "../../src/client.js";

describe("addresses (the Python SDK's rule)", () => {
  it("defaults to 127.0.0.1 and the default ports", () => {
    assert.deepEqual(DEFAULT_PORTS, { ingest: 50051, scheduler: 50052, summariser: 50053, recall: 50054 });
    assert.equal(addressFromEnv("recall", {}), "127.0.0.1:50054");
  });

  it("uses EPISODIC_<SERVICE>_PORT, then EPISODIC_<SERVICE>_ADDRESS first", () => {
    assert.equal(addressFromEnv("ingest", { EPISODIC_INGEST_PORT: " 6000 " }), "127.0.0.1:6000");
    assert.equal(
      addressFromEnv("ingest", { EPISODIC_INGEST_PORT: "6000", EPISODIC_INGEST_ADDRESS: "ingest.svc:50051" }),
      "ingest.svc:50051",
    );
    assert.equal(addressFromEnv("ingest", { EPISODIC_INGEST_PORT: "0" }), "127.0.0.1:50051");
  });

  it("refuses a port that is not a number, and unknown services", () => {
    assert.throws(() => addressFromEnv("ingest", { EPISODIC_INGEST_PORT: "x" }), /EPISODIC_INGEST_PORT='x' is not a port number/);
    assert.throws(() => resolveAddress("nope" as "ingest"), /unknown service 'nope'/);
  });

  it("the client takes options first, then the environment", () => {
    const client = new EpisodicClient({
      recall: "recall:1",
      env: { EPISODIC_INGEST_ADDRESS: "ingest:2", EPISODIC_SCHEDULER_PORT: "3" },
    });
    assert.deepEqual(
      { ...client.addresses },
      { ingest: "ingest:2", recall: "recall:1", scheduler: "127.0.0.1:3", summariser: "127.0.0.1:50053" },
    );
  });
});
