"""Which turns are events worth recording (seed 002, "Writing Episodes (Without Writing
Every Turn)": a commitment or decision, a non-trivial tool call, a new entity — not idle
chat, not a retry).

Two classifiers with one interface (:class:`TurnClassifier`): the built-in
:class:`HeuristicClassifier` (offline, a short list of rules over the turn's words) and
:class:`OpenAITurnClassifier` (any OpenAI-compatible chat endpoint, a strict JSON schema).
The Summariser runs the configured one over turns after they were written
(``services/summariser/events.py``); ``bench/quality/event_classifier.py`` measures both against
hand-labelled LoCoMo turns. The heuristic's rules were written against part of those labels
(conversations 26, 30, 41, 42, 43, 44) and are reported on both parts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, Field, ValidationError

from episodic.errors import ProviderError
from episodic.providers._http import RetryPolicy, make_client, post_json
from episodic.providers.entities import normalise_entities
from episodic.providers.extractive import extract_entities

if TYPE_CHECKING:
    import httpx

__all__ = [
    "CLASSIFIER_EVENT_TYPES",
    "TURN_JSON_SCHEMA",
    "HeuristicClassifier",
    "OpenAITurnClassifier",
    "Turn",
    "TurnClassifier",
    "Verdict",
]

#: What a classified turn can be (precedence of the labelling guideline, strongest first).
CLASSIFIER_EVENT_TYPES = ("tool_call", "decision", "feedback", "milestone", "new_entity")
#: Longest summary an event gets from a turn (the turn itself, cut at a word).
MAX_SUMMARY_CHARS = 400


@dataclass(frozen=True)
class Turn:
    """One message as the classifier sees it."""

    sequence: int
    role: str  # user, assistant, tool, system
    content: str
    speaker: str | None = None  # from the message's metadata, when it names one
    tool_call: bool = False  # the message is (or reports) a tool call

    @property
    def actor(self) -> str:
        if self.speaker:
            return self.speaker
        return {"assistant": "agent", "tool": "agent"}.get(self.role, self.role)


@dataclass(frozen=True)
class Verdict:
    """A turn judged an event."""

    sequence: int
    event_type: str
    actor: str
    summary: str
    entities: tuple[str, ...] = ()


class TurnClassifier(Protocol):
    name: str

    def classify(self, turns: Sequence[Turn], earlier: Sequence[Turn]) -> list[Verdict]:
        """The events among ``turns`` (in order); ``earlier`` are the turns before them in
        the thread (context: what is already known, what a retry repeats)."""
        ...


def _summary(turn: Turn) -> str:
    text = " ".join(turn.content.split())
    if len(text) > MAX_SUMMARY_CHARS:
        text = text[: MAX_SUMMARY_CHARS - 1].rsplit(" ", 1)[0] + "…"
    return f"{turn.speaker}: {text}" if turn.speaker else text


# ---- the heuristic ----------------------------------------------------------------------

_FLAGS = re.IGNORECASE
# Hedges: wishes, maybes and someday plans are preferences, not commitments.
_HEDGE = re.compile(
    r"\b(maybe|might|someday|some day|one day|sometime|bucket list|would love to|"
    r"thinking (about|of)|considering|hope to|wish)\b",
    _FLAGS,
)
# Encouragement sounds like a commitment ("I'm gonna keep going!") and is not one.
_ENCOURAGEMENT = re.compile(
    r"\b(gonna|will|i'?ll|going to) (definitely )?(keep|make it happen|stick|let you know|"
    r"keep you (posted|updated)|have a (blast|safe)|make sure to have)\w*|"
    r"won'?t (give up|quit|stop)",
    _FLAGS,
)
_DECISION = re.compile(
    r"\b(i'?ve decided|we'?ve decided|decided to|(i'?m|we'?re|i am|we are) gonna \w+|^gonna \w+|"
    r"i'?ll (definitely|have to|make sure|send)|count me in|"
    r"sign(ed)? (up|with)|just (joined|signed|booked|bought|got (some|a|new|these|my))|"
    r"i (joined|booked|bought|ordered|enrolled|registered)|got (these|some) new|"
    r"i'?m (starting|running for|getting ready for|planning)|planning (a|to|on)|"
    r"so i can (help|give it a try)|season opener|next (week|month|friday|saturday|sunday|"
    r"monday|tuesday|wednesday|thursday)( works)?)\b",
    _FLAGS,
)
_FEEDBACK = re.compile(
    r"\b(took your (advice|recommendation|reccomendation|suggestion)|your (\w+ )?"
    r"(recommendation|reccomendation|suggestion|advice|recipe|tip)s? (is|was|were|are|"
    r"worked|you gave)|(you'?re|you are|that'?s|it'?s|this is) (super |really |so |very )?"
    r"helpful|gives? me (some )?new ideas|worked (great|perfectly|like a charm))",
    _FLAGS,
)
_MILESTONE = re.compile(
    r"\b(yesterday|the other day|last (week|weekend|month|year|night|summer|fall|winter|"
    r"spring|(mon|tues|wednes|thurs|fri|satur|sun)day)|(two|few|couple of) (days|weeks) "
    r"ago|just (started|finished|won|got back|launched|opened|graduated|moved|adopted|"
    r"completed)|finally (went|did|finished|got)|(i|we) (also |just |finally |recently )?"
    r"(went|won(?!')|started|finished|lost|took|made|gave|participated|painted|dyed|ran|"
    r"visited|met|tackled|launched|opened|graduated|adopted|completed|had)\b|"
    r"i got a (no|yes|job|promotion)|first (place|steps|tournament)|(new|first) job|"
    r"i'?ll (always|never) (remember|forget)|i'?m taking an? [\w ]{0,30}(course|class))",
    _FLAGS,
)
# "Just got back from…" leaves the speaker out and is still theirs.
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|we|we've|my|our)\b|^(just|finally) ", _FLAGS)
_SENTENCE = re.compile(r"[^.!?]+[.!?]*")
_QUOTED_TITLE = re.compile(r"[\"“]([A-Z][^\"”]{2,60})[\"”]")
_TRIVIAL = re.compile(r"^\W*(ok(ay)?|thanks?( you)?|sure|yes|no|cool|nice|great|bye)\W*$", _FLAGS)


def _statements(text: str) -> list[str]:
    """The turn's sentences that are not questions."""
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip() and not s.strip().endswith("?")]


