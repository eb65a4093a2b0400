"""Late interaction in the recall lab (the sixth pass): every word of a session and of the
question read in context by the embedder Recall has, a candidate scored by the question's
words' best cosines with its words (``late_interaction_features``), and the forms stored
word vectors could take (int8, signs, distinct words, random projections, the nearest
chunks' words: ``_stored_word_forms``), each as a reader's score."""

from __future__ import annotations

import math
import time

import numpy as np

from bench.harness import locomo
from bench.harness.report import log
from bench.quality.lab.features import candidate_texts, lab_request

#: Chunks per session read for the query-time variant of late interaction.
NEAREST_CHUNKS = 2


def late_interaction_features(
    url: str,
    conversations: list[locomo.Conversation],
    rows: list[dict],
    top: int = 10,
    read_chunks: bool = True,
) -> list[dict]:
    """An untried reading for the same-topic and paraphrase misses, with the embedder
    Recall already has: every word of a session read in context (late chunking at word
    granularity, ``MiniLMEmbedder.embed_spans`` with one span per word) and every word of
    the question the same way; a candidate's score is the idf-weighted mean over the
    question's words of the best cosine with any of its words (ColBERT's MaxSim, with a
    model not trained for it). Added to each of Recall's top ``top`` candidates as
    ``xenc_late-interaction``; a lab probe (the word vectors are computed here, not stored).
    ``read_chunks`` False: without the query-time reading of the nearest chunks (most of
    the run's time), for the stored forms alone."""
    import re

    from sqlalchemy import text as sql

    from episodic.config import EmbeddingSettings
    from episodic.providers import make_embedder
    from episodic.providers.types import SpanDocument
    from episodic.store import recall_index
    from episodic.store.db import make_engine
    from episodic.testing.keys import test_vault

    words = re.compile(r"\w+", re.UNICODE)
    embedder = make_embedder(EmbeddingSettings(embedding_threads=2), 384)
    engine = make_engine(url, pool_size=2)
    vault = test_vault()
    sessions: dict[tuple[str, str], tuple[list[str], np.ndarray]] = {}
    # each session's document and its words' character offsets: which stored word vectors
    # fall inside a chunk (a chunk's text is exactly its span of the document)
    places: dict[tuple[str, str], tuple[str, np.ndarray]] = {}
    started = time.monotonic()
    with engine.connect() as conn:
        labels = {
            r["thread_id"]: r["label"]
            for r in (
                vault.open_one(conn, row, "threads")
                for row in conn.exec_driver_sql("SELECT * FROM threads").mappings().all()
            )
        }
        episodes = (
            conn.exec_driver_sql(
                "SELECT dataset, thread_id, end_sequence FROM episodes WHERE status = 'completed'"
            )
            .mappings()
            .all()
        )
        for n, raw in enumerate(episodes):
            messages = vault.open_rows(
                conn,
                raw["dataset"],
                list(
                    conn.execute(
                        sql(
                            "SELECT sequence, content, metadata FROM messages WHERE dataset = :d "
                            "AND thread_id = :t AND sequence <= :e ORDER BY sequence"
                        ),
                        {"d": raw["dataset"], "t": raw["thread_id"], "e": raw["end_sequence"]},
                    )
                    .mappings()
                    .all()
                ),
                "messages",
            )
            document = "\n".join(
                recall_index.indexed_text(m["content"], m["metadata"]) for m in messages
            )
            found = list(words.finditer(document))
            (vectors,) = embedder.embed_spans(
                [SpanDocument(document, tuple((m.start(), m.end()) for m in found))]
            )
            sessions[(raw["dataset"], labels[raw["thread_id"]])] = (
                [m.group().lower() for m in found],
                vectors.astype(np.float16),
            )
            places[(raw["dataset"], labels[raw["thread_id"]])] = (
                document,
                np.array([m.start() for m in found], dtype=np.int64),
            )
            if n % 50 == 0:
                log(
                    f"  word vectors: {n}/{len(episodes)} sessions, {time.monotonic() - started:.0f}s"
                )
    engine.dispose()
    stored = _stored_word_forms(sessions)
    # the control a statement could serve: the same words against the stored chunk vectors
    chunks = candidate_texts(url)
    df: dict[str, dict[str, int]] = {}
    count: dict[str, int] = {}
    for (dataset, _), (ws, _) in sessions.items():
        count[dataset] = count.get(dataset, 0) + 1
        for w in set(ws):
            df.setdefault(dataset, {})[w] = df.get(dataset, {}).get(w, 0) + 1
    asked = {(c.conversation_id, q.question): (c, q) for c in conversations for q in c.questions}
    read: dict[str, np.ndarray] = {}

    def chunk_words(chunk: str) -> np.ndarray:
        if chunk not in read:
            spans = tuple((m.start(), m.end()) for m in words.finditer(chunk))
            read[chunk] = (
                embedder.embed_spans([SpanDocument(chunk, spans)])[0]
                if spans
                else np.zeros((0, 384))
            )
        return read[chunk]

    out = []
    for r in rows:
        if r["kind"] != "own":
            continue
        conv, q = asked[(r["conversation"], r["question"])]
        query = lab_request(conv.dataset, q).ranked_query or q.question
        found = list(words.finditer(query))
        if not found:
            out.append(r)
            continue
        (qv,) = embedder.embed_spans(
            [SpanDocument(query, tuple((m.start(), m.end()) for m in found))]
        )
        n_sessions = count[r["dataset"]]
        weight = np.array(
            [
                math.log((n_sessions + 1) / (df[r["dataset"]].get(m.group().lower(), 0) + 0.5))
                for m in found
            ]
        )
        weight = np.maximum(weight, 0.0)
        sentence = embedder.embed_query(query)
        head = []
        for c in r["candidates"][:top]:
            scores = {}
            near = chunks[(r["dataset"], c["label"])]
            # the session's NEAREST_CHUNKS chunks nearest the question, each read alone:
            # what could be computed at query time without stored word vectors
            picked = np.argsort(-(near["vectors"] @ sentence))[:NEAREST_CHUNKS]
            alone = [chunk_words(near["chunks"][i]) for i in picked] if read_chunks else []
            # the same chunks' words as the session's one read saw them (what a stored row
            # per episode window holds), float and as int8 of the 64-dimension projection
            within = {
                f"li-near{n}": _words_within(
                    places[(r["dataset"], c["label"])],
                    [near["chunks"][i] for i in picked[:n]],
                )
                for n in (1, NEAREST_CHUNKS)
            }
            session_words = sessions[(r["dataset"], c["label"])][1].astype(np.float32)
            near_forms = {}
            for form, mask in within.items():
                near_forms[form] = session_words[mask]
                near_forms[f"{form}-p64"] = _int8(_projected(session_words[mask], 64))
            alone_words = np.concatenate([a for a in alone if len(a)] or [np.zeros((0, 384))])
            if read_chunks:
                # what storing every chunk's own read (each chunk read alone, as the
                # Summariser's separate embedding does) could keep of the nearest two
                near_forms["nearest-chunks-int8"] = _int8(alone_words)
                for dims in (64, 128):
                    near_forms[f"nearest-chunks-p{dims}"] = _int8(_projected(alone_words, dims))
            for name, dv in (
                ("late-interaction", sessions[(r["dataset"], c["label"])][1]),
                *((form, kept[(r["dataset"], c["label"])]) for form, kept in stored.items()),
                *near_forms.items(),
                ("word-chunk", near["vectors"]),
                ("nearest-chunks", alone_words),
            ):
                query_words = qv
                if name.startswith("li-sign"):
                    query_words = qv @ WORD_ROTATION.T
                elif projected := re.search(r"-p(\d+)$", name):
                    query_words = _projected(qv, int(projected.group(1)))
                elif name.startswith("li-p"):
                    query_words = _projected(qv, int(name.split("-")[1][1:]))
                best = (
                    (query_words @ dv.astype(np.float32).T).max(axis=1)
                    if len(dv)
                    else np.zeros(len(qv))
                )
                scores[f"xenc_{name}"] = (
                    float((weight * best).sum() / weight.sum()) if weight.sum() > 0 else 0.0
                )
            head.append({**c, **scores})
        out.append({**r, "candidates": head + r["candidates"][top:]})
    log(f"  chunks found in their session's document: {WITHIN_FOUND}")
    return out


