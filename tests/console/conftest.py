"""Fixtures for the console's tests: the four services as real processes (started once per
module, like ``spawn`` but shared: starting them per test would dominate the runtime),
demo data (LoCoMo-like threads written through the SDK and summarised by the running
summariser, plus episodes in every status written by ``tests.recall.factory``), the console
in a thread, and headless Chromium (Debian's ``/usr/bin/chromium``) driven by Playwright."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from episodic.console import ConsoleApp, ConsoleServer
from episodic.sdk.client import EpisodicClient, NewMessage
from episodic.store.db import make_engine
from episodic.testing.database import TestDatabases
from episodic.testing.processes import ServiceProcess, start_service, wait_until
from tests.recall.factory import add_messages, make_episode, make_thread

CHROMIUM = os.environ.get("EPISODIC_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

DATASET = "locomo-demo"
OPS_DATASET = "ops-actions"
#: An agent's own memory: conversations with tool calls and outcomes (issue 39).
TOOLS_DATASET = "agent-tools"

# A LoCoMo-like conversation (two people, dated sessions; our own text): one thread per
# session, written with the sessions' original timestamps.
SESSIONS: list[tuple[str, datetime, list[tuple[str, str, str]]]] = [
    (
        "conv-demo/session_1",
        datetime(2023, 5, 8, 13, 56, tzinfo=UTC),
        [
            (
                "user",
                "Caroline",
                "Hey Mel! I went to a support group for adoptive parents "
                "yesterday and it was so moving.",
            ),
            ("assistant", "Melanie", "That's wonderful, Caroline. What made it special?"),
            (
                "user",
                "Caroline",
                "Everyone shared their stories. I have decided to adopt a child next year.",
            ),
            ("assistant", "Melanie", "That's a big decision! Have you looked at agencies?"),
            (
                "user",
                "Caroline",
                "I am meeting the Sunrise adoption agency on Friday to ask about the home study.",
            ),
            ("assistant", "Melanie", "Good luck! I painted a lake at sunrise last week."),
        ],
    ),
    (
        "conv-demo/session_2",
        datetime(2023, 5, 25, 9, 30, tzinfo=UTC),
        [
            (
                "assistant",
                "Melanie",
                "I signed up for a pottery class on Saturdays; my kids love the clay.",
            ),
            (
                "user",
                "Caroline",
                "Pottery sounds fun. The Sunrise agency said the home study takes three months.",
            ),
            ("assistant", "Melanie", "Three months is not long. Are you nervous?"),
            (
                "user",
                "Caroline",
                "A bit, but my mentor from the support group will help me prepare the paperwork.",
            ),
        ],
    ),
    (
        "conv-demo/session_3",
        datetime(2023, 6, 9, 18, 5, tzinfo=UTC),
        [
            ("assistant", "Melanie", "We went camping by the river with the kids last weekend."),
            (
                "user",
                "Caroline",
                "Camping sounds lovely. I finished the adoption paperwork "
                "and mailed it to Sunrise today.",
            ),
            ("assistant", "Melanie", "That's huge! Let's celebrate with a pottery evening."),
        ],
    ),
]
SCRIPT = "<script>window.__pwned = 1</script>"
XSS_MESSAGE = (
    f'Please keep this snippet as text: {SCRIPT}<img src=x onerror="window.__pwned = 2"> '
    '& "quotes" stay quotes.'
)
AS_OF = datetime(2023, 7, 1, tzinfo=UTC)
#: Text that looks like HTML, in a tool call's arguments: shown as text too.
TOOL_MARKUP = '<b onmouseover="window.__pwned = 3">twice</b>'


def tool_conversation(request: str, order: str, write: str) -> list[dict[str, Any]]:
    """An agent's conversation in OpenAI's chat format: a request, a read, a write (each
    answered by its tool), and the agent's closing words."""
    return [
        {"role": "user", "content": request},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_read",
                    "type": "function",
                    "function": {
                        "name": "get_order_details",
                        "arguments": json.dumps({"order_id": order}),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_read", "content": '{"status": "pending"}'},
        {
            "role": "assistant",
            "content": "Doing it now.",
            "tool_calls": [
                {
                    "id": "call_write",
                    "type": "function",
                    "function": {
                        "name": write,
                        "arguments": {"order_id": order, "reason": f"ordered {TOOL_MARKUP}"},
                    },
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_write",
            "name": write,
            "content": '{"ok": true}',
        },
        {"role": "assistant", "content": f"Done: {order} is taken care of."},
    ]


#: (label, request, order, write tool, outcome): two successes and a failure of the same
#: actions (one procedure, worked twice and failed once) and another procedure.
TOOL_THREADS = [
    ("cancel-w1", "Please cancel my order #W1, I bought it by mistake", "#W1",
     "cancel_pending_order", "success"),
    ("cancel-w2", "I'd like to cancel order #W2, it's no longer needed", "#W2",
     "cancel_pending_order", "success"),
    ("cancel-w3", "cancel #W3 please", "#W3", "cancel_pending_order", "failure"),
    ("return-w4", "Return the kettle from order #W4", "#W4",
     "return_delivered_order_items", "success"),
]  # fmt: skip


@dataclass
class Demo:
    """What the fixture wrote, by name."""

    threads: dict[str, str] = field(default_factory=dict)  # label -> thread id
    episodes: dict[str, str] = field(default_factory=dict)  # name -> episode id


class RecordingClient(EpisodicClient):
    """The console's client here: it also keeps the options of every recall the console
    asks for, so a test can check what the form sent where the services answer the same
    either way (``abstain`` under the tests' hashing embedder, which has no fitted curves,
    keeps every episode)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recalls: list[dict[str, Any]] = []
        #: Fields to set on the next answers, for a test of how the console shows answers
        #: the demo cannot give on demand (its dataset holds a pending episode on purpose,
        #: so episodes_pending is always true, chunks_pending never); empty: as answered.
        self.answer_with: dict[str, Any] = {}

    def recall(self, *args: Any, **kwargs: Any) -> Any:
        self.recalls.append(dict(kwargs))
        answer = super().recall(*args, **kwargs)
        return replace(answer, **self.answer_with) if self.answer_with else answer


@dataclass
class Suite:
    db_url: str
    addresses: dict[str, str]
    services: list[ServiceProcess]

    def client(self, cls: type[EpisodicClient] = EpisodicClient, **kw: Any) -> EpisodicClient:
        return cls(
            ingest=self.addresses["ingest"],
            recall=self.addresses["recall"],
            scheduler=self.addresses["scheduler"],
            summariser=self.addresses["summariser"],
            timeout=20,
            **kw,
        )


@pytest.fixture(scope="module")
def suite(databases: TestDatabases) -> Iterator[Suite]:
    """The four services against one fresh database, for the whole module."""
    url = databases.create()
    started: list[ServiceProcess] = []
    try:
        scheduler = start_service("scheduler", url)
        started.append(scheduler)
        env = {
            "ingest": {"EPISODIC_SCHEDULER_ADDRESS": scheduler.address},
            # The summariser's own loop does the work, as under `episodic up`.
            "summariser": {"EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2"},
            "recall": {},
        }
        with ThreadPoolExecutor(3) as pool:  # they import and connect in parallel
            futures = {name: pool.submit(start_service, name, url, e) for name, e in env.items()}
            for future in futures.values():
                started.append(future.result())
        by_name = {s.name: s for s in started}
        yield Suite(url, {name: s.address for name, s in by_name.items()}, started)
    finally:
        for service in reversed(started):
            service.terminate()
            print(f"----- {service.name} output -----\n{service.log()}")
        databases.drop(url)


def _factory_data(db_url: str, demo: Demo) -> None:
    """Episodes in every status, written as the pipeline leaves them (direct SQL, the test's
    privilege; the console itself only ever uses the RPCs)."""
    engine = make_engine(db_url, pool_size=1)
    try:
        with engine.begin() as conn:
            base = datetime(2023, 5, 10, 12, 0, tzinfo=UTC)
            billing = make_thread(conn, DATASET, "billing-q2")
            demo.threads["billing-q2"] = str(billing)
            first = make_episode(
                conn,
                DATASET,
                ["We compared the Basic and Pro tiers.", "Pro has the audit log."],
                ended_at=base,
                thread_id=billing,
                key_learnings=["The user compares Basic and Pro."],
                entities=["basic tier", "pro tier"],
                event_type="discussion",
            )
            second = make_episode(
                conn,
                DATASET,
                ["We agreed on the Pro tier at $29 for project Atlas.", "Confirmed."],
                ended_at=base + timedelta(days=2),
                thread_id=billing,
                key_learnings=["The user chose the Pro tier at $29 for project Atlas."],
                entities=["pro tier", "project atlas"],
                event_type="decision",
            )
            failed = make_episode(
                conn,
                DATASET,
                ["Invoice #42 failed three times.", "Escalating to finance."],
                ended_at=base + timedelta(days=4),
                thread_id=billing,
                status="failed",
            )
            pending = make_episode(
                conn,
                DATASET,
                ["Can we get a discount for annual billing?", "Let me check."],
                ended_at=base + timedelta(days=6),
                thread_id=billing,
                status="pending",
            )
            processing = make_episode(
                conn,
                DATASET,
                ["The discount is 15 percent.", "Great, apply it."],
                ended_at=base + timedelta(days=8),
                thread_id=billing,
                status="processing",
            )
            add_messages(
                conn,
                billing,
                ["One more thing about invoices.", "Sure, go ahead."],
                at=base + timedelta(days=9),
            )
            # Failed for good, backing off, and claimed by a worker that is still alive:
            # states the running services leave alone.
            conn.execute(
                text(
                    "UPDATE episodes SET error = 'provider timeout after 3 retries', "
                    "retry_count = 3 WHERE episode_id = :id"
                ),
                {"id": failed.episode_id},
            )
            conn.execute(
                text(
                    "UPDATE episodes SET next_attempt_at = now() + interval '1 day', "
                    "retry_count = 1, error = 'rate limited' WHERE episode_id = :id"
                ),
                {"id": pending.episode_id},
            )
            conn.execute(
                text(
                    "UPDATE episodes SET claimed_by = 'worker-elsewhere', claimed_at = now() "
                    "WHERE episode_id = :id"
                ),
                {"id": processing.episode_id},
            )
            for name, made in (
                ("billing-archived", first),
                ("billing-current", second),
                ("billing-failed", failed),
                ("billing-pending", pending),
                ("billing-processing", processing),
            ):
                demo.episodes[name] = str(made.episode_id)
            # A few journal threads with several episodes each, over weeks (the timeline).
            for k in range(4):
                journal = make_thread(conn, DATASET, f"journal-{k}")
                demo.threads[f"journal-{k}"] = str(journal)
                for j in range(3):
                    made = make_episode(
                        conn,
                        DATASET,
                        [
                            f"Journal {k} entry {j}: Caroline planned step {j} of the adoption.",
                            "Noted.",
                        ],
                        ended_at=base + timedelta(days=2 * k + 5 * j, hours=k),
                        thread_id=journal,
                        key_learnings=[f"Caroline planned step {j}."],
                        entities=["adoption", f"step {j}"],
                        event_type="plan",
                    )
                    demo.episodes[f"journal-{k}-{j}"] = str(made.episode_id)
            # The admin actions' own dataset: one to retry, one to delete.
            ops = make_thread(conn, OPS_DATASET, "ops-thread")
            demo.threads["ops-thread"] = str(ops)
            keep = make_episode(
                conn,
                OPS_DATASET,
                ["Deploy the new pricing page.", "Done."],
                ended_at=base,
                thread_id=ops,
            )
            broken = make_episode(
                conn,
                OPS_DATASET,
                ["Rotate the API keys on Monday.", "Scheduled."],
                ended_at=base + timedelta(days=1),
                thread_id=ops,
                status="failed",
            )
            conn.execute(
                text(
                    "UPDATE episodes SET error = 'llm refused', retry_count = 3 "
                    "WHERE episode_id = :id"
                ),
                {"id": broken.episode_id},
            )
            demo.episodes["ops-delete"] = str(keep.episode_id)
            demo.episodes["ops-retry"] = str(broken.episode_id)
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def demo(suite: Suite) -> Demo:
    out = Demo()
    _factory_data(suite.db_url, out)
    with suite.client() as sdk:
        written = []
        for label, started_at, turns in SESSIONS:
            t = sdk.start_thread(DATASET, label)
            sdk.add_messages(
                t.thread_id,
                [
                    NewMessage(
                        role,
                        content,
                        metadata={"name": name},
                        created_at=started_at + timedelta(minutes=i),
                    )
                    for i, (role, name, content) in enumerate(turns)
                ],
            )
            sdk.end_thread(t.thread_id)
            out.threads[label] = t.thread_id
            written.append(t.thread_id)
        xss = sdk.start_thread(DATASET, "xss-probe")
        sdk.add_messages(
            xss.thread_id,
            [
                NewMessage("user", XSS_MESSAGE, created_at=datetime(2023, 6, 20, tzinfo=UTC)),
                NewMessage(
                    "assistant",
                    "Noted, I keep that snippet as plain text.",
                    created_at=datetime(2023, 6, 20, 0, 1, tzinfo=UTC),
                ),
            ],
        )
        sdk.end_thread(xss.thread_id)
        out.threads["xss-probe"] = xss.thread_id
        written.append(xss.thread_id)
        for label, request, order, write, outcome in TOOL_THREADS:
            t = sdk.start_thread(TOOLS_DATASET, label)
            sdk.add_messages(t.thread_id, tool_conversation(request, order, write))
            sdk.record_outcome(t.thread_id, outcome)
            sdk.end_thread(t.thread_id)
            out.threads[label] = t.thread_id
            written.append(t.thread_id)
        for thread_id in written:  # the summariser (polling every 0.2 s) completes them
            episode = sdk.wait_for_episode(thread_id, timeout=60)
            assert episode.status == "completed", episode

        def learned() -> bool:  # procedures are learned just after the episodes complete
            found = {p.steps[-1].tool: p for p in sdk.list_procedures(TOOLS_DATASET).items}
            cancel = found.get("cancel_pending_order")
            return bool(
                cancel
                and cancel.success_count + cancel.failure_count == 3
                and "return_delivered_order_items" in found
            )

        wait_until(learned, timeout=60, interval=0.3, message="the agent's procedures learned")
    return out


@pytest.fixture(scope="module")
def console_client(suite: Suite) -> Iterator[RecordingClient]:
    """The SDK client the console calls the services with."""
    client = suite.client(RecordingClient)
    assert isinstance(client, RecordingClient)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="module")
def console(console_client: RecordingClient, demo: Demo) -> Iterator[str]:
    """The console on a free loopback port, in development mode (no key), in a thread."""
    server = ConsoleServer(ConsoleApp(console_client), "127.0.0.1", 0).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def artifacts() -> Path:
    folder = (
        Path(
            os.environ.get("EPISODIC_TEST_ARTIFACTS")
            or Path(tempfile.gettempdir()) / "episodic-test-artifacts"
        )
        / "console"
    )
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium with a fresh profile (a persistent context: Playwright takes the
    profile folder as a parameter, not as --user-data-dir)."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright for Python drives the browser"
    )
    if not Path(CHROMIUM).exists():
        pytest.skip(
            f"no Chromium at {CHROMIUM}: install Debian's (apt-get install chromium) or set "
            "EPISODIC_TEST_CHROMIUM"
        )
    profile = tempfile.mkdtemp(prefix="episodic-chromium-")
    pw = sync_api.sync_playwright().start()
    try:
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1400, "height": 1000},
            locale="en-GB",
            timezone_id="UTC",
        )
        try:
            yield context
        finally:
            context.close()
    finally:
        pw.stop()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    p = browser.new_page()
    p.set_default_timeout(15_000)
    errors: list[str] = []
    p.on("pageerror", lambda err: errors.append(str(err)))
    p.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    p.browser_errors = errors  # a test that provokes an error answer removes what it expects
    yield p
    p.close()
    assert not errors, f"browser errors: {errors}"
