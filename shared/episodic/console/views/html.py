"""HTML built from Python strings, escaped by default.

Every page of the console is made with :func:`html`: a ``str.format`` template whose fields
are escaped with :func:`html.escape` (quotes too, so they are safe inside double-quoted
attributes) unless they are already :class:`Safe` — the output of another :func:`html`,
:func:`join` or :func:`esc`. Text from the services (messages, summaries, labels, errors)
can therefore only ever appear as text. URLs are built with :func:`url` from our own paths
and a query, never taken from data.
"""

from __future__ import annotations

import html as _html
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

__all__ = ["Safe", "attrs", "esc", "html", "join", "url", "when"]


class Safe(str):
    """Text that is HTML already (escaped or built from escaped parts)."""

    __slots__ = ()

    def __html__(self) -> str:
        return self


def esc(value: object) -> Safe:
    """``value`` as HTML text: escaped unless it is :class:`Safe`; None is empty."""
    if isinstance(value, Safe):
        return value
    return Safe(_html.escape("" if value is None else str(value), quote=True))


class _Escaped:
    """A value that formats itself escaped (``str.format_map`` asks each field for it)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __format__(self, spec: str) -> str:
        value = self.value
        if isinstance(value, Safe) and not spec:
            return value
        return _html.escape(format("" if value is None else value, spec), quote=True)


class _Fields:
    """The mapping ``format_map`` reads: every value wrapped to be escaped."""

    __slots__ = ("values",)

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def __getitem__(self, name: str) -> _Escaped:
        return _Escaped(self.values[name])


def html(template: str, /, **values: Any) -> Safe:
    """``template`` with its ``{fields}`` filled from ``values``, each escaped unless Safe.
    The template itself is trusted (a literal in our code)."""
    return Safe(template.format_map(_Fields(values)))


def join(parts: Iterable[object], sep: str = "") -> Safe:
    """Parts (escaped unless Safe) joined by the literal ``sep``."""
    return Safe(sep.join(esc(p) for p in parts))


def attrs(values: Mapping[str, object]) -> Safe:
    """`` name="value"`` pairs; a value of True is a bare attribute, None or False omits it."""
    out = []
    for name, value in values.items():
        if value is None or value is False:
            continue
        out.append(f" {name}" if value is True else f' {name}="{esc(value)}"')
    return Safe("".join(out))


def url(path: str, **query: object) -> str:
    """One of our own paths with a query (empty and None values left out)."""
    pairs = [(k, str(v)) for k, v in query.items() if v not in (None, "")]
    return path + ("?" + urlencode(pairs) if pairs else "")


def when(value: datetime | None, now: datetime | None = None) -> Safe:
    """A ``<time>`` element: the absolute UTC time, with the relative one as its title."""
    from episodic.render import relative_time

    if value is None:
        return Safe('<span class="muted">–</span>')
    utc = value.astimezone(UTC)
    return html(
        '<time datetime="{iso}" title="{rel}">{text}</time>',
        iso=utc.isoformat(),
        rel=relative_time(utc, now),
        text=utc.strftime("%Y-%m-%d %H:%M UTC"),
    )
