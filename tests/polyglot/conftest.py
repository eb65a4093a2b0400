"""The suite a polyglot client calls (see suite.py)."""

from __future__ import annotations

import pytest

from tests.polyglot.suite import KeyedSuite, start_keyed_suite


@pytest.fixture
def keyed_suite(spawn, engine) -> KeyedSuite:  # type: ignore[no-untyped-def]
    return start_keyed_suite(spawn, engine)
