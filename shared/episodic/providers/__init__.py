"""Embedding and summarisation providers (pure library code: no gRPC, no database).

Build them from settings with :func:`make_embedder` and :func:`make_summariser`; both
return objects that satisfy the :class:`Embedder` / :class:`Summariser` protocols and raise
:class:`~episodic.errors.ProviderError` when a provider fails or answers nonsense.
"""

from episodic.providers._http import RetryPolicy
from episodic.providers.embedding import (
    MINILM_DIMENSION,
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
    make_embedder,
    normalise_rows,
)
from episodic.providers.entities import normalise_entities, normalise_entity
from episodic.providers.extractive import ExtractiveSummariser
from episodic.providers.llm import (
    ACTORS,
    EVENT_TYPES,
    ChatMessage,
    OpenAIChatSummariser,
    Summariser,
    SummaryRequest,
    SummaryResult,
    make_summariser,
)

__all__ = [
    "ACTORS",
    "EVENT_TYPES",
    "MINILM_DIMENSION",
    "ChatMessage",
    "Embedder",
    "ExtractiveSummariser",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "OpenAIChatSummariser",
    "OpenAIEmbedder",
    "RetryPolicy",
    "Summariser",
    "SummaryRequest",
    "SummaryResult",
    "make_embedder",
    "make_summariser",
    "normalise_entities",
    "normalise_entity",
    "normalise_rows",
]
