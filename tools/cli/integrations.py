"""Integrations: episodic for other tools and other data.

- ``episodic mcp``: an MCP server (stdio or streamable HTTP) that gives a model the memory
  tools remember, end_thread, record_outcome, record_event, recall, recall_procedures,
  search_episodes, list_threads and load_thread — :mod:`episodic.mcp` (needs the
  ``mcp`` package);
- ``episodic import FILE``: backfill threads and messages from JSON lines through the
  normal write path, resumable after a crash — :mod:`episodic.ops.backfill`.

Both go through the SDK, so they take the usual connection options and environment
(addresses, ``EPISODIC_API_KEY``, ``EPISODIC_TLS_CA_FILE``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ._common import (
    CommandGroups,
    connect,
    connection_options,
    guarded,
    parse_whole,
)

if TYPE_CHECKING:
    from episodic.ops.backfill import Importer

GROUP = "integrations (MCP, backfill)"
MCP_EXTRA_HINT = "the MCP server needs the MCP SDK: pip install 'episodic[mcp]'"
#: The tools :func:`episodic.mcp.build_server` registers, for the help (which must not
#: import the MCP SDK, an extra); tests/mcp checks the two agree.
MCP_TOOLS = (
    "remember",
    "end_thread",
    "record_outcome",
    "record_event",
    "recall",
    "recall_procedures",
    "search_episodes",
    "list_threads",
    "load_thread",
)


def cmd_mcp(args: argparse.Namespace) -> int:
    try:
        from episodic.mcp import DATASET_ENV, serve
    except ModuleNotFoundError as err:
        missing = (err.name or "").split(".")[0]
        if missing in ("mcp", "mcp_types", "uvicorn", "starlette", "pydantic"):
            print(f"episodic mcp: {missing} is missing: {MCP_EXTRA_HINT}", file=sys.stderr)
            return 2
        raise
    import os

    dataset = args.dataset or os.environ.get(DATASET_ENV) or None
    if dataset is not None:
        from episodic.validation import DATASET_PATTERN

        if not DATASET_PATTERN.fullmatch(dataset):
            print(f"episodic mcp: --dataset {dataset!r} is not a valid dataset", file=sys.stderr)
            return 2
    transport: Literal["stdio", "http"] = (
        "http" if args.transport in ("http", "streamable-http") else "stdio"
    )
    client = connect(args)
    try:
        serve(
            client,
            dataset=dataset,
            transport=transport,
            host=args.host,
            port=args.port,
            path=args.path,
        )
    except KeyboardInterrupt:
        pass
    finally:
        client.close()
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from episodic.ops.backfill import (
        SKIP_REASONS,
        Importer,
        ImportInterrupted,
        ProgressBar,
        ThreadImportError,
        thread_key,
    )

    from .importing import check_file

    # Every check the services make of the data itself, for the dry run and the import
    # alike, before anything is written (episodic.cli.importing).
    if args.file == "-":
        checked = check_file(
            sys.stdin.buffer,
            dataset=args.dataset,
            keep_thread_ids=args.keep_thread_ids,
            batch_size=args.batch_size,
        )
    else:
        with Path(args.file).open("rb") as handle:
            checked = check_file(
                handle,
                dataset=args.dataset,
                keep_thread_ids=args.keep_thread_ids,
                batch_size=args.batch_size,
            )
    if checked.note:
        print(f"episodic import: note: {checked.note}", file=sys.stderr)
    if not checked.ok or checked.plan is None:
        for problem in checked.problems:
            print(f"episodic import: {problem}", file=sys.stderr)
        if checked.more:
            print(f"episodic import: … and {checked.more:,} more problems", file=sys.stderr)
        print(
            f"episodic import: {args.file}: {len(checked.problems) + checked.more:,} "
            "problem(s); nothing was written",
            file=sys.stderr,
        )
        return 2
    plan = checked.plan
    formats = ", ".join(f"{n} {f} line(s)" for f, n in sorted(plan.formats.items()))
    skipped = "".join(f"; skipped {n} {k} record(s)" for k, n in sorted(plan.skipped.items()))
    described = (
        f"{args.file}: {plan.message_count:,} messages in {len(plan.threads):,} threads of "
        f"{len(plan.datasets)} dataset(s) ({formats or 'empty'}{skipped})"
    )
    for warning in plan.warnings:
        print(f"episodic import: warning: {warning}", file=sys.stderr)
    if args.dry_run:
        if args.json:
            print(
                json.dumps(
                    {
                        "threads": len(plan.threads),
                        "messages": plan.message_count,
                        "datasets": plan.datasets,
                        "formats": plan.formats,
                        "skipped": plan.skipped,
                        "warnings": plan.warnings,
                    },
                    indent=2,
                )
            )
        else:
            print(described)
            for t in plan.threads[: args.show]:
                # The thread is found by its key (or keeps the file's id): name it so.
                name = t.thread_id if t.keeps_id else thread_key(t.source_id)
                print(f"  {t.dataset}  {name}  {len(t.messages):>5}  {t.label}")
            if len(plan.threads) > args.show:
                print(f"  … and {len(plan.threads) - args.show:,} more threads")
        return 0

    bar = ProgressBar(plan.message_count)
    if bar.enabled:
        print(described, file=sys.stderr)
    with connect(args) as client:
        importer = Importer(
            client,
            batch_size=args.batch_size,
            end_threads=not args.no_end,
            workers=args.workers,
            progress=bar.update,
        )
        stopped = ""
        code = 0
        try:
            with _stop_on_signals(importer):
                stats = importer.run(plan)
        except ThreadImportError as err:
            stats, stopped, code = err.stats or importer.stats, f"at {err}", 1
        except (ImportInterrupted, KeyboardInterrupt):
            # Interrupted: a batch is either acknowledged (counted) or its keys make the
            # re-run skip it. After one signal no batch was in flight; after a second, one
            # may have been stored without being counted here.
            stats, stopped, code = importer.stats, "interrupted", 130
    bar.close()
    if stopped:
        print(f"episodic import: stopped {stopped}", file=sys.stderr)
        print(f"  {stats.stop_report(plan)}", file=sys.stderr)
        print(
            "  everything acknowledged is stored; run the same command again to resume "
            "(nothing is imported twice)",
            file=sys.stderr,
        )
    else:
        print(stats.summary(), file=sys.stderr)
    for kind, count in sorted(plan.skipped.items()):
        reason = SKIP_REASONS.get(kind, "this import does not know the record type")
        print(f"episodic import: skipped {count:,} {kind} record(s): {reason}", file=sys.stderr)
    if args.json:
        print(
            json.dumps(
                {
                    "complete": not stopped,
                    **({"stopped": stopped.removeprefix("at ")} if stopped else {}),
                    **stats.as_json(),
                    "total_messages": plan.message_count,
                    "total_threads": len(plan.threads),
                    "skipped": plan.skipped,
                },
                indent=2,
            )
        )
    return code


@contextlib.contextmanager
def _stop_on_signals(importer: Importer) -> Iterator[None]:
    """SIGINT or SIGTERM asks the import to stop after the batches in flight (so its report
    is exact); a second one stops it at once (KeyboardInterrupt)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    asked = False

    def handler(signum: int, frame: object) -> None:
        nonlocal asked
        if asked:
            raise KeyboardInterrupt
        asked = True
        importer.stop()
        print(
            f"\nepisodic import: {signal.Signals(signum).name}: stopping after the batches in "
            "flight (again to stop at once)",
            file=sys.stderr,
        )

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _positive(value: str) -> int:
    return parse_whole(value, 1)


