"""What the Go and Java examples run against, and what they must print: the four services as
real processes against the test's database, API keys required, with a writer key for one
dataset; and the checks of a client's run, from its output and from the suite."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from sqlalchemy import Engine

from episodic.access import Role
from episodic.store import keys
from episodic.v1 import episode_pb2 as epb
from episodic.v1 import recall_service_pb2 as rpb
from episodic.v1 import recall_service_pb2_grpc as rg

REQUIRED = {"EPISODIC_AUTH": "required"}


@dataclass
class KeyedSuite:
    ingest: str
    recall: str
    dataset: str
    key: str

    def client_env(self) -> dict[str, str]:
        """What a client reads (the names the Python and TypeScript clients read too)."""
        return {
            "EPISODIC_INGEST_ADDRESS": self.ingest,
            "EPISODIC_RECALL_ADDRESS": self.recall,
            "EPISODIC_API_KEY": self.key,
            "EPISODIC_DATASET": self.dataset,
        }


def start_keyed_suite(spawn: Callable[..., Any], engine: Engine) -> KeyedSuite:
    dataset = "polyglot"
    with engine.begin() as conn:
        key = keys.create_key(conn, role=Role.WRITER, datasets=[dataset], name="polyglot").secret
        # Ingest's own key for calling the Scheduler, as `episodic up` mints one.
        service = keys.create_key(conn, role=Role.SERVICE, datasets=["*"], name="services")
    env = {**REQUIRED, "EPISODIC_SERVICE_KEY": service.secret}
    scheduler = spawn("scheduler", env=env)
    ingest = spawn("ingest", env={**env, "EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    spawn("summariser", env={**env, "EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2"})
    recall = spawn("recall", env=env)
    return KeyedSuite(ingest=ingest.address, recall=recall.address, dataset=dataset, key=key)


def check_the_loop(out: str, suite: KeyedSuite, *, prefix: str, codes: dict[str, str]) -> None:
    """Checks a client's output (the same lines in every language; ``prefix`` of its
    idempotency keys, ``codes`` the names it prints for gRPC codes by their canonical name),
    then checks from Python that the suite holds what it says it did."""
    assert out.endswith("OK\n"), out
    thread_id = re.search(r"^thread (\S+) created in polyglot \(label car-search\)$", out, re.M)
    assert thread_id, out
    stored = "; ".join(f"#{n} {prefix}-{n} stored=true" for n in (1, 2, 3))
    assert f"messages stored 3: {stored}\n" in out, out
    # The message is for people (its wording may change); the code, reason and field are
    # for machines, and a client relies on them.
    invalid = re.escape(codes["INVALID_ARGUMENT"])
    bad_request = (
        rf'^bad request: code={invalid} message="messages\[0\]\.role [^"]+" '
        r"ErrorInfo\{reason=INVALID_ARGUMENT domain=episodic\.dev "
        r"metadata=\{field=messages\[0\]\.role\}\}$"
    )
    assert re.search(bad_request, out, re.M), out
    assert f"deadline: {codes['DEADLINE_EXCEEDED']}\n" in out, out
    unauthenticated = re.escape(codes["UNAUTHENTICATED"])
    no_key = rf"^no key: code={unauthenticated} .*ErrorInfo\{{reason=MISSING_CREDENTIALS "
    assert re.search(no_key, out, re.M), out
    episode_id = re.search(r"^episode (\S+) EPISODE_STATUS_COMPLETED after \d+ poll", out, re.M)
    assert episode_id, out
    assert re.search(rf"^recall: 1 episode\(s\), top {episode_id[1]} relevance ", out, re.M), out

    with grpc.insecure_channel(suite.recall) as channel:
        got = (
            rg.RecallServiceStub(channel)
            .GetEpisode(
                rpb.GetEpisodeRequest(episode_id=episode_id[1]),
                metadata=[("authorization", f"Bearer {suite.key}")],
                timeout=10,
            )
            .episode
        )
    assert (got.thread_id, got.dataset, got.status) == (
        thread_id[1],
        suite.dataset,
        epb.EPISODE_STATUS_COMPLETED,
    )
    assert (got.start_sequence, got.end_sequence) == (1, 3)
    assert f"summary: {got.summary}\n" in out, out
