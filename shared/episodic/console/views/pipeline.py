"""Whether the pipeline moves (``pipeline_status``), refreshed live: htmx polls the panel
every few seconds (a checkbox pauses it; it also pauses while focus is inside the panel, so
a keyboard user is never thrown out of it). Provider health is probed once after the page
loads and when asked (a probe may call a remote LLM), never by the polls."""

from __future__ import annotations

from datetime import UTC

from episodic.console.views import Ctx, Fragment, Page
from episodic.console.views.html import Safe, html, join, url, when
from episodic.console.views.layout import (
    STATUS_LABELS,
    age,
    csrf_field,
    error_panel,
    notice,
)
from episodic.sdk.client import (
    EPISODE_STATUSES,
    EpisodeFailure,
    EpisodicRpcError,
    PipelineStatus,
    ProviderHealth,
)

POLL_SECONDS = 3
MAX_ERRORS = 20
OVERDUE_ATTENTION_SECONDS = 60.0
PENDING_ATTENTION_SECONDS = 300.0


def concerns(s: PipelineStatus) -> list[str]:
    """What an operator should look at, in words (empty: the pipeline moves)."""
    out = []
    failed = s.status_counts.get("failed", 0)
    if failed:
        out.append(f"{failed} episode(s) failed for good: retry them once the cause is fixed")
    if (
        s.oldest_due_timer_age
        and s.oldest_due_timer_age.total_seconds() > OVERDUE_ATTENTION_SECONDS
    ):
        out.append(
            f"timers are overdue by up to {age(s.oldest_due_timer_age)}: is the Scheduler running?"
        )
    if s.oldest_pending_age and s.oldest_pending_age.total_seconds() > PENDING_ATTENTION_SECONDS:
        out.append(
            f"an episode has been pending for {age(s.oldest_pending_age)}: is the Summariser running?"
        )
    if s.threads_without_timer:
        out.append(
            f"{s.threads_without_timer} thread(s) lost their notice to the Scheduler (the "
            "catch-up sweep arms them)"
        )
    for health in (s.llm, s.embedder):
        if health is not None and not health.ok:
            out.append(f"provider {health.name} is failing: {health.error}")
    return out


def _failures(
    rows: list[EpisodeFailure], ctx: Ctx, caption: str, table_id: str, *, retry: bool, back: str
) -> Safe:
    if not rows:
        return html('<p class="empty" id="{id}">None.</p>', id=table_id)
    body = []
    for f in rows:
        action = Safe("")
        if retry:
            action = html(
                '<form method="post" action="/episode/retry" class="inline">{csrf}'
                '<input type="hidden" name="id" value="{id}">'
                '<input type="hidden" name="next" value="{back}">'
                '<button type="submit">Retry<span class="sr-only"> episode {short}</span>'
                "</button></form>",
                csrf=csrf_field(ctx.csrf),
                id=f.episode_id,
                back=back,
                short=f.episode_id[:8],
            )
        body.append(
            html(
                '<tr><td>{at}</td><th scope="row"><a href="{href}"><code>{short}</code></a></th>'
                '<td><a href="{ds_href}">{ds}</a></td><td>{status}</td><td class="num">{retries}'
                '</td><td class="error-text">{error}</td>{action}</tr>',
                at=when(f.updated_at, ctx.now),
                href=url("/episode", id=f.episode_id),
                short=f.episode_id[:8],
                ds_href=url("/dataset", dataset=f.dataset),
                ds=f.dataset,
                status=f.status,
                retries=f.retry_count,
                error=f.error,
                action=html("<td>{a}</td>", a=action) if retry else "",
            )
        )
    return html(
        '<table class="list" id="{id}"><caption>{caption}</caption><thead><tr>'
        '<th scope="col">Updated</th><th scope="col">Episode</th><th scope="col">Dataset</th>'
        '<th scope="col">Status</th><th scope="col" class="num">Retries</th>'
        '<th scope="col">Error</th>{action_head}</tr></thead><tbody>{rows}</tbody></table>',
        id=table_id,
        caption=caption,
        action_head=Safe('<th scope="col">Action</th>') if retry else "",
        rows=join(body),
    )


