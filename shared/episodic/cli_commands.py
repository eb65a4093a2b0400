"""Client commands of the ``episodic`` CLI: write messages, end threads, recall and
administer episodes against running services — enough to see the whole loop from a shell:

    episodic up                                   # in another terminal
    episodic demo                                 # or, step by step:
    T=$(episodic thread create user_42 --label car-search --quiet)
    episodic add $T "I need a family car under \\$30k; SUVs feel too big."
    episodic add $T --role assistant "The Corolla Hybrid fits your budget and commute."
    episodic end $T --wait
    episodic recall user_42 "car recommendations"
    episodic episodes list user_42

Addresses come from ``--ingest/--recall/--scheduler/--summariser`` or the environment
(``EPISODIC_<SERVICE>_ADDRESS``, else ``127.0.0.1:EPISODIC_<SERVICE>_PORT``), as in the SDK.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import textwrap
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["register"]

ROLES = ("user", "assistant", "system", "tool")
STATUSES = ("pending", "processing", "completed", "failed", "archived", "deleted")


# --------------------------------------------------------------------------- output helpers


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


def _when(value: datetime | None, now: datetime | None = None) -> str:
    from episodic.render import relative_time

    if value is None:
        return "-"
    return f"{value.astimezone(UTC):%Y-%m-%d %H:%M} ({relative_time(value, now)})"


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _print_json(value: Any) -> None:
    print(json.dumps(_jsonable(value), indent=2, ensure_ascii=False))


def _time(value: str) -> datetime:
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


def _weight(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None


# --------------------------------------------------------------------------- commands


def _client(args: argparse.Namespace) -> Any:
    from episodic.client import EpisodicClient

    return EpisodicClient(
        ingest=args.ingest,
        recall=args.recall,
        scheduler=args.scheduler,
        summariser=args.summariser,
        timeout=args.timeout,
    )


def _episode_rows(episodes: Sequence[Any]) -> list[list[Any]]:
    return [
        [
            e.episode_id,
            e.status,
            _when(e.ended_at),
            e.message_count,
            e.thread_label or e.thread_id[:8],
            e.summary or (f"error: {e.error}" if e.error else ""),
        ]
        for e in episodes
    ]


_EPISODE_HEADERS = ("EPISODE", "STATUS", "ENDED", "MSGS", "THREAD", "SUMMARY")


def _show_episode(e: Any) -> None:
    fields = [
        ("episode", e.episode_id),
        ("status", f"{e.status} (semantic: {e.semantic_status})"),
        ("thread", f"{e.thread_id}" + (f' "{e.thread_label}"' if e.thread_label else "")),
        ("dataset", e.dataset),
        ("window", f"messages {e.start_sequence}-{e.end_sequence} ({e.message_count})"),
        ("started", _when(e.started_at)),
        ("ended", _when(e.ended_at)),
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
        print(textwrap.indent(textwrap.fill(e.summary, _width() - 2), "  "))
    if e.key_learnings:
        print("key learnings:")
        for k in e.key_learnings:
            print(f"  - {k}")


def cmd_thread_create(args: argparse.Namespace) -> int:
    metadata = json.loads(args.metadata) if args.metadata else None
    with _client(args) as client:
        thread = client.create_thread(
            args.dataset, label=args.label or "", metadata=metadata, thread_id=args.thread_id
        )
    if args.json:
        _print_json(thread)
    elif args.quiet:
        print(thread.thread_id)
    else:
        print(f"created thread {thread.thread_id} in dataset {thread.dataset}")
    return 0


def cmd_thread_show(args: argparse.Namespace) -> int:
    with _client(args) as client:
        thread = client.get_thread(args.thread_id)
        messages = client.load_session(args.thread_id)
        episodes = list(client.iter_episodes(thread.dataset, thread_id=args.thread_id))
    if args.json:
        _print_json({"thread": thread, "messages": messages, "episodes": episodes})
        return 0
    label = f' "{thread.label}"' if thread.label else ""
    print(f"thread {thread.thread_id}{label} in dataset {thread.dataset}")
    print(
        f"  {thread.message_count} messages, {thread.captured_sequence} covered by episodes; "
        f"created {_when(thread.created_at)}; last message {_when(thread.last_message_at)}"
    )
    shown = messages[-args.limit :] if args.limit else messages
    if len(shown) < len(messages):
        print(f"  (last {len(shown)} of {len(messages)} messages)")
    print()
    print(
        table(
            [[m.sequence, _when(m.created_at), m.role, m.content] for m in shown],
            ("SEQ", "WRITTEN", "ROLE", "CONTENT"),
        )
    )
    print()
    print(table(_episode_rows(episodes), _EPISODE_HEADERS))
    return 0


def cmd_thread_list(args: argparse.Namespace) -> int:
    with _client(args) as client:
        threads = client.recent_threads(args.dataset, args.limit)
    if args.json:
        _print_json(threads)
        return 0
    print(
        table(
            [
                [
                    t.thread_id,
                    t.label,
                    t.message_count,
                    t.captured_sequence,
                    _when(t.last_message_at),
                ]
                for t in threads
            ],
            ("THREAD", "LABEL", "MSGS", "COVERED", "LAST MESSAGE"),
            flex=1,
        )
    )
    return 0


def _read_messages(path: str, role: str) -> list[dict[str, Any]]:
    """JSON lines ({"role", "content", …}) or "role: text" lines (else the default role)."""
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.lstrip().startswith("{"):
            out.append(json.loads(line))
            continue
        head, sep, rest = line.partition(":")
        if sep and head.strip().lower() in ROLES:
            out.append({"role": head.strip().lower(), "content": rest.strip()})
        else:
            out.append({"role": role, "content": line.strip()})
    return out


def cmd_add(args: argparse.Namespace) -> int:
    messages: list[dict[str, Any]] = [
        {"role": args.role, "content": t, "created_at": args.at} for t in args.text
    ]
    if args.file:
        messages += _read_messages(args.file, args.role)
    if not messages:
        print("episodic add: give the message text, or --file", file=sys.stderr)
        return 2
    with _client(args) as client:
        result = client.add_messages(args.thread_id, messages)
    if args.json:
        _print_json(result)
    else:
        seqs = [m.sequence for m in result.messages]
        span = f"{seqs[0]}" if len(seqs) == 1 else f"{seqs[0]}-{seqs[-1]}"
        print(
            f"stored {result.stored_count} message(s) in thread {args.thread_id} (sequence {span})"
        )
    return 0


def _wait(client: Any, thread_id: str, timeout: float) -> Any:
    print(f"waiting up to {timeout:.0f}s for the episode to be summarised …", file=sys.stderr)
    return client.wait_for_episode(thread_id, timeout=timeout)


def cmd_end(args: argparse.Namespace) -> int:
    with _client(args) as client:
        result = client.end_thread(args.thread_id)
        episode = None
        if args.wait is not None and result.episode_queued:
            episode = _wait(client, args.thread_id, args.wait)
    if args.json:
        _print_json({"end": result, "episode": episode})
        return 0
    if not result.episode_queued:
        print(f"thread {args.thread_id}: every message is already covered by an episode")
    else:
        ident = f" {result.episode_id}" if result.episode_id else ""
        print(f"thread {args.thread_id}: episode{ident} queued")
    if episode is not None:
        print()
        _show_episode(episode)
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    from episodic.render import render_episodes

    with _client(args) as client:
        result = client.recall(
            args.dataset,
            args.query,
            limit=args.limit,
            similarity_weight=args.similarity_weight,
            recency_weight=args.recency_weight,
            since=args.since,
            until=args.until,
            thread_ids=args.thread or (),
            entities=args.entity or (),
            event_type=args.event_type,
            as_of=args.as_of,
        )
    if args.json:
        _print_json(result)
        return 0
    if args.render:
        if args.render == "timeline":
            print(render_episodes(result.episodes, now=args.as_of, style="timeline"))
        else:
            print(render_episodes(result.episodes, now=args.as_of, style="past_conversation"))
        return 0
    rows = [
        [
            i,
            f"{s.relevance_score:.3f}",
            f"{s.similarity:.3f}",
            f"{s.recency:.3f}",
            _when(s.episode.ended_at, args.as_of),
            s.episode.thread_label or s.episode.thread_id[:8],
            s.episode.summary,
        ]
        for i, s in enumerate(result.episodes, start=1)
    ]
    print(table(rows, ("#", "RELEVANCE", "SIMILARITY", "RECENCY", "ENDED", "THREAD", "SUMMARY")))
    print(
        f"\n{len(result.episodes)} of {result.episode_count} current episode(s) in {args.dataset}"
    )
    return 0


def cmd_episodes_list(args: argparse.Namespace) -> int:
    with _client(args) as client:
        page = client.list_episodes(
            args.dataset,
            status=args.status,
            thread_id=args.thread,
            page_size=args.limit,
            page_token=args.page_token or "",
        )
    if args.json:
        _print_json(page)
        return 0
    print(table(_episode_rows(page.items), _EPISODE_HEADERS))
    if page.next_page_token:
        print(f"\nmore: --page-token {page.next_page_token}")
    return 0


def _episode_action(
    args: argparse.Namespace, call: str, describe: Callable[[Any], str] | None
) -> int:
    """get/retry/delete: one call by episode id, shown as JSON, in full, or as one line."""
    with _client(args) as client:
        episode = getattr(client, call)(args.episode_id)
    if args.json:
        _print_json(episode)
    elif describe is None:
        _show_episode(episode)
    else:
        print(describe(episode))
    return 0


def cmd_episodes_get(args: argparse.Namespace) -> int:
    return _episode_action(args, "get_episode", None)


def cmd_episodes_retry(args: argparse.Namespace) -> int:
    return _episode_action(
        args, "retry_episode", lambda e: f"episode {e.episode_id} is {e.status} again"
    )


def cmd_episodes_delete(args: argparse.Namespace) -> int:
    return _episode_action(
        args,
        "delete_episode",
        lambda e: f"episode {e.episode_id} is now {e.status} (kept for provenance)",
    )


def cmd_episodes_search(args: argparse.Namespace) -> int:
    with _client(args) as client:
        found = client.search_episodes(args.dataset, args.query, limit=args.limit)
    if args.json:
        _print_json(found)
        return 0
    rows = [
        [
            f"{s.similarity:.3f}",
            s.episode.episode_id,
            _when(s.episode.ended_at),
            s.episode.thread_label or s.episode.thread_id[:8],
            s.episode.summary,
        ]
        for s in found
    ]
    print(table(rows, ("SIMILARITY", "EPISODE", "ENDED", "THREAD", "SUMMARY")))
    return 0


DEMO = [
    ("user", "Hi! I'm looking for a family car, my budget is under $30k."),
    ("assistant", "Happy to help. What matters most: space, fuel economy, or driving feel?"),
    ("user", "Mostly city commuting. I tried some SUVs but they feel too big to park."),
    ("assistant", "Then a compact hybrid fits: the Toyota Corolla Hybrid is about $24k."),
    ("user", "The Corolla Hybrid sounds right. I'll book a test drive for Saturday."),
    ("assistant", "Great choice. I noted the Saturday test drive for the Corolla Hybrid."),
]


def cmd_demo(args: argparse.Namespace) -> int:
    from episodic.render import render_episodes

    with _client(args) as client:
        client.wait_ready(("ingest", "recall"), timeout=10)
        thread = client.start_thread(args.dataset, label="car-search")
        print(f"1. started thread {thread.thread_id} in dataset {args.dataset}")
        client.add_messages(thread.thread_id, DEMO)
        for role, content in DEMO:
            print(f"   {role:>9}: {content}")
        end = client.end_thread(thread.thread_id)
        print(f"2. ended the thread: episode queued = {end.episode_queued}")
        episode = _wait(client, thread.thread_id, args.wait)
        print(f"3. the episode is {episode.status}:")
        print(textwrap.indent(textwrap.fill(episode.summary or "(no summary)", 96), "   "))
        result = client.recall(args.dataset, "car recommendations")
        print(f'4. recall("{args.dataset}", "car recommendations") — rendered for a prompt:\n')
        print(textwrap.indent(render_episodes(result.episodes), "   "))
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    """Talks to the database, not to the services (like ``episodic migrate``)."""
    from episodic.config import get_settings
    from episodic.providers.embedding import make_embedder
    from episodic.store.db import check_embedding_dimension, make_engine
    from episodic.store.recall_index import index_missing

    settings = get_settings()
    url = args.database_url or settings.database.database_url
    if not url:
        print("episodic reindex: set EPISODIC_DATABASE_URL (or --database-url)", file=sys.stderr)
        return 2
    engine = make_engine(url, pool_size=1, application_name="episodic-reindex")
    try:
        embedder = make_embedder(settings.embedding, settings.database.embedding_dimension)
        check_embedding_dimension(engine, embedder.dimension)
        count = index_missing(engine, embedder)
    finally:
        engine.dispose()
    print(f"indexed {count} episode(s) for recall")
    return 0


# --------------------------------------------------------------------------- wiring


class _Intermixed(argparse.ArgumentParser):
    """Options may follow free text (``episodic add T "hi" --role assistant`` and
    ``episodic add T --role assistant "hi"`` both work): a ``nargs="*"`` positional would
    otherwise be matched, empty, before the options."""

    _intermixing = False

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[no-untyped-def,override]
        if self._intermixing:  # parse_known_intermixed_args calls back into us
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("connection")
    for service in ("ingest", "recall", "scheduler", "summariser"):
        group.add_argument(
            f"--{service}",
            metavar="HOST:PORT",
            help=f"{service} address (default: EPISODIC_{service.upper()}_ADDRESS or "
            f"127.0.0.1:EPISODIC_{service.upper()}_PORT)",
        )
    group.add_argument(
        "--timeout", type=float, default=10.0, help="deadline of each call in seconds (10)"
    )
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return common


def _guarded(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Service errors become one readable line on stderr and exit status 1."""

    def run(args: argparse.Namespace) -> int:
        from episodic.client import EpisodicRpcError
        from episodic.errors import EpisodicError

        try:
            return fn(args)
        except EpisodicError as err:  # local work (reindex): schema or provider problems
            print(f"episodic {args.command}: {err.message}", file=sys.stderr)
            return 1
        except EpisodicRpcError as err:
            where = f" ({err.field})" if err.field else ""
            print(
                f"episodic {args.command}: {err.code.name}{where}: {err.message}", file=sys.stderr
            )
            if err.code.name == "UNAVAILABLE":
                print("  is `episodic up` running? see --help for addresses", file=sys.stderr)
            return 1
        except (ValueError, json.JSONDecodeError, OSError) as err:
            print(f"episodic {args.command}: {err}", file=sys.stderr)
            return 2

    return run


