"""The SDK against real service processes (and a fake server for the retry policy).

Every test that takes ``make_client`` runs twice: with the blocking EpisodicClient and with
the asyncio AsyncEpisodicClient (see conftest.py)."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from concurrent import futures
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from episodic.render import render_episodes
from episodic.sdk.aio import AsyncEpisodicClient
from episodic.sdk.client import (
    AddMessagesResult,
    AlreadyExistsError,
    EpisodicClient,
    InvalidArgumentError,
    NewMessage,
    NotFoundError,
    RecallResult,
    ResourceExhaustedError,
    ScoredEpisode,
    UnavailableError,
    default_address,
)
from episodic.testing.http2 import ResettingServer
from episodic.testing.processes import wait_until
from episodic.v1 import episode_pb2, ingest_service_pb2, recall_service_pb2
from episodic.v1 import ingest_service_pb2_grpc as ingest_grpc
from episodic.v1 import recall_service_pb2_grpc as recall_grpc
from tests.recall.factory import T0, make_episode


@pytest.fixture
def ingest_recall(spawn, make_client):  # type: ignore[no-untyped-def]
    ingest, recall = spawn("ingest"), spawn("recall")
    with make_client(ingest=ingest.address, recall=recall.address, timeout=10) as client:
        yield client


def test_threads_and_messages(ingest_recall: EpisodicClient) -> None:
    client = ingest_recall
    thread = client.start_thread("user_42", "billing-q2", metadata={"channel": "web"})
    assert thread.dataset == "user_42" and thread.label == "billing-q2"
    assert thread.metadata == {"channel": "web"}

    first = client.add_message(thread.thread_id, "user", "Hello there")
    assert first.sequence == 1 and first.stored
    assert first.idempotency_key.startswith("auto:"), "keys make AddMessages retry-safe"

    backfilled = datetime(2025, 1, 2, 3, 4, tzinfo=UTC)
    result = client.add_messages(
        thread.thread_id,
        [
            ("assistant", "Hi! How can I help?"),
            {"role": "user", "content": "Invoice 42 failed", "metadata": {"name": "Ann"}},
            NewMessage("user", "from the past", created_at=backfilled, idempotency_key="k1"),
        ],
    )
    assert isinstance(result, AddMessagesResult) and result.stored_count == 3
    assert result.sequences == [2, 3, 4] and result.thread_id == thread.thread_id
    assert result.receipts[2].created_at == backfilled

    replay = client.add_messages(
        thread.thread_id,
        [NewMessage("user", "from the past", created_at=backfilled, idempotency_key="k1")],
    )
    assert replay.stored_count == 0 and replay.receipts[0].sequence == 4
    assert not replay.receipts[0].stored
    # The same key with other content is refused, naming the key: nothing is dropped silently.
    with pytest.raises(AlreadyExistsError) as reused:
        client.add_messages(thread.thread_id, [NewMessage("user", "x", idempotency_key="k1")])
    assert reused.value.reason == "IDEMPOTENCY_KEY_REUSED" and "'k1'" in reused.value.message

    session = client.load_session(thread.thread_id)
    assert [m.content for m in session][:2] == ["Hello there", "Hi! How can I help?"]
    assert session[2].metadata == {"name": "Ann"} and session[3].created_at == backfilled
    page = client.list_messages(thread.thread_id, page_size=3)
    assert len(page) == 3 and page.next_page_token
    rest = client.list_messages(thread.thread_id, page_size=3, page_token=page.next_page_token)
    assert [m.sequence for m in rest] == [4] and not rest.next_page_token

    other = client.start_thread("user_42", "support")
    client.add_message(other.thread_id, "user", "newest activity")
    assert [t.thread_id for t in client.recent_threads("user_42", 5)] == [
        other.thread_id,
        thread.thread_id,
    ]
    assert len(client.recent_threads("user_42", 1)) == 1
    assert client.recent_threads("user_42", 0) == []
    with pytest.raises(ValueError, match="must not be negative"):
        client.recent_threads("user_42", -3)
    assert client.get_thread(thread.thread_id).message_count == 4

    ended = client.end_thread(thread.thread_id)
    assert ended.episode_queued  # durable even though no Scheduler runs in this test


def test_errors_are_typed_with_code_reason_and_field(ingest_recall: EpisodicClient) -> None:
    client = ingest_recall
    with pytest.raises(InvalidArgumentError) as caught:
        client.start_thread("not a dataset!")
    err = caught.value
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.reason == "INVALID_ARGUMENT" and err.field == "dataset"
    with pytest.raises(NotFoundError) as missing:
        client.get_episode("0b7f3e0c-6a3c-4c1e-9a57-2f1b8f4e5d21")
    assert missing.value.reason == "NOT_FOUND"
    with pytest.raises(InvalidArgumentError):
        client.recall("ds", "q", similarity_weight=2.0)
    with pytest.raises(ValueError, match="unknown role"):
        client.add_message("0b7f3e0c-6a3c-4c1e-9a57-2f1b8f4e5d21", "robot", "x")


def test_recall_and_admin_reads(ingest_recall: EpisodicClient, engine) -> None:  # type: ignore[no-untyped-def]
    client = ingest_recall
    with engine.begin() as conn:
        first = make_episode(
            conn,
            "user_42",
            ["we compared the Corolla Hybrid with two SUVs"],
            label="car-search",
            ended_at=T0 - timedelta(days=3),
        )
        current = make_episode(
            conn,
            "user_42",
            ["test drive booked for Saturday"],
            thread_id=first.thread_id,
            key_learnings=["user books a test drive"],
            entities=["toyota corolla hybrid"],
            event_type="decision",
            ended_at=T0 - timedelta(days=2),
        )
        make_episode(conn, "user_42", ["invoice questions"], ended_at=T0 - timedelta(hours=1))
        make_episode(conn, "user_42", ["broken"], status="failed", ended_at=T0)

    found = client.recall("user_42", "Corolla hybrid", as_of=T0, limit=5)
    assert isinstance(found, RecallResult) and found.episode_count == 2
    top = found.episodes[0]
    assert isinstance(top, ScoredEpisode)
    assert top.episode.episode_id == str(current.episode_id)
    assert top.summary == top.episode.summary  # the episode's fields, for convenience
    assert top.thread_label == "car-search" and top.key_learnings == ["user books a test drive"]
    assert top.status == "completed" and top.trigger == "explicit"
    assert top.relevance_score == pytest.approx(0.7 * top.similarity + 0.3 * top.recency)

    # min_match reaches Recall: a question nothing here answers gets nothing with it
    dog = "what is my dog's name?"
    assert len(client.recall("user_42", dog, as_of=T0, limit=5)) == 2
    assert list(client.recall("user_42", dog, as_of=T0, limit=5, min_match=0.5)) == []
    assert len(client.recall("user_42", "Corolla hybrid", as_of=T0, min_match=0.5)) >= 1

    latest = client.recall("user_42", as_of=T0, limit=1)
    assert [e.summary for e in latest] == ["invoice questions"]
    decisions = client.recall("user_42", event_type="decision", entities=["Toyota Corolla Hybrid"])
    assert [e.episode.episode_id for e in decisions] == [str(current.episode_id)]

    text = render_episodes(found.episodes[:1], now=T0)
    assert text.startswith('[2 days ago, 2026-05-15 12:00 UTC, thread "car-search"]\n')

    assert client.get_episode(str(first.episode_id)).status == "archived"
    page = client.list_episodes("user_42", status="completed", page_size=1)
    assert len(page) == 1 and page.next_page_token
    assert len(list(client.iter_episodes("user_42"))) == 4
    assert [e.status for e in client.iter_episodes("user_42", status="failed")] == ["failed"]
    hits = client.search_episodes("user_42", "SUVs")
    assert [h.episode.episode_id for h in hits] == [str(current.episode_id)]
    with pytest.raises(ValueError, match="unknown status"):
        client.list_episodes("user_42", status="done")


def test_record_event_and_recall_it(ingest_recall: EpisodicClient) -> None:
    client = ingest_recall
    thread = client.start_thread("user_42", "billing-q2")
    at = datetime(2026, 5, 15, 9, 30, tzinfo=UTC)
    first = client.record_event(
        "user_42",
        "Switched the Atlas invoices to annual billing",
        event_type="decision",
        entities=["Project Atlas"],
        occurred_at=at,
        thread_id=thread.thread_id,
        idempotency_key="evt-1",
    )
    assert first.stored and first.event.is_event and first.event.event_source == "agent"
    assert first.event.ended_at == at and first.event.entities == ["project atlas"]
    again = client.record_event(
        "user_42",
        "Switched the Atlas invoices to annual billing",
        event_type="decision",
        entities=["project atlas"],
        occurred_at=at,
        thread_id=thread.thread_id,
        idempotency_key="evt-1",
    )
    assert not again.stored and again.event.episode_id == first.event.episode_id
    with pytest.raises(AlreadyExistsError):
        client.record_event("user_42", "other", event_type="decision", idempotency_key="evt-1")
    auto = client.record_event(
        "user_42", "Ran the nightly export", event_type="tool_call", actor="cron"
    )
    assert auto.stored

    found = client.recall("user_42", "annual billing Atlas", as_of=at + timedelta(days=2))
    assert found.episodes[0].episode.episode_id == first.event.episode_id
    assert found.episodes[0].kind == "event"
    by_actor = client.recall("user_42", actor="cron")
    assert [e.episode.episode_id for e in by_actor] == [auto.event.episode_id]
    assert not client.recall("user_42", exclude_events=True).episodes


def test_the_whole_loop(spawn, make_client) -> None:  # type: ignore[no-untyped-def]
    scheduler = spawn("scheduler")
    ingest = spawn("ingest", env={"EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    summariser, recall = spawn("summariser"), spawn("recall")
    with make_client(
        ingest=ingest.address,
        recall=recall.address,
        scheduler=scheduler.address,
        summariser=summariser.address,
    ) as client:
        client.wait_ready()
        thread = client.start_thread("loop_user", "car-search")
        client.add_messages(
            thread.thread_id,
            [
                ("user", "I need a family car under $30k, SUVs feel too big."),
                ("assistant", "The Toyota Corolla Hybrid fits city commuting and the budget."),
                ("user", "Great, I will book a Corolla Hybrid test drive on Saturday."),
            ],
        )
        ended = client.end_thread(thread.thread_id)
        assert ended.episode_queued
        # EndThread names the episode when the Scheduler answered in time (a loaded
        # machine may not: then the Scheduler queues it moments later).
        processed = wait_until(lambda: client.process_pending(10), timeout=30)
        assert processed == 1
        episode = client.wait_for_episode(thread.thread_id, timeout=30)
        assert episode.status == "completed" and episode.summary and episode.end_sequence == 3
        if ended.episode_id:  # the Scheduler answered in time: EndThread named it
            assert episode.episode_id == ended.episode_id

        found = client.recall("loop_user", "car recommendations")
        assert [e.episode.episode_id for e in found] == [episode.episode_id]
        assert "Corolla" in render_episodes(found.episodes)
        assert client.check_providers()["embedder"].ok
        assert client.record_activity(thread.thread_id) is not None
        assert client.record_thread_started(thread.thread_id) == 0
        assert client.request_episode(thread.thread_id) is None  # nothing uncaptured
        assert client.run_sweep().episodes_created == 0

        deleted = client.delete_episode(episode.episode_id)
        assert deleted.status == "archived"
        assert client.recall("loop_user", "car").episodes == []
        assert client.get_episode(episode.episode_id).status == "archived"


# ---- retries: only what is safe to repeat -------------------------------------------------


class _Flaky(recall_grpc.RecallServiceServicer, ingest_grpc.IngestServiceServicer):
    """Fails the first call of each method with UNAVAILABLE, then answers."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.lock = threading.Lock()
        self.rate_limited = 0  # SearchEpisodes: how many first calls a rate limit refuses

    def _count(self, name: str) -> int:
        with self.lock:
            self.calls[name] = self.calls.get(name, 0) + 1
            return self.calls[name]

    def GetEpisode(self, request, context):  # type: ignore[no-untyped-def]
        if self._count("GetEpisode") == 1:
            context.abort(grpc.StatusCode.UNAVAILABLE, "try again")
        return recall_service_pb2.GetEpisodeResponse(
            episode=episode_pb2.Episode(episode_id=request.episode_id)
        )

    def AddMessages(self, request, context):  # type: ignore[no-untyped-def]
        if self._count("AddMessages") == 1:
            context.abort(grpc.StatusCode.UNAVAILABLE, "try again")
        return ingest_service_pb2.AddMessagesResponse(
            thread_id=request.thread_id,
            receipts=[ingest_service_pb2.MessageReceipt(sequence=1, stored=True)],
            stored_count=1,
        )

    def EndThread(self, request, context):  # type: ignore[no-untyped-def]
        self._count("EndThread")
        context.abort(grpc.StatusCode.UNAVAILABLE, "down")

    def ListEpisodes(self, request, context):  # type: ignore[no-untyped-def]
        if self._count("ListEpisodes") == 1:
            context.abort(grpc.StatusCode.ABORTED, "lost to a concurrent change")
        return recall_service_pb2.ListEpisodesResponse()

    def SearchEpisodes(self, request, context):  # type: ignore[no-untyped-def]
        if self._count("SearchEpisodes") <= self.rate_limited:
            retry = error_details_pb2.RetryInfo()
            retry.retry_delay.FromTimedelta(timedelta(milliseconds=50))
            detail = any_pb2.Any()
            detail.Pack(retry)
            status = status_pb2.Status(
                code=code_pb2.RESOURCE_EXHAUSTED, message="slow down", details=[detail]
            )
            context.abort_with_status(rpc_status.to_status(status))
        return recall_service_pb2.SearchEpisodesResponse()