def _port(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number") from None
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (0-65535)")
    return number


def register(groups: CommandGroups) -> None:
    """Adds the integration commands (``mcp``, ``import``)."""
    p = groups.add(
        GROUP,
        "mcp",
        "serve the memory to a model over MCP (stdio or streamable HTTP)",
        # Its own copy of the options: "resolve" below edits the shared --json action.
        parents=[connection_options()],
        conflict_handler="resolve",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tools = textwrap.fill(
        f"Runs an MCP server with the tools {', '.join(MCP_TOOLS[:-1])} and {MCP_TOOLS[-1]}.",
        width=88,
    )
    p.description = (
        f"{tools}\n"
        "With stdio (the default) an MCP host starts it, e.g. Claude Desktop's mcpServers:\n"
        '{"episodic": {"command": "episodic", "args": ["mcp", "--dataset", "user_42"]}}.\n'
        "Credentials come from EPISODIC_API_KEY and EPISODIC_TLS_CA_FILE (or the options\n"
        "below). The HTTP transport has no authentication of its own: every caller acts with\n"
        "this server's credentials, so it binds 127.0.0.1 unless --host says otherwise."
    )
    p.set_defaults(func=guarded(cmd_mcp))
    p.add_argument(
        "--dataset",
        help="default dataset of the tools (a call may name another; default: "
        "EPISODIC_MCP_DATASET)",
    )
    p.add_argument(
        "--transport",
        choices=("stdio", "http", "streamable-http"),
        default="stdio",
        help="stdio (default) or streamable HTTP",
    )
    p.add_argument("--host", default="127.0.0.1", help="HTTP: address to bind (127.0.0.1)")
    p.add_argument("--port", type=_port, default=8765, help="HTTP: port (8765; 0 picks a free one)")
    p.add_argument("--path", default="/mcp", help="HTTP: endpoint path (/mcp)")
    # The MCP server prints no tables; hide the shared --json option.
    p.add_argument("--json", action="store_true", help=argparse.SUPPRESS)

    p = groups.add(
        GROUP,
        "import",
        "backfill threads and messages from a JSON lines file (resumable)",
        parents=[connection_options()],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.description = (
        "Imports threads and messages through the services (CreateThread, AddMessages in\n"
        "batches, then EndThread so each thread's episode is queued at once). Formats,\n"
        "detected per line:\n"
        '  simple:   {"dataset", "thread", "label", "role", "content", "ts", "name",\n'
        '             "metadata"} — one message per line, a thread\'s messages in order\n'
        '  threaded: {"conversation_id", "threads": [{"thread_id", "messages": [{"role",\n'
        '             "content", "ts", "name"}]}]} — LoCoMo; conversation_id is the dataset\n'
        '  export:   {"type": "thread"|"message"|"episode", …} from `episodic export`\n'
        "Messages keep their original time (ts / created_at), and so do the episodes made\n"
        "of them. Each thread is found by a key from its source thread id and every message\n"
        "has an idempotency key from its source thread and index: after a crash, run the\n"
        "same command again and it resumes without duplicates. The progress bar (stderr) is\n"
        "drawn on a terminal only; a final line always says what was imported, and what was\n"
        "skipped and why. Ctrl-C or SIGTERM stops after the batches in flight (twice: at\n"
        "once) and, like a server that goes away, prints what was written (exit 130 / 1).\n"
        "Before anything is written (and with --dry-run) every line is checked as Ingest\n"
        "checks it (types, times, NUL and lone surrogates, content, label and metadata\n"
        "limits from this environment's EPISODIC_MAX_* settings, reused idempotency keys);\n"
        "each bad line is named and nothing is written (exit code 2). Only what needs the\n"
        "server is left to it: which datasets the key may write, keys stored by an earlier\n"
        "import, and limits the server was configured with differently."
    )
    p.set_defaults(func=guarded(cmd_import))
    p.add_argument("file", help='JSON lines file ("-": stdin)')
    p.add_argument("--dataset", help="import everything into this dataset (overrides the file)")
    p.add_argument(
        "--batch-size",
        type=_positive,
        default=100,
        help="messages per AddMessages call (100; at most the server's 1000)",
    )
    p.add_argument(
        "--workers",
        type=_positive,
        default=1,
        help="threads imported at once (1: in the order of their first message)",
    )
    p.add_argument(
        "--no-end",
        action="store_true",
        help="do not call EndThread: episodes then come from the other triggers (a newer "
        "thread of the same dataset, 30 min of quiet after the import, the daily backstop)",
    )
    p.add_argument(
        "--keep-thread-ids",
        action="store_true",
        help="export format: keep the exported thread ids (restoring into an empty suite)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="read and check the file as the import does (every bad line named); write nothing",
    )
    p.add_argument("--show", type=int, default=10, help=argparse.SUPPRESS)
