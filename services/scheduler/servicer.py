"""SchedulerService: parse the request, call the domain, map the result."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TypeVar

import grpc
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError

from episodic import access, convert, genai
from episodic.config import SchedulerSettings
from episodic.errors import Aborted, InvalidArgument
from episodic.store import audit, owners, records
from episodic.store.db import RETRYABLE_TRANSACTION, sqlstate
from episodic.store.vault import Vault
from episodic.v1 import scheduler_service_pb2 as pb
from episodic.v1 import scheduler_service_pb2_grpc as pb_grpc
from episodic.validation import parse_uuid

from . import domain
from .sweeper import Sweeper

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How often a notice (RecordActivity, RecordThreadStarted, RequestEpisode) is tried when
#: PostgreSQL picks it as a deadlock's victim or fails it for serialisation. The notices
#: take their locks in the sweep's order (see ``domain.record_thread_started``), so this
#: is a backstop for lock orders outside the Scheduler; each try is a fresh transaction
#: (the failed one rolled back whole, so a retry repeats nothing).
NOTICE_ATTEMPTS = 3

_FOREIGN_KEY_VIOLATION = "23503"


def _trigger(value: int) -> str:
    if value == 0:
        return "explicit"
    trigger = convert.TRIGGER_FROM_PROTO.get(value)
    if trigger is None:
        raise InvalidArgument(f"trigger {value} is not a known EpisodeTrigger", field="trigger")
    return trigger


class SchedulerServicer(pb_grpc.SchedulerServiceServicer):
    def __init__(
        self, engine: Engine, settings: SchedulerSettings, sweeper: Sweeper, vault: Vault
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.sweeper = sweeper
        self.vault = vault

    def _notice(self, thread_id: uuid.UUID, work: Callable[[Connection, str], T]) -> T:
        """Runs a notice about thread ``thread_id`` in a transaction of its own: NOT_FOUND
        when the thread does not exist — also when it is erased meanwhile — and a deadlock
        or serialisation failure is tried again (``NOTICE_ATTEMPTS``), then ABORTED: the
        database is up, the call lost to another transaction."""
        for attempt in range(1, NOTICE_ATTEMPTS + 1):
            try:
                with self.engine.begin() as conn:
                    return work(conn, owners.require_thread(conn, thread_id))
            except IntegrityError as err:
                # The domain locks the thread before writing rows that reference it, so an
                # erasure cannot slip in between; should a foreign key still find the thread
                # gone, the answer is the one a missing thread gets.
                if sqlstate(err) == _FOREIGN_KEY_VIOLATION:
                    raise owners.thread_not_found(thread_id) from err
                raise
            except DBAPIError as err:
                if sqlstate(err) not in RETRYABLE_TRANSACTION:
                    raise
                if attempt == NOTICE_ATTEMPTS:
                    raise Aborted(
                        f"the notice about thread {thread_id} lost to concurrent transactions "
                        f"{NOTICE_ATTEMPTS} times; retry",
                        thread_id=str(thread_id),
                    ) from err
                log.info(
                    "notice about thread %s lost to a concurrent transaction (%s); retrying",
                    thread_id,
                    sqlstate(err),
                )
        raise AssertionError("unreachable")  # pragma: no cover

    def RecordActivity(
        self, request: pb.RecordActivityRequest, context: grpc.ServicerContext
    ) -> pb.RecordActivityResponse:
        thread_id = parse_uuid(request.thread_id, "thread_id")
        fire_at = self._notice(
            thread_id,
            lambda conn, dataset: domain.record_activity(
                conn, thread_id, self.settings, dataset=dataset
            ),
        )
        return pb.RecordActivityResponse(fire_at=convert.ts(fire_at))

    def RecordThreadStarted(
        self, request: pb.RecordThreadStartedRequest, context: grpc.ServicerContext
    ) -> pb.RecordThreadStartedResponse:
        thread_id = parse_uuid(request.thread_id, "thread_id")
        pulled = self._notice(
            thread_id,
            lambda conn, dataset: domain.record_thread_started(
                conn, thread_id, self.settings, dataset=dataset
            ),
        )
        return pb.RecordThreadStartedResponse(timers_pulled_forward=pulled)

    def RequestEpisode(
        self, request: pb.RequestEpisodeRequest, context: grpc.ServicerContext
    ) -> pb.RequestEpisodeResponse:
        thread_id = parse_uuid(request.thread_id, "thread_id")
        trigger = _trigger(request.trigger)

        def request_episode(conn: Connection, dataset: str) -> pb.RequestEpisodeResponse:
            result = domain.request_episode(conn, thread_id, trigger, dataset=dataset)
            if result.episode is None:
                return pb.RequestEpisodeResponse(episode_queued=False)
            episode = self.vault.open_one(conn, result.episode, "episodes")
            return pb.RequestEpisodeResponse(episode_queued=True, episode=convert.episode(episode))

        return self._notice(thread_id, request_episode)

    def RunSweep(
        self, request: pb.RunSweepRequest, context: grpc.ServicerContext
    ) -> pb.RunSweepResponse:
        as_of = convert.optional_from_ts(request, "as_of")
        result = self.sweeper.run_pass(as_of, force=True)
        with self.engine.begin() as conn:
            audit.record(
                conn,
                key_prefix=access.current().prefix,
                action="sweep.run",
                details={"as_of": as_of.isoformat() if as_of else None, **vars(result)},
            )
        return pb.RunSweepResponse(
            episodes_created=result.episodes_created,
            timers_dropped=result.timers_dropped,
            timers_caught_up=result.timers_caught_up,
            claims_reclaimed=result.claims_reclaimed,
            backstop_episodes=result.backstop_episodes,
            threads_purged=result.threads_purged,
            threads_compacted=result.threads_compacted,
        )

    @genai.memory_rpc("SchedulerService/DeleteEpisode")
    def DeleteEpisode(
        self, request: pb.DeleteEpisodeRequest, context: grpc.ServicerContext
    ) -> pb.DeleteEpisodeResponse:
        episode_id = parse_uuid(request.episode_id, "episode_id")
        with self.engine.begin() as conn:
            row, dataset, action = records.delete_record(conn, self.vault, episode_id)
            _audit(conn, action, dataset, episode_id)
        return pb.DeleteEpisodeResponse(episode=convert.episode(row))

    @genai.memory_rpc("SchedulerService/RetryEpisode")
    def RetryEpisode(
        self, request: pb.RetryEpisodeRequest, context: grpc.ServicerContext
    ) -> pb.RetryEpisodeResponse:
        episode_id = parse_uuid(request.episode_id, "episode_id")
        with self.engine.begin() as conn:
            row, dataset = records.retry_record(conn, self.vault, episode_id)
            _audit(conn, "episode.retry", dataset, episode_id)
        return pb.RetryEpisodeResponse(episode=convert.episode(row))


def _audit(conn: Connection, action: str, dataset: str, episode_id: uuid.UUID) -> None:
    audit.record(
        conn,
        key_prefix=access.current().prefix,
        action=action,
        dataset=dataset,
        target=str(episode_id),
    )


def register(server: grpc.Server, servicer: SchedulerServicer) -> None:
    pb_grpc.add_SchedulerServiceServicer_to_server(servicer, server)
