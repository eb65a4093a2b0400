"""Invariants over the tables that must hold whatever happened before (races, crashes,
several replicas). Reusable by any test: call ``check_invariants(engine)`` once the dust
has settled."""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import Engine, text


class InvariantViolation(AssertionError):
    pass


def check_invariants(engine: Engine, *, all_covered: bool = False) -> None:
    """Asserts, for every thread:

    - its episode windows (every status except the reserved 'deleted') start at 1, are
      contiguous (each starts one past the previous end) and never overlap;
    - each episode's message_count matches its window;
    - the last window ends exactly at ``captured_sequence`` (0 when there is none);
    - at most one episode is ``completed``;
    - messages are numbered 1..last_sequence without gaps;
    - with ``all_covered``: every message is in a window (captured == last).

    Raises InvariantViolation listing every problem found.
    """
    problems: list[str] = []
    with engine.connect() as conn:
        threads = conn.execute(
            text("SELECT thread_id, last_sequence, captured_sequence FROM threads")
        ).all()
        windows: dict[object, list[tuple[int, int, int, str]]] = defaultdict(list)
        for row in conn.execute(
            text(
                "SELECT thread_id, start_sequence, end_sequence, message_count, status "
                "FROM episodes WHERE status <> 'deleted' ORDER BY thread_id, start_sequence"
            )
        ):
            windows[row[0]].append((row[1], row[2], row[3], row[4]))
        messages = {
            r[0]: (r[1], r[2], r[3])
            for r in conn.execute(
                text(
                    "SELECT thread_id, count(*), min(sequence), max(sequence) FROM messages "
                    "GROUP BY thread_id"
                )
            )
        }

    for thread_id, last, captured in threads:
        expected_start = 1
        completed = 0
        for start, end, count, status in windows.get(thread_id, []):
            if start != expected_start:
                kind = "overlaps" if start < expected_start else "leaves a gap before"
                problems.append(
                    f"thread {thread_id}: window {start}..{end} {kind} sequence {expected_start}"
                )
            if count != end - start + 1:
                problems.append(f"thread {thread_id}: window {start}..{end} has count {count}")
            if end > last:
                problems.append(f"thread {thread_id}: window {start}..{end} beyond last {last}")
            completed += status == "completed"
            expected_start = end + 1
        if expected_start - 1 != captured:
            problems.append(
                f"thread {thread_id}: windows end at {expected_start - 1} but "
                f"captured_sequence is {captured}"
            )
        if completed > 1:
            problems.append(f"thread {thread_id}: {completed} completed episodes")
        n, lo, hi = messages.get(thread_id, (0, None, None))
        if n != last or (n and (lo != 1 or hi != last)):
            problems.append(
                f"thread {thread_id}: {n} messages ({lo}..{hi}) but last_sequence is {last}"
            )
        if all_covered and captured != last:
            problems.append(
                f"thread {thread_id}: messages {captured + 1}..{last} are in no episode"
            )
    if problems:
        shown = "\n  ".join(problems[:50])
        more = f"\n  … and {len(problems) - 50} more" if len(problems) > 50 else ""
        raise InvariantViolation(f"{len(problems)} invariant violations:\n  {shown}{more}")
