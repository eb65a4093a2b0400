"""The recall playground: a query, ``as_of`` and the two weights in; the ranked episodes
out, with their score parts as bars, and the same list exactly as an agent's prompt gets it
(:func:`episodic.render.render_episodes`, both styles)."""

from __future__ import annotations

from datetime import UTC, datetime

from episodic.client import InvalidArgumentError, RecallResult, ScoredEpisode
from episodic.console.views import BadRequest, Ctx, Fragment, Page
from episodic.console.views.html import Safe, html, join, url, when
from episodic.console.views.layout import error_panel, status_badge, text_block
from episodic.render import render_episodes

DEFAULT_LIMIT = 10
MAX_LIMIT = 100


def parse_as_of(value: str) -> datetime | None:
    """A ``datetime-local`` value (``2026-05-14T14:22``, seconds optional) in UTC, or ISO
    8601 with an offset; empty is None."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadRequest(f"as of {value!r} is not a date and time (YYYY-MM-DDTHH:MM)") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _weight(ctx: Ctx, name: str) -> float | None:
    raw = ctx.arg(name)
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise BadRequest(f"{name.replace('_', ' ')} {raw!r} is not a number") from None


def _limit(ctx: Ctx) -> int:
    raw = ctx.arg("limit", str(DEFAULT_LIMIT))
    try:
        return max(1, min(MAX_LIMIT, int(raw)))
    except ValueError:
        raise BadRequest(f"limit {raw!r} is not a whole number") from None


def _form(ctx: Ctx, dataset: str) -> Safe:
    return html(
        '<form method="get" action="/recall" class="recall-form" hx-get="/recall" '
        'hx-target="#results" hx-swap="outerHTML" hx-push-url="true" '
        'aria-label="Recall">'
        '<input type="hidden" name="dataset" value="{ds}"><input type="hidden" name="run" value="1">'
        '<div class="field wide"><label for="q">Query</label>'
        '<input id="q" name="q" value="{q}" autocomplete="off" '
        'aria-describedby="q-hint"><p id="q-hint" class="hint">Empty: recency order, as a '
        "temporal question asks.</p></div>"
        '<div class="field"><label for="as_of">As of (UTC)</label>'
        '<input id="as_of" name="as_of" type="datetime-local" step="1" value="{as_of}" '
        'aria-describedby="as_of-hint"><p id="as_of-hint" class="hint">Ranks as if it were '
        "then; empty: now.</p></div>"
        '<div class="field"><label for="similarity_weight">Similarity weight</label>'
        '<input id="similarity_weight" name="similarity_weight" type="number" min="0" max="1" '
        'step="0.05" value="{sw}" placeholder="0.7" aria-describedby="w-hint"></div>'
        '<div class="field"><label for="recency_weight">Recency weight</label>'
        '<input id="recency_weight" name="recency_weight" type="number" min="0" max="1" '
        'step="0.05" value="{rw}" placeholder="0.3" aria-describedby="w-hint"></div>'
        '<div class="field"><label for="limit">Episodes</label>'
        '<input id="limit" name="limit" type="number" min="1" max="{max}" value="{limit}"></div>'
        '<div class="field check"><input id="learnings" name="learnings" type="checkbox" '
        'value="1"{checked}><label for="learnings">Key learnings in the prompt</label></div>'
        '<p id="w-hint" class="hint wide">Weights between 0 and 1; empty: the server\'s '
        "default (0.7 and 0.3). relevance = similarity × similarity weight + recency × "
        "recency weight.</p>"
        '<div class="field"><button type="submit">Recall</button></div></form>',
        ds=dataset,
        q=ctx.arg("q"),
        as_of=ctx.arg("as_of"),
        sw=ctx.arg("similarity_weight"),
        rw=ctx.arg("recency_weight"),
        max=MAX_LIMIT,
        limit=ctx.arg("limit", str(DEFAULT_LIMIT)),
        checked=Safe(" checked") if ctx.arg("learnings") else "",
    )


SCORE_PARTS = (
    ("relevance_score", "Relevance", "the ranking score"),
    ("similarity", "Similarity", "to the query, lexical and semantic combined"),
    ("lexical", "Lexical", "part of similarity, relative to the best candidate"),
    ("semantic", "Semantic", "part of similarity, relative to the best candidate"),
    ("recency", "Recency", "days since the episode ended, relative to the dataset's span"),
)


def score_bars(s: ScoredEpisode, rank: int, relevance_max: float) -> Safe:
    rows = []
    for attr, name, meaning in SCORE_PARTS:
        value = float(getattr(s, attr))
        top = relevance_max if attr == "relevance_score" else 1.0
        rows.append(
            html(
                '<tr class="score-{attr}"><th scope="row" title="{meaning}">{name}</th>'
                '<td class="bar"><meter min="0" max="{top}" value="{v}" '
                'aria-label="{name} {v3} of {top}"></meter></td>'
                '<td class="num">{v3}</td></tr>',
                attr=attr,
                meaning=meaning,
                name=name,
                top=f"{top:g}",
                v=f"{min(max(value, 0.0), top):.6f}",
                v3=f"{value:.3f}",
            )
        )
    return html(
        '<table class="scores"><caption class="sr-only">Scores of result {rank}</caption>'
        "<tbody>{rows}</tbody></table>",
        rank=rank,
        rows=join(rows),
    )


def results(
    ctx: Ctx,
    result: RecallResult,
    as_of: datetime | None,
    sw: float | None,
    rw: float | None,
    learnings: bool,
) -> Safe:
    now = as_of or ctx.now
    relevance_max = max(1.0, (sw if sw is not None else 0.7) + (rw if rw is not None else 0.3))
    items = []
    for rank, s in enumerate(result.episodes, start=1):
        e = s.episode
        items.append(
            html(
                '<li><article class="hit" aria-labelledby="hit-{rank}">'
                '<h3 id="hit-{rank}"><span class="rank">#{rank}</span> '
                '<a href="{thread_href}">{thread}</a> {badge} '
                '<span class="muted">ended {ended} · {event} · trigger {trigger}</span> '
                '<a href="{href}">details<span class="sr-only"> of result {rank}</span></a></h3>'
                '<div class="hit-body"><div>{summary}</div>{bars}</div></article></li>',
                rank=rank,
                thread_href=url("/thread", id=e.thread_id) + f"#window-{e.episode_id}",
                thread=e.thread_label or e.thread_id[:8],
                badge=status_badge(e.status),
                ended=when(e.ended_at, now),
                event=e.event_type or "no event type",
                trigger=e.trigger,
                href=url("/episode", id=e.episode_id),
                summary=text_block(e.summary),
                bars=score_bars(s, rank, relevance_max),
            )
        )
    timeline = render_episodes(result.episodes, now, "timeline", key_learnings=learnings)
    past = render_episodes(result.episodes, now, "past_conversation", key_learnings=learnings)
    weights = (f"similarity × {sw:g}" if sw is not None else "similarity × (server default)") + (
        f" + recency × {rw:g}" if rw is not None else " + recency × (server default)"
    )
    ranked = (
        html('<ol class="ranked">{items}</ol>', items=join(items))
        if items
        else Safe('<p class="empty">No current episode matched.</p>')
    )
    return html(
        '<section id="results" aria-labelledby="results-title" data-learnings="{kl}">'
        '<h2 id="results-title" tabindex="-1">{n} of {total} current episode{s}</h2>'
        "<p>relevance = {weights}; as of {as_of}.</p>{ranked}"
        "<h2>As the agent's prompt receives it</h2>"
        '<p class="hint">Relative times are measured from {as_of_plain}.</p>'
        '<div class="prompts"><figure><figcaption><code>render_episodes(…, '
        'style="timeline")</code> (oldest first)</figcaption>'
        '<pre id="prompt-timeline" tabindex="0">{timeline}</pre></figure>'
        '<figure><figcaption><code>render_episodes(…, style="past_conversation")</code> '
        '(ranked order)</figcaption><pre id="prompt-past" tabindex="0">{past}</pre></figure>'
        "</div></section>",
        kl="1" if learnings else "0",
        n=len(result.episodes),
        total=result.episode_count,
        s="" if result.episode_count == 1 else "s",
        weights=weights,
        as_of=when(now, ctx.now) if as_of else html("now ({t})", t=when(now, now)),
        as_of_plain=now.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        ranked=ranked,
        timeline=timeline,
        past=past,
    )


def recall(ctx: Ctx) -> Page | Fragment:
    dataset = ctx.required("dataset")
    outcome: Safe = Safe('<section id="results" aria-live="polite"></section>')
    status = 200
    if ctx.arg("run") or ctx.arg("q"):
        try:
            as_of = parse_as_of(ctx.arg("as_of"))
            sw, rw = _weight(ctx, "similarity_weight"), _weight(ctx, "recency_weight")
            limit = _limit(ctx)
        except BadRequest as err:
            outcome, status = _failed("This recall cannot be asked", str(err)), 400
        else:
            try:
                found = ctx.client.recall(
                    dataset,
                    ctx.arg("q") or None,
                    limit=limit,
                    similarity_weight=sw,
                    recency_weight=rw,
                    as_of=as_of,
                )
            except InvalidArgumentError as err:
                outcome, status = _failed("Recall refused the request", err.message), 400
            else:
                outcome = results(ctx, found, as_of, sw, rw, bool(ctx.arg("learnings")))
    if ctx.target == "results":
        return Fragment(outcome, status)
    body = html("{form}{outcome}", form=_form(ctx, dataset), outcome=outcome)
    return Page(f"Recall in {dataset}", body, section="recall", dataset=dataset, status=status)


def _failed(title: str, detail: str) -> Safe:
    return html('<section id="results">{panel}</section>', panel=error_panel(title, detail))
