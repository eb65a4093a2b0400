"""Memory commands, for a person or an agent working with their data: write messages, end
threads and recall — enough to see the whole loop from a shell::

    episodic up                                   # in another terminal
    episodic demo                                 # or, step by step:
    T=$(episodic thread create user_42 --label car-search --quiet)
    episodic add $T "I need a family car under \\$30k; SUVs feel too big."
    episodic add $T --role assistant "The Corolla Hybrid fits your budget and commute."
    episodic end $T --wait
    episodic recall user_42 "car recommendations"

Every call goes through the SDK (:class:`episodic.sdk.client.EpisodicClient`); addresses come
from ``--ingest/--recall/--scheduler/--summariser`` or the environment, as in the SDK.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from datetime import time as dt_time
from pathlib import Path
from typing import Any

from ._common import (
    EPISODE_HEADERS,
    CommandGroups,
    Handler,
    add_action,
    connect,
    connection_options,
    episode_rows,
    guarded,
    parse_limit,
    parse_seconds,
    parse_time,
    parse_weight,
    print_json,
    show_episode,
    table,
    when,
)

ROLES = ("user", "assistant", "system", "tool")
GROUP = "memory (threads, messages, recall)"


def cmd_thread_create(args: argparse.Namespace) -> int:
    metadata = json.loads(args.metadata) if args.metadata else None
    with connect(args) as client:
        thread = client.create_thread(
            args.dataset, label=args.label or "", metadata=metadata, thread_id=args.thread_id
        )
    if args.json:
        print_json(thread)
    elif args.quiet:
        print(thread.thread_id)
    else:
        print(f"created thread {thread.thread_id} in dataset {thread.dataset}")
    return 0


def cmd_thread_show(args: argparse.Namespace) -> int:
    with connect(args) as client:
        thread = client.get_thread(args.thread_id)
        messages = client.load_session(args.thread_id)
        episodes = list(client.iter_episodes(thread.dataset, thread_id=args.thread_id))
    if args.json:
        print_json({"thread": thread, "messages": messages, "episodes": episodes})
        return 0
    label = f' "{thread.label}"' if thread.label else ""
    print(f"thread {thread.thread_id}{label} in dataset {thread.dataset}")
    print(
        f"  {thread.message_count} messages, {thread.captured_sequence} covered by episodes; "
        f"created {when(thread.created_at)}; last message {when(thread.last_message_at)}"
    )
    shown = messages[-args.limit :] if args.limit else messages
    if len(shown) < len(messages):
        print(f"  (last {len(shown)} of {len(messages)} messages)")
    print()
    print(
        table(
            [[m.sequence, when(m.created_at), m.role, m.content] for m in shown],
            ("SEQ", "WRITTEN", "ROLE", "CONTENT"),
        )
    )
    print()
    print(table(episode_rows(episodes), EPISODE_HEADERS))
    return 0


def cmd_thread_list(args: argparse.Namespace) -> int:
    with connect(args) as client:
        threads = client.recent_threads(args.dataset, args.limit)
    if args.json:
        print_json(threads)
        return 0
    print(
        table(
            [
                [
                    t.thread_id,
                    t.label,
                    t.message_count,
                    t.captured_sequence,
                    when(t.last_message_at),
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
    with connect(args) as client:
        result = client.add_messages(args.thread_id, messages)
    if args.json:
        print_json(result)
    else:
        seqs = result.sequences
        span = f"{seqs[0]}" if len(seqs) == 1 else f"{seqs[0]}-{seqs[-1]}"
        print(
            f"stored {result.stored_count} message(s) in thread {args.thread_id} (sequence {span})"
        )
    return 0


def _wait(client: Any, thread_id: str, timeout: float) -> Any:
    print(f"waiting up to {timeout:.0f}s for the episode to be summarised …", file=sys.stderr)
    return client.wait_for_episode(thread_id, timeout=timeout)


def cmd_end(args: argparse.Namespace) -> int:
    with connect(args) as client:
        result = client.end_thread(args.thread_id)
        episode = None
        if args.wait is not None and result.episode_queued:
            episode = _wait(client, args.thread_id, args.wait)
    if args.json:
        print_json({"end": result, "episode": episode})
        return 0
    if not result.episode_queued:
        print(f"thread {args.thread_id}: every message is already covered by an episode")
    else:
        ident = f" {result.episode_id}" if result.episode_id else ""
        print(f"thread {args.thread_id}: episode{ident} queued")
    if episode is not None:
        print()
        show_episode(episode)
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    from episodic.render import render_episodes

    with connect(args) as client:
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
            min_relevance=args.min_relevance,
            min_match=args.min_match,
            abstain=args.abstain,
        )
    if args.json:
        print_json(result)
        return 0
    if args.render:
        if args.render == "timeline":
            print(render_episodes(result.episodes, now=args.as_of, style="timeline"))
        else:
            print(render_episodes(result.episodes, now=args.as_of, style="past_conversation"))
        return 0
    # Relevance is calibrated against the words ranked: none without a query, or when the
    # query named nothing but a time that narrowed the search (its ranked query is empty).
    u = result.understanding
    ranked = u.ranked_query if u is not None and u.applied else args.query or ""
    rows = [
        [
            i,
            f"{s.relevance_score:.3f}",
            f"{s.relevance:.3f}" if ranked.strip() else "-",
            f"{s.similarity:.3f}",
            f"{s.recency:.3f}",
            when(s.episode.ended_at, args.as_of),
            s.episode.thread_label or s.episode.thread_id[:8],
            s.episode.summary,
        ]
        for i, s in enumerate(result.episodes, start=1)
    ]
    # SCORE ranks (ScoredEpisode.relevance_score); RELEVANCE is the calibrated chance the
    # episode answers the query (ScoredEpisode.relevance), what min_relevance compares.
    print(
        table(
            rows, ("#", "SCORE", "RELEVANCE", "SIMILARITY", "RECENCY", "ENDED", "THREAD", "SUMMARY")
        )
    )
    match = f"; match {result.match:.3f}" if result.match is not None else ""
    # episode_count counts the dataset's current episodes; events ranked beside them are
    # counted apart (they are not among those episodes: "2 of 1" read as a bug).
    events = sum(1 for s in result.episodes if s.episode.is_event)
    also = f" and {events} event(s)" if events else ""
    print(
        f"\n{len(result.episodes) - events} of {result.episode_count} current episode(s)"
        f"{also} in {args.dataset}{match}"
    )
    if u is not None:
        print(understanding_line(u))
    if result.abstained:
        print(
            "abstained: nothing fits the query well enough to pass the thresholds "
            "(leave out --abstain, or lower --min-relevance / --min-match, for the closest)"
        )
    elif args.abstain and result.match is not None and not result.abstain_applied:
        print(
            "abstain not applied: its thresholds are fitted for the built-in embedders, in "
            "English and, with multilingual-e5, in other languages (see `episodic datasets "
            f"policy {args.dataset}`); these are the closest episodes, which may not fit"
        )
    if not result.settled:
        print(settling_line(result.chunks_pending, result.episodes_pending))
    return 0


def settling_line(chunks_pending: bool, episodes_pending: bool) -> str:
    """What a Recall answer's ``chunks_pending`` / ``episodes_pending`` mean for a reader."""
    parts = []
    if episodes_pending:
        parts.append("episodes are still being summarised (their messages are in no answer yet)")
    if chunks_pending:
        parts.append("passages of recent episodes are still being indexed")
    return "still settling: " + "; ".join(parts) + " — asking again shortly may answer better"


