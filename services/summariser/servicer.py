"""SummariserService: drive the pipeline on demand and report provider health."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import grpc
from google.protobuf import duration_pb2
from sqlalchemy import Engine

from episodic import access, convert
from episodic.errors import SchemaMismatch
from episodic.providers.types import Embedder, Summariser
from episodic.store import embedding_space
from episodic.store.status import PipelineStatus, pipeline_status
from episodic.v1 import summariser_service_pb2 as pb
from episodic.v1 import summariser_service_pb2_grpc as pb_grpc
from episodic.validation import check_dataset, page_size

from .pipeline import Pipeline


def provider_health(name: str, check: Callable[[], None]) -> pb.ProviderHealth:
    try:
        check()
        return pb.ProviderHealth(name=name, ok=True)
    except Exception as err:
        return pb.ProviderHealth(name=name, ok=False, error=f"{type(err).__name__}: {err}"[:500])


class SummariserServicer(pb_grpc.SummariserServiceServicer):
    def __init__(
        self, engine: Engine, pipeline: Pipeline, summariser: Summariser, embedder: Embedder
    ) -> None:
        self.engine = engine
        self.pipeline = pipeline
        self.summariser = summariser
        self.embedder = embedder

    def check_embedder(self) -> None:
        """The embedder answers, and the store takes its vectors: a Summariser paused by a
        re-embedding to another model (or a store moved away from its model) reports it
        here, in `episodic status`, rather than only in its log."""
        self.embedder.check()
        with self.engine.connect() as conn:
            allowed, space = embedding_space.may_write(conn, self.embedder.name)
        if not allowed and space is not None:
            raise SchemaMismatch(
                "summarising paused: "
                + embedding_space.mismatch(space, self.embedder.name, "Summariser")
            )

    def ProcessPending(
        self, request: pb.ProcessPendingRequest, context: grpc.ServicerContext
    ) -> pb.ProcessPendingResponse:
        limit = page_size(request.max_episodes, default=10, maximum=1000, field="max_episodes")
        # An explicit request: its chunk index is finished too, whatever became due. Inside
        # a re-embedding's fence, like the worker's passes (store/embedding_space.py).
        with embedding_space.writing(self.engine):
            result = self.pipeline.run_once(limit, yield_chunks=False)
        return pb.ProcessPendingResponse(
            completed=result.completed,
            failed=result.failed,
            semantic_processed=result.semantic_processed,
        )

    def CheckProviders(
        self, request: pb.CheckProvidersRequest, context: grpc.ServicerContext
    ) -> pb.CheckProvidersResponse:
        return pb.CheckProvidersResponse(
            llm=provider_health(self.summariser.name, self.summariser.check),
            embedder=provider_health(self.embedder.name, self.check_embedder),
        )

    def GetPipelineStatus(
        self, request: pb.GetPipelineStatusRequest, context: grpc.ServicerContext
    ) -> pb.GetPipelineStatusResponse:
        dataset = check_dataset(request.dataset) if request.dataset else None
        if dataset is None:
            access.require_global("the status of every dataset")
        else:
            access.require_dataset(dataset)
        max_errors = page_size(request.max_errors, default=10, maximum=100, field="max_errors")
        with self.engine.connect() as conn:
            status = pipeline_status(conn, dataset, max_errors)
        response = pb.GetPipelineStatusResponse(
            status_counts=status.status_counts,
            semantic_status_counts=status.semantic_status_counts,
            timers_due=status.timers_due,
            timers_waiting=status.timers_waiting,
            threads_uncaptured=status.threads_uncaptured,
            observed_at=convert.ts(status.observed_at),
            recent_errors=[_episode_error(e) for e in status.recent_errors],
            pending_waiting=status.pending_waiting,
            latest_retry_at=convert.ts(status.latest_retry_at),
            failed_episodes=[_episode_error(e) for e in status.failed_episodes],
            threads_without_timer=status.threads_without_timer,
            lifecycle=_lifecycle(status),
        )
        for field in (
            "oldest_pending_age",
            "oldest_processing_age",
            "oldest_due_timer_age",
            "oldest_untimed_thread_age",
        ):
            age = getattr(status, field)
            if age is not None:
                duration = duration_pb2.Duration()
                duration.FromTimedelta(age)
                getattr(response, field).CopyFrom(duration)
        if not request.skip_provider_checks:
            response.llm.CopyFrom(provider_health(self.summariser.name, self.summariser.check))
            response.embedder.CopyFrom(provider_health(self.embedder.name, self.check_embedder))
        return response


def _lifecycle(status: PipelineStatus) -> pb.LifecycleStatus:
    last = status.lifecycle_last_result
    return pb.LifecycleStatus(
        last_run_at=convert.ts(status.lifecycle_last_run_at),
        threads_purged=int(last.get("threads_purged", 0)),
        threads_compacted=int(last.get("threads_compacted", 0)),
        messages_compacted=int(last.get("messages_compacted", 0)),
        erasures_resumed=int(last.get("erasures_resumed", 0)),
        datasets_erasing=status.datasets_erasing,
        threads_compacted_total=status.threads_compacted,
    )


def _episode_error(row: Mapping[str, Any]) -> pb.EpisodeError:
    return pb.EpisodeError(
        episode_id=str(row["episode_id"]),
        thread_id=str(row["thread_id"]),
        dataset=row["dataset"],
        status=row["status"],
        retry_count=row["retry_count"],
        error=row["error"] or "",
        updated_at=convert.ts(row["updated_at"]),
    )


def register(server: grpc.Server, servicer: SummariserServicer) -> None:
    pb_grpc.add_SummariserServiceServicer_to_server(servicer, server)
