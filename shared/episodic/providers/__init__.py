"""Embedding and summarisation providers (pure library code: no gRPC, no database).

The modules import one way: :mod:`~episodic.providers.types` (shared types and protocols)
← :mod:`~episodic.providers.statements`, :mod:`~episodic.providers.entities` ←
:mod:`~episodic.providers.embedding`, :mod:`~episodic.providers.extractive`,
:mod:`~episodic.providers.openai_chat` ← :mod:`~episodic.providers.factory`.

Build them from settings with :func:`make_embedder` and :func:`make_summariser`; both
return objects that satisfy the :class:`Embedder` / :class:`Summariser` protocols and raise
:class:`~episodic.errors.ProviderError` when a provider fails or answers nonsense.
"""

from episodic.providers._http import RetryPolicy
from episodic.providers.embedding import (
    E5_DIMENSION,
    MINILM_DIMENSION,
    CachedEmbedder,
    E5Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
    normalise_rows,
)
from episodic.providers.entities import normalise_entities, normalise_entity
from episodic.providers.extractive import ExtractiveSummariser
from episodic.providers.factory import make_embedder, make_summariser
from episodic.providers.openai_chat import OpenAIChatSummariser
from episodic.providers.types import (
    ACTORS,
    EVENT_TYPES,
    ChatMessage,
    Embedder,
    SpanDocument,
    Summariser,
    SummaryRequest,
    SummaryResult,
)

__all__ = [
    "ACTORS",
    "E5_DIMENSION",
    "EVENT_TYPES",
    "MINILM_DIMENSION",
    "CachedEmbedder",
    "ChatMessage",
    "E5Embedder",
    "Embedder",
    "ExtractiveSummariser",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "OpenAIChatSummariser",
    "OpenAIEmbedder",
    "RetryPolicy",
    "SpanDocument",
    "Summariser",
    "SummaryRequest",
    "SummaryResult",
    "make_embedder",
    "make_summariser",
    "normalise_entities",
    "normalise_entity",
    "normalise_rows",
]
