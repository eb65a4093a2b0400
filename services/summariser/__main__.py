"""Runs the Summariser service: ``python -m episodic.services.summariser``."""

from __future__ import annotations

from sqlalchemy import Engine

from episodic.config import Settings
from episodic.providers import CachedEmbedder, make_embedder, make_summariser
from episodic.providers.factory import (
    late_chunks,
    make_dataset_embedders,
    make_procedure_writer,
)
from episodic.serving.server import Service, serve
from episodic.store import embedding_space
from episodic.store.db import check_embedding_dimension
from episodic.store.vault import make_vault

from .events import EventWork, make_turn_classifier
from .pipeline import Pipeline
from .semantic import KeyLearningFacts
from .servicer import SummariserServicer, register
from .worker import Worker


def build(settings: Settings, engine: Engine) -> Service:
    # One cache shared by the summary and the recall index: each text is embedded once.
    embedder = CachedEmbedder(
        make_embedder(settings.embedding, settings.database.embedding_dimension, bulk=True)
    )
    # Refuse to start rather than fail every episode later, or store vectors of a model
    # the store's other vectors do not compare with.
    check_embedding_dimension(engine, embedder.dimension)
    embedding_space.check_start(engine, embedder.name, embedder.dimension, who="Summariser")
    summariser = make_summariser(settings.llm, embedder)
    vault = make_vault(settings.privacy)
    # Datasets in other languages than English: the multilingual model, when on.
    embedders = make_dataset_embedders(settings.embedding, embedder, cached=True)
    event_work = EventWork(
        engine,
        vault,
        embedders,
        make_turn_classifier(settings.summariser, settings.llm),
        batch_turns=settings.summariser.event_classifier_batch_turns,
    )
    pipeline = Pipeline(
        engine,
        summariser,
        embedder,
        KeyLearningFacts() if settings.summariser.semantic_enabled else None,
        vault=vault,
        max_retries=settings.recovery.max_retries,
        retry_backoff=settings.recovery.retry_backoff,
        heartbeat=settings.recovery.orphan_reclaim_after / 4,
        event_work=event_work,
        chunk_vectors="late" if late_chunks(settings.embedding, embedder) else "separate",
        detect_language=settings.summariser.detect_language,
        procedure_writer=make_procedure_writer(settings.llm),
        multilingual=embedders.multilingual,
    )
    servicer = SummariserServicer(engine, pipeline, summariser, embedder)
    service = Service(register=lambda server: register(server, servicer))
    poll = settings.summariser.summariser_poll_interval.total_seconds()
    if poll <= 0:  # no loop (tests drive ProcessPending): still hand claims back on exit
        service.on_shutdown.append(pipeline.release)
        return service
    worker = Worker(
        pipeline,
        settings.database.libpq_url(),
        poll_interval=poll,
        batch_size=settings.summariser.summariser_batch_size,
        # A pass may summarise a whole batch with a slow model: it is stalled only past
        # the time its claims would be reclaimed anyway.
        stall_after=max(
            settings.recovery.loop_stall_after, settings.recovery.orphan_reclaim_after
        ).total_seconds(),
    )
    grace = settings.service.shutdown_grace.total_seconds()
    service.on_start.append(worker.start)
    service.on_shutdown.append(lambda: worker.stop(grace))
    return service


if __name__ == "__main__":
    serve("summariser", build)
