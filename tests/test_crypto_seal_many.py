"""DataKey.seal_many / ClearKey.seal_many: the batch form of seal (AddMessages seals every
message's content and metadata with it)."""

from __future__ import annotations

import os

import pytest
from cryptography.exceptions import InvalidTag

from episodic.crypto import NONCE_BYTES, SEALED, ClearKey, DataKey, WrongKey, fingerprint


def test_seal_many_values_open_like_seal_and_each_has_its_own_nonce() -> None:
    key = DataKey("key-1", "alice", os.urandom(32))
    texts = ["hello", "", "hello", "naïve ☕ text", "x" * 10_000]
    sealed = key.seal_many(texts, "messages.content")
    assert [key.open(v, "messages.content") for v in sealed] == texts
    header = 1 + len(fingerprint("key-1"))
    nonces = [v[header : header + NONCE_BYTES] for v in sealed]
    assert len(set(nonces)) == len(texts)  # equal texts seal differently
    assert sealed[0] != sealed[2]
    assert all(v[:1] == SEALED for v in sealed)
    # The column and the dataset are bound in: another column or dataset does not open it.
    with pytest.raises(InvalidTag):
        key.open(sealed[0], "messages.metadata")
    with pytest.raises(InvalidTag):
        DataKey("key-1", "bob", key.material).open(sealed[0], "messages.content")
    with pytest.raises(WrongKey):
        DataKey("key-2", "alice", os.urandom(32)).open(sealed[0], "messages.content")


def test_seal_many_of_nothing_and_in_the_clear() -> None:
    assert DataKey("k", "alice", os.urandom(32)).seal_many([], "messages.content") == []
    clear = ClearKey("alice")
    assert clear.seal_many(["a", "b"], "messages.content") == [
        clear.seal("a", "messages.content"),
        clear.seal("b", "messages.content"),
    ]
