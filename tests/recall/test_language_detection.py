"""A dataset's language detected from its text (migration 0015, store/languages.py): the
Summariser settles it once for a dataset nobody set a language for, re-tokenising what is
indexed; a language someone set is never overridden; "auto" hands it back; and a language
that changes while a document or chunks are being stemmed is caught at their write."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import Engine, text

from episodic.services.summariser.pipeline import Pipeline
from episodic.store.languages import (
    MIN_DETECT_LETTERS,
    detect_language,
    language_origin,
    set_language,
    settle_detected_language,
)
from episodic.store.recall_index import dataset_config
from episodic.testing import keys
from episodic.v1 import admin_service_pb2 as admin_pb
from episodic.v1 import admin_service_pb2_grpc as admin_grpc
from episodic.v1 import episode_pb2 as epb
from episodic.v1 import ingest_service_pb2 as ipb
from episodic.v1 import ingest_service_pb2_grpc as ig
from tests.recall.factory import lexical_coverage, make_episode
from tests.summariser.helpers import add, make_pipeline, make_thread, open_episode

FRENCH = [
    ("user", "Salut ! On aimerait partir à Lisbonne avec mon copain Julien pour ses trente ans."),
    ("assistant", "Avec plaisir ! Depuis Lyon, deux compagnies font du direct vers Lisbonne."),
    ("user", "Nous avons réservé les billets d'avion chez easyJet, c'était moins cher que TAP."),
    ("assistant", "Très bien. Le vol part de Lyon à six heures cinquante, pensez à y être tôt."),
    ("user", "Il nous reste à trouver un hôtel dans l'Alfama, pas trop loin du tramway."),
    ("assistant", "Je vous propose trois adresses calmes avec une terrasse sur le Tage."),
]
SPANISH = (
    "Hola, quería preguntarte por el presupuesto del viaje a Sevilla. Ya reservamos el hotel "
    "cerca de la catedral y compramos las entradas para el Alcázar, pero todavía no sabemos "
    "si alquilar un coche o movernos en tren por Andalucía durante la semana. Mi hermana "
    "prefiere el tren porque no le gusta conducir por las carreteras de montaña."
)
GERMAN = (
    "Wir haben gestern endlich die Wohnung in Leipzig besichtigt. Die Küche ist klein, aber "
    "der Balkon geht nach Süden und die Straßenbahn hält direkt vor der Tür. Ich muss nur "
    "noch mit dem Vermieter über die Kaution und den Einzugstermin im März sprechen. Meine "
    "Schwester hilft uns beim Umzug, wenn wir einen Transporter bekommen."
)
ENGLISH = (
    "We finally agreed on the pricing for project Atlas: the Pro tier stays at twenty-nine "
    "dollars a month, annual plans get two months free, and the enterprise tier is quoted "
    "case by case. Marketing wants the new page live before the conference next Thursday, "
    "and support needs the new billing FAQ by the end of the week."
)
#: A tool's output in a French conversation: CLD2 reads JSON as English.
TOOL_OUTPUT = (
    '{"flights": [{"carrier": "easyJet", "departure": "06:50", "price_eur": 186, '
    '"baggage": "included", "status": "confirmed", "notes": "check in online before the '
    "flight, the desk closes forty minutes before departure; seats are allocated at random "
    'unless a seat is bought in advance"}], "currency": "EUR", "source": "booking api"}'
)
#: A question in other inflections than the conversation's ("réserver" / "réservé").
QUESTION = "réserver le billet"


def _french_text() -> list[str]:
    return [content for _, content in FRENCH]


def test_the_language_of_a_text_is_detected_when_there_is_enough_of_it() -> None:
    # Every sample has room above the floor, so an edit does not silently make it too short.
    for sample in (" ".join(_french_text()), SPANISH, GERMAN, ENGLISH):
        assert sum(ch.isalpha() for ch in sample) >= MIN_DETECT_LETTERS + 50
    assert detect_language([TOOL_OUTPUT]) == "en"  # why only people's messages count
    assert detect_language(_french_text()) == "fr"
    assert detect_language([SPANISH]) == "es"
    assert detect_language([GERMAN]) == "de"
    assert detect_language([ENGLISH]) == "en"
    # Too few letters to tell ("hi, thanks!"), or nothing at all.
    assert detect_language(["Merci, à demain !"]) is None
    assert detect_language([]) is None
    short = "a" * (MIN_DETECT_LETTERS - 1)
    assert detect_language([short]) is None
    # Two languages in equal parts: neither holds the share it takes.
    assert detect_language([ENGLISH, GERMAN]) is None
    # Characters CLD2 refuses as "invalid UTF-8" do not hide the language around them.
    assert detect_language([SPANISH.replace(" ", " \x85 ", 5)]) == "es"


def _coverage(conn, dataset: str) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """The best (coverage, passage_coverage) of QUESTION among the dataset's episodes: what
    its documents and what its chunks hold of the question, in the dataset's language."""
    found = lexical_coverage(conn, dataset, QUESTION).values()
    return max(c for c, _ in found), max(p for _, p in found)


