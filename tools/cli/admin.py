"""Admin commands, for an operator looking after memory: list, read, search, retry and
delete episodes, and see whether the pipeline moves (``status``). Every call goes through
the SDK (:class:`episodic.sdk.client.EpisodicClient`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from episodic.sdk.client import EPISODE_STATUSES

from ._common import (
    EPISODE_HEADERS,
    NO_DATABASE,
    CommandGroups,
    Handler,
    add_action,
    age,
    connect,
    connection_options,
    database_url,
    episode_rows,
    guarded,
    parse_limit,
    parse_time,
    print_json,
    show_episode,
    table,
    when,
)

GROUP = "admin (looking after memory)"


def cmd_episodes_list(args: argparse.Namespace) -> int:
    with connect(args) as client:
        page = client.list_episodes(
            args.dataset,
            status=args.status,
            thread_id=args.thread,
            page_size=args.limit,
            page_token=args.page_token or "",
        )
    if args.json:
        print_json(page)
        return 0
    print(table(episode_rows(page.items), EPISODE_HEADERS))
    if page.next_page_token:
        print(f"\nmore: --page-token {page.next_page_token}")
    return 0


def _episode_action(
    args: argparse.Namespace, call: str, describe: Callable[[Any], str] | None
) -> int:
    """get/retry/delete: one call by episode id, shown as JSON, in full, or as one line."""
    with connect(args) as client:
        episode = getattr(client, call)(args.episode_id)
    if args.json:
        print_json(episode)
    elif describe is None:
        show_episode(episode)
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
        lambda e: (
            f"event {e.episode_id} is erased"
            if e.is_event
            else f"episode {e.episode_id} is now {e.status} (kept for provenance)"
        ),
    )


def cmd_episodes_search(args: argparse.Namespace) -> int:
    with connect(args) as client:
        found = client.search_episodes(args.dataset, args.query, limit=args.limit)
    if args.json:
        print_json(found)
        return 0
    rows = [
        [
            f"{s.similarity:.3f}",
            s.episode.episode_id,
            when(s.episode.ended_at),
            s.episode.thread_label or s.episode.thread_id[:8],
            s.episode.summary,
        ]
        for s in found
    ]
    print(table(rows, ("SIMILARITY", "EPISODE", "ENDED", "THREAD", "SUMMARY")))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Prints whether the pipeline moves (the Summariser's GetPipelineStatus)."""
    with connect(args) as client:
        status = client.pipeline_status(args.dataset, check_providers=not args.skip_providers)
    if args.json:
        print_json(status)
        return 0
    scope = f"dataset {args.dataset}" if args.dataset else "all datasets"
    print(f"pipeline status ({scope}) at {when(status.observed_at)}")
    counts = ", ".join(f"{k} {v}" for k, v in sorted(status.status_counts.items())) or "none"
    semantic = ", ".join(f"{k} {v}" for k, v in sorted(status.semantic_status_counts.items()))
    print(f"  episodes:           {counts}")
    print(f"  semantic:           {semantic or 'none'}")
    print(f"  oldest pending:     {age(status.oldest_pending_age)}")
    print(f"  oldest processing:  {age(status.oldest_processing_age)}")
    print(
        f"  timers:             {status.timers_waiting} waiting, {status.timers_due} overdue "
        f"(most overdue {age(status.oldest_due_timer_age)})"
    )
    print(f"  threads uncaptured: {status.threads_uncaptured}")
    if status.pending_waiting:
        latest = when(status.latest_retry_at)
        print(f"  backing off:        {status.pending_waiting} (latest retry {latest})")
    if status.threads_without_timer:
        print(
            f"  notices lost:       {status.threads_without_timer} thread(s) with no timer "
            f"(quiet for up to {age(status.oldest_untimed_thread_age)}; the catch-up arms them)"
        )
    for label, health in (("llm", status.llm), ("embedder", status.embedder)):
        if health is not None:
            state = "ok" if health.ok else f"FAILING: {health.error}"
            print(f"  {label + ':':<19} {health.name} {state}")
    if status.failed_episodes:
        print("  failed for good (episodes retry <id> re-runs one):")
        for failure in status.failed_episodes:
            stamp = f"{failure.updated_at:%m-%d %H:%M}" if failure.updated_at else "-"
            print(f"    {stamp} {failure.episode_id} {failure.error[:100]}")
    if status.recent_errors:
        print("  recent errors:")
        for failure in status.recent_errors:
            stamp = f"{failure.updated_at:%m-%d %H:%M}" if failure.updated_at else "-"
            print(
                f"    {stamp} {failure.episode_id} "
                f"[{failure.status}, retry {failure.retry_count}] {failure.error[:100]}"
            )
    return 0


