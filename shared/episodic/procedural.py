"""Procedural memory's rules, free of the database: what a stretch of tool use teaches, and
how stretches merge into procedures (seed 003, "Semantic & Procedural Extraction").

A **candidate** is what one episode's window teaches: the goal it served (the user's
request, in their words), its steps (each tool call in order, what it was for, which
arguments mattered and where their values came from) and its **signature** — the actions
that change something (write calls), in order; a stretch that only reads is signed by the
tools it read with. A **procedure** is every candidate of one signature in a dataset:
successes give it support, failures and partial successes of the same actions count
against it, and a failure whose actions differ (it missed or misordered a step) counts
against the procedure whose goal it shares. Only a success creates a procedure.

The offline extractor (:func:`extract`) is deterministic: it knows the tools only by their
names (a name that starts with a reading verb — get, find, list, search, … — reads; any
other changes something) and where each argument's value appeared earlier in the stretch.
It cannot tell why a step was taken beyond the assistant's words before it, nor generalise
values (an order id is "from the user", not "the order the user means"). Procedures are
recomputed from their candidates whenever one changes (:func:`merge`), so erasing a thread,
correcting an outcome or changing these rules is a recomputation, never a patch.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from episodic.tool_calls import ToolCall

__all__ = [
    "Candidate",
    "Draft",
    "ProcedureWriter",
    "Step",
    "WindowTurn",
    "extract",
    "is_write",
    "merge",
    "procedure_id",
    "rank",
    "signature_of",
]

EXTRACTOR = "rules"
#: A goal is at most this many characters of the user's words.
MAX_GOAL_CHARS = 600
#: How many other requests a procedure shows beside its goal, and sources it lists.
MAX_EXAMPLES = 5
MAX_SOURCES = 20
#: A failure with other actions counts against the procedure whose goal it is this close
#: to (cosine of the goals' embeddings, after the embedder's scale is mapped onto MiniLM's)
#: and with which it shares a write tool.
FAILURE_MATCH = 0.6

#: A user turn after the first joins the goal when it has at least this many words that
#: ask for something (see :func:`_request_words`).
MIN_REQUEST_WORDS = 3
#: Words of a reply rather than a request: function words and the vocabulary of
#: confirming, greeting and thanking.
_REPLY_WORDS = frozenset(
    """a an the and or but so if then to of in on at for with by from as is are was were be
    been am it its this that these those i me my mine we us our you your he she they
    them their his her there here what which who not no yes yeah yep ok okay sure fine
    right correct confirm confirmed confirming proceed go ahead please thanks thank
    great good perfect sounds do does did done can could would will should just thats hi
    hello hey im s m ll ve re d t all also too""".split()  # noqa: SIM905
)
#: A tool whose name starts with one of these reads (anything else changes something).
READ_VERBS = frozenset(
    [
        "get",
        "find",
        "list",
        "search",
        "lookup",
        "look",
        "read",
        "fetch",
        "query",
        "check",
        "view",
        "show",
        "describe",
        "count",
        "retrieve",
        "calculate",
        "compute",
        "think",
        "browse",
        "inspect",
        "validate",
        "verify",
        "estimate",
        "preview",
        "recommend",
        "summarize",
        "summarise",
        "explain",
        "load",
        "locate",
        "peek",
        "poll",
        "ask",
        "see",
    ]
)
_WORD = re.compile(r"[A-Za-z][a-z]*|[0-9]+")
_NAMESPACE = uuid.UUID("3f0c6a2e-2f5d-4bd8-9d0c-8f4f6a9f2c11")


@dataclass(frozen=True, slots=True)
class WindowTurn:
    """One message of an episode's window, as the extractor reads it."""

    sequence: int
    role: str
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Step:
    tool: str
    purpose: str
    writes: bool
    arguments: tuple[tuple[str, str], ...]  # (name, source)

    def as_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "purpose": self.purpose,
            "writes": self.writes,
            "arguments": [{"name": n, "source": s} for n, s in self.arguments],
        }

    @staticmethod
    def from_json(value: dict[str, Any]) -> Step:
        return Step(
            tool=str(value["tool"]),
            purpose=str(value.get("purpose") or ""),
            writes=bool(value.get("writes")),
            arguments=tuple(
                (str(a["name"]), str(a["source"])) for a in value.get("arguments") or ()
            ),
        )