def register(sub: Any) -> None:
    """Adds the client commands to the ``episodic`` parser's subcommands."""
    common = _common()

    def add(parent: Any, name: str, fn: Callable[[argparse.Namespace], int], help: str) -> Any:
        parser = parent.add_parser(name, parents=[common], help=help, description=help)
        parser.set_defaults(func=_guarded(fn))
        return parser

    # thread
    thread = sub.add_parser("thread", help="create, show and list threads")
    tsub = thread.add_subparsers(dest="thread_command", required=True, metavar="ACTION")
    p = add(tsub, "create", cmd_thread_create, "create a thread in a dataset")
    p.add_argument("dataset")
    p.add_argument("--label", help='human-readable name, e.g. "billing-q2"')
    p.add_argument("--metadata", help="JSON object")
    p.add_argument("--thread-id", help="choose the thread's UUID")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the thread id")
    p = add(tsub, "show", cmd_thread_show, "show a thread: its messages and its episodes")
    p.add_argument("thread_id")
    p.add_argument("--limit", type=int, default=50, help="last N messages (0: all; default 50)")
    p = add(tsub, "list", cmd_thread_list, "a dataset's most recently active threads")
    p.add_argument("dataset")
    p.add_argument("--limit", type=int, default=20)

    # add / end
    p = add(sub, "add", cmd_add, "add messages to a thread")
    p.__class__ = _Intermixed
    p.add_argument("thread_id")
    p.add_argument("text", nargs="*", help="one message per argument")
    p.add_argument("--role", choices=ROLES, default="user", help="author of the messages")
    p.add_argument("--at", type=_time, help="backfill: when the messages were written (ISO)")
    p.add_argument(
        "--file",
        help='messages from a file ("-": stdin), one per line: JSON objects or "role: text"',
    )
    p = add(sub, "end", cmd_end, "end a stretch of a thread: queue its episode")
    p.add_argument("thread_id")
    p.add_argument(
        "--wait",
        type=float,
        nargs="?",
        const=60.0,
        metavar="SECONDS",
        help="wait for the episode to be summarised and show it (default 60 s)",
    )

    # recall
    p = add(sub, "recall", cmd_recall, "a dataset's most relevant episodes")
    p.add_argument("dataset")
    p.add_argument("query", nargs="?", help="omit for plain recency order")
    p.add_argument("-n", "--limit", type=int, help="how many (server default 3)")
    p.add_argument("--similarity-weight", type=_weight)
    p.add_argument("--recency-weight", type=_weight)
    p.add_argument("--since", type=_time, help="episodes ending at or after (ISO)")
    p.add_argument("--until", type=_time, help="episodes starting at or before (ISO)")
    p.add_argument("--as-of", type=_time, help="rank as if it were this time (ISO)")
    p.add_argument("--thread", action="append", help="only this thread (repeatable)")
    p.add_argument("--entity", action="append", help="only episodes mentioning it (repeatable)")
    p.add_argument("--event-type", help="decision, tool_call, feedback, milestone, …")
    p.add_argument(
        "--render",
        choices=("timeline", "past"),
        help="print the episodes as prompt text instead of a table",
    )

    # episodes
    episodes = sub.add_parser("episodes", help="list, get, search, retry and delete episodes")
    esub = episodes.add_subparsers(dest="episodes_command", required=True, metavar="ACTION")
    p = add(esub, "list", cmd_episodes_list, "a dataset's episodes, newest first")
    p.add_argument("dataset")
    p.add_argument("--status", choices=STATUSES)
    p.add_argument("--thread", help="only this thread's episodes")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--page-token")
    p = add(esub, "get", cmd_episodes_get, "one episode in any status")
    p.add_argument("episode_id")
    p = add(esub, "search", cmd_episodes_search, "a dataset's current episodes by text")
    p.add_argument("dataset")
    p.add_argument("query")
    p.add_argument("--limit", type=int, default=5)
    p = add(esub, "retry", cmd_episodes_retry, "put a failed episode back to pending")
    p.add_argument("episode_id")
    p = add(esub, "delete", cmd_episodes_delete, "soft-delete an episode (archived)")
    p.add_argument("episode_id")

    # reindex (database maintenance)
    p = sub.add_parser(
        "reindex",
        help="index completed episodes that recall's search index lacks",
        description="Writes recall's search index (lexical document, message chunks) for "
        "completed episodes that have none, e.g. those completed before the summariser "
        "indexed episodes. Needs the database, not the services.",
    )
    p.add_argument("--database-url", help="defaults to EPISODIC_DATABASE_URL")
    p.set_defaults(func=_guarded(cmd_reindex))

    # demo
    p = add(sub, "demo", cmd_demo, "write a short conversation, end it, recall it")
    p.add_argument("--dataset", default="demo_user")
    p.add_argument("--wait", type=float, default=120.0, help="seconds to wait for the episode")