@pytest.fixture
def flaky():  # type: ignore[no-untyped-def]
    servicer = _Flaky()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    recall_grpc.add_RecallServiceServicer_to_server(servicer, server)
    ingest_grpc.add_IngestServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    server.stop(0)


def test_idempotent_calls_are_retried_and_others_are_not(flaky, make_client) -> None:  # type: ignore[no-untyped-def]
    servicer, address = flaky
    with make_client(ingest=address, recall=address, timeout=10) as client:
        assert client.get_episode("e1").episode_id == "e1"
        assert servicer.calls["GetEpisode"] == 2
        # Keyed (automatically) AddMessages is retried …
        client.add_message("t", "user", "hello")
        assert servicer.calls["AddMessages"] == 2
        with pytest.raises(UnavailableError):
            client.end_thread("t")  # … EndThread is not.
        assert servicer.calls["EndThread"] == 1
        # A call that lost to a concurrent change (ABORTED) did not take effect: repeated.
        assert client.list_episodes("ds").items == []
        assert servicer.calls["ListEpisodes"] == 2
    servicer.calls.clear()
    with make_client(ingest=address, recall=address, auto_idempotency_keys=False) as client:
        with pytest.raises(UnavailableError):
            client.add_message("t", "user", "no key: a retry could store it twice")
        assert servicer.calls["AddMessages"] == 1