def test_a_dataset_nobody_set_gets_its_detected_language_once(engine: Engine) -> None:
    vault = keys.test_vault()
    with engine.begin() as conn:
        vault.for_write(conn, "detect_fr")
        make_episode(conn, "detect_fr", _french_text())
    with engine.connect() as conn:
        assert (dataset_config(conn, "detect_fr"), language_origin(conn, "detect_fr")) == (
            "english",
            "default",
        )
        # English stemming does not join "réserver" and "réservé".
        assert max(_coverage(conn, "detect_fr")) < 1.0
    with engine.begin() as conn:
        assert settle_detected_language(conn, vault, "detect_fr", _french_text()) == "french"
    with engine.connect() as conn:
        assert (dataset_config(conn, "detect_fr"), language_origin(conn, "detect_fr")) == (
            "french",
            "detected",
        )
        # What was indexed before (documents and chunks) is re-tokenised in French.
        assert _coverage(conn, "detect_fr") == (1.0, 1.0)
    with engine.begin() as conn:
        # Settled for good: an English episode later does not switch it back.
        assert settle_detected_language(conn, vault, "detect_fr", [ENGLISH]) is None
        assert dataset_config(conn, "detect_fr") == "french"


def test_short_threads_are_detected_together(engine: Engine) -> None:
    """A user of short conversations: no thread alone has the letters detection needs, so
    detection reads the dataset's other threads too, and settles once together they can
    tell; until then nothing is settled and the next episode asks again."""
    vault = keys.test_vault()
    halves = (_french_text()[:2], _french_text()[2:4])
    for half in halves:  # each short of the floor alone, past it together
        assert sum(ch.isalpha() for t in half for ch in t) < MIN_DETECT_LETTERS
    assert sum(ch.isalpha() for h in halves for t in h for ch in t) >= MIN_DETECT_LETTERS
    with engine.begin() as conn:
        vault.for_write(conn, "short_fr")
        make_episode(conn, "short_fr", halves[0])
        # Too little text in the thread and in the dataset: nothing settled.
        assert settle_detected_language(conn, vault, "short_fr", halves[0]) is None
        assert language_origin(conn, "short_fr") == "default"
        assert settle_detected_language(conn, vault, "short_fr", ["Merci !"]) is None
    with engine.begin() as conn:
        make_episode(conn, "short_fr", halves[1])
        assert settle_detected_language(conn, vault, "short_fr", halves[1]) == "french"
    with engine.connect() as conn:
        assert (dataset_config(conn, "short_fr"), language_origin(conn, "short_fr")) == (
            "french",
            "detected",
        )


def test_a_language_someone_set_is_never_overridden(engine: Engine) -> None:
    vault = keys.test_vault()
    with engine.begin() as conn:
        vault.for_write(conn, "set_en")
        set_language(conn, vault, "set_en", "english")
        assert language_origin(conn, "set_en") == "set"
        assert settle_detected_language(conn, vault, "set_en", _french_text()) is None
        assert dataset_config(conn, "set_en") == "english"


def _summarise_french_thread(engine: Engine, dataset: str, pipeline: Pipeline) -> uuid.UUID:
    thread_id = make_thread(engine, dataset=dataset, label="Lisbonne")
    add(engine, thread_id, [*FRENCH[:3], ("tool", TOOL_OUTPUT), *FRENCH[3:]])
    open_episode(engine, thread_id)
    assert pipeline.run_once(limit=4).completed == 1
    return thread_id


