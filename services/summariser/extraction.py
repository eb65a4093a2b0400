"""Semantic and procedural extraction after the episodes: facts from a completed episode's
window (when an extractor is configured) and the procedure its tool calls teach, one claim
at a time, yielding to due episodes.

Split out of :mod:`.pipeline` (issue 42) as :class:`SemanticExtraction`, a part of
:class:`~.pipeline.Pipeline` (its base class; the methods moved verbatim and read the
pipeline's attributes, declared below): extraction runs after the episodes and changes
apart from summarising them.
"""

from __future__ import annotations

import logging
from datetime import datetime

import numpy as np
from opentelemetry import trace
from sqlalchemy import Connection, Engine, RowMapping

from episodic import metrics, procedural
from episodic.errors import ProviderError, describe_error
from episodic.procedural import ProcedureWriter
from episodic.providers.dataset_embedders import DatasetEmbedders
from episodic.store import embedding_space, episodes
from episodic.store import procedures as procedure_store
from episodic.store.db import is_database_outage
from episodic.store.vault import Vault

from .reading import load_window
from .semantic import SemanticExtractor

__all__ = ["SemanticExtraction"]

#: The pipeline's logger and tracer: the Pipeline's messages and spans keep their names
#: whichever of its modules writes them.
log = logging.getLogger(__name__.rpartition(".")[0] + ".pipeline")
tracer = trace.get_tracer("episodic.summariser")


class SemanticExtraction:
    """The extraction part of :class:`~.pipeline.Pipeline`: :meth:`run_semantic` over
    completed episodes, each by :meth:`process_semantic`."""

    # Set by Pipeline.__init__.
    engine: Engine
    vault: Vault
    worker: str
    extractor: SemanticExtractor | None
    procedure_writer: ProcedureWriter | None
    embedders: DatasetEmbedders

    def run_semantic(
        self, limit: int, *, may_yield: bool = True, now: datetime | None = None
    ) -> int:
        """Extracts from up to ``limit`` completed episodes, one claim at a time; after the
        first it stops when an episode is due (a giant thread's hundreds of windows must
        not hold back another dataset's time to memory), and the next pass goes on.
        Returns how many it extracted from."""
        done = 0
        while done < limit:
            if done and may_yield:
                with self.engine.connect() as conn:
                    if episodes.any_due(conn, now):
                        break
            with self.engine.begin() as conn:
                claimed = episodes.claim_semantic(conn, self.worker, 1)
            if not claimed:
                break
            self.process_semantic(claimed[0])
            done += 1
        return done

    def process_semantic(self, episode: RowMapping) -> str | None:
        """Semantic and procedural extraction of a completed episode's window: facts (when
        an extractor is configured) and, when the window called tools, the procedure
        candidate it teaches (offline, always), stored with the claim held."""
        with tracer.start_as_current_span(
            "semantic extraction", attributes={"episodic.episode_id": str(episode["episode_id"])}
        ):
            try:
                with self.engine.connect() as conn:
                    learned = self.learn_procedure(conn, episode)
                    if self.extractor is not None:
                        window = load_window(conn, self.vault, episode)
                    key = self.vault.for_read(conn, episode["dataset"])
                with self.engine.begin() as conn:
                    # The claim first: a worker whose claim was reclaimed while it was
                    # away (frozen, cut off) writes no facts.
                    if not episodes.hold_semantic_claim(
                        conn, episode["episode_id"], self.worker, dataset=episode["dataset"]
                    ):
                        log.info(
                            "extraction of %s: the claim was taken back meanwhile; nothing written",
                            episode["episode_id"],
                        )
                        return None
                    stored = 0
                    if self.extractor is not None:
                        stored += self.extractor.extract(conn, episode, window, key)
                    if learned is not None:
                        procedure_store.store_candidate(conn, key, episode, *learned)
                        procedure_store.rebuild(conn, key, episode["dataset"])
                        stored += 1
                    status = "completed" if stored else "skipped"
                    episodes.finish_semantic(
                        conn, episode["episode_id"], self.worker, status, dataset=episode["dataset"]
                    )
                metrics.extraction_finished(status)
                return status
            except Exception as err:
                if is_database_outage(err):
                    raise  # not the extraction's fault: handed back, not failed
                log.warning(
                    "semantic extraction of %s failed: %s",
                    episode["episode_id"],
                    episodes.error_text(err),
                )
                with self.engine.begin() as conn:
                    episodes.finish_semantic(
                        conn,
                        episode["episode_id"],
                        self.worker,
                        "failed",
                        episodes.error_text(err),
                        dataset=episode["dataset"],
                    )
                metrics.extraction_finished("failed")
                return "failed"

    def learn_procedure(
        self, conn: Connection, episode: RowMapping
    ) -> tuple[procedural.Candidate, np.ndarray] | None:
        """What the episode's stretch of tool use teaches (episodic.procedural), with its
        goal's embedding; None when the window called no tool."""
        if not procedure_store.has_tool_calls(conn, episode):
            return None
        turns = procedure_store.load_turns(conn, self.vault, episode)
        candidate = procedural.extract(
            turns, episode_id=str(episode["episode_id"]), thread_id=str(episode["thread_id"])
        )
        if candidate is None:
            return None
        if self.procedure_writer is not None:
            try:
                candidate = self.procedure_writer.write(turns, candidate)
            except ProviderError as err:  # the offline words stand; nothing is lost
                log.warning(
                    "%s could not word the procedure of %s; kept the extractor's: %s",
                    self.procedure_writer.name,
                    episode["episode_id"],
                    describe_error(err),
                )
        model = embedding_space.dataset_model(conn, episode["dataset"])
        return candidate, self.embedders.get(model).embed_query(candidate.goal)
