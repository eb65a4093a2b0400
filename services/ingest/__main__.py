"""Runs the Ingest service: ``python -m services.ingest``."""

from __future__ import annotations

import grpc

from episodic.config import get_settings
from episodic.server import build_server, run_until_signalled, setup_logging
from episodic.store.db import engine_from_settings
from episodic.telemetry import instrument_grpc_client

from .notifier import SchedulerNotifier
from .servicer import IngestServicer, register

SERVICE_NAME = "episodic.v1.IngestService"


def main() -> None:
    settings = get_settings()
    setup_logging("ingest")
    engine = engine_from_settings(settings.database, "episodic-ingest")
    raw_channel = grpc.insecure_channel(settings.service.address_of("scheduler"))
    channel = instrument_grpc_client(raw_channel)  # the trace follows the call
    notifier = SchedulerNotifier(
        channel, timeout=settings.ingest.scheduler_notify_timeout.total_seconds()
    )
    servicer = IngestServicer(engine, settings.ingest, notifier)
    runtime = build_server(
        name=SERVICE_NAME,
        register=lambda server: register(server, servicer),
        service_names=[SERVICE_NAME],
        host=settings.service.bind_host,
        port=settings.service.ingest_port,
        workers=settings.service.grpc_workers,
        engine=engine,
        shutdown_grace=settings.service.shutdown_grace.total_seconds(),
    )
    runtime.on_shutdown.append(notifier.close)
    runtime.on_shutdown.append(raw_channel.close)
    run_until_signalled(runtime)


if __name__ == "__main__":
    main()