def _words_within(place: tuple[str, np.ndarray], chunks: list[str]) -> np.ndarray:
    """Which of a session's words (by their character offsets in its document) lie inside
    any of ``chunks`` (each found in the document by its text)."""
    document, starts = place
    mask = np.zeros(len(starts), dtype=bool)
    for chunk in chunks:
        at = document.find(chunk)
        WITHIN_FOUND[at >= 0] += 1
        if at >= 0:
            mask |= (starts >= at) & (starts < at + len(chunk))
    return mask


#: How many chunks _words_within found in their document (True) or not (False): logged.
WITHIN_FOUND = {True: 0, False: 0}


#: A fixed random rotation for the sign sketches (SimHash): the signs of a rotated vector
#: keep its angles better than the signs of the model's own coordinates.
WORD_ROTATION = np.linalg.qr(np.random.default_rng(2026).standard_normal((384, 384)))[0].T


def _projected(vectors: np.ndarray, dims: int) -> np.ndarray:
    """``vectors`` through the first ``dims`` rows of WORD_ROTATION (a random projection
    that keeps angles approximately, Johnson-Lindenstrauss), normalised again."""
    out = vectors.astype(np.float32) @ WORD_ROTATION[:dims].T
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def _int8(vectors: np.ndarray) -> np.ndarray:
    """What int8 with one scale per vector keeps of ``vectors``."""
    scale = np.abs(vectors).max(axis=1, keepdims=True) / 127.0
    return np.round(vectors / np.maximum(scale, 1e-12)) * scale


