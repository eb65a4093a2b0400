"""``bench.scale.recall_scale --breakdown``: the paths timed beside the normal ones to tell
where the gRPC path's time over the SQL goes: Recall through a bare stub, the servicer in
this process, a health check, and the bare hop (a canned Recall answer of the real size
from ``bench.harness.grpc_echo``)."""

from __future__ import annotations

from contextlib import ExitStack

from bench.harness.grpc_echo import echo_server
from bench.scale.recall.common import (
    DIM,
    log,
)

#: The --breakdown paths (see breakdown_paths), and the bare SQL as it was timed before
#: 2026-12-01: in psycopg's named form (``normal sql, named``), and that on the backend that
#: read the dataset first (``normal sql, first read's backend``).
BREAKDOWN = {
    "normal grpc stub",
    "normal in-process",
    "health check",
    "normal echo",
    "normal sql, named",
    "normal sql, first read's backend",
}


def breakdown_paths(
    stack: ExitStack, url: str, address: str, samples: list[tuple[str, str]]
) -> dict[str, object]:
    """The --breakdown paths, each a function of (dataset, query): Recall through a bare
    gRPC stub on a plain channel (what the SDK adds is the difference to ``normal grpc``),
    the Recall servicer's domain called in this process on an engine configured as the
    service's (its statements and Python, no gRPC), a health check through the
    service's server (one gRPC round trip and the interceptors, no work), and the bare hop
    (``bench.grpc_echo``: a Python gRPC server answering every Recall with the canned answer
    of median size among the service's answers to ``samples``, through a bare stub)."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from episodic import access
    from episodic.config import EmbeddingSettings, PrivacySettings, Settings
    from episodic.providers import make_embedder
    from episodic.services.recall.__main__ import engine_options
    from episodic.services.recall.servicer import RecallServicer
    from episodic.store.db import make_engine
    from episodic.store.vault import make_vault
    from episodic.testing.keys import keyring_file
    from episodic.v1 import recall_service_pb2 as pb
    from episodic.v1 import recall_service_pb2_grpc as pb_grpc

    channel = stack.enter_context(grpc.insecure_channel(address))
    stub = pb_grpc.RecallServiceStub(channel)
    health = health_pb2_grpc.HealthStub(channel)
    settings = Settings()  # as the service runs: the hashing embedder, the test keyring
    engine = make_engine(url, pool_size=2, **engine_options(settings))
    stack.callback(engine.dispose)
    servicer = RecallServicer(
        engine,
        settings.recall,
        make_embedder(EmbeddingSettings(embedding_provider="hashing"), DIM),
        make_vault(PrivacySettings(master_key_file=keyring_file())),
    )
    include = [pb.RECALL_INCLUDE_EPISODES]

    answers = sorted(
        (
            stub.Recall(pb.RecallRequest(dataset=d, query=q, include=include), timeout=120)
            for d, q in samples
        ),
        key=lambda a: a.ByteSize(),
    )
    canned = answers[len(answers) // 2].SerializeToString()
    log(f"echo answers {len(canned)} bytes (the median of {len(answers)} Recall answers)")
    echo_address = stack.enter_context(
        echo_server(
            pb.DESCRIPTOR.services_by_name["RecallService"].full_name,
            "Recall",
            pb.RecallRequest,
            canned,
        )
    )
    echo = pb_grpc.RecallServiceStub(stack.enter_context(grpc.insecure_channel(echo_address)))

    class NoDeadline:
        def time_remaining(self) -> None:
            return None

    def in_process(dataset: str, query: str) -> object:
        with access.running_as(access.ANONYMOUS):
            request = pb.RecallRequest(dataset=dataset, query=query, include=include)
            return servicer.Recall(request, NoDeadline())  # type: ignore[arg-type]

    return {
        "normal grpc stub": lambda d, q: stub.Recall(
            pb.RecallRequest(dataset=d, query=q, include=include), timeout=120
        ),
        "normal in-process": in_process,
        "health check": lambda d, q: health.Check(health_pb2.HealthCheckRequest(), timeout=30),
        "normal echo": lambda d, q: echo.Recall(
            pb.RecallRequest(dataset=d, query=q, include=include), timeout=30
        ),
    }