def _metric(name: str, value: object, detail: Safe | str = "", key: str = "") -> Safe:
    return html(
        '<div class="metric" data-metric="{key}"><dt>{name}</dt><dd><span class="value">'
        "{value}</span> {detail}</dd></div>",
        key=key,
        name=name,
        value=value,
        detail=detail,
    )


def _shell(dataset: str, content: Safe) -> Safe:
    return html(
        '<section id="pipeline-panel" class="pipeline-panel" aria-labelledby="panel-title" '
        'hx-get="{poll}" hx-trigger="every {secs}s" hx-swap="outerHTML" data-live="1">'
        "{content}</section>",
        poll=url("/pipeline/panel", dataset=dataset),
        secs=POLL_SECONDS,
        content=content,
    )


def panel(ctx: Ctx, dataset: str) -> Safe:
    """The live part: fetched again every POLL_SECONDS by htmx (outerHTML swap). When the
    Summariser does not answer, the panel says so and keeps polling."""
    try:
        s = ctx.client.pipeline_status(
            dataset or None, max_errors=MAX_ERRORS, check_providers=False
        )
    except EpisodicRpcError as err:
        return _shell(
            dataset,
            html(
                '<h2 id="panel-title">Status <span class="muted">at {at}</span></h2>{err}',
                at=when(ctx.now, ctx.now),
                err=error_panel(
                    f"The pipeline status is unavailable ({err.code.name})",
                    err.message,
                    "It is asked again every few seconds.",
                ),
            ),
        )
    back = url("/pipeline", dataset=dataset)
    worries = concerns(s)
    verdict = (
        html(
            '<div class="verdict attention"><p><span aria-hidden="true">⚠ </span>'
            "<strong>Needs attention</strong></p><ul>{items}</ul></div>",
            items=join(html("<li>{w}</li>", w=w) for w in worries),
        )
        if worries
        else Safe(
            '<div class="verdict ok"><p><span aria-hidden="true">✓ </span><strong>Moving'
            "</strong>: nothing failed, stuck or overdue.</p></div>"
        )
    )
    counts = join(
        _metric(
            STATUS_LABELS.get(st, st) + (" (completed)" if st == "completed" else ""),
            s.status_counts.get(st, 0),
            key=f"status-{st}",
        )
        for st in EPISODE_STATUSES
    )
    semantic = ", ".join(f"{k} {v}" for k, v in sorted(s.semantic_status_counts.items())) or "none"
    return _shell(
        dataset,
        html(
            '<h2 id="panel-title">Status <span class="muted">observed at '
            '<span id="observed-at" data-observed="{observed_iso}">{observed}</span></span></h2>'
            "{verdict}"
            '<h3>Episodes by status</h3><dl class="metrics" id="status-counts">{counts}</dl>'
            '<p>Semantic extraction: <span id="semantic-counts">{semantic}</span></p>'
            '<h3>Backlog</h3><dl class="metrics">'
            "{pending}{processing}{due}{waiting}{uncaptured}{backoff}{lost}</dl>"
            "<h3>Failed episodes</h3>{failed}"
            "<h3>Recent errors</h3>{errors}",
            observed_iso=s.observed_at.isoformat() if s.observed_at else "",
            observed=s.observed_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
            if s.observed_at
            else "–",
            verdict=verdict,
            counts=counts,
            semantic=semantic,
            pending=_metric("Oldest pending", age(s.oldest_pending_age), key="oldest-pending"),
            processing=_metric(
                "Oldest processing", age(s.oldest_processing_age), key="oldest-processing"
            ),
            due=_metric(
                "Overdue timers",
                s.timers_due,
                html("(most overdue {a})", a=age(s.oldest_due_timer_age)) if s.timers_due else "",
                key="timers-due",
            ),
            waiting=_metric("Timers waiting", s.timers_waiting, key="timers-waiting"),
            uncaptured=_metric(
                "Threads with uncaptured messages", s.threads_uncaptured, key="threads-uncaptured"
            ),
            backoff=_metric(
                "Backing off (pending, retry later)",
                s.pending_waiting,
                html("(latest retry {t})", t=when(s.latest_retry_at, ctx.now))
                if s.pending_waiting
                else "",
                key="backing-off",
            ),
            lost=_metric(
                "Lost notices (threads without a timer)",
                s.threads_without_timer,
                html("(quiet up to {a})", a=age(s.oldest_untimed_thread_age))
                if s.threads_without_timer
                else "",
                key="lost-notices",
            ),
            failed=_failures(
                s.failed_episodes,
                ctx,
                "Failed for good, newest first (retry re-runs one)",
                "failed-episodes",
                retry=True,
                back=back,
            ),
            errors=_failures(
                s.recent_errors,
                ctx,
                "Most recent errors, newest first",
                "recent-errors",
                retry=False,
                back=back,
            ),
        ),
    )


