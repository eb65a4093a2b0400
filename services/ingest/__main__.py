"""Runs the Ingest service: ``python -m episodic.services.ingest``."""

from __future__ import annotations

import json

import grpc
from sqlalchemy import Engine

from episodic.config import Settings
from episodic.serving.server import Service, serve
from episodic.store.db import make_engine
from episodic.store.vault import make_vault
from episodic.telemetry import instrument_engine, instrument_grpc_client
from episodic.tls import channel_credentials

from . import admin
from .notifier import SchedulerNotifier
from .servicer import IngestServicer, register

# Activity and thread-started notices are idempotent (an upsert; a pull-forward that never
# moves a deadline later), so gRPC may retry them on another replica. RequestEpisode is not
# retried: a second attempt would find nothing left to capture and answer "not queued".
NOTIFY_CHANNEL_OPTIONS = [
    ("grpc.lb_policy_name", "round_robin"),
    ("grpc.enable_retries", 1),
    (
        "grpc.service_config",
        json.dumps(
            {
                "methodConfig": [
                    {
                        "name": [
                            {"service": "episodic.v1.SchedulerService", "method": m}
                            for m in ("RecordActivity", "RecordThreadStarted")
                        ],
                        "retryPolicy": {
                            "maxAttempts": 3,
                            "initialBackoff": "0.05s",
                            "maxBackoff": "0.5s",
                            "backoffMultiplier": 2,
                            "retryableStatusCodes": ["UNAVAILABLE"],
                        },
                    }
                ]
            }
        ),
    ),
]


def build(settings: Settings, engine: Engine) -> Service:
    # Round robin over every address the name resolves to: with several Scheduler replicas
    # behind a headless Service (dns:///…), notices spread over them and skip a dead one.
    address = settings.service.address_of("scheduler")
    tls = settings.tls
    raw_channel = (
        grpc.secure_channel(
            address,
            channel_credentials(tls.tls_ca_file, tls.tls_client_cert_file, tls.tls_client_key_file),
            options=NOTIFY_CHANNEL_OPTIONS,
        )
        if tls.tls_ca_file
        else grpc.insecure_channel(address, options=NOTIFY_CHANNEL_OPTIONS)
    )
    channel = instrument_grpc_client(raw_channel)  # the trace follows the call
    service_key = settings.auth.service_key.get_secret_value()
    notifier = SchedulerNotifier(
        channel,
        timeout=settings.ingest.scheduler_notify_timeout.total_seconds(),
        linger=settings.ingest.scheduler_notify_linger.total_seconds(),
        metadata=(("authorization", f"Bearer {service_key}"),) if service_key else (),
    )
    vault = make_vault(settings.privacy)
    servicer = IngestServicer(engine, settings.ingest, notifier, vault)
    read_engine = (
        instrument_engine(
            make_engine(
                settings.database.read_sqlalchemy_url(),
                pool_size=2,
                application_name="episodic-ingest-reads",
                isolation_level="AUTOCOMMIT",
            )
        )
        if settings.database.database_read_url
        else None
    )
    admin_servicer = admin.AdminServicer(engine, vault, settings.privacy, read_engine)

    def register_both(server: grpc.Server) -> None:
        register(server, servicer)
        admin.register(server, admin_servicer)

    return Service(
        register=register_both,
        also_serves=["episodic.v1.AdminService"],
        on_shutdown=[notifier.close, raw_channel.close],
    )


if __name__ == "__main__":
    serve("ingest", build)