@dataclass(frozen=True, slots=True)
class Candidate:
    """What one episode's stretch taught (outcome attached when the procedures are merged)."""

    episode_id: str
    thread_id: str
    signature: str
    goal: str
    steps: tuple[Step, ...]
    outcome: str | None = None  # success, failure, partial; None while unknown
    embedding: Any = None  # the goal's embedding (a numpy vector), or None
    created_at: Any = None
    extractor: str = EXTRACTOR  # "rules", or "llm" when a model wrote the goal and purposes


@dataclass
class Draft:
    """A procedure as :func:`merge` computes it."""

    signature: str
    goal: str
    example_goals: list[str]
    steps: list[Step]
    success: list[Candidate] = field(default_factory=list)
    failure: list[Candidate] = field(default_factory=list)
    partial: list[Candidate] = field(default_factory=list)
    embedding: Any = None
    extractor: str = EXTRACTOR

    @property
    def sources(self) -> list[Candidate]:
        every = [*self.success, *self.failure, *self.partial]
        return sorted(every, key=lambda c: str(c.created_at or ""), reverse=True)[:MAX_SOURCES]


class ProcedureWriter(Protocol):
    """Words a candidate's goal and step purposes (an LLM: providers/procedure_writer.py);
    it must keep the tools, their order and the argument sources as they are."""

    name: str

    def write(self, turns: Sequence[WindowTurn], candidate: Candidate) -> Candidate: ...


def is_write(tool: str) -> bool:
    """Whether a tool changes something, judged by its name's first word."""
    words = [w.lower() for w in _WORD.findall(tool)]
    return not words or words[0] not in READ_VERBS


def signature_of(steps: Sequence[Step]) -> str:
    """The actions' fingerprint: the write tools in order (``w:a>b``), or, for a stretch
    that only reads, the tools it read with in the order first used (``r:a>b``)."""
    writes = [s.tool for s in steps if s.writes]
    if writes:
        return "w:" + ">".join(writes)
    seen: list[str] = []
    for s in steps:
        if s.tool not in seen:
            seen.append(s.tool)
    return "r:" + ">".join(seen)


def procedure_id(dataset: str, signature: str) -> uuid.UUID:
    """A procedure's id: stable for one signature in one dataset (recomputing keeps it)."""
    return uuid.uuid5(_NAMESPACE, f"{dataset}\x00{signature}")


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _values(value: Any) -> Iterable[str]:
    """The scalar values of an argument, as text (lists and objects walked)."""
    if isinstance(value, dict):
        for v in value.values():
            yield from _values(v)
    elif isinstance(value, list):
        for v in value:
            yield from _values(v)
    elif isinstance(value, bool) or value is None:
        return
    else:
        text = str(value).strip()
        if text:
            yield text


def _source(value: Any, said: list[str], results: list[tuple[str, str]]) -> str:
    """Where an argument's value came from: the user, an earlier tool's result, or the agent.
    A value made of several parts (a list of item ids) takes the source of most of them."""
    parts = list(_values(value))
    if not parts:
        return "agent"
    votes: dict[str, int] = {}
    for part in parts:
        needle = _norm(part)
        where = "agent"
        if any(needle in s for s in said):
            where = "user"
        else:
            for tool, text in reversed(results):
                if needle in text:
                    where = f"tool:{tool}"
                    break
        votes[where] = votes.get(where, 0) + 1
    return max(votes, key=lambda k: (votes[k], k != "agent"))


def _purpose(tool: str, said_before: str) -> str:
    """What a call was for: the assistant's words just before it when it said something
    short, else the tool's name in words."""
    text = " ".join(said_before.split())
    if 0 < len(text) <= 160:
        return text
    return " ".join(w.lower() for w in _WORD.findall(tool)) or tool


