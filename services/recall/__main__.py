"""Runs the Recall service: ``python -m services.recall``."""

from __future__ import annotations

import logging
import sys

from sqlalchemy import Engine, create_engine

from episodic.config import DatabaseSettings, get_settings
from episodic.errors import EpisodicError
from episodic.providers.embedding import make_embedder
from episodic.server import build_server, run_until_signalled, setup_logging
from episodic.store.db import check_embedding_dimension
from episodic.telemetry import instrument_engine

from .servicer import RecallServicer, register

SERVICE_NAME = "episodic.v1.RecallService"

log = logging.getLogger(__name__)


def read_engine(settings: DatabaseSettings, statement_timeout_ms: int) -> Engine:
    """Recall only reads, one statement per call: autocommit saves the BEGIN and ROLLBACK
    round trips, and no pre-ping saves another. A connection lost to a database restart
    fails that call with UNAVAILABLE (which the SDK retries) and is replaced."""
    return instrument_engine(  # Recall's traces show the database time
        create_engine(
            settings.sqlalchemy_url(),
            pool_size=settings.db_pool_size,
            max_overflow=settings.db_pool_size,
            pool_recycle=1800,
            isolation_level="AUTOCOMMIT",
            connect_args={
                "application_name": "episodic-recall",
                "options": f"-c statement_timeout={statement_timeout_ms}",
            },
        )
    )


def main() -> None:
    settings = get_settings()
    setup_logging("recall")
    engine = read_engine(
        settings.database, int(settings.recall.recall_statement_timeout.total_seconds() * 1000)
    )
    try:
        embedder = make_embedder(settings.embedding, settings.database.embedding_dimension)
        # Query vectors must be comparable with the stored ones: refuse to start otherwise.
        check_embedding_dimension(engine, embedder.dimension)
        embedder.check()  # loads the model now, not on the first user's query
    except EpisodicError as err:
        log.error("recall cannot start: %s", err.message)
        sys.exit(2)
    log.info("recall embedder: %s", embedder.name)
    servicer = RecallServicer(engine, settings.recall, embedder)
    runtime = build_server(
        name=SERVICE_NAME,
        register=lambda server: register(server, servicer),
        service_names=[SERVICE_NAME],
        host=settings.service.bind_host,
        port=settings.service.recall_port,
        workers=settings.service.grpc_workers,
        engine=engine,
        shutdown_grace=settings.service.shutdown_grace.total_seconds(),
    )
    run_until_signalled(runtime)


if __name__ == "__main__":
    main()
