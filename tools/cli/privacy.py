"""Privacy commands: erase a dataset or a thread (with a receipt), see and set a dataset's
retention and compaction, and rotate the master key of encryption at rest.

``erase`` and ``datasets`` go through the SDK (an admin key for the dataset);
``encryption`` works on the database and the keyring file directly, like ``migrate``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._common import (
    NO_DATABASE,
    CommandGroups,
    Handler,
    add_action,
    connect,
    connection_options,
    database_url,
    guarded,
    parse_limit,
    print_json,
    table,
    when,
)

GROUP = "privacy (erasure, retention, encryption)"


def _confirm(args: argparse.Namespace, what: str) -> bool:
    if args.yes:
        return True
    if not sys.stdin.isatty():
        print(f"refusing to erase {what} without --yes (standard input is not a terminal)")
        return False
    answer = input(f"Erase {what} for good? Type 'erase' to confirm: ")
    return answer.strip() == "erase"


def _show_receipt(receipt: Any) -> None:
    subject = (
        f"thread {receipt.thread_id} of dataset {receipt.dataset!r}"
        if receipt.scope == "thread"
        else f"dataset {receipt.dataset!r}"
    )
    print(f"erased {subject}")
    rows = [[table_name, n] for table_name, n in receipt.rows_deleted.items() if n]
    if rows:
        print(table(rows, ("TABLE", "ROWS")))
    took = (
        f" in {(receipt.finished_at - receipt.started_at).total_seconds():.2f} s"
        if receipt.finished_at and receipt.started_at
        else ""
    )
    print(f"  finished            {when(receipt.finished_at)}{took}")
    if receipt.scope == "dataset":
        destroyed = "destroyed" if receipt.data_key_destroyed else "none (stored in the clear)"
        print(f"  data key            {destroyed}")
        print(f"  API keys scrubbed   {receipt.api_keys_scrubbed}")
    print(f"  audit pseudonymised {receipt.audit_events_pseudonymised} event(s)")
    print(f"  receipt             {receipt.receipt_id}")
    print(f"  digest              {receipt.digest}")
    print("Keep the digest: the audit log keeps the receipt (action dataset.erase/thread.erase).")


def cmd_erase_dataset(args: argparse.Namespace) -> int:
    if not _confirm(args, f"every thread, message and episode of dataset {args.dataset!r}"):
        return 1
    with connect(args) as client:
        receipt = client.delete_dataset(args.dataset)
    if args.json:
        print_json(receipt)
    else:
        _show_receipt(receipt)
    return 0


def cmd_erase_thread(args: argparse.Namespace) -> int:
    if not _confirm(args, f"thread {args.thread_id}"):
        return 1
    with connect(args) as client:
        receipt = client.delete_thread(args.thread_id)
    if args.json:
        print_json(receipt)
    else:
        _show_receipt(receipt)
    return 0


def _days(value: int | None) -> str:
    return f"{value} days" if value else "never"


def cmd_datasets_list(args: argparse.Namespace) -> int:
    with connect(args) as client:
        page = client.list_datasets(prefix=args.prefix or "", page_size=args.limit)
    if args.json:
        print_json(page.items)
        return 0
    rows = [[d.dataset, d.thread_count, d.message_count, when(d.last_activity_at)] for d in page]
    print(table(rows, ("DATASET", "THREADS", "MESSAGES", "LAST ACTIVE")))
    return 0


def cmd_datasets_policy(args: argparse.Namespace) -> int:
    with connect(args) as client:
        changes: dict[str, Any] = {}  # what the options name; the rest stays as it is
        if args.reset:
            changes = {"retention_days": None, "compact_after_days": None}
        for option in ("retention_days", "compact_after_days"):
            if getattr(args, option) is not None:
                changes[option] = getattr(args, option)
        if args.language:
            changes["language"] = args.language
        if changes:
            policy = client.set_dataset_policy(args.dataset, **changes)
        else:
            policy = client.get_dataset_policy(args.dataset)
    if args.json:
        print_json(policy)
        return 0
    own = " (its own)" if policy.retention_days else " (global default)"
    own_c = " (its own)" if policy.compact_after_days else " (global default)"
    print(f"dataset {policy.dataset!r}")
    print(f"  retention   {_days(policy.effective_retention_days)}{own}")
    print(f"  compaction  {_days(policy.effective_compact_after_days)}{own_c}")
    print(f"  encrypted   {'yes (its own data key)' if policy.encrypted else 'no'}")
    origin = {
        "default": "the default: detected from its text once there is enough of it",
        "detected": "detected from its text",
        "set": "set",
    }.get(policy.language_origin, "text-search configuration of its index")
    print(f"  language    {policy.language} ({origin})")
    return 0


# ---------------------------------------------------------------- encryption (database)


def _database(args: argparse.Namespace) -> Any:
    from episodic.store.db import make_engine

    url = database_url(args)
    if not url:
        raise ValueError(NO_DATABASE)
    return make_engine(url, pool_size=1, application_name="episodic-encryption")


def _keyring(args: argparse.Namespace) -> Any:
    from episodic.config import get_settings
    from episodic.crypto import KEYRING_FILE_NAME, LocalKeyring

    settings = get_settings()
    path = args.key_file or settings.privacy.master_key_file
    if path is None:
        default = settings.database.data_dir.expanduser().resolve() / KEYRING_FILE_NAME
        if not default.exists():
            raise ValueError(
                "no keyring: pass --key-file or set EPISODIC_MASTER_KEY_FILE "
                f"(`episodic up` keeps one at {default})"
            )
        path = default
    return LocalKeyring.load(path)


def cmd_encryption_status(args: argparse.Namespace) -> int:
    from episodic.store import keyring_admin

    engine = _database(args)
    try:
        keyring = _keyring(args)
        with engine.connect() as conn:
            counts = keyring_admin.wrapped_by(conn)
    finally:
        engine.dispose()
    print(f"keyring {keyring.path}: active master key {keyring.active_key_id}")
    rows = [[k, n, "active" if k == keyring.active_key_id else ""] for k, n in counts.items()]
    rows += [[k, 0, "in keyring, unused"] for k in keyring.key_ids if k not in counts]
    print(table(rows, ("MASTER KEY", "DATA KEYS", "")))
    return 0


def cmd_encryption_rotate(args: argparse.Namespace) -> int:
    from episodic.store import keyring_admin

    engine = _database(args)
    try:
        keyring = _keyring(args)
        new = keyring.add_key()
        keyring.save()  # first: a crash after this leaves every key still unwrappable
        print(f"new active master key {new} written to {keyring.path}")
        rewrapped = keyring_admin.rewrap_all(engine, keyring)
    finally:
        engine.dispose()
    print(
        f"re-wrapped {rewrapped} data key(s) with {new}; no data was rewritten. Services "
        "pick the new key up from the file on their next key lookup. Once backups taken "
        "before now have expired, `episodic encryption retire KEY` removes an old key."
    )
    return 0


def cmd_encryption_retire(args: argparse.Namespace) -> int:
    from episodic.store import keyring_admin

    engine = _database(args)
    try:
        keyring = _keyring(args)
        with engine.connect() as conn:
            still = keyring_admin.wrapped_by(conn).get(args.key_id, 0)
    finally:
        engine.dispose()
    if still:
        print(f"master key {args.key_id} still wraps {still} data key(s): rotate first")
        return 1
    keyring.retire(args.key_id)
    keyring.save()
    print(f"master key {args.key_id} removed from {keyring.path}")
    return 0


def register(groups: CommandGroups) -> None:
    """Adds the privacy commands."""
    common = connection_options()

    def add(parent: Any, name: str, fn: Handler, help: str) -> argparse.ArgumentParser:
        return add_action(parent, name, fn, help, common)

    erase = groups.add(GROUP, "erase", "erase a dataset or a thread for good, with a receipt")
    sub = erase.add_subparsers(dest="erase_command", required=True, metavar="WHAT")
    p = add(sub, "dataset", cmd_erase_dataset, "erase every row of a dataset and its data key")
    p.add_argument("dataset")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(timeout=3600.0)
    p = add(sub, "thread", cmd_erase_thread, "erase one thread and all derived from it")
    p.add_argument("thread_id")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(timeout=600.0)

    datasets = groups.add(GROUP, "datasets", "list datasets; see or set retention and compaction")
    sub = datasets.add_subparsers(dest="datasets_command", required=True, metavar="ACTION")
    p = add(sub, "list", cmd_datasets_list, "datasets, most recently active first")
    p.add_argument("--prefix", help='only datasets starting with this, e.g. "acme/"')
    p.add_argument("--limit", type=parse_limit, default=100)
    p = add(sub, "policy", cmd_datasets_policy, "show a dataset's policy, or set it")
    p.add_argument("dataset")
    p.add_argument("--retention-days", type=int, help="purge threads quiet this many days")
    p.add_argument("--compact-after-days", type=int, help="compact threads quiet this long")
    p.add_argument(
        "--language",
        help="language of the dataset's text: fr, de, es, pt-BR, … (or 'english'); "
        "'auto': detected from its text",
    )
    p.add_argument(
        "--reset", action="store_true", help="back to the global defaults (no days given)"
    )

    encryption = groups.add(GROUP, "encryption", "master keys of encryption at rest")
    sub = encryption.add_subparsers(dest="encryption_command", required=True, metavar="ACTION")
    database = argparse.ArgumentParser(add_help=False)
    database.add_argument("--database-url", help="defaults to EPISODIC_DATABASE_URL")
    database.add_argument(
        "--key-file", help="the keyring (default: EPISODIC_MASTER_KEY_FILE, or the data dir's)"
    )
    p = sub.add_parser("status", parents=[database], help="master keys and what they wrap")
    p.set_defaults(func=guarded(cmd_encryption_status))
    p = sub.add_parser(
        "rotate",
        parents=[database],
        help="add a master key and re-wrap every data key with it (no data rewritten)",
    )
    p.set_defaults(func=guarded(cmd_encryption_rotate))
    p = sub.add_parser("retire", parents=[database], help="remove an unused master key")
    p.set_defaults(func=guarded(cmd_encryption_retire))
    p.add_argument("key_id")