# --------------------------------------------------------------------------- API keys
# Against the database directly (like `episodic migrate`): the first admin key must exist
# before anything is exposed. The AdminService RPCs do the same over gRPC.


def _expiry(value: str) -> datetime:
    """``30d``, ``12h``, ``90m`` from now, or an ISO 8601 time."""
    units = {"d": 86400, "h": 3600, "m": 60}
    if value and value[-1] in units and value[:-1].isdigit():
        return datetime.now(UTC) + timedelta(seconds=int(value[:-1]) * units[value[-1]])
    return parse_time(value)


def _keys_database(args: argparse.Namespace) -> Any:
    from episodic.store.db import make_engine

    url = database_url(args)
    if not url:
        raise ValueError(f"keys are managed in the database: {NO_DATABASE}")
    return make_engine(url, pool_size=1, application_name="episodic-keys")


def _key_row(row: Any) -> list[Any]:
    state = "revoked" if row["revoked_at"] else "active"
    expires = when(row["expires_at"]) if row["expires_at"] else "never"
    return [
        f"ek_{row['prefix']}",
        row["role"],
        ",".join(row["datasets"]),
        state,
        expires,
        when(row["created_at"]),
        row["name"],
    ]


_KEY_HEADERS = ("PREFIX", "ROLE", "DATASETS", "STATE", "EXPIRES", "CREATED", "NAME")


def cmd_keys_create(args: argparse.Namespace) -> int:
    from episodic.access import Role
    from episodic.store import audit, keys

    engine = _keys_database(args)
    try:
        with engine.begin() as conn:
            minted = keys.create_key(
                conn,
                role=Role.parse(args.role),
                datasets=args.dataset,
                name=args.name or "",
                expires_at=args.expires,
                created_by="cli",
            )
            audit.record(
                conn,
                key_prefix="cli",
                action="key.create",
                target=str(minted.row["key_id"]),
                details={
                    "prefix": f"ek_{minted.row['prefix']}",
                    "role": args.role,
                    "datasets": list(minted.row["datasets"]),
                },
            )
    finally:
        engine.dispose()
    row = minted.row
    print(
        f"created {row['role']} key ek_{row['prefix']} for {', '.join(row['datasets'])}"
        + (f", expiring {when(row['expires_at'])}" if row["expires_at"] else ""),
        file=sys.stderr,
    )
    print("it is shown once and stored only as a hash; keep it in a secret store:", file=sys.stderr)
    print(minted.secret)  # alone on the last line of standard output
    return 0


def cmd_keys_list(args: argparse.Namespace) -> int:
    from episodic.store import keys

    engine = _keys_database(args)
    try:
        with engine.connect() as conn:
            rows, _ = keys.list_keys(conn, include_inactive=args.all, before=None, limit=args.limit)
    finally:
        engine.dispose()
    print(table([_key_row(r) for r in rows], _KEY_HEADERS))
    return 0


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    from episodic.store import audit, keys

    engine = _keys_database(args)
    try:
        with engine.begin() as conn:
            row = keys.revoke_key(conn, args.key)
            audit.record(
                conn,
                key_prefix="cli",
                action="key.revoke",
                target=str(row["key_id"]),
                details={"prefix": f"ek_{row['prefix']}"},
            )
    finally:
        engine.dispose()
    print(f"key ek_{row['prefix']} is revoked (every replica refuses it within seconds)")
    return 0


