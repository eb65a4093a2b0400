"""Page load times of the web console for a dataset with many episodes.

    .venv/bin/python -m bench.speed.console_load [--episodes 1000] [--threads 100] [--runs 20]

Builds one dataset directly in SQL with ``tests.recall.factory.make_episode`` (``--episodes``
completed episodes over ``--threads`` threads: each thread's earlier episodes archived, its
last one current, as the summariser leaves them; message text from LoCoMo when
``../shared/bench/locomo10.jsonl`` is there, else synthetic), starts Ingest and Recall (the
hashing embedder, as in the tests) and the console in this process, then times each page:

- ``server``: the HTTP answer, from request to last byte (urllib, sequential, after a
  warm-up), p50 / p95 / max over ``--runs``, and the page's size;
- ``browser``: with Playwright and Debian's Chromium present, the browser's own load time
  (navigation start to the load event: HTML, CSS, htmx, layout of the SVG), median of 5.

Pages: the dataset's threads, its timeline, a recall (10 episodes, with both prompt
renderings), a thread page and the datasets list. The Recall RPC alone, through the SDK,
is timed too: what the recall page costs beyond it is the console's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import urllib.request
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

from bench.harness import REPO

DATASET = "bench/console"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def texts() -> list[list[str]]:
    """Message windows to write: LoCoMo sessions when available, else synthetic ones."""
    try:
        sys.path.insert(0, str(REPO))
        from bench.harness import locomo

        sessions = [s for c in locomo.load(limit=3) for s in c.sessions]
        return [[m.text for m in s.messages[:12]] for s in sessions if s.messages]
    except (FileNotFoundError, ImportError):
        return [
            [f"Message {j} of session {i}: the user talks about topic {i % 17}." for j in range(8)]
            for i in range(40)
        ]


def build(url: str, episodes: int, threads: int) -> str:
    from episodic.store.db import make_engine
    from tests.recall.factory import make_episode, make_thread

    windows = texts()
    engine = make_engine(url, pool_size=1)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    first_thread = ""
    try:
        with engine.begin() as conn:
            ids = [make_thread(conn, DATASET, f"thread-{t:04d}") for t in range(threads)]
            first_thread = str(ids[0])
            for i in range(episodes):
                t = i % threads
                window = windows[i % len(windows)]
                make_episode(
                    conn,
                    DATASET,
                    window,
                    ended_at=start + timedelta(hours=6 * i),
                    thread_id=ids[t],
                    key_learnings=[window[0][:120]],
                    entities=[f"topic {i % 17}", f"thread {t}"],
                    event_type=("decision", "plan", "conversation")[i % 3],
                )
    finally:
        engine.dispose()
    return first_thread


DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy


def fetch(url: str) -> tuple[float, int]:
    started = time.perf_counter()
    with DIRECT.open(url, timeout=60) as answer:
        body = answer.read()
        assert answer.status == 200, (url, answer.status)
    return (time.perf_counter() - started) * 1000, len(body)


def browser_times(pages: dict[str, str]) -> dict[str, float] | None:
    chromium = Path("/usr/bin/chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not chromium.exists():
        return None
    import tempfile

    out: dict[str, float] = {}
    with (
        tempfile.TemporaryDirectory(prefix="episodic-chromium-") as profile,
        sync_playwright() as pw,
    ):
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=str(chromium),
            headless=True,
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
            viewport={"width": 1400, "height": 1000},
        )
        page = context.new_page()
        for name, url in pages.items():
            runs = []
            for _ in range(6):
                page.goto(url, wait_until="load")
                runs.append(
                    page.evaluate(
                        "() => { const n = performance.getEntriesByType('navigation')[0];"
                        " return n.loadEventEnd - n.startTime; }"
                    )
                )
            out[name] = statistics.median(runs[1:])  # the first warms the caches
        context.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=100)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--database-url", help="admin URL of a PostgreSQL with pgvector")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO))
    from episodic.console import ConsoleApp, ConsoleServer
    from episodic.sdk.client import EpisodicClient
    from episodic.testing.database import scratch_database
    from episodic.testing.processes import start_service

    with ExitStack() as stack:
        url = stack.enter_context(scratch_database(args.database_url, "episodic-console-"))
        log(f"building {args.episodes} episodes over {args.threads} threads …")
        thread_id = build(url, args.episodes, args.threads)
        env = {"EPISODIC_LOG_LEVEL": "WARNING"}
        ingest = start_service("ingest", url, env, timeout=120)
        stack.callback(ingest.terminate)
        recall = start_service("recall", url, env, timeout=120)
        stack.callback(recall.terminate)
        client = stack.enter_context(
            EpisodicClient(ingest=ingest.address, recall=recall.address, timeout=30)
        )
        server = ConsoleServer(ConsoleApp(client), "127.0.0.1", 0).start()
        stack.callback(server.stop)
        ds = quote(DATASET, safe="")
        pages = {
            "datasets": f"{server.url}/",
            "dataset (threads)": f"{server.url}/dataset?dataset={ds}",
            "timeline": f"{server.url}/timeline?dataset={ds}",
            "recall": f"{server.url}/recall?dataset={ds}&q=adoption+support+group&run=1",
            "thread": f"{server.url}/thread?id={thread_id}",
        }
        for page_url in pages.values():  # warm-up: channels, caches, prepared statements
            fetch(page_url)
        print(
            f"console page loads, dataset of {args.episodes} episodes over {args.threads} "
            f"threads ({args.runs} runs each, sequential)"
        )
        print(f"{'page':<20} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'size KB':>8}")
        for name, page_url in pages.items():
            times, size = [], 0
            for _ in range(args.runs):
                ms, size = fetch(page_url)
                times.append(ms)
            times.sort()
            p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
            print(
                f"{name:<20} {statistics.median(times):>8.1f} {p95:>8.1f} {times[-1]:>8.1f} "
                f"{size / 1024:>8.1f}"
            )
        # The same Recall through the SDK alone: what the service costs, not the console.
        rpc = []
        for _ in range(args.runs):
            started = time.perf_counter()
            client.recall(DATASET, "adoption support group", limit=10)
            rpc.append((time.perf_counter() - started) * 1000)
        print(f"{'(Recall RPC alone)':<20} {statistics.median(rpc):>8.1f}")
        loads = browser_times(pages)
        if loads is None:
            print("browser: skipped (needs Playwright and /usr/bin/chromium)")
        else:
            print("browser load (navigation start to load event, median of 5):")
            for name, ms in loads.items():
                print(f"  {name:<20} {ms:>8.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
