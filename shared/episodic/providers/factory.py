"""Providers built from settings: the one place that knows which class each setting means.

Both factories return objects that satisfy the :class:`~episodic.providers.types.Embedder`
/ :class:`~episodic.providers.types.Summariser` protocols and raise
:class:`~episodic.errors.ProviderError` when the configuration cannot work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from episodic.errors import ProviderError
from episodic.providers._http import RetryPolicy
from episodic.providers.embedding import (
    E5_DIMENSION,
    MINILM_DIMENSION,
    E5Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
    token_access,
)
from episodic.providers.extractive import ExtractiveSummariser
from episodic.providers.openai_chat import OpenAIChatSummariser
from episodic.providers.types import Embedder, Summariser

if TYPE_CHECKING:
    from episodic.config import EmbeddingSettings, LLMSettings

__all__ = ["late_chunks", "make_embedder", "make_summariser"]


def make_embedder(settings: EmbeddingSettings, dimension: int) -> Embedder:
    """Builds the configured embedder for vectors of ``dimension`` (the schema's dimension,
    ``DatabaseSettings.embedding_dimension``). Raises ProviderError when the provider cannot
    produce that dimension."""
    provider = settings.embedding_provider
    if provider == "minilm":
        if dimension != MINILM_DIMENSION:
            raise ProviderError(
                f"the minilm embedder produces {MINILM_DIMENSION}-dimensional vectors but the "
                f"configured embedding dimension is {dimension}; set "
                f"EPISODIC_EMBEDDING_DIMENSION={MINILM_DIMENSION} (before the schema is "
                "created) or use EPISODIC_EMBEDDING_PROVIDER=openai with a model of that "
                "dimension",
                provider="minilm",
            )
        return MiniLMEmbedder(
            threads=settings.embedding_threads,
            batch_size=settings.embedding_batch_size,
            compute=settings.embedding_compute,
        )
    if provider == "e5":
        if dimension != E5_DIMENSION:
            raise ProviderError(
                f"the e5 embedder produces {E5_DIMENSION}-dimensional vectors but the "
                f"configured embedding dimension is {dimension}; set "
                f"EPISODIC_EMBEDDING_DIMENSION={E5_DIMENSION} before the schema is created",
                provider="e5",
            )
        return E5Embedder(batch_size=settings.embedding_batch_size)
    if provider == "hashing":
        return HashingEmbedder(dimension)
    if provider == "openai":
        return OpenAIEmbedder(
            base_url=settings.embedding_base_url,
            model=settings.embedding_model,
            dimension=dimension,
            api_key=settings.embedding_api_key.get_secret_value() or None,
            timeout=settings.embedding_timeout.total_seconds(),
            retry=RetryPolicy(max_retries=settings.embedding_max_retries),
            batch_size=settings.embedding_batch_size,
            send_dimensions=settings.embedding_send_dimensions,
        )
    raise ProviderError(f"unknown embedding provider {provider!r}")


def late_chunks(settings: EmbeddingSettings, embedder: Embedder) -> bool:
    """Whether the chunk index's vectors are pooled by late chunking
    (``EPISODIC_CHUNK_VECTORS=late``): only for an embedder with token access (the
    in-process MiniLM); an HTTP or e5 embedder returns pooled vectors only, so its chunks
    are embedded separately whatever the setting."""
    return settings.chunk_vectors == "late" and token_access(embedder)


def make_summariser(settings: LLMSettings, embedder: Embedder) -> Summariser:
    """Builds the configured summariser. ``embedder`` is used by the extractive one to pick
    key sentences (pass the same embedder the episodes are embedded with)."""
    if settings.llm_provider == "extractive":
        return ExtractiveSummariser(
            embedder,
            max_summary_chars=settings.summary_max_chars,
            max_key_learnings=settings.summary_max_key_learnings,
            sentence_vectors=settings.summary_sentence_vectors,
        )
    if settings.llm_provider == "openai":
        return OpenAIChatSummariser(
            base_url=settings.llm_base_url,
            model=settings.llm_model,
            api_key=settings.llm_api_key.get_secret_value() or None,
            timeout=settings.llm_timeout.total_seconds(),
            retry=RetryPolicy(max_retries=settings.llm_max_retries),
            max_input_chars=settings.llm_max_input_chars,
            temperature=settings.llm_temperature,
            max_key_learnings=settings.summary_max_key_learnings,
        )
    raise ProviderError(f"unknown LLM provider {settings.llm_provider!r}")
