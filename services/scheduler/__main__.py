"""Runs the Scheduler service: ``python -m services.scheduler``."""

from __future__ import annotations

import logging
import threading

from episodic.config import get_settings
from episodic.server import build_server, run_until_signalled, setup_logging
from episodic.store.db import engine_from_settings

from .servicer import SchedulerServicer, register
from .sweeper import Sweeper

SERVICE_NAME = "episodic.v1.SchedulerService"

log = logging.getLogger(__name__)


def _startup_catch_up(sweeper: Sweeper) -> None:
    """Timers for activity missed while no Scheduler ran (the loop's first pass does the
    same; this covers a Scheduler running without the loop)."""
    try:
        created = sweeper.catch_up()
        if created:
            log.info("catch-up at startup created %d timers", created)
    except Exception:
        log.exception("catch-up at startup failed; the next sweep retries")


def main() -> None:
    settings = get_settings()
    setup_logging("scheduler")
    engine = engine_from_settings(settings.database, "episodic-scheduler")
    sweeper = Sweeper(engine, settings.scheduler)
    log.info("replica %s", sweeper.worker)
    servicer = SchedulerServicer(engine, settings.scheduler, sweeper)
    runtime = build_server(
        name=SERVICE_NAME,
        register=lambda server: register(server, servicer),
        service_names=[SERVICE_NAME],
        host=settings.service.bind_host,
        port=settings.service.scheduler_port,
        workers=settings.service.grpc_workers,
        engine=engine,
        shutdown_grace=settings.service.shutdown_grace.total_seconds(),
    )
    # Runs after in-flight calls finished: stop the loop, release claims and leases.
    runtime.on_shutdown.append(sweeper.shutdown)
    if settings.scheduler.scheduler_poll_interval.total_seconds() > 0:
        sweeper.start()
    else:
        threading.Thread(
            target=_startup_catch_up, args=(sweeper,), name="catch-up", daemon=True
        ).start()
    run_until_signalled(runtime)


if __name__ == "__main__":
    main()
