"""A dataset's embedding model follows its language (issue 40): with a multilingual model
beside the store's, a dataset in another language than English gets every vector from it
(episodes, chunks, events, procedures' goals) and records it in ``datasets.embedding_model``;
a small dataset whose language settles after it has vectors is moved whole, in one
transaction; nothing embedded in a model the dataset has left is stored; the store-wide
re-embedding leaves such a dataset alone; and Recall embeds a query with its dataset's
model."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import grpc
import numpy as np
import pytest
from sqlalchemy import Engine, text

from episodic.config import IngestSettings
from episodic.providers import HashingEmbedder
from episodic.providers.dataset_embedders import DatasetEmbedders
from episodic.services.ingest import domain as ingest
from episodic.services.summariser import spaces
from episodic.services.summariser.pipeline import embedding_text
from episodic.services.summariser.reembed import reembed
from episodic.store import embedding_space
from episodic.store import episodes as states
from episodic.store.events import NewEvent, embed_pending, event_document, record_event
from episodic.store.languages import set_language
from episodic.store.procedures import relearn
from episodic.store.recall_index import (
    ChunkWork,
    chunk_texts,
    index_missing,
    index_pending_chunks,
    indexed_text,
)
from episodic.store.vault import Vault
from episodic.testing.keys import test_vault
from episodic.tool_calls import ToolCall
from episodic.v1 import recall_service_pb2 as pb
from episodic.v1 import recall_service_pb2_grpc as pb_grpc
from tests.recall.factory import T0, make_episode
from tests.summariser.helpers import add, make_pipeline, make_thread, open_episode

STORE = HashingEmbedder(384)

FRENCH = [
    ("user", "Bonjour, je cherche un appartement à louer près de la gare de Lyon."),
    ("assistant", "Avec plaisir. Quel est votre budget mensuel, charges comprises ?"),
    ("user", "Pas plus de mille deux cents euros, avec deux chambres si possible."),
    ("assistant", "J'ai trouvé un deux-pièces lumineux à mille cent cinquante euros."),
]
LATER = [
    ("user", "Est-ce que le propriétaire accepte les chats ? J'en ai deux."),
    ("assistant", "Oui, les animaux sont acceptés avec un dépôt de garantie de deux cents euros."),
]


class Reversed(HashingEmbedder):
    """The multilingual model's stand-in: a model of its own name whose vectors differ
    from the store's for every text (the store's, reversed)."""

    def __init__(self, name: str = "reversed-hashing:384") -> None:
        super().__init__(384)
        self.name = name

    def _vector(self, text: str) -> np.ndarray:
        return super()._vector(text)[::-1].copy()


OTHER = Reversed()


def _pipeline(engine: Engine, **kw):  # type: ignore[no-untyped-def]
    return make_pipeline(engine, embedder=STORE, multilingual=OTHER, **kw)


def _model(engine: Engine, dataset: str) -> str | None:
    with engine.connect() as conn:
        return embedding_space.dataset_model(conn, dataset)


def _close(a: object, b: object) -> bool:
    a = np.asarray(a.to_numpy() if hasattr(a, "to_numpy") else a, np.float32)  # type: ignore[union-attr]
    return bool(np.allclose(a, np.asarray(b, np.float32), atol=1e-5))


def _assert_every_vector_is(
    engine: Engine,
    dataset: str,
    embedder: HashingEmbedder,
    *,
    episodes: bool = True,
    vault: Vault | None = None,
) -> int:
    """Every stored vector of ``dataset`` is ``embedder``'s embedding of its text, as the
    Summariser writes it (``episodes``: its episodes' too); returns how many were checked.
    ``vault``: the one that sealed the dataset (the tests' by default)."""
    vault = vault or test_vault()
    checked = 0
    with engine.connect() as conn:
        rows = (
            conn.execute(
                text(
                    "SELECT dataset, summary, key_learnings, entities, embedding FROM episodes "
                    "WHERE dataset = :d AND embedding IS NOT NULL"
                ),
                {"d": dataset},
            )
            .mappings()
            .all()
        )
        for e in rows if episodes else []:
            opened = vault.open_one(conn, e, "episodes")
            written = embedding_text(
                opened["summary"], opened["key_learnings"] or [], opened["entities"] or []
            )
            assert _close(e["embedding"], embedder.embed([written])[0]), "episode"
            checked += 1
        for (thread_id,) in conn.execute(
            text("SELECT thread_id FROM threads WHERE dataset = :d"), {"d": dataset}
        ):
            rows = (
                conn.execute(
                    text(
                        "SELECT sequence, content, metadata, tools FROM messages WHERE dataset = :d "
                        "AND thread_id = :t ORDER BY sequence"
                    ),
                    {"d": dataset, "t": thread_id},
                )
                .mappings()
                .all()
            )
            messages = [
                (m["sequence"], indexed_text(m["content"], m["metadata"], m["tools"]))
                for m in vault.open_rows(conn, dataset, list(rows), "messages")
            ]
            chunks = conn.execute(
                text(
                    "SELECT start_sequence, start_offset, embedding, end_sequence "
                    "FROM message_chunks WHERE dataset = :d AND thread_id = :t"
                ),
                {"d": dataset, "t": thread_id},
            ).all()
            texts = chunk_texts(
                messages, [(c[0], c[1]) for c in chunks], {(c[0], c[1]): c[3] for c in chunks}
            )
            for start_sequence, start_offset, vector, _ in chunks:
                expected = embedder.embed([texts[(start_sequence, start_offset)]])[0]
                assert _close(vector, expected), "chunk"
                checked += 1
        events = (
            conn.execute(
                text(
                    "SELECT dataset, summary, actor, entities, event_type, embedding FROM events "
                    "WHERE dataset = :d AND embedding IS NOT NULL"
                ),
                {"d": dataset},
            )
            .mappings()
            .all()
        )
        for ev in events:
            opened = vault.open_one(conn, ev, "events")
            assert _close(ev["embedding"], embedder.embed([event_document(opened)])[0]), "event"
            checked += 1
    return checked


def _record_event(engine: Engine, dataset: str, thread_id: uuid.UUID) -> None:
    with engine.begin() as conn:
        record_event(
            conn,
            test_vault(),
            NewEvent(
                dataset=dataset,
                actor="user",
                event_type="decision",
                summary="A choisi le deux-pièces près de la gare",
                entities=("gare de Lyon",),
                occurred_at=datetime.now(UTC),
                thread_id=thread_id,
            ),
        )


def _set_language(engine: Engine, dataset: str, config: str) -> None:
    with engine.begin() as conn:
        set_language(conn, test_vault(), dataset, config)


def test_the_multilingual_model_is_for_every_language_but_english() -> None:
    embedders = DatasetEmbedders(STORE, OTHER)
    assert embedders.model_for("english") is None
    assert embedders.model_for("french") == OTHER.name
    assert embedders.model_for("simple") == OTHER.name  # a language PostgreSQL cannot stem
    assert embedders.get(None) is STORE
    assert embedders.get(OTHER.name) is OTHER
    assert DatasetEmbedders(STORE).model_for("french") is None  # none on: the store's
    with pytest.raises(Exception, match="does not run"):
        DatasetEmbedders(STORE).get(OTHER.name)


def test_a_dataset_in_another_language_gets_every_vector_from_the_multilingual_model(
    engine,  # type: ignore[no-untyped-def]
) -> None:
    french = make_thread(engine, "fr_user")
    english = make_thread(engine, "en_user")
    _set_language(engine, "fr_user", "french")
    pipeline = _pipeline(engine)
    add(engine, french, FRENCH)
    add(
        engine,
        english,
        [("user", "I am looking for a flat near the station."), ("assistant", "Noted.")],
    )
    for thread_id in (french, english):
        open_episode(engine, thread_id)
    assert pipeline.run_once(10, yield_chunks=False).completed == 2
    _record_event(engine, "fr_user", french)
    assert embed_pending(engine, test_vault(), pipeline.embedders) == 1

    assert (_model(engine, "fr_user"), _model(engine, "en_user")) == (OTHER.name, None)
    assert _assert_every_vector_is(engine, "fr_user", OTHER) >= 3  # episode, chunks, event
    assert _assert_every_vector_is(engine, "en_user", STORE) >= 2


def test_a_small_dataset_whose_language_settles_later_is_moved_with_all_its_vectors(
    engine,  # type: ignore[no-untyped-def]
) -> None:
    thread_id = make_thread(engine, "late_fr")
    pipeline = _pipeline(engine, detect_language=False)  # set by a caller later
    add(engine, thread_id, FRENCH)
    open_episode(engine, thread_id)
    pipeline.run_once(10, yield_chunks=False)  # its language is not known yet: English
    _record_event(engine, "late_fr", thread_id)
    assert embed_pending(engine, test_vault(), pipeline.embedders) == 1
    assert _model(engine, "late_fr") is None
    before = _assert_every_vector_is(engine, "late_fr", STORE)

    _set_language(engine, "late_fr", "french")  # or detected: the same column
    add(engine, thread_id, LATER)
    open_episode(engine, thread_id)
    assert pipeline.run_once(10, yield_chunks=False).completed == 1

    assert _model(engine, "late_fr") == OTHER.name
    # every vector, the ones from before the move included, is the multilingual model's
    assert _assert_every_vector_is(engine, "late_fr", OTHER) > before


def test_a_dataset_too_large_to_move_keeps_its_model(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(spaces, "MAX_MOVED_EPISODES", 1)
    thread_id = make_thread(engine, "big_fr")
    pipeline = _pipeline(engine, detect_language=False)
    for turns in (FRENCH, LATER):
        add(engine, thread_id, turns)
        open_episode(engine, thread_id)
        pipeline.run_once(10, yield_chunks=False)
    _set_language(engine, "big_fr", "french")
    add(engine, thread_id, [("user", "Et le loyer inclut-il internet ?")])
    open_episode(engine, thread_id)
    assert pipeline.run_once(10, yield_chunks=False).completed == 1

    assert _model(engine, "big_fr") is None
    assert _assert_every_vector_is(engine, "big_fr", STORE) >= 3  # the new episode's too
    # the operator's way (episodic reindex --reembed --dataset) moves it whatever its size
    followed = spaces.follow_language(
        engine, test_vault(), DatasetEmbedders(STORE, OTHER), "big_fr", late=False, capped=False
    )
    assert followed.moved is not None and followed.moved.episodes >= 3
    assert followed.model == OTHER.name == _model(engine, "big_fr")
    assert _assert_every_vector_is(engine, "big_fr", OTHER) >= 3


def test_chunks_embedded_in_a_model_the_dataset_left_are_not_stored(engine) -> None:  # type: ignore[no-untyped-def]
    """A move that commits while the chunk index embeds (outside any transaction): the
    chunks embedded in the old model are not written; the mark stays for the next pass."""
    thread_id = make_thread(engine, "racing")
    add(engine, thread_id, FRENCH)
    open_episode(engine, thread_id)
    pipeline = _pipeline(engine, detect_language=False)
    with engine.begin() as conn:
        claimed = states.claim_pending(conn, pipeline.worker, 10, None)
    owed: list[ChunkWork] = []
    assert pipeline.process(claimed[0], None, owed) == "completed"

    class MovedWhileEmbedding(HashingEmbedder):
        def embed(self, texts: list[str]) -> np.ndarray:
            with engine.begin() as conn:  # the move commits meanwhile
                embedding_space.set_dataset_model(conn, "racing", OTHER.name)
            return super().embed(texts)

    racing = DatasetEmbedders(MovedWhileEmbedding(384), OTHER)
    assert index_pending_chunks(engine, racing, owed) == 0
    with engine.connect() as conn:
        stored = conn.execute(
            text("SELECT count(*) FROM message_chunks WHERE dataset = 'racing'")
        ).scalar_one()
        pending = conn.execute(
            text("SELECT chunks_pending FROM episodes WHERE dataset = 'racing'")
        ).scalar_one()
    assert (stored, pending) == (0, True)
    # the next pass embeds them in the dataset's model now
    assert index_pending_chunks(engine, DatasetEmbedders(STORE, OTHER), owed) > 0
    assert _assert_every_vector_is(engine, "racing", OTHER, episodes=False) > 0


def test_the_store_wide_reembedding_leaves_a_dataset_of_its_own_model_alone(engine) -> None:  # type: ignore[no-untyped-def]
    embedding_space.check_start(engine, STORE.name, 384, who="Summariser")
    french, english = make_thread(engine, "own_fr"), make_thread(engine, "own_en")
    _set_language(engine, "own_fr", "french")
    pipeline = _pipeline(engine)
    add(engine, french, FRENCH)
    add(engine, english, [("user", "Book the dentist for Tuesday."), ("assistant", "Done.")])
    for thread_id in (french, english):
        open_episode(engine, thread_id)
    pipeline.run_once(10, yield_chunks=False)

    successor = Reversed("successor:384")
    report = reembed(engine, successor, test_vault())

    assert report.threads == 1  # the English one only
    assert _assert_every_vector_is(engine, "own_en", successor) >= 2
    assert _assert_every_vector_is(engine, "own_fr", OTHER) >= 2
    assert _model(engine, "own_fr") == OTHER.name


def test_recall_embeds_the_query_with_its_datasets_model(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    """Two episodes of one French dataset, one whose vector is the multilingual model's
    embedding of the query and one the store model's: Recall ranks the first on top only
    if it embedded the query with the dataset's model (e5, loaded by this Recall beside
    MiniLM). A dataset recorded in a model this Recall does not run is refused."""
    from episodic.providers import E5Embedder, MiniLMEmbedder

    e5, minilm = E5Embedder(), MiniLMEmbedder()
    query = "Où est-ce que je voulais louer un logement ?"
    with engine.begin() as conn:
        for name, embedder in (("e5 twin", e5), ("minilm twin", minilm)):
            made = make_episode(
                conn,
                "fr_recall",
                [name],
                summary=name,
                ended_at=T0 - timedelta(hours=1),
                index=False,
            )
            conn.execute(
                text("UPDATE episodes SET embedding = :v WHERE episode_id = :e"),
                {"v": embedder.embed_query(query), "e": made.episode_id},
            )
        conn.execute(
            text(
                "UPDATE datasets SET text_search_config = 'french', embedding_model = :m "
                "WHERE dataset = 'fr_recall'"
            ),
            {"m": e5.name},
        )
        make_episode(conn, "elsewhere", ["note"], ended_at=T0)
        conn.execute(
            text("UPDATE datasets SET embedding_model = 'unknown:384' WHERE dataset = 'elsewhere'")
        )
    service = spawn("recall", env={"EPISODIC_EMBEDDING_PROVIDER": "minilm"})
    with service.channel() as channel:
        recall = pb_grpc.RecallServiceStub(channel)
        answer = recall.Recall(
            pb.RecallRequest(
                dataset="fr_recall", query=query, include=[pb.RECALL_INCLUDE_EPISODES]
            ),
            timeout=60,
        ).episodes
        assert [e.episode.summary for e in answer.episodes][:1] == ["e5 twin"]
        with pytest.raises(grpc.RpcError) as refused:
            recall.SearchEpisodes(
                pb.SearchEpisodesRequest(dataset="elsewhere", query="note"), timeout=30
            )
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "unknown:384" in (refused.value.details() or "")


def test_reindex_and_relearn_embed_a_dataset_with_its_model(engine) -> None:  # type: ignore[no-untyped-def]
    """The tools that embed outside the Summariser — `episodic reindex` indexing what has no
    index, and `procedures relearn` (which `reindex --reembed` runs too) — embed each
    dataset with its own model, as the Summariser does."""
    thread_id = make_thread(engine, "tools_fr")
    _set_language(engine, "tools_fr", "french")
    cancel = ToolCall("a", "cancel_pending_order", '{"order_id": "W9"}')
    with engine.begin() as conn:
        ingest.add_messages(
            conn,
            test_vault(),
            thread_id,
            [
                ingest.NewMessage("user", "Annulez ma commande numéro W9, s'il vous plaît.", {}),
                ingest.NewMessage("assistant", "", {}, tool_calls=(cancel,)),
                ingest.NewMessage("tool", '{"ok": true}', {}, tool_call_id="a"),
                ingest.NewMessage("assistant", "C'est fait : la commande W9 est annulée.", {}),
            ],
            IngestSettings(),
        )
    open_episode(engine, thread_id)
    assert _pipeline(engine).run_once(10, yield_chunks=False).completed == 1
    assert _model(engine, "tools_fr") == OTHER.name
    # As if it had been completed before the Summariser indexed episodes and learned
    # procedures: no index, no candidate.
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM message_chunks WHERE dataset = 'tools_fr'"))
        conn.execute(text("UPDATE episodes SET search_vector = NULL WHERE dataset = 'tools_fr'"))
        conn.execute(text("DELETE FROM procedure_candidates WHERE dataset = 'tools_fr'"))

    embedders = DatasetEmbedders(STORE, OTHER)  # as `reindex` builds them from its settings
    assert index_missing(engine, embedders, test_vault()) == 1
    assert _assert_every_vector_is(engine, "tools_fr", OTHER) >= 2  # the episode, its chunks
    assert relearn(engine, test_vault(), embedders, dataset="tools_fr").candidates == 1
    with engine.connect() as conn:
        key = test_vault().for_read(conn, "tools_fr")
        goals = conn.execute(
            text("SELECT goal, goal_embedding FROM procedure_candidates WHERE dataset = 'tools_fr'")
        ).all()
    assert len(goals) == 1
    for goal, vector in goals:
        assert _close(vector, OTHER.embed_query(key.open(bytes(goal), "procedure_candidates.goal")))
