"""The entity canon in the database: merge on write, resolution on query, admin merge and
split, the timeline, erasure — against a real PostgreSQL, with encryption on."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import Engine, text

from episodic.errors import FailedPrecondition, InvalidArgument, NotFound
from episodic.providers.entities import normalise_entities
from episodic.store import entities, erasure
from episodic.store.recall_queries import RecallFilters, rank_episodes
from episodic.testing.keys import test_vault as vault_of_tests
from tests.recall.factory import T0, make_episode

# On the Citus tier too (its merges, splits and timeline lock rows of one dataset: one shard).
pytestmark = pytest.mark.citus

DATASET = "canon_user"


def _episode(engine: Engine, raw: list[str], *, days: int = 0, dataset: str = DATASET):  # type: ignore[no-untyped-def]
    """An episode whose entities went through the summariser's path: normalised, stored
    as tokens, filed in the canon in the same transaction."""
    spellings = normalise_entities(raw)
    with engine.begin() as conn:
        made = make_episode(
            conn,
            dataset,
            [f"we talked about {', '.join(raw) or 'nothing'}"],
            ended_at=T0 + timedelta(days=days),
            entities=spellings,
        )
        entities.record_mentions(conn, vault_of_tests().for_write(conn, dataset), spellings)
    return made


def _key(engine: Engine, dataset: str = DATASET):  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return vault_of_tests().for_read(conn, dataset, fresh=True)


def _all(engine: Engine, dataset: str = DATASET) -> list[entities.Entity]:
    with engine.connect() as conn:
        page, more = entities.list_entities(conn, _key(engine, dataset), after=None, limit=1000)
    assert not more
    return page


def _by_name(engine: Engine) -> dict[str, entities.Entity]:
    return {e.name: e for e in _all(engine)}


def _filtered(engine: Engine, wanted: list[str], *, canon: bool = True) -> set[uuid.UUID]:
    key = _key(engine)
    with engine.connect() as conn:
        filters = RecallFilters(entities=normalise_entities(wanted))
        if canon:
            filters = entities.resolve_filters(conn, key, filters)
        rows, _ = rank_episodes(
            conn,
            key=key,
            filters=filters,
            query=None,
            query_vector=None,
            similarity_weight=0.7,
            recency_weight=0.3,
            limit=100,
        )
    return {r["episode_id"] for r in rows}


def test_spellings_of_one_thing_become_one_entity_on_write(engine) -> None:  # type: ignore[no-untyped-def]
    _episode(engine, ["project Atlas", "Alex"])
    _episode(engine, ["Atlas project", "Alexandra"])
    _episode(engine, ["atlas", "the Atlas project"])
    found = _all(engine)
    names = sorted(e.name for e in found)
    assert names == ["alex", "alexandra", "project atlas"]  # Alex and Alexandra stay apart
    atlas = next(e for e in found if e.name == "project atlas")
    # "Atlas project" normalises to "project atlas" (one alias); the others are aliases.
    assert {a for a, _ in atlas.aliases} == {"project atlas", "atlas", "project the atlas"}
    assert atlas.episode_count == 3
    assert dict(atlas.aliases)["project atlas"] == 2


def test_recording_the_same_mentions_again_changes_nothing(engine) -> None:  # type: ignore[no-untyped-def]
    _episode(engine, ["project Atlas", "atlas"])
    before = [(e.entity_id, sorted(e.aliases)) for e in _all(engine)]
    with engine.begin() as conn:
        key = vault_of_tests().for_write(conn, DATASET)
        first = entities.record_mentions(conn, key, ["atlas", "project atlas"])
        again = entities.record_mentions(conn, key, ["Atlas", "Project Atlas", "atlas"])
    assert first == again and len(set(first)) == 1
    assert [(e.entity_id, sorted(e.aliases)) for e in _all(engine)] == before


@pytest.mark.parametrize("round_", range(4))
def test_concurrent_workers_filing_the_same_new_name_end_with_one_entity(engine, round_) -> None:  # type: ignore[no-untyped-def]
    """Eight workers file overlapping spellings at once, each inside an open transaction
    (as summariser workers completing episodes do): one entity per thing, no deadlock
    (overlapping names in different orders used to deadlock), no orphans."""
    dataset = f"race_{round_}"
    with engine.begin() as conn:
        key = vault_of_tests().for_write(conn, dataset)
    workers = 8
    barrier = threading.Barrier(workers)
    results: list[list[uuid.UUID]] = []
    errors: list[BaseException] = []
    spellings = [["project atlas", "orion"], ["atlas", "orion"], ["atlas project"], ["atlas"]]

    def work(i: int) -> None:
        try:
            with engine.begin() as conn:
                barrier.wait(timeout=30)
                results.append(entities.record_mentions(conn, key, spellings[i % 4]))
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert len(results) == workers
    found = _all(engine, dataset)
    assert len(found) == 2, [e.name for e in found]  # atlas (every spelling) and orion
    atlas = next(e for e in found if "orion" not in e.name)
    assert {a for a, _ in atlas.aliases} == {"atlas", "project atlas"}
    assert len({r[0] for r in results if len(r) == 1}) == 1  # the same id for every worker
    with engine.connect() as conn:
        keys = conn.execute(
            text("SELECT count(*) FROM entity_keys WHERE dataset = :d"), {"d": dataset}
        ).scalar()
        orphans = conn.execute(
            text(
                "SELECT count(*) FROM entities en WHERE dataset = :d AND NOT EXISTS "
                "(SELECT 1 FROM entity_aliases a WHERE a.dataset = en.dataset "
                " AND a.entity_id = en.entity_id)"
            ),
            {"d": dataset},
        ).scalar()
    assert keys == 2 and orphans == 0


def test_an_entity_filter_finds_every_alias(engine) -> None:  # type: ignore[no-untyped-def]
    a = _episode(engine, ["project Atlas"], days=0)
    b = _episode(engine, ["atlas"], days=1)
    c = _episode(engine, ["Atlas project", "Bo"], days=2)
    _episode(engine, ["Orion"], days=3)
    assert _filtered(engine, ["atlas"]) == {a.episode_id, b.episode_id, c.episode_id}
    assert _filtered(engine, ["The Atlas Project"]) == {a.episode_id, b.episode_id, c.episode_id}
    assert _filtered(engine, ["atlas", "bo"]) == {c.episode_id}
    # The exact spelling only (what filtering did before the canon).
    assert _filtered(engine, ["atlas"], canon=False) == {b.episode_id}
    # A name the canon does not know matches itself only: nothing here.
    assert _filtered(engine, ["atlantis"]) == set()


def test_merge_and_split_move_aliases(engine) -> None:  # type: ignore[no-untyped-def]
    alex = _episode(engine, ["Alex"])
    alexandra = _episode(engine, ["Alexandra"], days=1)
    key = _key(engine)
    with engine.begin() as conn:
        into = entities.find_entity(conn, key, "alex", field="into")
        source = entities.find_entity(conn, key, "Alexandra", field="sources[0]")
        merged = entities.merge_entities(conn, key, into, [source])
    assert merged.entity_id == into and merged.name == "alex"
    assert {a for a, _ in merged.aliases} == {"alex", "alexandra"}
    assert merged.episode_count == 2
    assert _filtered(engine, ["alexandra"]) == {alex.episode_id, alexandra.episode_id}
    assert len(_all(engine)) == 1

    with engine.begin() as conn:
        split_off, remaining = entities.split_alias(conn, key, "ALEXANDRA")
    assert split_off.name == "alexandra" and split_off.entity_id != into
    assert remaining.entity_id == into and [a for a, _ in remaining.aliases] == ["alex"]
    assert _filtered(engine, ["alexandra"]) == {alexandra.episode_id}
    assert _filtered(engine, ["alex"]) == {alex.episode_id}
    # A later spelling of the split-off name finds the new entity (its key moved with it).
    with engine.begin() as conn:
        again = entities.record_mentions(conn, key, ["alexandra's"])
    assert again == [split_off.entity_id]


def test_splitting_a_name_the_rules_merged_pins_that_spelling(engine) -> None:  # type: ignore[no-untyped-def]
    project = _episode(engine, ["project Atlas"])
    person = _episode(engine, ["Atlas"], days=1)
    key = _key(engine)
    with engine.begin() as conn:
        split_off, remaining = entities.split_alias(conn, key, "atlas")
    assert remaining.name == "project atlas"
    assert _filtered(engine, ["atlas"]) == {person.episode_id}
    assert _filtered(engine, ["project atlas"]) == {project.episode_id}
    # Other spellings of the shared match key stay with the entity that keeps the key.
    with engine.begin() as conn:
        assert entities.record_mentions(conn, key, ["atlas project"]) == [remaining.entity_id]
        assert entities.record_mentions(conn, key, ["Atlas"]) == [split_off.entity_id]


def test_merge_and_split_refuse_what_makes_no_sense(engine) -> None:  # type: ignore[no-untyped-def]
    _episode(engine, ["Alex", "Orion"])
    key = _key(engine)
    with engine.begin() as conn:
        alex = entities.find_entity(conn, key, "alex", field="into")
        with pytest.raises(InvalidArgument):
            entities.merge_entities(conn, key, alex, [alex])
        with pytest.raises(NotFound):
            entities.find_entity(conn, key, "nobody", field="into")
        with pytest.raises(NotFound):
            entities.find_entity(conn, key, str(uuid.uuid4()), field="into")
        with pytest.raises(FailedPrecondition):
            entities.split_alias(conn, key, "alex")
        with pytest.raises(NotFound):
            entities.split_alias(conn, key, "nobody")
    # An id works as a reference too.
    with engine.connect() as conn:
        assert entities.find_entity(conn, key, str(alex), field="into") == alex


def test_the_timeline_pages_through_an_entity_oldest_first(engine) -> None:  # type: ignore[no-untyped-def]
    made = [
        _episode(engine, [spelling], days=day)
        for day, spelling in [
            (3, "atlas"),
            (0, "project Atlas"),
            (5, "Atlas project"),
            (1, "Atlas"),
        ]
    ]
    _episode(engine, ["Orion"], days=2)
    key = _key(engine)
    expected = [m.episode_id for m in sorted(made, key=lambda m: m.ended_at)]
    got: list[uuid.UUID] = []
    after = None
    with engine.connect() as conn:
        atlas = entities.find_entity(conn, key, "the Atlas project", field="entity")
        while True:
            page = entities.timeline(conn, key, atlas, after=after, limit=3)
            got.extend(r["episode_id"] for r in page.episodes)
            if not page.more:
                break
            last = page.episodes[-1]
            after = (last["started_at"], last["episode_id"])
    assert got == expected


def test_erasing_a_thread_forgets_names_only_it_used(engine) -> None:  # type: ignore[no-untyped-def]
    kept = _episode(engine, ["project Atlas", "Bo"])
    gone = _episode(engine, ["atlas", "Zed Quill"], days=1)
    erasure.erase_thread(engine, gone.thread_id, dataset=DATASET, actor="test")
    found = _by_name(engine)
    assert set(found) == {"project atlas", "bo"}
    assert [a for a, _ in found["project atlas"].aliases] == ["project atlas"]
    with engine.connect() as conn:
        left = conn.execute(
            text("SELECT count(*) FROM entity_aliases WHERE dataset = :d"), {"d": DATASET}
        ).scalar()
    assert left == 2
    erasure.erase_thread(engine, kept.thread_id, dataset=DATASET, actor="test")
    assert _all(engine) == []
    with engine.connect() as conn:
        for table in ("entities", "entity_aliases", "entity_keys"):
            n = conn.execute(
                text(f"SELECT count(*) FROM {table} WHERE dataset = :d"), {"d": DATASET}
            ).scalar()
            assert n == 0, table


def test_a_thread_erasure_renames_an_entity_whose_name_went(engine) -> None:  # type: ignore[no-untyped-def]
    first = _episode(engine, ["project Atlas"])
    _episode(engine, ["atlas"], days=1)
    erasure.erase_thread(engine, first.thread_id, dataset=DATASET, actor="test")
    assert [e.name for e in _all(engine)] == ["atlas"]


def test_erasing_a_dataset_erases_its_canon(engine) -> None:  # type: ignore[no-untyped-def]
    _episode(engine, ["project Atlas", "Bo"])
    _episode(engine, ["Atlas"], dataset="other_user")
    receipt = erasure.erase_dataset(engine, DATASET, actor="test")
    assert receipt.rows["entities"] == 2 and receipt.rows["entity_aliases"] == 2
    assert receipt.rows["entity_keys"] == 2
    assert _all(engine) == []
    assert [e.name for e in _all(engine, "other_user")] == ["atlas"]


def test_names_are_sealed_at_rest(engine) -> None:  # type: ignore[no-untyped-def]
    _episode(engine, ["Zanzibar Quokka"])
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT a.alias, a.alias_token, a.key_token, en.name_token FROM entity_aliases a "
                "JOIN entities en USING (dataset, entity_id) WHERE a.dataset = :d"
            ),
            {"d": DATASET},
        ).one()
    assert b"zanzibar" not in bytes(rows.alias)
    assert all("zanzibar" not in str(v) for v in rows[1:])


def test_backfill_files_episodes_written_before_the_canon_and_is_idempotent(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:  # as migration 0009 finds them: tokens, no canon
        for day, raw in enumerate([["project Atlas", "Bo"], ["atlas"], ["Atlas project"]]):
            make_episode(
                conn,
                DATASET,
                ["old talk"],
                ended_at=T0 + timedelta(days=day),
                entities=normalise_entities(raw),
            )
    assert _all(engine) == []
    done = entities.backfill(engine, vault_of_tests(), batch=2)
    assert done.episodes == 3 and done.datasets >= 1
    first = sorted((e.name, sorted(e.aliases), e.episode_count) for e in _all(engine))
    by_alias = {a: (n, count) for n, aliases, count in first for a, _ in aliases}
    assert set(by_alias) == {"bo", "atlas", "project atlas"}
    assert by_alias["atlas"] == by_alias["project atlas"] and by_alias["atlas"][1] == 3
    assert dict(next(al for _, al, _ in first if ("bo", 1) not in al)) == {
        "atlas": 1,
        "project atlas": 2,
    }
    entities.backfill(engine, vault_of_tests(), dataset=DATASET)
    assert sorted((e.name, sorted(e.aliases), e.episode_count) for e in _all(engine)) == first


def test_splitting_off_an_entitys_name_renames_what_remains(engine) -> None:  # type: ignore[no-untyped-def]
    _episode(engine, ["project Atlas"])
    _episode(engine, ["atlas"], days=1)
    key = _key(engine)
    with engine.begin() as conn:
        split_off, remaining = entities.split_alias(conn, key, "Project Atlas")
    assert split_off.name == "project atlas"
    assert remaining.name == "atlas" and [a for a, _ in remaining.aliases] == ["atlas"]
    assert sorted(e.name for e in _all(engine)) == ["atlas", "project atlas"]


def test_a_timeline_read_while_its_entity_is_merged_away_sees_one_snapshot(
    engine, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """EntityTimeline resolves a name, then reads the entity and its episodes: a merge
    committed in between deleted the entity, and the read answered INTERNAL (~4 % of
    timelines while an admin merged and split, in a hostile-client probe). Read in one
    snapshot, the call answers the canon as it was when it began."""
    from services.recall import domain
    from services.recall.servicer import _reading

    _episode(engine, ["Gideon Park"])
    _episode(engine, ["Gid Park"], days=1)
    by_name = {e.name: e for e in _all(engine)}
    into, source = by_name["gideon park"], by_name["gid park"]
    assert into.entity_id != source.entity_id

    found_first = entities.find_entity

    def find_then_merge(conn, key, reference, *, field):  # type: ignore[no-untyped-def]
        found = found_first(conn, key, reference, field=field)
        with engine.begin() as other:  # another call's merge commits in between
            entities.merge_entities(other, key, into.entity_id, [source.entity_id])
        return found

    monkeypatch.setattr(entities, "find_entity", find_then_merge)
    with _reading(engine, None, snapshot=True) as conn:
        entity, rows, _ = domain.entity_timeline(
            conn, vault_of_tests(), DATASET, "gid park", after=None, limit=10
        )
    assert entity.entity_id == source.entity_id and entity.name == "gid park"
    assert len(rows) == 1
    assert {e.name for e in _all(engine)} == {"gideon park"}  # the merge did commit


def test_merges_splits_and_new_mentions_of_one_dataset_never_deadlock(engine) -> None:  # type: ignore[no-untyped-def]
    """An admin merging and splitting the same entities while the Summariser files new
    mentions of them: each took row locks in its own order (merge: entities then aliases;
    split: the alias then its entity), so they deadlocked, and a caller was told the
    database was unavailable. Admin changes now hold the dataset's canon lock
    exclusively first, so they run one at a time and never between a mention's locks."""
    import psycopg

    _episode(engine, ["Gideon Park", "Gid Park"])
    key = _key(engine)
    errors: list[BaseException] = []
    rounds = 100

    def guarded(work) -> None:  # type: ignore[no-untyped-def]
        try:
            work()
        except (NotFound, FailedPrecondition):
            pass  # the other side moved first: a legitimate answer
        except Exception as err:  # a deadlock, or anything unexpected
            errors.append(err)

    def ids() -> dict[str, uuid.UUID]:
        with engine.connect() as conn:
            return {
                e.name: e.entity_id
                for e in entities.list_entities(conn, key, after=None, limit=100)[0]
            }

    def admin() -> None:
        for _ in range(rounds):

            def merge() -> None:
                found = ids()
                if "gid park" in found and "gideon park" in found:
                    with engine.begin() as conn:
                        entities.merge_entities(
                            conn, key, found["gideon park"], [found["gid park"]]
                        )

            def split() -> None:
                with engine.begin() as conn:
                    entities.split_alias(conn, key, "gid park")

            guarded(merge)
            guarded(split)

    def summariser() -> None:
        vault = vault_of_tests()
        for _ in range(rounds):

            def mention() -> None:
                with engine.begin() as conn:
                    entities.record_mentions(
                        conn, vault.for_write(conn, DATASET), ["gid park", "gideon park"]
                    )

            guarded(mention)

    workers = [threading.Thread(target=f) for f in (admin, admin, admin, summariser)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
        assert not w.is_alive()
    deadlocks = [
        e for e in errors if isinstance(getattr(e, "orig", None), psycopg.errors.DeadlockDetected)
    ]
    assert not deadlocks, f"{len(deadlocks)} deadlock(s): {deadlocks[0]}"
    assert not errors, errors[0]