class HeuristicClassifier:
    """Rules over a turn's words, in the guideline's precedence: a tool call (not a retry of
    the previous one), then a commitment, feedback on help received, something that
    happened to the speaker (first person), and finally a newly named work (a quoted
    title the thread has not mentioned). Only statements count (not questions); greetings,
    hedged wishes, encouragement and very short turns are not events."""

    name = "heuristic"

    def __init__(self, *, min_words: int = 5) -> None:
        self.min_words = min_words

    def _type(self, turn: Turn, earlier: Sequence[Turn], known: set[str]) -> str | None:
        text = turn.content.strip()
        if turn.tool_call or turn.role == "tool":
            repeated = any(
                e.content.strip() == text and (e.tool_call or e.role == "tool")
                for e in earlier[-3:]
            )
            return None if repeated or len(text.split()) < 3 else "tool_call"
        if len(text.split()) < self.min_words or _TRIVIAL.match(text):
            return None
        statements = _statements(text)
        if any(
            _DECISION.search(_ENCOURAGEMENT.sub(" ", s)) and not _HEDGE.search(s)
            for s in statements
        ):
            return "decision"
        if any(_FEEDBACK.search(s) for s in statements):
            return "feedback"
        if any(_MILESTONE.search(s) and _FIRST_PERSON.search(s) for s in statements):
            return "milestone"
        titles = {t.casefold() for s in statements for t in _QUOTED_TITLE.findall(s)}
        if titles - known:
            return "new_entity"
        return None

    def classify(self, turns: Sequence[Turn], earlier: Sequence[Turn]) -> list[Verdict]:
        known = {t.casefold() for e in earlier for t in _QUOTED_TITLE.findall(e.content)}
        seen: list[Turn] = list(earlier)
        out: list[Verdict] = []
        for turn in turns:
            kind = self._type(turn, seen, known)
            if kind is not None:
                names = [n for n, _ in extract_entities([turn.content]).most_common(5)]
                out.append(
                    Verdict(
                        sequence=turn.sequence,
                        event_type=kind,
                        actor=turn.actor,
                        summary=_summary(turn),
                        entities=tuple(normalise_entities(names)),
                    )
                )
            known |= {t.casefold() for t in _QUOTED_TITLE.findall(turn.content)}
            seen.append(turn)
        return out


# ---- the LLM ------------------------------------------------------------------------------

#: The strict JSON schema sent as ``response_format``: one verdict per numbered turn.
TURN_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "turns": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "turn": {"type": "integer", "description": "The turn's number, as given."},
                    "is_event": {"type": "boolean"},
                    "event_type": {
                        "type": "string",
                        "enum": [*CLASSIFIER_EVENT_TYPES, "none"],
                    },
                    "summary": {
                        "type": "string",
                        "description": "What happened, one third-person sentence ('' if none).",
                    },
                    "entities": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["turn", "is_event", "event_type", "summary", "entities"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["turns"],
    "additionalProperties": False,
}

