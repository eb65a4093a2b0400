"""``episodic console``: a web console to look at memory.

It reads only through the services' public RPCs (:class:`episodic.sdk.client.EpisodicClient`,
never the database) and writes only what those RPCs allow an admin (``RetryEpisode``,
``DeleteEpisode``). It uses one API key for every call (``--api-key`` or
``EPISODIC_API_KEY``) and asks browsers for the same key (see
:func:`episodic.console.app.http_key_for`); on loopback without a key it runs in
development mode, like the services.

Pages are rendered on the server (escaped by construction) and enhanced with htmx, which is
vendored in ``static/`` (no CDN): datasets and threads, a thread's messages inside its
episodes' windows (with the tools each message called and which call a tool result
answers), a dataset's timeline, a recall playground, a dataset's procedures (goal, steps,
support and the threads they were learned from) and the live pipeline status.

Standard library only (``wsgiref`` with a thread per request), so it runs from the core
install::

    episodic console                       # http://127.0.0.1:8780
    episodic console --host :: --api-key "$KEY"
"""

from __future__ import annotations

from episodic.console.app import ConsoleApp, ConsoleServer, http_key_for

__all__ = [
    "HTMX_LICENSE",
    "HTMX_SHA256",
    "HTMX_VERSION",
    "ConsoleApp",
    "ConsoleServer",
    "http_key_for",
]

#: The vendored htmx (``static/htmx.min.js`` from the npm package ``htmx.org``); see
#: ``static/VENDORED.md``.
HTMX_VERSION = "2.0.11"
HTMX_LICENSE = "0BSD"
HTMX_SHA256 = "d6fdc75f204e6bdefa99b69bf1e6d4ac69b8a364f77929f45c13476b4000f717"
