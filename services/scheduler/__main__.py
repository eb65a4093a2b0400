"""Runs the Scheduler service: ``python -m episodic.services.scheduler``."""

from __future__ import annotations

import logging
import threading

from sqlalchemy import Engine, text

from episodic import metrics
from episodic.config import Settings
from episodic.errors import log_failure
from episodic.serving.server import Service, serve
from episodic.store.episodes import SEMANTIC_STATUSES, STATUSES
from episodic.store.status import PipelineStatus, pipeline_status
from episodic.store.vault import make_vault

from .servicer import SchedulerServicer, register
from .sweeper import Sweeper

log = logging.getLogger(__name__)


def _startup_catch_up(sweeper: Sweeper) -> None:
    """Timers for activity missed while no Scheduler ran (the loop's first pass does the
    same; this covers a Scheduler running without the loop)."""
    try:
        created = sweeper.catch_up()
        if created:
            log.info("catch-up at startup created %d timers", created)
    except Exception as err:
        log_failure(log, "catch-up at startup failed; the next sweep retries", err)


def _read_pipeline(engine: Engine) -> PipelineStatus:
    with engine.begin() as conn:
        # A scrape gives up after 10 s by default: do not keep the database busy longer.
        conn.execute(text("SET LOCAL statement_timeout = '5s'"))
        return pipeline_status(conn, None, max_errors=0)


def build(settings: Settings, engine: Engine) -> Service:
    # The pipeline gauges come from the Scheduler: it owns the timers and the episode
    # lifecycle, needs no model (cheap to scrape), and keeps reporting a growing pending
    # age while the Summariser is the part that is stuck or down.
    metrics.observe_pipeline(
        lambda: _read_pipeline(engine),
        ttl=settings.metrics.metrics_pipeline_cache.total_seconds(),
        statuses=STATUSES,
        semantic_statuses=SEMANTIC_STATUSES,
    )
    vault = make_vault(settings.privacy)
    sweeper = Sweeper(
        engine,
        settings.scheduler,
        recovery=settings.recovery,
        privacy=settings.privacy,
        vault=vault,
        statistics_above=settings.recall.recall_approximate_above,
    )
    log.info("replica %s", sweeper.worker)
    servicer = SchedulerServicer(engine, settings.scheduler, sweeper, vault)
    if settings.scheduler.scheduler_poll_interval.total_seconds() > 0:
        start = sweeper.start
    else:

        def start() -> None:
            threading.Thread(
                target=_startup_catch_up, args=(sweeper,), name="catch-up", daemon=True
            ).start()

    return Service(
        register=lambda server: register(server, servicer),
        on_start=[start],
        # Runs after in-flight calls finished: stop the loop, release claims and leases.
        on_shutdown=[sweeper.shutdown],
    )


if __name__ == "__main__":
    serve("scheduler", build)