#: Dimensions of the projected forms.
PROJECTIONS = (32, 64, 128)


def _stored_word_forms(
    sessions: dict[tuple[str, str], tuple[list[str], np.ndarray]],
) -> dict[str, dict[tuple[str, str], np.ndarray]]:
    """What storing each session's word vectors could keep, read back as the arrays MaxSim
    uses: int8 with one scale per word (384 B a word), the signs of the rotated vector
    (``li-sign``, 48 B a word; the question's words rotated too and kept in float, an
    asymmetric product), the signs of the model's own coordinates, and each of those over
    the session's distinct words only (one vector per word form, the mean of its
    occurrences); and int8 of a random projection to each of PROJECTIONS dimensions
    (``li-p64-distinct``: dims + 4 bytes a distinct word; 128 also over every word)."""
    forms: dict[str, dict[tuple[str, str], np.ndarray]] = {
        "li-int8": {},
        "li-sign": {},
        "li-sign-raw": {},
        "li-distinct": {},
        "li-sign-distinct": {},
    }
    total = distinct_total = 0
    for key, (ws, vectors) in sessions.items():
        v = vectors.astype(np.float32)
        forms["li-int8"][key] = _int8(v)
        forms["li-sign"][key] = np.sign(v @ WORD_ROTATION.T)
        forms["li-sign-raw"][key] = np.sign(v)
        index: dict[str, list[int]] = {}
        for i, w in enumerate(ws):
            index.setdefault(w, []).append(i)
        mean = np.stack([v[ix].mean(axis=0) for ix in index.values()]) if index else v[:0]
        mean /= np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)
        forms["li-distinct"][key] = mean
        forms["li-sign-distinct"][key] = np.sign(mean @ WORD_ROTATION.T)
        for dims in PROJECTIONS:
            forms.setdefault(f"li-p{dims}-distinct", {})[key] = _int8(_projected(mean, dims))
        forms.setdefault("li-p128-all", {})[key] = _int8(_projected(v, 128))
        total += len(ws)
        distinct_total += len(index)
    log(
        f"  stored word forms: {total / max(len(sessions), 1):.0f} words a session, "
        f"{distinct_total / max(len(sessions), 1):.0f} distinct"
    )
    return forms
