"""The SDK's first import paths still work: ``episodic.client`` and ``episodic.aio`` (what
users' code imports) re-export the clients that live in ``episodic.sdk.client`` and
``episodic.sdk.aio`` — the same objects, so ``isinstance``, ``except`` and monkeypatching
a class behave as before. This is the only code in the repository that imports them
(tests/test_layers.py keeps it so for the package)."""

from __future__ import annotations

import importlib

import pytest

import episodic.sdk.aio
import episodic.sdk.client

#: Names importable from the old modules before the move that are not in their __all__.
_KEPT_OUTSIDE_ALL = {
    "episodic.client": (
        "DEFAULT_TIMEOUT",
        "MessageLike",
        "ClientCore",
        "Emit",
        "Flow",
        "Sleep",
        "Step",
        "Stream",
        "present_as_method",
        "translate_error",
    ),
    "episodic.aio": (
        "ClientCore",
        "Emit",
        "EpisodicRpcError",
        "Flow",
        "Sleep",
        "Step",
        "Stream",
        "present_as_method",
        "translate_error",
    ),
}


@pytest.mark.parametrize(
    ("old", "new"),
    [("episodic.client", episodic.sdk.client), ("episodic.aio", episodic.sdk.aio)],
)
def test_the_old_module_re_exports_the_same_objects(old: str, new: object) -> None:
    module = importlib.import_module(old)
    assert module.__all__ == new.__all__  # type: ignore[attr-defined]
    for name in [*new.__all__, *_KEPT_OUTSIDE_ALL[old]]:  # type: ignore[attr-defined]
        assert getattr(module, name) is getattr(new, name), name


def test_the_documented_imports_still_work() -> None:
    from episodic.aio import AsyncEpisodicClient
    from episodic.client import EpisodicClient, EpisodicRpcError, NotFoundError

    assert EpisodicClient is episodic.sdk.client.EpisodicClient
    assert AsyncEpisodicClient is episodic.sdk.aio.AsyncEpisodicClient
    assert issubclass(NotFoundError, EpisodicRpcError)
    assert NotFoundError is episodic.sdk.NotFoundError
