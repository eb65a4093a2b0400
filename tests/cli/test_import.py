"""`episodic import`: reading and mapping the three formats (no services), and a backfill
against real services that is killed midway and resumed without duplicates."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest

from episodic.ops.backfill import (
    NAMESPACE,
    Importer,
    InputError,
    ProgressBar,
    ThreadImportError,
    batches,
    idempotency_key,
    read_plan,
    thread_key,
    thread_uuid,
)
from episodic.sdk.client import AlreadyExistsError, EpisodicClient, Thread
from episodic.testing.processes import wait_until

# Beside the repository, as bench/harness/locomo.py finds it (or EPISODIC_LOCOMO_PATH).
LOCOMO = Path(
    os.environ.get("EPISODIC_LOCOMO_PATH")
    or Path(__file__).resolve().parents[3] / "shared" / "bench" / "locomo10.jsonl"
)


def _lines(*records: dict) -> list[str]:  # type: ignore[type-arg]
    return [json.dumps(r) for r in records]


# --------------------------------------------------------------------------- reading


def test_simple_format_maps_threads_messages_and_keys() -> None:
    plan = read_plan(
        _lines(
            {
                "dataset": "u1",
                "thread": "b",
                "role": "user",
                "content": "later thread",
                "ts": "2024-06-01T10:00:00Z",
            },
            {
                "dataset": "u1",
                "thread": "a",
                "label": "cars",
                "role": "user",
                "content": "I need a car.",
                "ts": "2024-05-01T09:00:00",
                "name": "Dana",
                "metadata": {"channel": "email"},
            },
            {
                "dataset": "u1",
                "thread": "a",
                "role": "Assistant",
                "content": "Corolla?",
                "ts": "2024-05-01T09:01:00+02:00",
            },
            {"dataset": "u1", "thread": "b", "role": "ROLE_ASSISTANT", "content": "ok"},
            {"dataset": "u1", "thread": "c", "role": "user", "content": "no label"},
            {"dataset": "u1", "thread": "c", "role": "user", "content": "late", "label": "L"},
        )
    )
    assert [t.label for t in plan.threads] == ["cars", "b", "L"]
    plan.threads.pop()
    # Ordered by first message time: "a" (May) before "b" (June).
    assert [t.source_id for t in plan.threads] == ["a", "b"]
    a, b = plan.threads
    assert a.thread_id == str(uuid.uuid5(NAMESPACE, "u1\na")) == thread_uuid("u1", "a")
    assert a.label == "cars" and b.label == "b"  # the source id when no label is given
    assert a.metadata == {"source_thread": "a"}
    first, second = a.messages
    assert first.created_at == datetime(2024, 5, 1, 9, tzinfo=UTC)  # naive is UTC
    assert second.created_at == datetime(2024, 5, 1, 7, 1, tzinfo=UTC)
    assert first.metadata == {"channel": "email", "name": "Dana"}
    assert second.role == "assistant" and b.messages[1].role == "assistant"
    assert [m.idempotency_key for m in a.messages] == ["import:a:0", "import:a:1"]
    # An undated message takes the time of the one before it in its thread (it was stored
    # at the import's time: a conversation of 2024 ended today, the most recent of all);
    # a thread with no time at all ("c") arrives at the import's time, as before.
    assert b.messages[1].created_at == b.messages[0].created_at
    assert plan.warnings == [
        "1 message(s) without a time (lines 4) took the time of the message before them in "
        "their thread (the first ones, the next one's)"
    ]
    assert plan.formats == {"simple": 6} and plan.message_count == 4

    # OpenAI's format: an agent log's system prompt has no time; it takes the first one's.
    logged = read_plan(
        _lines(
            {
                "id": "log-1",
                "dataset": "u1",
                "messages": [
                    {"role": "system", "content": "You are a travel agent."},
                    {"role": "user", "content": "Flights?", "ts": "2024-05-01T10:00:00Z"},
                    {"role": "assistant", "content": "Two.", "ts": "2024-05-01T10:01:00Z"},
                ],
            }
        )
    )
    system, user, _ = logged.threads[0].messages
    assert system.created_at == user.created_at == datetime(2024, 5, 1, 10, tzinfo=UTC)
    # The same line without an id twice is the same conversation, stored once (its
    # messages were appended again under new keys: the conversation twice).
    line = {"dataset": "u1", "messages": [{"role": "user", "content": "Flights?"}]}
    twice = read_plan(_lines(line, line, {**line, "dataset": "u2"}))
    assert [len(t.messages) for t in twice.threads] == [1, 1]
    assert twice.skipped == {"repeated conversation": 1}

    # --dataset moves everything, and so the ids.
    moved = read_plan(
        _lines({"dataset": "u1", "thread": "a", "role": "user", "content": "x"}), dataset="u2"
    )
    assert moved.threads[0].dataset == "u2"
    assert moved.threads[0].thread_id == thread_uuid("u2", "a") != a.thread_id


def test_bad_lines_are_named() -> None:
    cases = [
        ({"thread": "a", "role": "user", "content": "x"}, "no dataset"),
        ({"dataset": "d", "thread": "a", "role": "boss", "content": "x"}, "role 'boss'"),
        ({"dataset": "d", "thread": "a", "role": "user", "content": " "}, "'content'"),
        (
            {"dataset": "d", "thread": "a", "role": "user", "content": "x", "ts": "May 1"},
            "not ISO 8601",
        ),
        ({"hello": "world"}, "not a record of a known format"),
        ({"type": 7}, "'type' must be a string"),
        ({"dataset": "a b", "thread": "a", "role": "user", "content": "x"}, "'a b' is not valid"),
    ]
    for record, message in cases:
        with pytest.raises(InputError, match=message) as caught:
            read_plan(["", json.dumps(record)])
        assert caught.value.line == 2
    with pytest.raises(InputError, match="line 1: not JSON"):
        read_plan(["{oops"])
    # Two source datasets' threads of one id would merge under --dataset: refused.
    with pytest.raises(InputError, match="would merge"):
        read_plan(
            _lines(
                {"dataset": "a", "thread": "t", "role": "user", "content": "x"},
                {"dataset": "b", "thread": "t", "role": "user", "content": "y"},
            ),
            dataset="all",
        )


def test_threaded_format_uses_the_conversation_as_dataset() -> None:
    line = {
        "dataset": "locomo10",
        "conversation_id": "conv-1",
        "threads": [
            {
                "thread_id": "conv-1/session_2",
                "started_at": "2023-05-09T10:00:00Z",
                "messages": [{"role": "user", "content": "second", "name": "Mel"}],
            },
            {
                "thread_id": "conv-1/session_1",
                "started_at": "2023-05-08T13:56:00Z",
                "messages": [
                    {
                        "role": "user",
                        "content": "hi",
                        "ts": "2023-05-08T13:56:00Z",
                        "name": "Caroline",
                    },
                    {
                        "role": "assistant",
                        "content": "hey",
                        "ts": "2023-05-08T13:57:00Z",
                        "name": "Mel",
                    },
                ],
            },
        ],
        "questions": [{"qid": "q1"}],
    }
    plan = read_plan(_lines(line))
    assert [t.label for t in plan.threads] == ["conv-1/session_1", "conv-1/session_2"]
    assert plan.datasets == ["conv-1"]
    s1, s2 = plan.threads
    assert s1.messages[0].metadata == {"name": "Caroline"}
    assert s2.messages[0].created_at == datetime(2023, 5, 9, 10, tzinfo=UTC)  # started_at
    assert s1.messages[1].idempotency_key == "import:conv-1/session_1:1"
    assert read_plan(_lines(line), dataset="mine").datasets == ["mine"]


@pytest.mark.skipif(not LOCOMO.is_file(), reason="LoCoMo not beside the repository")
def test_locomo_reads_whole() -> None:
    with LOCOMO.open(encoding="utf-8") as handle:
        plan = read_plan(handle)
    assert len(plan.datasets) == 10 and len(plan.threads) == 272
    assert plan.message_count == 5882
    assert len({t.thread_id for t in plan.threads}) == 272


def test_export_format_joins_records_in_any_order() -> None:
    source = str(uuid.uuid4())
    plan = read_plan(
        _lines(
            {
                "type": "message",
                "thread_id": source,
                "sequence": 2,
                "role": "assistant",
                "content": "two",
                "metadata": {},
                "created_at": "2026-01-01T10:01:00Z",
                "idempotency_key": "",
            },
            {"type": "episode", "episode_id": "e1", "thread_id": source},
            {
                "type": "thread",
                "thread": {
                    "thread_id": source,
                    "dataset": "acme/u1",
                    "label": "billing",
                    "metadata": {"k": 1},
                    "created_at": "2026-01-01T09:00:00Z",
                },
            },
            {
                "type": "message",
                "message": {
                    "thread_id": source,
                    "sequence": 1,
                    "role": "user",
                    "content": "one",
                    "metadata": {"name": "Ann"},
                    "created_at": "2026-01-01T10:00:00Z",
                    "idempotency_key": "auto:abc",
                },
            },
        )
    )
    (thread,) = plan.threads
    assert thread.dataset == "acme/u1" and thread.label == "billing"
    assert thread.metadata == {"k": 1} and thread.thread_id == thread_uuid("acme/u1", source)
    assert [m.content for m in thread.messages] == ["one", "two"]
    # The exported key is kept; a message without one gets a derived key.
    assert [m.idempotency_key for m in thread.messages] == ["auto:abc", f"import:{source}:2"]
    assert plan.skipped == {"episode": 1} and plan.formats == {"export": 4}
    assert plan.warnings and "no 'end' record" in plan.warnings[0]
    kept = read_plan(
        _lines({"type": "thread", "thread_id": source, "dataset": "d"}), keep_thread_ids=True
    )
    assert kept.threads[0].thread_id == source


def test_batches_keys_and_progress_bar() -> None:
    plan = read_plan(
        _lines(
            *(
                {"dataset": "d", "thread": "t", "role": "user", "content": "x" * 10}
                for _ in range(7)
            )
        )
    )
    messages = plan.threads[0].messages
    assert [len(b) for b in batches(messages, 3)] == [3, 3, 1]
    assert [len(b) for b in batches(messages, 100, max_bytes=25)] == [2, 2, 2, 1]
    long_key = idempotency_key("s" * 200, 7)
    assert len(long_key) <= 128 and long_key.endswith(":7")
    assert long_key == idempotency_key("s" * 200, 7)

    now = [100.0]
    out = io.StringIO()
    bar = ProgressBar(1000, stream=out, enabled=True, width=10, clock=lambda: now[0])
    now[0] = 102.0
    bar.update(500)
    assert out.getvalue() == "\r[#####-----] 500/1,000 msgs  50% 250 msg/s ETA 0:02"
    bar.update(500)
    bar.close()
    # Padded to the longest line drawn, so no tail of it is left on the terminal.
    assert out.getvalue().endswith("1,000/1,000 msgs 100% 500 msg/s done  \n")
    quiet = io.StringIO()
    off = ProgressBar(10, stream=quiet)  # a StringIO is no terminal: draws nothing
    off.update(10)
    off.close()
    assert quiet.getvalue() == ""


def test_a_guessable_thread_id_taken_in_another_dataset_does_not_stop_the_import() -> None:
    """Imported threads are found by a key of their own dataset: a writer of another
    dataset who created the old derived id (uuid5 of dataset and source id) first neither
    stops the import nor receives its messages. With --keep-thread-ids the file's own id is
    used, and another dataset holding it still stops the import."""

    class Squatted:
        """Every derived thread id exists already, in another dataset."""

        def __init__(self) -> None:
            self.created: list[dict[str, object]] = []
            self.written: list[str] = []

        def create_thread(self, dataset: str, **kw: object) -> Thread:
            if kw.get("thread_id"):
                raise AlreadyExistsError(grpc.StatusCode.ALREADY_EXISTS, "thread exists")
            self.created.append({"dataset": dataset, **kw})
            return Thread(
                "0e3c7d9a-0000-4000-8000-000000000001", dataset, "", {}, 0, 0, None, None, None
            )

        def get_thread(self, thread_id: str, **kw: object) -> Thread:
            return Thread(thread_id, "someone_else", "", {}, 0, 0, None, None, None)

        def add_messages(self, thread_id: str, items: object, **kw: object) -> object:
            self.written.append(thread_id)
            n = len(items)  # type: ignore[arg-type]
            return type("R", (), {"stored_count": n})()

    plan = read_plan(_lines({"dataset": "d", "thread": "t", "role": "user", "content": "x"}))
    client = Squatted()
    Importer(client, end_threads=False).run(plan)  # type: ignore[arg-type]
    assert [c["idempotency_key"] for c in client.created] == [thread_key("t")] == ["import:t"]
    assert client.written == ["0e3c7d9a-0000-4000-8000-000000000001"]

    source = str(uuid.uuid4())
    kept = read_plan(
        _lines({"type": "thread", "thread_id": source, "dataset": "d"},
               {"type": "message", "thread_id": source, "sequence": 1, "role": "user",
                "content": "x"}),
        keep_thread_ids=True,
    )  # fmt: skip
    with pytest.raises(ThreadImportError, match="exists in dataset 'someone_else', not 'd'"):
        Importer(Squatted()).run(kept)  # type: ignore[arg-type]


def test_an_import_begun_before_thread_keys_resumes_into_its_threads() -> None:
    """A thread an older import made under the derived id, in the thread's own dataset,
    is still the thread: the resumed import skips what it stored and creates nothing."""
    from episodic.sdk.client import Message, Page

    legacy_id = thread_uuid("d", "t")

    class Resumed:
        def __init__(self) -> None:
            self.created = 0
            self.written: list[tuple[str, int]] = []

        def create_thread(self, dataset: str, **kw: object) -> Thread:
            self.created += 1
            raise AssertionError("an older import's thread must be reused")

        def get_thread(self, thread_id: str, **kw: object) -> Thread:
            assert thread_id == legacy_id
            return Thread(thread_id, "d", "", {}, 1, 0, None, None, None)

        def list_messages(self, thread_id: str, **kw: object) -> Page[Message]:
            stored = Message(thread_id, 1, "user", "x", {}, None, None, "import:t:0")
            return Page([stored], "")

        def add_messages(self, thread_id: str, items: list, **kw: object) -> object:  # type: ignore[type-arg]
            self.written.append((thread_id, len(items)))
            return type("R", (), {"stored_count": len(items)})()

    plan = read_plan(
        _lines(*({"dataset": "d", "thread": "t", "role": "user", "content": c} for c in "xy"))
    )
    client = Resumed()
    stats = Importer(client, end_threads=False).run(plan)  # type: ignore[arg-type]
    assert client.created == 0 and client.written == [(legacy_id, 1)]
    assert stats.threads_existing == 1 and stats.already_stored == 1


def test_a_thread_key_too_long_for_a_key_is_hashed() -> None:
    assert thread_key("conv-1/session_2") == "import:conv-1/session_2"
    long = thread_key("x" * 500)
    assert len(long) <= 128 and long.startswith("import:sha256:") and long == thread_key("x" * 500)


# --------------------------------------------------------------------------- backfill

THREADS, PER_THREAD = 40, 50
START = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


def _message_time(t: int, i: int) -> datetime:
    return START + timedelta(days=t, minutes=i)


def _write_input(path: Path) -> None:
    with path.open("w", encoding="utf-8") as out:
        for t in range(THREADS):
            for i in range(PER_THREAD):
                record = {
                    "dataset": "backfill_user",
                    "thread": f"chat-{t:02d}",
                    "label": f"chat {t:02d}",
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"Day {t} message {i}: we discussed topic {t} in detail.",
                    "ts": _message_time(t, i).isoformat(),
                }
                out.write(json.dumps(record) + "\n")


def _plain(value: object) -> dict:  # type: ignore[type-arg]
    """An SDK dataclass as an export line's fields (times in ISO 8601)."""
    return {
        k: v.isoformat() if isinstance(v, datetime) else v
        for k, v in dataclasses.asdict(value).items()  # type: ignore[call-overload]
    }


