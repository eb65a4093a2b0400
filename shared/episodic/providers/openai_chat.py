"""Summaries from any OpenAI-compatible ``POST /chat/completions`` (OpenAI, Ollama, vLLM,
llama.cpp server), with a strict JSON schema for the episode."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from episodic import genai, metrics
from episodic.errors import ProviderError
from episodic.providers._http import RetryPolicy, get_status, make_client, post_json
from episodic.providers.entities import normalise_entities
from episodic.providers.types import (
    ACTORS,
    EVENT_TYPES,
    Actor,
    ChatMessage,
    EventType,
    SummaryRequest,
    SummaryResult,
    speaker_label,
)

if TYPE_CHECKING:
    import httpx

__all__ = ["EPISODE_JSON_SCHEMA", "SYSTEM_PROMPT", "OpenAIChatSummariser"]

#: The strict JSON schema sent as ``response_format`` (OpenAI structured outputs; Ollama,
#: vLLM and llama.cpp accept the same shape).
EPISODE_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {
            "type": "string",
            "description": "Rolling summary of the conversation so far, 1-4 sentences, "
            "weighted towards the new messages.",
        },
        "key_learnings": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Short self-contained statements learned from the new messages.",
        },
        "entities": {
            "type": "array",
            "items": {"type": "string"},
            "description": "People, projects, organisations, products, ids mentioned.",
        },
        "event_type": {"type": "string", "enum": list(EVENT_TYPES)},
        "actor": {"type": "string", "enum": list(ACTORS)},
    },
    "required": ["summary", "key_learnings", "entities", "event_type", "actor"],
    "additionalProperties": False,
}

SYSTEM_PROMPT = """\
You maintain the episodic memory of an AI agent. You read a conversation thread and write \
one episode for it as JSON.

Rules:
- Use only what the conversation (and the previous summary, if given) states. Never invent \
names, numbers, dates or outcomes.
- summary: a rolling summary of the whole conversation so far in 1-4 sentences, third \
person, weighted towards the NEW messages. Keep concrete details: who, what, amounts, dates, \
decisions.
- key_learnings: up to {max_learnings} short, self-contained statements learned from the \
NEW messages only (preferences, commitments, facts about the user or their work), e.g. \
"user wants a family car under $30k". Use [] when there is nothing worth remembering.
- entities: people, projects, organisations, products, places and ids mentioned, lowercase, \
e.g. "project atlas", "invoice:#42".
- event_type: "decision" if someone decided, agreed, chose or booked something; "tool_call" \
if the agent called tools or took an action in another system; "feedback" if the user judged \
the agent's work; "milestone" if something was finished, launched or completed; otherwise \
"conversation".
- actor: who drove the event: "user", "agent" or "system".
Answer with the JSON object only."""


class _EpisodeJSON(BaseModel):
    """What the model must answer (validated strictly: no coercion of wrong types)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    summary: str = Field(min_length=1)
    key_learnings: list[str]
    entities: list[str]
    event_type: EventType
    actor: Actor


_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def _strip_fences(text: str) -> str:
    # Models asked for JSON sometimes wrap it in a Markdown code block anyway.
    match = _FENCE.match(text)
    return match.group(1) if match else text.strip()


def _format_line(message: ChatMessage) -> str:
    when = message.created_at.strftime("%Y-%m-%d %H:%M")
    return (
        f"[{message.sequence}] {when} {speaker_label(message)} ({message.role}): {message.content}"
    )


class _Malformed(Exception):
    """The model answered, but not with a usable episode."""


