"""SummariserService: drive the pipeline on demand and report provider health."""

from __future__ import annotations

import grpc
from episodic.providers.embedding import Embedder
from episodic.providers.llm import Summariser
from episodic.v1 import summariser_service_pb2 as pb
from episodic.v1 import summariser_service_pb2_grpc as pb_grpc
from episodic.validation import page_size

from services.summariser.pipeline import Pipeline


def provider_health(name: str, check) -> pb.ProviderHealth:  # type: ignore[no-untyped-def]
    try:
        check()
        return pb.ProviderHealth(name=name, ok=True)
    except Exception as err:
        return pb.ProviderHealth(name=name, ok=False, error=f"{type(err).__name__}: {err}"[:500])


class SummariserServicer(pb_grpc.SummariserServiceServicer):
    def __init__(self, pipeline: Pipeline, summariser: Summariser, embedder: Embedder) -> None:
        self.pipeline = pipeline
        self.summariser = summariser
        self.embedder = embedder

    def ProcessPending(self, request, context):  # type: ignore[no-untyped-def]
        limit = page_size(request.max_episodes, default=10, maximum=1000, field="max_episodes")
        result = self.pipeline.run_once(limit)
        return pb.ProcessPendingResponse(
            completed=result.completed,
            failed=result.failed,
            semantic_processed=result.semantic_processed,
        )

    def CheckProviders(self, request, context):  # type: ignore[no-untyped-def]
        return pb.CheckProvidersResponse(
            llm=provider_health(self.summariser.name, self.summariser.check),
            embedder=provider_health(self.embedder.name, self.embedder.check),
        )


def register(server: grpc.Server, servicer: SummariserServicer) -> None:
    pb_grpc.add_SummariserServiceServicer_to_server(servicer, server)