def _import(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "episodic.cli", "import", *args],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _stored(client: EpisodicClient) -> int:
    return sum(t.message_count for t in client.recent_threads("backfill_user", 100))


@pytest.mark.citus  # through the services, on Citus too
def test_import_killed_midway_resumes_without_duplicates(spawn, tmp_path) -> None:  # type: ignore[no-untyped-def]
    scheduler = spawn("scheduler")
    ingest = spawn("ingest", env={"EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    summariser = spawn("summariser", env={"EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2"})
    recall = spawn("recall")
    env = {
        "EPISODIC_INGEST_ADDRESS": ingest.address,
        "EPISODIC_RECALL_ADDRESS": recall.address,
        "EPISODIC_SCHEDULER_ADDRESS": scheduler.address,
        "EPISODIC_SUMMARISER_ADDRESS": summariser.address,
    }
    source = tmp_path / "history.jsonl"
    _write_input(source)
    total = THREADS * PER_THREAD

    with EpisodicClient(ingest=ingest.address, recall=recall.address) as client:
        # 1. Small batches, so the import is still running when it is killed.
        crashed = _import(env, str(source), "--batch-size", "2")
        wait_until(
            lambda: _stored(client) >= 100 or crashed.poll() is not None,
            timeout=60,
            message="the import stored nothing",
        )
        crashed.send_signal(signal.SIGKILL)
        _, crash_err = crashed.communicate(timeout=10)
        assert crashed.returncode == -signal.SIGKILL, f"the import ended first: {crash_err}"
        partial = _stored(client)
        assert 100 <= partial < total

        # 2. The same command again: it resumes.
        resumed = _import(env, str(source), "--batch-size", "2", "--json")
        out, err = resumed.communicate(timeout=120)
        assert resumed.returncode == 0, err
        stats = json.loads(out)
        assert stats["messages"] == total
        # A batch the killed process had sent may have committed after `partial` was read.
        assert stats["already_stored"] >= partial
        assert stats["stored"] == total - stats["already_stored"]
        # Not a terminal: no bar, one final line.
        assert err.count("\n") == 1 and err.startswith(f"imported {total:,} messages in 40 ")
        assert "msg/s" in err

        # Every thread holds its 50 messages once, in order, with their original times.
        threads = client.recent_threads("backfill_user", 100)
        assert len(threads) == THREADS
        for thread in threads:
            t = int(thread.label.split()[1])
            # The server's own id, not one derived from the source id.
            assert thread.thread_id != thread_uuid("backfill_user", f"chat-{t:02d}")
            messages = client.load_session(thread.thread_id)
            assert [m.sequence for m in messages] == list(range(1, PER_THREAD + 1))
            assert [m.idempotency_key for m in messages] == [
                f"import:chat-{t:02d}:{i}" for i in range(PER_THREAD)
            ]
            assert [m.created_at for m in messages] == [
                _message_time(t, i) for i in range(PER_THREAD)
            ]

        # 3. EndThread queued each thread's episode; their times are the messages' times.
        def summarised() -> list:  # type: ignore[type-arg]
            episodes = list(client.iter_episodes("backfill_user"))
            done = [e for e in episodes if e.status == "completed"]
            return episodes if len(done) == len(episodes) >= THREADS else []

        episodes = wait_until(summarised, timeout=60, message="episodes not summarised")
        by_thread: dict[str, list] = {}  # type: ignore[type-arg]
        for e in episodes:
            by_thread.setdefault(e.thread_id, []).append(e)
        assert len(by_thread) == THREADS
        for thread in threads:
            t = int(thread.label.split()[1])
            windows = sorted(
                (e.start_sequence, e.end_sequence) for e in by_thread[thread.thread_id]
            )
            assert windows[0][0] == 1 and windows[-1][1] == PER_THREAD
            last = max(by_thread[thread.thread_id], key=lambda e: e.end_sequence)
            assert last.ended_at == _message_time(t, PER_THREAD - 1)
            assert last.trigger == "explicit"

        # as_of replays history: at the end of day 10, threads 0-10 had happened.
        as_of = _message_time(10, PER_THREAD)
        result = client.recall("backfill_user", limit=100, as_of=as_of)
        assert {e.episode.thread_label for e in result.episodes} == {
            f"chat {t:02d}" for t in range(11)
        }

        # 4. Export-format records of five threads (as `episodic export` writes them)
        #    import into another dataset with their keys and times.
        exported = tmp_path / "export.jsonl"
        with exported.open("w", encoding="utf-8") as out:
            out.write(json.dumps({"type": "dataset", "dataset": "backfill_user"}) + "\n")
            for thread in threads[:5]:
                out.write(json.dumps({"type": "thread", **_plain(thread)}) + "\n")
                for m in client.load_session(thread.thread_id):
                    out.write(json.dumps({"type": "message", **_plain(m)}) + "\n")
                for e in by_thread[thread.thread_id]:
                    out.write(json.dumps({"type": "episode", **_plain(e)}) + "\n")
            out.write(json.dumps({"type": "end"}) + "\n")
        restore = _import(env, str(exported), "--dataset", "restored", "--json")
        out, err = restore.communicate(timeout=120)
        assert restore.returncode == 0, err
        assert json.loads(out)["stored"] == 5 * PER_THREAD and "warning" not in err
        restored = {t.label: t for t in client.recent_threads("restored", 100)}
        for thread in threads[:5]:
            copy = restored[thread.label]
            assert copy.dataset == "restored"
            original = [_plain(m) for m in client.load_session(thread.thread_id)]
            copied = [_plain(m) for m in client.load_session(copy.thread_id)]
            for o, c in zip(original, copied, strict=True):
                for name in ("sequence", "role", "content", "created_at", "idempotency_key"):
                    assert o[name] == c[name]

        # 5. A third run finds everything stored and changes nothing.
        again = _import(env, str(source), "--json")
        out, err = again.communicate(timeout=120)
        assert again.returncode == 0, err
        stats = json.loads(out)
        assert stats["stored"] == 0 and stats["already_stored"] == total
        assert stats["threads_created"] == 0 and stats["threads_ended"] == 0
        assert _stored(client) == total
        assert len(list(client.iter_episodes("backfill_user"))) == len(episodes)


@pytest.mark.skipif(not LOCOMO.is_file(), reason="LoCoMo not beside the repository")
def test_dry_run_reads_locomo() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "episodic.cli", "import", str(LOCOMO), "--dry-run", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["threads"] == 272 and summary["messages"] == 5882
    assert summary["datasets"][:2] == ["conv-26", "conv-30"]
    bad = subprocess.run(
        [sys.executable, "-m", "episodic.cli", "import", "-", "--dry-run"],
        input='{"thread": "a", "role": "user", "content": "x"}\n',
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "line 1: no dataset" in bad.stderr


# --------------------------------------------------------------------------- checks before writing
# The dry run and the import check the data itself as Ingest does (episodic.cli.importing),
# name each bad line, and write nothing from a file with one.


def _cli_import(text: str | bytes, *args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    data = text.encode() if isinstance(text, str) else text
    return subprocess.run(
        [sys.executable, "-m", "episodic.cli", "import", "-", *args],
        input=data,
        capture_output=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def _msg(thread: str, content: object = "fine", **extra: object) -> str:
    return json.dumps(
        {"dataset": "d", "thread": thread, "role": "user", "content": content, **extra},
        ensure_ascii=True,
    )


def test_the_dry_run_refuses_every_line_ingest_would_refuse() -> None:
    future = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    nested: dict = {"a": 1}  # type: ignore[type-arg]
    for _ in range(20):
        nested = {"a": nested}
    lines = [
        _msg("ok"),  # 1: fine
        _msg("future", ts=future),  # 2
        _msg("overflow", ts="0001-01-01T00:00:00+14:00"),  # 3
        _msg("nul", "bad\x00nul"),  # 4
        _msg("big", "x" * 70_000),  # 5
        _msg("meta", metadata={"blob": "y" * 20_000}),  # 6
        _msg("deep", metadata=nested),  # 7
        _msg("surrogate", "lone \ud800 surrogate"),  # 8
        _msg("label", label="L" * 300),  # 9
        _msg("T" * 20_000),  # 10: the source id is copied into the thread's metadata
    ]
    done = _cli_import("\n".join(lines) + "\n", "--dry-run")
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "Traceback" not in err
    expected = {
        2: "in the future",
        3: "out of range",
        4: "NUL character",
        5: "70,000 bytes; the limit is 65,536",
        6: "bytes of JSON; the limit is 16,384",
        7: "21 levels deep; the limit is 16",
        8: "lone surrogate",
        9: "label is 300 characters; the limit is 200",
    }
    for line, reason in expected.items():
        assert any(
            row.startswith(f"episodic import: line {line}: ") and reason in row
            for row in err.splitlines()
        ), (line, reason, err)
    assert "line 1:" not in err and "nothing was written" in err
    # The thread-level check (its metadata) comes once every line is fine.
    done = _cli_import(lines[0] + "\n" + lines[9] + "\n", "--dry-run")
    assert done.returncode == 2 and b"line 2: the metadata of thread" in done.stderr


def test_the_import_reads_no_traceback_and_names_the_line() -> None:
    deep = '{"dataset": "d", "thread": "t", "role": "user", "content": "x", "metadata": '
    deep += '{"a":' * 200_000 + "1" + "}" * 200_000 + "}"
    cases = [
        (_msg("t", ts=1e20), "line 2: ts 1e+20 is out of range"),
        (_msg("t", ts=-1e300), "line 2: ts -1e+300 is out of range"),
        (deep, "line 2: not JSON this import can read: nested too deeply"),
        ("[" * 100_000 + "]" * 100_000, "line 2: not JSON this import can read"),
        (_msg("t").replace('"fine"', '"fine", "ts": NaN'), "line 2: NaN is not a JSON number"),
        (_msg("t").encode() + b"\xff", "line 2: not valid UTF-8"),
    ]
    for line, message in cases:
        text = _msg("ok").encode() + b"\n" + (line if isinstance(line, bytes) else line.encode())
        for args in (("--dry-run",), ()):  # the import checks before it connects
            done = _cli_import(text, *args, env={"EPISODIC_INGEST_ADDRESS": "127.0.0.1:9"})
            err = done.stderr.decode()
            assert done.returncode == 2 and "Traceback" not in err, err
            assert f"episodic import: {message}" in err, err


def test_wrong_types_are_refused() -> None:
    export_thread = {"type": "thread", "thread_id": str(uuid.uuid4()), "dataset": "d"}
    cases = [
        (_msg("t", 5), "'content' must be a non-empty string, not a number"),
        (
            json.dumps({"dataset": "d", "thread": 12, "role": "user", "content": "y"}),
            "not a number",
        ),
        (
            json.dumps({"dataset": "d", "thread": {"a": 1}, "role": "user", "content": "y"}),
            "not an object",
        ),
        (_msg("t", label=["l"]), "'label' must be a string, not a list"),
        (_msg("t", name=5), "'name' must be a string, not a number"),
        (_msg("t", ts=True), "ts must be an ISO 8601 string or a Unix time, not a boolean"),
        (
            json.dumps({"conversation_id": "c", "threads": [{"thread_id": "a", "messages": "no"}]}),
            "threads[0].messages (of 'a') must be a list, not a string",
        ),
        (
            json.dumps(
                {
                    "type": "message",
                    "thread_id": export_thread["thread_id"],
                    "sequence": True,
                    "role": "user",
                    "content": "a",
                }
            ),
            "'sequence' must be a whole number, not a boolean",
        ),
        (
            json.dumps(
                {
                    "type": "message",
                    "thread_id": export_thread["thread_id"],
                    "sequence": 99999999999999999999,
                    "role": "user",
                    "content": "a",
                }
            ),
            "'sequence' 99999999999999999999 is out of range",
        ),
    ]
    for line, message in cases:
        done = _cli_import(json.dumps(export_thread) + "\n" + line + "\n", "--dry-run")
        err = done.stderr.decode()
        assert done.returncode == 2 and "Traceback" not in err, (line, err)
        assert err.startswith("episodic import: line 2: ") and message in err, (line, err)


def test_an_idempotency_key_reused_with_other_content_is_refused() -> None:
    thread_id = str(uuid.uuid4())
    records = [
        {"type": "thread", "thread": {"thread_id": thread_id, "dataset": "d", "label": "dup"}},
        *(
            {
                "type": "message",
                "message": {
                    "thread_id": thread_id,
                    "sequence": n,
                    "role": "user",
                    "content": c,
                    "idempotency_key": "K",
                },
            }
            for n, c in ((1, "a"), (2, "b"))
        ),
    ]
    done = _cli_import("\n".join(_lines(*records)) + "\n", "--dry-run")
    assert done.returncode == 2
    assert b"line 3: the idempotency key 'K' of line 2 comes back with other content" in (
        done.stderr
    )
    # The same content at another time: Ingest refuses that replay too (the dry run passed
    # it, and the import stopped part-way with an empty thread).
    times = ("2024-05-01T10:00:00Z", "2024-05-01T11:00:00Z")
    for record, at in zip(records[1:], times, strict=True):
        record["message"]["content"] = "same"
        record["message"]["created_at"] = at
    timed = _cli_import("\n".join(_lines(*records)) + "\n", "--dry-run")
    assert timed.returncode == 2, timed.stderr
    assert b"line 3: the idempotency key 'K' of line 2 comes back" in timed.stderr


def test_a_line_too_long_is_refused_without_reading_it_whole() -> None:
    from episodic.cli.importing import check_file

    big = _msg("big", "x" * 5000) + "\n"
    text = (_msg("ok") + "\n" + big + _msg("ok")).encode()
    checked = check_file(io.BytesIO(text), max_line_bytes=1000)
    assert [str(p) for p in checked.problems] == [
        f"line 2: the line is {len(big):,} bytes; the import reads lines of at most 1,000 bytes"
    ]
    assert not checked.ok


def test_the_checks_use_ingests_own_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    from episodic.cli.importing import check_file, ingest_limits
    from episodic.config import IngestSettings
    from episodic.ops import backfill
    from services.ingest import domain

    assert backfill.MAX_LABEL_CHARS == domain.MAX_LABEL_CHARS
    assert backfill.MAX_KEY_CHARS == domain.MAX_IDEMPOTENCY_KEY_CHARS
    settings = IngestSettings()
    limits = ingest_limits()
    assert limits.max_message_bytes == settings.max_message_bytes
    assert limits.max_metadata_bytes == settings.max_metadata_bytes
    assert limits.future_tolerance == settings.future_timestamp_tolerance
    # A server configured otherwise (the same variables) is checked against its limits.
    monkeypatch.setenv("EPISODIC_MAX_MESSAGE_BYTES", "10")
    checked = check_file(io.BytesIO(_msg("t", "x" * 11).encode()))
    assert [str(p) for p in checked.problems] == [
        "line 1: content is 11 bytes; the limit is 10 (EPISODIC_MAX_MESSAGE_BYTES): split it "
        "into several messages"
    ]
    checked = check_file(io.BytesIO(_msg("t").encode()), batch_size=5000)
    assert "--batch-size 5000 is over Ingest's 1000 messages" in str(checked.problems[0])


@pytest.mark.citus  # through the services, on Citus too
def test_a_file_the_dry_run_refuses_is_not_imported_at_all(spawn) -> None:  # type: ignore[no-untyped-def]
    """Before: the first thread was stored, then the bad line failed the import half-way
    and left an empty thread behind."""
    scheduler = spawn("scheduler")
    ingest = spawn("ingest", env={"EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    env = {
        "EPISODIC_INGEST_ADDRESS": ingest.address,
        "EPISODIC_SCHEDULER_ADDRESS": scheduler.address,
    }
    bad = [
        _msg("first", ts="2020-01-01T00:00:00Z"),
        _msg("second", "bad\x00nul", ts="2020-01-02T00:00:00Z"),
        _msg(
            "third", ts="2020-01-03T00:00:00Z", metadata={"a": [[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}
        ),
    ]
    done = _cli_import("\n".join(bad) + "\n", env=env)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "line 2:" in err and "line 3:" in err and "nothing was written" in err
    with EpisodicClient(ingest=ingest.address) as client:
        assert client.list_threads("d").items == []
        # The good lines alone import.
        done = _cli_import(bad[0] + "\n", env=env)
        assert done.returncode == 0, done.stderr.decode()
        assert [t.message_count for t in client.list_threads("d").items] == [1]


def _report(err: str) -> dict[str, int]:
    """The counts of the stop report's line ``… stopped …: N of M messages acknowledged
    (X new, Y already stored); T of U threads complete``."""
    import re

    line = next(x for x in err.splitlines() if "messages acknowledged" in x)
    found = re.search(
        r"([\d,]+) of ([\d,]+) messages acknowledged \(([\d,]+) new, ([\d,]+) already stored\); "
        r"([\d,]+) of ([\d,]+) threads complete",
        line,
    )
    assert found, line
    names = ("acknowledged", "total", "new", "already", "threads_done", "threads")
    return {n: int(v.replace(",", "")) for n, v in zip(names, found.groups(), strict=True)}


def test_an_interrupted_import_says_where_it_stopped_and_resumes(spawn, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Before: SIGTERM (or Ctrl-C) ended the import with a traceback or nothing at all, and
    an import whose server went away said which thread failed but not what was written.
    Now: SIGTERM stops at a batch boundary and reports exactly what is stored; the server
    going away stops it with the same report; each re-run resumes, and the last one
    completes with no duplicate and a summary that names what it skipped and why."""
    scheduler = spawn("scheduler")
    ingest = spawn("ingest", env={"EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    env = {
        "EPISODIC_INGEST_ADDRESS": ingest.address,
        "EPISODIC_SCHEDULER_ADDRESS": scheduler.address,
    }
    source = tmp_path / "history.jsonl"
    _write_input(source)
    with source.open("a", encoding="utf-8") as out:  # records the import skips, with reasons
        out.write(json.dumps({"type": "episode", "thread_id": "x", "summary": "s"}) + "\n")
        out.write(json.dumps({"type": "episode", "thread_id": "y", "summary": "s"}) + "\n")
        out.write(json.dumps({"type": "end"}) + "\n")
    total = THREADS * PER_THREAD

    with EpisodicClient(ingest=ingest.address) as client:
        # 1. SIGTERM midway, several workers: the batches in flight finish, nothing more.
        run = _import(env, str(source), "--batch-size", "2", "--workers", "3", "--json")
        wait_until(
            lambda: _stored(client) >= 100 or run.poll() is not None,
            timeout=60,
            message="the import stored nothing",
        )
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=60)
        assert run.returncode == 130, err
        assert "Traceback" not in err
        report = _report(err)
        assert "interrupted" in err and "run the same command again to resume" in err
        assert report["total"] == total and report["threads"] == THREADS
        # Exactly what is stored: the import stopped between batches, none was in flight.
        assert report["acknowledged"] == _stored(client)
        assert 100 <= report["acknowledged"] < total
        assert report["new"] == report["acknowledged"] and report["already"] == 0
        stats = json.loads(out)
        assert stats["complete"] is False and stats["stopped"] == "interrupted"
        assert stats["messages"] == report["acknowledged"]
        assert stats["threads_complete"] == report["threads_done"]

    # 2. The server goes away midway (SIGKILL of Ingest): the import stops with the report.
    run = _import(env, str(source), "--batch-size", "2")
    with EpisodicClient(ingest=ingest.address) as client:
        first = _stored(client)
        wait_until(
            lambda: _stored(client) >= first + 100 or run.poll() is not None,
            timeout=60,
            message="the second run stored nothing",
        )
    ingest.kill()
    _, err = run.communicate(timeout=120)
    assert run.returncode == 1, err
    assert "Traceback" not in err and "UNAVAILABLE" in err
    report = _report(err)
    assert report["already"] >= first  # the first run's messages were skipped, not resent
    assert report["acknowledged"] < total

    # 3. Ingest back (a new process, a new port): the same command completes.
    ingest = spawn("ingest", env={"EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    env["EPISODIC_INGEST_ADDRESS"] = ingest.address
    with EpisodicClient(ingest=ingest.address) as client:
        stored_before = _stored(client)
        assert stored_before >= report["acknowledged"]
        run = _import(env, str(source), "--batch-size", "50", "--json")
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        stats = json.loads(out)
        assert stats["complete"] is True and stats["messages"] == total
        assert stats["already_stored"] >= stored_before
        assert stats["stored"] == total - stats["already_stored"]
        assert stats["threads_complete"] == THREADS
        assert stats["skipped"] == {"end": 1, "episode": 2}
        assert "skipped 2 episode record(s): episodes are made again" in err
        assert "skipped 1 end record(s)" in err
        # All records, each once, in order.
        threads = client.recent_threads("backfill_user", 100)
        assert len(threads) == THREADS
        for thread in threads:
            t = int(thread.label.split()[1])
            keys = [m.idempotency_key for m in client.load_session(thread.thread_id)]
            assert keys == [f"import:chat-{t:02d}:{i}" for i in range(PER_THREAD)]
