"""Procedural memory: ``episodic outcome`` (how a thread turned out) and ``episodic
procedures list|show|recall|delete`` (what was learned), through the SDK like the memory
commands; ``episodic procedures relearn`` extracts again from the stored conversations
(after the extractor or the embedder changed), against the database like ``reindex``, so
it needs the ``server`` extra."""

from __future__ import annotations

import argparse
from typing import Any

from ._common import (
    CommandGroups,
    add_action,
    connect,
    connection_options,
    guarded,
    parse_limit,
    parse_weight,
    print_json,
    table,
    when,
)

GROUP = "procedural memory (outcomes, procedures)"


def _steps(procedure: Any) -> str:
    """One line per step: ``1. tool (writes) — purpose [arg ← source, …]``."""
    lines = []
    for i, step in enumerate(procedure.steps, start=1):
        sources = ", ".join(f"{name} ← {source}" for name, source in step.arguments.items())
        kind = " (writes)" if step.writes else ""
        lines.append(
            f"  {i}. {step.tool}{kind} — {step.purpose}" + (f" [{sources}]" if sources else "")
        )
    return "\n".join(lines)


def _show(procedure: Any, relevance: float | None = None) -> None:
    fit = f", fit {relevance:.3f}" if relevance is not None else ""
    print(
        f"{procedure.procedure_id}  ({procedure.success_count} succeeded, "
        f"{procedure.failure_count} failed, {procedure.partial_count} partly{fit})"
    )
    print(f"  when: {procedure.goal}")
    for example in procedure.example_goals:
        print(f"    also: {example}")
    print(_steps(procedure))


def cmd_outcome(args: argparse.Namespace) -> int:
    with connect(args) as client:
        result = client.record_outcome(
            args.thread_id,
            args.outcome,
            score=args.score,
            note=args.note or "",
            episode_id=args.episode,
        )
    if args.json:
        print_json(result)
    else:
        print(
            f"{result.outcome} recorded for thread {result.thread_id}"
            + (f" (episode {result.episode_id})" if result.episode_id else "")
            + ("" if result.changed else " (unchanged: it was already recorded)")
        )
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    with connect(args) as client:
        page = client.list_procedures(args.dataset, page_size=args.limit)
    if args.json:
        print_json(list(page))
        return 0
    rows = [
        [
            p.procedure_id[:8],
            p.success_count,
            p.failure_count,
            " → ".join(p.write_actions) or "(reads only)",
            when(p.updated_at),
            p.goal,
        ]
        for p in page
    ]
    print(table(rows, ("ID", "OK", "FAILED", "ACTIONS", "UPDATED", "WHEN TO USE")))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    with connect(args) as client:
        procedure = client.get_procedure(args.dataset, args.procedure_id)
    if args.json:
        print_json(procedure)
        return 0
    _show(procedure)
    print("  learned from:")
    for thread_id, episode_id, outcome in procedure.sources:
        print(f"    {outcome:<8} thread {thread_id} (episode {episode_id})")
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    from episodic.render import render_procedures

    with connect(args) as client:
        found = client.recall_procedures(args.dataset, args.task, limit=args.limit)
    if args.json:
        print_json(found)
        return 0
    if args.render:
        print(render_procedures(found))
        return 0
    if not found:
        print(f"no procedure of {args.dataset} fits (none learned yet, or none worked)")
    for scored in found:
        _show(scored.procedure, scored.relevance)
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    with connect(args) as client:
        forgotten = client.delete_procedure(args.dataset, args.procedure_id)
    print(f"deleted; {forgotten} stretch(es) of conversation it was learned from are forgotten")
    return 0


def cmd_relearn(args: argparse.Namespace) -> int:
    from episodic.config import get_settings
    from episodic.providers import make_embedder
    from episodic.providers.factory import make_dataset_embedders, make_procedure_writer
    from episodic.store import embedding_space
    from episodic.store.db import check_embedding_dimension, make_engine
    from episodic.store.procedures import relearn
    from episodic.store.vault import make_vault

    from .operations import _database_url as database_url

    url = database_url(args)
    if not url:
        return 2
    settings = get_settings()
    engine = make_engine(url, pool_size=2, application_name="episodic-relearn")
    try:
        embedder = make_embedder(settings.embedding, settings.database.embedding_dimension)
        check_embedding_dimension(engine, embedder.dimension)
        embedding_space.check_writer(engine, embedder.name, embedder.dimension, who="relearn")
        vault = make_vault(settings.privacy, data_dir=settings.database.data_dir)
        done = relearn(
            engine,
            vault,
            # Each dataset's goals in its own model, as the Summariser embeds them.
            make_dataset_embedders(settings.embedding, embedder),
            dataset=args.dataset,
            writer=make_procedure_writer(settings.llm),
        )
    finally:
        engine.dispose()
    print(
        f"relearned {done.candidates} stretch(es) of tool use from {done.episodes} episode(s) "
        f"in {done.datasets} dataset(s): {done.procedures} procedure(s)"
    )
    return 0


def register(groups: CommandGroups) -> None:
    """Adds the procedural memory commands."""
    common = connection_options()

    p = groups.add(
        GROUP, "outcome", "say how a thread turned out (procedures learn from it)", parents=[common]
    )
    p.set_defaults(func=guarded(cmd_outcome))
    p.add_argument("thread_id")
    p.add_argument("outcome", choices=("success", "failure", "partial"))
    p.add_argument("--score", type=parse_weight, help="a reward or rating in [0, 1]")
    p.add_argument("--note", help="why (at most 2000 characters)")
    p.add_argument("--episode", help="only this episode's stretch of the thread")

    procedures = groups.add(GROUP, "procedures", "what the agent learned to do, from its tool use")
    sub = procedures.add_subparsers(dest="procedures_command", required=True, metavar="ACTION")
    p = add_action(sub, "list", cmd_list, "a dataset's procedures, most successes first", common)
    p.add_argument("dataset")
    p.add_argument("--limit", type=parse_limit, default=20)
    p = add_action(sub, "show", cmd_show, "one procedure, with where it was learned", common)
    p.add_argument("dataset")
    p.add_argument("procedure_id")
    p = add_action(
        sub, "recall", cmd_recall, "how did we do this before? the procedures that fit", common
    )
    p.add_argument("dataset")
    p.add_argument("task", nargs="?", help="what the agent is about to do")
    p.add_argument("-n", "--limit", type=parse_limit, help="how many (server default 3)")
    p.add_argument("--render", action="store_true", help="print them as prompt text")
    p = add_action(
        sub, "delete", cmd_delete, "delete a procedure and forget what taught it", common
    )
    p.add_argument("dataset")
    p.add_argument("procedure_id")
    relearn = sub.add_parser(
        "relearn",
        help="extract procedures again from the stored conversations",
        description="Extracts again what every completed episode's tool use teaches and "
        "recomputes the procedures (after the extractor or the embedding model changed). "
        "Runs against the database, like reindex.",
    )
    relearn.add_argument("--dataset", help="only this dataset (default: every one)")
    relearn.add_argument("--database-url", help="defaults to EPISODIC_DATABASE_URL")
    relearn.set_defaults(func=guarded(cmd_relearn))
