"""One episode in full (``get_episode``), as a page or as the timeline's details panel, and
the two admin actions the RPCs allow: ``RetryEpisode`` (failed only) and ``DeleteEpisode``
(a soft delete: archived; an event, listed under its id too, is erased). The page also
shows the episode's journey from the services' spans (:mod:`episodic.ops.journey`, what
``episodic trace`` prints): the write that armed its timer, the trigger, each summarise
attempt, the extraction and the recalls that returned it."""

from __future__ import annotations

from urllib.parse import urlsplit

from episodic.console.views import BadRequest, Ctx, Fragment, Page, Redirect
from episodic.console.views.html import Safe, html, join, url, when
from episodic.console.views.layout import (
    episode_actions,
    esc_list,
    notice,
    status_badge,
    text_block,
)
from episodic.ops import journey as spans_of
from episodic.sdk.client import Episode

DONE = {"retried": "is pending again", "deleted": "is archived (deleted)"}


def details(e: Episode, ctx: Ctx, *, heading: str = "h2", actions_back: str = "") -> Safe:
    """Everything an episode says: summary, key learnings, entities, event, trigger,
    window, status and the admin actions."""
    summary = text_block(e.summary) if e.summary else Safe('<p class="muted">no summary</p>')
    error = (
        html('<p class="error-text"><strong>Error:</strong> {err}</p>', err=e.error)
        if e.error
        else Safe("")
    )
    if e.is_event:  # listed under its id like an episode; erased, not archived
        thread = (
            html('<a href="{href}">{label}</a>', href=url("/thread", id=e.thread_id),
                 label=e.thread_label or e.thread_id[:8])
            if e.thread_id
            else Safe("none")
        )  # fmt: skip
        back = url("/dataset", dataset=e.dataset)  # its own page is gone once erased
        return html(
            '<{h} class="episode-title">Event <code>{short}</code></{h}>'
            '<h3 class="sub">Summary</h3>{summary}'
            '<dl class="facts">'
            "<dt>Entities</dt><dd>{entities}</dd>"
            "<dt>Event type</dt><dd>{event}</dd><dt>Actor</dt><dd>{actor}</dd>"
            "<dt>Thread</dt><dd>{thread}</dd><dt>Occurred</dt><dd>{ended}</dd>"
            "<dt>Recorded</dt><dd>{created}</dd>"
            "<dt>Id</dt><dd><code>{id}</code></dd></dl>"
            "{actions}",
            h=Safe(heading),
            short=e.episode_id[:8],
            summary=summary,
            entities=esc_list(e.entities, "chips"),
            event=e.event_type or "–",
            actor=e.actor or "–",
            thread=thread,
            ended=when(e.ended_at, ctx.now),
            created=when(e.created_at, ctx.now),
            id=e.episode_id,
            actions=episode_actions(e.episode_id, e.status, ctx.csrf, back, event=True),
        )
    return html(
        '<{h} class="episode-title">Episode <code>{short}</code> {badge}</{h}>'
        "{error}"
        '<h3 class="sub">Summary</h3>{summary}'
        '<h3 class="sub">Key learnings</h3>{learnings}'
        '<dl class="facts">'
        "<dt>Entities</dt><dd>{entities}</dd>"
        "<dt>Event type</dt><dd>{event}</dd><dt>Actor</dt><dd>{actor}</dd>"
        "<dt>Trigger</dt><dd>{trigger}</dd>"
        '<dt>Window</dt><dd><a href="{window_href}">messages {a}–{b}</a> ({n} messages) of '
        'thread <a href="{thread_href}">{thread}</a></dd>'
        "<dt>Span</dt><dd>{started} – {ended}</dd>"
        "<dt>Status</dt><dd>{status} (semantic extraction: {semantic}), {retries} retries</dd>"
        "<dt>Created / updated</dt><dd>{created} / {updated}</dd>"
        "<dt>Id</dt><dd><code>{id}</code></dd></dl>"
        "{actions}",
        h=Safe(heading),
        short=e.episode_id[:8],
        badge=status_badge(e.status),
        error=error,
        summary=summary,
        learnings=esc_list(e.key_learnings, "learnings"),
        entities=esc_list(e.entities, "chips"),
        event=e.event_type or "–",
        actor=e.actor or "–",
        trigger=e.trigger,
        window_href=url("/thread", id=e.thread_id) + f"#window-{e.episode_id}",
        a=e.start_sequence,
        b=e.end_sequence,
        n=e.message_count,
        thread_href=url("/thread", id=e.thread_id),
        thread=e.thread_label or e.thread_id[:8],
        started=when(e.started_at, ctx.now),
        ended=when(e.ended_at, ctx.now),
        status=status_badge(e.status),
        semantic=e.semantic_status,
        retries=e.retry_count,
        created=when(e.created_at, ctx.now),
        updated=when(e.updated_at, ctx.now),
        id=e.episode_id,
        actions=episode_actions(
            e.episode_id, e.status, ctx.csrf, actions_back or url("/episode", id=e.episode_id)
        ),
    )


