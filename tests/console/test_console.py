"""The web console in a real browser (headless Chromium driven by Playwright) against the
four services as real processes: every page shows what the SDK answers, a thread's episode
windows, the timeline's details by mouse and keyboard, a recall with its score bars and the
prompt exactly as ``render_episodes`` writes it, the live pipeline, the admin actions, text
that looks like HTML shown as text, credentials and the accessibility basics.

Screenshots land in ``$EPISODIC_TEST_ARTIFACTS/console`` (default: the temp folder)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from episodic.console import HTMX_LICENSE, HTMX_SHA256, HTMX_VERSION, ConsoleApp, ConsoleServer
from episodic.console.app import ConsoleConfigError, http_key_for
from episodic.console.views.datasets import LANGUAGE_ORIGINS
from episodic.console.views.layout import STATUS_LABELS
from episodic.render import render_episodes
from episodic.sdk.client import EPISODE_STATUSES, NotFoundError
from episodic.testing.processes import wait_until
from tests.console.conftest import (
    AS_OF,
    DATASET,
    OPS_DATASET,
    SCRIPT,
    TOOL_MARKUP,
    TOOL_THREADS,
    TOOLS_DATASET,
    XSS_MESSAGE,
    Demo,
    RecordingClient,
    Suite,
)

# The console reads through the SDK and the services: the Citus tier runs every page on a
# coordinator and two workers too (issue 38).
pytestmark = pytest.mark.citus

try:
    from playwright.sync_api import expect
except ImportError:  # the browser's tests skip (the browser fixture says why)
    expect = None
else:
    expect.set_options(timeout=15_000)  # no sleeps: every wait polls up to a deadline

STATIC = Path(__file__).resolve().parents[2] / "shared" / "episodic" / "console" / "static"


# The console is on loopback: never through a proxy from the environment.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def shot(page: Any, artifacts: Path, name: str) -> Path:
    path = artifacts / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


def meter_values(page: Any, name: str) -> list[str]:
    """The values of the score bars called ``name`` (``"<name> 0.123 of 1"``), in order."""
    labels = page.locator(f"meter[aria-label^='{name} ']").evaluate_all(
        "els => els.map(e => e.getAttribute('aria-label'))"
    )
    return [label.removeprefix(f"{name} ").split(" ")[0] for label in labels]


def _get(
    url: str, headers: dict[str, str] | None = None, data: bytes | None = None
) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url, headers=headers or {}, data=data)
    try:
        with DIRECT.open(request, timeout=20) as answer:
            return answer.status, dict(answer.headers), answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read().decode()


# --------------------------------------------------------------------------- pages


def test_datasets_and_threads_show_what_the_sdk_answers(
    page: Any, console: str, suite: Suite, demo: Demo, artifacts: Path
) -> None:
    with suite.client() as sdk:
        datasets = sdk.list_datasets().items
        threads = sdk.list_threads(DATASET, page_size=50).items
        policy = sdk.get_dataset_policy(DATASET)
        unfinished = [
            e
            for st in ("pending", "processing", "failed")
            for e in sdk.iter_episodes(DATASET, status=st)
        ]
    assert {d.dataset for d in datasets} == {DATASET, OPS_DATASET, TOOLS_DATASET}

    page.goto(console + "/")
    for d in datasets:
        row = page.locator("#datasets tbody tr", has_text=d.dataset)
        cells = row.locator("td").all_inner_texts()
        assert cells[:2] == [str(d.thread_count), str(d.message_count)], (d, cells)
    shot(page, artifacts, "01-datasets")

    page.get_by_role("link", name=DATASET, exact=True).click()
    page.wait_for_url("**/dataset?dataset=*")
    assert page.locator("h1").inner_text() == f"Threads of {DATASET}"
    # The language its text is stemmed in, and whose choice it is (the demo's English
    # conversations: detected by the Summariser, or still the default).
    assert policy.language_origin in ("default", "detected")
    expect(page.locator("#dataset-language")).to_have_text(
        f"Text stemmed in {policy.language} ({LANGUAGE_ORIGINS[policy.language_origin]})."
    )
    rows = page.locator("#threads tbody tr")
    assert rows.count() == len(threads)
    for i, t in enumerate(threads):  # most recently active first, like the SDK
        row = rows.nth(i)
        assert row.locator("th a").inner_text() == (t.label or "(no label)")
        cells = row.locator("td").all_inner_texts()
        assert cells[0] == str(t.message_count)
        state = cells[2]
        if t.captured_sequence:
            assert f"messages 1–{t.captured_sequence} in episodes" in state
        for e in unfinished:  # episodes not done yet, with their windows
            shown = f"{STATUS_LABELS[e.status]} messages {e.start_sequence}–{e.end_sequence}"
            assert (shown in state) == (e.thread_id == t.thread_id), (shown, state)
        uncaptured = t.message_count - t.captured_sequence
        assert (f"{uncaptured} message" in state) == (uncaptured > 0), state
    shot(page, artifacts, "02-threads")


def test_a_thread_shows_its_messages_inside_its_episode_windows(
    page: Any, console: str, suite: Suite, demo: Demo, artifacts: Path
) -> None:
    thread_id = demo.threads["billing-q2"]
    with suite.client() as sdk:
        thread = sdk.get_thread(thread_id)
        episodes = list(sdk.iter_episodes(DATASET, thread_id=thread_id))
        messages = sdk.load_session(thread_id)
    assert {e.status for e in episodes} == {
        "archived",
        "completed",
        "failed",
        "pending",
        "processing",
    }

    page.goto(f"{console}/thread?id={thread_id}")
    ordered = sorted(episodes, key=lambda e: e.start_sequence)
    for n, e in enumerate(ordered, start=1):
        window = page.locator(f"#window-{e.episode_id}")
        head = window.locator("h3").inner_text()
        assert (
            f"Episode {n} of {len(episodes)}: messages {e.start_sequence}–{e.end_sequence}" in head
        )
        assert STATUS_LABELS[e.status] in head  # the status in words, not colour alone
        ids = window.locator("li.msg").evaluate_all("els => els.map(e => e.id)")
        assert ids == [f"m-{s}" for s in range(e.start_sequence, e.end_sequence + 1)]
    rest = page.locator(".window-none")
    assert "not in an episode yet" in rest.locator("h3").inner_text()
    ids = rest.locator("li.msg").evaluate_all("els => els.map(e => e.id)")
    assert ids == [f"m-{s}" for s in range(thread.captured_sequence + 1, thread.message_count + 1)]
    shown = page.locator("li.msg .text").all_text_contents()
    assert shown == [m.content for m in messages]
    # The episodes table lists the same windows.
    table = page.locator("#thread-episodes tbody tr").all_inner_texts()
    assert [r.split("\t")[1] for r in table] == [
        f"{e.start_sequence}–{e.end_sequence}" for e in ordered
    ]
    shot(page, artifacts, "03-thread-windows")

    # A summarised LoCoMo-like session: one current window over all its messages.
    session = demo.threads["conv-demo/session_1"]
    page.goto(f"{console}/thread?id={session}")
    assert page.locator(".window-completed li.msg").count() == 6
    assert page.locator(".window-completed .name").first.inner_text() == "Caroline"
    shot(page, artifacts, "04-thread-session")


def test_a_script_in_a_message_is_shown_as_text(
    page: Any, console: str, suite: Suite, demo: Demo, artifacts: Path
) -> None:
    thread_id = demo.threads["xss-probe"]
    page.goto(f"{console}/thread?id={thread_id}")
    first = page.locator("li.msg .text").first
    assert first.text_content() == XSS_MESSAGE
    assert SCRIPT in first.inner_text()  # visible, as text
    assert page.evaluate("window.__pwned") is None
    assert page.locator("main script, main img").count() == 0
    status, _, raw = _get(f"{console}/thread?id={thread_id}")
    assert status == 200
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in raw and SCRIPT not in raw
    shot(page, artifacts, "05-script-as-text")
    # The summary quotes it too: shown as text in the recall playground as well.
    page.goto(f"{console}/recall?dataset={DATASET}&q=snippet+text&run=1")
    assert page.evaluate("window.__pwned") is None
    assert page.locator("main script, main img").count() == 0


def test_a_thread_shows_tool_calls_and_the_calls_results_answer(
    page: Any, console: str, suite: Suite, demo: Demo, artifacts: Path
) -> None:
    """Each call an assistant made, with the tool's name and its arguments; each tool
    result with the tool that answered and a link to the call it answers."""
    thread_id = demo.threads["cancel-w1"]
    with suite.client() as sdk:
        messages = sdk.load_session(thread_id)
    page.goto(f"{console}/thread?id={thread_id}")
    calls = page.locator("li.tool-call")
    expect(calls).to_have_count(2)
    assert calls.locator("code.tool-name").all_inner_texts() == [
        "get_order_details",
        "cancel_pending_order",
    ]
    assert calls.locator(".call-id").all_inner_texts() == ["call_read", "call_write"]
    # The arguments, pretty-printed JSON: what was sent, as text.
    read_args = calls.nth(0).locator("pre.tool-args").inner_text()
    assert json.loads(read_args) == json.loads(messages[1].tool_calls[0].arguments)
    write_args = calls.nth(1).locator("pre.tool-args")
    assert json.loads(write_args.inner_text()) == {
        "order_id": "#W1",
        "reason": f"ordered {TOOL_MARKUP}",
    }
    assert write_args.get_attribute("aria-label") == "Arguments of cancel_pending_order"
    assert page.locator("main b").count() == 0 and page.evaluate("window.__pwned") is None
    # The results: which tool answered (its name defaults to the call's) and which call.
    results = page.locator("li.role-tool")
    expect(results).to_have_count(2)
    first = results.nth(0).locator(".meta")
    assert "get_order_details" in first.inner_text()
    assert "result of call call_read" in first.inner_text()
    link = first.get_by_role("link", name="call_read")
    assert link.get_attribute("href") == "#m-2-call-1"
    assert results.nth(0).locator("p.text").inner_text() == '{"status": "pending"}'
    assert "result of call call_write" in results.nth(1).locator(".meta").inner_text()
    link.click()
    page.wait_for_url("**#m-2-call-1")
    assert page.evaluate("document.querySelector(':target').className") == "tool-call"
    # Words and calls together: the assistant's text, then its call.
    said = page.locator("#m-4")
    assert said.locator("p.text").inner_text() == "Doing it now."
    assert said.locator("li.tool-call code.tool-name").inner_text() == "cancel_pending_order"
    shot(page, artifacts, "13-thread-tool-calls")


def test_procedures_page_lists_goals_steps_support_and_sources(
    page: Any, console: str, suite: Suite, demo: Demo, artifacts: Path
) -> None:
    with suite.client() as sdk:
        learned = sdk.list_procedures(TOOLS_DATASET).items
    by_tool = {p.steps[-1].tool: p for p in learned}
    cancel = by_tool["cancel_pending_order"]
    assert (cancel.success_count, cancel.failure_count) == (2, 1)

    page.goto(console + "/")
    page.locator("#datasets tbody tr", has_text=TOOLS_DATASET).get_by_role(
        "link", name=f"Procedures of {TOOLS_DATASET}"
    ).click()
    page.wait_for_url("**/procedures?dataset=*")
    assert page.locator("h1").inner_text() == f"Procedures of {TOOLS_DATASET}"
    assert page.locator(".subnav [aria-current=page]").inner_text() == "Procedures"
    rows = page.locator("#procedures tbody tr")
    expect(rows).to_have_count(len(learned))
    for i, p in enumerate(learned):  # most successes first, like the SDK
        row = rows.nth(i)
        assert row.locator("th").inner_text() == " ".join(p.goal.split())
        cells = row.locator("td").all_inner_texts()
        assert cells == [
            " → ".join(s.tool for s in p.steps),
            str(p.success_count),
            str(p.failure_count),
            str(p.partial_count),
        ], cells
    section = page.locator(f"#procedure-{cancel.procedure_id}")
    support = section.locator(".support").inner_text()
    assert "worked 2×" in support and "failed 1×" in support and "partly worked 0×" in support
    steps = section.locator("ol.steps > li.step")
    expect(steps).to_have_count(2)
    assert "reads" in steps.nth(0).inner_text()
    second = steps.nth(1).inner_text()
    assert second.startswith("cancel_pending_order changes something")
    assert "order_id from the user" in second and "reason chosen by the agent" in second
    # Where it was learned: both successes and the failure, each linked to its window.
    sources = section.locator("table.sources tbody tr")
    expect(sources).to_have_count(3)
    outcomes = sorted(sources.locator("td .badge").all_inner_texts())
    assert outcomes == ["failed", "worked", "worked"]
    failed_thread = demo.threads["cancel-w3"]
    failed_row = sources.filter(has_text="failed")
    thread_link = failed_row.locator("th a")
    assert thread_link.get_attribute("href").startswith(f"/thread?id={failed_thread}#window-")
    shot(page, artifacts, "14-procedures")
    thread_link.click()
    page.wait_for_url(f"**/thread?id={failed_thread}#window-*")
    episode_id = page.url.rsplit("#window-", 1)[1]
    expect(page.locator(f"#window-{episode_id} li.tool-call")).to_have_count(2)

    # A dataset without procedures says so.
    page.goto(f"{console}/procedures?dataset={DATASET}")
    expect(page.locator("p.empty")).to_have_text(f"The dataset {DATASET} has no procedures yet.")
    assert {label for label, *_ in TOOL_THREADS} <= set(demo.threads)


def test_timeline_details_by_mouse_and_keyboard(
    page: Any, console: str, suite: Suite, demo: Demo, artifacts: Path
) -> None:
    with suite.client() as sdk:
        threads = sdk.list_threads(DATASET, page_size=25).items
        expected = {
            e.episode_id: e
            for t in threads
            for e in sdk.iter_episodes(DATASET, thread_id=t.thread_id)
        }
    page.goto(f"{console}/timeline?dataset={DATASET}")
    marks = page.locator("a.mark")
    assert marks.count() == len(expected)
    assert set(marks.evaluate_all("els => els.map(e => e.dataset.episode)")) == set(expected)
    rows = page.locator("a.row-label text").all_text_contents()
    assert len(rows) == len(threads)

    # Hover: the SVG title carries the summary; click: the details panel, focused.
    current = expected[demo.episodes["billing-current"]]
    mark = page.locator(f"#mark-{current.episode_id}")
    assert current.summary[:40] in mark.locator("title").text_content()
    assert "current" in mark.get_attribute("aria-label")
    mark.hover()
    mark.click()
    details = page.locator("#details")
    details.get_by_text(current.key_learnings[0]).wait_for()
    assert current.summary in details.locator("p.text").inner_text()
    for entity in current.entities:
        assert entity in details.locator("ul.chips").inner_text()
    facts = details.locator("dl.facts").inner_text()
    assert current.event_type in facts and current.trigger in facts
    assert page.evaluate("document.activeElement.id") == "details"
    shot(page, artifacts, "06-timeline-details")

    # Keyboard only: Tab reaches the episodes, Enter opens one, Escape goes back to it.
    page.locator(".chart-scroll").focus()
    for _ in range(12):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('mark')"):
            break
    else:
        raise AssertionError("Tab never reached an episode of the timeline")
    focused = page.evaluate("document.activeElement.dataset.episode")
    outline = page.evaluate(
        "getComputedStyle(document.activeElement.querySelector('rect')).strokeWidth"
    )
    assert float(outline.rstrip("px")) >= 3  # visible focus
    page.keyboard.press("Enter")
    wanted = expected[focused]
    expect(page.locator("#details dl.facts")).to_contain_text(wanted.episode_id)
    expect(page.locator("#details")).to_be_focused()
    page.keyboard.press("Escape")
    assert page.evaluate("document.activeElement.dataset.episode") == focused

    # Without scripts the link is a page of its own with the panel filled.
    status, _, raw = _get(f"{console}/timeline?dataset={DATASET}&episode={current.episode_id}")
    assert status == 200 and "Key learnings" in raw and current.key_learnings[0] in raw


def test_recall_playground_matches_the_sdk_and_the_prompt(
    page: Any, console: str, suite: Suite, demo: Demo, artifacts: Path
) -> None:
    query = "adoption agency home study"
    with suite.client() as sdk:
        found = sdk.recall(
            DATASET, query, limit=5, similarity_weight=0.8, recency_weight=0.2, as_of=AS_OF
        )
    assert len(found) == 5

    page.goto(f"{console}/recall?dataset={DATASET}")
    page.get_by_label("Query", exact=True).fill(query)
    page.get_by_label("As of (UTC)", exact=True).fill("2023-07-01T00:00:00")
    page.get_by_label("Similarity weight", exact=True).fill("0.8")
    page.get_by_label("Recency weight", exact=True).fill("0.2")
    page.get_by_label("Episodes", exact=True).fill("5")
    page.get_by_role("button", name="Recall").click()
    page.locator("#results-title").wait_for()
    expect(page.locator("#results-title")).to_be_focused()
    assert "q=adoption" in page.url  # htmx pushed the recall's own URL

    assert page.locator("#results-title").inner_text() == (
        f"5 of {found.episode_count} current episodes"
    )
    hrefs = page.locator("article.hit h3 a[href^='/episode']").evaluate_all(
        "els => els.map(e => new URL(e.href).searchParams.get('id'))"
    )
    assert hrefs == [s.episode_id for s in found]
    for attr, name in (
        ("relevance_score", "Score"),
        ("relevance", "Calibrated relevance"),
        ("similarity", "Similarity"),
        ("lexical", "Lexical"),
        ("semantic", "Semantic"),
        ("recency", "Recency"),
    ):
        assert meter_values(page, name) == [f"{getattr(s, attr):.3f}" for s in found], name
    timeline = render_episodes(found.episodes, AS_OF, "timeline")
    past = render_episodes(found.episodes, AS_OF, "past_conversation")
    assert page.locator("#prompt-timeline").text_content() == timeline
    assert page.locator("#prompt-past").text_content() == past
    shot(page, artifacts, "07-recall")

    page.get_by_label("Key learnings in the prompt", exact=True).check()
    page.get_by_role("button", name="Recall").click()
    expect(page.locator("#results")).to_have_attribute("data-learnings", "1")
    assert page.locator("#prompt-timeline").text_content() == render_episodes(
        found.episodes, AS_OF, "timeline", key_learnings=True
    )

    # A request the service refuses is explained, in place.
    page.get_by_label("Similarity weight", exact=True).fill("0")
    page.get_by_label("Recency weight", exact=True).fill("0")
    page.get_by_role("button", name="Recall").click()
    page.locator("#results .error").wait_for()
    assert "both 0" in page.locator("#results .error").inner_text()
    # The browser logs the refusal (an HTTP 400) as an error: expected here.
    page.browser_errors.remove(
        "Failed to load resource: the server responded with a status of 400 (Bad Request)"
    )


def test_recall_playground_shows_calibrated_relevance_and_abstains(
    page: Any,
    console: str,
    console_client: RecordingClient,
    suite: Suite,
    demo: Demo,
    artifacts: Path,
) -> None:
    # No time words: an episode inside a time the query names passes any threshold.
    query = "adoption agency home study"
    with suite.client() as sdk:
        everything = sdk.recall(DATASET, query, limit=100, as_of=AS_OF)
        abstained = sdk.recall(DATASET, query, limit=100, as_of=AS_OF, abstain=True)
        # Relevance is a logistic curve, below 1 for any episode: 1 leaves out every one.
        assert len(sdk.recall(DATASET, query, limit=100, as_of=AS_OF, min_relevance=1.0)) == 0
        # A threshold between the best and the worst relevance keeps some, not all.
        lowest = min(s.relevance for s in everything)
        highest = max(s.relevance for s in everything)
        cut = round((lowest + highest) / 2, 4)
        assert lowest < cut <= highest, (lowest, cut, highest)
        kept = sdk.recall(DATASET, query, limit=100, as_of=AS_OF, min_relevance=cut)
    assert 0 < len(kept) < len(everything)
    assert all(s.relevance >= cut for s in kept)
    # The tests' hashing embedder has no fitted curves: abstain keeps every episode there.
    assert [s.episode_id for s in abstained] == [s.episode_id for s in everything]

    def shown_ids() -> list[str]:
        return page.locator("article.hit h3 a[href^='/episode']").evaluate_all(
            "els => els.map(e => new URL(e.href).searchParams.get('id'))"
        )

    def ask() -> None:
        page.get_by_role("button", name="Recall").click()

    # Requests of the page in flight, whatever sends them (htmx, or the browser itself
    # when it submits or navigates).
    in_flight: set[object] = set()
    page.on("request", lambda request: in_flight.add(request))
    page.on("requestfinished", lambda request: in_flight.discard(request))
    page.on("requestfailed", lambda request: in_flight.discard(request))

    def settled() -> None:
        # Nothing in flight and nothing being swapped in: a late answer re-renders the
        # form with the values it was asked with, over a field the test has just changed
        # (seen twice on a loaded CI machine: Min match back at 1 after it was cleared,
        # once with no htmx request left on the page).
        deadline = time.monotonic() + 15
        while in_flight and time.monotonic() < deadline:
            page.wait_for_timeout(20)
        page.wait_for_function(
            "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')"
        )

    def clear(label: str) -> None:
        """Empty a field and see it stay empty (a re-render still on its way puts the
        value back: then it is emptied again)."""
        field = page.get_by_label(label, exact=True)
        for _ in range(5):
            settled()
            field.fill("")
            settled()
            if field.input_value() == "":
                break
        expect(field).to_have_value("")

    title = page.locator("#results-title")
    page.goto(f"{console}/recall?dataset={DATASET}")
    page.get_by_label("Query", exact=True).fill(query)
    page.get_by_label("As of (UTC)", exact=True).fill("2023-07-01T00:00:00")
    page.get_by_label("Episodes", exact=True).fill("100")
    page.get_by_label("Min relevance", exact=True).fill(str(cut))
    ask()
    expect(title).to_have_text(f"{len(kept)} of {kept.episode_count} current episodes")
    assert shown_ids() == [s.episode_id for s in kept]
    # Each hit's calibrated relevance beside its ranking score, explained.
    assert meter_values(page, "Calibrated relevance") == [f"{s.relevance:.3f}" for s in kept]
    assert meter_values(page, "Score") == [f"{s.relevance_score:.3f}" for s in kept]
    explained = page.locator(".score-relevance th").first.get_attribute("title") or ""
    assert "comparable across queries" in explained and "min relevance" in explained
    assert f"min relevance {cut:g}" in page.locator("#thresholds-applied").inner_text()
    assert console_client.recalls[-1]["min_relevance"] == cut
    # The request's match, as Recall answered it.
    assert kept.match is not None
    expect(page.locator("#request-match")).to_have_text(f"Match of the request: {kept.match:.3f}")
    shot(page, artifacts, "07b-recall-min-relevance")

    # Nothing passes: said so, with what to do, apart from a dataset with nothing in it.
    page.get_by_label("Min relevance", exact=True).fill("1")
    ask()
    expect(title).to_have_text(f"0 of {everything.episode_count} current episodes")
    empty = page.locator("#thresholds-empty")
    expect(empty).to_contain_text("Nothing passed the thresholds (min relevance 1)")
    expect(empty).to_contain_text("Lower min relevance to see the closest episodes anyway")
    assert page.locator("#prompt-past").text_content() == ""  # the prompt gets nothing
    shot(page, artifacts, "07c-recall-nothing-passed")

    # min_match reaches Recall too: no request's match is 1 either.
    clear("Min relevance")
    page.get_by_label("Min match", exact=True).fill("1")
    ask()
    expect(empty).to_contain_text("Nothing passed the thresholds (min match 1)")
    expect(empty).to_contain_text("Lower min match to see")
    assert console_client.recalls[-1]["min_match"] == 1.0

    # Abstain: sent as asked; under the hashing embedder it keeps every episode.
    clear("Min match")
    page.get_by_label("Abstain when nothing fits", exact=True).check()
    expect(page.get_by_label("Abstain when nothing fits", exact=True)).to_be_checked()
    asked = len(console_client.recalls)
    ask()
    # The console's own call first (a fresh CI machine once kept the previous answer
    # here: this says whether the request was sent as filled in, or the page not swapped).
    wait_until(lambda: len(console_client.recalls) > asked, timeout=30)
    assert console_client.recalls[-1]["min_match"] is None, console_client.recalls[-1]
    expect(title).to_have_text(f"{len(everything)} of {everything.episode_count} current episodes")
    assert shown_ids() == [s.episode_id for s in everything]
    sent = console_client.recalls[-1]
    # Empty fields are unset, not 0: an explicit 0 would override abstain's thresholds.
    assert (sent["abstain"], sent["min_relevance"], sent["min_match"]) == (True, None, None)
    assert "abstain" in page.locator("#thresholds-applied").inner_text()
    # …and says so: Recall answered that abstain did not hold (no curves for this model)
    assert not abstained.abstain_applied
    expect(page.locator("#abstain-not-applied")).to_contain_text("Abstain did not apply")
    assert "abstain=1" in page.url  # htmx pushed it: the URL asks the same again
    # Before anything ended, the empty answer is not the thresholds' doing.
    page.get_by_label("As of (UTC)", exact=True).fill("2000-01-01T00:00:00")
    ask()
    expect(title).to_have_text("0 of 0 current episodes")
    expect(page.locator("#results .empty")).to_have_text("No current episode matched.")
    assert page.locator("#thresholds-empty").count() == 0

    # A dataset still settling (RecalledEpisodes.chunks_pending / episodes_pending) is said
    # to be; a settled one says nothing.
    console_client.answer_with = {"chunks_pending": False, "episodes_pending": False}
    try:
        ask()
        # (waits for the new answer to replace the last one, which said it was settling)
        expect(page.locator("#still-settling")).to_have_count(0)
        console_client.answer_with = {"chunks_pending": True, "episodes_pending": True}
        ask()
        expect(page.locator("#still-settling")).to_contain_text(
            "Still settling: episodes still being summarised and messages of a current "
            "episode not yet indexed for recall"
        )
        console_client.answer_with = {"chunks_pending": True, "episodes_pending": False}
        ask()
        expect(page.locator("#still-settling")).not_to_contain_text("being summarised")
    finally:
        console_client.answer_with = {}

    # Without a query nothing is calibrated (Recall sends 0): shown as such, not as 0.
    page.goto(f"{console}/recall?dataset={DATASET}&run=1&limit=3")
    assert page.locator(".score-relevance td.num").all_inner_texts() == ["–"] * 3
    assert page.locator("#request-match").count() == 0
    assert meter_values(page, "Calibrated relevance") == []

    # A threshold that is no number is the console's to explain; one out of range, Recall's:
    # both as the error panel (400), the form kept for another try.
    base = f"{console}/recall?dataset={DATASET}&q=pottery&run=1"
    for query_string, words in (
        ("&min_relevance=high", "min relevance 'high' is not a number: give one between 0 and 1"),
        ("&min_match=1.5", "min_match must be between 0 and 1 (got 1.5)"),
    ):
        assert _get(base + query_string)[0] == 400, query_string  # not a 500
        page.goto(base + query_string)
        expect(page.locator("#results .error")).to_contain_text(words)
        assert page.get_by_label("Min relevance", exact=True).count() == 1
    # The browser logs each 400 page as an error: expected here.
    page.browser_errors[:] = [e for e in page.browser_errors if "status of 400" not in e]


def test_pipeline_page_refreshes_live(
    page: Any, console: str, suite: Suite, demo: Demo, artifacts: Path
) -> None:
    with suite.client() as sdk:
        status = sdk.pipeline_status(check_providers=False, max_errors=20)
    page.goto(f"{console}/pipeline")
    for st in EPISODE_STATUSES:
        value = page.locator(f"[data-metric='status-{st}'] .value").inner_text()
        assert value == str(status.status_counts.get(st, 0)), st
    assert page.locator("[data-metric='backing-off'] .value").inner_text() == str(
        status.pending_waiting
    )
    assert page.locator("[data-metric='lost-notices'] .value").inner_text() == str(
        status.threads_without_timer
    )
    failed = page.locator("#failed-episodes").inner_text()
    for f in status.failed_episodes:
        assert f.episode_id[:8] in failed and f.error in failed
    assert "Needs attention" in page.locator(".verdict").inner_text()
    page.locator("#provider-health").wait_for()  # probed after the page loaded
    assert page.locator("#provider-health").inner_text().count("answering") == 2

    # htmx polls the panel: the observation time moves without a reload.
    before = page.locator("#observed-at").get_attribute("data-observed")
    expect(page.locator("#observed-at")).not_to_have_attribute("data-observed", before or "")
    shot(page, artifacts, "08-pipeline")

    # Paused by the checkbox (and while focus is inside the panel): the poll is cancelled.
    cancelled = """() => { const panel = document.getElementById('pipeline-panel');
        const evt = new CustomEvent('htmx:beforeRequest',
            {bubbles: true, cancelable: true, detail: {elt: panel}});
        panel.dispatchEvent(evt); return evt.defaultPrevented; }"""
    assert page.evaluate(cancelled) is False
    page.get_by_label("Refresh every 3 seconds", exact=True).uncheck()
    assert page.evaluate(cancelled) is True
    page.get_by_label("Refresh every 3 seconds", exact=True).check()
    with page.expect_request(lambda r: "/pipeline/panel" in r.url):
        pass  # polling goes on


def test_admin_actions_delete_and_retry(
    page: Any, console: str, suite: Suite, demo: Demo, artifacts: Path
) -> None:
    doomed, broken = demo.episodes["ops-delete"], demo.episodes["ops-retry"]
    page.goto(f"{console}/episode?id={doomed}")
    page.get_by_text(f"Delete episode {doomed[:8]}…").click()
    page.get_by_role("button", name=f"Delete episode {doomed[:8]}").click()
    page.get_by_role("status").filter(has_text="is archived (deleted)").wait_for()
    with suite.client() as sdk:
        assert sdk.get_episode(doomed).status == "archived"

    page.goto(f"{console}/pipeline?dataset={OPS_DATASET}")
    assert page.locator("[data-metric='status-failed'] .value").inner_text() == "1"
    page.get_by_role("button", name=f"Retry episode {broken[:8]}").click()
    page.get_by_role("status").filter(has_text="is pending again").wait_for()
    with suite.client() as sdk:
        wait_until(
            lambda: sdk.get_episode(broken).status == "completed",
            timeout=30,
            message="the retried episode is summarised",
        )
    # The live panel catches up by itself.
    expect(page.locator("[data-metric='status-failed'] .value")).to_have_text("0")
    shot(page, artifacts, "09-after-retry")


def test_an_event_has_its_page_and_is_erased_from_it(
    page: Any, console: str, suite: Suite, demo: Demo
) -> None:
    """An event is listed under its id like an episode: its page says it is an event, and
    deleting it erases it (no archive to read back), landing on its dataset's page."""
    with suite.client() as sdk:
        event = sdk.record_event(
            DATASET, "Chose the annual plan", event_type="decision", entities=["Atlas"]
        ).event
    page.goto(f"{console}/episode?id={event.episode_id}")
    expect(page.locator(".episode-title")).to_contain_text(f"Event {event.episode_id[:8]}")
    assert page.title().startswith(f"Event {event.episode_id[:8]}")
    expect(page.locator("main")).to_contain_text("Chose the annual plan")
    assert page.get_by_role("button", name=f"Retry episode {event.episode_id[:8]}").count() == 0
    page.get_by_text(f"Delete event {event.episode_id[:8]}…").click()
    page.get_by_role("button", name=f"Delete event {event.episode_id[:8]}").click()
    page.get_by_role("status").filter(has_text="is erased").wait_for()
    assert "/dataset?" in page.url
    with suite.client() as sdk, pytest.raises(NotFoundError):
        sdk.get_episode(event.episode_id)


