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


def _age(message, field: str) -> str:  # type: ignore[no-untyped-def]
    if not message.HasField(field):
        return "-"
    seconds = getattr(message, field).ToTimedelta().total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.1f}s"


def cmd_status(args: argparse.Namespace) -> int:
    """Prints the pipeline status the Summariser reports."""
    import grpc

    from episodic.v1 import summariser_service_pb2 as pb
    from episodic.v1 import summariser_service_pb2_grpc as pb_grpc

    address = args.address or get_settings().service.address_of("summariser")
    with grpc.insecure_channel(address) as channel:
        try:
            status = pb_grpc.SummariserServiceStub(channel).GetPipelineStatus(
                pb.GetPipelineStatusRequest(
                    dataset=args.dataset or "", skip_provider_checks=args.skip_providers
                ),
                timeout=args.timeout,
            )
        except grpc.RpcError as err:
            print(
                f"episodic status: {address}: {err.code().name}: {err.details()}", file=sys.stderr
            )
            return 1
    scope = f"dataset {args.dataset}" if args.dataset else "all datasets"
    print(f"pipeline status ({scope}) at {status.observed_at.ToDatetime():%Y-%m-%d %H:%M:%S} UTC")
    counts = ", ".join(f"{k} {v}" for k, v in sorted(status.status_counts.items())) or "none"
    semantic = ", ".join(f"{k} {v}" for k, v in sorted(status.semantic_status_counts.items()))
    print(f"  episodes:           {counts}")
    print(f"  semantic:           {semantic or 'none'}")
    print(f"  oldest pending:     {_age(status, 'oldest_pending_age')}")
    print(f"  oldest processing:  {_age(status, 'oldest_processing_age')}")
    print(
        f"  timers:             {status.timers_waiting} waiting, {status.timers_due} overdue "
        f"(most overdue {_age(status, 'oldest_due_timer_age')})"
    )
    print(f"  threads uncaptured: {status.threads_uncaptured}")
    for label, health in (("llm", status.llm), ("embedder", status.embedder)):
        if health.name:
            state = "ok" if health.ok else f"FAILING: {health.error}"
            print(f"  {label + ':':<19} {health.name} {state}")
    if status.recent_errors:
        print("  recent errors:")
        for failure in status.recent_errors:
            print(
                f"    {failure.updated_at.ToDatetime():%m-%d %H:%M} {failure.episode_id} "
                f"[{failure.status}, retry {failure.retry_count}] {failure.error[:100]}"
            )
    return 0


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

    status = sub.add_parser("status", help="show whether the episode pipeline is moving")
    status.add_argument("--dataset", help="one dataset (default: all)")
    status.add_argument("--address", help="summariser host:port (default 127.0.0.1:50053)")
    status.add_argument("--skip-providers", action="store_true", help="do not probe the LLM")
    status.add_argument("--timeout", type=float, default=30.0)
    status.set_defaults(func=cmd_status)

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
