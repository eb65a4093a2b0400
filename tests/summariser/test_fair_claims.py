"""Claims are fair across datasets (issue 49): one dataset's backlog — a burst of threads,
a retry storm — delays another dataset's episode by one claim, not by the whole backlog."""

from __future__ import annotations

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