def test_every_call_the_sdk_may_repeat_is_in_its_channels_retry_policy() -> None:
    """A call the SDK marks safe to repeat (``retry`` not False) is repeated on
    UNAVAILABLE only if its method is in the channel's retry policy (``RETRIED``): one
    missing there is tried once, whatever its docstring promises (RecordEvent,
    EntityTimeline, GetDatasetPolicy and ListEntities were). Read from the source, every
    ``call(core, service, method, …)`` in the modules episodic.sdk.operations re-exports."""
    import ast
    import inspect

    from episodic.sdk import channels, operations

    flows = [getattr(operations, name) for name in operations.__all__]
    files = sorted({str(inspect.getsourcefile(f)) for f in flows if inspect.isfunction(f)})
    trees = [ast.parse(Path(file).read_text()) for file in files]
    repeatable: set[tuple[str, str]] = set()
    for node in (n for tree in trees for n in ast.walk(tree)):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "call"):
            continue
        service, method = (a.value for a in node.args[1:3])  # type: ignore[attr-defined]
        retry = next((k.value for k in node.keywords if k.arg == "retry"), None)
        if not (isinstance(retry, ast.Constant) and retry.value is False):
            repeatable.add((service, method))
    assert len(repeatable) > 10  # the scan found the calls
    missing = {
        (service, method)
        for service, method in repeatable
        if method not in channels.RETRIED[service][1]
    }
    assert not missing


