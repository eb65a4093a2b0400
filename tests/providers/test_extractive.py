"""The offline extractive summariser: useful, bounded, deterministic, and it only says what
the conversation said."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodic.providers import (
    ACTORS,
    EVENT_TYPES,
    ChatMessage,
    ExtractiveSummariser,
    HashingEmbedder,
    MiniLMEmbedder,
    Summariser,
    SummaryRequest,
    normalise_entities,
    normalise_entity,
)
from episodic.providers.extractive import (
    classify_event,
    extract_entities,
    lexical_vectors,
    split_sentences,
    third_person,
)

T0 = datetime(2026, 8, 16, 9, 2, 11, tzinfo=UTC)

OLDER = [
    ("user", "Hi! Can you help me plan my move? I want to move to Berlin next year for a job."),
    (
        "assistant",
        "Of course. Berlin has good public transport, so many people live without a car.",
    ),
    ("user", "Good to know. Let's talk about that another time."),
]
WINDOW = [
    (
        "user",
        "Hey, I need help choosing a car. We have two kids and a dog, and my budget is under $30k.",
    ),
    ("assistant", "Happy to help! Are you open to SUVs like the Honda CR-V or the Toyota RAV4?"),
    (
        "user",
        "No, SUVs are too big for me. I mostly do city commutes and parking downtown is a "
        "nightmare.",
    ),
    (
        "assistant",
        "Then a compact car makes sense. The Toyota Corolla Hybrid gets about 50 mpg "
        "and starts around $23,500. The Honda Civic is another option.",
    ),
    ("user", "I like the idea of a hybrid. How is the Corolla's boot space for a stroller?"),
    (
        "assistant",
        "The Corolla Hybrid has 13.1 cubic feet of trunk space, which fits a folded "
        "stroller and groceries.",
    ),
    (
        "user",
        "Great. I've decided to go with the Corolla Hybrid. I'll book a test drive at "
        "Toyota of Springfield on Saturday.",
    ),
    ("assistant", "Excellent choice! Ask about the 2026 model year incentives when you visit."),
    ("user", "Thanks, that was really helpful!"),
]


def _messages(turns: list[tuple[str, str]], start: int = 1) -> list[ChatMessage]:
    return [
        ChatMessage(start + i, role, text, T0 + timedelta(minutes=start + i))
        for i, (role, text) in enumerate(turns)
    ]


def _car_request() -> SummaryRequest:
    return SummaryRequest(
        _messages(OLDER + WINDOW), window_start_sequence=len(OLDER) + 1, thread_label="cars"
    )


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture(scope="module")
def summariser(minilm: MiniLMEmbedder) -> ExtractiveSummariser:
    return ExtractiveSummariser(minilm, max_summary_chars=800)


def test_summary_is_bounded_and_covers_the_whole_conversation(
    summariser: ExtractiveSummariser,
) -> None:
    assert isinstance(summariser, Summariser)
    result = summariser.summarise(_car_request())
    transcript = " ".join(text for _, text in OLDER + WINDOW)
    assert 200 < len(result.summary) <= 800
    assert not transcript.startswith(result.summary[:100])  # not "the first N characters"
    # Content from late in the conversation made it in: the decision and the test drive.
    assert "decided to go with the Corolla Hybrid" in result.summary
    assert "test drive" in result.summary
    # Speakers are named, sentences are whole.
    assert result.summary.startswith(("User: ", "Agent: "))
    assert "Agent: " in result.summary
    assert result.summary.rstrip().endswith((".", "!", "?"))


def test_summary_only_contains_sentences_that_were_said(
    summariser: ExtractiveSummariser,
) -> None:
    result = summariser.summarise(_car_request())
    said = [s for _, text in OLDER + WINDOW for s in split_sentences(text)]
    for segment in result.summary.replace("Agent: ", "\n").replace("User: ", "\n").split("\n"):
        for sentence in split_sentences(segment):
            assert any(sentence in original for original in said), sentence


def test_key_learnings_come_from_the_window_users_messages(
    summariser: ExtractiveSummariser,
) -> None:
    result = summariser.summarise(_car_request())
    learnings = " | ".join(result.key_learnings)
    assert 3 <= len(result.key_learnings) <= 6
    assert "Berlin" not in learnings  # older context, covered by an earlier episode
    assert "mpg" not in learnings and "trunk space" not in learnings  # the agent's lines
    assert "User has decided to go with the Corolla Hybrid." in result.key_learnings
    assert any("$30k" in k for k in result.key_learnings)
    assert any("too big" in k for k in result.key_learnings)
    assert len({k.lower() for k in result.key_learnings}) == len(result.key_learnings)


def test_entities_are_normalised_names(summariser: ExtractiveSummariser) -> None:
    result = summariser.summarise(_car_request())
    assert result.entities == sorted(set(result.entities))
    assert all(normalise_entity(e) == e for e in result.entities)
    assert "toyota corolla hybrid" in result.entities
    assert "honda civic" in result.entities
    # Short forms fold into the long one; sentence openers and plural acronyms are no names.
    for noise in ("corolla", "corolla hybrid", "great", "hey", "suvs", "the", "i"):
        assert noise not in result.entities


def test_event_type_is_decision_when_the_user_decides(summariser: ExtractiveSummariser) -> None:
    result = summariser.summarise(_car_request())
    assert (result.event_type, result.actor) == ("decision", "user")


def test_deterministic_across_runs_and_instances(minilm: MiniLMEmbedder) -> None:
    first = ExtractiveSummariser(minilm).summarise(_car_request())
    second = ExtractiveSummariser(MiniLMEmbedder()).summarise(_car_request())
    assert first == second


def test_works_with_the_hashing_embedder() -> None:
    result = ExtractiveSummariser(HashingEmbedder()).summarise(_car_request())
    assert "Corolla" in result.summary
    assert result.event_type == "decision"


def test_summary_budget_is_configurable(minilm: MiniLMEmbedder) -> None:
    result = ExtractiveSummariser(minilm, max_summary_chars=250).summarise(_car_request())
    assert 0 < len(result.summary) <= 250


def test_rolling_summary_weights_the_window(minilm: MiniLMEmbedder) -> None:
    # A long older discussion about a move, then a short window about a car.
    older = [
        (
            "user",
            f"For the move to Berlin I still need to sort out item {i}, the flat and the "
            "visa paperwork.",
        )
        for i in range(30)
    ]
    window = WINDOW[:4]
    request = SummaryRequest(_messages(older + window), window_start_sequence=len(older) + 1)
    result = ExtractiveSummariser(minilm, context_share=0.3).summarise(request)
    older_chars = sum(
        len(s) for s in split_sentences(result.summary) if "Berlin" in s or "visa" in s
    )
    assert older_chars <= 0.3 * 800
    assert "car" in result.summary


def test_small_talk_only_window_still_has_a_summary(minilm: MiniLMEmbedder) -> None:
    request = SummaryRequest(_messages([("user", "Hi!"), ("assistant", "Hello!")]), 1)
    result = ExtractiveSummariser(minilm).summarise(request)
    assert result.summary == "User: Hi! Agent: Hello!"
    assert result.key_learnings == []
    assert result.event_type == "conversation"


def test_display_names_label_speakers_and_become_entities(minilm: MiniLMEmbedder) -> None:
    messages = [
        ChatMessage(
            1,
            "user",
            "I went to a LGBTQ support group yesterday and it was so powerful.",
            T0,
            "Caroline",
        ),
        ChatMessage(
            2, "assistant", "That sounds amazing, Caroline! What happened there?", T0, "Melanie"
        ),
        ChatMessage(
            3,
            "user",
            "The transgender stories were so inspiring. I'm going to keep going every week.",
            T0,
            "Caroline",
        ),
    ]
    result = ExtractiveSummariser(minilm).summarise(SummaryRequest(messages, 1))
    assert "Caroline: I went to a LGBTQ support group" in result.summary
    assert "Caroline went to a LGBTQ support group yesterday and it was so powerful." in (
        result.key_learnings
    )
    assert {"caroline", "melanie", "lgbtq"} <= set(result.entities)


def test_very_long_thread_is_capped(minilm: MiniLMEmbedder) -> None:
    older = [("user", f"Old note {i} about the garden and the roses.") for i in range(600)]
    request = SummaryRequest(_messages(older + WINDOW), window_start_sequence=601)
    result = ExtractiveSummariser(minilm, max_context_messages=50).summarise(request)
    assert "Corolla" in result.summary and len(result.summary) <= 800


# --------------------------------------------------------------------------- the heuristics


def test_split_sentences() -> None:
    text = "Dr. Smith paid $3.5k today! Did you see it?\nYes… e.g. the blue one. J. K. Rowling"
    assert split_sentences(text) == [
        "Dr. Smith paid $3.5k today!",
        "Did you see it?",
        "Yes…",
        "e.g. the blue one.",
        "J. K. Rowling",
    ]


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("I want a family car under $30k.", "User wants a family car under $30k."),
        ("Hey, I need help choosing a car.", "User needs help choosing a car."),
        ("I'm looking for a hybrid.", "User is looking for a hybrid."),
        ("I've decided to go with the Corolla.", "User has decided to go with the Corolla."),
        ("I'll book a test drive on Saturday.", "User will book a test drive on Saturday."),
        ("I really love my dog.", "User really loves their dog."),
        ("I don't like SUVs.", "User doesn't like SUVs."),
        ("I went there and I think I liked it.", "User went there and they think they liked it."),
        ("My budget is $30k.", "User's budget is $30k."),
        ("I finish work at 5.", "User finishes work at 5."),
        ("SUVs are too big for me.", None),
    ],
)
def test_third_person(sentence: str, expected: str | None) -> None:
    assert third_person(sentence, "User") == expected


def test_extract_entities_forms() -> None:
    counts = extract_entities(
        [
            "Please escalate invoice #42 to @alice.finance and ticket support-#412.",
            "The Atlas project is late. We met Bob Smith from Acme Corp on Monday.",
            "Went to Paris with Bob.",
        ]
    )
    entities = set(counts)
    assert {"invoice:#42", "@alice.finance", "support:#412", "project atlas"} <= entities
    assert {"bob smith", "acme corp", "paris", "bob"} <= entities
    assert not entities & {"went", "monday", "please", "the", "we"}


@pytest.mark.parametrize(
    ("turns", "expected"),
    [
        ([("user", "Run the report"), ("tool", '{"rows": 3}')], ("tool_call", "agent")),
        ([("user", "OK, we agreed on the Pro tier at $29.")], ("decision", "user")),
        ([("assistant", "I've booked your flight to Lisbon.")], ("decision", "agent")),
        ([("user", "We finally launched the new website!")], ("milestone", "user")),
        ([("user", "This answer is useless, I'm disappointed.")], ("feedback", "user")),
        ([("user", "I took your advice and it worked!")], ("feedback", "user")),
        # Friendly praise in a chat is not feedback on help received.
        (
            [
                ("user", "Wow, great job on the race! That's so cool."),
                ("assistant", "Thanks! It was tough."),
                ("user", "You're so talented, well done!"),
            ],
            ("conversation", "user"),
        ),
        (
            [
                ("user", "Thanks, great answer."),
                ("assistant", "Glad it helped."),
                ("user", "Great, thank you!"),
            ],
            ("feedback", "user"),
        ),
        (
            [
                ("user", "What's the capital of France?"),
                ("assistant", "Paris is the capital of France, great question."),
            ],
            ("conversation", "agent"),
        ),
    ],
)
def test_classify_event(turns: list[tuple[str, str]], expected: tuple[str, str]) -> None:
    assert classify_event(_messages(turns)) == expected


def test_extract_entities_ignores_greetings_before_names() -> None:
    counts = extract_entities(
        ["Cheers, James! Appreciate it.", "Yum Joanna, that looks great.", "I met Joanna today."],
        names=["James", "Joanna"],
    )
    assert set(counts) == {"james", "joanna"}


def test_degenerate_windows(minilm: MiniLMEmbedder) -> None:
    summariser = ExtractiveSummariser(minilm)
    system_only = SummaryRequest(_messages([("system", "You are a helpful agent.")]), 1)
    assert summariser.summarise(system_only).summary == "System: You are a helpful agent."
    empty = summariser.summarise(SummaryRequest(_messages([("user", ""), ("user", " ")]), 1))
    assert empty.summary == "2 message(s) without text."
    assert (empty.key_learnings, empty.entities) == ([], [])


@settings(max_examples=60, deadline=None)
@given(
    turns=st.lists(
        st.tuples(st.sampled_from(["user", "assistant", "tool", "system"]), st.text(max_size=400)),
        min_size=1,
        max_size=12,
    ),
    split=st.integers(min_value=0, max_value=11),
    budget=st.integers(min_value=100, max_value=900),
)
def test_any_input_gives_a_bounded_valid_episode(
    turns: list[tuple[str, str]], split: int, budget: int
) -> None:
    request = SummaryRequest(_messages(turns), window_start_sequence=min(split, len(turns) - 1) + 1)
    result = ExtractiveSummariser(HashingEmbedder(), max_summary_chars=budget).summarise(request)
    assert result.summary and len(result.summary) <= budget
    assert result.event_type in EVENT_TYPES and result.actor in ACTORS
    assert result.entities == normalise_entities(result.entities)
    assert len(result.key_learnings) <= 6


class _CountingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.embedded: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.embedded += texts
        return super().embed(texts)


def test_sentence_vectors_are_cached_across_episodes() -> None:
    embedder = _CountingEmbedder()
    summariser = ExtractiveSummariser(embedder, sentence_vectors="model")
    messages = _messages(OLDER + WINDOW)
    first = summariser.summarise(SummaryRequest(messages[:6], 4))
    seen = list(embedder.embedded)
    embedder.embedded.clear()
    second = summariser.summarise(SummaryRequest(messages, 7))  # the next, rolling episode
    # Only sentences of the new messages were embedded; the older ones came from the cache.
    assert embedder.embedded and not set(embedder.embedded) & set(seen)
    fresh = ExtractiveSummariser(HashingEmbedder(), sentence_vectors="model")
    assert fresh.summarise(SummaryRequest(messages, 7)) == second
    assert first.summary


def test_the_pooled_vector_is_the_mean_of_the_quoted_sentences(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    from episodic.providers import extractive
    from episodic.providers.embedding import HashingEmbedder, normalise_rows
    from episodic.providers.types import ChatMessage, SummaryRequest

    said = [
        "The mountain trail above the village was covered in fresh snow.",
        "Our guide pointed out two eagles circling over the frozen lake.",
        "The hut at the top served hot soup and dark bread to the walkers.",
    ]
    at = datetime(2026, 1, 5, 9, tzinfo=UTC)
    request = SummaryRequest(
        messages=[ChatMessage(i + 1, "assistant", t, at) for i, t in enumerate(said)],
        window_start_sequence=1,
    )
    embedder = HashingEmbedder(384)
    model = ExtractiveSummariser(embedder, sentence_vectors="model")
    assert model.summarise(request).vector is None  # off by default
    monkeypatch.setattr(extractive, "POOL_SUMMARY_VECTOR", True)
    result = model.summarise(request)
    assert all(t in result.summary for t in said) and result.key_learnings == []
    expected = normalise_rows(embedder.embed(said).sum(axis=0, keepdims=True))[0]
    np.testing.assert_allclose(result.vector, expected, atol=1e-6)


# --------------------------------------------------------------------------- sentence vectors


def test_lexical_sentence_vectors_compare_content_words() -> None:
    vectors = lexical_vectors(
        [
            "We hiked the mountain trails for hours.",
            "The mountain trail was steep, but hiking it was worth it.",
            "It was what it was, and it is what it is.",  # stop words only
            "Dinner was pasta with friends.",
        ]
    )
    assert float(vectors[0] @ vectors[1]) > 0.3  # "mountain", "trail(s)", "hik(ed/ing)" shared
    assert float(vectors[0] @ vectors[3]) == 0.0  # nothing in common but stop words
    assert not vectors[2].any()  # no content word: similar to nothing
    np.testing.assert_allclose(np.linalg.norm(vectors[[0, 1, 3]], axis=1), 1.0, rtol=1e-6)


def test_the_default_summary_runs_no_model_over_its_sentences() -> None:
    embedder = _CountingEmbedder()
    result = ExtractiveSummariser(embedder).summarise(_car_request())
    assert embedder.embedded == []  # lexical sentence vectors: the embedder is never called
    assert "Corolla" in result.summary and result.key_learnings
    model = ExtractiveSummariser(embedder, sentence_vectors="model").summarise(_car_request())
    assert embedder.embedded  # the model variant embeds every candidate sentence
    assert model.summary and model.key_learnings


def test_the_setting_chooses_the_sentence_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    from episodic.config import LLMSettings
    from episodic.providers import make_summariser

    assert make_summariser(LLMSettings(), HashingEmbedder()).sentence_vectors == "lexical"  # type: ignore[attr-defined]
    monkeypatch.setenv("EPISODIC_SUMMARY_SENTENCE_VECTORS", "model")
    assert make_summariser(LLMSettings(), HashingEmbedder()).sentence_vectors == "model"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="sentence_vectors"):
        ExtractiveSummariser(HashingEmbedder(), sentence_vectors="bag")
