"""An LLM writes a procedure candidate's goal and step purposes (issue 39).

The offline extractor (:mod:`episodic.procedural`) decides everything that must be exact:
which tools were called, in which order, which of them write, which arguments mattered and
where their values came from. With an OpenAI-compatible model configured
(``EPISODIC_LLM_PROVIDER=openai``), the model rewrites only the words a person or an agent
reads — *when to use it* (the goal, generalised from the user's request: "a customer wants
a pending order cancelled", not "cancel #W1 for Omar") and *what each step is for* — from
the same evidence (the window's turns, the calls and their results). Its answer must name
the same tools in the same order, else the offline words stand: a model can reword a
procedure, never change it. Strict JSON schema as ``response_format``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import httpx
from pydantic import BaseModel, Field, ValidationError

from episodic import genai
from episodic.errors import ProviderError
from episodic.procedural import Candidate, WindowTurn
from episodic.providers._http import RetryPolicy, make_client, post_json
from episodic.tool_calls import render_call

__all__ = ["PROCEDURE_PROMPT", "OpenAIProcedureWriter"]

PROCEDURE_PROMPT = """You turn one conversation in which an agent used tools into a \
reusable procedure for later tasks of the same kind.

Write:
- goal: one sentence saying WHEN to use this procedure, as a kind of request ("a customer \
wants to cancel an order that has not shipped"), generalised: no names, ids, amounts or \
other values of this one conversation.
- steps: one entry per numbered call below, in the same order, with the same tool name, \
and a short purpose (at most 15 words) saying what the call is for in general terms.

Answer with JSON only."""

PROCEDURE_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "goal": {"type": "string"},
        "steps": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"tool": {"type": "string"}, "purpose": {"type": "string"}},
                "required": ["tool", "purpose"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["goal", "steps"],
    "additionalProperties": False,
}

#: The window's text sent, at most (the newest turns are cut first: a goal is asked early).
MAX_PROMPT_CHARS = 12_000


class _StepJSON(BaseModel):
    tool: str
    purpose: str = Field(max_length=400)


class _AnswerJSON(BaseModel):
    goal: str = Field(min_length=1, max_length=600)
    steps: list[_StepJSON]


def _parsed(answer: Any, candidate: Candidate) -> tuple[_AnswerJSON | None, str]:
    """The model's procedure, or None and why it is not usable."""
    try:
        content = answer["choices"][0]["message"]["content"]
        parsed = _AnswerJSON.model_validate(json.loads(content))
    except (KeyError, IndexError, TypeError, json.JSONDecodeError, ValidationError) as exc:
        return None, f"the answer is not the procedure asked for ({type(exc).__name__})"
    if [s.tool for s in parsed.steps] != [s.tool for s in candidate.steps]:
        return None, "the answer names other tools than the conversation called"
    return parsed, ""


class OpenAIProcedureWriter:
    """Rewrites a candidate's goal and purposes with ``POST {base_url}/chat/completions``.
    HTTP 429/5xx and timeouts are retried with backoff (:class:`RetryPolicy`); an answer
    that is not the JSON asked for, or names other tools, raises ProviderError (the caller
    keeps the offline words)."""

    name: str

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        temperature: float = 0.0,
        client: httpx.Client | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"openai:{model}"
        self.retry = retry or RetryPolicy()
        self.temperature = temperature
        self._client = client or make_client(timeout, api_key)

    def close(self) -> None:
        self._client.close()

    def build_prompt(self, turns: Sequence[WindowTurn], candidate: Candidate) -> str:
        lines = ["Conversation:"]
        for turn in turns:
            text = " ".join(turn.content.split())
            if turn.tool_calls:
                text = (text + " " if text else "") + " ".join(
                    f"[calls {render_call(c)}]" for c in turn.tool_calls
                )
            who = f"tool {turn.name}" if turn.role == "tool" and turn.name else turn.role
            lines.append(f"- {who}: {text}")
        transcript = "\n".join(lines)[:MAX_PROMPT_CHARS]
        calls = "\n".join(
            f"{i}. {s.tool}{' (changes something)' if s.writes else ''}"
            for i, s in enumerate(candidate.steps, 1)
        )
        return f"{transcript}\n\nThe user's request: {candidate.goal}\n\nCalls:\n{calls}"

    def request_body(self, turns: Sequence[WindowTurn], candidate: Candidate) -> dict[str, Any]:
        return {
            "model": self.model,
            "temperature": self.temperature,
            "messages": [
                {"role": "system", "content": PROCEDURE_PROMPT},
                {"role": "user", "content": self.build_prompt(turns, candidate)},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "procedure",
                    "strict": True,
                    "schema": PROCEDURE_JSON_SCHEMA,
                },
            },
        }

    def write(self, turns: Sequence[WindowTurn], candidate: Candidate) -> Candidate:
        """The candidate with the model's goal and purposes (tools and sources unchanged)."""
        # A `chat` span and the GenAI client metrics, as the summariser's calls (genai.py);
        # an unusable answer marks it invalid_response, and is raised once it has ended.
        with genai.chat(self.model, base_url=self.base_url, temperature=self.temperature) as call:
            answer = post_json(
                self._client,
                f"{self.base_url}/chat/completions",
                self.request_body(turns, candidate),
                policy=self.retry,
                provider=self.name,
            )
            call.answered(answer)
            parsed, problem = _parsed(answer, candidate)
            if problem:
                call.failed("invalid_response")
        if parsed is None:
            raise ProviderError(f"{self.name}: {problem}", provider="openai-chat")
        steps = tuple(
            replace(step, purpose=" ".join(written.purpose.split()) or step.purpose)
            for step, written in zip(candidate.steps, parsed.steps, strict=True)
        )
        return replace(
            candidate,
            goal=" ".join(parsed.goal.split()),
            steps=steps,
            extractor="llm",
        )
