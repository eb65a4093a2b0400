"""Recall's search index of an episode, written when the episode completes.

An episode is found by what its thread said, not only by its summary: the summary's
embedding alone loses badly to BM25 over the raw messages (research/retrieval-baselines.md).
Two things are indexed, both over the **thread's messages up to the episode's
end_sequence**, not only the episode's window: a thread has one current (completed) episode
and completing it archives the earlier ones, so the current episode is the only entry that
can represent the earlier windows too (its summary is already a rolling summary of the
whole thread, seed 000 "Sequence windows").

- ``episodes.search_vector`` / ``search_length``: a tsvector of those messages plus the
  summary and key learnings (weight A), and its token count (BM25's document length).
- ``message_chunks``: overlapping runs of consecutive messages (up to
  :data:`CHUNK_MESSAGES` messages / :data:`CHUNK_WORDS` words, the embedder's window) with
  their embedding (of the chunk's own text, :func:`chunk_vectors`) and
  tsvector (for passage-level BM25: the best passage of a long thread
  matters more than the thread's average), keyed by thread and position, so they outlive
  the episode that wrote them: the next episode of the thread only embeds its own window
  and reuses the rest. With late chunking (``EPISODIC_CHUNK_VECTORS=late``, in-process
  MiniLM only) the window's text is read by the model once and each chunk's vector is
  pooled from its tokens (:func:`late_chunk_vectors`).

Both tsvectors hold **blind tokens**, not words (:func:`blind_vectors`): PostgreSQL parses
and stems the text as before, and each lexeme is replaced by an HMAC under the dataset's
key, so the index of an encrypted dataset reveals no words while BM25 ranks exactly as it
would over the words (equal words, equal tokens; queries are blinded the same way,
:func:`query_tokens`). A dataset stored in the clear keeps its lexemes as they are.

The summariser writes the lexical document in the transaction that completes the episode
(:func:`prepare_episode_document`, :func:`write_episode_document`) and marks the episode
``chunks_pending``; it embeds and stores the thread's new chunks right after, in the same
pass (:func:`index_pending_chunks`, which clears the mark in the transaction that stores
them). Why deferred: embedding the chunks is most of an episode's cost, and the episode is
recallable without them (its summary's vector and lexical document, the thread's older
chunks), so it becomes recallable that much sooner. A crash in between leaves the mark, and
the next pass of any worker indexes what it finds marked (:func:`take_chunk_work`), a
limited number of times.
:func:`index_episode` does everything at once for an episode whose summary is stored.
Recall works without any of it (the summary's embedding stands in), only less well.

The index is written by five modules, re-exported here (the import path of everything
above): :mod:`~episodic.store.index_language` (the dataset's text-search configuration and
its language lock), :mod:`~episodic.store.message_chunks` (cutting and embedding the
chunks, storing them), :mod:`~episodic.store.lexical_document` (the document, its blind
tokens, the query's tokens), :mod:`~episodic.store.deferred_chunks` (the chunk index after
completion: take, hold, give up) and :mod:`~episodic.store.episode_index` (an episode's
whole index at once, and the backfill of missing ones). A test or a benchmark that changes
a switch (``CHUNK_OVERLAP``, ``HEAD_ENTITIES``, …) sets it on the module that reads it.
"""

from __future__ import annotations

from episodic.store.deferred_chunks import (
    CHUNKS_ABANDONED_ERROR,
    MAX_CHUNK_ATTEMPTS,
    ChunkWork,
    TakenChunkWork,
    hold_chunk_work,
    index_pending_chunks,
    take_chunk_work,
)
from episodic.store.episode_index import (
    IndexResult,
    PreparedIndex,
    index_episode,
    index_missing,
    load_index_input,
    load_index_inputs,
    message_speakers,
    prepare_episode_index,
    write_episode_index,
)
from episodic.store.index_language import (
    DATASET_CONFIG,
    LANGUAGE_LOCK_SPACE,
    STEM_CONFIG,
    TEXT_SEARCH_CONFIG,
    LanguageSwitching,
    dataset_config,
    hold_language,
)
from episodic.store.lexical_document import (
    HEAD_ENTITIES,
    MAX_INDEXED_CHARS,
    SPEAKER_PAIR_SEPARATOR,
    SPEAKER_WORDS,
    IndexInput,
    blind_vectors,
    head_text,
    indexed_text,
    prepare_episode_document,
    prepare_episode_documents,
    query_tokens,
    speaker_pair,
    speaker_word_tokens,
    weighted_query_tokens,
    write_episode_document,
)
from episodic.store.message_chunks import (
    CHUNK_MESSAGES,
    CHUNK_OVERLAP,
    CHUNK_WORDS,
    Chunk,
    chunk_document,
    chunk_texts,
    chunk_vectors,
    late_chunk_vectors,
    make_chunks,
    pending_chunks,
    pending_messages,
)

__all__ = [
    "CHUNKS_ABANDONED_ERROR",
    "CHUNK_MESSAGES",
    "CHUNK_OVERLAP",
    "CHUNK_WORDS",
    "DATASET_CONFIG",
    "HEAD_ENTITIES",
    "LANGUAGE_LOCK_SPACE",
    "MAX_CHUNK_ATTEMPTS",
    "MAX_INDEXED_CHARS",
    "SPEAKER_PAIR_SEPARATOR",
    "SPEAKER_WORDS",
    "STEM_CONFIG",
    "TEXT_SEARCH_CONFIG",
    "Chunk",
    "ChunkWork",
    "IndexInput",
    "IndexResult",
    "LanguageSwitching",
    "PreparedIndex",
    "TakenChunkWork",
    "blind_vectors",
    "chunk_document",
    "chunk_texts",
    "chunk_vectors",
    "dataset_config",
    "head_text",
    "hold_chunk_work",
    "hold_language",
    "index_episode",
    "index_missing",
    "index_pending_chunks",
    "indexed_text",
    "late_chunk_vectors",
    "load_index_input",
    "load_index_inputs",
    "make_chunks",
    "message_speakers",
    "pending_chunks",
    "pending_messages",
    "prepare_episode_document",
    "prepare_episode_documents",
    "prepare_episode_index",
    "query_tokens",
    "speaker_pair",
    "speaker_word_tokens",
    "take_chunk_work",
    "weighted_query_tokens",
    "write_episode_document",
    "write_episode_index",
]
