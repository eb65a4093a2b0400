"""Datasets (``list_datasets``) and a dataset's threads (``list_threads``) with the state of
their episodes (``list_episodes`` per thread)."""

from __future__ import annotations

from concurrent.futures import Future

from episodic.console.views import Ctx, Page
from episodic.console.views.html import Safe, html, join, url, when
from episodic.console.views.layout import (
    error_panel,
    next_page_link,
    notice,
    short_id,
    status_badge,
)
from episodic.sdk.client import (
    DatasetPolicy,
    Episode,
    EpisodicRpcError,
    PermissionDeniedError,
    Thread,
)

DATASETS_PER_PAGE = 50
THREADS_PER_PAGE = 50


def _open_form(value: str = "") -> Safe:
    return html(
        '<form method="get" action="/dataset" class="row" role="search" '
        'aria-label="Open a dataset">'
        '<label for="open-dataset">Open a dataset by name</label>'
        '<input id="open-dataset" name="dataset" value="{v}" required '
        'autocomplete="off" spellcheck="false" placeholder="e.g. acme/user_42">'
        '<button type="submit">Open</button></form>',
        v=value,
    )


def datasets(ctx: Ctx) -> Page:
    """Every dataset the key may list (an admin key for every dataset), most recently
    active first; anyone can open a dataset by name."""
    prefix = ctx.arg("prefix")
    token = ctx.arg("page_token")
    filter_form = html(
        '<form method="get" action="/" class="row" role="search" aria-label="Filter datasets">'
        '<label for="prefix">Datasets starting with</label>'
        '<input id="prefix" name="prefix" value="{p}" autocomplete="off" spellcheck="false" '
        'placeholder="e.g. acme/">'
        '<button type="submit">Filter</button></form>',
        p=prefix,
    )
    try:
        found = ctx.client.list_datasets(
            prefix=prefix, page_size=DATASETS_PER_PAGE, page_token=token
        )
    except PermissionDeniedError as err:
        body = join(
            [
                error_panel(
                    "This key cannot list every dataset",
                    err.message,
                    "Listing datasets needs an admin key for every dataset ('*'). "
                    "You can still open a dataset the key covers by its name.",
                ),
                _open_form(),
            ]
        )
        return Page("Datasets", body, section="datasets")
    rows = [
        html(
            '<tr><th scope="row"><a href="{href}">{ds}</a></th>'
            '<td class="num">{threads}</td><td class="num">{messages}</td><td>{last}</td>'
            '<td><a href="{timeline}">Timeline<span class="sr-only"> of {ds}</span></a> · '
            '<a href="{recall}">Recall<span class="sr-only"> in {ds}</span></a> · '
            '<a href="{procedures}">Procedures<span class="sr-only"> of {ds}</span></a> · '
            '<a href="{pipeline}">Pipeline<span class="sr-only"> of {ds}</span></a></td></tr>',
            href=url("/dataset", dataset=d.dataset),
            ds=d.dataset,
            threads=d.thread_count,
            messages=d.message_count,
            last=when(d.last_activity_at, ctx.now),
            timeline=url("/timeline", dataset=d.dataset),
            recall=url("/recall", dataset=d.dataset),
            procedures=url("/procedures", dataset=d.dataset),
            pipeline=url("/pipeline", dataset=d.dataset),
        )
        for d in found.items
    ]
    table = (
        html(
            '<table class="list" id="datasets"><caption>{caption}</caption><thead><tr>'
            '<th scope="col">Dataset</th><th scope="col" class="num">Threads</th>'
            '<th scope="col" class="num">Messages</th><th scope="col">Last activity</th>'
            '<th scope="col">Views</th></tr></thead><tbody>{rows}</tbody></table>',
            caption="Datasets, most recently active first"
            + (f", starting with {prefix!r}" if prefix else ""),
            rows=join(rows),
        )
        if rows
        else html(
            '<p class="empty">No datasets{p}.</p>', p=f" start with {prefix!r}" * bool(prefix)
        )
    )
    body = join(
        [
            filter_form,
            table,
            next_page_link("/", found.next_page_token, prefix=prefix),
            _open_form(),
        ]
    )
    return Page("Datasets", body, section="datasets")


#: Episode statuses that say a thread's episodes are not all done: listed per dataset (few
#: in a healthy suite), so the threads page costs a fixed number of calls, whatever its size.
OPEN_STATUSES = ("pending", "processing", "failed")


