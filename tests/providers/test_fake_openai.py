"""The fake OpenAI-compatible server itself, in-process and as a process (service tests run
it that way)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.providers.fake_openai import DEFAULT_CHAT_RESULT, FakeOpenAI

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_defaults_speak_the_wire_format(fake: FakeOpenAI) -> None:
    with httpx.Client(base_url=fake.base_url) as client:
        chat = client.post("/chat/completions", json={"model": "m", "messages": []}).json()
        assert chat["object"] == "chat.completion"
        assert chat["choices"][0]["message"]["role"] == "assistant"
        emb = client.post("/embeddings", json={"model": "m", "input": "one"}).json()
        assert len(emb["data"]) == 1 and len(emb["data"][0]["embedding"]) == 384
        assert client.get("/models").json()["data"][0]["id"] == "fake-model"
        assert client.post("/embeddings", content=b"{").status_code == 400
        assert client.get("/nope").status_code == 404
    assert [r.endpoint for r in fake.requests] == [
        "chat",
        "embeddings",
        "models",
        "embeddings",
        "/v1/nope",
    ]


def test_queue_is_consumed_in_order(fake: FakeOpenAI) -> None:
    fake.enqueue_chat(status=503, headers={"Retry-After": "7"})
    fake.enqueue_chat("plain text")
    with httpx.Client(base_url=fake.base_url) as client:
        first = client.post("/chat/completions", json={"model": "m", "messages": []})
        second = client.post("/chat/completions", json={"model": "m", "messages": []})
        third = client.post("/chat/completions", json={"model": "m", "messages": []})
    assert first.status_code == 503 and first.headers["retry-after"] == "7"
    assert second.json()["choices"][0]["message"]["content"] == "plain text"
    assert third.status_code == 200  # queue empty: the default again


def test_runs_as_a_process_scripted_over_http() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.providers.fake_openai", "--port", "0", "--dimension", "8"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the server is bound
        assert line.startswith("listening on port ")
        base = f"http://127.0.0.1:{int(line.split()[-1])}"
        with httpx.Client(base_url=base, timeout=10) as client:
            client.post("/_fake/enqueue", json={"endpoint": "chat", "status": 500})
            assert client.post("/v1/chat/completions", json={"model": "m"}).status_code == 500
            ok = client.post("/v1/chat/completions", json={"model": "m", "messages": []})
            assert ok.json()["choices"][0]["message"]["content"].startswith('{"summary"')
            emb = client.post("/v1/embeddings", json={"model": "m", "input": ["a"]}).json()
            assert len(emb["data"][0]["embedding"]) == 8
            recorded = client.get("/_fake/requests").json()
            assert [r["path"] for r in recorded] == ["/v1/chat/completions"] * 2 + [
                "/v1/embeddings"
            ]
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_default_chat_result_is_a_valid_episode() -> None:
    assert set(DEFAULT_CHAT_RESULT) == {
        "summary",
        "key_learnings",
        "entities",
        "event_type",
        "actor",
    }
