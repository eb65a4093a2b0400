"""Claims are fair across datasets (issue 49): one dataset's backlog — a burst of threads,
a retry storm — delays another dataset's episode by one claim, not by the whole backlog."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import Engine, text

from episodic.store.episodes import claim_pending
from tests.summariser.helpers import CAR_CHAT, add, make_pipeline, make_thread, open_episode


def _backlog(engine: Engine, dataset: str, threads: int) -> list[object]:
    opened = []
    for _ in range(threads):
        thread = make_thread(engine, dataset)
        add(engine, thread, CAR_CHAT[:2])
        opened.append(open_episode(engine, thread)["episode_id"])
    return opened


def test_a_claim_takes_each_datasets_oldest_before_anyones_second(engine: Engine) -> None:
    flood = _backlog(engine, "fair-flood", 12)
    quiet = _backlog(engine, "fair-quiet", 1)  # opened last: the newest pending episode
    third = _backlog(engine, "fair-third", 2)
    with engine.begin() as conn:
        claimed = claim_pending(conn, "w1", 3)
    # One per dataset, in the order their oldest became due: the backlog waits its turn.
    assert [r["episode_id"] for r in claimed] == [flood[0], quiet[0], third[0]]
    with engine.begin() as conn:
        claimed = claim_pending(conn, "w1", 3)
    # Second turn: the flood's and the third dataset's second, then the flood's third.
    assert [r["episode_id"] for r in claimed] == [flood[1], third[1], flood[2]]


def test_a_retry_storm_does_not_starve_a_new_dataset(engine: Engine) -> None:
    """Episodes due earlier (a dataset's retries, long overdue) come first only within
    their own dataset's turns."""
    flood = _backlog(engine, "storm", 6)
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE episodes SET next_attempt_at = now() - interval '1 hour' "
                "WHERE dataset = 'storm'"
            )
        )
    newcomer = _backlog(engine, "newcomer", 1)
    pipeline = make_pipeline(engine)
    with engine.begin() as conn:
        claimed = claim_pending(conn, pipeline.worker, 2)
    assert {r["episode_id"] for r in claimed} == {flood[0], newcomer[0]}


def test_a_dataset_whose_language_is_switching_holds_up_only_its_own_episodes(
    engine: Engine, db_url: str
) -> None:
    """A language switch re-stems a dataset for minutes, holding its language lock: the
    Summariser defers that dataset's episode (no retry counted) instead of waiting, and
    completes the other datasets' meanwhile (issue 41, no stalls)."""
    import psycopg

    from episodic.store.db import make_engine
    from episodic.store.recall_index import LANGUAGE_LOCK_SPACE

    switching = _backlog(engine, "fair-switching", 1)[0]
    calm = _backlog(engine, "fair-calm", 1)[0]
    # A wait for the held lock fails the pass (the holder keeps it while this runs).
    bounded = make_engine(db_url, pool_size=3, session_settings={"lock_timeout": "5s"})
    try:
        with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://")) as holder:
            holder.execute(  # what set_language holds while it re-stems
                "SELECT pg_advisory_xact_lock(%s, hashtext('fair-switching'))",
                (LANGUAGE_LOCK_SPACE,),
            )
            result = make_pipeline(bounded).run_once(10, yield_chunks=False)
            assert result.completed == 1
            with engine.connect() as conn:
                rows = {
                    r["episode_id"]: r
                    for r in conn.execute(
                        text(
                            "SELECT episode_id, status, retry_count, claimed_by, "
                            "next_attempt_at > now() AS later FROM episodes"
                        )
                    ).mappings()
                }
            assert rows[calm]["status"] == "completed"
            deferred = rows[switching]
            assert (deferred["status"], deferred["retry_count"], deferred["claimed_by"]) == (
                "pending",
                0,
                None,
            )
            assert deferred["later"]
            holder.rollback()
        # The switch is over: once due again, the episode completes.
        with engine.begin() as conn:
            conn.execute(
                text("UPDATE episodes SET next_attempt_at = now() WHERE status = 'pending'")
            )
        assert make_pipeline(bounded).run_once(10, yield_chunks=False).completed == 1
    finally:
        bounded.dispose()