def test_a_session_per_browser_and_its_forms(
    page: Any, browser: Any, console: str, suite: Suite, artifacts: Path
) -> None:
    """Before: one CSRF token per process (good in every browser that ever saw a page) and
    ``Origin: null`` let through. Now Chromium holds a session cookie (HttpOnly,
    SameSite=Strict) whose token the console's forms carry; another session's token is
    refused; a form posted from a sandboxed frame (``Origin: null``) is refused; the
    console's own form works (Chromium sends the page's own origin)."""
    with suite.client() as sdk:
        event = sdk.record_event(DATASET, "Chose the yearly audit", event_type="decision").event
    where = f"{console}/episode?id={event.episode_id}"
    form = page.locator("form[action='/episode/delete']")
    page.goto(where)
    (cookie,) = [c for c in browser.cookies(console) if c["name"].startswith("episodic_console")]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and not cookie["secure"]
    assert page.evaluate("document.cookie") == ""  # scripts cannot read it
    first = form.locator("input[name=csrf]").get_attribute("value")

    # Another session (the cookie gone, as in another browser): another token...
    browser.clear_cookies()
    page.goto(where)
    second = form.locator("input[name=csrf]").get_attribute("value")
    assert first and second and first != second
    # ... and the first session's token is refused in it.
    form.locator("input[name=csrf]").evaluate("(el, t) => { el.value = t; }", first)
    page.get_by_text(f"Delete event {event.episode_id[:8]}…").click()
    with page.expect_response(lambda r: r.url.endswith("/episode/delete")) as refused:
        page.get_by_role("button", name=f"Delete event {event.episode_id[:8]}").click()
    assert refused.value.status == 403
    expect(page.locator("main")).to_contain_text("stale")
    page.browser_errors.clear()  # the 403 the test asked for
    with suite.client() as sdk:
        assert sdk.get_episode(event.episode_id).episode_id == event.episode_id

    # A sandboxed frame on the console's own page posts the right token (into a new
    # window: its CSP frames nothing): the browser sends Origin: null.
    page.goto(where)
    token = form.locator("input[name=csrf]").get_attribute("value")
    page.evaluate(
        """([token, id]) => {
            const frame = document.createElement("iframe");
            frame.setAttribute("sandbox", "allow-forms allow-popups");
            frame.srcdoc = '<form method="post" action="/episode/delete" target="_blank">'
                + '<input type="hidden" name="csrf" value="' + token + '">'
                + '<input type="hidden" name="id" value="' + id + '">'
                + '<button>Go</button></form>';
            document.body.append(frame);
        }""",
        [token, event.episode_id],
    )
    answers: list[tuple[dict[str, str], int, str]] = []

    def relay(route: Any) -> None:  # the browser's request as sent, and the answer
        answer = route.fetch()
        answers.append((route.request.all_headers(), answer.status, answer.text()))
        route.fulfill(response=answer)

    browser.route("**/episode/delete", relay)
    try:
        with page.expect_popup() as popup:
            page.frame_locator("iframe").get_by_role("button", name="Go").click()
        wait_until(lambda: answers, timeout=15, message="the sandboxed form was posted")
    finally:
        browser.unroute("**/episode/delete", relay)
    popup.value.close()  # Chromium shows no page there (the console's COOP)
    ((headers, status, body),) = answers
    assert headers.get("origin") == "null" and "cookie" not in headers  # SameSite=Strict
    assert status == 403 and "Origin is null" in body
    with suite.client() as sdk:
        assert sdk.get_episode(event.episode_id).episode_id == event.episode_id

    # The console's own form, as it was served: done.
    page.goto(where)
    page.get_by_text(f"Delete event {event.episode_id[:8]}…").click()
    with page.expect_request(lambda r: r.url.endswith("/episode/delete")) as sent:
        page.get_by_role("button", name=f"Delete event {event.episode_id[:8]}").click()
    assert sent.value.all_headers().get("origin") == console
    page.get_by_role("status").filter(has_text="is erased").wait_for()
    shot(page, artifacts, "12-session-action")
    with suite.client() as sdk, pytest.raises(NotFoundError):
        sdk.get_episode(event.episode_id)


