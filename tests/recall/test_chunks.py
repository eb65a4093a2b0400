"""How a thread's messages are cut into chunks for embedding (pure function)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from episodic.store.recall_index import CHUNK_MESSAGES, CHUNK_WORDS, indexed_text, make_chunks

_word = st.text(alphabet="abcdefghij", min_size=1, max_size=6)
_content = st.lists(_word, min_size=0, max_size=400).map(" ".join)


@given(st.lists(_content, min_size=0, max_size=30))
def test_chunks_cover_every_word_within_the_window(contents: list[str]) -> None:
    messages = list(enumerate(contents, start=1))
    chunks = make_chunks(messages)
    keys = [(c.start_sequence, c.start_offset) for c in chunks]
    assert len(keys) == len(set(keys)), "chunk keys are unique"
    assert keys == sorted(keys)
    for chunk in chunks:
        assert chunk.start_sequence <= chunk.end_sequence
        assert len(chunk.text.split()) <= CHUNK_WORDS
        assert len(chunk.text.split("\n")) <= CHUNK_MESSAGES
    # Every word of every message is in some chunk, in order.
    joined = " ".join(c.text.replace("\n", " ") for c in chunks).split()
    for _, content in messages:
        for word in content.split():
            assert word in joined
    assert bool(chunks) == any(c.split() for c in contents)


def test_chunks_overlap_by_half() -> None:
    chunks = make_chunks([(i, f"message {i}") for i in range(1, 9)])
    assert [(c.start_sequence, c.end_sequence) for c in chunks] == [(1, 4), (3, 6), (5, 8)]


def test_a_long_message_is_split_into_pieces() -> None:
    long = " ".join(f"w{i}" for i in range(CHUNK_WORDS * 2 + 10))
    chunks = make_chunks([(1, "short hello"), (2, long), (3, "bye")])
    assert {(c.start_sequence, c.start_offset) for c in chunks} >= {(2, 0), (2, CHUNK_WORDS)}
    assert all(len(c.text.split()) <= CHUNK_WORDS for c in chunks)


def test_indexed_text_names_the_speaker_like_the_summariser() -> None:
    assert indexed_text("hi", {"name": " Caroline "}) == "Caroline: hi"
    assert indexed_text("hi", {"speaker": "Mel"}) == "Mel: hi"
    assert indexed_text("hi", '{"name": "Ann"}') == "Ann: hi"
    assert indexed_text("hi", {"name": 42}) == "hi"
    assert indexed_text("hi", None) == "hi"


def test_without_overlap_each_message_is_in_one_chunk(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from episodic.store import message_chunks, recall_index

    monkeypatch.setattr(message_chunks, "CHUNK_OVERLAP", False)  # read there
    chunks = make_chunks([(i, f"message {i}") for i in range(1, 10)])
    assert [(c.start_sequence, c.end_sequence) for c in chunks] == [(1, 4), (5, 8), (9, 9)]
    long = " ".join(f"w{i}" for i in range(CHUNK_WORDS * 2 + 10))
    pieces = make_chunks([(1, "short hello"), (2, long), (3, "bye")])
    words = [w for c in pieces for w in c.text.split()]
    assert len(words) == len(set(words)) == 2 + CHUNK_WORDS * 2 + 10 + 1  # each word once
    # A stored chunk's text is found again from where it starts, as with overlap.
    starts = [(c.start_sequence, c.start_offset) for c in pieces]
    assert recall_index.chunk_texts([(1, "short hello"), (2, long), (3, "bye")], starts) == {
        s: c.text for s, c in zip(starts, pieces, strict=True)
    }