def _health_row(name: str, h: ProviderHealth) -> Safe:
    return html(
        '<tr><th scope="row">{name}</th><td>{provider}</td><td>{state}</td></tr>',
        name=name,
        provider=h.name,
        state=Safe('<span class="badge health-ok">✓ answering</span>')
        if h.ok
        else html('<span class="badge health-failing">✗ failing</span> {e}', e=h.error),
    )


def providers(ctx: Ctx) -> Safe:
    """Provider health (the Summariser's CheckProviders), probed when asked."""
    try:
        health = ctx.client.check_providers()
    except EpisodicRpcError as err:
        return html(
            '<div id="providers-result">{e}</div>',
            e=error_panel(f"Providers could not be probed ({err.code.name})", err.message),
        )
    return html(
        '<div id="providers-result"><table class="list" id="provider-health"><caption>Provider '
        'health, probed {at}</caption><thead><tr><th scope="col">Role</th>'
        '<th scope="col">Provider</th><th scope="col">State</th></tr></thead>'
        "<tbody>{rows}</tbody></table></div>",
        at=when(ctx.now, ctx.now),
        rows=join(_health_row(k, v) for k, v in health.items()),
    )


def pipeline(ctx: Ctx) -> Page:
    dataset = ctx.arg("dataset")
    done = ctx.arg("done")
    scope = f"dataset {dataset}" if dataset else "all datasets"
    body = html(
        "{notice}"
        '<form method="get" action="/pipeline" class="row" aria-label="Pipeline scope">'
        '<label for="scope">Dataset</label><input id="scope" name="dataset" value="{ds}" '
        'placeholder="all datasets" autocomplete="off" spellcheck="false">'
        '<button type="submit">Show</button></form>'
        '<p class="live-controls"><input type="checkbox" id="live-updates" checked>'
        '<label for="live-updates">Refresh every {secs} seconds</label> · '
        '<a href="{self}">Refresh now</a> <span class="hint">(updates pause while focus is '
        "in the status below)</span></p>"
        "{panel}"
        '<section aria-labelledby="providers-title" class="providers">'
        '<h2 id="providers-title">Providers</h2>'
        '<p class="hint">Probed when the page loads and when asked, not on every refresh: '
        "a probe may call a remote LLM.</p>"
        '<div id="providers-box"{lazy}>{providers}</div>'
        '<form method="get" action="/pipeline" hx-get="/pipeline/providers" '
        'hx-target="#providers-box" hx-swap="innerHTML">'
        '<input type="hidden" name="dataset" value="{ds}"><input type="hidden" name="probe" '
        'value="1"><button type="submit">Check providers now</button></form></section>',
        notice=notice(f"Episode {ctx.arg('episode')[:8]} is pending again.")
        if done == "retried"
        else (
            notice(f"Episode {ctx.arg('episode')[:8]} is archived (deleted).")
            if done == "deleted"
            else ""
        ),
        ds=dataset,
        secs=POLL_SECONDS,
        self=url("/pipeline", dataset=dataset),
        panel=panel(ctx, dataset),
        # Probed after the page loads (htmx), so a slow provider never delays the page.
        lazy=Safe("")
        if ctx.arg("probe")
        else html(' hx-get="{u}" hx-trigger="load"', u=url("/pipeline/providers")),
        providers=providers(ctx)
        if ctx.arg("probe")
        else Safe('<p class="muted" id="providers-result">Probing…</p>'),
    )
    return Page(f"Pipeline ({scope})", body, section="pipeline")


def pipeline_panel(ctx: Ctx) -> Fragment:
    return Fragment(panel(ctx, ctx.arg("dataset")))


def pipeline_providers(ctx: Ctx) -> Fragment:
    return Fragment(providers(ctx))
