"""The page around every view, and the small pieces views share (status badges, ages,
error panels, pagination)."""

from __future__ import annotations

import json
from datetime import timedelta

from episodic.console.views import Page
from episodic.console.views.html import Safe, esc, html, join, url

#: How htmx behaves here: no inline styles (the Content-Security-Policy forbids them), no
#: eval, nothing cached in localStorage (pages hold user data), errors swapped in like
#: answers (they carry their own message), same-origin requests only.
HTMX_CONFIG = json.dumps(
    {
        "includeIndicatorStyles": False,
        "allowEval": False,
        "allowScriptTags": False,
        "historyCacheSize": 0,
        "refreshOnHistoryMiss": True,
        "selfRequestsOnly": True,
        "responseHandling": [
            {"code": "204", "swap": False},
            {"code": "[2345]..", "swap": True},
        ],
    },
    separators=(",", ":"),
)

#: How an episode's status is called on screen: the completed episode of a thread is its
#: current one (the earlier ones are archived).
STATUS_LABELS = {
    "completed": "current",
    "archived": "archived",
    "pending": "pending",
    "processing": "processing",
    "failed": "failed",
}

SECTIONS = (
    ("datasets", "/", "Datasets"),
    ("pipeline", "/pipeline", "Pipeline"),
)
DATASET_SECTIONS = (
    ("threads", "/dataset", "Threads"),
    ("timeline", "/timeline", "Timeline"),
    ("recall", "/recall", "Recall playground"),
    ("procedures", "/procedures", "Procedures"),
)


def status_badge(status: str) -> Safe:
    """A status as text (never colour alone) in a badge whose outline also differs."""
    label = STATUS_LABELS.get(status, status)
    return html('<span class="badge status-{s}">{label}</span>', s=status, label=label)


def age(value: timedelta | None) -> str:
    """``3.5 h``, ``12 s``, or ``–``."""
    if value is None:
        return "–"
    seconds = max(0.0, value.total_seconds())  # a clock ahead of the database's: 0
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def short_id(value: str) -> Safe:
    """The first 8 characters of an id, the whole one in a tooltip and for copying."""
    return html('<code title="{full}">{short}</code>', full=value, short=value[:8])


def notice(text: str) -> Safe:
    """A message about what just happened (announced politely)."""
    return html('<p class="notice" role="status">{text}</p>', text=text)


def error_panel(title: str, detail: str, hint: str = "") -> Safe:
    """What went wrong, in words (announced at once)."""
    return html(
        '<div class="error" role="alert"><h2>{title}</h2><p>{detail}</p>{hint}</div>',
        title=title,
        detail=detail,
        hint=html("<p>{h}</p>", h=hint) if hint else "",
    )


def next_page_link(path: str, token: str, label: str = "Next page", **query: object) -> Safe:
    """A link to the next page of a list (page tokens are opaque: back is the browser's)."""
    if not token:
        return Safe("")
    return html(
        '<p class="pager"><a href="{href}" rel="next">{label} →</a></p>',
        href=url(path, page_token=token, **query),
        label=label,
    )


def _nav(items: tuple[tuple[str, str, str], ...], current: str, **query: object) -> Safe:
    links = []
    for key, path, label in items:
        links.append(
            html(
                '<li><a href="{href}"{cur}>{label}</a></li>',
                href=url(path, **query),
                cur=Safe(' aria-current="page"') if key == current else "",
                label=label,
            )
        )
    return join(links)


