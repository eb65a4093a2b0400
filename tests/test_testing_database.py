"""Where the test suite's PostgreSQL keeps its data (``episodic.testing.database``): in RAM
when the machine has a RAM-backed directory with room, anywhere the environment says, else
the system's temporary directory."""

from __future__ import annotations

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
