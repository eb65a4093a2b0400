"""What every command shares: connection options, one client per command, readable errors
and plain-text output (tables, times, JSON)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shutil
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from episodic.endpoints import SERVICES

if TYPE_CHECKING:
    from episodic.sdk.client import EpisodicClient

Handler = Callable[[argparse.Namespace], int]

SERVER_EXTRA_HINT = (
    "this command runs server code; install it with: pip install 'episodic[server]' "
    "(or 'episodic[embedded]' for the embedded PostgreSQL)"
)


class CommandGroups:
    """Subcommands registered by audience; the top-level help lists them per group (argparse
    itself has one flat list of subcommands)."""

    def __init__(self, sub: Any) -> None:
        self.sub = sub
        self.listing: dict[str, list[tuple[str, str]]] = {}

    def add(self, group: str, name: str, help: str, **kwargs: Any) -> argparse.ArgumentParser:
        """A new subcommand ``name`` of ``group``; ``help`` is its one-line description."""
        self.listing.setdefault(group, []).append((name, help))
        parser: argparse.ArgumentParser = self.sub.add_parser(name, description=help, **kwargs)
        return parser

    def epilog(self) -> str:
        lines: list[str] = []
        for group, commands in self.listing.items():
            lines.append(f"{group}:")
            lines += [f"  {name:<10} {help}" for name, help in commands]
            lines.append("")
        return "\n".join(lines).rstrip()


def add_action(
    parent: Any, name: str, fn: Handler, help: str, common: argparse.ArgumentParser
) -> argparse.ArgumentParser:
    """An action of a command with subactions (``episodes list``, ``thread create``), with
    the connection options and readable errors."""
    parser: argparse.ArgumentParser = parent.add_parser(
        name, parents=[common], help=help, description=help
    )
    parser.set_defaults(func=guarded(fn))
    return parser


def connection_options() -> argparse.ArgumentParser:
    """The options of every command that talks to the services (a parent parser)."""
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("connection")
    for service in SERVICES:
        group.add_argument(
            f"--{service}",
            metavar="HOST:PORT",
            help=f"{service} address (default: EPISODIC_{service.upper()}_ADDRESS or "
            f"127.0.0.1:EPISODIC_{service.upper()}_PORT)",
        )
    group.add_argument(
        "--timeout",
        type=parse_seconds,
        default=10.0,
        help="deadline of each call in seconds (10)",
    )
    group.add_argument("--api-key", metavar="KEY", help="API key (default: EPISODIC_API_KEY)")
    group.add_argument(
        "--ca-file",
        metavar="PEM",
        help="CA bundle to verify the services' TLS certificates with; turns TLS on "
        "(default: EPISODIC_TLS_CA_FILE)",
    )
    group.add_argument(
        "--tls", action="store_true", help="use TLS with the system's CA certificates"
    )
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return common


def connect(args: argparse.Namespace) -> EpisodicClient:
    """The SDK client for one command, from its connection options."""
    from episodic.sdk.client import EpisodicClient

    return EpisodicClient(
        ingest=args.ingest,
        recall=args.recall,
        scheduler=args.scheduler,
        summariser=args.summariser,
        timeout=args.timeout,
        api_key=args.api_key,
        tls=True if args.tls else None,
        ca_file=args.ca_file,
    )


def database_url(args: argparse.Namespace) -> str | None:
    """The database a command that works on it directly (keys, encryption, migrate) uses:
    --database-url, else EPISODIC_DATABASE_URL, else the embedded PostgreSQL that a running
    ``episodic up`` serves from EPISODIC_DATA_DIR (its socket directory and port read from
    ``postmaster.pid``), so that after ``make up`` nothing needs setting. None: none of them."""
    from episodic.config import get_settings

    settings = get_settings().database
    url = getattr(args, "database_url", None) or settings.database_url
    if url:
        return str(url)
    pid_file = settings.data_dir.expanduser().resolve() / "pgdata" / "postmaster.pid"
    try:
        lines = pid_file.read_text().splitlines()
        pid, port, sockets = int(lines[0]), int(lines[3]), lines[4].strip()
    except (OSError, ValueError, IndexError):  # not running, not ours to read, or starting
        return None
    import psutil

    if not sockets or not psutil.pid_exists(pid):  # left behind by a server that died
        return None
    return f"postgresql://postgres@/postgres?host={sockets}&port={port}"


NO_DATABASE = (
    "set EPISODIC_DATABASE_URL (or pass --database-url), or run `episodic up` here: the "
    "embedded database it serves (from EPISODIC_DATA_DIR) is found by itself"
)


def guarded(fn: Handler) -> Handler:
    """Errors become one readable line on stderr: 1 for a service's or the database's
    answer, 2 for bad local input or a missing server extra."""

    def run(args: argparse.Namespace) -> int:
        from episodic.errors import EpisodicError
        from episodic.sdk.client import EpisodicRpcError

        try:
            return fn(args)
        except EpisodicRpcError as err:
            where = f" ({err.field})" if err.field else ""
            print(
                f"episodic {args.command}: {err.code.name}{where}: {err.message}", file=sys.stderr
            )
            if err.code.name == "UNAVAILABLE":
                print("  is `episodic up` running? see --help for addresses", file=sys.stderr)
            if err.code.name == "UNAUTHENTICATED":
                print("  pass --api-key or set EPISODIC_API_KEY", file=sys.stderr)
            return 1
        except ModuleNotFoundError as err:
            print(
                f"episodic {args.command}: {err.name} is missing: {SERVER_EXTRA_HINT}",
                file=sys.stderr,
            )
            return 2
        except EpisodicError as err:  # local server-side work: schema or provider problems
            print(f"episodic {args.command}: {err.message}", file=sys.stderr)
            return 1
        except BrokenPipeError:
            return reader_gone()
        except (ValueError, OSError) as err:  # json.JSONDecodeError is a ValueError
            print(f"episodic {args.command}: {err}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            return interrupted(args.command)
        except Exception as err:
            if not _is_database_error(err):
                raise
            # Ctrl-C inside a statement surfaces as the session's error on the way out.
            if isinstance(err.__context__, KeyboardInterrupt):
                return interrupted(args.command)
            if type(err).__name__ == "ArgumentError":  # not shown: it may hold a password
                print(
                    f"episodic {args.command}: the database URL is not one ({err}): use "
                    "postgresql://user:password@host:5432/name",
                    file=sys.stderr,
                )
                return 2
            # The database unreachable or refusing the login: libpq's words, without the
            # traceback and SQLAlchemy's link (~110 lines for "Connection refused").
            cause = getattr(err, "orig", None) or err
            words = str(cause).split("\n(Background on this error")[0].strip()
            print(f"episodic {args.command}: database: {words}", file=sys.stderr)
            return 1

    return run


def _is_database_error(err: Exception) -> bool:
    """Whether ``err`` is SQLAlchemy's (installed with the server extra only)."""
    try:
        from sqlalchemy.exc import SQLAlchemyError
    except ModuleNotFoundError:  # pragma: no cover - the client alone
        return False
    return isinstance(err, SQLAlchemyError)