# ------------------------------------------------------------------------- entities


def _entity_line(entity: Any) -> list[Any]:
    aliases = ", ".join(f"{a} ({n})" for a, n in entity.aliases)
    return [entity.entity_id, entity.name, entity.episode_count, aliases]


_ENTITY_HEADERS = ("ENTITY", "NAME", "EPISODES", "ALIASES (EPISODES)")


def cmd_entities_list(args: argparse.Namespace) -> int:
    with connect(args) as client:
        page = client.list_entities(
            args.dataset, page_size=args.limit, page_token=args.page_token or ""
        )
    if args.json:
        print_json(page)
        return 0
    print(table([_entity_line(e) for e in page.items], _ENTITY_HEADERS))
    if page.next_page_token:
        print(f"\nmore: --page-token {page.next_page_token}")
    return 0


def cmd_entities_merge(args: argparse.Namespace) -> int:
    with connect(args) as client:
        merged = client.merge_entities(args.dataset, args.into, args.sources)
    if args.json:
        print_json(merged)
    else:
        print(table([_entity_line(merged)], _ENTITY_HEADERS))
    return 0


def cmd_entities_split(args: argparse.Namespace) -> int:
    with connect(args) as client:
        split = client.split_entity(args.dataset, args.alias)
    if args.json:
        print_json(split)
    else:
        print(
            table([_entity_line(split.split_off), _entity_line(split.remaining)], _ENTITY_HEADERS)
        )
    return 0


def cmd_entities_timeline(args: argparse.Namespace) -> int:
    with connect(args) as client:
        page = client.entity_timeline(
            args.dataset, args.entity, page_size=args.limit, page_token=args.page_token or ""
        )
    if args.json:
        print_json(page)
        return 0
    if page.entity is not None:
        print(
            f"{page.entity.name} ({page.entity.entity_id}): {page.entity.episode_count} episode(s)"
        )
    print(table(episode_rows(page.items), EPISODE_HEADERS))
    if page.next_page_token:
        print(f"\nmore: --page-token {page.next_page_token}")
    return 0


def cmd_entities_backfill(args: argparse.Namespace) -> int:
    from episodic.config import get_settings
    from episodic.store import entities
    from episodic.store.vault import make_vault

    engine = _keys_database(args)
    try:
        settings = get_settings()
        vault = make_vault(settings.privacy, data_dir=settings.database.data_dir)
        done = entities.backfill(engine, vault, dataset=args.dataset)
    finally:
        engine.dispose()
    print(
        f"filed the entities of {done.episodes} episode(s) of {done.datasets} dataset(s) "
        f"({done.spellings} spelling(s)); re-running changes nothing"
    )
    return 0