def test_accessibility_basics(page: Any, console: str, demo: Demo) -> None:
    """Labels on every control, a skip link first, visible focus, text contrast >= 4.5:1."""
    pages = [
        "/",
        f"/dataset?dataset={DATASET}",
        f"/thread?id={demo.threads['billing-q2']}",
        f"/timeline?dataset={DATASET}&episode={demo.episodes['billing-failed']}",
        f"/recall?dataset={DATASET}&q=pottery&run=1",
        f"/recall?dataset={DATASET}&q=pottery&run=1&abstain=1&min_match=1",  # nothing passed
        f"/recall?dataset={DATASET}&run=1&limit=2",  # no query: nothing calibrated
        "/pipeline",
        f"/thread?id={demo.threads['cancel-w1']}",  # tool calls and results
        f"/procedures?dataset={TOOLS_DATASET}",
        f"/procedures?dataset={DATASET}",  # none
    ]
    unlabeled_js = """() => [...document.querySelectorAll(
        'input:not([type=hidden]), select, textarea, button')]
        .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label')
                && !(e.tagName === 'BUTTON' && e.textContent.trim()))
        .map(e => e.outerHTML)"""
    contrast_js = """() => {
        const lum = c => { const [r, g, b] = c.match(/[\\d.]+/g).slice(0, 3).map(Number)
            .map(v => v / 255).map(v => v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
            return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
        const bg = el => { for (let e = el; e; e = e.parentElement) {
            const c = getComputedStyle(e).backgroundColor;
            if (!c.startsWith('rgba') || !c.endsWith(', 0)')) return c; }
            return 'rgb(255, 255, 255)'; };
        const bad = [];
        for (const el of document.querySelectorAll('body *')) {
            if (el.closest('svg') || !el.checkVisibility()) continue;
            const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
            if (!own) continue;
            const fg = lum(getComputedStyle(el).color), b = lum(bg(el));
            const ratio = (Math.max(fg, b) + 0.05) / (Math.min(fg, b) + 0.05);
            if (ratio < 4.5) bad.push(`${el.tagName}.${el.className}: ${ratio.toFixed(2)}`);
        }
        return bad; }"""
    for path in pages:
        page.goto(console + path)
        assert page.evaluate(unlabeled_js) == [], path
        assert page.evaluate(contrast_js) == [], path
        assert page.locator("html").get_attribute("lang") == "en"
        assert page.locator("main h1").count() == 1
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.className") == "skip-link", path
        assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") != "none"
        page.keyboard.press("Enter")
        assert page.evaluate("document.activeElement.id") == "main", path
    # The timeline's marks: graphics with at least 3:1 against the page.
    fills = page.goto(f"{console}/timeline?dataset={DATASET}") and page.evaluate(
        "() => [...document.querySelectorAll('svg.timeline text')].map(t => getComputedStyle(t).fill)"
    )
    assert fills and all(f in ("rgb(26, 26, 26)", "rgb(11, 87, 208)") for f in fills), set(fills)


