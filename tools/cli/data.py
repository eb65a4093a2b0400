"""Data commands: take a dataset out (``export``, through the SDK, optionally
pseudonymised for analytics) and run an export through the current pipeline to see what
changed (``replay``, on a scratch database; needs the ``server`` extra).

See :mod:`episodic.ops.export` for the export format and what pseudonymisation masks, and
:mod:`episodic.ops.replay` for how a replay simulates time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import stat
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ._common import CommandGroups, connect, connection_options, guarded

GROUP = "data (export, replay)"

EXPORT_HELP = "write a dataset's threads, messages and episodes as JSON lines"
EXPORT_EPILOG = """\
Output: one JSON object per line, each with a "type": a "dataset" header (format, version,
exported_at), then per thread its "thread" line, its "message" lines in order and its
"episode" lines (every status, with windows, summaries, key learnings, entities), and an
"end" line with the counts (a file without it is partial). A dataset that does not exist
(no thread; for an admin key, no policy either) is an error, not an empty export. -o FILE
writes a new FILE.partial (mode 0600; one that exists is refused, never reused or
followed) and renames it to FILE when complete.

--pseudonymise masks for analytics with keyed pseudonyms (HMAC-SHA-256; the same key gives
the same pseudonyms in every run): the dataset name, thread, episode and message ids, the
values of the metadata keys user_id, userid, user, username, user_name, name, speaker,
email, author and sender (and each word of a name under name, speaker, author, sender:
"O'Brien", "Jean-Luc", "Jean" and "Luc", "Li" of "Wu Li"; not titles, particles, common
words or initials), the entities and named actors of episodes, and each of these, UUIDs
and e-mail addresses wherever they occur in content, labels, summaries (a compacted
thread's too) and key learnings (whole words, "carol" of carol_danvers too, any case,
longest first). It masks the names it knows, NOT every identifier in free text: a name
that is neither in metadata nor an extracted entity, a phone number, an address, stays
as written. Review a sample before sharing."""

REPLAY_HELP = "run an export through the current pipeline and report what changed"
REPLAY_EPILOG = """\
The export's messages are written again, in time order, on a scratch database (an
embedded PostgreSQL unless --database-url names a server to create it on; never the
suite's own database), with the Scheduler's clock injected, so inactivity timers,
new-thread pull-forwards and explicit ends fire as they would have; the summariser then
summarises the new episodes with the providers of the current settings (EPISODIC_*).
Reported per thread: the old and new windows, the similarity of the current summaries
(cosine of the configured embedder's vectors) and the entities added and removed; per
query: the top-k threads Recall ranks over the old and the new episodes, and their overlap.

--clock received (default) replays at the times the suite received the messages, so an
unchanged pipeline reproduces the old windows; --clock created at the messages' own
timestamps (e.g. a backfill's original times)."""


# --------------------------------------------------------------------------- export


@contextlib.contextmanager
def _output(path: str | None) -> Any:
    """Standard output, or ``path`` written as ``path.partial`` (mode 0600: it holds
    people's messages) and renamed when complete; removed when the export fails. A path
    that is a device or a pipe is written in place; a symbolic link or a directory is
    refused.

    The partial file is always a new file: created exclusively (``O_EXCL``, which also
    refuses a symbolic link, even a dangling one), never an existing file reused with its
    mode, nor a link followed to overwrite its target. One that exists is refused: another
    export is writing it, a killed one left it, or someone else put it there."""
    if path is None or path == "-":
        yield sys.stdout
        return
    target = Path(path)
    try:
        kind = os.stat(target).st_mode  # through a link: what a write would reach
    except FileNotFoundError:
        kind = None
    if kind is not None and not (stat.S_ISREG(kind) or stat.S_ISDIR(kind)):
        # A device or a pipe (/dev/stdout, a named pipe a reader waits on): written in
        # place. Renaming a file over it replaced it (as root, /dev/null itself).
        with open(target, "w", encoding="utf-8", buffering=1024 * 1024) as out:
            yield out
        return
    if target.is_symlink():
        raise ValueError(
            f"{target} is a symbolic link: name the file itself ({os.path.realpath(target)}); "
            "the export would replace the link, not write to what it points at"
        )
    if kind is not None and stat.S_ISDIR(kind):
        raise ValueError(f"{target} is a directory: name a file to export to")
    partial = target.with_name(target.name + ".partial")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(partial, flags | getattr(os, "O_CLOEXEC", 0), 0o600)
    except FileExistsError:
        raise ValueError(
            f"{partial} already exists (another export writing {target.name}, or one that "
            "was stopped; or not yours): check it, remove it and run again"
        ) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", buffering=1024 * 1024) as out:
            yield out
        partial.replace(target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def _message_total(client: Any, dataset: str) -> int | None:
    """The dataset's message count for the progress bar, when the key may list datasets."""
    from episodic.sdk.client import EpisodicRpcError

    try:
        page = client.list_datasets(prefix=dataset, page_size=100)
    except EpisodicRpcError:
        return None
    for summary in page.items:
        if summary.dataset == dataset:
            return int(summary.message_count)
    return None


def _dataset_exists(client: Any, dataset: str) -> bool:
    """Whether ``dataset`` holds a thread, or (none left) exists all the same: its policy
    answers (an admin key may ask; a reader's key cannot tell, so no thread is no dataset)."""
    from episodic.sdk.client import NotFoundError, PermissionDeniedError

    if client.list_threads(dataset, page_size=1).items:
        return True
    try:
        client.get_dataset_policy(dataset)
    except (NotFoundError, PermissionDeniedError):
        return False
    return True


def cmd_export(args: argparse.Namespace) -> int:
    from episodic.ops.export import (
        Progress,
        Pseudonymiser,
        default_key_file,
        export_dataset,
        load_or_create_key,
    )

    if args.pseudonym_key_file and not args.pseudonymise:
        raise ValueError("--pseudonym-key-file needs --pseudonymise")
    with connect(args) as client:
        # An export of a dataset that does not exist is almost surely a misspelt name: say
        # so instead of writing an empty export.
        if not _dataset_exists(client, args.dataset):
            print(
                f"episodic export: no dataset {args.dataset!r}: it holds no threads "
                "(check the name; `episodic datasets list` lists the datasets)",
                file=sys.stderr,
            )
            return 1
        pseudonymiser = None
        if args.pseudonymise:
            key_file = Path(args.pseudonym_key_file or default_key_file()).expanduser()
            key, created = load_or_create_key(key_file)
            if created:
                print(
                    f"episodic export: created a new pseudonym key in {key_file} (mode 0600); "
                    "keep it to get the same pseudonyms next time, and keep it secret",
                    file=sys.stderr,
                )
            pseudonymiser = Pseudonymiser(key)
        progress = Progress(sys.stderr, enabled=True if args.progress else None)
        if progress.enabled:
            progress.total_messages = _message_total(client, args.dataset)
        try:
            with _output(args.output) as out:
                counts = export_dataset(
                    client, args.dataset, out, pseudonymiser=pseudonymiser, progress=progress
                )
        except BrokenPipeError:  # `episodic export ds | head`: the reader had enough
            with contextlib.suppress(OSError):
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (no flush error at exit)
            return 0
    if args.output and args.output != "-":
        print(
            f"exported {counts.thread} thread(s), {counts.message} message(s), "
            f"{counts.episode} episode(s) to {args.output}",
            file=sys.stderr,
        )
    return 0


# --------------------------------------------------------------------------- replay


def _queries(args: argparse.Namespace) -> list[str]:
    queries = list(args.query or [])
    if args.queries:
        text = (
            sys.stdin.read()
            if args.queries == "-"
            else Path(args.queries).read_text(encoding="utf-8")
        )
        queries += [line.strip() for line in text.splitlines() if line.strip()]
    return queries


def _lines(path: str) -> tuple[IO[str], bool]:
    if path == "-":
        return sys.stdin, False
    return open(path, encoding="utf-8"), True  # closed by the caller


def cmd_replay(args: argparse.Namespace) -> int:
    from episodic.config import Settings

    if TYPE_CHECKING:  # mypy names tools/ by its folders (pyproject.toml, [tool.mypy])
        from tools.replay import replay
    else:
        from episodic.ops.replay import replay

    queries = _queries(args)
    if args.file == "-" and args.queries == "-":
        raise ValueError("the export and --queries cannot both come from standard input")
    show = args.progress or sys.stderr.isatty()

    def report(line: str) -> None:
        if show:
            print(f"episodic replay: {line}", file=sys.stderr, flush=True)

    source, close = _lines(args.file)
    try:
        result = replay(
            source,
            settings=Settings(),
            queries=queries,
            k=args.k,
            clock=args.clock,
            admin_url=args.database_url,
            report=report,
        )
    finally:
        if close:
            source.close()
    if args.json:
        print(json.dumps(result.as_json(), indent=2, ensure_ascii=False))
    else:
        print(result.render())
    return 0


# --------------------------------------------------------------------------- registration


def register(groups: CommandGroups) -> None:
    """Adds the data commands."""
    p = groups.add(
        GROUP,
        "export",
        EXPORT_HELP,
        parents=[connection_options()],
        epilog=EXPORT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        conflict_handler="resolve",
    )
    p.set_defaults(func=guarded(cmd_export), timeout=60.0)
    p.add_argument("dataset")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: stdout)")
    p.add_argument(
        "--pseudonymise",
        "--pseudonymize",
        action="store_true",
        help="mask names and ids with keyed pseudonyms for analytics (see below)",
    )
    p.add_argument(
        "--pseudonym-key-file",
        metavar="FILE",
        help="the pseudonym key (created, mode 0600, with a random key when missing; "
        "default: ~/.config/episodic/pseudonym.key)",
    )
    p.add_argument(
        "--progress",
        action="store_true",
        help="show progress on stderr even when it is not a terminal",
    )
    p.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # always JSON

    p = groups.add(
        GROUP,
        "replay",
        REPLAY_HELP,
        epilog=REPLAY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(func=guarded(cmd_replay))
    p.add_argument("file", metavar="FILE", help="an `episodic export` file (- for stdin)")
    p.add_argument(
        "--query",
        action="append",
        metavar="TEXT",
        help="compare recall's top threads for this query (repeatable)",
    )
    p.add_argument("--queries", metavar="FILE", help="more queries, one per line (- for stdin)")
    p.add_argument("-k", type=int, default=5, help="how many top threads to compare (5)")
    p.add_argument(
        "--clock",
        choices=("received", "created"),
        default="received",
        help="replay at the times messages were received (default) or their own timestamps",
    )
    p.add_argument(
        "--database-url",
        metavar="URL",
        help="a PostgreSQL with pgvector to create the scratch database on (a user that "
        "may create databases; default: an embedded PostgreSQL in a temporary directory)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--progress", action="store_true", help="report progress on stderr")
