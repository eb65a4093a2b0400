"""The `episodic` command: run the suite (`up`), migrate, and talk to running services.

`episodic up` is the main job: it starts the embedded PostgreSQL (unless
EPISODIC_DATABASE_URL is set), migrates, launches the four services as separate
processes, prints where each listens, and stops everything cleanly on Ctrl-C/SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import sys

from episodic.config import get_settings


def cmd_migrate(args: argparse.Namespace) -> int:
    from episodic.store import migrate

    settings = get_settings()
    url = args.database_url or settings.database.database_url
    if not url:
        print(
            "episodic migrate: set EPISODIC_DATABASE_URL (or pass --database-url); "
            "`episodic up` migrates the embedded database by itself.",
            file=sys.stderr,
        )
        return 2
    migrate.upgrade(url, settings.database.embedding_dimension)
    print("database schema is up to date")
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    from episodic.supervisor import Supervisor

    return Supervisor(get_settings(), services=args.services).run()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="episodic", description="Episodic memory for AI agents (gRPC services)."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    up = sub.add_parser("up", help="start the database and every service; Ctrl-C stops all")
    up.add_argument(
        "--services",
        nargs="+",
        default=["scheduler", "ingest", "summariser", "recall"],
        choices=["scheduler", "ingest", "summariser", "recall"],
        help="which services to run (default: all four)",
    )
    up.set_defaults(func=cmd_up)

    mig = sub.add_parser("migrate", help="create or upgrade the schema (idempotent)")
    mig.add_argument("--database-url", help="defaults to EPISODIC_DATABASE_URL")
    mig.set_defaults(func=cmd_migrate)

    try:
        from episodic import cli_commands
    except ImportError:  # the client commands are optional at this layer
        cli_commands = None  # type: ignore[assignment]
    if cli_commands is not None:
        cli_commands.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