def test_a_reset_stream_is_unavailable_and_safe_calls_are_repeated(make_client) -> None:  # type: ignore[no-untyped-def]
    # grpcio reports an HTTP/2 RST_STREAM as INTERNAL "Stream removed", the code of a
    # server's bug; the chaos run saw one from a live Ingest under a database restart.
    # Real frames on a real socket: two calls reset, then answers.
    with ResettingServer(resets=2) as peer, make_client(ingest=peer.address, timeout=10) as client:
        assert client.list_threads("ds").items == []  # repeated past both resets
        assert peer.streams == 3
    with ResettingServer(resets=1) as peer, make_client(ingest=peer.address, timeout=10) as client:
        with pytest.raises(UnavailableError) as reset:
            client.create_thread("ds")  # not safe to repeat: it may have taken effect
        assert peer.streams == 1
        assert reset.value.reason == "STREAM_RESET"
        assert reset.value.metadata == {"grpc_code": "INTERNAL"}
        assert "may or may not have taken effect" in reset.value.message
        assert "Received RST_STREAM with error code 2" in reset.value.message
    with (
        ResettingServer(resets=100) as peer,
        make_client(ingest=peer.address, timeout=10) as client,
    ):
        with pytest.raises(UnavailableError, match="reset the call"):
            client.list_threads("ds")
        assert peer.streams == 5  # as many attempts as the channel's own retry policy


