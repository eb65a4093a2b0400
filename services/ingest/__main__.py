"""Runs the Ingest service: ``python -m episodic.services.ingest``."""

from __future__ import annotations

import grpc
from sqlalchemy import Engine

from episodic.config import Settings
from episodic.server import Service, serve
from episodic.telemetry import instrument_grpc_client

from .notifier import SchedulerNotifier
from .servicer import IngestServicer, register


def build(settings: Settings, engine: Engine) -> Service:
    raw_channel = grpc.insecure_channel(settings.service.address_of("scheduler"))
    channel = instrument_grpc_client(raw_channel)  # the trace follows the call
    notifier = SchedulerNotifier(
        channel, timeout=settings.ingest.scheduler_notify_timeout.total_seconds()
    )
    servicer = IngestServicer(engine, settings.ingest, notifier)
    return Service(
        register=lambda server: register(server, servicer),
        on_shutdown=[notifier.close, raw_channel.close],
    )


if __name__ == "__main__":
    serve("ingest", build)
