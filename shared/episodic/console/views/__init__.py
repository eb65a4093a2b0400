"""The console's pages: each view reads through the SDK and returns HTML built with
:mod:`episodic.console.views.html` (escaped by default).

A view takes a :class:`Ctx` (the SDK client, the request's parameters, the time of the
request) and returns a :class:`Page` (laid out by :func:`layout.page`), a :class:`Fragment`
(what htmx swaps into a page) or a :class:`Redirect` (after an admin action)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

from episodic.console.views.html import Safe

if TYPE_CHECKING:
    from episodic.sdk.client import EpisodicClient

__all__ = ["BadRequest", "Ctx", "Fragment", "Page", "Redirect", "View"]

T = TypeVar("T")
R = TypeVar("R")


class BadRequest(ValueError):
    """A parameter the console cannot use (shown to the user with status 400)."""


@dataclass
class Ctx:
    """What a view may use: the SDK client, the request's parameters (first value of each
    name), the time of the request, and whether htmx asked for a fragment (``target``)."""

    client: EpisodicClient
    pool: ThreadPoolExecutor
    csrf: str
    path: str
    query: Mapping[str, str] = field(default_factory=dict)
    form: Mapping[str, str] = field(default_factory=dict)
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    target: str | None = None  # HX-Target of an htmx request, None for a full page
    spans: str | None = None  # the services' span file, for an episode's journey

    def arg(self, name: str, default: str = "") -> str:
        """A query parameter, stripped."""
        return (self.query.get(name) or default).strip()

    def required(self, name: str) -> str:
        value = self.arg(name)
        if not value:
            raise BadRequest(f"the parameter {name!r} is missing")
        return value

    def fan_out(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``fn`` over ``items`` concurrently (independent SDK calls), results in order."""
        return list(self.pool.map(fn, items))


@dataclass
class Page:
    """A whole page: ``section`` is the navigation entry it belongs to."""

    title: str
    body: Safe
    section: str = ""
    dataset: str | None = None
    status: int = 200


@dataclass
class Fragment:
    """Part of a page, for htmx to swap in."""

    body: Safe
    status: int = 200


@dataclass
class Redirect:
    """See other (303): after a POST, to one of our own pages."""

    location: str


View = Callable[[Ctx], Page | Fragment | Redirect]