#: The exit status of a command stopped by Ctrl-C, as a shell reports one killed by SIGINT.
INTERRUPTED = 130


def interrupted(command: str) -> int:
    """Ctrl-C: one line, not a traceback."""
    print(f"episodic {command}: interrupted", file=sys.stderr)
    return INTERRUPTED


#: The exit status of a command whose output's reader left, as a shell reports a program
#: killed by SIGPIPE (128 + 13).
READER_GONE = 141


def reader_gone() -> int:
    """Standard output's reader left (``episodic status | head -3``): stop quietly, as a
    command killed by SIGPIPE does. Standard output is pointed at /dev/null, so the
    interpreter's last flush at exit does not fail on the closed pipe again."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return READER_GONE


# --------------------------------------------------------------------------- output


def _width() -> int:
    return max(60, shutil.get_terminal_size((120, 24)).columns)


def _clip(value: Any, width: int) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str], flex: int = -1) -> str:
    """A plain-text table; column ``flex`` (default the last) takes the remaining width and
    is clipped with an ellipsis."""
    if not rows:
        return "(none)"
    cells = [[" ".join(str(c).split()) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    flex = flex % len(headers)
    fixed = sum(w for i, w in enumerate(widths) if i != flex) + 2 * (len(headers) - 1)
    widths[flex] = max(len(headers[flex]), min(widths[flex], _width() - fixed))

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            _clip(v, widths[i]).ljust(widths[i]) for i, v in enumerate(values)
        ).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out)


def fill(text: str, indent: str = "  ") -> str:
    """``text`` wrapped to the terminal, indented."""
    import textwrap

    return textwrap.indent(textwrap.fill(text, _width() - len(indent)), indent)


def when(value: datetime | None, now: datetime | None = None) -> str:
    """``2026-05-14 14:22 (3 days ago)``, or ``-``."""
    from episodic.render import relative_time

    if value is None:
        return "-"
    return f"{value.astimezone(UTC):%Y-%m-%d %H:%M} ({relative_time(value, now)})"


def age(value: timedelta | None) -> str:
    """``3.5h``, ``12.0s``, or ``-``."""
    if value is None:
        return "-"
    seconds = value.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.1f}s"


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def print_json(value: Any) -> None:
    """SDK results (dataclasses) as indented JSON; times in ISO 8601, durations in seconds."""
    print(json.dumps(_jsonable(value), indent=2, ensure_ascii=False))


def parse_time(value: str) -> datetime:
    """ISO 8601 (``2026-05-14T14:22:00Z``, a date, or naive = UTC), or ``now``."""
    if value == "now":
        return datetime.now(UTC)
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an ISO 8601 time (e.g. 2026-05-14T14:22:00Z)"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def parse_weight(value: str) -> float:
    """A number (weights, thresholds and seconds alike; the server checks a weight's range)."""
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None


def parse_seconds(value: str) -> float:
    """A duration in seconds, more than 0 (a deadline of 0 or less fails every call)."""
    seconds = parse_weight(value)
    if not (seconds > 0 and math.isfinite(seconds)):  # NaN compares false
        raise argparse.ArgumentTypeError(f"must be a number of seconds more than 0 (got {value})")
    return seconds


def parse_whole(value: str, minimum: int) -> int:
    """A whole number of at least ``minimum``, or an argument error that says so."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < minimum:
        raise argparse.ArgumentTypeError(f"must be {minimum} or more (got {value})")
    return number


def parse_limit(value: str) -> int:
    """A count of items to show: a whole number, 0 or more."""
    return parse_whole(value, 0)


# --------------------------------------------------------------------------- episodes

EPISODE_HEADERS = ("EPISODE", "KIND", "STATUS", "ENDED", "MSGS", "THREAD", "SUMMARY")


def episode_rows(episodes: Sequence[Any]) -> list[list[Any]]:
    """Table rows of SDK ``Episode`` objects (see :data:`EPISODE_HEADERS`)."""
    return [
        [
            e.episode_id,
            e.kind,  # an event is listed under its id: get and delete take it too
            e.status,
            when(e.ended_at),
            e.message_count,
            e.thread_label or (e.thread_id[:8] if e.thread_id else "-"),
            e.summary or (f"error: {e.error}" if e.error else ""),
        ]
        for e in episodes
    ]


def show_episode(e: Any) -> None:
    """Prints one SDK ``Episode`` in full."""
    fields = [
        ("episode", e.episode_id),
        ("kind", e.kind),
        ("status", f"{e.status} (semantic: {e.semantic_status})"),
        ("thread", f"{e.thread_id}" + (f' "{e.thread_label}"' if e.thread_label else "")),
        ("dataset", e.dataset),
        ("window", f"messages {e.start_sequence}-{e.end_sequence} ({e.message_count})"),
        ("started", when(e.started_at)),
        ("ended", when(e.ended_at)),
        ("trigger", e.trigger),
        ("event", f"{e.event_type or '-'} by {e.actor or '-'}"),
        ("entities", ", ".join(e.entities) or "-"),
        ("retries", str(e.retry_count)),
    ]
    if e.error:
        fields.append(("error", e.error))
    for name, value in fields:
        print(f"{name + ':':<10} {value}")
    if e.summary:
        print("summary:")
        print(fill(e.summary))
    if e.key_learnings:
        print("key learnings:")
        for k in e.key_learnings:
            print(f"  - {k}")
