"""The episode's vector and its dataset's language: the summary's embedding in the
dataset's model (:data:`EMBED_ENTITIES`: with its entities), the dataset's language
detected from what the summary read, and the dataset moved to its language's model.

Split out of :mod:`.pipeline` (issue 42) as :class:`EpisodeVector`, a part of
:class:`~.pipeline.Pipeline` (its base class; the methods moved verbatim and read the
pipeline's attributes, declared below); :mod:`.pipeline` re-exports
:func:`embedding_text` and :data:`EMBED_ENTITIES`. :data:`EMBED_ENTITIES` is read here: a
test or a benchmark that changes it sets it on this module.
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import trace
from sqlalchemy import Engine

from episodic import metrics
from episodic.errors import describe_error
from episodic.providers.dataset_embedders import DatasetEmbedders
from episodic.providers.types import SummaryRequest, SummaryResult
from episodic.store import embedding_space, languages
from episodic.store.db import is_database_outage, is_lock_conflict
from episodic.store.vault import Vault

from . import spaces

__all__ = ["EMBED_ENTITIES", "EpisodeVector", "embedding_text"]

#: The pipeline's logger and tracer: the Pipeline's messages and spans keep their names
#: whichever of its modules writes them.
log = logging.getLogger(__name__.rpartition(".")[0] + ".pipeline")
tracer = trace.get_tracer("episodic.summariser")

#: Whether the episode's embedding also reads its entities (the names and things the window
#: mentions), so the summary's vector carries the names the extractive summary may not
#: quote. Measured alone on LoCoMo (docs/concepts/recall.md); a change needs re-embedding.
EMBED_ENTITIES = False


def embedding_text(summary: str, key_learnings: list[str], entities: list[str]) -> str:
    """What an episode's embedding represents: its summary and key learnings (and its
    entities, when :data:`EMBED_ENTITIES` is on)."""
    parts = [summary, *key_learnings]
    if EMBED_ENTITIES and entities:
        parts.append("Names: " + ", ".join(entities))
    return "\n".join(parts)


class EpisodeVector:
    """The episode's vector and its dataset's language, a part of
    :class:`~.pipeline.Pipeline`."""

    # Set by Pipeline.__init__.
    engine: Engine
    vault: Vault
    embedders: DatasetEmbedders
    late_chunks: bool

    def summary_vector(self, result: SummaryResult, model: str | None) -> Any:
        """The episode's vector in ``model`` (its dataset's; None: the store's): the
        summariser's own (pooled from the sentence vectors it chose the summary with, in
        the store's model) when it has one, else the embedding of what it wrote."""
        if model is None and result.vector is not None and not EMBED_ENTITIES:
            return result.vector
        embedder = self.embedders.get(model)
        with (
            tracer.start_as_current_span("embed.summary"),
            metrics.embedding(embedder.name, "summary"),
        ):
            return embedder.embed(
                [embedding_text(result.summary, result.key_learnings, result.entities)]
            )[0]

    def follow_language(self, dataset: str) -> str | None:
        """The dataset's embedding model (None: the store's), after moving it to the one its
        language calls for (spaces.py). A failure is logged and does not fail the episode:
        it is embedded in the dataset's model as it is, and the next episode asks again."""
        try:
            return spaces.follow_language(
                self.engine, self.vault, self.embedders, dataset, late=self.late_chunks
            ).model
        except Exception as err:
            if is_database_outage(err) and not is_lock_conflict(err):
                raise
            log.warning(
                "moving %s to its language's model failed: %s", dataset, describe_error(err)
            )
            with self.engine.connect() as conn:
                return embedding_space.dataset_model(conn, dataset)

    def settle_language(self, dataset: str, request: SummaryRequest) -> None:
        """Detects the dataset's language from what the thread read for the summary says
        (its user's and assistant's messages: system prompts and tool output are mostly
        English whatever the user writes), while nobody has chosen it (one cheap read once
        it is settled). A failure — a lock lost to another transaction included — is logged
        and does not fail the episode: it is stemmed as the dataset is, and the next
        episode asks again. Only the database going away stops the pass."""
        texts = [m.content for m in request.rows if m.role in languages.DETECTED_ROLES]
        try:
            with (
                tracer.start_as_current_span("language.detect"),
                self.engine.begin() as conn,
            ):
                languages.settle_detected_language(conn, self.vault, dataset, texts)
        except Exception as err:
            if is_database_outage(err) and not is_lock_conflict(err):
                raise
            log.warning("language detection for %s failed: %s", dataset, describe_error(err))
