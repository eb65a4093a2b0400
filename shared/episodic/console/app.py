"""The console's HTTP side: a WSGI application (a table of routes → views) and a threaded
server from the standard library (:mod:`wsgiref`), so the console installs with the SDK
alone.

Security, in order of a request:

1. **Host** — bound to loopback, only loopback host names are served (a DNS-rebinding page
   cannot read the console through the browser).
2. **Credentials** — when the console has a key to ask for (see :func:`http_key_for`), every
   page needs it: HTTP Basic (any user name, the API key as password; browsers prompt) or
   ``Authorization: Bearer <key>``. The health check and static files need none.
3. **Writes** — the only POSTs are the admin actions the RPCs allow (retry, delete); each
   needs the session cookie and the CSRF token of that session (a session per browser,
   bounded in number and time), and is refused when its ``Origin`` is ``null`` or another
   origin, when its ``Referer`` (without an ``Origin``) is another origin, or when
   ``Sec-Fetch-Site`` says another site (:mod:`episodic.console.csrf`).
4. **Output** — every page is escaped by construction (:mod:`episodic.console.views.html`)
   and served with a Content-Security-Policy that allows scripts and styles from the
   console itself only (no inline script, no eval), no framing, no caching, and a referrer
   for the console's own requests only (``same-origin``: a browser then sends the page's
   origin with a form, where ``no-referrer`` made it ``null``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import logging
import re
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from http import HTTPStatus
from importlib import resources
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from episodic.console.csrf import (
    STALE,
    Session,
    Sessions,
    cookie_name,
    origin_refusal,
    session_cookie,
)
from episodic.console.views import (
    BadRequest,
    Ctx,
    Fragment,
    Page,
    Redirect,
    View,
    datasets,
    episode,
    pipeline,
    procedures,
    recall,
    thread,
    timeline,
)
from episodic.console.views.html import html
from episodic.console.views.layout import error_panel
from episodic.console.views.layout import page as layout
from episodic.sdk.client import (
    EpisodicRpcError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    UnauthenticatedError,
)

if TYPE_CHECKING:
    from episodic.sdk.client import EpisodicClient

__all__ = [
    "AUTH_MODES",
    "ConsoleApp",
    "ConsoleConfigError",
    "ConsoleServer",
    "host_name",
    "http_key_for",
    "is_loopback",
]

logger = logging.getLogger("episodic.console")

AUTH_MODES = ("auto", "required", "disabled")
MAX_FORM_BYTES = 16 * 1024
LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}
STATIC_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".md": "text/plain; charset=utf-8",
    ".svg": "image/svg+xml",
    ".LICENSE": "text/plain; charset=utf-8",
}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = [
    ("Content-Security-Policy", CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "same-origin"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
]


class ConsoleConfigError(ValueError):
    """The console refuses to start as configured (said in one sentence)."""


def is_loopback(host: str) -> bool:
    """Whether a host (a bind address or a Host header's name) is this machine only."""
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


#: A Host header (RFC 9110 ``uri-host [ ":" port ]``), strictly: a name of letters, digits,
#: dots and hyphens, or a bracketed IPv6 address, then an optional port of digits only.
#: Nothing else (``127.0.0.1:80@evil.com``, ``[::1]evil.com``, an empty value) is a host.
_HOST = re.compile(
    r"(?:\[(?P<ip6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?\.?))"
    r"(?::[0-9]{0,5})?"
)


def host_name(host: str) -> str | None:
    """The host name of a Host header without its port (an IPv6 address without its
    brackets), or None when the header is not a well-formed ``host[:port]``."""
    match = _HOST.fullmatch(host)
    if match is None:
        return None
    return match["ip6"] if match["ip6"] is not None else match["name"].rstrip(".")


def http_key_for(mode: str, host: str, api_key: str | None) -> str | None:
    """The key a browser must present to the console, mirroring ``EPISODIC_AUTH``:

    - ``required``: the console needs a key, and so does every browser (the same key);
    - ``auto``: with a key, as required; without one only on loopback (development mode,
      like the services), and any other address refuses to start;
    - ``disabled``: no key asked of browsers, on any address (said deliberately).
    """
    if mode not in AUTH_MODES:
        raise ConsoleConfigError(f"auth mode {mode!r} is not one of {', '.join(AUTH_MODES)}")
    if mode == "disabled":
        return None
    if api_key:
        return api_key
    if mode == "required":
        raise ConsoleConfigError(
            "auth is required: give the console an API key (--api-key or EPISODIC_API_KEY); "
            "browsers then sign in with it"
        )
    if is_loopback(host):
        return None
    raise ConsoleConfigError(
        f"the console would serve memory without a key on {host}, beyond this machine: "
        "give it an API key (--api-key or EPISODIC_API_KEY), bind it to 127.0.0.1, or "
        "choose --auth disabled deliberately"
    )


# --------------------------------------------------------------------------- requests


class Request:
    """What a view's caller needs from a WSGI environ."""

    def __init__(self, environ: Mapping[str, Any]) -> None:
        self.environ = environ
        self.method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        self.path = str(environ.get("PATH_INFO", "/")) or "/"
        raw = parse_qs(str(environ.get("QUERY_STRING", "")), keep_blank_values=True)
        self.query = {k: v[0] for k, v in raw.items()}

    def header(self, name: str) -> str:
        return str(self.environ.get("HTTP_" + name.upper().replace("-", "_"), ""))

    @property
    def tls(self) -> bool:
        return self.environ.get("wsgi.url_scheme") == "https"

    @property
    def port(self) -> str:
        """The port the browser sees (the Host header's), else the one reached."""
        host = self.header("Host")
        if host and not host.endswith("]") and ":" in host:
            return host.rsplit(":", 1)[1]
        if host:
            return "443" if self.tls else "80"
        return str(self.environ.get("SERVER_PORT", ""))

    def cookie(self, name: str) -> str | None:
        """A cookie's value. Parsed by hand: cookies do not tell ports apart, so the header
        may carry other local applications' cookies, and one that ``http.cookies`` cannot
        parse must not hide ours."""
        for pair in self.header("Cookie").split(";"):
            key, sep, value = pair.strip().partition("=")
            if sep and key == name:
                return value.strip().strip('"')
        return None

    @property
    def htmx_target(self) -> str | None:
        if self.header("HX-Request") != "true" or self.header("HX-History-Restore-Request"):
            return None
        return self.header("HX-Target") or ""

    def form(self) -> dict[str, str]:
        try:
            length = int(self.environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > MAX_FORM_BYTES:
            raise BadRequest("the form is too large")
        body = self.environ["wsgi.input"].read(length) if length > 0 else b""
        parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        return {k: v[0] for k, v in parsed.items()}


Response = tuple[int, list[tuple[str, str]], bytes]


def _status_line(code: int) -> str:
    return f"{code} {HTTPStatus(code).phrase}"


def _html_response(code: int, body: str, extra: Iterable[tuple[str, str]] = ()) -> Response:
    headers = [
        ("Content-Type", "text/html; charset=utf-8"),
        ("Cache-Control", "no-store"),
        ("Vary", "HX-Request, HX-Target"),
        *SECURITY_HEADERS,
        *extra,
    ]
    return code, headers, body.encode("utf-8")


def _rpc_status(err: EpisodicRpcError) -> tuple[int, str, str]:
    """HTTP status, title and hint of a failed call."""
    if isinstance(err, NotFoundError):
        return 404, "Not found", "It does not exist, or the console's key does not cover it."
    if isinstance(err, PermissionDeniedError):
        return 403, "Not allowed", "The console's API key does not allow this."
    if isinstance(err, UnauthenticatedError):
        return (
            502,
            "The services refused the console's API key",
            "Start the console with a valid key (--api-key or EPISODIC_API_KEY).",
        )
    if isinstance(err, InvalidArgumentError):
        return 400, "The services refused the request", ""
    if isinstance(err, FailedPreconditionError):
        return 409, "Not possible in the episode's state", ""
    name = err.code.name
    if name == "UNAVAILABLE":
        return 503, "A service is unavailable", "Is `episodic up` running? Try again shortly."
    if name == "DEADLINE_EXCEEDED":
        return 504, "A service did not answer in time", ""
    if name == "RESOURCE_EXHAUSTED":
        return 429, "Rate limited", "Wait a moment and try again."
    return 502, f"A service failed ({name})", ""


# --------------------------------------------------------------------------- the app


def _static_version() -> str:
    digest = hashlib.sha256()
    for name in ("console.css", "console.js", "htmx.min.js"):
        digest.update(_static_file(name) or b"")
    return digest.hexdigest()[:12]


def _static_file(name: str) -> bytes | None:
    folder = resources.files("episodic.console.static")
    if "/" in name or "\\" in name or name.startswith("."):
        return None
    entry = folder / name
    if not entry.is_file():
        return None
    return entry.read_bytes()


class ConsoleApp:
    """The WSGI application. ``http_key``: what browsers must present (None: nothing);
    ``loopback``: whether the server is bound to loopback (then only loopback host names
    are served); ``spans``: the services' span file (or OTLP/JSON lines), for the journey
    on an episode's page (None: the page says how to get one)."""

    def __init__(
        self,
        client: EpisodicClient,
        *,
        http_key: str | None = None,
        loopback: bool = True,
        workers: int = 8,
        sessions: Sessions | None = None,
        spans: str | None = None,
    ) -> None:
        self.client = client
        # The services' span file (EPISODIC_TRACE_FILE) or OTLP/JSON: an episode's page shows
        # its journey from it, as `episodic trace` does. Fixed here, never from a request.
        self.spans = spans
        self.http_key = http_key
        self.loopback = loopback
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="console-rpc")
        # A session per browser, each with its CSRF token (see episodic.console.csrf).
        self.sessions = sessions if sessions is not None else Sessions()
        self.static_version = _static_version()
        self.routes: dict[tuple[str, str], View] = {
            ("GET", "/"): datasets.datasets,
            ("GET", "/dataset"): datasets.threads,
            ("GET", "/thread"): thread.thread,
            ("GET", "/timeline"): timeline.timeline,
            ("GET", "/episode"): episode.episode,
            ("GET", "/recall"): recall.recall,
            ("GET", "/procedures"): procedures.procedures,
            ("GET", "/pipeline"): pipeline.pipeline,
            ("GET", "/pipeline/panel"): pipeline.pipeline_panel,
            ("GET", "/pipeline/providers"): pipeline.pipeline_providers,
            ("POST", "/episode/retry"): episode.retry,
            ("POST", "/episode/delete"): episode.delete,
        }

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    # -- WSGI

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        started = time.perf_counter()
        request = Request(environ)
        try:
            code, headers, body = self.handle(request)
        except Exception as err:  # our bug: logged by type and frames, never the content
            logger.error(
                "console error %s at %s:\n%s",
                type(err).__name__,
                request.path,
                "".join(traceback.format_tb(err.__traceback__)),
            )
            code, headers, body = _html_response(
                500, error_panel("The console failed", "An unexpected error; see its log.")
            )
        if request.method == "HEAD":
            body = b""
        headers = [*headers, ("Content-Length", str(len(body)))]
        start_response(_status_line(code), headers)
        # The path only: queries carry what users typed.
        logger.debug(
            "%s %s %d %.1f ms",
            request.method,
            request.path,
            code,
            (time.perf_counter() - started) * 1000,
        )
        return [body]

    def handle(self, request: Request) -> Response:
        if not self._host_allowed(request):
            return _html_response(421, "<p>This console answers on its own host name only.</p>")
        if request.path == "/healthz":
            return 200, [("Content-Type", "text/plain"), ("Cache-Control", "no-store")], b"ok\n"
        if request.path == "/favicon.ico":
            return self._static("favicon.svg")
        if request.path.startswith("/static/"):
            return self._static(request.path.removeprefix("/static/"))
        if not self._authenticated(request):
            return _html_response(
                401,
                "<p>This console needs the API key it was started with: sign in with any "
                "user name and the key as password.</p>",
                [("WWW-Authenticate", 'Basic realm="episodic console", charset="UTF-8"')],
            )
        method = "GET" if request.method == "HEAD" else request.method
        cookie = cookie_name(request.port, secure=request.tls)
        session = self.sessions.get(request.cookie(cookie))
        opened: Session | None = None
        if session is None and method == "GET" and self._may_open_session(request):
            session = opened = self.sessions.open()
        code, headers, body = self._route(request, method, session)
        if opened is not None:
            headers = [
                *headers,
                ("Set-Cookie", session_cookie(cookie, opened.sid, secure=request.tls)),
            ]
        return code, headers, body

    def _route(self, request: Request, method: str, session: Session | None) -> Response:
        view = self.routes.get((method, request.path))
        if view is None:
            allowed = {m for m, path in self.routes if path == request.path}
            if allowed:
                if "GET" in allowed:
                    allowed.add("HEAD")  # served as GET
                allow = ", ".join(sorted(allowed))
                return _html_response(405, "<p>Method not allowed.</p>", [("Allow", allow)])
            return self._page_error(request, 404, "Not found", "No such page.", "")
        form: dict[str, str] = {}
        if method == "POST":
            try:
                form = request.form()
            except BadRequest as err:
                return self._page_error(request, 400, "Bad request", str(err), "")
            refusal = self._csrf_refusal(request, form, session)
            if refusal:
                return self._page_error(request, 403, "Refused", refusal, "")
        ctx = Ctx(
            client=self.client,
            pool=self.pool,
            csrf=session.token if session is not None else "",
            path=request.path,
            query=request.query,
            form=form,
            now=datetime.now(UTC),
            target=request.htmx_target,
            spans=self.spans,
        )
        try:
            result = view(ctx)
        except BadRequest as err:
            return self._page_error(request, 400, "Bad request", str(err), "")
        except EpisodicRpcError as err:
            code, title, hint = _rpc_status(err)
            return self._page_error(request, code, title, err.message, hint)
        if isinstance(result, Redirect):
            # Headers carry Latin-1 at most: a Location is sent as ASCII, percent-encoded.
            location = quote(result.location, safe="/?#&=%;:@!$'()*+,~-._[]")
            return 303, [("Location", location), ("Cache-Control", "no-store")], b""
        if isinstance(result, Fragment):
            return _html_response(result.status, result.body)
        return _html_response(result.status, layout(result, static=self.static_version))

    # -- pieces

    def _page_error(
        self, request: Request, code: int, title: str, detail: str, hint: str
    ) -> Response:
        panel = error_panel(title, detail, hint)
        target = request.htmx_target
        if target is not None:
            # Swapped in by htmx: keep the element the next request targets.
            if target == "results":
                panel = html('<section id="results">{p}</section>', p=panel)
            return _html_response(code, panel)
        body = layout(Page(title, panel), static=self.static_version)
        return _html_response(code, body)

    def _host_allowed(self, request: Request) -> bool:
        if not self.loopback:
            return True
        if "HTTP_HOST" in request.environ:
            name = host_name(request.header("Host"))
        else:  # HTTP/1.0 without a Host header: the address it reached
            name = str(request.environ.get("SERVER_NAME", ""))
        return name is not None and is_loopback(name)

    def _authenticated(self, request: Request) -> bool:
        if self.http_key is None:
            return True
        scheme, _, value = request.header("Authorization").strip().partition(" ")
        presented = ""
        if scheme.lower() == "bearer":
            presented = value.strip()
        elif scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
            except (ValueError, UnicodeDecodeError):
                return False
            presented = decoded.partition(":")[2]
        return bool(presented) and hmac.compare_digest(
            presented.encode("utf-8"), self.http_key.encode("utf-8")
        )

    @staticmethod
    def _may_open_session(request: Request) -> bool:
        """Not for another site's subresources (an image, a fetch): they could only churn
        the sessions, and their answers are not pages with forms."""
        site = request.header("Sec-Fetch-Site")
        if site in ("", "same-origin", "none"):
            return True
        return request.header("Sec-Fetch-Dest") in ("document", "")

    @staticmethod
    def _csrf_refusal(request: Request, form: Mapping[str, str], session: Session | None) -> str:
        """Why a write is refused ("" when it is not): where it comes from first, then the
        session's token (compared in constant time)."""
        refusal = origin_refusal(
            host=request.header("Host") or str(request.environ.get("SERVER_NAME", "")),
            origin=request.header("Origin"),
            referer=request.header("Referer"),
            fetch_site=request.header("Sec-Fetch-Site"),
        )
        if refusal:
            return refusal
        presented = form.get("csrf", "").encode("utf-8", "surrogatepass")
        expected = session.token.encode("ascii") if session is not None else b""
        if session is None or not hmac.compare_digest(presented, expected):
            return STALE
        return ""

    def _static(self, name: str) -> Response:
        data = _static_file(name)
        suffix = "." + name.rsplit(".", 1)[-1] if "." in name else ""
        if data is None or suffix not in STATIC_TYPES:
            return 404, [("Content-Type", "text/plain")], b"not found\n"
        return (
            200,
            [
                ("Content-Type", STATIC_TYPES[suffix]),
                ("Cache-Control", "public, max-age=86400"),
                ("X-Content-Type-Options", "nosniff"),
                ("Cross-Origin-Resource-Policy", "same-origin"),
            ],
            data,
        )


# --------------------------------------------------------------------------- the server


class _Handler(WSGIRequestHandler):
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # the app logs each request (without its query)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("http: " + format, *args)


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class ConsoleServer:
    """The console's HTTP server; :meth:`serve_forever` in the foreground (the command),
    or :meth:`start` in a thread (tests, benchmarks). ``port`` 0 picks a free one."""

    def __init__(self, app: ConsoleApp, host: str = "127.0.0.1", port: int = 8780) -> None:
        self.app = app
        bind = host.strip("[]")
        server_class = _Server6 if ":" in bind else _Server
        self.httpd = make_server(bind, port, app, server_class=server_class, handler_class=_Handler)
        self.host = bind
        self.port = int(self.httpd.server_address[1])
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        if host in ("0.0.0.0", "[::]"):
            host = "127.0.0.1"
        return f"http://{host}:{self.port}"

    def serve_forever(self) -> None:
        self.httpd.serve_forever(poll_interval=0.5)

    def start(self) -> ConsoleServer:
        self._thread = threading.Thread(
            target=self.serve_forever, name="episodic-console", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(10)
        self.app.close()