def _span_item(span: spans_of.Span, role: str, extra: object = "") -> Safe:
    return html(
        '<li data-journey="{role}"><time>{at}</time> <code>{name}</code> '
        '<span class="muted">({where})</span>{extra}</li>',
        role=role,
        at=spans_of.started_at(span),
        name=span["name"],
        where=spans_of.where(span),
        extra=extra,
    )


def _spans_list(spans: list[spans_of.Span], role: str) -> Safe:
    if not spans:
        return Safe('<span class="muted">not in these spans</span>')
    return html('<ul class="journey">{items}</ul>', items=join(_span_item(s, role) for s in spans))


def journey(episode_id: str, ctx: Ctx) -> Safe:
    """The episode's journey from the console's span file (see :class:`ConsoleApp`)."""
    head = Safe('<h3 class="sub" id="journey">Journey</h3>')
    if not ctx.spans:
        return Safe(
            head
            + Safe(
                '<p class="muted" data-journey="none">No span file: start the console with '
                "<code>--spans FILE</code> (or <code>EPISODIC_TRACE_FILE</code>, the file the "
                "services write their spans to) to follow this episode from the write that armed "
                "its timer to the recalls that returned it.</p>"
            )
        )
    try:
        found = spans_of.journey(spans_of.read_spans(ctx.spans), episode_id)
    except OSError as err:
        return Safe(
            head
            + html(
                '<p class="error-text" data-journey="none">Cannot read the span file: {err}</p>',
                err=err.strerror or type(err).__name__,
            )
        )
    if found.empty:
        return Safe(
            head
            + Safe(
                '<p class="muted" data-journey="none">No span in the span file names this '
                "episode (was tracing on when it was made?).</p>"
            )
        )
    attempts = join(
        html(
            '<li data-journey="attempt"><time>{at}</time> {ms} ms → <strong>{status}</strong>'
            '{error} <span class="muted">({where})</span>{created}{calls}</li>',
            at=spans_of.started_at(a.span),
            ms=f"{a.duration_ms:.1f}",
            status=a.status,
            error=html(' <span class="error-text">error {e}</span>', e=a.error) if a.error else "",
            where=spans_of.where(a.span),
            calls=html(
                "<ul>{items}</ul>",
                items=join(
                    html(
                        '<li data-journey="model-call"{error}>{line}</li>',
                        error=Safe(' class="error-text"') if c in a.failures else Safe(""),
                        line=spans_of.model_call(c),
                    )
                    for c in a.model_calls
                ),
            )
            if a.model_calls
            else "",
            created=html(
                " · <code>create_memory</code> in <code>{store}</code>",
                store=a.created["attributes"].get(spans_of.genai.MEMORY_STORE_ID, "?"),
            )
            if a.created is not None
            else "",
        )
        for a in found.attempts
    )
    recalls = (
        html(
            '<ul class="journey">{items}</ul>',
            items=join(
                _span_item(
                    s,
                    "recall",
                    html(
                        "{via} {rank}",
                        via=spans_of.via(found, s),
                        rank=spans_of.rank(s, episode_id),
                    ),
                )
                for s in found.recalls
            ),
        )
        if found.recalls
        else Safe('<span class="muted">none in these spans</span>')
    )
    extraction = (
        html(
            '<ul class="journey">{items}</ul>',
            items=join(
                _span_item(s, "extraction", html(" {ms} ms", ms=f"{spans_of.duration_ms(s):.1f}"))
                for s in found.extractions
            ),
        )
        if found.extractions
        else Safe('<span class="muted">not in these spans</span>')
    )
    trigger = (
        html(
            '<p data-journey="trigger">Trigger: <strong>{t}</strong></p>',
            t=", ".join(found.triggers),
        )
        if found.triggers
        else Safe("")
    )
    changes = (
        html("<dt>Changed</dt><dd>{spans}</dd>", spans=_spans_list(found.changes, "change"))
        if found.changes
        else Safe("")
    )
    return Safe(
        head
        + html(
            '<dl class="facts journey">'
            "<dt>Armed by</dt><dd>{armed}</dd>"
            "<dt>Fired</dt><dd>{fired}{trigger}</dd>"
            '<dt>Summarise attempts</dt><dd><ol class="journey">{attempts}</ol></dd>'
            "<dt>Extraction</dt><dd>{extraction}</dd>"
            "<dt>Recalls that returned it</dt><dd>{recalls}</dd>"
            "{changes}</dl>",
            armed=_spans_list(found.armed_by, "armed"),
            fired=_spans_list(found.fired, "fired"),
            trigger=trigger,
            attempts=attempts,
            extraction=extraction,
            recalls=recalls,
            changes=changes,
        )
    )