def _request_words(text: str, supplied: Sequence[str]) -> int:
    """How many words of a user's turn ask for something: its words less the values it
    handed to the tools (an email, a name, an id: they identify, they do not ask) and the
    words of a reply (yes, ok, thanks, …)."""
    rest = _norm(text)
    for value in supplied:
        rest = rest.replace(value, " ")
    return sum(
        1 for w in _WORD.findall(rest) if len(w) > 1 and not w.isdigit() and w not in _REPLY_WORDS
    )


def extract(turns: Sequence[WindowTurn], *, episode_id: str, thread_id: str) -> Candidate | None:
    """The candidate an episode's window teaches, or None when it called no tool (or no
    user request precedes its calls).

    The goal is the user's requests in their words: the first user turn, and every later
    one before the stretch's last write (its last call when it only reads) that asks for
    something — a request made after a first action was done counts; a reply that only
    confirms (“yes, go ahead”) or hands over values the tools then used (an email, a name
    and zip code) does not."""
    said: list[str] = []  # the user's messages so far, normalised
    results: list[tuple[str, str]] = []  # (tool, normalised result) so far
    names: dict[str, str] = {}
    steps: list[Step] = []
    asked: list[tuple[int, str]] = []  # (position among the turns, text) of user turns
    supplied: set[str] = set()  # every argument value the calls used, normalised
    last_write = last_call = -1
    for position, turn in enumerate(turns):
        if turn.role == "user":
            said.append(_norm(turn.content))
            text = " ".join(turn.content.split())
            if text:
                asked.append((position, text))
        elif turn.role == "tool":
            tool = turn.name or names.get(turn.tool_call_id or "", "") or "tool"
            results.append((tool, _norm(turn.content)))
        elif turn.role == "assistant":
            for call in turn.tool_calls:
                names[call.id] = call.name
                writes = is_write(call.name)
                parsed = call.parsed_arguments()
                supplied.update(_norm(v) for v in _values(parsed))
                arguments = tuple(
                    (name, _source(value, said, results)) for name, value in parsed.items()
                )
                last_call = position
                if writes:
                    last_write = position
                step = Step(
                    tool=call.name,
                    purpose=_purpose(call.name, turn.content),
                    writes=writes,
                    arguments=arguments,
                )
                # The same read again in a row (a retry, a page) is one step.
                if steps and not writes and steps[-1].tool == call.name and not steps[-1].writes:
                    continue
                steps.append(step)
    cutoff = last_write if last_write >= 0 else last_call
    before = [(p, text) for p, text in asked if p < cutoff]
    if not steps or not before:
        return None
    values = sorted((v for v in supplied if len(v) > 1), key=len, reverse=True)
    goal = " ".join(
        text
        for i, (_, text) in enumerate(before)
        if i == 0 or _request_words(text, values) >= MIN_REQUEST_WORDS
    )
    if len(goal) > MAX_GOAL_CHARS:
        goal = goal[: MAX_GOAL_CHARS - 1].rstrip() + "…"
    return Candidate(
        episode_id=episode_id,
        thread_id=thread_id,
        signature=signature_of(steps),
        goal=goal,
        steps=tuple(steps),
    )


def _cosine(a: Any, b: Any) -> float:
    if a is None or b is None:
        return 0.0
    import numpy as np

    va, vb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    denominator = float(np.linalg.norm(va) * np.linalg.norm(vb))
    return float(va @ vb) / denominator if denominator else 0.0


def _centroid(vectors: list[Any]) -> Any:
    import numpy as np

    present = [np.asarray(v, dtype=float) for v in vectors if v is not None]
    if not present:
        return None
    mean = np.mean(present, axis=0)
    norm = float(np.linalg.norm(mean))
    return mean / norm if norm else mean


