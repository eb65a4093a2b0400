"""The Recall service as a real process: requests, answers and status codes over gRPC."""

from __future__ import annotations

import uuid
from datetime import timedelta

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from episodic.store.recall_queries import RECENCY_SPAN
from episodic.v1 import episode_pb2
from episodic.v1 import recall_service_pb2 as pb
from episodic.v1 import recall_service_pb2_grpc as pb_grpc
from tests.recall.factory import T0, make_episode

EPISODES = [pb.RECALL_INCLUDE_EPISODES]


def _reason(err: grpc.RpcError) -> tuple[str, dict[str, str]]:
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    assert status is not None, "every error carries a google.rpc.Status"
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    return info.reason, dict(info.metadata)


def _ts(dt):  # type: ignore[no-untyped-def]
    from google.protobuf import timestamp_pb2

    out = timestamp_pb2.Timestamp()
    out.FromDatetime(dt)
    return out


@pytest.fixture
def recall(spawn, engine):  # type: ignore[no-untyped-def]
    service = spawn("recall")
    with service.channel() as channel:
        yield pb_grpc.RecallServiceStub(channel)


def test_recall_over_grpc(recall, engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        billing = make_episode(
            conn,
            "user_42",
            ["we agreed the Pro tier costs $29 for project Atlas"],
            key_learnings=["user chose the Pro tier"],
            entities=["project atlas"],
            event_type="decision",
            label="billing-q2",
            ended_at=T0 - timedelta(days=3),
        )
        make_episode(conn, "user_42", ["invoice 42 escalated"], ended_at=T0 - timedelta(hours=2))
        make_episode(conn, "user_42", ["pending one"], status="pending", ended_at=T0)

    # Episodes are opt-in: without include, nothing comes back.
    assert not recall.Recall(pb.RecallRequest(dataset="user_42"), timeout=10).HasField("episodes")

    answer = recall.Recall(
        pb.RecallRequest(
            dataset="user_42", query="Pro tier pricing", include=EPISODES, as_of=_ts(T0)
        ),
        timeout=10,
    ).episodes
    assert answer.episode_count == 2
    top = answer.episodes[0]
    assert top.episode.episode_id == str(billing.episode_id)
    assert top.episode.thread_label == "billing-q2"
    assert top.episode.status == episode_pb2.EPISODE_STATUS_COMPLETED
    assert list(top.episode.key_learnings) == ["user chose the Pro tier"]
    # 3 days back, the oldest episode: recency relative to the dataset's span
    assert top.recency == pytest.approx(1 / (1 + 3 / (RECENCY_SPAN * 3)))
    assert top.relevance_score == pytest.approx(0.7 * top.similarity + 0.3 * top.recency)

    # Weights per request; recency only.
    by_time = recall.Recall(
        pb.RecallRequest(
            dataset="user_42",
            query="Pro tier pricing",
            include=EPISODES,
            similarity_weight=0.0,
            recency_weight=1.0,
            as_of=_ts(T0),
        ),
        timeout=10,
    ).episodes.episodes
    assert by_time[0].episode.summary == "invoice 42 escalated"
    assert all(e.similarity == 0 for e in by_time)

    # Entity filter, normalised like stored entities.
    atlas = recall.Recall(
        pb.RecallRequest(dataset="user_42", include=EPISODES, entities=["Atlas Project"]),
        timeout=10,
    ).episodes.episodes
    assert [e.episode.episode_id for e in atlas] == [str(billing.episode_id)]


def test_admin_reads_over_grpc(recall, engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        first = make_episode(
            conn, "ds", ["kubernetes upgrade plan"], ended_at=T0 - timedelta(days=2)
        )
        second = make_episode(
            conn,
            "ds",
            ["rollback done"],
            thread_id=first.thread_id,
            ended_at=T0 - timedelta(days=1),
        )
        for i in range(3):
            make_episode(conn, "ds", [f"other {i}"], ended_at=T0 - timedelta(days=10 + i))
        make_episode(conn, "ds", ["broken"], status="failed", ended_at=T0)

    # GetEpisode returns archived episodes too (provenance).
    archived = recall.GetEpisode(pb.GetEpisodeRequest(episode_id=str(first.episode_id)), timeout=10)
    assert archived.episode.status == episode_pb2.EPISODE_STATUS_ARCHIVED

    # ListEpisodes pages through a status, newest first.
    seen, token = [], ""
    while True:
        page = recall.ListEpisodes(
            pb.ListEpisodesRequest(
                dataset="ds",
                status=episode_pb2.EPISODE_STATUS_COMPLETED,
                page_size=2,
                page_token=token,
            ),
            timeout=10,
        )
        seen += [e.episode_id for e in page.episodes]
        token = page.next_page_token
        if not token:
            break
    assert len(seen) == 4 and seen[0] == str(second.episode_id)
    everything = recall.ListEpisodes(pb.ListEpisodesRequest(dataset="ds"), timeout=10)
    assert len(everything.episodes) == 6
    of_thread = recall.ListEpisodes(
        pb.ListEpisodesRequest(dataset="ds", thread_id=str(first.thread_id)), timeout=10
    )
    assert [e.episode_id for e in of_thread.episodes] == [
        str(second.episode_id),
        str(first.episode_id),
    ]

    # SearchEpisodes finds the current episode of the thread by its archived window's words.
    found = recall.SearchEpisodes(
        pb.SearchEpisodesRequest(dataset="ds", query="kubernetes"), timeout=10
    )
    assert [e.episode.episode_id for e in found.episodes] == [str(second.episode_id)]


BAD_REQUESTS = [
    ("Recall", pb.RecallRequest(dataset="", include=EPISODES), "dataset"),
    ("Recall", pb.RecallRequest(dataset="bad dataset!", include=EPISODES), "dataset"),
    (
        "Recall",
        pb.RecallRequest(dataset="ds", include=EPISODES, similarity_weight=1.5),
        "similarity_weight",
    ),
    (
        "Recall",
        pb.RecallRequest(dataset="ds", include=EPISODES, recency_weight=-0.1),
        "recency_weight",
    ),
    (
        "Recall",
        pb.RecallRequest(dataset="ds", include=EPISODES, similarity_weight=float("nan")),
        "similarity_weight",
    ),
    (
        "Recall",
        pb.RecallRequest(dataset="ds", include=EPISODES, similarity_weight=0, recency_weight=0),
        "similarity_weight",
    ),
    (
        "Recall",
        pb.RecallRequest(dataset="ds", include=EPISODES, context_episodes=-1),
        "context_episodes",
    ),
    (
        "Recall",
        pb.RecallRequest(dataset="ds", include=EPISODES, thread_ids=["nope"]),
        "thread_ids[0]",
    ),
    (
        "Recall",
        pb.RecallRequest(dataset="ds", include=EPISODES, entities=["  ***  "]),
        "entities[0]",
    ),
    # One no event could be recorded with: refused as RecordEvent refuses it.
    (
        "Recall",
        pb.RecallRequest(dataset="ds", include=EPISODES, event_type="NOT VALID!!"),
        "event_type",
    ),
    ("Recall", pb.RecallRequest(dataset="ds", include=[0]), "include[0]"),
    ("Recall", pb.RecallRequest(dataset="ds", include=[7]), "include[0]"),
    ("Recall", pb.RecallRequest(dataset="ds", include=EPISODES, query="x" * 9000), "query"),
    ("Recall", pb.RecallRequest(dataset="ds", include=EPISODES, query="a\x00b"), "query"),
    (
        "Recall",
        pb.RecallRequest(
            dataset="ds", include=EPISODES, since=_ts(T0), until=_ts(T0 - timedelta(days=1))
        ),
        "since",
    ),
    ("Recall", pb.RecallRequest(dataset="ds", query="x", min_relevance=1.5), "min_relevance"),
    (
        "Recall",
        pb.RecallRequest(dataset="ds", query="x", min_relevance=float("nan")),
        "min_relevance",
    ),
    ("Recall", pb.RecallRequest(dataset="ds", query="x", min_match=-0.1), "min_match"),
    ("Recall", pb.RecallRequest(dataset="ds", query="x", min_match=float("inf")), "min_match"),
    ("Recall", pb.RecallRequest(dataset="ds", query="x", min_match=float("nan")), "min_match"),
    ("Recall", pb.RecallRequest(dataset="ds", query="x", min_match=1.5), "min_match"),
    ("ListEpisodes", pb.ListEpisodesRequest(dataset="ds", page_size=-1), "page_size"),
    ("ListEpisodes", pb.ListEpisodesRequest(dataset="ds", page_token="garbage!"), "page_token"),
    ("ListEpisodes", pb.ListEpisodesRequest(dataset="ds", thread_id="x"), "thread_id"),
    ("ListEpisodes", pb.ListEpisodesRequest(dataset="ds", status=42), "status"),
    # Reserved by the design and never produced: not a filter that could ever match.
    (
        "ListEpisodes",
        pb.ListEpisodesRequest(dataset="ds", status=episode_pb2.EPISODE_STATUS_DELETED),
        "status",
    ),
    ("ListEpisodes", pb.ListEpisodesRequest(dataset=""), "dataset"),
    ("SearchEpisodes", pb.SearchEpisodesRequest(dataset="ds", query=" "), "query"),
    (
        "SearchEpisodes",
        pb.SearchEpisodesRequest(dataset="ds", query="x", page_size=-5),
        "page_size",
    ),
    ("GetEpisode", pb.GetEpisodeRequest(episode_id="not-a-uuid"), "episode_id"),
    ("GetEpisode", pb.GetEpisodeRequest(episode_id=""), "episode_id"),
]


def test_bad_input_is_invalid_argument_naming_the_field(recall) -> None:  # type: ignore[no-untyped-def]
    for method, request, field in BAD_REQUESTS:
        with pytest.raises(grpc.RpcError) as caught:
            getattr(recall, method)(request, timeout=10)
        err = caught.value
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, request, err.details())
        reason, metadata = _reason(err)
        assert reason == "INVALID_ARGUMENT"
        assert metadata.get("field") == field, (method, err.details())


def test_page_token_of_other_filters_is_refused(recall, engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        for i in range(3):
            make_episode(conn, "ds", [f"m{i}"], ended_at=T0 - timedelta(hours=i))
    page = recall.ListEpisodes(pb.ListEpisodesRequest(dataset="ds", page_size=1), timeout=10)
    assert page.next_page_token
    with pytest.raises(grpc.RpcError) as caught:
        recall.ListEpisodes(
            pb.ListEpisodesRequest(
                dataset="ds", page_size=1, page_token=page.next_page_token, status=3
            ),
            timeout=10,
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_unknown_episode_is_not_found_and_unknown_dataset_is_empty(recall) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as caught:
        recall.GetEpisode(pb.GetEpisodeRequest(episode_id=str(uuid.uuid4())), timeout=10)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert _reason(caught.value)[0] == "NOT_FOUND"
    answer = recall.Recall(
        pb.RecallRequest(dataset="nobody", query="anything", include=EPISODES), timeout=10
    )
    assert answer.episodes.episode_count == 0 and not answer.episodes.episodes


def test_refuses_to_start_with_an_embedder_of_another_dimension(spawn) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RuntimeError, match="dimensional"):
        spawn("recall", env={"EPISODIC_EMBEDDING_DIMENSION": "128"})


def test_deadlines_bound_the_database_work(db_url) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import text

    from episodic.config import Settings
    from episodic.services.recall import domain
    from episodic.services.recall.__main__ import engine_options
    from episodic.services.recall.servicer import _reading
    from episodic.store.db import make_engine

    class Deadline:
        def __init__(self, seconds: float) -> None:
            self.seconds = seconds

        def time_remaining(self) -> float:
            return self.seconds

    settings = Settings()
    settings.recall.recall_statement_timeout = timedelta(seconds=10)
    engine = make_engine(db_url, pool_size=1, **engine_options(settings))
    try:
        # A long deadline: one autocommit statement under the connection's ceiling.
        with _reading(engine, Deadline(30)) as conn:
            assert conn.execute(text("SHOW statement_timeout")).scalar_one() == "10s"
        # A short one is enforced on the statement itself.
        with pytest.raises(domain.DeadlineExceeded), _reading(engine, Deadline(0.05)) as conn:
            conn.execute(text("SELECT pg_sleep(2)"))
        # The connection goes back to the pool clean.
        with _reading(engine, None) as conn:
            assert conn.execute(text("SHOW statement_timeout")).scalar_one() == "10s"
    finally:
        engine.dispose()


def test_an_episode_and_a_recall_answer_say_whether_its_chunks_are_still_pending(
    recall, engine
) -> None:  # type: ignore[no-untyped-def]
    """An episode is COMPLETED (and found by its summary) before its thread's chunks, the
    finer index Recall also ranks by, are embedded: until then Recall is not at full
    quality for it (LoCoMo asked at once: R@1 .702; 30 s later .737). The episode says so
    (Episode.chunks_pending), in GetEpisode and in every Recall answer that holds it, and
    stops saying so once the Summariser's chunk pass has indexed them."""
    from datetime import UTC, datetime

    from sqlalchemy import text

    from episodic.providers import HashingEmbedder
    from episodic.store import recall_index
    from episodic.testing.keys import test_vault

    with engine.begin() as conn:
        made = make_episode(conn, "user_77", ["we agreed the Pro tier costs $29 for project Atlas"])
        # What completion leaves (pipeline: store_document(..., chunks_pending=True)): the
        # summary indexed, the thread's chunks not yet.
        conn.execute(text("DELETE FROM message_chunks WHERE thread_id = :t"), {"t": made.thread_id})
        conn.execute(
            text("UPDATE episodes SET chunks_pending = true WHERE episode_id = :e"),
            {"e": made.episode_id},
        )
    asked = pb.RecallRequest(dataset="user_77", query="Pro tier", include=EPISODES)
    got = recall.GetEpisode(pb.GetEpisodeRequest(episode_id=str(made.episode_id)), timeout=30)
    assert got.episode.chunks_pending is True
    (scored,) = recall.Recall(asked, timeout=30).episodes.episodes
    assert scored.episode.chunks_pending is True

    now = datetime.now(UTC)
    with engine.begin() as conn:
        work = recall_index.take_chunk_work(
            conn, test_vault(), completed_before=now, retake_before=now, limit=10
        ).work
    assert [w.episode_id for w in work] == [made.episode_id]
    assert recall_index.index_pending_chunks(engine, HashingEmbedder(384), work) > 0
    got = recall.GetEpisode(pb.GetEpisodeRequest(episode_id=str(made.episode_id)), timeout=30)
    assert got.episode.chunks_pending is False
    (scored,) = recall.Recall(asked, timeout=30).episodes.episodes
    assert scored.episode.chunks_pending is False


def test_a_recall_answer_says_whether_the_dataset_is_still_settling(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    """The answer itself says whether Recall is at full quality for the dataset: whether a
    current episode's chunk index (the passages Recall also ranks by) is still to be built
    (``RecalledEpisodes.chunks_pending``), and whether episodes are still queued or being
    summarised (``episodes_pending``): their messages are in no answer yet. Both are about
    the dataset, not only the episodes returned (an episode whose passages are not indexed
    yet may be the one a passage would have found); another dataset's work never shows."""
    from sqlalchemy import text

    from episodic.sdk.client import EpisodicClient

    service = spawn("recall")
    recall = pb_grpc.RecallServiceStub(service.channel())
    sdk = EpisodicClient(recall=service.address)
    with engine.begin() as conn:
        found = make_episode(conn, "user_78", ["we agreed the Pro tier costs $29 for Atlas"])
        other = make_episode(conn, "user_78", ["the invoice for March was escalated"])
        make_episode(conn, "user_79", ["someone else's backlog"], status="pending", ended_at=T0)
        conn.execute(
            text(
                "UPDATE episodes SET chunks_pending = true WHERE dataset = 'user_79' "
                "OR episode_id = :e"
            ),
            {"e": other.episode_id},
        )
    asked = pb.RecallRequest(dataset="user_78", query="Pro tier", include=EPISODES)
    newest = pb.RecallRequest(dataset="user_78", include=EPISODES)  # no query: by time

    def flags(request: pb.RecallRequest) -> tuple[bool, bool]:
        answer = recall.Recall(request, timeout=30).episodes
        return answer.chunks_pending, answer.episodes_pending

    # The episode returned is indexed; the other one's passages are not: still settling.
    answer = recall.Recall(asked, timeout=30).episodes
    assert [s.episode.episode_id for s in answer.episodes][:1] == [str(found.episode_id)]
    assert answer.episodes[0].episode.chunks_pending is False
    assert flags(asked) == flags(newest) == (True, False)
    result = sdk.recall("user_78", "Pro tier")
    assert (result.chunks_pending, result.episodes_pending, result.settled) == (True, False, False)

    with engine.begin() as conn:
        conn.execute(
            text("UPDATE episodes SET chunks_pending = false WHERE episode_id = :e"),
            {"e": other.episode_id},
        )
        queued = make_episode(conn, "user_78", ["still to summarise"], status="pending")
    assert flags(asked) == flags(newest) == (False, True)
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE episodes SET status = 'processing' WHERE episode_id = :e"),
            {"e": queued.episode_id},
        )
    assert flags(asked) == (False, True)
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE episodes SET status = 'failed' WHERE episode_id = :e"),
            {"e": queued.episode_id},
        )
    # Settled (a failed episode is no work in progress; user_79's never showed).
    assert flags(asked) == flags(newest) == (False, False)
    assert sdk.recall("user_78", "Pro tier").settled
    sdk.close()


def test_the_settling_probe_reads_only_its_own_datasets_pending_rows(engine) -> None:  # type: ignore[no-untyped-def]
    """Another dataset's backlog of pending chunk indexes (an import) must not cost this
    dataset's Recall: the probe reads the dataset's own pending rows only. Before
    (an EXISTS), the planner took the Summariser's queue index and read the whole backlog
    of the partition for a dataset with none (20,001 rows, 14-30 ms per Recall)."""
    import json

    from sqlalchemy import text

    from episodic.store import recall_queries as q

    with engine.begin() as conn:
        big = make_episode(conn, "settled_big", ["a template message"])
        backlog = make_episode(conn, "import_backlog", ["another"])
        columns = ", ".join(
            r[0]
            for r in conn.execute(
                text(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = "
                    "'episodes' AND table_schema = current_schema() AND is_generated = 'NEVER' "
                    "AND column_name NOT IN ('episode_id', 'thread_id') ORDER BY ordinal_position"
                )
            )
        )
        for made, n in ((big, 30000), (backlog, 10000)):  # copies of each, one thread each
            params = {"e": made.episode_id, "ds": made.dataset}
            conn.execute(
                text(
                    f"INSERT INTO threads (thread_id, dataset, label) SELECT md5(:ds || i)::uuid, "
                    f":ds, label FROM threads, generate_series(1, {n}) i "
                    "WHERE thread_id = (SELECT thread_id FROM episodes WHERE episode_id = :e)"
                ),
                params,
            )
            conn.execute(
                text(
                    f"INSERT INTO episodes (episode_id, thread_id, {columns}) SELECT "
                    f"gen_random_uuid(), md5(:ds || i)::uuid, {columns} FROM episodes, "
                    f"generate_series(1, {n}) i WHERE episode_id = :e"
                ),
                params,
            )
        conn.execute(
            text("UPDATE episodes SET chunks_pending = true WHERE dataset = 'import_backlog'")
        )
    with engine.connect() as conn:
        conn.execute(text("ANALYZE episodes"))
        for dataset, pending in (("settled_big", False), ("import_backlog", True)):
            params = {
                "dataset": dataset,
                "abstain_config": "english",
                "abstain_other_min_relevance": None,
                "as_of": None,
            }
            assert (
                conn.execute(text(q.COUNT_STATEMENT), params)
                .mappings()
                .one()["dataset_chunks_pending"]
                is pending
            )
            plan = conn.execute(
                text("EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) " + q.COUNT_STATEMENT), params
            ).scalar_one()
            plan = plan if isinstance(plan, list) else json.loads(plan)
            nodes, probes = [plan[0]["Plan"]], []
            while nodes:
                node = nodes.pop()
                nodes.extend(node.get("Plans", []))
                if node.get("Alias") == "cp":
                    probes.append(node)
            assert len(probes) == 1, plan
            assert probes[0].get("Rows Removed by Filter", 0) == 0, probes[0]
            assert "completed_at" not in probes[0].get("Index Name", ""), probes[0]