def test_vendored_htmx_is_served_and_nothing_leaves_the_origin(page: Any, console: str) -> None:
    data = (STATIC / "htmx.min.js").read_bytes()
    assert hashlib.sha256(data).hexdigest() == HTMX_SHA256
    assert f'version:"{HTMX_VERSION}"'.encode() in data
    assert HTMX_LICENSE == "0BSD" and "Zero-Clause BSD" in (STATIC / "htmx.LICENSE").read_text()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(f"{console}/pipeline")
    assert page.evaluate("window.htmx.version") == HTMX_VERSION
    assert requests and all(u.startswith(console) for u in requests), requests
    status, headers, _ = _get(f"{console}/static/htmx.min.js")
    assert status == 200 and headers["Content-Type"].startswith("text/javascript")
    status, headers, _ = _get(f"{console}/")
    csp = headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe" not in csp and "frame-ancestors 'none'" in csp
    assert _get(f"{console}/static/../app.py")[0] == 404


# --------------------------------------------------------------------------- security


def _keys(db_url: str) -> dict[str, str]:
    from episodic.access import Role
    from episodic.store.db import make_engine
    from episodic.store.keys import create_key

    engine = make_engine(db_url, pool_size=1)
    try:
        with engine.begin() as conn:
            return {
                "admin": create_key(conn, role=Role.ADMIN, datasets=["*"], name="console").secret,
                "reader": create_key(conn, role=Role.READER, datasets=[DATASET]).secret,
            }
    finally:
        engine.dispose()