def thread_state(thread: Thread, open_episodes: list[Episode]) -> Safe:
    """What the thread's episodes look like: how far episodes cover it, the episodes still
    pending, processing or failed (with their windows), and how many messages no episode
    covers yet."""
    parts: list[Safe] = []
    if thread.captured_sequence > 0:
        parts.append(
            html(
                '<span class="covered">messages 1–{n} in episodes</span>',
                n=thread.captured_sequence,
            )
        )
    else:
        parts.append(Safe('<span class="muted">no episode yet</span>'))
    for e in sorted(open_episodes, key=lambda e: e.start_sequence):
        parts.append(
            html(
                "{badge} <span>messages {a}–{b}</span>",
                badge=status_badge(e.status),
                a=e.start_sequence,
                b=e.end_sequence,
            )
        )
    uncaptured = thread.message_count - thread.captured_sequence
    if uncaptured > 0:
        parts.append(
            html(
                '<span class="badge status-uncaptured">{n} message{s} not in an episode</span>',
                n=uncaptured,
                s="" if uncaptured == 1 else "s",
            )
        )
    return join(parts, " ")


#: How the threads page says where the dataset's language came from (DatasetPolicy).
LANGUAGE_ORIGINS = {
    "default": "the default: detected from its text once there is enough of it",
    "detected": "detected from its text",
    "set": "set with SetDatasetPolicy",
}


def _language(policy: Future[DatasetPolicy]) -> Safe:
    """The line naming the language the dataset's text is stemmed in, and where it came
    from; nothing when the policy cannot be read (an admin call: a reader's key may not)."""
    try:
        found = policy.result()
    except EpisodicRpcError:
        return Safe("")
    return html(
        '<p id="dataset-language">Text stemmed in <strong>{language}</strong> ({origin}).</p>',
        language=found.language,
        origin=LANGUAGE_ORIGINS.get(found.language_origin, "text-search configuration"),
    )


def threads(ctx: Ctx) -> Page:
    """A dataset's threads, most recently active first, with their episodes' state."""
    dataset = ctx.required("dataset")
    token = ctx.arg("page_token")
    listed = ctx.pool.submit(
        ctx.client.list_threads, dataset, page_size=THREADS_PER_PAGE, page_token=token
    )
    policy = ctx.pool.submit(ctx.client.get_dataset_policy, dataset)

    def of_status(status: str) -> list[Episode] | EpisodicRpcError:
        try:  # the newest 1000 of each: a backlog beyond that is the pipeline page's news
            return ctx.client.list_episodes(dataset, status=status, page_size=1000).items
        except EpisodicRpcError as err:
            return err

    lists = ctx.fan_out(of_status, OPEN_STATUSES)
    page = listed.result()
    open_by_thread: dict[str, list[Episode]] = {}
    failed_lists = [e for e in lists if isinstance(e, EpisodicRpcError)]
    for found in lists:
        if not isinstance(found, EpisodicRpcError):
            for e in found:
                open_by_thread.setdefault(e.thread_id, []).append(e)
    rows = []
    for thread in page.items:
        rows.append(
            html(
                '<tr><th scope="row"><a href="{href}">{label}</a> {id}</th>'
                '<td class="num">{count}</td><td>{last}</td><td>{state}</td></tr>',
                href=url("/thread", id=thread.thread_id),
                label=thread.label or "(no label)",
                id=short_id(thread.thread_id),
                count=thread.message_count,
                last=when(thread.last_message_at or thread.created_at, ctx.now),
                state=thread_state(thread, open_by_thread.get(thread.thread_id, [])),
            )
        )
    if rows:
        table = html(
            '<table class="list" id="threads"><caption>Threads of {ds}, most recently active '
            'first</caption><thead><tr><th scope="col">Thread</th>'
            '<th scope="col" class="num">Messages</th><th scope="col">Last activity</th>'
            '<th scope="col">Episodes</th></tr></thead><tbody>{rows}</tbody></table>',
            ds=dataset,
            rows=join(rows),
        )
    else:
        table = html('<p class="empty">The dataset {ds} has no threads.</p>', ds=dataset)
    warning = (
        error_panel(
            "Episode states are incomplete",
            f"Listing episodes failed ({failed_lists[0].code.name}): {failed_lists[0].message}",
        )
        if failed_lists
        else Safe("")
    )
    erased = (  # DeleteEpisode of one of its events lands here (its own page is gone)
        notice(f"Event {ctx.arg('episode')[:8]} is erased.")
        if ctx.arg("done") == "erased"
        else Safe("")
    )
    body = join(
        [
            erased,
            warning,
            _language(policy),
            table,
            next_page_link("/dataset", page.next_page_token, "More threads", dataset=dataset),
        ]
    )
    return Page(f"Threads of {dataset}", body, section="threads", dataset=dataset)
