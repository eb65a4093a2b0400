"""Encryption at rest: no column holds a person's words in the clear, recall ranks exactly
as it does over the clear text, keys rotate without rewriting data, and a wrong or missing
key is a clear error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from sqlalchemy import text

from episodic.crypto import ClearKey, DataKey, LocalKeyring, WrongKey, plain
from episodic.services.recall import domain
from episodic.store.recall_queries import RecallFilters
from episodic.testing.keys import keyring_file, test_vault
from episodic.testing.scan import find
from tests.recall.factory import EMBEDDER, T0, make_episode

pytestmark = pytest.mark.citus  # key rotation and sealed recall run on Citus too

WORDS = ("marzipanword", "marzipanlabel", "marzipanmeta", "marzipanperson")


def _write(client) -> str:  # type: ignore[no-untyped-def]
    thread = client.create_thread(
        "private_user", label="marzipanlabel trip", metadata={"note": "marzipanmeta"}
    )
    client.add_messages(
        thread.thread_id,
        [
            {
                "role": "user",
                "content": "I decided the marzipanword budget is 300 euros for Lisbon.",
                "metadata": {"name": "marzipanperson"},
            },
            ("assistant", "Noted: marzipanword budget of 300 euros, trip to Lisbon."),
        ],
    )
    client.end_thread(thread.thread_id)
    assert client.process_pending() == 1
    return str(thread.thread_id)


def test_no_column_holds_a_message_in_the_clear(suite, engine) -> None:  # type: ignore[no-untyped-def]
    client = suite()
    thread_id = _write(client)
    with engine.connect() as conn:
        assert not find(conn, [*WORDS, "Lisbon", "euros"])
        encrypted = conn.execute(
            text("SELECT key_id IS NOT NULL FROM datasets WHERE dataset = 'private_user'")
        ).scalar_one()
    assert encrypted
    # … and yet everything reads back, and recall finds it by its words and by meaning.
    thread = client.get_thread(thread_id)
    assert thread.label == "marzipanlabel trip" and thread.metadata == {"note": "marzipanmeta"}
    [first, _] = client.list_messages(thread_id).items
    assert "marzipanword" in first.content and first.metadata == {"name": "marzipanperson"}
    found = client.recall("private_user", "marzipanword", similarity_weight=1, recency_weight=0)
    assert [e.episode.thread_id for e in found.episodes] == [thread_id]
    assert found.episodes[0].lexical == pytest.approx(1.0)
    entities = found.episodes[0].episode.entities
    assert entities, "the summary names entities"
    by_entity = client.recall("private_user", entities=[entities[0]])
    assert [e.episode.thread_id for e in by_entity.episodes] == [thread_id]
    assert not client.recall("private_user", entities=["nobody at all"]).episodes


def test_the_scan_sees_words_stored_in_the_clear(suite, engine) -> None:  # type: ignore[no-untyped-def]
    """The control of the test above: with encryption off the same scan finds them."""
    client = suite({"EPISODIC_ENCRYPTION": "off"})
    _write(client)
    with engine.connect() as conn:
        hits = {(h.table, h.column) for h in find(conn, WORDS)}
    assert {("messages", "content"), ("threads", "label"), ("messages", "metadata")} <= hits
    assert ("episodes", "search_vector") in hits  # the lexical index holds words too


def test_recall_over_blind_tokens_ranks_exactly_as_over_words(engine) -> None:  # type: ignore[no-untyped-def]
    """The same episodes in an encrypted and a clear dataset: every query ranks them the
    same, with the same scores (BM25 over tokens is BM25 over words)."""
    corpus = [
        ["We chose the annual pricing plan at 20% off.", "Invoices go out on the 1st."],
        ["My daughter's recital is on Friday at six.", "I'll leave work early."],
        ["Pricing for the enterprise tier is per seat.", "Ask about volume discounts."],
        ["The dentist moved my appointment to Tuesday.", "Remind me on Monday."],
        ["We decided against monthly pricing last week.", "Annual is cheaper for us."],
    ]
    with engine.begin() as conn:
        test_vault(encrypt=False).for_write(conn, "clear")  # registered without a key
        for dataset in ("clear", "sealed"):
            for days, messages in enumerate(corpus):
                make_episode(
                    conn,
                    dataset,
                    messages,
                    ended_at=T0.replace(day=1 + days),
                    entities=["pricing"] if "ricing" in messages[0] else [],
                )
    with engine.connect() as conn:
        keys = {d: test_vault().for_read(conn, d) for d in ("clear", "sealed")}
        assert isinstance(keys["clear"], ClearKey) and isinstance(keys["sealed"], DataKey)
        for query in ("pricing decision", "recital Friday", "dentist", "annual plan"):
            ranked = {}
            for dataset in ("clear", "sealed"):
                request = domain.RecallQuery(
                    dataset=dataset,
                    query=query,
                    include_episodes=True,
                    limit=5,
                    similarity_weight=0.7,
                    recency_weight=0.3,
                    filters=RecallFilters(as_of=T0.replace(day=10)),
                )
                rows = domain.recall(conn, test_vault(), request, EMBEDDER.embed_query(query)).rows
                ranked[dataset] = [(r["summary"], round(r["relevance"], 9)) for r in rows]
            assert ranked["clear"] == ranked["sealed"], query
        filtered = domain.recall(
            conn,
            test_vault(),
            domain.RecallQuery(
                dataset="sealed",
                query=None,
                include_episodes=True,
                limit=5,
                similarity_weight=0.7,
                recency_weight=0.3,
                filters=RecallFilters(entities=["pricing"]),
            ),
            None,
        )
    assert len(filtered.rows) == 3


def test_a_sealed_value_opens_only_in_its_dataset_and_column() -> None:
    key = DataKey(key_id="k", dataset="a", material=b"\x01" * 32)
    sealed = key.seal("hello", "messages.content")
    assert sealed[:1] == b"\x01" and b"hello" not in sealed
    assert key.open(sealed, "messages.content") == "hello"
    assert key.open(plain("old"), "messages.content") == "old"  # stored before encryption
    with pytest.raises(Exception):  # noqa: B017 - authentication fails (InvalidTag)
        key.open(sealed, "threads.label")
    other = DataKey(key_id="k", dataset="b", material=b"\x01" * 32)
    with pytest.raises(Exception):  # noqa: B017
        other.open(sealed, "messages.content")
    tampered = sealed[:-1] + bytes([sealed[-1] ^ 1])
    with pytest.raises(Exception):  # noqa: B017
        key.open(tampered, "messages.content")
    newer = DataKey(key_id="k2", dataset="a", material=b"\x02" * 32)
    with pytest.raises(WrongKey):
        newer.open(sealed, "messages.content")
    # Tokens: equal words, equal tokens; another key, other tokens; never the word.
    assert key.token("pricing") == key.token("pricing") != key.token("price")
    assert key.token("pricing") != DataKey("k", "a", b"\x03" * 32).token("pricing")
    assert "pricing" not in key.token("pricing")


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "episodic.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_rotating_the_master_key_rewrites_no_data(suite, engine, db_url, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    keyring = tmp_path / "keys.json"
    shutil.copy(keyring_file(), keyring)
    client = suite({"EPISODIC_MASTER_KEY_FILE": str(keyring)})
    thread_id = _write(client)
    with engine.connect() as conn:
        before = conn.execute(text("SELECT content FROM messages ORDER BY sequence")).all()
        master = conn.execute(text("SELECT master_key_id FROM datasets")).scalar_one()
    env = {"EPISODIC_DATABASE_URL": db_url, "EPISODIC_MASTER_KEY_FILE": str(keyring)}
    done = _cli("encryption", "rotate", env=env)
    assert done.returncode == 0, done.stderr
    assert "re-wrapped 1 data key" in done.stdout
    with engine.connect() as conn:
        after = conn.execute(text("SELECT content FROM messages ORDER BY sequence")).all()
        new_master = conn.execute(text("SELECT master_key_id FROM datasets")).scalar_one()
    assert after == before, "no data rewritten"
    assert new_master != master and new_master == LocalKeyring.load(keyring).active_key_id
    # A process that never unwrapped this dataset's key finds the new master key in the
    # file (it only knew the old one when it started).
    fresh = suite({"EPISODIC_MASTER_KEY_FILE": str(keyring)})
    assert fresh.get_thread(thread_id).label == "marzipanlabel trip"
    # The old master key wraps nothing now: it can go, and everything still reads.
    assert _cli("encryption", "retire", master, env=env).returncode == 0
    assert master not in json.loads(keyring.read_text())["keys"]
    assert suite({"EPISODIC_MASTER_KEY_FILE": str(keyring)}).get_thread(thread_id).label
    refused = _cli("encryption", "retire", new_master, env=env)
    assert refused.returncode != 0 and "still wraps" in refused.stdout


def test_a_wrong_or_missing_keyring_is_a_clear_error(suite, spawn, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    client = suite()
    thread_id = _write(client)
    other = tmp_path / "other.json"
    LocalKeyring.create(other)
    from episodic.sdk.client import EpisodicClient, EpisodicRpcError

    for env in ({"EPISODIC_MASTER_KEY_FILE": str(other)}, {"EPISODIC_MASTER_KEY_FILE": ""}):
        ingest = spawn("ingest", env=env)
        with (
            EpisodicClient(ingest=ingest.address) as stranger,
            pytest.raises(EpisodicRpcError) as err,
        ):
            stranger.get_thread(thread_id)
        assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION
        assert err.value.reason == "ENCRYPTION_KEY_UNAVAILABLE"
        assert "private_user" in err.value.message


def test_encryption_required_without_a_keyring_refuses_to_start(db_url) -> None:  # type: ignore[no-untyped-def]
    done = subprocess.run(
        [sys.executable, "-m", "episodic.services.recall"],
        env={
            **{k: v for k, v in os.environ.items() if k != "EPISODIC_MASTER_KEY_FILE"},
            "EPISODIC_DATABASE_URL": db_url,
            "EPISODIC_ENCRYPTION": "required",
            "EPISODIC_EMBEDDING_PROVIDER": "hashing",
            "EPISODIC_RECALL_PORT": "0",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "EPISODIC_MASTER_KEY_FILE" in done.stdout + done.stderr