def register(groups: CommandGroups) -> None:
    """Adds the admin commands."""
    common = connection_options()

    def add(parent: Any, name: str, fn: Handler, help: str) -> argparse.ArgumentParser:
        return add_action(parent, name, fn, help, common)

    episodes = groups.add(GROUP, "episodes", "list, get, search, retry and delete episodes")
    esub = episodes.add_subparsers(dest="episodes_command", required=True, metavar="ACTION")
    p = add(esub, "list", cmd_episodes_list, "a dataset's episodes, newest first")
    p.add_argument("dataset")
    p.add_argument("--status", choices=EPISODE_STATUSES)
    p.add_argument("--thread", help="only this thread's episodes")
    p.add_argument("--limit", type=parse_limit, default=20)
    p.add_argument("--page-token")
    p = add(esub, "get", cmd_episodes_get, "one episode in any status")
    p.add_argument("episode_id")
    p = add(esub, "search", cmd_episodes_search, "a dataset's current episodes by text")
    p.add_argument("dataset")
    p.add_argument("query")
    p.add_argument("--limit", type=parse_limit, default=5)
    p = add(esub, "retry", cmd_episodes_retry, "put a failed episode back to pending")
    p.add_argument("episode_id")
    p = add(
        esub, "delete", cmd_episodes_delete, "soft-delete an episode (archived), or erase an event"
    )
    p.add_argument("episode_id")

    p = groups.add(GROUP, "status", "show whether the episode pipeline is moving", parents=[common])
    p.set_defaults(func=guarded(cmd_status), timeout=30.0)
    p.add_argument("--dataset", help="one dataset (default: all)")
    p.add_argument("--address", dest="summariser", metavar="HOST:PORT", help="same as --summariser")
    p.add_argument("--skip-providers", action="store_true", help="do not probe the LLM")

    keys = groups.add(GROUP, "keys", "create, list and revoke API keys (in the database)")
    ksub = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    database = argparse.ArgumentParser(add_help=False)
    database.add_argument("--database-url", help="defaults to EPISODIC_DATABASE_URL")
    p = ksub.add_parser(
        "create",
        parents=[database],
        help="mint a key; prints it alone on the last line",
        description="Mints an API key and prints it alone on the last line of standard "
        "output (it is stored only as a hash).",
    )
    p.set_defaults(func=guarded(cmd_keys_create))
    p.add_argument(
        "--dataset",
        action="append",
        required=True,
        help="a dataset, a prefix like 'acme/*', or '*' for all (repeatable)",
    )
    p.add_argument("--role", required=True, choices=("reader", "writer", "admin", "service"))
    p.add_argument("--name", help='what the key is for, e.g. "support-bot prod"')
    p.add_argument("--expires", type=_expiry, help="30d, 12h, 90m, or an ISO 8601 time")
    p = ksub.add_parser("list", parents=[database], help="active keys, newest first")
    p.set_defaults(func=guarded(cmd_keys_list))
    p.add_argument("--all", action="store_true", help="include revoked and expired keys")
    p.add_argument("--limit", type=parse_limit, default=100)
    p = ksub.add_parser(
        "revoke", parents=[database], help="revoke a key by the key, its prefix or its id"
    )
    p.set_defaults(func=guarded(cmd_keys_revoke))
    p.add_argument("key", metavar="KEY_OR_PREFIX")

    ents = groups.add(GROUP, "entities", "a dataset's entities: list, merge, split, timeline")
    nsub = ents.add_subparsers(dest="entities_command", required=True, metavar="ACTION")
    p = add(nsub, "list", cmd_entities_list, "a dataset's entities with aliases and counts")
    p.add_argument("dataset")
    p.add_argument("--limit", type=parse_limit, default=50)
    p.add_argument("--page-token")
    p = add(nsub, "merge", cmd_entities_merge, "merge entities into one (admin)")
    p.add_argument("dataset")
    p.add_argument("into", help="the entity that remains: its id or any alias")
    p.add_argument("sources", nargs="+", help="entities merged into it: ids or aliases")
    p = add(nsub, "split", cmd_entities_split, "split an alias off into its own entity (admin)")
    p.add_argument("dataset")
    p.add_argument("alias")
    p = add(nsub, "timeline", cmd_entities_timeline, "every episode about an entity, in order")
    p.add_argument("dataset")
    p.add_argument("entity", help="its id or any of its names")
    p.add_argument("--limit", type=parse_limit, default=20)
    p.add_argument("--page-token")
    p = nsub.add_parser(
        "backfill",
        parents=[database],
        help="file existing episodes' entities in the canon (idempotent; needs the keyring)",
    )
    p.set_defaults(func=guarded(cmd_entities_backfill))
    p.add_argument("--dataset", help="one dataset (default: all)")