def test_credentials_hosts_and_forms(suite: Suite, demo: Demo) -> None:
    keys = _keys(suite.db_url)
    admin = suite.client(api_key=keys["admin"])
    server = ConsoleServer(ConsoleApp(admin, http_key=keys["admin"]), "127.0.0.1", 0).start()
    try:
        status, headers, _ = _get(server.url + "/")
        assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
        wrong = base64.b64encode(b"me:ek_wrong").decode()
        assert _get(server.url + "/", {"Authorization": f"Basic {wrong}"})[0] == 401
        right = base64.b64encode(f"me:{keys['admin']}".encode()).decode()
        status, _, body = _get(server.url + "/", {"Authorization": f"Basic {right}"})
        assert status == 200 and DATASET in body  # and the RPCs took the console's key
        assert _get(server.url + "/", {"Authorization": f"Bearer {keys['admin']}"})[0] == 200
        assert _get(server.url + "/healthz")[0] == 200  # probes need no key
        # Bound to loopback, another host name is refused (DNS rebinding).
        evil = {"Authorization": f"Basic {right}", "Host": f"evil.example:{server.port}"}
        assert _get(server.url + "/", evil)[0] == 421
        # A form without the page's token changes nothing.
        form = f"id={demo.episodes['billing-failed']}".encode()
        status, _, body = _get(
            server.url + "/episode/retry", {"Authorization": f"Basic {right}"}, form
        )
        assert status == 403 and "stale" in body
        with suite.client() as sdk:
            assert sdk.get_episode(demo.episodes["billing-failed"]).status == "failed"
    finally:
        server.stop()
        admin.close()

    # The console calls with its key: a reader key may not see the pipeline.
    reader = suite.client(api_key=keys["reader"])
    server = ConsoleServer(ConsoleApp(reader), "127.0.0.1", 0).start()
    try:
        status, _, body = _get(server.url + "/pipeline")
        assert status == 200 and "unavailable (PERMISSION_DENIED)" in body
        status, _, body = _get(server.url + "/")
        assert "This key cannot list every dataset" in body
        assert _get(server.url + f"/dataset?dataset={DATASET}")[0] == 200
        assert _get(server.url + f"/dataset?dataset={OPS_DATASET}")[0] == 403
    finally:
        server.stop()
        reader.close()


