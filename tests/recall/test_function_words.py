"""A query's function words never decide a ranking (issue 40): in a dataset whose language
is not known yet (tokenised in English), "est-ce que je" or "qué" are words like any other,
and matched whichever session used them. Recall leaves the function words of the language
the query is written in out of the text it matches lexically; English queries are as
written."""

from __future__ import annotations

import pytest

from episodic.query_focus import function_words, strip_function_words
from episodic.services.recall.domain import RecallQuery
from episodic.store.recall_queries import DEFAULT_RANKING, RankingOptions
from episodic.testing import keys
from tests.recall.factory import lexical_coverage, make_episode

pytest.importorskip("pycld2")  # the query's language is CLD2's answer

#: A session that shares only function words with the question below…
CHATTY = ["Est-ce que je peux te demander un conseil ? Je ne sais pas ce que je veux."]
#: …and the one the question is about, in other words ("logement" for "appartement").
FLAT = ["J'ai visité un appartement de deux pièces près de la gare, 850 euros par mois."]
QUESTION = "Est-ce que je cherchais un logement à louer ?"


@pytest.mark.parametrize(
    ("query", "language", "left"),
    [
        ("Où est-ce que je voulais louer un logement ?", "fr", "Où - voulais louer logement ?"),
        ("¿Qué le pasaba a mi mascota?", "es", "¿ pasaba mascota?"),
        ("Wat had ik besloten over de verhuizing?", "nl", "besloten verhuizing?"),
        ("Co postanowiłem w sprawie mieszkania?", "pl", "postanowiłem sprawie mieszkania?"),
        # English as written: the english configuration drops its own stop words.
        ("What did we decide about pricing?", "en", "What did we decide about pricing?"),
        # Too short to tell: as written.
        ("qué tal", None, "qué tal"),
    ],
)
def test_the_function_words_of_the_querys_own_language_are_left_out(
    query: str, language: str | None, left: str
) -> None:
    assert strip_function_words(query) == (left, language)


def test_a_query_of_nothing_but_function_words_is_kept_whole() -> None:
    query = "Est-ce que c'est que je suis ?"
    assert strip_function_words(query)[0] == query


def test_every_shipped_language_has_its_words_and_unknown_ones_none() -> None:
    for language in ("french", "spanish", "german", "italian", "portuguese", "dutch", "polish"):
        assert len(function_words(language)) > 50, language
    assert "que" in function_words("french") and "się" in function_words("polish")
    assert function_words("klingon") == frozenset()


def _query(**options: object) -> RecallQuery:
    return RecallQuery(
        dataset="new_fr",
        query=QUESTION,
        include_episodes=True,
        limit=10,
        similarity_weight=0.7,
        recency_weight=0.3,
        **options,  # type: ignore[arg-type]
    )


def test_recall_matches_the_question_without_its_function_words(engine) -> None:  # type: ignore[no-untyped-def]
    vault = keys.test_vault()
    with engine.begin() as conn:
        vault.for_write(conn, "new_fr")  # language unknown: tokenised in English
        make_episode(conn, "new_fr", CHATTY)
        make_episode(conn, "new_fr", FLAT)
    with engine.connect() as conn:
        as_written = lexical_coverage(conn, "new_fr", QUESTION)
        lexical = _query().lexical_query
        assert lexical is not None
        stripped = lexical_coverage(conn, "new_fr", lexical)
    chatty, flat = " ".join(CHATTY), " ".join(FLAT)
    # As written, the function words make the chatty session the question's best match.
    assert as_written[chatty][0] > as_written[flat][0]
    # Without them it shares nothing with the question; "louer" and "logement" decide.
    assert stripped[chatty][0] == 0.0
    assert DEFAULT_RANKING.strip_function_words
    assert _query(ranking=RankingOptions()).lexical_query == QUESTION


def test_the_answer_says_which_language_the_query_was_read_in(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    """RecallResponse.query_language: the language whose function words the lexical match
    left out, through the running service; empty when the query is too short to tell."""
    from episodic.providers import MiniLMEmbedder
    from episodic.v1 import recall_service_pb2 as pb
    from episodic.v1 import recall_service_pb2_grpc as pb_grpc

    with engine.begin() as conn:
        make_episode(conn, "user_lang", FLAT, embedder=MiniLMEmbedder())
    service = spawn("recall", {"EPISODIC_EMBEDDING_PROVIDER": "minilm"})
    with service.channel() as channel:
        recall = pb_grpc.RecallServiceStub(channel)

        def language(query: str) -> str:
            request = pb.RecallRequest(
                dataset="user_lang", query=query, include=[pb.RECALL_INCLUDE_EPISODES]
            )
            return str(recall.Recall(request, timeout=30).query_language)

        assert language(QUESTION) == "fr"
        assert language("¿Dónde quería alquilar un piso?") == "es"
        assert language("Where did I want to rent a flat?") == "en"
        assert language("qué tal") == ""  # too few letters to tell