def test_rate_limited_calls_wait_as_long_as_the_server_asks(flaky, make_client) -> None:  # type: ignore[no-untyped-def]
    servicer, address = flaky
    servicer.rate_limited = 2
    with make_client(recall=address, timeout=10) as client:
        started = time.monotonic()
        assert client.search_episodes("ds", "q") == []
        assert servicer.calls["SearchEpisodes"] == 3
        assert time.monotonic() - started >= 0.1  # twice the RetryInfo's 50 ms
    servicer.calls.clear()
    with make_client(recall=address, rate_limit_retries=1) as client:
        with pytest.raises(ResourceExhaustedError) as refused:
            client.search_episodes("ds", "q")
        assert refused.value.retry_after == pytest.approx(0.05)
        assert servicer.calls["SearchEpisodes"] == 2


def test_both_clients_have_the_same_surface() -> None:
    def public(cls: type) -> dict[str, object]:
        return {name: getattr(cls, name) for name in dir(cls) if not name.startswith("_")}

    blocking, asynchronous = public(EpisodicClient), public(AsyncEpisodicClient)
    assert blocking.keys() == asynchronous.keys()
    assert inspect.signature(EpisodicClient) == inspect.signature(AsyncEpisodicClient)
    for name, method in blocking.items():
        assert callable(method), name
        mine, theirs = inspect.signature(method), inspect.signature(asynchronous[name])  # type: ignore[arg-type]
        assert mine.parameters == theirs.parameters, name
        assert method.__doc__ == asynchronous[name].__doc__, name
        if name == "iter_episodes":
            assert theirs.return_annotation == "AsyncIterator[Episode]"
        else:
            assert inspect.iscoroutinefunction(asynchronous[name]), name
            assert mine.return_annotation == theirs.return_annotation, name


def test_the_async_client_serves_concurrent_tasks_and_a_new_loop(flaky) -> None:  # type: ignore[no-untyped-def]
    _, address = flaky
    client = AsyncEpisodicClient(ingest=address, recall=address, timeout=10)

    async def many() -> list[str]:
        found = await asyncio.gather(*(client.get_episode(f"e{i}") for i in range(20)))
        return [episode.episode_id for episode in found]

    assert asyncio.run(many()) == [f"e{i}" for i in range(20)]
    # A second event loop (a second asyncio.run) cannot use the first one's channels.
    assert asyncio.run(client.get_episode("again")).episode_id == "again"
    asyncio.run(client.close())


def test_default_addresses(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("EPISODIC_RECALL_ADDRESS", raising=False)
    monkeypatch.delenv("EPISODIC_RECALL_PORT", raising=False)
    assert default_address("recall") == "127.0.0.1:50054"
    monkeypatch.setenv("EPISODIC_RECALL_PORT", "6000")
    assert default_address("recall") == "127.0.0.1:6000"
    monkeypatch.setenv("EPISODIC_RECALL_ADDRESS", "recall.svc:50054")
    assert default_address("recall") == "recall.svc:50054"


def test_an_address_whose_port_no_socket_has_is_refused() -> None:
    """gRPC took localhost:99999 as port 34463 (99999 - 65536), and the calls went there."""
    for address in ("localhost:99999", "127.0.0.1:0", "[::1]:70000", "dns:///h:65536"):
        with pytest.raises(ValueError, match="port from 1 to 65535"):
            EpisodicClient(recall=address)
    for address in ("localhost:50054", "[::1]:50054", "unix:/tmp/episodic.sock", "recall"):
        EpisodicClient(recall=address).close()


def test_every_status_code_the_services_answer_has_its_error_class() -> None:
    """Each code the services raise (episodic.errors) maps to an EpisodicRpcError subclass
    a caller can catch by name; ABORTED (a second erasure of a dataset being erased) was
    left as the base class."""
    from episodic import errors, sdk
    from episodic.sdk.errors import _ERROR_TYPES

    raised = {
        cls.code
        for cls in vars(errors).values()
        if isinstance(cls, type) and issubclass(cls, errors.EpisodicError)
    } - {grpc.StatusCode.INTERNAL}
    assert raised <= _ERROR_TYPES.keys()

    class Refused(grpc.RpcError):
        def code(self) -> grpc.StatusCode:
            return grpc.StatusCode.ABORTED

        def details(self) -> str:
            return "dataset 'x' is being erased by another call"

    assert isinstance(sdk.translate_error(Refused(), "DeleteDataset"), sdk.AbortedError)
