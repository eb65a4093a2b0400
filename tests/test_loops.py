"""A loop's pass is stalled after its loop's bound, unless the step it is in has a longer
bound of its own (episodic.loops.step(within=...)), and then only once that one is passed
too. The clock is the module's: set here, not waited for."""

from __future__ import annotations

import pytest

from episodic import loops


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(loops.time, "monotonic", fake.monotonic)
    return fake


def test_a_pass_past_its_loops_bound_is_stalled(clock: Clock) -> None:
    watch = loops.LoopWatch("test.plain", stall_after=120.0)
    with watch.running():
        loops.step("claim")
        clock.now += 119.0
        assert watch.stall() is None
        clock.now += 2.0
        stall = watch.stall()
        assert stall is not None and stall.step == "claim" and stall.seconds == 121.0


def test_a_step_with_a_bound_of_its_own_is_stalled_only_past_it(clock: Clock) -> None:
    watch = loops.LoopWatch("test.bounded", stall_after=120.0)
    with watch.running():
        clock.now += 30.0
        loops.step("statistics", within=600.0)  # a count under a 10-minute ceiling
        clock.now += 500.0
        assert watch.stall() is None  # 530 s into the pass, 500 into the step
        clock.now += 101.0
        stall = watch.stall()
        assert stall is not None and stall.step == "statistics"
        loops.step("statistics", within=600.0)  # the next dataset's count: bound again
        assert watch.stall() is None
        loops.step("indexes")  # a step without one: the loop's bound again
        assert watch.stall() is not None
    with watch.running():  # a new pass starts without the last one's step bound
        clock.now += 121.0
        assert watch.stall() is not None