def merge(
    candidates: Iterable[Candidate], *, to_reference: Callable[[float], float] = lambda c: c
) -> list[Draft]:
    """The dataset's procedures from its candidates (with their outcomes attached).

    One procedure per signature that has at least one success. Its steps are those of its
    latest success, its goal the request of the success most like the others (the one
    nearest their centroid), its embedding that centroid. Failures and partial successes
    of the signature count against it; a failure of another signature counts against the
    procedure whose goal it is nearest (``to_reference`` maps the embedder's cosines onto
    MiniLM's scale for :data:`FAILURE_MATCH`) among those sharing a write tool with it.
    Candidates without an outcome teach nothing until one is recorded."""
    by_signature: dict[str, list[Candidate]] = {}
    for c in candidates:
        by_signature.setdefault(c.signature, []).append(c)
    drafts: dict[str, Draft] = {}
    unmatched_failures: list[Candidate] = []
    for signature, group in by_signature.items():
        successes = [c for c in group if c.outcome == "success"]
        if not successes:
            unmatched_failures.extend(c for c in group if c.outcome == "failure")
            continue
        latest = max(successes, key=lambda c: str(c.created_at or ""))
        centroid = _centroid([c.embedding for c in successes])
        representative = max(
            successes, key=lambda c: (_cosine(c.embedding, centroid), str(c.created_at or ""))
        )
        examples: list[str] = []
        for c in sorted(successes, key=lambda c: str(c.created_at or ""), reverse=True):
            if c.goal != representative.goal and c.goal not in examples:
                examples.append(c.goal)
        drafts[signature] = Draft(
            signature=signature,
            goal=representative.goal,
            example_goals=examples[:MAX_EXAMPLES],
            steps=list(latest.steps),
            success=successes,
            failure=[c for c in group if c.outcome == "failure"],
            partial=[c for c in group if c.outcome == "partial"],
            embedding=centroid,
            extractor=latest.extractor,
        )
    for failure in unmatched_failures:
        writes = {s.tool for s in failure.steps if s.writes}
        best: tuple[float, Draft] | None = None
        for draft in drafts.values():
            if not writes & {s.tool for s in draft.steps if s.writes}:
                continue
            closeness = max(
                (to_reference(_cosine(failure.embedding, s.embedding)) for s in draft.success),
                default=0.0,
            )
            if closeness >= FAILURE_MATCH and (best is None or closeness > best[0]):
                best = (closeness, draft)
        if best is not None:
            best[1].failure.append(failure)
    return sorted(drafts.values(), key=lambda d: (-len(d.success), d.signature))


#: How many of the requests nearest a query vote for the procedures that served them.
RANK_NEIGHBOURS = 10


def rank(
    procedures: Iterable[tuple[str, int, Sequence[float]]], *, neighbours: int | None = None
) -> list[tuple[str, float]]:
    """Procedures ordered by fit to a query, best first: ``procedures`` holds each one's
    signature, success count and the cosines between the query and the goals of its
    successful candidates (the requests it served). Returns (signature, best cosine).

    The requests nearest the query vote: the :data:`RANK_NEIGHBOURS` nearest of every
    procedure's requests, each for the procedure that served it with its cosine; the
    procedure with the most votes comes first, then by its best cosine. One request that
    happens to share the query's words (the same object, another action on it) weighs less
    than several that ask for the same action; a procedure with no request among the
    nearest ranks by its best cosine after those with votes."""
    k = RANK_NEIGHBOURS if neighbours is None else neighbours
    procedures = list(procedures)
    pool = sorted(
        ((c, sig) for sig, _, cosines in procedures for c in cosines), key=lambda x: -x[0]
    )
    votes: dict[str, float] = {}
    for cosine, sig in pool[:k]:
        votes[sig] = votes.get(sig, 0.0) + max(cosine, 0.0)
    scored = [
        (sig, votes.get(sig, 0.0), max(cosines), ok) for sig, ok, cosines in procedures if cosines
    ]
    scored.sort(key=lambda x: (-x[1], -x[2], -x[3], x[0]))
    return [(sig, best) for sig, _, best, _ in scored]


def steps_json(steps: Sequence[Step]) -> str:
    return json.dumps([s.as_json() for s in steps], ensure_ascii=False, separators=(",", ":"))
