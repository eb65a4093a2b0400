"""The ``episodic`` command. Commands are grouped by audience:

- memory (``thread``, ``add``, ``end``, ``recall``, ``demo``): an agent's data, through
  the running services — :mod:`episodic.cli.memory`;
- procedural memory (``outcome``, ``procedures``): how threads turned out, and what the
  agent learned to do from its tool use — :mod:`episodic.cli.procedures`;
- admin (``episodes``, ``status``, ``keys``): looking after memory — :mod:`episodic.cli.admin`;
- privacy (``erase``, ``datasets``, ``encryption``): erasure with a receipt, retention and
  compaction policy, master keys — :mod:`episodic.cli.privacy`;
- data (``export``, ``replay``): a dataset as JSON lines, and through the current pipeline
  again — :mod:`episodic.cli.data`;
- ``console``: the web console — :mod:`episodic.cli.console`;
- integrations (``mcp``, ``import``): memory as MCP tools, backfill — :mod:`episodic.cli.integrations`;
- operations (``up``, ``migrate``, ``reindex``): running the suite and its database —
  :mod:`episodic.cli.operations` (these need the ``server`` extra);
- ``trace``: an episode's journey from the services' spans — :mod:`episodic.cli.tracing`.

The memory, admin, erase/datasets, export, console and import commands go through the SDK
and work with the core install alone (``mcp`` needs the ``mcp`` extra; ``replay``,
``encryption`` and operations need ``server``).
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from episodic import forking  # noqa: F401  (first: gRPC reads it when imported)

from . import (
    admin,
    console,
    data,
    integrations,
    memory,
    operations,
    privacy,
    procedures,
    tracing,
)
from ._common import CommandGroups, reader_gone

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="episodic",
        description="Episodic memory for AI agents (gRPC services).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    groups = CommandGroups(sub)
    memory.register(groups)
    procedures.register(groups)
    admin.register(groups)
    privacy.register(groups)
    console.register(groups)
    operations.register(groups)
    integrations.register(groups)
    data.register(groups)
    tracing.register(groups)
    parser.epilog = groups.epilog() + "\n\n`episodic COMMAND --help` tells more."
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parses ``argv``. A command that takes free text (``add``) also takes text after its
    options (``episodic add T --role assistant "hi"``): argparse's ``nargs="*"`` positional
    is matched, empty, before the options, so the leftovers are appended to it here."""
    args, extra = parser.parse_known_args(argv)
    field = getattr(args, "trailing_text", None)
    if extra and field and not any(e.startswith("-") for e in extra):
        setattr(args, field, [*getattr(args, field), *extra])
    elif extra:  # the command's own usage, which names the options it does take
        _command_parser(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Any:
    """The (sub)parser of the command ``args`` ran (``thread list``'s, not ``episodic``'s)."""
    while True:
        chosen = next(
            (
                a.choices[getattr(args, a.dest)]
                for a in parser._actions  # argparse keeps its subcommands only here
                if isinstance(a, argparse._SubParsersAction)
                and getattr(args, a.dest, None) in a.choices
            ),
            None,
        )
        if chosen is None:
            return parser
        parser = chosen


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = build_parser()
    args = parse(parser, argv)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # a command outside guarded() whose reader left
        return reader_gone()


if __name__ == "__main__":
    sys.exit(main())