def _window(start: datetime | None, end: datetime | None) -> str:
    """A time window (``end`` exclusive) in UTC: whole days as dates, else to the minute."""

    def midnight(value: datetime) -> bool:
        return value.astimezone(UTC).time() == dt_time()

    if start is not None and end is not None and midnight(start) and midnight(end):
        first = start.astimezone(UTC).date()
        last = (end.astimezone(UTC) - timedelta(days=1)).date()
        return f"{first} (UTC)" if last <= first else f"{first} to {last} (UTC)"
    if start is not None and end is not None:
        return f"{start.astimezone(UTC):%Y-%m-%d %H:%M} to {end.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    if start is not None:
        return f"from {start.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    if end is not None:
        return f"before {end.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    return "no window"


def _ordinal(o: Any) -> str:
    """``session #1 from the first: 1 thread``, ``decision episodes #1-#3 from the latest``."""
    if o.scope == "sessions":
        noun = "session" if o.count <= 1 else "sessions"
    else:
        noun = f"{o.event_type or 'matching'} episode" + ("" if o.count <= 1 else "s")
    span = f"#{o.position}" if o.count <= 1 else f"#{o.position}-#{o.position + o.count - 1}"
    what = f"{noun} {span} from the {'latest' if o.from_end else 'first'}"
    if o.scope == "sessions":
        n = len(o.thread_ids)
        what += f": {n} thread{'' if n == 1 else 's'}" if n else ": no such session"
    return what