def test_out_of_range_input_is_a_400_not_a_500(console: str, demo: Demo) -> None:
    """Before: an ``as_of`` outside the Timestamp range and ``from`` of 2^63 or more failed
    in the SDK's request building (500 and a traceback in the log)."""
    recall = f"{console}/recall?dataset={DATASET}&run=1&as_of="
    for as_of in ("0001-01-01T00:00:00%2B14:00", "9999-12-31T23:59:59-14:00"):
        status, _, body = _get(recall + as_of)
        assert status == 400 and "is out of range" in body, (as_of, status)
    thread = f"{console}/thread?id={demo.threads['billing-q2']}&from="
    for first in (2**63, 2**64 + 5):
        status, _, body = _get(thread + str(first))
        assert status == 400 and "at most 9223372036854775807" in body, (first, status)
    status, _, body = _get(thread + str(2**63 - 10))  # the last page there is: empty
    assert status == 200 and "No messages here" in body


def test_next_is_checked_before_the_action(suite: Suite, demo: Demo) -> None:
    """Before: a ``next`` wsgiref cannot send (not Latin-1) crashed the response after
    the episode was deleted; a fragment swallowed the notice's query."""
    client = suite.client()
    server = ConsoleServer(ConsoleApp(client), "127.0.0.1", 0).start()
    try:
        with suite.client() as sdk:
            event = sdk.record_event(DATASET, "Chose the blue plan", event_type="decision").event
        cookie, token = _session(server)
        for bad in ("/中", "/ok\u2028x", "//evil.example/x", "https://evil.example/", "/a\\b"):
            form = urllib.parse.urlencode(
                {"csrf": token, "id": event.episode_id, "next": bad}
            ).encode()
            status, _, body = _get(server.url + "/episode/delete", {"Cookie": cookie}, form)
            assert status == 400 and "nothing was done" in body, (bad, status)
            with suite.client() as sdk:
                assert sdk.get_episode(event.episode_id).episode_id == event.episode_id
        form = urllib.parse.urlencode(
            {"csrf": token, "id": event.episode_id, "next": "/timeline?x=1#frag"}
        ).encode()
        request = urllib.request.Request(
            server.url + "/episode/delete", data=form, headers={"Cookie": cookie}
        )
        no_redirects = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
        with pytest.raises(urllib.error.HTTPError) as answer:
            no_redirects.open(request, timeout=20)
        assert answer.value.code == 303
        assert answer.value.headers["Location"] == (
            f"/timeline?x=1&done=erased&episode={event.episode_id}#frag"
        )
        with suite.client() as sdk, pytest.raises(NotFoundError):
            sdk.get_episode(event.episode_id)
    finally:
        server.stop()
        client.close()


