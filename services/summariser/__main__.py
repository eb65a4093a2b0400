"""Runs the Summariser service: ``python -m services.summariser``."""

from __future__ import annotations

from episodic.config import get_settings
from episodic.providers.embedding import make_embedder
from episodic.providers.llm import make_summariser
from episodic.server import build_server, run_until_signalled, setup_logging
from episodic.store.db import check_embedding_dimension, engine_from_settings

from .pipeline import Pipeline
from .semantic import KeyLearningFacts
from .servicer import SummariserServicer, register
from .worker import Worker

SERVICE_NAME = "episodic.v1.SummariserService"


def main() -> None:
    settings = get_settings()
    setup_logging("summariser")
    engine = engine_from_settings(settings.database, "episodic-summariser")
    embedder = make_embedder(settings.embedding, settings.database.embedding_dimension)
    # Refuse to start rather than fail every episode later.
    check_embedding_dimension(engine, embedder.dimension)
    summariser = make_summariser(settings.llm, embedder)
    pipeline = Pipeline(
        engine,
        summariser,
        embedder,
        KeyLearningFacts() if settings.summariser.semantic_enabled else None,
        max_retries=settings.scheduler.max_retries,
        retry_backoff=settings.scheduler.retry_backoff,
    )
    servicer = SummariserServicer(engine, pipeline, summariser, embedder)
    runtime = build_server(
        name=SERVICE_NAME,
        register=lambda server: register(server, servicer),
        service_names=[SERVICE_NAME],
        host=settings.service.bind_host,
        port=settings.service.summariser_port,
        workers=settings.service.grpc_workers,
        engine=engine,
        shutdown_grace=settings.service.shutdown_grace.total_seconds(),
    )
    poll = settings.summariser.summariser_poll_interval.total_seconds()
    if poll > 0:
        worker = Worker(
            pipeline,
            (settings.database.database_url or "").replace(
                "postgresql+psycopg://", "postgresql://"
            ),
            poll_interval=poll,
            batch_size=settings.summariser.summariser_batch_size,
        )
        worker.start()
        runtime.on_shutdown.insert(
            0, lambda: worker.stop(settings.service.shutdown_grace.total_seconds())
        )
    else:
        runtime.on_shutdown.insert(0, pipeline.release)
    run_until_signalled(runtime)


if __name__ == "__main__":
    main()
