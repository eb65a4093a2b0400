"""`episodic replay`: an export of a real suite's data, replayed through the pipeline on a
scratch database, reports identical windows when nothing changed and the difference when
a setting did."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from episodic.testing.database import TestDatabases
from tests.cli.test_export import DATASET, Suite, ok, records, running_suite


@pytest.fixture(scope="module")
def exported(
    databases: TestDatabases, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Suite, Path]]:
    """The suite of test_export (three threads, episodes of every status), exported."""
    with running_suite(databases) as suite:
        path = tmp_path_factory.mktemp("replay") / "export.jsonl"
        ok(suite.env, "export", DATASET, "-o", str(path))
        yield suite, path


def test_replay_of_an_unchanged_pipeline_reproduces_the_windows(
    exported: tuple[Suite, Path],
) -> None:
    suite, path = exported
    done = ok(
        {},
        "replay",
        str(path),
        "--json",
        "--database-url",
        suite.admin_url,  # a scratch database on the test server, dropped afterwards
        "--query",
        "the Atlas invoice",
        "--query",
        "family car Toyota",
        "-k",
        "1",
    )
    report = json.loads(done.stdout)
    threads = {t["thread_id"]: t for t in report["threads"]}
    assert set(threads) == set(suite.threads.values())
    for thread in threads.values():
        assert thread["windows_identical"], thread
        assert not thread["entities_removed"], thread
    a = threads[suite.threads["a"]]
    assert [(w["start"], w["end"]) for w in a["old_windows"]] == [(1, 2), (3, 4)]
    assert [(w["start"], w["end"]) for w in a["new_windows"]] == [(1, 2), (3, 4)]
    assert [w["status"] for w in a["new_windows"]] == ["archived", "completed"]
    # Thread c was still pending in the old suite; the replay summarised it.
    c = threads[suite.threads["c"]]
    assert [w["status"] for w in c["old_windows"]] == ["pending"]
    assert [w["status"] for w in c["new_windows"]] == ["completed"]
    assert "corolla" in c["entities_added"]  # summarised for the first time
    for name in ("a", "b"):  # same messages, same summariser: the same summary
        assert threads[suite.threads[name]]["summary_similarity"] == pytest.approx(1.0, abs=1e-3)
        assert not threads[suite.threads[name]]["entities_added"]
    assert report["totals"]["windows_identical"] == 3 and report["totals"]["new_episodes"] == 4
    assert "cosine" in report["summary_similarity_measure"]
    recall = {q["query"]: q for q in report["recall"]}
    assert recall["the Atlas invoice"]["old"] == [suite.threads["a"]]
    assert recall["family car Toyota"]["old"] == [suite.threads["b"]]
    assert all(q["new"] == q["old"] and q["overlap"] == 1.0 for q in report["recall"])


def test_replay_reports_a_changed_inactivity_setting(exported: tuple[Suite, Path]) -> None:
    suite, path = exported
    lines = records(path.read_text(encoding="utf-8"))
    assert lines[-1]["type"] == "end"
    # Every message was written by its own call, so each was received at its own time: an
    # idle timer of a microsecond fires between any two of them.
    done = ok(
        {"EPISODIC_AUTO_EPISODE_INTERVAL": "0.000001"},
        "replay",
        str(path),
        "--database-url",
        suite.admin_url,
    )
    out = done.stdout
    assert "auto_episode_interval 1e-06s" in out
    a = suite.threads["a"]
    block = out[out.index(a) :].splitlines()
    assert "WINDOWS DIFFER" in block[0]
    assert block[1].split() == ["old:", "1-2", "(explicit)", "3-4", "(inactivity)"]
    assert block[2].split()[:3] == ["new:", "1-1", "(inactivity)"]
    assert [w.split()[0] for w in block[2].split("new:")[1].split(")")[:-1]] == [
        "1-1",
        "2-2",
        "3-3",
        "4-4",
    ]
    assert "windows identical in 1 of 3 threads" in out  # c has a single message


def test_replay_refuses_what_is_not_an_export() -> None:
    from episodic.replay import ExportReader, ReplayError

    with pytest.raises(ReplayError, match="not an episodic export"):
        ExportReader(['{"thread": "t1", "role": "user", "content": "hi"}'])
    header = '{"type": "dataset", "format": "episodic-export", "version": 1, "dataset": "d"}'
    with pytest.raises(ReplayError, match="version 2"):
        ExportReader([header.replace('"version": 1', '"version": 2')])
    reader = ExportReader(
        [header, '{"type": "thread", "thread_id": "a"}', '{"type": "message", "thread_id": "b"}']
    )
    with pytest.raises(ReplayError, match="outside that thread's block"):
        list(reader.bundles())


@pytest.mark.slow
def test_replay_on_its_own_embedded_database(exported: tuple[Suite, Path]) -> None:
    """Without --database-url: an embedded PostgreSQL in a temporary directory, stopped
    and removed afterwards (slow: initdb and a server start)."""
    _, path = exported
    out = ok({}, "replay", str(path)).stdout
    assert "windows identical in 3 of 3 threads" in out
