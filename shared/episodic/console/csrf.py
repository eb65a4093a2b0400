"""The console's defence of its writes (retry, delete) against cross-site requests, apart
from HTTP so it is tested without a server or a browser.

- **A session per browser.** A session is an unguessable id in a cookie (HttpOnly,
  SameSite=Strict, Secure and ``__Host-`` over TLS) that binds a CSRF token generated for
  it; the console's forms carry the token of the session that asked for the page, and a
  write needs both, compared in constant time. A token read from one browser (a page
  saved, a screenshot, a log) is useless in another, and a console restarted forgets every
  session.
- **Bounded.** At most :data:`CAPACITY` sessions are kept (the least recently used goes
  first), each for :data:`IDLE` seconds after its last request and :data:`LIFETIME` seconds
  at most: no client grows the console's memory without bound.
- **Same origin.** A write whose ``Origin`` is ``null`` (a sandboxed frame, a ``file:`` or
  ``data:`` page, a redirect from elsewhere: nothing tells it from a forged one) or another
  origin is refused, as is one a browser marks ``Sec-Fetch-Site`` cross-site or same-site;
  without an ``Origin``, a ``Referer`` must be the console's own. A client that is not a
  browser sends neither, and its session and token suffice.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = [
    "CAPACITY",
    "CROSS_ORIGIN",
    "IDLE",
    "LIFETIME",
    "NULL_ORIGIN",
    "STALE",
    "Session",
    "Sessions",
    "cookie_name",
    "origin_refusal",
    "session_cookie",
]

CAPACITY = 1024
IDLE = 12 * 3600.0
LIFETIME = 24 * 3600.0

STALE = "This form is stale or did not come from the console; reload the page."
CROSS_ORIGIN = "Actions are accepted from the console's own pages only."
NULL_ORIGIN = (
    "Refused: the request's Origin is null (a sandboxed frame, a file or data: page, or a "
    "redirect from another site), which cannot be told from a forged one. Actions are "
    "accepted from the console's own pages only."
)

_DEFAULT_PORTS = {"http": "80", "https": "443"}


@dataclass
class Session:
    """One browser's session: ``sid`` goes in its cookie, ``token`` in the forms it is
    served. Times are of the :class:`Sessions`' clock."""

    sid: str
    token: str
    opened: float
    used: float


def _key(sid: str) -> bytes:
    # Sessions are found by a digest of their id, so how long a lookup takes says nothing
    # about the ids kept.
    return hashlib.sha256(sid.encode("utf-8", "surrogatepass")).digest()


class Sessions:
    """The sessions a console keeps, thread-safe (the server answers on a thread per
    request), bounded by ``capacity``, ``idle`` and ``lifetime`` (seconds)."""

    def __init__(
        self,
        *,
        capacity: int = CAPACITY,
        idle: float = IDLE,
        lifetime: float = LIFETIME,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if capacity < 1:
            raise ValueError("sessions: the capacity must be at least 1")
        self.capacity = capacity
        self.idle = idle
        self.lifetime = lifetime
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: OrderedDict[bytes, Session] = OrderedDict()  # least recently used first

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def _expired(self, session: Session, now: float) -> bool:
        return now - session.used >= self.idle or now - session.opened >= self.lifetime

    def open(self) -> Session:
        """A new session (the least recently used one goes when the capacity is reached)."""
        now = self._clock()
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), now, now)
        with self._lock:
            # The oldest first: drop the expired ones at the front, then make room.
            while self._sessions:
                oldest = next(iter(self._sessions.values()))
                if not self._expired(oldest, now):
                    break
                self._sessions.popitem(last=False)
            while len(self._sessions) >= self.capacity:
                self._sessions.popitem(last=False)
            self._sessions[_key(session.sid)] = session
        return session

    def get(self, sid: str | None) -> Session | None:
        """The live session of an id (marked used), or None (unknown, evicted, expired)."""
        if not sid:
            return None
        key = _key(sid)
        now = self._clock()
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                return None
            if self._expired(session, now):
                del self._sessions[key]
                return None
            session.used = now
            self._sessions.move_to_end(key)
            return session

    def verify(self, sid: str | None, token: str) -> bool:
        """Whether ``token`` is the token of the live session ``sid``."""
        session = self.get(sid)
        if session is None or not token:
            return False
        return hmac.compare_digest(
            token.encode("utf-8", "surrogatepass"), session.token.encode("ascii")
        )


def cookie_name(port: str, *, secure: bool) -> str:
    """The session cookie's name. Cookies do not tell ports apart, so the name does (two
    consoles on one host keep their own sessions); over TLS it is ``__Host-`` (Secure, this
    host only, path /)."""
    base = f"episodic_console_{port}" if port.isdigit() else "episodic_console"
    return f"__Host-{base}" if secure else base


def session_cookie(name: str, sid: str, *, secure: bool) -> str:
    """The Set-Cookie value that gives a browser its session (for the browser's session:
    no Max-Age; the console forgets it sooner, see :class:`Sessions`)."""
    attributes = [f"{name}={sid}", "Path=/", "HttpOnly", "SameSite=Strict"]
    if secure:
        attributes.append("Secure")
    return "; ".join(attributes)


def _authority(url: str) -> str | None:
    """``host[:port]`` of an http(s) URL, lower case, without a default port; None when it
    is not one (``null``, ``file://``, credentials in it, no host)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname or "@" in parts.netloc:
        return None
    host = parts.netloc.lower().rsplit(":", 1)[0] if port is not None else parts.netloc.lower()
    if port is None or str(port) == _DEFAULT_PORTS[parts.scheme]:
        return host
    return f"{host}:{port}"


def _host_authority(host: str, scheme: str) -> str:
    host = host.strip().lower()
    default = _DEFAULT_PORTS.get(scheme)
    if default and host.endswith(f":{default}") and not host.endswith("]"):
        return host.removesuffix(f":{default}")
    return host


def origin_refusal(*, host: str, origin: str, referer: str, fetch_site: str) -> str:
    """Why a write with these headers is refused (``host``: the request's Host header), or
    "" when it may come from the console's own pages."""
    if fetch_site and fetch_site not in ("same-origin", "none"):
        return CROSS_ORIGIN
    if origin:
        if origin.strip().lower() == "null":
            return NULL_ORIGIN
        claimed = _authority(origin)
        scheme = urlsplit(origin.strip()).scheme
    elif referer:
        claimed = _authority(referer)
        scheme = urlsplit(referer.strip()).scheme
    else:
        return ""  # not a browser: the session and its token decide
    if claimed is None or claimed != _host_authority(host, scheme):
        return CROSS_ORIGIN
    return ""