class OpenAIChatSummariser:
    """Summarises with any OpenAI-compatible ``POST {base_url}/chat/completions``.

    Sends a strict JSON schema as ``response_format``. Threads longer than
    ``max_input_chars`` are sent as the previous summary plus the newest messages that fit
    (the prompt says so). HTTP 429/5xx and timeouts are retried with backoff (see
    :class:`~episodic.providers._http.RetryPolicy`); an answer that is not the JSON asked for
    is re-requested ``malformed_retries`` times, then raised as ProviderError with a snippet.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        max_input_chars: int = 24000,
        temperature: float = 0.0,
        max_key_learnings: int = 6,
        malformed_retries: int = 1,
        client: httpx.Client | None = None,
    ) -> None:
        if max_input_chars < 200:
            raise ValueError("max_input_chars must be >= 200")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"openai:{model}"
        self.retry = retry or RetryPolicy()
        self.max_input_chars = max_input_chars
        self.temperature = temperature
        self.max_key_learnings = max_key_learnings
        self.malformed_retries = malformed_retries
        self._client = client or make_client(timeout, api_key)

    def close(self) -> None:
        """Closes the HTTP connection pool."""
        self._client.close()

    def __enter__(self) -> OpenAIChatSummariser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- prompt

    def build_prompt(self, request: SummaryRequest) -> str:
        """The user message sent to the model (public so callers and tests can inspect the
        budgeting)."""
        window, context = request.window, request.context
        header = [f"Thread: {request.thread_label}"] if request.thread_label else []
        context_lines = [_format_line(m) for m in context]
        window_lines = [_format_line(m) for m in window]
        full = sum(len(line) + 1 for line in context_lines + window_lines)

        if full <= self.max_input_chars:
            parts = header
            if context_lines:
                parts += ["Earlier messages (covered by earlier episodes):", *context_lines]
            parts += ["NEW messages (this episode; key learnings come only from these):"]
            parts += window_lines
            return "\n".join(parts)

        # Over budget: the previous summary stands in for the oldest messages, and the newest
        # messages are kept whole, newest first, until the budget is spent.
        previous = (request.previous_summary or "").strip()
        budget = self.max_input_chars - len(previous)
        kept_window: list[str] = []
        kept_context: list[str] = []
        for line in reversed(window_lines):
            if len(line) + 1 > budget:
                break
            kept_window.insert(0, line)
            budget -= len(line) + 1
        if not kept_window:
            # A single newest message larger than the budget: send its beginning.
            room = max(200, budget)
            kept_window = [window_lines[-1][: room - 1] + "…"]
            budget -= room
        if len(kept_window) == len(window_lines):
            for line in reversed(context_lines):
                if len(line) + 1 > budget:
                    break
                kept_context.insert(0, line)
                budget -= len(line) + 1
        omitted_context = len(context_lines) - len(kept_context)
        omitted_window = len(window_lines) - len(kept_window)

        parts = header
        note = (
            f"Note: this thread is too long to send whole. {omitted_context + omitted_window} "
            "older message(s) are omitted"
        )
        if previous:
            parts += [
                note + "; the previous summary below covers the earlier conversation.",
                "Previous summary:",
                previous,
            ]
        else:
            parts += [note + "; summarise from the messages shown."]
        if omitted_window:
            parts += [
                f"The first {omitted_window} message(s) of the new episode are among the "
                "omitted ones."
            ]
        if kept_context:
            parts += ["Earlier messages (covered by earlier episodes):", *kept_context]
        parts += ["NEW messages (this episode; key learnings come only from these):"]
        parts += kept_window
        return "\n".join(parts)

    def request_body(self, request: SummaryRequest) -> dict[str, Any]:
        """The JSON body of the chat-completions request."""
        return {
            "model": self.model,
            "temperature": self.temperature,
            "messages": [
                {
                    "role": "system",
                    "content": SYSTEM_PROMPT.format(max_learnings=self.max_key_learnings),
                },
                {"role": "user", "content": self.build_prompt(request)},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "episode_summary",
                    "strict": True,
                    "schema": EPISODE_JSON_SCHEMA,
                },
            },
        }

    # -- answer

    def _content(self, answer: Any) -> str:
        try:
            choice = answer["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError) as exc:
            keys = sorted(answer) if isinstance(answer, dict) else type(answer).__name__
            raise _Malformed(f"the answer has no choices[0].message (it has {keys})") from exc
        if isinstance(message, dict) and message.get("refusal"):
            raise ProviderError(
                f"{self.name}: the model refused to summarise "
                f"({len(str(message['refusal']))} characters of refusal)",
                provider="openai-chat",
            )
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):  # some servers answer with content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if not isinstance(content, str) or not content.strip():
            raise _Malformed(
                f"the answer has no message content (finish_reason={choice.get('finish_reason')!r})"
            )
        if choice.get("finish_reason") == "length":
            raise _Malformed(
                f"the answer was cut off after {len(content)} characters (finish_reason=length)"
            )
        return content

    def _parse(self, content: str) -> SummaryResult:
        text = _strip_fences(content)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _Malformed(
                f"the model's answer is not JSON ({exc.msg} at character {exc.pos} of {len(text)})"
            ) from exc
        if isinstance(data, dict):
            # Harmless spelling drift is accepted; anything else must match the schema.
            for key in ("event_type", "actor"):
                if isinstance(data.get(key), str):
                    data[key] = data[key].strip().lower()
            if data.get("actor") == "assistant":
                data["actor"] = "agent"
        try:
            parsed = _EpisodeJSON.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
                for e in exc.errors()
            )
            raise _Malformed(
                f"the model's JSON does not match the episode schema ({problems})"
            ) from exc
        learnings: list[str] = []
        for item in parsed.key_learnings:
            item = " ".join(item.split())
            if item and item.lower() not in {x.lower() for x in learnings}:
                learnings.append(item)
        return SummaryResult(
            summary=parsed.summary.strip(),
            key_learnings=learnings[: self.max_key_learnings],
            entities=normalise_entities(parsed.entities),
            event_type=parsed.event_type,
            actor=parsed.actor,
        )

    def summarise(self, request: SummaryRequest) -> SummaryResult:
        """Asks the model; see the class docstring for retries and errors."""
        body = self.request_body(request)
        url = f"{self.base_url}/chat/completions"
        last: _Malformed | None = None
        for attempt in range(self.malformed_retries + 1):
            if attempt:
                metrics.provider_retry(self.name, "invalid_response")
            with genai.chat(
                self.model, base_url=self.base_url, temperature=self.temperature
            ) as call:
                answer = post_json(self._client, url, body, policy=self.retry, provider=self.name)
                call.answered(answer)
                try:
                    return self._parse(self._content(answer))
                except _Malformed as exc:
                    call.failed("invalid_response")
                    last = exc
        assert last is not None
        metrics.provider_error(self.name, "invalid_response")
        raise ProviderError(
            f"{self.name}: unusable answer after {self.malformed_retries + 1} attempt(s): {last}",
            provider="openai-chat",
        ) from last

    def check(self) -> None:
        """GETs ``{base_url}/models``: proves the endpoint is reachable and the key is
        accepted, without paying for a completion. Servers without the route pass."""
        status = get_status(self._client, f"{self.base_url}/models", self.name)
        if status in (401, 403):
            raise ProviderError(
                f"{self.name}: {self.base_url} rejected the API key (HTTP {status})",
                provider="openai-chat",
                status=str(status),
            )
        if status >= 500:
            raise ProviderError(
                f"{self.name}: {self.base_url}/models answered HTTP {status}",
                provider="openai-chat",
                status=str(status),
            )
