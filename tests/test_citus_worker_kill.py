"""A Citus worker killed under load (issue 38): writers add messages through Ingest to
datasets on both workers of a cluster of their own; one worker's postmaster is killed
(SIGKILL: a crashed machine) and started again on its data directory. What must hold:

- a call that fails while the worker is down fails with a status a client retries
  (UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED), never INTERNAL or UNKNOWN, and names no
  internals;
- datasets on the other worker keep being written while it is down (a dataset lives on
  one shard: another tenant's outage is not this one's). Until 2026-12-05 they were not:
  AddMessages' one statement reached every worker there (services/ingest/statements.py,
  ``TwoSteps``);
- writes to the killed worker's datasets succeed again once it is back, without
  restarting anything of ours;
- every acknowledged message is stored exactly once, at the sequence its receipt named
  (a retry with the same idempotency key after an unknown outcome is not a second copy);
- with the four services running: the other worker's tenant is still recalled while the
  worker is down, and its work accepted meanwhile (an ended thread) becomes its episode
  while the worker is still down; the victim's becomes its episode once the worker is back,
  with nothing of ours restarted. Until 2026-12-06 no episode was made for any tenant while
  a worker was down: the claims' discovery read every shard, and the episode opening sent
  its intermediate results to every worker (store/shards.py ``read_every_shard``,
  store/episodes.py ``_open_windows``).
"""

from __future__ import annotations

import os
import threading
import uuid
from dataclasses import dataclass, field

import grpc
import pytest
from sqlalchemy import text

from episodic.sdk.client import EpisodicClient, EpisodicRpcError
from episodic.store.db import make_engine
from episodic.testing.citus import CitusDatabases, citus_cluster
from episodic.testing.processes import start_service, wait_until
from episodic.v1 import ingest_service_pb2 as pb
from episodic.v1 import ingest_service_pb2_grpc as pb_grpc
from episodic.v1.episode_pb2 import ROLE_USER

pytestmark = pytest.mark.citus

#: What a client may see while a worker is down, and retries.
RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
             grpc.StatusCode.ABORTED}  # fmt: skip


@dataclass
class Writer:
    """Adds one message at a time to one thread, each with its own idempotency key, and
    repeats a failed call with the same key until it is acknowledged (as the SDK does)."""

    stub: pb_grpc.IngestServiceStub
    thread_id: str
    acked: list[int] = field(default_factory=list)  # sequences the receipts named
    failures: dict[str, int] = field(default_factory=dict)  # status -> count
    messages: list[str] = field(default_factory=list)  # the failures' details
    stop: threading.Event = field(default_factory=threading.Event)
    unknown: bool = False  # stopped while a key was not acknowledged (stored or not)

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            key = f"{self.thread_id}-{n}"
            while True:  # this key until it is acknowledged: nothing is left unknown
                try:
                    reply = self.stub.AddMessages(
                        pb.AddMessagesRequest(
                            thread_id=self.thread_id,
                            messages=[
                                pb.NewMessage(
                                    role=ROLE_USER, content=f"message {n}", idempotency_key=key
                                )
                            ],
                        ),
                        timeout=5,
                    )
                    self.acked.append(reply.receipts[0].sequence)
                    break
                except grpc.RpcError as err:
                    code = err.code().name
                    self.failures[code] = self.failures.get(code, 0) + 1
                    if len(self.messages) < 5:
                        self.messages.append(f"{code}: {err.details()}")
                    if self.stop.wait(0.1):  # a client's back-off before its retry
                        self.unknown = True  # stopped with this key's outcome unknown
                        return


def _unhandled(log: str) -> str:
    """The service's own account of a call it answered INTERNAL (the lines from its
    ``unhandled error`` record on), for the assertion that no call should have been."""
    at = log.find("unhandled error")
    return log[at : at + 3000] if at >= 0 else "(no unhandled error in the service log)"


def _worker_of(engine, dataset: str) -> int:  # type: ignore[no-untyped-def]
    """The port of the worker holding ``dataset``'s messages."""
    with engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT nodeport FROM citus_shards WHERE table_name = 'messages'::regclass "
                    "AND shardid = get_shard_id_for_distribution_column('messages', CAST(:d AS text))"
                ),
                {"d": dataset},
            ).scalar_one()
        )


