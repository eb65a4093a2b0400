"""Runs the Recall service: ``python -m episodic.services.recall``."""

from __future__ import annotations

import logging

from sqlalchemy import Engine

from episodic import temporal
from episodic.config import RecallSettings, Settings
from episodic.providers import RetryPolicy, make_embedder
from episodic.providers.factory import make_dataset_embedders
from episodic.providers.rerank import HttpReranker
from episodic.serving.server import Service, serve
from episodic.store import embedding_space
from episodic.store.db import check_embedding_dimension
from episodic.store.vault import make_vault

from .servicer import RecallServicer, register

log = logging.getLogger(__name__)


def build(settings: Settings, engine: Engine) -> Service:
    embedder = make_embedder(settings.embedding, settings.database.embedding_dimension)
    temporal.warm_up()  # dateparser's language data, before the first query
    # Query vectors must be comparable with the stored ones: refuse to start otherwise.
    check_embedding_dimension(engine, embedder.dimension)
    embedding_space.check_start(
        engine, embedder.name, embedder.dimension, who="Recall", record=False
    )
    embedder.check()  # loads the model now, not on the first user's query
    log.info("recall embedder: %s", embedder.name)
    reranker = None
    if settings.recall.rerank_base_url:
        reranker = HttpReranker(
            base_url=settings.recall.rerank_base_url,
            model=settings.recall.rerank_model,
            api_key=settings.recall.rerank_api_key.get_secret_value() or None,
            timeout=settings.recall.rerank_timeout.total_seconds(),
            retry=RetryPolicy(max_retries=1),
        )
        log.info("recall reranker: %s at %s", reranker.name, settings.recall.rerank_base_url)
    # Datasets in other languages than English may be in the multilingual model: it loads
    # on the first query of such a dataset.
    multilingual = make_dataset_embedders(settings.embedding, embedder).multilingual
    if multilingual is not None:
        log.info("recall embedder of datasets in other languages: %s", multilingual.name)
    servicer = RecallServicer(
        engine,
        settings.recall,
        embedder,
        make_vault(settings.privacy),
        reranker,
        multilingual=multilingual,
    )
    return Service(register=lambda server: register(server, servicer), on_shutdown=[servicer.close])


def ef_search(recall: RecallSettings) -> int:
    """The HNSW search list of Recall's sessions: a tenth longer than the nearest parts'
    candidates (pgvector's floor is 40). The walks are filtered by dataset (other
    datasets share the partition's index) and iterate until they have as many as asked;
    with a list exactly as long, one row filtered out cost a second pass: at 100k
    episodes on random vectors 300 took 33 ms (summaries) and 37 (chunks) where 330
    took 16 and 19 (docs/benchmarks-history.md "the lexical pool in the service")."""
    nearest = recall.recall_approximate_nearest or recall.recall_approximate_candidates
    # pgvector takes 40 to 1000 (outside that, the setting falls back to 40)
    return min(1000, max(40, nearest + max(10, nearest // 10)))


def engine_options(settings: Settings) -> dict[str, object]:
    """Recall only reads, one statement per call: autocommit saves the BEGIN and ROLLBACK
    round trips, and no pre-ping saves another (a connection lost to a database restart
    fails that call with UNAVAILABLE, which the SDK retries, and is replaced). Every
    statement is bounded by the statement timeout ceiling. The approximate path's HNSW
    scans walk on until they have the candidates asked for, filtered by dataset
    (iterative scan), with a search list as long as that: set per session, since an
    autocommit statement has no transaction for SET LOCAL."""
    ceiling_ms = int(settings.recall.recall_statement_timeout.total_seconds() * 1000)
    return {
        "isolation_level": "AUTOCOMMIT",
        "pool_pre_ping": False,
        "connect_args": {
            "options": f"-c statement_timeout={ceiling_ms} "
            f"-c hnsw.iterative_scan=relaxed_order -c hnsw.ef_search={ef_search(settings.recall)}"
        },
    }


if __name__ == "__main__":
    serve("recall", build, engine_options=engine_options, reads_only=True)
