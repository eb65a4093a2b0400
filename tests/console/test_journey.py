"""An episode's page in the console shows its journey, read from the services' span file
(the source ``episodic trace`` reads): the write behind it, the trigger that fired, each
summarise attempt with its duration and error, the extraction and the recalls that returned
it. Four services as real processes, the Summariser's model an OpenAI-compatible fake that
fails the first call (HTTP 500) so the first attempt fails and the second completes; the
page is read in headless Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from episodic.console import ConsoleApp, ConsoleServer
from episodic.ops import journey
from episodic.sdk.client import EpisodicClient
from episodic.testing.processes import wait_until
from tests.providers.fake_openai import FakeOpenAI, FakeResponse

DATASET = "journey-console"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(dimension=384) as server:
        yield server


def _console(client: EpisodicClient, spans: str | None) -> ConsoleServer:
    return ConsoleServer(ConsoleApp(client, spans=spans), "127.0.0.1", 0).start()


def test_the_episode_page_follows_the_episode(
    spawn, tmp_path: Path, fake: FakeOpenAI, page: Any, artifacts: Path
) -> None:  # type: ignore[no-untyped-def]
    spans = tmp_path / "spans.jsonl"
    env = {"EPISODIC_TRACE_FILE": str(spans)}
    scheduler = spawn("scheduler", env=env)
    ingest = spawn("ingest", env={**env, "EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    fake.enqueue("chat", FakeResponse(status=500))  # the first attempt's model call fails
    summariser = spawn(
        "summariser",
        env={
            **env,
            "EPISODIC_LLM_PROVIDER": "openai",
            "EPISODIC_LLM_BASE_URL": fake.base_url,
            "EPISODIC_LLM_MODEL": "fake-model",
            "EPISODIC_LLM_MAX_RETRIES": "0",  # no HTTP retry: the attempt fails
            "EPISODIC_RETRY_BACKOFF": "0",  # and the next one runs at once
            "EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2",
        },
    )
    recall = spawn("recall", env=env)
    client = EpisodicClient(
        ingest=ingest.address,
        recall=recall.address,
        scheduler=scheduler.address,
        summariser=summariser.address,
        timeout=20,
    )
    thread = client.start_thread(DATASET, "trip")
    client.add_messages(thread.thread_id, [("user", "Book the Lisbon flight on Tuesday.")])
    ended = client.end_thread(thread.thread_id)
    episode = client.wait_for_episode(thread.thread_id, timeout=60)
    assert episode.status == "completed" and episode.episode_id == ended.episode_id
    for _ in range(2):
        client.recall(DATASET, "Lisbon flight")

    def followed() -> bool:
        found = journey.journey(journey.read_spans(spans), episode.episode_id)
        recalled = [s for s in found.recalls if found.via.get(s["span_id"]) == "Recall"]
        return len(found.attempts) == 2 and len(recalled) == 2 and bool(found.extractions)

    wait_until(followed, timeout=30, message="the journey's spans in the file")
    # `episodic trace` says the same of the failed attempt.
    text = journey.render(journey.journey(journey.read_spans(spans), episode.episode_id))
    assert "-> pending (error UNAVAILABLE)" in text and "error 500" in text

    server = _console(client, str(spans))
    try:
        page.goto(f"{server.url}/episode?id={episode.episode_id}")
        section = page.locator("dl.journey")
        armed = section.locator("[data-journey='armed']")
        assert armed.count() == 1
        assert "/episodic.v1.IngestService/EndThread" in armed.inner_text()
        assert "episodic-ingest" in armed.inner_text()
        fired = section.locator("[data-journey='fired']").inner_text()
        assert "/episodic.v1.SchedulerService/RequestEpisode" in fired
        assert section.locator("[data-journey='trigger']").inner_text() == "Trigger: explicit"
        attempts = section.locator("[data-journey='attempt']")
        assert attempts.count() == 2
        first, second = attempts.nth(0).inner_text(), attempts.nth(1).inner_text()
        assert " ms → pending error UNAVAILABLE " in first.split("\n")[0]  # retried later
        failed_call = attempts.nth(0).locator("[data-journey='model-call'].error-text")
        assert "chat fake-model" in failed_call.inner_text()
        assert "error 500" in failed_call.inner_text()
        assert "→ completed" in second and "create_memory in journey-console" in second
        assert section.locator("[data-journey='extraction']").count() == 1
        # The two Recalls, beside the ListEpisodes wait_for_episode polled with (both are
        # search_memory), each saying which it was.
        recalls = section.locator("[data-journey='recall']").filter(has_text="via Recall ")
        assert recalls.count() == 2
        assert all("search_memory" in recalls.nth(i).inner_text() for i in range(2))
        assert all("rank 1 of 1" in recalls.nth(i).inner_text() for i in range(2))
        listed = section.locator("[data-journey='recall']").filter(has_text="via ListEpisodes")
        assert listed.count() >= 1
        page.screenshot(path=str(artifacts / "12-episode-journey.png"), full_page=True)
    finally:
        server.stop()

    # Without a span file the page says how to get the journey.
    server = _console(client, None)
    try:
        page.goto(f"{server.url}/episode?id={episode.episode_id}")
        assert "--spans FILE" in page.locator("[data-journey='none']").inner_text()
    finally:
        server.stop()
        client.close()
