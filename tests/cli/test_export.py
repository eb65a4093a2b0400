"""`episodic export`: against a real suite (four service processes over a real
PostgreSQL), run as a newcomer runs it (a subprocess), and the pseudonymiser on its own."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import stat
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from episodic.ops.export import NOT_NAME_PARTS, Pseudonymiser, load_or_create_key
from episodic.sdk.client import EpisodicClient
from episodic.testing.database import TestDatabases
from episodic.testing.processes import ServiceProcess, start_service, wait_until

pytestmark = pytest.mark.citus  # export reads every table: on Citus too

DATASET = "acme_support"
#: Names the data carries in metadata (values of identifier keys).
PEOPLE = ["alice_w", "Alice Walker", "bob.k@example.com", "Bob Kowalski"]
#: A second dataset with the names a hostile probe found in clear in masked exports.
PRIVATE = "acme_private"
#: Every name :func:`fill_private` gives, whole and each of its words.
PRIVATE_PEOPLE = ["cdanvers", "Carol Danvers", "Peter Parker", "Jean-Luc Picard",
                  "Miles O'Brien", "Wu Li", "Pablo Diego José Ruiz Picasso"]  # fmt: skip


@dataclasses.dataclass
class Suite:
    env: dict[str, str]
    db_url: str
    admin_url: str
    threads: dict[str, str]  # name -> thread id
    private: dict[str, str] = dataclasses.field(default_factory=dict)  # of PRIVATE


@contextmanager
def running_suite(databases: TestDatabases) -> Iterator[Suite]:
    """A fresh database and the four services (no background loops: the test drives the
    Scheduler and the Summariser), filled by :func:`fill`."""
    db_url = databases.create()
    started: list[ServiceProcess] = []
    try:
        scheduler = start_service("scheduler", db_url)
        started.append(scheduler)
        # The other three at once (each waits for its own readiness, not a sleep).
        with ThreadPoolExecutor(3) as pool:
            futures = [
                pool.submit(start_service, name, db_url, env)
                for name, env in (
                    ("ingest", {"EPISODIC_SCHEDULER_ADDRESS": scheduler.address}),
                    ("summariser", None),
                    ("recall", None),
                )
            ]
            for future in futures:
                with contextlib.suppress(Exception):  # raised again by result() below
                    started.append(future.result())
            for future in futures:
                future.result()
        by_name = {s.name: s.address for s in started}
        env = {f"EPISODIC_{n.upper()}_ADDRESS": a for n, a in by_name.items()}
        with EpisodicClient(
            ingest=by_name["ingest"],
            recall=by_name["recall"],
            scheduler=by_name["scheduler"],
            summariser=by_name["summariser"],
        ) as client:
            # The compaction first: its summariser pass must not summarise thread c of
            # fill, and fill's sweeps must not open episodes on the other threads.
            compacted = fill_compacted(client)
            threads = fill(client)
            private = fill_private(client) | compacted
        yield Suite(env, db_url, databases.admin_url, threads, private)
    finally:
        for service in reversed(started):
            service.terminate()
        databases.drop(db_url)


def fill(client: EpisodicClient) -> dict[str, str]:
    """Three threads with names in metadata and text, episodes of four statuses
    (archived, completed, pending) and every trigger the export must keep."""
    a = client.create_thread(
        DATASET,
        label="billing Alice",
        metadata={"user_id": "alice_w", "channel": "email", "nested": {"author": "Alice Walker"}},
    ).thread_id
    # One call per message: each is received at its own time (replay reads those times).
    client.add_message(
        a,
        "user",
        "Hi, I'm Alice Walker. We agreed on the Pro tier at $29 for project Atlas.\n"
        "Second line\u2028with a line separator.",
        metadata={"name": "Alice Walker"},
    )
    client.add_message(a, "assistant", "Noted, Alice: the Pro tier for project Atlas.")
    client.end_thread(a)  # explicit: 1-2
    # EndThread opens 1-2 through the Scheduler within Ingest's notice deadline (2 s); on a
    # loaded machine that call can be lost, and the catch-up then opens the checkpoint but
    # arms 3-4's idle timer only on its next pass. Sweeps now make 1-2 certain either way.
    swept_until_opened(client, a, 1)
    client.add_message(
        a,
        "user",
        "Alice again: please send the Atlas invoice to alice_w.",
        metadata={"name": "Alice Walker"},
    )
    client.add_message(a, "assistant", "I will send the Atlas invoice today.")
    swept_until_opened(client, a, 2, as_of=datetime.now(UTC) + timedelta(hours=1))  # idle: 3-4
    client.process_pending()  # 1-2 archived, 3-4 completed

    b = client.create_thread(
        DATASET, label="cars", metadata={"user": "bob.k@example.com"}
    ).thread_id
    client.add_message(
        b,
        "user",
        "Bob Kowalski here; I need a family car under $30k, the Toyota Corolla maybe.",
        metadata={"speaker": "Bob Kowalski"},
        created_at=datetime(2025, 3, 1, 9, 0, tzinfo=UTC),
    )
    client.add_message(b, "assistant", "The Toyota Corolla Hybrid fits your budget, Bob.")
    client.end_thread(b)
    swept_until_opened(client, b, 1)  # as for 1-2: certain even if the notice was lost
    client.process_pending()  # completed

    c = client.create_thread(DATASET, label="later").thread_id
    client.add_message(c, "user", "Bob Kowalski asked about the Corolla again.")
    client.end_thread(c)  # pending: nobody summarises it
    swept_until_opened(client, c, 1)  # as for 1-2 (a CI run once exported three, not four)
    return {"a": a, "b": b, "c": c}


def swept_until_opened(
    client: EpisodicClient, thread_id: str, episodes: int, as_of: datetime | None = None
) -> None:
    """Sweeps (``as_of``) until the thread has ``episodes`` episodes. One sweep is not
    always enough: Ingest's notice still in flight when it runs holds the thread's row
    (the catch-up skips a locked thread) and commits its timer after the sweep fired the
    due ones, so the episode waits for a later sweep (two CI runs exported three episodes
    of the four after a single sweep each)."""

    def opened() -> bool:
        client.run_sweep(as_of=as_of)
        return len(client.list_episodes(DATASET, thread_id=thread_id).items) >= episodes

    wait_until(opened, timeout=60, message=f"the thread's episode {episodes} was not opened")


def fill_compacted(client: EpisodicClient) -> dict[str, str]:
    """Dataset :data:`PRIVATE`'s compacted thread: its messages gone, the compaction summary
    naming Carol Danvers in their place."""
    compacted = client.create_thread(
        PRIVATE,
        label="Chat with Carol Danvers",
        metadata={"user_id": "cdanvers", "name": "Carol Danvers"},
    ).thread_id
    client.add_message(
        compacted,
        "user",
        "Carol Danvers here: the Atlas budget is approved.",
        metadata={"speaker": "Carol Danvers"},
    )
    client.add_message(compacted, "assistant", "Thanks, Carol: approved at $29 per seat.")
    client.end_thread(compacted)
    client.run_sweep()  # as in fill: the episode is certain
    client.process_pending()
    client.set_dataset_policy(PRIVATE, compact_after_days=1)
    swept = client.run_sweep(as_of=datetime.now(UTC) + timedelta(days=3))
    assert swept.threads_compacted == 1, swept
    compaction = client.get_thread(compacted).compaction
    assert compaction is not None and "Carol Danvers" in compaction.summary
    return {"compacted": compacted}


def fill_private(client: EpisodicClient) -> dict[str, str]:
    """The rest of :data:`PRIVATE`: a person named only by an event without a thread
    (Peter Parker, mentioned in an earlier message), and names of every shape (hyphen,
    apostrophe, two letters, five words, a handle) in a thread left open (no episode:
    no entity the summariser extracted masks them by chance)."""
    calls = client.create_thread(PRIVATE, label="support").thread_id
    client.add_message(calls, "user", "Peter Parker called about the invoice.")
    client.record_event(
        PRIVATE,
        "Peter Parker escalated the invoice",
        event_type="feedback",
        actor="Peter Parker",
        entities=["Peter Parker"],
    )

    names = client.create_thread(PRIVATE, label="names").thread_id
    for content, metadata in [
        ("Jean-Luc Picard here; Jean-Luc to friends, Luc to some.", {"name": "Jean-Luc Picard"}),
        ("O'Brien signing off; Miles O\u2019Brien's shift ends.", {"author": "Miles O'Brien"}),
        ("Li speaking, for Wu Li.", {"sender": "Wu Li"}),
        ("Pablo here; Diego, Jos\u0065\u0301 and Picasso will call.",
         {"name": "Pablo Diego José Ruiz Picasso"}),
        ("Ping carol_danvers or Danvers_Carol; the invoice is approved.", {}),
    ]:  # fmt: skip
        client.add_message(names, "user", content, metadata=metadata)
    return {"calls": calls, "names": names}


@pytest.fixture(scope="module")
def suite(databases: TestDatabases) -> Iterator[Suite]:
    with running_suite(databases) as s:
        yield s


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "episodic.cli", *args],
        env={**os.environ, "EPISODIC_EMBEDDING_PROVIDER": "hashing", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def ok(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = run_cli(env, *args)
    assert done.returncode == 0, f"episodic {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


def records(text: str) -> list[dict[str, Any]]:
    """Every line is exactly one JSON object (str.splitlines also splits on U+2028)."""
    lines = text.splitlines()
    assert lines == text.split("\n")[:-1] and text.endswith("\n")
    out = [json.loads(line) for line in lines]
    assert all(isinstance(r, dict) for r in out)
    return out


def _wire(value: Any) -> Any:
    if isinstance(value, tuple | list):  # a message's tool calls: a list of objects
        return [dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v for v in value]
    return value.isoformat() if isinstance(value, datetime) else value


def _same(record: dict[str, Any], obj: Any, kind: str) -> None:
    """The record holds every field of the SDK object, equal, and parses back to it."""
    assert record["type"] == kind
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        assert record[f.name] == _wire(value), (kind, f.name)
        if isinstance(value, datetime):
            assert datetime.fromisoformat(record[f.name]) == value


# --------------------------------------------------------------------------- export


def test_export_round_trips_every_field_one_object_per_line(suite: Suite) -> None:
    done = ok(suite.env, "export", DATASET)
    assert "lines/s" not in done.stderr  # no progress when stderr is not a terminal
    out = records(done.stdout)
    header, *body, end = out
    assert header["type"] == "dataset" and header["format"] == "episodic-export"
    assert header["version"] == 1 and header["dataset"] == DATASET
    assert not header["pseudonymised"] and datetime.fromisoformat(header["exported_at"])
    counts = {k: sum(1 for r in body if r["type"] == k) for k in ("thread", "message", "episode")}
    assert end["type"] == "end" and end["counts"] == counts
    episodes = [(r.get("thread_id"), r.get("status")) for r in body if r["type"] == "episode"]
    assert counts == {"thread": 3, "message": 7, "episode": 4}, (suite.threads, episodes)

    # Grouped: each thread's line, then its messages in order, then its episodes.
    order = [(r["type"], r["thread_id"]) for r in body]
    for thread_id in suite.threads.values():
        mine = [i for i, (_, t) in enumerate(order) if t == thread_id]
        assert mine == list(range(mine[0], mine[0] + len(mine)))
        assert order[mine[0]][0] == "thread"

    with EpisodicClient(**_addresses(suite)) as client:
        for thread_id in suite.threads.values():
            thread = client.get_thread(thread_id)
            _same(
                next(r for r in body if r["type"] == "thread" and r["thread_id"] == thread_id),
                thread,
                "thread",
            )
            messages = client.load_session(thread_id)
            exported = [r for r in body if r["type"] == "message" and r["thread_id"] == thread_id]
            assert [r["sequence"] for r in exported] == [m.sequence for m in messages]
            for record, message in zip(exported, messages, strict=True):
                _same(record, message, "message")
            episodes = list(client.iter_episodes(DATASET, thread_id=thread_id))
            exported = [r for r in body if r["type"] == "episode" and r["thread_id"] == thread_id]
            assert [r["start_sequence"] for r in exported] == sorted(
                e.start_sequence for e in episodes
            )
            for episode in episodes:
                _same(
                    next(r for r in exported if r["episode_id"] == episode.episode_id),
                    episode,
                    "episode",
                )

    statuses = {r["status"] for r in body if r["type"] == "episode"}
    assert statuses == {"archived", "completed", "pending"}  # every status, no filter
    a_windows = [
        (r["start_sequence"], r["end_sequence"], r["trigger"])
        for r in body
        if r["type"] == "episode" and r["thread_id"] == suite.threads["a"]
    ]
    assert a_windows == [(1, 2, "explicit"), (3, 4, "inactivity")]
    first = next(r for r in body if r["type"] == "message" and r["thread_id"] == suite.threads["a"])
    assert "\u2028" in first["content"] and "\n" in first["content"]  # escaped, kept


def _addresses(suite: Suite) -> dict[str, str]:
    return {
        name: suite.env[f"EPISODIC_{name.upper()}_ADDRESS"]
        for name in ("ingest", "recall", "scheduler", "summariser")
    }


def test_export_to_a_file_with_progress(suite: Suite, tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    done = ok(suite.env, "export", DATASET, "-o", str(target), "--progress")
    assert done.stdout == ""  # nothing but the file
    assert "lines/s" in done.stderr and "exported 3 thread(s), 7 message(s)" in done.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o600  # it holds people's messages
    assert not list(tmp_path.glob("*.partial"))
    from_file = records(target.read_text(encoding="utf-8"))
    from_stdout = records(ok(suite.env, "export", DATASET).stdout)

    def stable(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in r.items() if k not in ("exported_at", "finished_at")} for r in rs]

    assert stable(from_file) == stable(from_stdout)

    missing = run_cli(suite.env, "export", DATASET, "-o", str(tmp_path / "no" / "x.jsonl"))
    assert missing.returncode == 2 and "No such file" in missing.stderr


def test_export_to_a_file_never_reuses_or_follows_a_partial_file(
    suite: Suite, tmp_path: Path
) -> None:
    """FILE.partial is always a new file of mode 0600: one that exists (a readable one left
    there, or a link to another file) is refused, untouched, and nothing is written."""
    stale = tmp_path / "a.jsonl.partial"
    stale.write_text("left here\n")
    stale.chmod(0o644)  # the export would have kept this mode: world-readable
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "b.jsonl.partial").symlink_to(victim)
    (tmp_path / "c.jsonl.partial").symlink_to(tmp_path / "nowhere")  # dangling
    for name in ("a", "b", "c"):
        refused = run_cli(suite.env, "export", DATASET, "-o", str(tmp_path / f"{name}.jsonl"))
        assert refused.returncode == 2 and refused.stdout == "", name
        assert f"{name}.jsonl.partial already exists" in refused.stderr, refused.stderr
        assert "remove it" in refused.stderr and "Traceback" not in refused.stderr
        assert not (tmp_path / f"{name}.jsonl").exists()
    assert stale.read_text() == "left here\n" and stat.S_IMODE(stale.stat().st_mode) == 0o644
    assert victim.read_text() == "precious\n" and not (tmp_path / "nowhere").exists()
    assert (tmp_path / "b.jsonl.partial").is_symlink()

    stale.unlink()  # once it is gone the export goes through, 0600 even over a 0644 file
    (tmp_path / "a.jsonl").write_text("old\n")
    (tmp_path / "a.jsonl").chmod(0o644)
    ok(suite.env, "export", DATASET, "-o", str(tmp_path / "a.jsonl"))
    assert stat.S_IMODE((tmp_path / "a.jsonl").stat().st_mode) == 0o600
    assert records((tmp_path / "a.jsonl").read_text(encoding="utf-8"))[-1]["type"] == "end"
    assert not stale.exists()


def test_export_to_a_pipe_writes_into_it_and_a_link_is_refused(
    suite: Suite, tmp_path: Path
) -> None:
    """A named pipe (or a device: /dev/stdout) is written in place: the export renamed a
    file over it, so the reader got nothing and the pipe (as root, /dev/null) was gone. A
    symbolic link is refused, not replaced by a file while its target stays as it was."""
    import threading

    pipe = tmp_path / "out.fifo"
    os.mkfifo(pipe)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_text(encoding="utf-8")))
    reader.start()
    ok(suite.env, "export", DATASET, "-o", str(pipe))
    reader.join(60)
    assert not reader.is_alive()
    assert stat.S_ISFIFO(pipe.lstat().st_mode)  # still the pipe
    assert records(received[0])[-1]["type"] == "end"
    assert not list(tmp_path.glob("*.partial"))

    real = tmp_path / "real.jsonl"
    real.write_text("kept\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    refused = run_cli(suite.env, "export", DATASET, "-o", str(link))
    assert refused.returncode == 2 and "is a symbolic link" in refused.stderr, refused.stderr
    assert link.is_symlink() and real.read_text() == "kept\n"
    directory = run_cli(suite.env, "export", DATASET, "-o", str(tmp_path))
    assert directory.returncode == 2 and "is a directory" in directory.stderr, directory.stderr


def test_export_of_a_dataset_that_does_not_exist_fails(suite: Suite, tmp_path: Path) -> None:
    typo = run_cli(suite.env, "export", "acme_suport")
    assert typo.returncode == 1 and typo.stdout == ""
    assert "no dataset 'acme_suport'" in typo.stderr and "datasets list" in typo.stderr
    to_file = run_cli(suite.env, "export", "acme_suport", "-o", str(tmp_path / "out.jsonl"))
    assert to_file.returncode == 1 and not list(tmp_path.iterdir())  # no file, no .partial

    # A dataset that exists but holds no thread any more exports as an empty dataset.
    with EpisodicClient(**_addresses(suite)) as client:
        client.delete_thread(client.create_thread("acme_emptied").thread_id)
    emptied = records(ok(suite.env, "export", "acme_emptied").stdout)
    assert [r["type"] for r in emptied] == ["dataset", "end"]
    assert emptied[-1]["counts"] == {"thread": 0, "message": 0, "episode": 0}


# --------------------------------------------------------------------------- pseudonyms

#: Fields whose values are the format's own words, not the data's.
_VOCABULARY_FIELDS = {"type", "format", "role", "status", "semantic_status", "trigger",
                      "event_type", "identifier_keys"}  # fmt: skip


def _strings(value: Any, key: str = "") -> Iterator[str]:
    if key in _VOCABULARY_FIELDS:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v, key)


def _mentions(texts: list[str], term: str) -> list[str]:
    words = r"\s+".join(re.escape(w) for w in term.split())
    pattern = re.compile(rf"(?<!\w){words}(?!\w)", re.IGNORECASE)
    return [t for t in texts if pattern.search(t)]


def test_pseudonymised_export_hides_names_with_stable_keyed_pseudonyms(
    suite: Suite, tmp_path: Path
) -> None:
    plain = records(ok(suite.env, "export", DATASET).stdout)
    key = tmp_path / "keys" / "pseudonym.key"
    first = ok(suite.env, "export", DATASET, "--pseudonymise", "--pseudonym-key-file", str(key))
    assert f"created a new pseudonym key in {key}" in first.stderr
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    second = ok(suite.env, "export", DATASET, "--pseudonymise", "--pseudonym-key-file", str(key))
    assert "created" not in second.stderr
    other = ok(
        suite.env, "export", DATASET, "--pseudonymise", "--pseudonym-key-file", str(tmp_path / "k2")
    )
    masked, again, other_key = (records(d.stdout) for d in (first, second, other))

    # None of the original names and ids is left anywhere in the data.
    originals = [DATASET, *PEOPLE, *suite.threads.values()]
    originals += [r["episode_id"] for r in plain if r["type"] == "episode"]
    entities = {e for r in plain if r["type"] == "episode" for e in r["entities"]}
    assert {"project atlas", "toyota corolla hybrid"} <= entities  # what the summariser found
    originals += [e for e in entities if len(e) > 3 and any(c.isalpha() for c in e)]
    texts = [s for r in masked for s in _strings(r)]
    for name in originals:
        assert not _mentions(texts, name), name
    assert not _mentions(texts, "alice") and not _mentions(texts, "atlas")  # parts of names
    a = next(r for r in masked if r["type"] == "thread" and r["label"].startswith("billing"))
    content = next(
        r for r in masked if r["type"] == "message" and r["thread_id"] == a["thread_id"]
    )["content"]
    assert content.startswith("Hi, I'm user_") and "tier at $29" in content  # the rest is kept

    # Same shape, every record pseudonymised consistently.
    assert [r["type"] for r in masked] == [r["type"] for r in plain]
    header = masked[0]
    assert header["pseudonymised"] and header["dataset"].startswith("dataset_")
    thread_ids = {r["thread_id"] for r in masked if r["type"] == "thread"}
    assert len(thread_ids) == 3 and all(len(t) == 36 for t in thread_ids)  # still UUIDs
    assert {r["thread_id"] for r in masked if r["type"] == "message"} == thread_ids
    a_meta = a
    assert a_meta["metadata"]["channel"] == "email" and a_meta["metadata"]["user_id"].startswith(
        "user_"
    )
    speaker = a_meta["metadata"]["nested"]["author"]
    assert speaker in content  # "Alice Walker" in metadata and in text: one pseudonym

    # Stable with the same key, different with another.
    def stable(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in r.items() if k not in ("exported_at", "finished_at")} for r in rs]

    assert stable(masked) == stable(again)
    assert masked[0]["pseudonym_key_id"] == again[0]["pseudonym_key_id"]
    assert other_key[0]["pseudonym_key_id"] != masked[0]["pseudonym_key_id"]
    assert {r["thread_id"] for r in other_key if r["type"] == "thread"}.isdisjoint(thread_ids)
    assert other_key[0]["dataset"] != header["dataset"]

    wrong = run_cli(suite.env, "export", DATASET, "--pseudonym-key-file", str(key))
    assert wrong.returncode == 2 and "needs --pseudonymise" in wrong.stderr


def test_pseudonymiser_whole_words_any_case_longest_first() -> None:
    p = Pseudonymiser(b"k" * 32)
    p.learn_entity("project atlas")
    p.learn_metadata({"profile": {"Speaker": "Dana"}, "name": "x", "user_id": 42})
    text = p.text("Project  ATLAS and atlas, not Atlassian; dana@corp.io wrote to DANA.")
    whole, part = p.name("project atlas"), p.name("atlas")
    assert text.startswith(f"{whole} and {part}, not Atlassian; email_")
    assert text.endswith(f"wrote to {p.name('dana')}.") and whole != part
    assert p.name("DANA") == p.name("dana").lower() and p.name("dana").startswith("user_")
    # Too short to search for in text (would mask every "x"), masked in metadata.
    assert p.text("x marks 42") == "x marks 42"
    masked = p.metadata({"name": "x", "user_id": 42, "note": "Dana called"})
    assert masked["name"].startswith("user_") and masked["user_id"].startswith("user_")
    assert masked["note"] == f"{p.name('dana')} called"
    # Keyed: another key, other pseudonyms; never the plain hash of the name.
    assert Pseudonymiser(b"j" * 32).name("dana") != p.name("dana")
    thread_id = "0b7f3e0c-6a3c-4c1e-9a57-2f1b8f4e5d21"
    assert p.text(f"see {thread_id}") == f"see {p.identifier(thread_id)}"
    with pytest.raises(ValueError):
        Pseudonymiser(b"short")


# --------------------------------------------------------------------------- privacy fixes


@dataclasses.dataclass
class Exported:
    plain: list[dict[str, Any]]
    masked: list[dict[str, Any]]
    pseudonymiser: Pseudonymiser  # with the export's key, nothing learned


@pytest.fixture(scope="module")
def exports(suite: Suite, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Exported]:
    """Each fixture dataset exported in clear and masked (one key)."""
    key_file = tmp_path_factory.mktemp("key") / "pseudonym.key"
    out: dict[str, Exported] = {}
    for dataset in (DATASET, PRIVATE):
        plain = records(ok(suite.env, "export", dataset).stdout)
        masked = ok(
            suite.env, "export", dataset, "--pseudonymise", "--pseudonym-key-file", str(key_file)
        )
        key, _ = load_or_create_key(key_file)
        out[dataset] = Exported(plain, records(masked.stdout), Pseudonymiser(key))
    return out


def _threads_of(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rs if r["type"] == "thread"]


def test_pseudonymised_export_masks_a_compacted_threads_summary(
    exports: dict[str, Exported],
) -> None:
    e = exports[PRIVATE]
    [before] = [t["compaction"] for t in _threads_of(e.plain) if t["compaction"]]
    [after] = [t["compaction"] for t in _threads_of(e.masked) if t["compaction"]]
    assert "Carol Danvers" in before["summary"]  # the messages are gone: this stands in
    assert not _mentions([after["summary"]], "Carol") and not _mentions(
        [after["summary"]], "Danvers"
    )
    # The same masking as the episode it comes from, whose id is pseudonymised alike.
    [episode] = [r for r in e.masked if r["type"] == "episode" and r["summary"] == after["summary"]]
    assert (
        after["episode_id"]
        == episode["episode_id"]
        == e.pseudonymiser.identifier(before["episode_id"])
    )
    # The digest of the dropped messages is keyed too (it would link back to the thread).
    assert after["content_digest"] != before["content_digest"]
    assert re.fullmatch("[0-9a-f]{64}", after["content_digest"])
    assert (after["through_sequence"], after["compacted_at"]) == (
        before["through_sequence"],
        before["compacted_at"],
    )


def test_pseudonymised_export_learns_names_from_events_without_a_thread(
    exports: dict[str, Exported],
) -> None:
    e = exports[PRIVATE]
    # Peter Parker is named by no metadata and no episode of a thread: only by an event
    # recorded without a thread, which the export writes last.
    [event] = [r for r in e.plain if r["type"] == "episode" and not r["thread_id"]]
    assert event["kind"] == "event" and event["entities"] == ["peter parker"]
    [masked_event] = [r for r in e.masked if r["type"] == "episode" and not r["thread_id"]]
    peter = masked_event["entities"][0]
    assert peter.startswith("entity_") and masked_event["actor"] == peter
    assert masked_event["summary"] == f"{peter} escalated the invoice"
    [content] = [
        r["content"]
        for r in e.masked
        if r["type"] == "message" and r["content"].endswith("called about the invoice.")
    ]
    assert content == f"{peter} called about the invoice."  # written before the event


def test_pseudonymised_export_masks_names_of_every_shape(exports: dict[str, Exported]) -> None:
    e = exports[PRIVATE]
    u = e.pseudonymiser.name
    names_id = e.pseudonymiser.identifier(_thread_id(e.plain, "names"))
    contents = [
        r["content"] for r in e.masked if r["type"] == "message" and r["thread_id"] == names_id
    ]
    obrien = "O'Brien"
    assert contents == [
        f"{u('Jean-Luc Picard')} here; {u('Jean-Luc')} to friends, {u('Luc')} to some.",
        f"{u(obrien)} signing off; {u('Miles ' + obrien)}'s shift ends.",
        f"{u('Li')} speaking, for {u('Wu Li')}.",
        f"{u('Pablo')} here; {u('Diego')}, {u('José')} and {u('Picasso')} will call.",
        f"Ping {u('carol')}_{u('danvers')} or {u('danvers')}_{u('carol')}; "
        "the invoice is approved.",
    ]


def _thread_id(rs: list[dict[str, Any]], label: str) -> str:
    [thread_id] = [t["thread_id"] for t in _threads_of(rs) if t["label"] == label]
    return str(thread_id)


def _name_words(name: str) -> list[str]:
    """A name, each of its words and the parts of a hyphenated one, as the guard looks for
    them (initials, particles and common words are not masked on their own)."""
    words = {name}
    for word in name.split():
        words.add(word)
        words.update(word.split("-"))
    return sorted(w for w in words if len(w) >= 2 and w.lower() not in NOT_NAME_PARTS)


def _all_strings(value: Any) -> Iterator[str]:
    """Every string of a record, keys included, at any depth: no field is exempt."""
    if isinstance(value, str):
        yield unicodedata.normalize("NFC", value).replace("\u2019", "'")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _all_strings(k)
            yield from _all_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _all_strings(v)


def test_no_real_name_or_id_is_left_anywhere_in_a_masked_export(
    exports: dict[str, Exported],
) -> None:
    """The structural guard: every string of every record of each masked export of the
    fixture (a field the pseudonymiser does not know included), searched for every name
    the data carries and each of its words (an underscore or any punctuation separates
    words; "carol_danvers" holds Carol), and for every id, digest and dataset name of the
    export in clear."""
    names = [w for person in [*PEOPLE, *PRIVATE_PEOPLE] for w in _name_words(person)]
    assert {"Jean", "Luc", "O'Brien", "Li", "Wu", "Diego"} <= set(names)
    for dataset, e in exports.items():
        texts = [s for r in e.masked for s in _all_strings(r)]
        for name in names:
            words = r"\s+".join(re.escape(w) for w in name.split())
            found = [t for t in texts if re.search(rf"(?<![^\W_]){words}(?![^\W_])", t, re.I)]
            assert not found, (dataset, name, found)
        ids = {dataset}
        for r in e.plain:
            for key in ("thread_id", "episode_id", "idempotency_key"):
                if r.get(key):
                    ids.add(r[key])
            if r.get("compaction"):
                ids.update((r["compaction"]["episode_id"], r["compaction"]["content_digest"]))
        assert len(ids) > 5
        for value in ids:
            assert not [t for t in texts if value.lower() in t.lower()], (dataset, value)


def test_pseudonymiser_masks_every_word_of_a_name_but_no_ordinary_word() -> None:
    p = Pseudonymiser(b"k" * 32)
    p.learn_metadata(
        {
            "name": "Jean-Luc Picard",
            "author": "Miles O\u2019Brien",
            "sender": "Wu Li",
            "speaker": "Pablo Diego José Ruiz Picasso",  # five words, a name: each word
            "a": {"name": "Dr. He Wei"},  # a title, and a part that is a common word
            "b": {"name": "Sales and Support"},  # a phrase: not "and"
            "c": {"author": "Weekly Review of the Atlas Budget"},  # long, not a name: whole only
            "d": {"speaker": "Agent 007"},
            "e": {"name": "Carol Danvers"},
        }
    )
    for word in ["Jean-Luc", "Jean", "Luc", "Picard", "O'Brien", "O\u2018Brien", "Miles", "Li",
                 "Wu", "Pablo", "Diego", "José", "Jose\u0301", "Ruiz", "Picasso", "Wei"]:  # fmt: skip
        assert p.text(f"({word}),") == f"({p.name(word)}),", word
    assert p.name("José") == p.name("Jose\u0301")  # one name, however it is encoded
    assert p.text("ping carol_danvers") == f"ping {p.name('carol')}_{p.name('danvers')}"
    assert p.text("carol99 stays") == "carol99 stays"  # a letter or digit joins words
    ordinary = "He and I will do it: a weekly review of the budget, Dr. No; the agent said 007."
    assert p.text(ordinary) == ordinary
    assert p.text("Weekly Review of the Atlas Budget!").startswith("user_")  # the whole value
    assert p.text("Ask Dr. He Wei") == f"Ask {p.name('Dr. He Wei')}"
    assert p.text("He Wei and Wei") == f"He {p.name('Wei')} and {p.name('Wei')}"