def episode(ctx: Ctx) -> Page | Fragment:
    e = ctx.client.get_episode(ctx.required("id"))
    if ctx.target == "details" or ctx.arg("fragment") == "details":  # the timeline's panel
        back = url("/timeline", dataset=e.dataset, episode=e.episode_id)
        return Fragment(details(e, ctx, actions_back=back))
    done = DONE.get(ctx.arg("done"))
    body = html(
        "{notice}{details}{journey}",
        notice=notice(f"Episode {e.episode_id[:8]} {done}.") if done else "",
        details=details(e, ctx),
        journey=journey(e.episode_id, ctx),
    )
    kind = "Event" if e.is_event else "Episode"
    return Page(f"{kind} {e.episode_id[:8]}", body, section="threads", dataset=e.dataset)


def _back(ctx: Ctx) -> str | None:
    """Where to go after an action (the form's ``next``), checked BEFORE the action runs:
    one of our own paths, printable ASCII only (a ``Location`` header carries Latin-1 at
    most, and our pages never make another), or None when the form names none. Anything
    else is a 400 and the action does not run."""
    target = ctx.form.get("next", "")
    if not target:
        return None
    parts = urlsplit(target)
    if (
        not target.startswith("/")
        or target[1:2] in ("/", "\\")  # //host and /\host are other sites to a browser
        or parts.scheme
        or parts.netloc
        or any(not 0x21 <= ord(c) <= 0x7E for c in target)
        or "\\" in target
    ):
        raise BadRequest(
            "'next' must be a path of this console (printable ASCII, starting with one /); "
            "nothing was done"
        )
    return target


def _with_done(path: str, done: str, episode_id: str) -> str:
    """``path`` with the action's notice in its query (before any fragment)."""
    parts = urlsplit(path)
    extra = f"done={done}&episode={episode_id}"
    query = f"{parts.query}&{extra}" if parts.query else extra
    return parts.path + "?" + query + (f"#{parts.fragment}" if parts.fragment else "")


def retry(ctx: Ctx) -> Redirect:
    episode_id = ctx.form.get("id", "").strip()
    if not episode_id:
        raise BadRequest("the episode id is missing")
    back = _back(ctx)
    e = ctx.client.retry_episode(episode_id)
    return Redirect(_with_done(back or url("/episode", id=e.episode_id), "retried", e.episode_id))


def delete(ctx: Ctx) -> Redirect:
    episode_id = ctx.form.get("id", "").strip()
    if not episode_id:
        raise BadRequest("the episode id is missing")
    back = _back(ctx)
    e = ctx.client.delete_episode(episode_id)
    if e.is_event:  # erased: its page (and the timeline's entry) is gone: its dataset's page
        return Redirect(
            _with_done(back or url("/dataset", dataset=e.dataset), "erased", e.episode_id)
        )
    return Redirect(_with_done(back or url("/episode", id=e.episode_id), "deleted", e.episode_id))
