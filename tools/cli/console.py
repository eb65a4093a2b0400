"""``episodic console``: serve the web console (:mod:`episodic.console`) over the services'
public RPCs. It is an admin's tool (it reads through the SDK like ``episodes`` and
``status`` and needs no server extra), so it is listed with the admin commands."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from ._common import CommandGroups, connect, connection_options, guarded
from .admin import GROUP

DEFAULT_PORT = 8780


def cmd_console(args: argparse.Namespace) -> int:
    from episodic.console import ConsoleApp, ConsoleServer
    from episodic.console.app import ConsoleConfigError, http_key_for, is_loopback

    mode = (args.auth or os.environ.get("EPISODIC_AUTH") or "auto").strip().lower()
    client = connect(args)
    try:
        http_key = http_key_for(mode, args.host, client.api_key)
    except ConsoleConfigError as err:
        client.close()
        print(f"episodic console: {err}", file=sys.stderr)
        return 2
    if args.verbose:
        logging.getLogger("episodic.console").setLevel(logging.DEBUG)
    from episodic.semconv import TRACE_FILE_ENV

    app = ConsoleApp(
        client,
        http_key=http_key,
        loopback=is_loopback(args.host),
        spans=args.spans or os.environ.get(TRACE_FILE_ENV) or None,
    )
    try:
        server = ConsoleServer(app, args.host, args.port)
    except OSError as err:
        app.close()
        client.close()
        print(f"episodic console: cannot listen on {args.host}:{args.port}: {err}", file=sys.stderr)
        return 1
    if http_key is not None:
        access = "sign in with any user name and the API key as password"
    elif mode == "disabled":
        access = "auth disabled: anyone who reaches it reads memory" + (
            " with its key" if client.api_key else ""
        )
    else:
        access = "development mode: no key, loopback only"
    print(f"episodic console at {server.url} ({access}); Ctrl-C stops it", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
        app.close()
        client.close()
    return 0


def register(groups: CommandGroups) -> None:
    """Adds ``episodic console``."""
    p = groups.add(
        GROUP,
        "console",
        "serve a web console to look at memory (read-only, plus retry/delete)",
        parents=[connection_options()],
    )
    for action in p._actions:  # --json (from the shared options) means nothing here
        if action.dest == "json":
            action.help = argparse.SUPPRESS
    p.description = (
        "Serves a web console over the services' public RPCs (no database access): datasets "
        "and threads, a thread's messages inside its episodes' windows, a dataset's timeline, "
        "a recall playground and the live pipeline status. Its only writes are the admin "
        "actions the RPCs allow (retry a failed episode, delete one). It calls every RPC with "
        "its API key (--api-key or EPISODIC_API_KEY) and asks browsers for the same key "
        "(HTTP Basic: any user name, the key as password); without a key it serves loopback "
        "only (development mode)."
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port to listen on ({DEFAULT_PORT}; 0: any)"
    )
    p.add_argument(
        "--auth",
        choices=("auto", "required", "disabled"),
        help="whether browsers must present the key (default: EPISODIC_AUTH, else auto: "
        "when the console has a key; without one, loopback only)",
    )
    p.add_argument(
        "--spans",
        help="the services' span file (default: EPISODIC_TRACE_FILE) or OTLP/JSON lines: an "
        "episode's page shows its journey from it, as `episodic trace` does",
    )
    p.add_argument("--verbose", action="store_true", help="log every request (path only)")
    p.set_defaults(func=guarded(cmd_console))