def test_a_killed_worker_fails_its_calls_retryably_and_loses_nothing() -> None:
    if not os.environ.get("EPISODIC_TEST_CITUS"):
        pytest.skip("a worker killed needs the Citus tier (make test-citus)")
    # durable: an acknowledged commit survives the kill, as with production's settings
    with citus_cluster(workers=2, durable=True) as cluster:
        url = CitusDatabases(cluster).create()
        engine = make_engine(url, pool_size=2)
        ingest = start_service("ingest", url)
        try:
            with grpc.insecure_channel(ingest.address) as channel:
                stub = pb_grpc.IngestServiceStub(channel)
                (victim_port, victim), (_, other) = _one_per_worker(engine)
                writers = {
                    name: Writer(stub, stub.CreateThread(pb.CreateThreadRequest(dataset=name),
                                                         timeout=30).thread.thread_id)
                    for name in (victim, other)
                }  # fmt: skip
                threads = [threading.Thread(target=w.run, daemon=True) for w in writers.values()]
                for t in threads:
                    t.start()
                try:
                    wait_until(lambda: all(len(w.acked) >= 20 for w in writers.values()), 60)

                    node = next(n for n in cluster.nodes if n.port == victim_port)
                    cluster.kill(node)
                    wait_until(lambda: writers[victim].failures, 60, message="no call failed")
                    down = len(writers[victim].acked)
                    # The other worker's tenant is written while the victim's is down.
                    before = len(writers[other].acked)
                    wait_until(
                        lambda: len(writers[other].acked) >= before + 20,
                        60,
                        message=f"{other}'s writes stopped while another worker was down",
                    )
                    # and the victim's not (nothing of ours restarted or hid the worker)
                    assert len(writers[victim].acked) == down

                    cluster.start_again(node)
                    after = len(writers[victim].acked)
                    try:
                        wait_until(lambda: len(writers[victim].acked) >= after + 20, 120)
                    except AssertionError:
                        raise AssertionError(
                            f"{victim} not written again after the restart: "
                            f"{writers[victim].failures} {writers[victim].messages}"
                        ) from None
                    later = len(writers[other].acked)
                    wait_until(lambda: len(writers[other].acked) >= later + 20, 120)
                finally:
                    for w in writers.values():
                        w.stop.set()
                    for t in threads:
                        t.join(30)
                for name, w in writers.items():
                    unexpected = set(w.failures) - {c.name for c in RETRYABLE}
                    assert not unexpected, (name, w.failures, w.messages, _unhandled(ingest.log()))
                    for message in w.messages:
                        assert "Traceback" not in message and "psycopg" not in message, message
                    # every acknowledged message once, at its receipt's sequence, no gap
                    assert w.acked == list(range(1, len(w.acked) + 1)), (name, w.acked[-5:])
                    with engine.connect() as conn:
                        stored = conn.execute(
                            text(
                                "SELECT count(*), count(DISTINCT idempotency_key), "
                                "max(sequence) FROM messages WHERE thread_id = :t"
                            ),
                            {"t": uuid.UUID(w.thread_id)},
                        ).one()
                    n = len(w.acked) + (1 if w.unknown and stored[0] > len(w.acked) else 0)
                    assert tuple(stored) == (n, n, n), (name, tuple(stored), len(w.acked))
        finally:
            ingest.terminate()
            engine.dispose()


def _one_per_worker(engine) -> tuple[tuple[int, str], tuple[int, str]]:  # type: ignore[no-untyped-def]
    """A dataset on each worker, with its worker's port (a dataset's shard is its hash's)."""
    on: dict[int, str] = {}
    for i in range(40):
        dataset = f"tenant{i:02d}"
        on.setdefault(_worker_of(engine, dataset), dataset)
        if len(on) == 2:
            break
    first, second = sorted(on.items())
    return first, second


def test_recall_serves_the_other_worker_and_the_loops_resume_after_a_worker_is_back() -> None:
    if not os.environ.get("EPISODIC_TEST_CITUS"):
        pytest.skip("a worker killed needs the Citus tier (make test-citus)")
    loops = {"EPISODIC_SUMMARISER_POLL_INTERVAL": "1", "EPISODIC_SCHEDULER_POLL_INTERVAL": "1"}
    with citus_cluster(workers=2, durable=True) as cluster:
        url = CitusDatabases(cluster).create()
        engine = make_engine(url, pool_size=2)
        scheduler = start_service("scheduler", url, loops)
        services = [
            scheduler,
            start_service(
                "ingest", url, {**loops, "EPISODIC_SCHEDULER_ADDRESS": scheduler.address}
            ),
            start_service("summariser", url, loops),
            start_service("recall", url, loops),
        ]
        _, ingest, _, recall = services
        client = EpisodicClient(
            ingest=ingest.address, recall=recall.address, scheduler=scheduler.address, timeout=10
        )

        def summarised(dataset: str) -> str:
            thread = client.start_thread(dataset, "pricing")
            client.add_messages(
                thread.thread_id,
                [
                    ("user", f"We agreed the Pro tier costs $29 for {dataset}."),
                    ("assistant", "Noted."),
                ],
            )
            client.end_thread(thread.thread_id)
            return thread.thread_id

        try:
            (victim_port, victim), (_, other) = _one_per_worker(engine)
            for dataset in (victim, other):
                episode = client.wait_for_episode(summarised(dataset), timeout=60)
                assert episode.status == "completed", (dataset, episode.status)

            node = next(n for n in cluster.nodes if n.port == victim_port)
            cluster.kill(node)
            # The other worker's tenant is recalled (its statements go to its shard alone);
            # the victim's answers a status a client retries.
            answer = wait_until(
                lambda: _recalled(client, other), 60, message=f"{other} not recalled"
            )
            assert len(answer.episodes) == 1
            with pytest.raises(EpisodicRpcError) as refused:
                client.recall(victim, "what did we agree about the Pro tier")
            assert refused.value.code in RETRYABLE, refused.value
            # The other tenant's work goes on: its ended thread becomes an episode while the
            # worker is still down (the Scheduler and Summariser skip the dead worker's shards).
            episode = client.wait_for_episode(summarised(other), timeout=120)
            assert episode.status == "completed", episode.status

            cluster.start_again(node)
            episode = client.wait_for_episode(summarised(victim), timeout=120)
            assert episode.status == "completed", episode.status
            for dataset, count in ((victim, 2), (other, 2)):
                episodes = list(client.iter_episodes(dataset))
                assert len(episodes) == count, (dataset, [e.status for e in episodes])
                assert all(e.start_sequence == 1 and e.end_sequence == 2 for e in episodes)
        except BaseException:
            for service in services:  # what the loops said, for the failure's report
                print(f"--- {service.name} ---\n{service.log()[-6000:]}")
            raise
        finally:
            client.close()
            for service in services:
                service.terminate()
            engine.dispose()


def _recalled(client: EpisodicClient, dataset: str):  # type: ignore[no-untyped-def]
    try:
        return client.recall(dataset, "what did we agree about the Pro tier")
    except EpisodicRpcError as err:
        assert err.code in RETRYABLE, err
        return None  # the coordinator may still be finding out which worker died
