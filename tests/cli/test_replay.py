"""`episodic replay`: an export of a real suite's data, replayed through the pipeline on a
scratch database, reports identical windows when nothing changed and the difference when
a setting did."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from episodic.store.recall_index import dataset_config
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
    # English: the store's model embeds the replayed dataset
    assert report["settings"]["dataset_embedder"] == report["settings"]["embedder"]
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
    from episodic.ops.replay import ExportReader, ReplayError

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


APARTMENT = [
    ("user", "Bonjour, je cherche un appartement à louer près de la gare de Lyon, à Paris."),
    (
        "assistant",
        "Avec plaisir. Quel est votre budget mensuel, charges comprises, pour ce logement ?",
    ),
    ("user", "Pas plus de mille deux cents euros par mois, avec deux chambres si possible."),
    (
        "assistant",
        "J'ai trouvé un deux-pièces lumineux à mille cent cinquante euros, proche du métro.",
    ),
    ("user", "Est-ce que le propriétaire accepte les chats ? J'en ai deux, très calmes."),
    ("assistant", "Oui, les animaux sont acceptés avec un dépôt de garantie de deux cents euros."),
]
CAR = [
    ("user", "Je voudrais acheter une voiture familiale, mais mon budget reste assez limité."),
    (
        "assistant",
        "Préférez-vous une berline, un break ou plutôt un petit monospace pour la famille ?",
    ),
    ("user", "Un break, pour les vacances à la montagne avec les enfants et le chien."),
    ("assistant", "La Peugeot 308 SW est un bon choix : spacieuse, économique et fiable en hiver."),
]


def _french_export() -> list[str]:
    """An export of two French threads, each ended after its last message and summarised
    by one explicit episode."""
    t0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
    lines = [
        json.dumps({"type": "dataset", "format": "episodic-export", "version": 1, "dataset": "fr"})
    ]
    for n, (thread_id, turns, summary) in enumerate(
        [
            ("appartement", APARTMENT, "Cherche un deux-pièces près de la gare de Lyon."),
            ("voiture", CAR, "Veut un break familial : la Peugeot 308 SW."),
        ]
    ):
        start = t0 + timedelta(hours=n)
        at = [start + timedelta(seconds=10 * (i + 1)) for i in range(len(turns))]
        ended = at[-1] + timedelta(seconds=5)
        lines.append(
            json.dumps(
                {
                    "type": "thread",
                    "thread_id": thread_id,
                    "created_at": start.isoformat(),
                    "ended_at": ended.isoformat(),
                }
            )
        )
        for i, (role, content) in enumerate(turns):
            lines.append(
                json.dumps(
                    {
                        "type": "message",
                        "thread_id": thread_id,
                        "sequence": i + 1,
                        "role": role,
                        "content": content,
                        "created_at": at[i].isoformat(),
                        "received_at": at[i].isoformat(),
                    }
                )
            )
        lines.append(
            json.dumps(
                {
                    "type": "episode",
                    "thread_id": thread_id,
                    "start_sequence": 1,
                    "end_sequence": len(turns),
                    "trigger": "explicit",
                    "status": "completed",
                    "summary": summary,
                    "key_learnings": [],
                    "entities": [],
                    "created_at": ended.isoformat(),
                }
            )
        )
    lines.append(json.dumps({"type": "end"}))
    return lines


def test_replay_embeds_a_dataset_in_the_model_its_language_calls_for(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A French export, replayed beside a multilingual model: the replayed episodes and
    chunks, and the old ones staged for recall, are the multilingual model's vectors (as
    the Summariser embeds a French dataset, services/summariser/spaces.py), and the
    recall comparison ranks them with that model's queries."""
    from episodic.config import Settings
    from episodic.ops import replay as replaying
    from episodic.ops.replay import run as replay_run
    from episodic.providers.dataset_embedders import DatasetEmbedders
    from episodic.store import embedding_space
    from tests.summariser.test_dataset_model import OTHER, STORE, _assert_every_vector_is

    # The multilingual model where the settings would build one (the test's stand-in: a
    # model of its own name whose vectors differ from the store's for every text).
    monkeypatch.setattr(
        replay_run,
        "make_dataset_embedders",
        lambda settings, store, **_: DatasetEmbedders(store, OTHER),
        raising=False,  # without it, the assertions below say what goes wrong
    )
    run = replay_run.ReplayRun(
        engine, Settings(), STORE, with_recall=True, clock="received", report=lambda _: None
    )
    reader = replaying.ExportReader(_french_export())
    for bundle in reader.bundles():
        run.stage(bundle)
    run.simulate()
    run.summarise()
    threads, queries = run.compare(["appartement près de la gare de Lyon"], 1)

    assert all(t.windows_identical for t in threads), threads
    with engine.connect() as conn:
        for dataset in (replaying.OLD_DATASET, replaying.NEW_DATASET):
            assert dataset_config(conn, dataset) == "french"
            assert embedding_space.dataset_model(conn, dataset) == OTHER.name, dataset
        embedded = conn.execute(
            text("SELECT count(*) FROM episodes WHERE embedding IS NOT NULL")
        ).scalar_one()
    assert embedded >= 4  # two old episodes staged, two replayed
    for dataset in (replaying.OLD_DATASET, replaying.NEW_DATASET):
        assert _assert_every_vector_is(engine, dataset, OTHER, vault=run.vault) >= 4, dataset
    assert [(q.old, q.new) for q in queries] == [(["appartement"], ["appartement"])]