TURN_PROMPT = """\
You decide which turns of a conversation are events worth remembering in an AI agent's \
episodic memory. Answer with one entry per numbered NEW turn.

A turn is an event when:
- decision: a party commits — decides, agrees, books, signs up or joins, buys something, or \
states a concrete, dated plan ("I'm going to X next month"). Wishes and maybes are not.
- tool_call: the agent makes a non-trivial tool call (not a retry of the same call).
- feedback: a party gives a verdict on help, advice or a recommendation received.
- milestone: something concrete happened to or was done by a party (an activity done, a \
thing finished, won, started, a life event), including a past episode told for the first time.
- new_entity: the only reason is that a new named person, pet, organisation, project, \
place or work enters the conversation.
Not events: greetings, questions, reactions, compliments, encouragement, thanks, opinions, \
habits, preferences, and details of an event already told. Precedence: tool_call > \
decision > feedback > milestone > new_entity. Use only what the turns state."""


class _TurnJSON(BaseModel):
    turn: int
    is_event: bool
    event_type: str
    summary: str = Field(max_length=2000)
    entities: list[str]


class _AnswerJSON(BaseModel):
    turns: list[_TurnJSON]


class OpenAITurnClassifier:
    """Classifies turns with any OpenAI-compatible ``POST {base_url}/chat/completions``,
    a batch of turns per request, with :data:`TURN_JSON_SCHEMA` as a strict
    ``response_format``. HTTP 429/5xx and timeouts are retried with backoff; an answer
    that is not the JSON asked for raises ProviderError (the turns stay unclassified and
    are tried again on the next pass)."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        temperature: float = 0.0,
        context_turns: int = 6,
        client: httpx.Client | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"openai:{model}"
        self.retry = retry or RetryPolicy()
        self.temperature = temperature
        self.context_turns = context_turns
        self._client = client or make_client(timeout, api_key)

    def close(self) -> None:
        self._client.close()

    def build_prompt(self, turns: Sequence[Turn], earlier: Sequence[Turn]) -> str:
        lines = []
        context = earlier[-self.context_turns :]
        if context:
            lines.append("Earlier turns (context only):")
            lines += [f"- {t.actor}: {' '.join(t.content.split())}" for t in context]
        lines.append("NEW turns:")
        for i, t in enumerate(turns, 1):
            mark = " [tool call]" if t.tool_call or t.role == "tool" else ""
            lines.append(f"{i}. {t.actor}{mark}: {' '.join(t.content.split())}")
        return "\n".join(lines)

    def request_body(self, turns: Sequence[Turn], earlier: Sequence[Turn]) -> dict[str, Any]:
        return {
            "model": self.model,
            "temperature": self.temperature,
            "messages": [
                {"role": "system", "content": TURN_PROMPT},
                {"role": "user", "content": self.build_prompt(turns, earlier)},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "turn_events", "strict": True, "schema": TURN_JSON_SCHEMA},
            },
        }

    def classify(self, turns: Sequence[Turn], earlier: Sequence[Turn]) -> list[Verdict]:
        if not turns:
            return []
        answer = post_json(
            self._client,
            f"{self.base_url}/chat/completions",
            self.request_body(turns, earlier),
            policy=self.retry,
            provider=self.name,
        )
        try:
            content = answer["choices"][0]["message"]["content"]
            parsed = _AnswerJSON.model_validate(json.loads(content))
        except (KeyError, IndexError, TypeError, json.JSONDecodeError, ValidationError) as exc:
            raise ProviderError(
                f"{self.name}: the answer is not the turn verdicts asked for "
                f"({type(exc).__name__})",
                provider="openai-chat",
            ) from exc
        out: list[Verdict] = []
        for item in parsed.turns:
            kind = item.event_type.strip().lower()
            if not item.is_event or kind not in CLASSIFIER_EVENT_TYPES:
                continue
            if not 1 <= item.turn <= len(turns):
                continue  # a turn the request did not number: ignored, not guessed
            turn = turns[item.turn - 1]
            summary = " ".join(item.summary.split()) or _summary(turn)
            out.append(
                Verdict(
                    sequence=turn.sequence,
                    event_type=kind,
                    actor=turn.actor,
                    summary=summary[:MAX_SUMMARY_CHARS],
                    entities=tuple(normalise_entities(item.entities)),
                )
            )
        return out