def page(p: Page, *, static: str) -> Safe:
    """The whole document around a view's body. ``static`` is the version that busts
    caches of the static files."""
    dataset_nav = Safe("")
    if p.dataset is not None:
        dataset_nav = html(
            '<nav class="subnav" aria-label="Dataset {ds}"><span class="subnav-title">'
            "Dataset <strong>{ds}</strong></span><ul>{items}</ul></nav>",
            ds=p.dataset,
            items=_nav(DATASET_SECTIONS, p.section, dataset=p.dataset),
        )
    return html(
        """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="htmx-config" content="{config}">
<meta name="referrer" content="same-origin">
<title>{title} · episodic console</title>
<link rel="icon" href="/static/favicon.svg?v={v}" type="image/svg+xml">
<link rel="stylesheet" href="/static/console.css?v={v}">
<script src="/static/htmx.min.js?v={v}" defer></script>
<script src="/static/console.js?v={v}" defer></script>
</head>
<body>
<a class="skip-link" href="#main">Skip to content</a>
<header class="top">
<p class="brand"><a href="/">episodic console</a></p>
<nav aria-label="Main"><ul>{nav}</ul></nav>
</header>
{dataset_nav}
<main id="main" tabindex="-1">
<h1>{title}</h1>
{body}
</main>
<footer class="foot"><p>Read through the services' public RPCs; the only writes are the
admin actions they allow (retry, delete).</p></footer>
</body>
</html>
""",
        config=HTMX_CONFIG,
        title=p.title,
        v=static,
        nav=_nav(SECTIONS, p.section if p.dataset is None else ""),
        dataset_nav=dataset_nav,
        body=p.body,
    )


def csrf_field(token: str) -> Safe:
    return html('<input type="hidden" name="csrf" value="{t}">', t=token)


def episode_actions(
    episode_id: str, status: str, csrf: str, back: str, *, event: bool = False
) -> Safe:
    """The admin actions the RPCs allow: retry (failed only) and delete (a soft delete:
    the episode is archived and leaves recall; an ``event`` is erased), as POST forms."""
    if event:
        return _delete_form(
            "event", "Deleting an event erases it for good: it leaves recall and every list.",
            episode_id, csrf, back,
        )  # fmt: skip
    parts = []
    if status == "failed":
        parts.append(
            html(
                '<form method="post" action="/episode/retry" class="inline">{csrf}'
                '<input type="hidden" name="id" value="{id}">'
                '<input type="hidden" name="next" value="{back}">'
                '<button type="submit">Retry episode {short}</button></form>',
                csrf=csrf_field(csrf),
                id=episode_id,
                back=back,
                short=episode_id[:8],
            )
        )
    if status != "archived":
        parts.append(
            _delete_form(
                "episode",
                "Deleting archives the episode: it leaves recall, keeps its window and "
                "stays readable for provenance.",
                episode_id,
                csrf,
                back,
            )
        )
    return join(parts)


def _delete_form(noun: str, consequence: str, episode_id: str, csrf: str, back: str) -> Safe:
    """DeleteEpisode's form behind a disclosure that says what deleting does."""
    return html(
        '<details class="danger"><summary>Delete {noun} {short}…</summary>'
        "<p>{consequence}</p>"
        '<form method="post" action="/episode/delete">{csrf}'
        '<input type="hidden" name="id" value="{id}">'
        '<input type="hidden" name="next" value="{back}">'
        '<button type="submit" class="danger">Delete {noun} {short}</button>'
        "</form></details>",
        noun=noun,
        consequence=consequence,
        csrf=csrf_field(csrf),
        id=episode_id,
        back=back,
        short=episode_id[:8],
    )


def text_block(value: str) -> Safe:
    """Free text (a message, a summary) with its line breaks kept, as text."""
    return html('<p class="text">{v}</p>', v=value)


def esc_list(values: list[str], cls: str = "") -> Safe:
    if not values:
        return Safe('<span class="muted">none</span>')
    return html(
        '<ul class="{cls}">{items}</ul>',
        cls=cls,
        items=join(html("<li>{v}</li>", v=v) for v in values),
    )


__all__ = [
    "HTMX_CONFIG",
    "STATUS_LABELS",
    "age",
    "csrf_field",
    "episode_actions",
    "error_panel",
    "esc",
    "esc_list",
    "next_page_link",
    "notice",
    "page",
    "short_id",
    "status_badge",
    "text_block",
]
