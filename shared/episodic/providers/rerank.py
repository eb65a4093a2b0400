"""A cross-encoder reranker behind an HTTP ``POST {base_url}/rerank`` endpoint.

The wire format is the one Jina AI's and Cohere's rerank APIs share, and that the common
self-hosted servers speak (vLLM's ``/v1/rerank``, Hugging Face text-embeddings-inference,
Infinity, llama.cpp server with a reranking model)::

    request  {"model": "...", "query": "...", "documents": ["...", ...], "top_n": N}
    response {"results": [{"index": 0, "relevance_score": 0.93}, ...]}

Recall sends the top candidates' texts (summary and key learnings) and reorders them by the
scores (:func:`episodic.services.recall.domain.rerank`).
"""

from __future__ import annotations

import math
from typing import Any

import httpx

from episodic.errors import ProviderError
from episodic.providers._http import RetryPolicy, make_client, post_json, snippet

__all__ = ["HttpReranker"]


class HttpReranker:
    """Scores documents against a query with a reranking model (see the module docstring)."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self.model = model
        self.name = f"rerank:{model}"
        self.url = base_url.rstrip("/") + "/rerank"
        self.retry = retry or RetryPolicy()
        self._client = client or make_client(timeout, api_key)

    def close(self) -> None:
        """Closes the HTTP connection pool."""
        self._client.close()

    def scores(self, query: str, documents: list[str]) -> list[float]:
        """One score per document, in the documents' order (higher: more relevant)."""
        if not documents:
            return []
        answer = post_json(
            self._client,
            self.url,
            {"model": self.model, "query": query, "documents": documents, "top_n": len(documents)},
            policy=self.retry,
            provider="rerank",
        )
        return _parse(answer, len(documents))


def _parse(answer: Any, expected: int) -> list[float]:
    results = answer.get("results") if isinstance(answer, dict) else None
    if not isinstance(results, list):
        raise ProviderError(
            f"rerank: the answer has no results list: {snippet(str(answer))}", provider="rerank"
        )
    out: list[float | None] = [None] * expected
    for item in results:
        index = item.get("index") if isinstance(item, dict) else None
        score = item.get("relevance_score") if isinstance(item, dict) else None
        if (
            not isinstance(index, int)
            or not 0 <= index < expected
            or not isinstance(score, int | float)
            or not math.isfinite(score)
        ):
            raise ProviderError(
                f"rerank: a result is not {{index < {expected}, relevance_score}}: "
                f"{snippet(str(item))}",
                provider="rerank",
            )
        out[index] = float(score)
    if any(s is None for s in out):
        raise ProviderError(
            f"rerank: {sum(s is None for s in out)} of {expected} documents got no score",
            provider="rerank",
        )
    return [float(s) for s in out if s is not None]
