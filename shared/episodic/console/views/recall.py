"""The recall playground: a query, ``as_of``, the two weights and the abstention options
(``abstain``, ``min_relevance``, ``min_match``) in; the ranked episodes out, with their
ranking score, calibrated relevance and score parts as bars, and the same list exactly as an
agent's prompt gets it (:func:`episodic.render.render_episodes`, both styles)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from episodic.console.views import BadRequest, Ctx, Fragment, Page
from episodic.console.views.html import Safe, html, join, url, when
from episodic.console.views.layout import error_panel, status_badge, text_block
from episodic.render import render_episodes
from episodic.sdk.client import InvalidArgumentError, RecallResult, ScoredEpisode

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
    parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    try:
        # A timestamp on the wire is a UTC time of years 1 to 9999.
        return parsed.astimezone(UTC)
    except OverflowError:
        raise BadRequest(
            f"as of {value!r} is out of range: in UTC it must fall between years 1 and 9999"
        ) from None


def _weight(ctx: Ctx, name: str) -> float | None:
    raw = ctx.arg(name)
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise BadRequest(f"{name.replace('_', ' ')} {raw!r} is not a number") from None


def _threshold(ctx: Ctx, name: str) -> float | None:
    """A threshold of the form: empty is None (unset, as on the wire: abstain's to set; a
    typed 0 overrides abstain's). Only the number is checked here: the range is Recall's
    to refuse, with its recommended values."""
    raw = ctx.arg(name)
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise BadRequest(
            f"{name.replace('_', ' ')} {raw!r} is not a number: give one between 0 and 1, "
            "or leave it empty (off)"
        ) from None


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
        "default (0.7 and 0.3). score = similarity × similarity weight + recency × "
        "recency weight: it orders this request's episodes, and only them.</p>"
        # The abstention options, worded as docs/concepts/recall.md and store/relevance.py
        # say: both thresholds read calibrated curves, which exist for some embedders only.
        '<div class="field check wide"><input id="abstain" name="abstain" type="checkbox" '
        'value="1"{abstain} aria-describedby="abstain-hint t-hint"><label for="abstain">'
        "Abstain when nothing fits</label></div>"
        '<p id="abstain-hint" class="hint wide">Applies the min relevance and min match '
        "recommended for the embedding model Recall runs, so a question nothing here answers "
        "gets no episodes. Only where those curves were fitted: a dataset in English, "
        "with MiniLM or e5, or in another language with e5; under another embedder (the "
        "hashing one, an OpenAI model) or MiniLM in another language it keeps every "
        "episode. A threshold set below overrides its half.</p>"
        '<div class="field"><label for="min_relevance">Min relevance</label>'
        '<input id="min_relevance" name="min_relevance" type="number" min="0" max="1" '
        'step="any" value="{min_relevance}" placeholder="0 (off)" '
        'aria-describedby="min_relevance-hint t-hint"><p id="min_relevance-hint" '
        'class="hint">Leaves out episodes whose calibrated relevance is below it. Alone, 0.4 '
        "is recommended with the default MiniLM embedder.</p></div>"
        '<div class="field"><label for="min_match">Min match</label>'
        '<input id="min_match" name="min_match" type="number" min="0" max="1" step="any" '
        'value="{min_match}" placeholder="0 (off)" aria-describedby="min_match-hint t-hint">'
        '<p id="min_match-hint" class="hint">Answers with no episodes when the request\'s '
        "best match (the chance the dataset holds an answer at all) is below it; above it, "
        "the weak episodes are kept too.</p></div>"
        '<p id="t-hint" class="hint wide">Thresholds between 0 and 1; empty or 0: off. They '
        "act only with a query, and keep an episode from inside a time the query names.</p>"
        '<div class="field"><button type="submit">Recall</button></div></form>',
        ds=dataset,
        q=ctx.arg("q"),
        as_of=ctx.arg("as_of"),
        sw=ctx.arg("similarity_weight"),
        rw=ctx.arg("recency_weight"),
        max=MAX_LIMIT,
        limit=ctx.arg("limit", str(DEFAULT_LIMIT)),
        checked=Safe(" checked") if ctx.arg("learnings") else "",
        abstain=Safe(" checked") if ctx.arg("abstain") else "",
        min_relevance=ctx.arg("min_relevance"),
        min_match=ctx.arg("min_match"),
    )


#: The rows of a hit's score table, as the CLI names them: SCORE is the ranking score (it
#: only orders one request's episodes), RELEVANCE the calibrated one (comparable across
#: requests: what the thresholds compare).
SCORE_PARTS = (
    (
        "relevance_score",
        "Score",
        "the ranking score: similarity × similarity weight + recency × recency weight; it "
        "orders this request's episodes and means nothing beyond them",
    ),
    (
        "relevance",
        "Calibrated relevance",
        "the chance the episode answers the query, 0 to 1, comparable across queries and "
        "datasets: what min relevance and abstain compare (none without a query)",
    ),
    ("similarity", "Similarity", "to the query, lexical and semantic combined"),
    ("lexical", "Lexical", "part of similarity, relative to the best candidate"),
    ("semantic", "Semantic", "part of similarity, relative to the best candidate"),
    ("recency", "Recency", "days since the episode ended, relative to the dataset's span"),
)


@dataclass(frozen=True)
class Thresholds:
    """The abstention options of a request, as sent (None: unset)."""

    abstain: bool = False
    min_relevance: float | None = None
    min_match: float | None = None

    @property
    def any(self) -> bool:
        return self.abstain or (self.min_relevance or 0) > 0 or (self.min_match or 0) > 0

    def describe(self) -> str:
        parts = []
        if self.abstain:
            parts.append("abstain (the embedder's recommended thresholds, where fitted)")
        if self.min_relevance:
            parts.append(f"min relevance {self.min_relevance:g}")
        if self.min_match:
            parts.append(f"min match {self.min_match:g}")
        return ", ".join(parts)


def score_bars(s: ScoredEpisode, rank: int, relevance_max: float, calibrated: bool) -> Safe:
    """The hit's scores as bars. ``calibrated``: whether the request had a query to
    calibrate against (without one Recall sends relevance 0, which means nothing)."""
    rows = []
    for attr, name, meaning in SCORE_PARTS:
        if attr == "relevance" and not calibrated:
            rows.append(
                html(
                    '<tr class="score-{attr}"><th scope="row" title="{meaning}">{name}</th>'
                    '<td class="bar muted">no query</td><td class="num">–</td></tr>',
                    attr=attr,
                    meaning=meaning,
                    name=name,
                )
            )
            continue
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


def _empty(result: RecallResult, thresholds: Thresholds) -> Safe:
    """Why no episode came back: the thresholds left everything out (then say which, and
    how to see the closest episodes anyway), or there was nothing to rank."""
    if not result.abstained:
        return Safe('<p class="empty">No current episode matched.</p>')
    u = result.understanding
    named = bool(u and u.applied and (u.window_start or u.window_end or u.ordinal))
    remedies = []
    if thresholds.abstain:
        remedies.append("untick “Abstain when nothing fits”")
    if thresholds.min_relevance:
        remedies.append("lower min relevance")
    if thresholds.min_match:
        remedies.append("lower min match")
    remedy = " or ".join(remedies)
    return html(
        '<p class="empty" id="thresholds-empty">Nothing passed the thresholds ({which}): no '
        "episode{where} fits the query well enough. {remedy} to see the closest episodes "
        "anyway.</p>",
        which=thresholds.describe(),
        where=" in the time the query names" if named else "",
        remedy=remedy[:1].upper() + remedy[1:],
    )


def results(
    ctx: Ctx,
    result: RecallResult,
    as_of: datetime | None,
    sw: float | None,
    rw: float | None,
    learnings: bool,
    thresholds: Thresholds = Thresholds(),
) -> Safe:
    now = as_of or ctx.now
    relevance_max = max(1.0, (sw if sw is not None else 0.7) + (rw if rw is not None else 0.3))
    # Recall calibrates only what it matched against a query (the store's `with_query`).
    calibrated = bool(ctx.arg("q")) and (sw is None or sw > 0)
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
                bars=score_bars(s, rank, relevance_max, calibrated),
            )
        )
    timeline = render_episodes(result.episodes, now, "timeline", key_learnings=learnings)
    past = render_episodes(result.episodes, now, "past_conversation", key_learnings=learnings)
    weights = (f"similarity × {sw:g}" if sw is not None else "similarity × (server default)") + (
        f" + recency × {rw:g}" if rw is not None else " + recency × (server default)"
    )
    applied = Safe("")
    if thresholds.any:
        applied = html(
            '<p id="thresholds-applied">Thresholds: {which}{note}.</p>',
            which=thresholds.describe(),
            note="" if calibrated else "; none acts without a query",
        )
    if thresholds.abstain and result.match is not None and not result.abstain_applied:
        applied = html(
            '{applied}<p id="abstain-not-applied">Abstain did not apply: its thresholds are '
            "fitted for the built-in embedders, in English and, with e5, in other languages, "
            "so these are the closest episodes, which may not fit.</p>",
            applied=applied,
        )
    if not result.settled:
        # RecalledEpisodes.chunks_pending / episodes_pending: the same question may rank
        # differently in a few seconds (the Summariser is still at work on the dataset).
        pending = [
            what
            for what, on in (
                ("episodes still being summarised", result.episodes_pending),
                ("messages of a current episode not yet indexed for recall", result.chunks_pending),
            )
            if on
        ]
        applied = html(
            '{applied}<p id="still-settling" role="status">Still settling: {what}; the same '
            "question may rank differently in a few seconds.</p>",
            applied=applied,
            what=" and ".join(pending),
        )
    if result.match is not None:
        applied = html(
            '{applied}<p id="request-match" title="How likely the dataset holds an answer to '
            'the query at all, calibrated: what min match compares">Match of the request: '
            "{match}</p>",
            applied=applied,
            match=f"{result.match:.3f}",
        )
    ranked = (
        html('<ol class="ranked">{items}</ol>', items=join(items))
        if items
        else _empty(result, thresholds)
    )
    return html(
        '<section id="results" aria-labelledby="results-title" data-learnings="{kl}">'
        '<h2 id="results-title" tabindex="-1">{n} of {total} current episode{s}</h2>'
        "<p>score = {weights}; as of {as_of}.</p>{applied}{ranked}"
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
        applied=applied,
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
            thresholds = Thresholds(
                abstain=bool(ctx.arg("abstain")),
                min_relevance=_threshold(ctx, "min_relevance"),
                min_match=_threshold(ctx, "min_match"),
            )
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
                    min_relevance=thresholds.min_relevance,
                    min_match=thresholds.min_match,
                    abstain=thresholds.abstain,
                )
            except InvalidArgumentError as err:
                # Out-of-range thresholds among them: Recall's message names the range and
                # the recommended values.
                outcome, status = _failed("Recall refused the request", err.message), 400
            else:
                outcome = results(ctx, found, as_of, sw, rw, bool(ctx.arg("learnings")), thresholds)
    if ctx.target == "results":
        return Fragment(outcome, status)
    body = html("{form}{outcome}", form=_form(ctx, dataset), outcome=outcome)
    return Page(f"Recall in {dataset}", body, section="recall", dataset=dataset, status=status)


def _failed(title: str, detail: str) -> Safe:
    return html('<section id="results">{panel}</section>', panel=error_panel(title, detail))
