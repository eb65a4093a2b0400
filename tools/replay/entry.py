"""The replay from end to end: :func:`replay` reads the export, makes the scratch database,
runs the steps of :mod:`episodic.ops.replay` on it and returns the report, with the
settings it ran with. ``episodic replay`` (:mod:`episodic.cli.data`) calls it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from episodic.config import Settings
from episodic.providers.factory import make_embedder
from episodic.providers.types import Embedder
from episodic.store.db import make_engine

from .reading import ExportReader, parse_time
from .report import ReplayReport
from .run import NEW_DATASET, ReplayRun
from .scratch import scratch_database

CLOCKS = ("received", "created")


def _settings_summary(settings: Settings, embedder: Embedder, dataset_model: str) -> dict[str, Any]:
    """The settings the replay ran with; ``dataset_model``: the model that embedded the
    replayed dataset (its language's, which may not be the store's ``embedder``)."""

    def seconds(value: timedelta) -> str:
        return f"{value.total_seconds():g}s"

    return {
        "summariser": settings.llm.llm_provider,
        "embedder": embedder.name,
        "dataset_embedder": dataset_model,
        "auto_episode_interval": seconds(settings.scheduler.auto_episode_interval),
        "sibling_pull_forward": seconds(settings.scheduler.sibling_pull_forward),
        "max_retries": settings.recovery.max_retries,
        "recall": {
            "similarity_weight": settings.recall.similarity_weight,
            "recency_weight": settings.recall.recency_weight,
            "ranking_fusion": settings.recall.ranking_fusion,
            "recency_span": settings.recall.recency_span,
        },
    }


def replay(
    lines: Iterable[str],
    *,
    settings: Settings,
    queries: list[str] | None = None,
    k: int = 5,
    clock: str = "received",
    admin_url: str | None = None,
    report: Callable[[str], None] = lambda _: None,
) -> ReplayReport:
    """Replays the export ``lines`` (see the module docstring) and reports the differences.
    ``report`` receives progress lines."""
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {', '.join(CLOCKS)}")
    if k < 1:
        raise ValueError("k must be at least 1")
    queries = [q for q in (queries or []) if q.strip()]
    reader = ExportReader(lines)
    dimension = settings.database.embedding_dimension
    embedder = make_embedder(settings.embedding, dimension, bulk=True)
    with scratch_database(admin_url, dimension) as url:
        engine = make_engine(url, pool_size=2, application_name="episodic-replay")
        try:
            run = ReplayRun(
                engine, settings, embedder, with_recall=bool(queries), clock=clock, report=report
            )
            for bundle in reader.bundles():
                run.stage(bundle)
                if len(run.threads) % 100 == 0:
                    report(f"staged {len(run.threads)} thread(s)")
            exported_at = parse_time(reader.header.get("exported_at"))
            if exported_at is not None and (run.latest is None or exported_at > run.latest):
                run.latest = exported_at
            report(f"staged {len(run.threads)} thread(s); replaying them in time order")
            run.simulate()
            report("summarising the new episodes")
            run.summarise()
            report("comparing")
            threads, found = run.compare(queries, k)
            with engine.connect() as conn:
                dataset_model = run.embedder_of(conn, NEW_DATASET).name
        finally:
            engine.dispose()
    return ReplayReport(
        dataset=str(reader.header.get("dataset") or ""),
        exported_at=reader.header.get("exported_at"),
        export_complete=reader.complete,
        clock=clock,
        settings=_settings_summary(settings, embedder, dataset_model),
        threads=threads,
        queries=found,
        old_episodes=sum(len(t.old_windows) for t in threads),
        new_episodes=sum(len(t.new_windows) for t in threads),
        failed_episodes=sum(1 for t in threads for w in t.new_windows if w.status == "failed"),
    )
