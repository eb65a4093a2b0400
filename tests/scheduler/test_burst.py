"""A burst of due timers: a claim larger than one chunk is fired as chunks side by side
(each its own transaction and connection), and every thread gets exactly its one episode."""

from __future__ import annotations

import uuid
from datetime import timedelta

from sqlalchemy import Engine

from episodic.services.scheduler import domain
from episodic.services.scheduler.sweeper import (
    FIRE_BATCH,
    FIRE_WORKERS,
    MIN_FIRE_CHUNK,
    Sweeper,
    fire_chunks,
)

from .helpers import add_messages, db_now, episodes, new_thread, settings, timer, windows


def _timers(n: int) -> list[domain.ClaimedTimer]:
    return [
        domain.ClaimedTimer(uuid.uuid4(), 1, "inactivity", None, None, "ds")  # type: ignore[arg-type]
        for _ in range(n)
    ]


def test_a_claim_is_cut_into_chunks_that_cover_it_once_in_order() -> None:
    for n in (0, 1, MIN_FIRE_CHUNK, 2 * MIN_FIRE_CHUNK + 1, 300, 2 * FIRE_BATCH + 7, 1234):
        timers = _timers(n)
        chunks = fire_chunks(timers)
        assert [t for chunk in chunks for t in chunk] == timers
        assert all(len(c) <= FIRE_BATCH for c in chunks)
        assert all(len(c) >= MIN_FIRE_CHUNK for c in chunks[:-1])
        if n >= FIRE_WORKERS * MIN_FIRE_CHUNK:
            assert len(chunks) >= FIRE_WORKERS  # large enough: both connections get work
        if 0 < n <= MIN_FIRE_CHUNK:
            assert len(chunks) == 1  # too small to be worth a second transaction


def test_a_burst_larger_than_a_chunk_opens_each_thread_exactly_one_episode(
    engine: Engine,
) -> None:
    cfg = settings(claim_batch_size=500, auto_episode_interval=timedelta(seconds=1))
    threads = [new_thread(engine, f"ds-burst-{i % 7}") for i in range(2 * MIN_FIRE_CHUNK + 30)]
    for i, thread_id in enumerate(threads):
        add_messages(engine, thread_id, 1 + i % 3, cfg=cfg)
    now = db_now(engine) + timedelta(seconds=5)

    result = Sweeper(engine, cfg, "replica-1").fire_due(now)

    assert result.episodes_created == len(threads)
    assert result.timers_survived == 0
    for i, thread_id in enumerate(threads):
        assert windows(engine, thread_id) == [(1, 1 + i % 3, "inactivity")]
        assert timer(engine, thread_id) is None
    assert len(episodes(engine)) == len(threads)