def test_the_summariser_detects_the_language_before_it_stems_the_episode(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from episodic.services.summariser import pipeline as pipeline_module

    # The language each stemming of a document sees (detection must come first: were it
    # after the completion, re-tokenising would hide it in the end state).
    seen: list[str] = []
    prepare = pipeline_module.prepare_episode_document

    def prepare_and_note(conn, key, source):  # type: ignore[no-untyped-def]
        seen.append(dataset_config(conn, source.dataset))
        return prepare(conn, key, source)

    monkeypatch.setattr(pipeline_module, "prepare_episode_document", prepare_and_note)
    # The thread holds a tool's output in English too: only people's messages count.
    _summarise_french_thread(engine, "pipe_fr", make_pipeline(engine))
    assert seen == ["french"]
    with engine.connect() as conn:
        assert dataset_config(conn, "pipe_fr") == "french"
        assert language_origin(conn, "pipe_fr") == "detected"
        # The episode's document and its chunks were stemmed in French.
        assert _coverage(conn, "pipe_fr") == (1.0, 1.0)
    # Off (EPISODIC_DETECT_LANGUAGE=false): the default stays.
    _summarise_french_thread(engine, "pipe_off", make_pipeline(engine, detect_language=False))
    with engine.connect() as conn:
        assert (dataset_config(conn, "pipe_off"), language_origin(conn, "pipe_off")) == (
            "english",
            "default",
        )
        assert max(_coverage(conn, "pipe_off")) < 1.0


def test_a_large_dataset_is_not_switched_by_detection(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Switching re-stems the whole index in one transaction: detection does it only while
    the dataset is small; a larger one keeps its configuration (an operator decides)."""
    from episodic.store import languages

    monkeypatch.setattr(languages, "MAX_SWITCHED_EPISODES", 1)
    vault = keys.test_vault()
    with engine.begin() as conn:
        vault.for_write(conn, "large_fr")
        make_episode(conn, "large_fr", _french_text())
        assert settle_detected_language(conn, vault, "large_fr", _french_text()) == "french"
        vault.for_write(conn, "larger_fr")
        make_episode(conn, "larger_fr", _french_text())
        make_episode(conn, "larger_fr", _french_text())
        assert settle_detected_language(conn, vault, "larger_fr", _french_text()) is None
        assert (dataset_config(conn, "larger_fr"), language_origin(conn, "larger_fr")) == (
            "english",
            "default",
        )
        # English needs no switch: settled whatever the size.
        vault.for_write(conn, "larger_en")
        make_episode(conn, "larger_en", [ENGLISH])
        make_episode(conn, "larger_en", [ENGLISH])
        assert settle_detected_language(conn, vault, "larger_en", [ENGLISH]) == "english"
        assert language_origin(conn, "larger_en") == "detected"


@pytest.mark.parametrize("moment", ["document", "chunks"])
def test_a_language_set_while_an_episode_is_stemmed_is_caught_at_its_write(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, moment: str
) -> None:
    """Another process sets the dataset's language right after this worker stemmed the
    episode's document (before its completion), or its chunks (while they are embedded):
    what is written is stemmed in the language in force, not the one read before."""
    from episodic.services.summariser import pipeline as pipeline_module
    from episodic.store import deferred_chunks

    dataset = f"midway_{moment}"
    pending = ["french"]

    def switch() -> None:
        if pending:
            with engine.begin() as other:
                set_language(other, keys.test_vault(), dataset, pending.pop())

    if moment == "document":
        prepare = pipeline_module.prepare_episode_document

        def prepare_then_switch(conn, key, source):  # type: ignore[no-untyped-def]
            document = prepare(conn, key, source)
            switch()
            return document

        monkeypatch.setattr(pipeline_module, "prepare_episode_document", prepare_then_switch)
    else:
        vectors = deferred_chunks.vectors_of_chunks  # what index_pending_chunks calls

        def embed_after_switch(*args, **kw):  # type: ignore[no-untyped-def]
            switch()  # between the chunks' stemming and their write
            return vectors(*args, **kw)

        monkeypatch.setattr(deferred_chunks, "vectors_of_chunks", embed_after_switch)
    _summarise_french_thread(engine, dataset, make_pipeline(engine, detect_language=False))
    assert pending == []
    monkeypatch.undo()
    stored = _stored_vectors(engine, dataset)
    assert len(stored) >= 2, "the document and the chunks were indexed"
    # What the language in force makes of the same text: re-tokenise it all from scratch.
    with engine.begin() as conn:
        assert dataset_config(conn, dataset) == "french"
        set_language(conn, keys.test_vault(), dataset, "english")
        set_language(conn, keys.test_vault(), dataset, "french")
    assert _stored_vectors(engine, dataset) == stored


def _stored_vectors(engine: Engine, dataset: str) -> list[str]:
    with engine.connect() as conn:
        return sorted(
            conn.execute(
                text(
                    "SELECT search_vector::text FROM episodes WHERE dataset = :d UNION ALL "
                    "(SELECT search_vector::text FROM message_chunks WHERE dataset = :d "
                    "ORDER BY thread_id, start_sequence, start_offset)"
                ),
                {"d": dataset},
            ).scalars()
        )


def test_set_dataset_policy_reports_the_origin_and_auto_hands_it_back(spawn) -> None:  # type: ignore[no-untyped-def]
    ingest = spawn("ingest")
    with ingest.channel() as channel:
        admin = admin_grpc.AdminServiceStub(channel)
        writer = ig.IngestServiceStub(channel)

        def policy(language: str | None = None, dataset: str = "auto_fr"):  # type: ignore[no-untyped-def]
            request = admin_pb.SetDatasetPolicyRequest(dataset=dataset)
            if language is not None:
                request.language = language
            return admin.SetDatasetPolicy(request, timeout=30).policy

        thread = writer.CreateThread(ipb.CreateThreadRequest(dataset="auto_fr"), timeout=30).thread
        assert (policy().language, policy().language_origin) == (
            "english",
            admin_pb.LANGUAGE_ORIGIN_DEFAULT,
        )
        writer.AddMessages(
            ipb.AddMessagesRequest(
                thread_id=thread.thread_id,
                messages=[
                    ipb.NewMessage(role=epb.ROLE_USER, content=content) for _, content in FRENCH
                ],
            ),
            timeout=30,
        )
        set_de = policy("de")
        assert (set_de.language, set_de.language_origin) == (
            "german",
            admin_pb.LANGUAGE_ORIGIN_SET,
        )
        # "auto": detected at once from the dataset's messages.
        auto = policy("Auto")
        assert (auto.language, auto.language_origin) == (
            "french",
            admin_pb.LANGUAGE_ORIGIN_DETECTED,
        )
        read = admin.GetDatasetPolicy(
            admin_pb.GetDatasetPolicyRequest(dataset="auto_fr"), timeout=30
        ).policy
        assert read.language_origin == admin_pb.LANGUAGE_ORIGIN_DETECTED
        # A dataset with nothing to read: English until an episode can tell.
        empty = policy("auto", dataset="auto_empty")
        assert (empty.language, empty.language_origin) == (
            "english",
            admin_pb.LANGUAGE_ORIGIN_DEFAULT,
        )


def test_the_migration_keeps_a_language_someone_set(databases) -> None:  # type: ignore[no-untyped-def]
    """Migration 0015: a dataset in another configuration, or one whose audit trail shows
    a language set (English on purpose), is 'set'; one never set is 'default'."""
    from episodic.store import migrate
    from episodic.store.db import make_engine

    url = databases.create(migrated=False)
    engine = make_engine(url, pool_size=1)
    try:
        migrate.upgrade(url, 384, "0014_embedding_space")
        with engine.begin() as conn:
            for dataset, config in (
                ("fr_set", "french"),
                ("en_set", "english"),
                ("never", "english"),
            ):
                conn.execute(
                    text("INSERT INTO datasets (dataset, text_search_config) VALUES (:d, :c)"),
                    {"d": dataset, "c": config},
                )
            conn.execute(
                text(
                    "INSERT INTO audit_events (key_prefix, action, dataset, details) VALUES "
                    "('dev', 'dataset.policy', 'en_set', '{\"language\": \"english\"}'), "
                    "('dev', 'dataset.policy', 'never', '{\"retention_days\": 30}')"
                )
            )
        migrate.upgrade(url, 384)
        with engine.connect() as conn:
            origins = dict(
                conn.execute(text("SELECT dataset, language_origin FROM datasets")).all()
            )
        assert origins == {"fr_set": "set", "en_set": "set", "never": "default"}
    finally:
        engine.dispose()
        databases.drop(url)
