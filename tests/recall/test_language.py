"""A dataset's language: its lexical index and its queries are stemmed with the dataset's
text-search configuration (migration 0007), sealed datasets included, and changing the
language re-tokenises what is already indexed."""

from __future__ import annotations

import grpc
import pytest
from sqlalchemy import text

from episodic.errors import InvalidArgument
from episodic.store import languages
from episodic.store.events import NewEvent, event_document, record_event
from episodic.store.languages import dataset_config, resolve_language, set_language
from episodic.store.recall_index import blind_vectors
from episodic.testing import keys
from episodic.testing.processes import wait_until
from episodic.v1 import admin_service_pb2 as admin_pb
from episodic.v1 import admin_service_pb2_grpc as admin_grpc
from tests.recall.factory import lexical_coverage, make_episode

BOOKED = [
    "Nous avons réservé les billets d'avion pour Lisbonne.",
    "Parfait, le vol part de Lyon à 6 h 50.",
]
GARDEN = ["Le jardin a besoin d'être arrosé tous les jours en juillet."]
#: Other inflections than the conversation's: "réserver" / "réservé", "billet" / "billets".
QUESTION = "réserver le billet"


def test_languages_resolve_to_a_stemmer_or_simple(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        assert resolve_language(conn, "fr") == "french"
        assert resolve_language(conn, "fr-CA") == "french"
        assert resolve_language(conn, "de") == "german"
        assert resolve_language(conn, "Spanish") == "spanish"
        assert resolve_language(conn, "pt_BR") == "portuguese"
        # No stemmer in PostgreSQL: words as written.
        assert resolve_language(conn, "ja") == "simple"
        assert resolve_language(conn, "zh-Hant") == "simple"
        assert resolve_language(conn, "fil") == "simple"  # ISO 639-2/3: no 639-1 code
        assert resolve_language(conn, "yue-HK") == "simple"  # ISO 639-3 only
        assert resolve_language(conn, "sla") == "simple"  # ISO 639-5 (a family)
        assert resolve_language(conn, "fra") == "french"  # ISO 639-2 of a stemmed one
        assert resolve_language(conn, "ger-DE") == "german"
        # a configuration's own name wins over reading it as a tag
        conn.execute(text("CREATE TEXT SEARCH CONFIGURATION french_custom (COPY = french)"))
        assert resolve_language(conn, "french_custom") == "french_custom"
        assert resolve_language(conn, "fr_CA") == "french"
        # Neither a configuration nor a language code: a typo would re-stem the whole
        # dataset word for word, so it is refused, naming what is accepted.
        # Three letters too: ISO 639-2/3/5 are listed, so "frn" is no longer taken as a
        # language without a stemmer; a real one without a two-letter code still is.
        for typo in ("klingon", "frnech", "japanese", "xx", "frn", "esp", "jap", "egn"):
            with pytest.raises(InvalidArgument, match="ISO 639 code"):
                resolve_language(conn, typo)
        for bad in ("", "!!", "fr;drop", "x" * 80):
            with pytest.raises(InvalidArgument):
                resolve_language(conn, bad)
        # what the detector answers is never refused (CLD2's codes, old and new)
        assert resolve_language(conn, "iw", strict=False) == "simple"
        assert resolve_language(conn, "fr", strict=False) == "french"


def test_a_french_dataset_is_stemmed_in_french_sealed_or_not(engine) -> None:  # type: ignore[no-untyped-def]
    vault = keys.test_vault()
    with engine.begin() as conn:
        vault.for_write(conn, "fr_user")
        assert set_language(conn, vault, "fr_user", "french")
        make_episode(conn, "fr_user", BOOKED)
        make_episode(conn, "fr_user", GARDEN)
        make_episode(conn, "en_user", BOOKED)  # the default: english
    with engine.connect() as conn:
        assert dataset_config(conn, "fr_user") == "french"
        assert dataset_config(conn, "en_user") == "english"
        french = lexical_coverage(conn, "fr_user", QUESTION)
        english = lexical_coverage(conn, "en_user", QUESTION)
        booked = " ".join(BOOKED)
        # french: "réserver" and "réservé" share the stem, "le" is a stop word.
        assert french[booked] == (1.0, 1.0)
        assert french[" ".join(GARDEN)] == (0.0, 0.0)
        # english does not stem French: only "billet(s)" matches, "le" counts as a word.
        assert english[booked][0] < 1.0
        # Sealed: the index holds blind tokens, not the French stems.
        stored = conn.execute(
            text(
                "SELECT string_agg(search_vector::text, ' ') FROM episodes WHERE dataset = 'fr_user'"
            )
        ).scalar_one()
        assert "réserv" not in stored and "billet" not in stored


def test_changing_the_language_retokenises_the_index(engine) -> None:  # type: ignore[no-untyped-def]
    vault = keys.test_vault()
    with engine.begin() as conn:
        make_episode(conn, "switch", BOOKED)
    with engine.connect() as conn:
        before = lexical_coverage(conn, "switch", QUESTION)[" ".join(BOOKED)]
    assert before[0] < 1.0
    with engine.begin() as conn:
        assert set_language(conn, vault, "switch", "french")
        assert not set_language(conn, vault, "switch", "french")  # unchanged: no work
    with engine.connect() as conn:
        # The document and the chunks (passages) both answer in French now.
        assert lexical_coverage(conn, "switch", QUESTION)[" ".join(BOOKED)] == (1.0, 1.0)
        chunks = conn.execute(
            text("SELECT count(*) FROM message_chunks WHERE dataset = 'switch'")
        ).scalar_one()
        assert chunks >= 1


def test_changing_the_language_restems_every_episode_chunk_and_event(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """In batches (here of 2), every current episode's document, its thread's chunks, and
    the dataset's events, which are stemmed when recorded, are re-stemmed."""
    monkeypatch.setattr(languages, "RETOKENISE_BATCH", 2)
    vault = keys.test_vault()
    texts = [[*BOOKED, f"Voyage numéro {i}."] for i in range(5)]
    with engine.begin() as conn:
        for messages in texts:
            make_episode(conn, "many", messages)
        for i in range(3):
            record_event(
                conn,
                vault,
                NewEvent("many", "agent", "decision", f"Billets réservés, vol {i}", (), None),
            )
    with engine.begin() as conn:
        assert set_language(conn, vault, "many", "french")
    with engine.connect() as conn:
        coverage = lexical_coverage(conn, "many", QUESTION)
        assert [coverage[" ".join(m)] for m in texts] == [(1.0, 1.0)] * 5
        key = vault.for_read(conn, "many")
        events = list(
            conn.execute(
                text(
                    "SELECT event_id, dataset, summary, actor, entities, event_type, "
                    "search_vector::text AS stored FROM events WHERE dataset = 'many'"
                )
            ).mappings()
        )
        assert len(events) == 3
        for row in vault.open_rows(conn, "many", events, "events"):
            [(literal, _)] = blind_vectors(conn, key, [(event_document(row), "")])
            french = conn.execute(
                text("SELECT CAST(:v AS tsvector)::text"), {"v": literal}
            ).scalar_one()
            assert row["stored"] == french


def test_the_language_is_set_through_set_dataset_policy(spawn) -> None:  # type: ignore[no-untyped-def]
    ingest = spawn("ingest")
    with ingest.channel() as channel:
        admin = admin_grpc.AdminServiceStub(channel)
        policy = admin.SetDatasetPolicy(
            admin_pb.SetDatasetPolicyRequest(dataset="lang_fr", language="fr", retention_days=30),
            timeout=30,
        ).policy
        assert policy.language == "french" and policy.retention_days == 30
        # Leaving the language unset keeps it.
        again = admin.SetDatasetPolicy(
            admin_pb.SetDatasetPolicyRequest(dataset="lang_fr", retention_days=60), timeout=30
        ).policy
        assert again.language == "french"
        read = admin.GetDatasetPolicy(
            admin_pb.GetDatasetPolicyRequest(dataset="lang_fr"), timeout=30
        ).policy
        assert read.language == "french"
        assert (
            admin.SetDatasetPolicy(
                admin_pb.SetDatasetPolicyRequest(dataset="lang_ja", language="ja"), timeout=30
            ).policy.language
            == "simple"
        )
        with pytest.raises(grpc.RpcError) as caught:
            admin.SetDatasetPolicy(
                admin_pb.SetDatasetPolicyRequest(dataset="lang_x", language="fr; drop"),
                timeout=30,
            )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "language" in (caught.value.details() or "")
        with pytest.raises(grpc.RpcError) as caught:  # a typo is not re-stemmed as 'simple'
            admin.SetDatasetPolicy(
                admin_pb.SetDatasetPolicyRequest(dataset="lang_fr", language="frnech"), timeout=30
            )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "frnech" in (caught.value.details() or "")


def test_update_mask_changes_only_the_policy_fields_it_names(spawn) -> None:  # type: ignore[no-untyped-def]
    """A request naming only the language keeps the dataset's own days (without a mask,
    unset days mean the global defaults, as before the mask existed); a mask naming a day
    count unset resets that one alone; an unknown name is INVALID_ARGUMENT."""
    from google.protobuf.field_mask_pb2 import FieldMask

    ingest = spawn("ingest")
    with ingest.channel() as channel:
        admin = admin_grpc.AdminServiceStub(channel)

        def set_policy(**fields):  # type: ignore[no-untyped-def]
            return admin.SetDatasetPolicy(
                admin_pb.SetDatasetPolicyRequest(dataset="masked", **fields), timeout=30
            ).policy

        own = set_policy(retention_days=30, compact_after_days=7)
        assert (own.retention_days, own.compact_after_days) == (30, 7)
        lang = set_policy(language="fr", update_mask=FieldMask(paths=["language"]))
        assert lang.language == "french"
        assert (lang.retention_days, lang.compact_after_days) == (30, 7)
        # Not named: kept, whatever the request holds for it.
        kept = set_policy(retention_days=60, update_mask=FieldMask(paths=["compact_after_days"]))
        assert (kept.HasField("retention_days"), kept.retention_days) == (True, 30)
        assert not kept.HasField("compact_after_days")  # named and unset: the global default
        assert kept.language == "french"
        old = set_policy(compact_after_days=3)  # no mask: every field, unset days reset
        assert not old.HasField("retention_days") and old.compact_after_days == 3
        assert old.language == "french"  # an unset language is unchanged either way
        with pytest.raises(grpc.RpcError) as caught:
            set_policy(update_mask=FieldMask(paths=["retention"]))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "'retention'" in (caught.value.details() or "")


def _blocked_by(engine, pid: int, holder: int) -> bool:  # type: ignore[no-untyped-def]
    """Whether backend ``pid`` waits for a lock backend ``holder`` holds."""
    with engine.connect() as conn:
        return bool(
            conn.execute(
                text("SELECT CAST(:h AS integer) = ANY(pg_blocking_pids(:p))"),
                {"p": pid, "h": holder},
            ).scalar()
        )


@pytest.mark.parametrize("first", ["switch", "compaction"])
def test_compaction_and_a_language_switch_in_either_order_leave_the_new_language(  # type: ignore[no-untyped-def]
    engine, first: str
) -> None:
    """Compaction re-stems the episode's document (its summary alone) and a switch re-stems
    every document: whichever takes the dataset's language lock first, the other waits for
    it (compaction holds it shared before the thread's lock, set_language exclusively), so
    the compacted document ends in the new language and holds the summary alone. Without
    the guard, compaction would stem in the old language before it met the switch's
    locks, or the switch would re-stem the document from messages it read before
    compaction dropped them."""
    import threading

    from episodic.store.lifecycle import compact_thread

    vault = keys.test_vault()
    summary = "Nous avons réservé les billets."  # the only words compaction keeps
    with engine.begin() as conn:
        made = make_episode(conn, "race", BOOKED, summary=summary)
        # Without chunks the switch leaves no row for compaction to wait on before it
        # stems: only the dataset's language lock orders the two.
        conn.execute(text("DELETE FROM message_chunks WHERE dataset = 'race'"))
    holder = engine.connect()
    try:
        holder.begin()
        holder_pid = holder.execute(text("SELECT pg_backend_pid()")).scalar_one()
        if first == "switch":
            assert set_language(holder, vault, "race", "french")
        else:
            assert compact_thread(holder, vault, made.thread_id, dataset="race") == len(BOOKED)
        waiter: dict[str, object] = {}

        def second() -> None:
            try:
                with engine.begin() as conn:
                    waiter["pid"] = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
                    if first == "switch":
                        waiter["done"] = compact_thread(conn, vault, made.thread_id, dataset="race")
                    else:
                        waiter["done"] = set_language(conn, vault, "race", "french")
            except Exception as err:  # re-raised by the test below
                waiter["error"] = err

        worker = threading.Thread(target=second, daemon=True)
        worker.start()
        wait_until(
            lambda: "pid" in waiter and _blocked_by(engine, int(waiter["pid"]), holder_pid),  # type: ignore[call-overload]
            timeout=30,
            message="the second transaction waits for the first",
        )
        holder.commit()
    finally:
        holder.close()
    worker.join(timeout=60)
    assert not worker.is_alive(), "the second transaction never finished"
    if "error" in waiter:
        raise waiter["error"]  # type: ignore[misc]
    assert waiter["done"] == (len(BOOKED) if first == "switch" else True)
    with engine.connect() as conn:
        assert dataset_config(conn, "race") == "french"
        # the compacted document is stemmed in French (the inflected question matches)…
        assert lexical_coverage(conn, "race", QUESTION)[summary][0] == 1.0
        # …and holds the summary alone: the dropped messages' words are not back in it
        assert lexical_coverage(conn, "race", "Lyon")[summary][0] == 0.0


def test_a_language_switch_holds_up_only_what_stems(engine) -> None:  # type: ignore[no-untyped-def]
    """While a switch re-stems a dataset (minutes on a large one), a new thread of the
    dataset is created at once — before, the switch held the dataset's row throughout and
    CreateThread waited for all of it — while RecordEvent, which stems, waits for the
    switch and is then stemmed in the new language. The switch is held mid-way by a lock
    on the episode it is about to re-stem."""
    import threading

    from services.ingest.domain import create_thread

    vault = keys.test_vault()
    with engine.begin() as conn:
        made = make_episode(conn, "busy", BOOKED)
    threads: list[threading.Thread] = []
    state: dict[str, dict[str, object]] = {"switch": {}, "event": {}}

    def run(name: str, work) -> None:  # type: ignore[no-untyped-def]
        def body() -> None:
            try:
                with engine.begin() as conn:
                    state[name]["pid"] = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
                    state[name]["done"] = work(conn)
            except Exception as err:  # re-raised below
                state[name]["error"] = err

        threads.append(threading.Thread(target=body, daemon=True))
        threads[-1].start()

    def waits_for(name: str, holder: int) -> bool:
        pid = state[name].get("pid")
        return pid is not None and _blocked_by(engine, int(pid), holder)  # type: ignore[call-overload]

    blocker = engine.connect()
    try:
        blocker.begin()
        blocker_pid = blocker.execute(text("SELECT pg_backend_pid()")).scalar_one()
        blocker.execute(
            text("SELECT 1 FROM episodes WHERE episode_id = :e FOR UPDATE"),
            {"e": made.episode_id},
        )
        run("switch", lambda conn: set_language(conn, vault, "busy", "french"))
        wait_until(
            lambda: waits_for("switch", blocker_pid), timeout=30, message="the switch re-stems"
        )

        with engine.begin() as conn:
            conn.execute(text("SET LOCAL lock_timeout = '10s'"))  # a wait fails the test
            create_thread(conn, vault, dataset="busy", thread_id=None, label="", metadata_json="{}")

        run(
            "event",
            lambda conn: record_event(
                conn, vault, NewEvent("busy", "agent", "decision", "Billets réservés", (), None)
            ),
        )
        switch_pid = int(state["switch"]["pid"])  # type: ignore[call-overload]
        wait_until(
            lambda: waits_for("event", switch_pid),
            timeout=30,
            message="RecordEvent waits for the switch",
        )
        blocker.commit()
    finally:
        blocker.close()
    for worker in threads:
        worker.join(timeout=60)
        assert not worker.is_alive(), "a transaction never finished"
    for name in state:
        if "error" in state[name]:
            raise state[name]["error"]  # type: ignore[misc]
    assert state["switch"]["done"] is True
    with engine.connect() as conn:
        assert dataset_config(conn, "busy") == "french"
        key = vault.for_read(conn, "busy")
        [row] = vault.open_rows(
            conn,
            "busy",
            list(
                conn.execute(
                    text(
                        "SELECT event_id, dataset, summary, actor, entities, event_type, "
                        "search_vector::text AS stored FROM events WHERE dataset = 'busy'"
                    )
                ).mappings()
            ),
            "events",
        )
        [(literal, _)] = blind_vectors(conn, key, [(event_document(row), "")])
        assert (
            row["stored"]
            == conn.execute(text("SELECT CAST(:v AS tsvector)::text"), {"v": literal}).scalar_one()
        )
