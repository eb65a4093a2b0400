"""SchedulerService: parse the request, call the domain, map the result."""

from __future__ import annotations

import uuid

import grpc
from sqlalchemy import Connection, Engine

from episodic import access, convert
from episodic.config import SchedulerSettings
from episodic.errors import InvalidArgument
from episodic.store import audit, owners, records
from episodic.store.vault import Vault
from episodic.v1 import scheduler_service_pb2 as pb
from episodic.v1 import scheduler_service_pb2_grpc as pb_grpc
from episodic.validation import parse_uuid

from . import domain
from .sweeper import Sweeper


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

    def RecordActivity(
        self, request: pb.RecordActivityRequest, context: grpc.ServicerContext
    ) -> pb.RecordActivityResponse:
        thread_id = parse_uuid(request.thread_id, "thread_id")
        with self.engine.begin() as conn:
            dataset = owners.require_thread(conn, thread_id)
            fire_at = domain.record_activity(conn, thread_id, self.settings, dataset=dataset)
        return pb.RecordActivityResponse(fire_at=convert.ts(fire_at))

    def RecordThreadStarted(
        self, request: pb.RecordThreadStartedRequest, context: grpc.ServicerContext
    ) -> pb.RecordThreadStartedResponse:
        thread_id = parse_uuid(request.thread_id, "thread_id")
        with self.engine.begin() as conn:
            dataset = owners.require_thread(conn, thread_id)
            pulled = domain.record_thread_started(conn, thread_id, self.settings, dataset=dataset)
        return pb.RecordThreadStartedResponse(timers_pulled_forward=pulled)

    def RequestEpisode(
        self, request: pb.RequestEpisodeRequest, context: grpc.ServicerContext
    ) -> pb.RequestEpisodeResponse:
        thread_id = parse_uuid(request.thread_id, "thread_id")
        trigger = _trigger(request.trigger)
        with self.engine.begin() as conn:
            dataset = owners.require_thread(conn, thread_id)
            result = domain.request_episode(conn, thread_id, trigger, dataset=dataset)
            if result.episode is None:
                return pb.RequestEpisodeResponse(episode_queued=False)
            episode = self.vault.open_one(conn, result.episode, "episodes")
        return pb.RequestEpisodeResponse(episode_queued=True, episode=convert.episode(episode))

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

    def DeleteEpisode(
        self, request: pb.DeleteEpisodeRequest, context: grpc.ServicerContext
    ) -> pb.DeleteEpisodeResponse:
        episode_id = parse_uuid(request.episode_id, "episode_id")
        with self.engine.begin() as conn:
            row, dataset, action = records.delete_record(conn, self.vault, episode_id)
            _audit(conn, action, dataset, episode_id)
        return pb.DeleteEpisodeResponse(episode=convert.episode(row))

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
