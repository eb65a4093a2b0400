"""A dataset's procedures (``list_procedures``, issue 39): how the agent did things that
worked, learned from the tool calls of successful stretches of conversation. Each shows its
goal, its steps in order (the tool, what it was for, whether it changes something, and
where each argument's value came from), how often it worked and failed, and the stretches
it was learned from, linked to their threads' episode windows. Read-only: deleting a
procedure is the CLI's and the SDK's (an admin RPC), not a console action."""

from __future__ import annotations

from episodic.console.views import Ctx, Page
from episodic.console.views.html import Safe, html, join, url, when
from episodic.console.views.layout import next_page_link, short_id
from episodic.sdk.client import Procedure, ProcedureStep

PROCEDURES_PER_PAGE = 20
GOAL_HEADING = 120

#: An outcome as the page says it, and the badge class that shows it (text, never colour
#: alone: success is the current episode's style, failure the failed one's).
OUTCOMES = {
    "success": ("worked", "status-completed"),
    "failure": ("failed", "status-failed"),
    "partial": ("partly worked", "status-pending"),
}


def source_words(source: str) -> str:
    """Where an argument's value came from, in words (as ``render_procedures`` says it)."""
    if source == "user":
        return "from the user"
    if source == "agent":
        return "chosen by the agent"
    if source.startswith("tool:"):
        return f"from {source[5:]}'s result"
    return f"from {source}" if source else "from the conversation"


def _heading(goal: str) -> str:
    text = " ".join(goal.split())
    return text if len(text) <= GOAL_HEADING else text[: GOAL_HEADING - 1] + "…"


def _step(step: ProcedureStep) -> Safe:
    arguments = [
        html(
            '<li><code class="arg-name">{name}</code> {where}</li>',
            name=name,
            where=source_words(source),
        )
        for name, source in step.arguments.items()
    ]
    return html(
        '<li class="step"><code class="tool-name">{tool}</code> {kind}{purpose}{args}</li>',
        tool=step.tool,
        kind=Safe('<span class="badge writes">changes something</span>')
        if step.writes
        else Safe('<span class="badge reads">reads</span>'),
        purpose=html(' <span class="purpose">{p}</span>', p=" ".join(step.purpose.split()))
        if step.purpose.strip()
        else "",
        args=html('<ul class="step-args">{items}</ul>', items=join(arguments)) if arguments else "",
    )


def _counts(p: Procedure) -> Safe:
    parts = []
    for outcome, n in (
        ("success", p.success_count),
        ("failure", p.failure_count),
        ("partial", p.partial_count),
    ):
        word, cls = OUTCOMES[outcome]
        parts.append(
            html(
                '<span class="badge {cls}" data-outcome="{o}">{word} {n}×</span>',
                cls=cls,
                o=outcome,
                word=word,
                n=n,
            )
        )
    return join(parts, " ")


def _sources(p: Procedure) -> Safe:
    rows = []
    for thread_id, episode_id, outcome in p.sources:
        word, cls = OUTCOMES.get(outcome, (outcome, "status-uncaptured"))
        rows.append(
            html(
                '<tr><th scope="row"><a href="{thread_href}">thread {thread}</a></th>'
                '<td><a href="{episode_href}">episode {episode}</a></td>'
                '<td><span class="badge {cls}">{word}</span></td></tr>',
                thread_href=url("/thread", id=thread_id) + f"#window-{episode_id}",
                thread=short_id(thread_id),
                episode_href=url("/episode", id=episode_id),
                episode=short_id(episode_id),
                cls=cls,
                word=word,
            )
        )
    if not rows:
        return Safe('<p class="muted">No sources.</p>')
    return html(
        '<table class="list sources"><caption>Learned from (newest first)</caption><thead><tr>'
        '<th scope="col">Thread</th><th scope="col">Episode window</th>'
        '<th scope="col">Outcome</th></tr></thead><tbody>{rows}</tbody></table>',
        rows=join(rows),
    )


def procedure_section(p: Procedure, ctx: Ctx) -> Safe:
    others = [" ".join(g.split()) for g in p.example_goals]
    goal = " ".join(p.goal.split())
    examples = [g for g in others if g and g != goal]
    return html(
        '<section class="procedure" id="procedure-{id}" aria-labelledby="p-{id}">'
        '<h2 id="p-{id}">{heading}</h2>'
        '<p class="support">{counts} <span class="muted">learned {created} · support last '
        "changed {updated} · written by the {extractor} extractor · id {short}</span></p>"
        "{goal}"
        "{examples}"
        '<h3 class="sub">Steps</h3><ol class="steps">{steps}</ol>'
        "{sources}</section>",
        id=p.procedure_id,
        heading=_heading(p.goal) or "(no goal)",
        counts=_counts(p),
        created=when(p.created_at, ctx.now),
        updated=when(p.updated_at, ctx.now),
        extractor=p.extractor or "rules",
        short=short_id(p.procedure_id),
        # The whole request, when the heading had to shorten it.
        goal=html('<h3 class="sub">Goal</h3><p class="text goal">{g}</p>', g=p.goal)
        if _heading(p.goal) != goal
        else "",
        examples=html(
            '<h3 class="sub">Other requests it served</h3><ul class="examples">{items}</ul>',
            items=join(html("<li>{g}</li>", g=g) for g in examples),
        )
        if examples
        else "",
        steps=join(_step(s) for s in p.steps),
        sources=_sources(p),
    )


def procedures(ctx: Ctx) -> Page:
    """A dataset's procedures, most successes first, a page at a time."""
    dataset = ctx.required("dataset")
    token = ctx.arg("page_token")
    found = ctx.client.list_procedures(dataset, page_size=PROCEDURES_PER_PAGE, page_token=token)
    intro = Safe(
        '<p class="legend" id="procedures-legend">Procedures are learned from the tool calls '
        "of stretches of conversation whose outcome was recorded (RecordOutcome): stretches "
        "with the same actions (the tools that change something, in the same order) merge "
        "into one, which gains support with every success; failures with the same actions "
        "count against it. Recall leaves out those that failed more often than they worked.</p>"
    )
    if not found.items:
        body = join(
            [
                intro,
                html('<p class="empty">The dataset {ds} has no procedures yet.</p>', ds=dataset),
            ]
        )
    else:
        index = [
            html(
                '<tr><th scope="row"><a href="#procedure-{id}">{goal}</a></th>'
                "<td>{tools}</td>"
                '<td class="num">{ok}</td><td class="num">{failed}</td>'
                '<td class="num">{partial}</td></tr>',
                id=p.procedure_id,
                goal=_heading(p.goal) or "(no goal)",
                tools=join(
                    (html('<code class="tool-name">{t}</code>', t=s.tool) for s in p.steps),
                    " → ",
                ),
                ok=p.success_count,
                failed=p.failure_count,
                partial=p.partial_count,
            )
            for p in found.items
        ]
        table = html(
            '<table class="list" id="procedures"><caption>Procedures of {ds}, most successes '
            'first</caption><thead><tr><th scope="col">Goal</th><th scope="col">Steps</th>'
            '<th scope="col" class="num">Worked</th><th scope="col" class="num">Failed</th>'
            '<th scope="col" class="num">Partly</th></tr></thead><tbody>{rows}</tbody></table>',
            ds=dataset,
            rows=join(index),
        )
        body = join(
            [
                intro,
                table,
                join(procedure_section(p, ctx) for p in found.items),
                next_page_link(
                    "/procedures", found.next_page_token, "More procedures", dataset=dataset
                ),
            ]
        )
    return Page(f"Procedures of {dataset}", body, section="procedures", dataset=dataset)
