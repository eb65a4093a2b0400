"""Where the test suite's PostgreSQL keeps its data (``episodic.testing.database``): in RAM
when the machine has a RAM-backed directory with room, anywhere the environment says, else
the system's temporary directory."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from episodic.testing import database


def test_the_environment_chooses_first(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EPISODIC_TEST_DATA_PARENT", str(tmp_path))
    monkeypatch.setattr(database, "RAM_DIRECTORY", tmp_path / "elsewhere")
    assert database.server_data_parent() == str(tmp_path)


def test_a_ram_directory_with_room_is_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("EPISODIC_TEST_DATA_PARENT", raising=False)
    monkeypatch.setattr(database, "RAM_DIRECTORY", tmp_path)
    monkeypatch.setattr(database, "RAM_DIRECTORY_MIN_FREE", 1)
    assert database.server_data_parent() == str(tmp_path)


def test_without_room_or_directory_the_default_temporary_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("EPISODIC_TEST_DATA_PARENT", raising=False)
    monkeypatch.setattr(database, "RAM_DIRECTORY", tmp_path)
    monkeypatch.setattr(database, "RAM_DIRECTORY_MIN_FREE", 1 << 62)  # more than any disk
    assert database.server_data_parent() is None
    monkeypatch.setattr(database, "RAM_DIRECTORY", tmp_path / "missing")
    monkeypatch.setattr(database, "RAM_DIRECTORY_MIN_FREE", 1)
    assert database.server_data_parent() is None


def _server_directory(parent: Path, name: str, *, age: float, pid: int | None) -> Path:
    directory = parent / f"{database.SERVER_DIRECTORY_PREFIX}{name}"
    (directory / "pgdata").mkdir(parents=True)
    if pid is not None:
        (directory / "pgdata" / "postmaster.pid").write_text(f"{pid}\n/somewhere\n")
    then = time.time() - age
    os.utime(directory, (then, then))
    return directory


def test_abandoned_server_directories_are_removed_and_live_or_new_ones_kept(
    tmp_path: Path,
) -> None:
    finished = subprocess.Popen(["true"])
    finished.wait()  # its pid now names no process
    abandoned = _server_directory(tmp_path, "killed", age=3600, pid=finished.pid)
    never_started = _server_directory(tmp_path, "nopid", age=3600, pid=None)
    running = _server_directory(tmp_path, "running", age=3600, pid=os.getpid())
    just_made = _server_directory(tmp_path, "new", age=5, pid=None)
    # A Citus cluster: one data directory per node, the coordinator's server stopped.
    cluster = _server_directory(tmp_path, "citus", age=3600, pid=None)
    (cluster / "pgdata").rmdir()
    for node, pid in (("coordinator", finished.pid), ("worker1", os.getpid())):
        (cluster / node).mkdir()
        (cluster / node / "postmaster.pid").write_text(f"{pid}\n/somewhere\n")
    os.utime(cluster, (0, 0))
    other = tmp_path / "someone-elses"
    other.mkdir()
    os.utime(other, (0, 0))

    removed = database.remove_abandoned(str(tmp_path))

    assert sorted(removed) == sorted([abandoned, never_started])
    assert not abandoned.exists() and not never_started.exists()
    assert running.exists() and just_made.exists() and other.exists() and cluster.exists()