def _session(server: ConsoleServer) -> tuple[str, str]:
    """A session as a client that is not a browser opens one: (its Cookie header, its
    CSRF token, which a browser reads from a page's form)."""
    _, headers, _ = _get(server.url + "/healthz-is-not-a-page")
    cookie = headers["Set-Cookie"].split(";", 1)[0]
    session = server.app.sessions.get(cookie.split("=", 1)[1])
    assert session is not None
    return cookie, session.token


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def test_the_host_header_is_parsed_strictly(console: str) -> None:
    """Before: ``127.0.0.1:port@evil.com``, ``[::1]evil.com`` and an empty Host were served."""
    port = console.rsplit(":", 1)[1]
    for host in (f"127.0.0.1:{port}@evil.com", "[::1]evil.com", "", "127.0.0.1:x", "evil.com"):
        assert _get(console + "/", {"Host": host})[0] == 421, host
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "localhost"):
        assert _get(console + "/", {"Host": host})[0] == 200, host
    from episodic.console.app import host_name

    assert host_name("127.0.0.1:80@evil.com") is None
    assert host_name("[::1]:8780") == "::1" and host_name("localhost.:1") == "localhost"


def test_the_console_refuses_to_serve_memory_openly() -> None:
    assert http_key_for("auto", "127.0.0.1", None) is None  # development mode
    assert http_key_for("auto", "0.0.0.0", "k") == "k"
    assert http_key_for("required", "127.0.0.1", "k") == "k"
    assert http_key_for("disabled", "0.0.0.0", "k") is None
    for mode, host in (("auto", "0.0.0.0"), ("auto", "::"), ("required", "127.0.0.1")):
        with pytest.raises(ConsoleConfigError):
            http_key_for(mode, host, None)
    env = {k: v for k, v in os.environ.items() if k not in ("EPISODIC_API_KEY", "EPISODIC_AUTH")}
    done = subprocess.run(
        [sys.executable, "-m", "episodic.cli", "console", "--host", "0.0.0.0", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "without a key" in done.stderr, done.stderr


def test_the_console_command_serves(suite: Suite, demo: Demo, tmp_path: Path) -> None:
    shown = demo.episodes["billing-current"]
    spans = tmp_path / "spans.jsonl"  # one recall that returned it, as Recall's span says
    spans.write_text(
        json.dumps(
            {
                "trace_id": "0af7651916cd43dd8448eb211c80319c",
                "span_id": "b7ad6b7169203331",
                "parent_span_id": None,
                "name": "search_memory",
                "kind": "INTERNAL",
                "links": [],
                "attributes": {
                    "gen_ai.operation.name": "search_memory",
                    "episodic.memory.record_ids": [shown],
                },
                "service": "episodic-recall",
                "status": "UNSET",
                "start_time_unix_nano": 1_700_000_000_000_000_000,
                "end_time_unix_nano": 1_700_000_000_002_000_000,
            }
        )
        + "\n"
    )
    env = {
        **os.environ,
        "EPISODIC_INGEST_ADDRESS": suite.addresses["ingest"],
        "EPISODIC_RECALL_ADDRESS": suite.addresses["recall"],
        "EPISODIC_SCHEDULER_ADDRESS": suite.addresses["scheduler"],
        "EPISODIC_SUMMARISER_ADDRESS": suite.addresses["summariser"],
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("EPISODIC_API_KEY", None)
    env.pop("EPISODIC_AUTH", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "episodic.cli", "console", "--port", "0", "--spans", str(spans)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "episodic console at http://127.0.0.1:" in line, line
        url = line.split(" at ", 1)[1].split(" ", 1)[0]
        status, _, body = _get(url + f"/timeline?dataset={DATASET}")
        assert status == 200 and "billing-q2" in body
        # --spans: the episode's page shows its journey from that file.
        status, _, body = _get(url + f"/episode?id={shown}")
        assert status == 200 and 'data-journey="recall"' in body and "rank 1 of 1" in body
    finally:
        proc.terminate()
        proc.wait(10)


def test_k8s_console_deployment() -> None:
    k8s = pytest.importorskip("tests.ops.test_k8s")
    for overlay, replicas in (("dev", 1), ("prod", 0)):
        deployment = k8s.one(overlay, "Deployment", "episodic-console")
        assert deployment["spec"]["replicas"] == replicas
        c = k8s.container(deployment)
        assert c["command"][:2] == ["episodic", "console"]
        env = {e["name"] for e in c.get("env", [])}
        assert "EPISODIC_DATABASE_URL" not in env  # the RPCs only
        assert "exec" in c["readinessProbe"]
    assert not [
        s for s in k8s.of_kind("prod", "Service") if s["metadata"]["name"] == "episodic-console"
    ]  # reached through `kubectl port-forward` only
