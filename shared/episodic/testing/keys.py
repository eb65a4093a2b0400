"""Encryption at rest in tests: one master keyring per test process, shared by the
services it starts (EPISODIC_MASTER_KEY_FILE) and by tests that write rows directly, so
tests run with encryption on — as `episodic up` and the prod overlay do."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from functools import lru_cache
from pathlib import Path

from episodic.crypto import LocalKeyring
from episodic.store.vault import Vault

__all__ = ["keyring_file", "test_vault"]


_lock = threading.Lock()
_keyring: Path | None = None


def keyring_file() -> Path:
    """This process's test keyring (created on first use, removed at exit). Locked: tests
    start services from several threads at once, and they must all get the same one."""
    global _keyring
    with _lock:
        if _keyring is None:
            directory = Path(tempfile.mkdtemp(prefix="episodic-test-keys-"))
            atexit.register(shutil.rmtree, directory, ignore_errors=True)
            path = directory / "master-keys.json"
            LocalKeyring.create(path)
            _keyring = path
        return _keyring


@lru_cache(maxsize=2)
def test_vault(encrypt: bool = True) -> Vault:
    """A vault over :func:`keyring_file`: ``encrypt`` decides whether datasets it
    registers get a data key."""
    return Vault(LocalKeyring.load(keyring_file()), encrypt=encrypt)


# A helper, not a test: modules that import it by name must not have pytest collect it.
test_vault.__test__ = False  # type: ignore[attr-defined]