def understanding_line(u: Any) -> str:
    """One line on how Recall read the query's time (an SDK ``QueryUnderstanding``): the
    words, the window or sessions they name, and whether that narrowed the search."""
    words = [e.text for e in u.expressions]
    if u.ordinal is not None and u.ordinal.text not in words:
        words.append(u.ordinal.text)
    window = u.window_start is not None or u.window_end is not None
    read = [_window(u.window_start, u.window_end)] if window else []
    if u.ordinal is not None:
        read.append(_ordinal(u.ordinal))
    line = f"time: {', '.join(_quoted(w) for w in words)}"
    if read:
        line += f" read as {'; '.join(read)}"
    notes = list(u.notes)
    if not u.applied:
        line += f", not applied: {notes.pop(0) if notes else 'the query was ranked as written'}"
    else:
        line += f", applied: only {'episodes of that time' if window else 'those episodes'}"
        line += ", oldest first" if u.time_only else f", ranked by {_quoted(u.ranked_query)}"
    return line + "".join(f" ({note})" for note in notes)


def _quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


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

    with connect(args) as client:
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


def register(groups: CommandGroups) -> None:
    """Adds the memory commands."""
    common = connection_options()

    def add(parent: Any, name: str, fn: Handler, help: str) -> argparse.ArgumentParser:
        return add_action(parent, name, fn, help, common)

    thread = groups.add(GROUP, "thread", "create, show and list threads")
    tsub = thread.add_subparsers(dest="thread_command", required=True, metavar="ACTION")
    p = add(tsub, "create", cmd_thread_create, "create a thread in a dataset")
    p.add_argument("dataset")
    p.add_argument("--label", help='human-readable name, e.g. "billing-q2"')
    p.add_argument("--metadata", help="JSON object")
    p.add_argument("--thread-id", help="choose the thread's UUID")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the thread id")
    p = add(tsub, "show", cmd_thread_show, "show a thread: its messages and its episodes")
    p.add_argument("thread_id")
    p.add_argument(
        "--limit", type=parse_limit, default=50, help="last N messages (0: all; default 50)"
    )
    p = add(tsub, "list", cmd_thread_list, "a dataset's most recently active threads")
    p.add_argument("dataset")
    p.add_argument("--limit", type=parse_limit, default=20)

    p = groups.add(GROUP, "add", "add messages to a thread", parents=[common])
    p.set_defaults(func=guarded(cmd_add), trailing_text="text")
    p.add_argument("thread_id")
    p.add_argument(
        "text", nargs="*", help="one message per argument (options may come before or after)"
    )
    p.add_argument("--role", choices=ROLES, default="user", help="author of the messages")
    p.add_argument("--at", type=parse_time, help="backfill: when the messages were written (ISO)")
    p.add_argument(
        "--file",
        help='messages from a file ("-": stdin), one per line: JSON objects or "role: text"',
    )

    p = groups.add(GROUP, "end", "end a stretch of a thread: queue its episode", parents=[common])
    p.set_defaults(func=guarded(cmd_end))
    p.add_argument("thread_id")
    p.add_argument(
        "--wait",
        type=parse_seconds,
        nargs="?",
        const=60.0,
        metavar="SECONDS",
        help="wait for the episode to be summarised and show it (default 60 s)",
    )

    p = groups.add(GROUP, "recall", "a dataset's most relevant episodes", parents=[common])
    p.set_defaults(func=guarded(cmd_recall))
    p.add_argument("dataset")
    p.add_argument("query", nargs="?", help="omit for plain recency order")
    p.add_argument("-n", "--limit", type=parse_limit, help="how many (server default 3)")
    p.add_argument("--similarity-weight", type=parse_weight)
    p.add_argument("--recency-weight", type=parse_weight)
    p.add_argument("--since", type=parse_time, help="episodes ending at or after (ISO)")
    p.add_argument("--until", type=parse_time, help="episodes starting at or before (ISO)")
    p.add_argument("--as-of", type=parse_time, help="rank as if it were this time (ISO)")
    p.add_argument("--thread", action="append", help="only this thread (repeatable)")
    p.add_argument("--entity", action="append", help="only episodes mentioning it (repeatable)")
    p.add_argument("--event-type", help="decision, tool_call, feedback, milestone, …")
    p.add_argument(
        "--min-relevance",
        type=parse_weight,
        help="leave out episodes whose calibrated relevance is below this (0–1)",
    )
    p.add_argument(
        "--min-match",
        type=parse_weight,
        help="answer nothing when the request's best match says the dataset likely holds "
        "no answer: the chance it does is below this (0–1)",
    )
    p.add_argument(
        "--abstain",
        action="store_true",
        help="apply the --min-relevance and --min-match Recall recommends for its embedding "
        "model, so a question nothing answers gets nothing (either flag overrides its value)",
    )
    p.add_argument(
        "--render",
        choices=("timeline", "past"),
        help="print the episodes as prompt text instead of a table",
    )

    p = groups.add(GROUP, "demo", "write a short conversation, end it, recall it", parents=[common])
    p.set_defaults(func=guarded(cmd_demo))
    p.add_argument("--dataset", default="demo_user")
    p.add_argument(
        "--wait", type=parse_seconds, default=120.0, help="seconds to wait for the episode"
    )