def test_a_dataset_due_after_the_claim_waits_for_one_episode_not_the_batch(
    engine: Engine,
) -> None:
    """The claim is fair between datasets due when it runs; one that becomes due while the
    worker summarises a batch of another dataset's turns (a giant thread's windows, seconds
    each) would wait for the whole batch. Before a dataset's second turn the worker asks
    whether another dataset is waiting, and if so hands the rest of the batch back."""
    from episodic.services.summariser.pipeline import Pipeline

    backlog = _backlog(engine, "fair-batch", 3)
    late: list[object] = []
    order: list[object] = []

    class Recording(Pipeline):
        def process(self, episode, loaded=None, deferred=None):  # type: ignore[no-untyped-def]
            if not late:  # the other dataset's episode becomes due during the first one
                late.extend(_backlog(engine, "fair-late", 1))
            order.append(episode["episode_id"])
            return super().process(episode, loaded, deferred)

    healthy = make_pipeline(engine)
    pipeline = Recording(
        engine,
        healthy.summariser,
        healthy.embedder,
        healthy.extractor,
        vault=healthy.vault,
        max_retries=2,
        retry_backoff=timedelta(0),
    )
    first = pipeline.run_once(10, yield_chunks=False)
    assert (first.completed, first.handed_back) == (1, 2)
    with engine.connect() as conn:
        states = dict(
            conn.execute(
                text(
                    "SELECT status, count(*) FROM episodes WHERE dataset = 'fair-batch' GROUP BY 1"
                )
            ).all()
        )
    assert states == {"completed": 1, "pending": 2}  # handed back as they were, no retry
    second = pipeline.run_once(10, yield_chunks=False)
    assert (second.completed, second.handed_back) == (3, 0)  # nobody else waits now
    # The late dataset came right after the backlog's next turn, not after all of it.
    assert order == [backlog[0], backlog[1], late[0], backlog[2]]


def _semantic(engine: Engine, episode_ids: list[object]) -> list[str]:
    with engine.connect() as conn:
        status = dict(
            conn.execute(
                text(
                    "SELECT episode_id, semantic_status FROM episodes WHERE episode_id = ANY(:ids)"
                ),
                {"ids": episode_ids},
            ).all()
        )
    return [status[e] for e in episode_ids]


def test_semantic_extraction_yields_to_a_due_episode_after_one(engine: Engine) -> None:
    """A giant thread's hundreds of windows wait to be extracted after they complete; an
    episode of another dataset that becomes due meanwhile is summarised after one
    extraction, not after all of them (issue 49: a victim waited 47.9 s after an attack)."""
    giant = _backlog(engine, "extract-giant", 3)
    pipeline = make_pipeline(engine)
    while pipeline.run_once(10).completed:
        pass
    with engine.begin() as conn:  # completed, their extraction still to do
        conn.execute(
            text(
                "UPDATE episodes SET semantic_status = 'pending', semantic_claimed_by = NULL, "
                "semantic_claimed_at = NULL WHERE episode_id = ANY(:ids)"
            ),
            {"ids": giant},
        )
    victim = _backlog(engine, "extract-victim", 1)
    assert pipeline.run_semantic(10) == 1
    assert sorted(_semantic(engine, giant)) == ["completed", "pending", "pending"]
    # The next pass: the victim's episode first, then the rest of the extraction.
    result = pipeline.run_once(10)
    assert result.completed == 1 and result.semantic_processed == 3  # the victim's too
    assert _semantic(engine, giant) == ["completed"] * 3
    assert _semantic(engine, victim) == ["completed"]
    # ProcessPending's pass (may_yield=False) extracts whatever is due.
    more = _backlog(engine, "extract-giant", 3)
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE episodes SET status = 'completed', completed_at = now(), "
                "semantic_status = 'pending' WHERE episode_id = ANY(:ids)"
            ),
            {"ids": more[:2]},
        )
    assert pipeline.run_semantic(10, may_yield=False) == 2  # more[2] is due meanwhile
