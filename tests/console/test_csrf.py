"""The console's sessions and its checks of a state-changing request, without a browser or
the services: the WSGI application is called directly with a stub client.

A session cookie (HttpOnly, SameSite=Strict, Secure over TLS) binds a CSRF token generated
per session; a token is good in its own session only; an ``Origin`` of ``null`` or of
another site is refused; without an ``Origin``, a ``Referer`` of another site is refused;
the sessions kept are bounded in number and in time (``tests/console/test_console.py``
drives the same in headless Chromium)."""

from __future__ import annotations

import io
from http.cookies import SimpleCookie
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlencode

import pytest

from episodic.console import ConsoleApp
from episodic.console.csrf import Sessions, origin_refusal

HOST = "127.0.0.1:8780"
ORIGIN = f"http://{HOST}"


class StubClient:
    """The two writes the console may make, recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def retry_episode(self, episode_id: str) -> Any:
        self.calls.append(("retry", episode_id))
        return SimpleNamespace(episode_id=episode_id, is_event=False, dataset="ds")

    def delete_episode(self, episode_id: str) -> Any:
        self.calls.append(("delete", episode_id))
        return SimpleNamespace(episode_id=episode_id, is_event=False, dataset="ds")


class Answer:
    def __init__(self, status: str, headers: list[tuple[str, str]], body: bytes) -> None:
        self.code = int(status.split(" ", 1)[0])
        self.headers = headers
        self.body = body.decode()

    def set_cookies(self) -> list[str]:
        return [v for k, v in self.headers if k.lower() == "set-cookie"]


def call(
    app: ConsoleApp,
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    form: dict[str, str] | None = None,
    scheme: str = "http",
) -> Answer:
    body = urlencode(form or {}).encode()
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8780",
        "HTTP_HOST": HOST,
        "wsgi.url_scheme": scheme,
        "wsgi.input": io.BytesIO(body),
        "CONTENT_LENGTH": str(len(body)),
        "CONTENT_TYPE": "application/x-www-form-urlencoded",
    }
    for name, value in (headers or {}).items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    answer: dict[str, Any] = {}

    def start_response(status: str, response_headers: list[tuple[str, str]]) -> None:
        answer["status"], answer["headers"] = status, response_headers

    chunks = app(environ, start_response)
    return Answer(answer["status"], answer["headers"], b"".join(chunks))


def open_session(app: ConsoleApp, scheme: str = "http") -> tuple[str, str, str]:
    """A browser's first visit: (the Cookie header to send back, the session's token, the
    Set-Cookie header as sent)."""
    answer = call(app, "GET", "/no-such-page", scheme=scheme)
    (set_cookie,) = answer.set_cookies()
    jar: SimpleCookie = SimpleCookie()
    jar.load(set_cookie)
    ((name, morsel),) = jar.items()
    session = app.sessions.get(morsel.value)
    assert session is not None
    return f"{name}={morsel.value}", session.token, set_cookie


@pytest.fixture
def app() -> Any:
    console = ConsoleApp(StubClient())  # type: ignore[arg-type]
    yield console
    console.close()


def retry(app: ConsoleApp, cookie: str, token: str, **headers: str) -> Answer:
    return call(
        app,
        "POST",
        "/episode/retry",
        headers={"Cookie": cookie, "Origin": ORIGIN, **headers},
        form={"csrf": token, "id": "ep-1"},
    )


def test_the_token_of_one_session_is_refused_in_another(app: ConsoleApp) -> None:
    """Before: one token per process, good in every browser that ever saw a page."""
    cookie_a, token_a, _ = open_session(app)
    cookie_b, token_b, _ = open_session(app)
    assert token_a != token_b and cookie_a != cookie_b
    answer = retry(app, cookie_b, token_a)
    assert answer.code == 403 and "stale" in answer.body
    assert retry(app, cookie_a, token_b).code == 403
    assert app.client.calls == []  # type: ignore[attr-defined]
    # Each token is good in its own session.
    assert retry(app, cookie_a, token_a).code == 303
    assert retry(app, cookie_b, token_b).code == 303
    assert app.client.calls == [("retry", "ep-1")] * 2  # type: ignore[attr-defined]


def test_a_token_without_its_session_is_refused(app: ConsoleApp) -> None:
    _, token, _ = open_session(app)
    for cookie in ("", "episodic_console_8780=forged", "other=1"):
        answer = retry(app, cookie, token)
        assert answer.code == 403 and "stale" in answer.body, cookie
        assert answer.set_cookies() == []  # a refused action opens no session
    assert retry(app, open_session(app)[0], "").code == 403  # no token
    assert app.client.calls == []  # type: ignore[attr-defined]


def test_origin_null_and_foreign_origins_are_refused(app: ConsoleApp) -> None:
    """Before: ``Origin: null`` (a sandboxed frame, a file: page) was let through."""
    cookie, token, _ = open_session(app)
    answer = retry(app, cookie, token, Origin="null")
    assert answer.code == 403 and "Origin" in answer.body and "null" in answer.body
    for origin in (
        "http://evil.example",
        f"http://{HOST}.evil.example",
        "http://127.0.0.1:8781",
        f"http://user@{HOST}",
        "file://",
    ):
        answer = retry(app, cookie, token, Origin=origin)
        assert answer.code == 403 and "own pages" in answer.body, origin
    answer = retry(app, cookie, token, **{"Sec-Fetch-Site": "cross-site"})
    assert answer.code == 403
    assert app.client.calls == []  # type: ignore[attr-defined]
    assert retry(app, cookie, token, Origin=ORIGIN.upper()).code == 303


def test_without_an_origin_the_referer_is_checked(app: ConsoleApp) -> None:
    cookie, token, _ = open_session(app)
    base = {"Cookie": cookie}
    form = {"csrf": token, "id": "ep-1"}
    for referer in ("http://evil.example/x", "null", "http://127.0.0.1:1/episode"):
        headers = {**base, "Referer": referer}
        answer = call(app, "POST", "/episode/delete", headers=headers, form=form)
        assert answer.code == 403 and "own pages" in answer.body, referer
    headers = {**base, "Referer": f"{ORIGIN}/episode?id=ep-1"}
    assert call(app, "POST", "/episode/delete", headers=headers, form=form).code == 303
    # Neither (a client that is not a browser): the session and its token suffice.
    assert call(app, "POST", "/episode/delete", headers=base, form=form).code == 303
    assert app.client.calls == [("delete", "ep-1")] * 2  # type: ignore[attr-defined]


def test_the_session_cookie(app: ConsoleApp) -> None:
    cookie, _, set_cookie = open_session(app)
    attributes = [a.strip().lower() for a in set_cookie.split(";")]
    assert "httponly" in attributes and "samesite=strict" in attributes
    assert "path=/" in attributes and "secure" not in attributes
    # A visit with the session keeps it (no new cookie).
    assert call(app, "GET", "/no-such-page", headers={"Cookie": cookie}).set_cookies() == []
    # Cookies do not tell ports apart: another local application's, even one Python's
    # http.cookies cannot parse, does not hide the console's.
    crowded = f'app="{{\\"a\\": 1}}"; x@y=1; {cookie}; z=2'
    assert call(app, "GET", "/no-such-page", headers={"Cookie": crowded}).set_cookies() == []
    # Over TLS it is Secure (and __Host-: only this host, this path, never over plain HTTP).
    _, _, tls = open_session(app, scheme="https")
    attributes = [a.strip().lower() for a in tls.split(";")]
    assert "secure" in attributes and tls.startswith("__Host-")
    # The health check and static files open no session.
    assert call(app, "GET", "/healthz").set_cookies() == []
    assert call(app, "GET", "/static/console.css").set_cookies() == []
    # Nor does a cross-site subresource (an image on another site's page).
    cross = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "image"}
    assert call(app, "GET", "/no-such-page", headers=cross).set_cookies() == []


def test_sessions_are_bounded_in_number_and_time() -> None:
    now = [0.0]
    sessions = Sessions(capacity=3, idle=60, lifetime=300, clock=lambda: now[0])
    first = sessions.open()
    assert len(first.token) >= 32 and first.sid != first.token
    others = [sessions.open() for _ in range(2)]
    assert sessions.get(first.sid) is first  # used: the least recently used is now others[0]
    newest = sessions.open()
    assert len(sessions) == 3
    assert sessions.get(others[0].sid) is None  # evicted
    assert sessions.get(first.sid) is first and sessions.get(newest.sid) is newest
    for _ in range(1000):
        sessions.open()
    assert len(sessions) == 3
    # Idle too long: gone.
    kept = sessions.open()
    now[0] = 61
    assert sessions.get(kept.sid) is None
    # Used, it lives on, but never beyond its lifetime.
    alive = sessions.open()
    for t in range(100, 401, 50):
        now[0] = t
        assert (sessions.get(alive.sid) is not None) == (t - 61 < 300), t
    assert sessions.verify(alive.sid, alive.token) is False
    fresh = sessions.open()
    assert sessions.verify(fresh.sid, fresh.token)
    assert not sessions.verify(fresh.sid, alive.token)
    assert not sessions.verify(fresh.sid, "ü")  # not ASCII: refused, not an error
    assert not sessions.verify(None, fresh.token)


def test_origin_refusal_is_a_function_of_the_headers() -> None:
    def refusal(**headers: str) -> str:
        return origin_refusal(
            host=HOST,
            origin=headers.get("origin", ""),
            referer=headers.get("referer", ""),
            fetch_site=headers.get("fetch_site", ""),
        )

    assert refusal() == ""
    assert refusal(origin=ORIGIN) == ""
    assert refusal(origin="http://localhost:8780") != ""
    assert "null" in refusal(origin="null")
    assert refusal(origin="null", referer=f"{ORIGIN}/") != ""  # null is not overruled
    assert refusal(referer=f"{ORIGIN}/pipeline") == ""
    assert refusal(fetch_site="same-site", origin=ORIGIN) != ""
    assert refusal(fetch_site="same-origin", origin=ORIGIN) == ""
    assert (
        origin_refusal(host="localhost", origin="http://localhost:80", referer="", fetch_site="")
        == ""
    )


def test_a_wrong_method_is_answered_with_the_methods_of_that_path(app: ConsoleApp) -> None:
    """405's Allow names what the path takes (RFC 9110): every page GET (and HEAD), the
    two actions POST only. It said "GET, POST" for every path, so a client told to POST
    a page would be refused again."""
    page = call(app, "PUT", "/")
    assert page.code == 405
    assert dict(page.headers)["Allow"] == "GET, HEAD"
    action = call(app, "GET", "/episode/retry")
    assert action.code == 405
    assert dict(action.headers)["Allow"] == "POST"
