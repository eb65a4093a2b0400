"""An episode's journey, read back from spans: which write armed its timer, which trigger
fired, each summarise attempt (duration, outcome, failed model calls), the extraction, and
the recalls that returned it. ``episodic trace <episode id>`` prints it.

The input is the suite's span file (``EPISODIC_TRACE_FILE``: one JSON object per line,
:func:`episodic.telemetry.span_to_dict`); :func:`spans_from_otlp` turns OTLP/JSON export
requests (what a collector's file exporter writes) into the same shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from episodic import semconv as genai  # names only: this runs on the core install

Span = dict[str, Any]

_SUMMARISE = "summarise episode"
_EXTRACTION = "semantic extraction"
_RECORDS = (genai.SEARCH_MEMORY,)


def read_spans(path: str | Path) -> list[Span]:
    """The spans of a span file (unreadable lines skipped) or of an OTLP/JSON file."""
    spans: list[Span] = []
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(item, dict) and "resourceSpans" in item:
            spans.extend(spans_from_otlp(item))
        elif isinstance(item, dict) and "span_id" in item:
            spans.append(item)
    return spans


def _otlp_value(value: dict[str, Any]) -> Any:
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        return int(value["intValue"])
    if "arrayValue" in value:
        return [_otlp_value(v) for v in value["arrayValue"].get("values", [])]
    return None


def _hex(value: str | None) -> str | None:
    """OTLP/JSON ids are hex (the spec's JSON mapping); empty means none."""
    return value.lower() if value else None


def spans_from_otlp(request: dict[str, Any]) -> Iterator[Span]:
    """The spans of one OTLP/JSON ``ExportTraceServiceRequest``, in the span file's shape."""
    kinds = {1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
    for rs in request.get("resourceSpans", []):
        resource = {
            a["key"]: _otlp_value(a.get("value", {}))
            for a in rs.get("resource", {}).get("attributes", [])
        }
        for ss in rs.get("scopeSpans", []):
            for s in ss.get("spans", []):
                kind = s.get("kind", 0)
                yield {
                    "trace_id": _hex(s.get("traceId")),
                    "span_id": _hex(s.get("spanId")),
                    "parent_span_id": _hex(s.get("parentSpanId")),
                    "name": s.get("name", ""),
                    "kind": kinds.get(kind, str(kind)).removeprefix("SPAN_KIND_"),
                    "links": [
                        {"trace_id": _hex(link.get("traceId")), "span_id": _hex(link.get("spanId"))}
                        for link in s.get("links", [])
                    ],
                    "attributes": {
                        a["key"]: _otlp_value(a.get("value", {})) for a in s.get("attributes", [])
                    },
                    "service": resource.get("service.name"),
                    "status": {0: "UNSET", 1: "OK", 2: "ERROR"}.get(
                        s.get("status", {}).get("code", 0), "UNSET"
                    ),
                    "start_time_unix_nano": int(s.get("startTimeUnixNano", 0)),
                    "end_time_unix_nano": int(s.get("endTimeUnixNano", 0)),
                }


@dataclass
class Attempt:
    """One summarise attempt."""

    span: Span
    status: str
    duration_ms: float
    failures: list[Span] = field(default_factory=list)  # its failed model calls
    model_calls: list[Span] = field(default_factory=list)
    created: Span | None = None  # its create_memory

    @property
    def error(self) -> str | None:
        """Why the attempt failed (``error.type`` of its span), None when it did not."""
        value = self.span.get("attributes", {}).get(genai.ERROR_TYPE)
        return str(value) if value else None


@dataclass
class Journey:
    episode_id: str
    armed_by: list[Span] = field(default_factory=list)  # the writes behind the trigger
    fired: list[Span] = field(default_factory=list)  # the trigger(s) the attempts link to
    attempts: list[Attempt] = field(default_factory=list)
    extractions: list[Span] = field(default_factory=list)
    recalls: list[Span] = field(default_factory=list)  # search_memory spans naming it
    changes: list[Span] = field(default_factory=list)  # update/delete_memory of it
    #: span id of a recall or change -> the RPC it served (``Recall``, ``ListEpisodes``, …)
    via: dict[str, str] = field(default_factory=dict)

    @property
    def triggers(self) -> list[str]:
        """The trigger(s) that opened the episode (``inactivity``, ``explicit``, …), as
        its summarise attempts say."""
        found: list[str] = []
        for a in self.attempts:
            trigger = a.span.get("attributes", {}).get(genai.TRIGGER)
            if isinstance(trigger, str) and trigger and trigger not in found:
                found.append(trigger)
        return found

    @property
    def empty(self) -> bool:
        return not (self.attempts or self.recalls or self.changes or self.extractions)


def _ms(span: Span) -> float:
    return (span["end_time_unix_nano"] - span["start_time_unix_nano"]) / 1e6


def _root(by_id: dict[tuple[str, str], Span], span: Span) -> Span:
    while span.get("parent_span_id"):
        parent = by_id.get((span["trace_id"], span["parent_span_id"]))
        if parent is None:
            break
        span = parent
    return span


def _descendants(spans: Iterable[Span], root: Span) -> list[Span]:
    children: dict[str, list[Span]] = {}
    for s in spans:
        if s["trace_id"] == root["trace_id"] and s.get("parent_span_id"):
            children.setdefault(s["parent_span_id"], []).append(s)
    out, todo = [], [root["span_id"]]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child["span_id"])
    return out


def _names(span: Span, episode_id: str) -> bool:
    attrs = span.get("attributes", {})
    return attrs.get(genai.MEMORY_RECORD_ID) == episode_id or episode_id in (
        attrs.get(genai.RECORD_IDS) or []
    )


def _note_rpc(found: Journey, by_id: dict[tuple[str, str], Span], span: Span) -> None:
    """Which RPC a memory operation's span served: its SERVER parent's method (a recall
    and the listing an SDK's ``wait_for_episode`` polls are both ``search_memory``)."""
    parent = by_id.get((span["trace_id"], span.get("parent_span_id") or ""))
    if parent is not None and parent.get("kind") == "SERVER":
        found.via[span["span_id"]] = str(parent["name"]).rsplit("/", 1)[-1]


def journey(spans: list[Span], episode_id: str) -> Journey:
    """What the spans say about ``episode_id``."""
    by_id = {(s["trace_id"], s["span_id"]): s for s in spans}
    found = Journey(episode_id)
    ordered = sorted(spans, key=lambda s: s["start_time_unix_nano"])
    for s in ordered:
        attrs = s.get("attributes", {})
        if s["name"] == _SUMMARISE and attrs.get("episodic.episode_id") == episode_id:
            below = _descendants(spans, s)
            attempt = Attempt(s, str(attrs.get("episodic.status", "?")), _ms(s))
            attempt.model_calls = [
                c
                for c in below
                if c["attributes"].get(genai.OPERATION_NAME) in (genai.CHAT, genai.EMBEDDINGS)
            ]
            attempt.failures = [
                c for c in attempt.model_calls if genai.ERROR_TYPE in c["attributes"]
            ]
            attempt.created = next((c for c in below if c["name"] == genai.CREATE_MEMORY), None)
            found.attempts.append(attempt)
            for link in s.get("links", []):
                fired = by_id.get((link["trace_id"], link["span_id"]))
                if fired is not None and fired not in found.fired:
                    found.fired.append(fired)
        elif s["name"] == _EXTRACTION and attrs.get("episodic.episode_id") == episode_id:
            found.extractions.append(s)
        elif attrs.get(genai.OPERATION_NAME) in _RECORDS and _names(s, episode_id):
            found.recalls.append(s)
            _note_rpc(found, by_id, s)
        elif attrs.get(genai.OPERATION_NAME) in (
            genai.UPDATE_MEMORY,
            genai.DELETE_MEMORY,
        ) and _names(s, episode_id):
            found.changes.append(s)
            _note_rpc(found, by_id, s)
    # An SDK's CLIENT span (search_memory, delete_memory) and the service's own span of the
    # same call name the episode twice: keep the service's, the client's only without it.
    for part in (found.recalls, found.changes):
        served = {x["trace_id"] for x in part if x.get("kind") != "CLIENT"}
        part[:] = [x for x in part if x.get("kind") != "CLIENT" or x["trace_id"] not in served]
    for fired in found.fired:
        # The trigger's own trace: the request that asked for the episode (EndThread), or
        # the timer sweep whose links name the writes that armed the timers.
        root = _root(by_id, fired)
        for span in (fired, root):
            for link in span.get("links", []):
                armed = by_id.get((link["trace_id"], link["span_id"]))
                if armed is not None:
                    armed = _root(by_id, armed)
                    if armed not in found.armed_by:
                        found.armed_by.append(armed)
        if root is not fired and root not in found.armed_by:
            found.armed_by.append(root)
    return found


def started_at(span: Span) -> str:
    """When ``span`` started, UTC, to the millisecond."""
    from datetime import UTC, datetime

    at = datetime.fromtimestamp(span["start_time_unix_nano"] / 1e9, tz=UTC)
    return at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def duration_ms(span: Span) -> float:
    """How long ``span`` took, in milliseconds."""
    return _ms(span)


def where(span: Span) -> str:
    """``service, trace 0136a4e9``: which process recorded ``span``, and in which trace."""
    return f"{span.get('service') or '?'}, trace {span['trace_id'][:8]}"


def model_call(span: Span) -> str:
    """A model call of an attempt: ``embeddings hashing:384  0.6 ms  12 input tokens  error 429``."""
    attrs = span["attributes"]
    error = attrs.get(genai.ERROR_TYPE)
    tokens = attrs.get(genai.USAGE_INPUT_TOKENS)
    return (
        f"{span['name']}  {_ms(span):.1f} ms"
        + (f"  {tokens} input tokens" if tokens is not None else "")
        + (f"  error {error}" if error else "")
    )


def via(found: Journey, span: Span) -> str:
    """`` via Recall``: the RPC a recall or change served, when the spans tell."""
    rpc = found.via.get(span["span_id"])
    return f" via {rpc}" if rpc else ""


def rank(span: Span, episode_id: str) -> str:
    """Where a search put the episode: ``rank 1 of 3 (top_k 3)``."""
    attrs = span["attributes"]
    ids = attrs.get(genai.RECORD_IDS) or [attrs.get(genai.MEMORY_RECORD_ID)]
    at = ids.index(episode_id) + 1 if episode_id in ids else "?"
    top_k = f" (top_k {attrs[genai.RETRIEVAL_TOP_K]})" if genai.RETRIEVAL_TOP_K in attrs else ""
    return f"rank {at} of {attrs.get(genai.MEMORY_RECORD_COUNT, len(ids))}{top_k}"


def _line(span: Span) -> str:
    return f"{started_at(span)}  {span['name']} ({where(span)})"


def render(found: Journey) -> str:
    """The journey as text, oldest first within each part."""
    out = [f"episode {found.episode_id}"]
    if found.empty:
        out.append("  no span names this episode (is tracing on, and is this the span file?)")
        return "\n".join(out)
    out.append("armed by:")
    out += [f"  {_line(s)}" for s in found.armed_by] or ["  (not in these spans)"]
    out.append("fired:")
    out += [f"  {_line(s)}" for s in found.fired] or ["  (not in these spans)"]
    if found.triggers:
        out.append(f"  trigger: {', '.join(found.triggers)}")
    out.append("summarise attempts:")
    for i, a in enumerate(found.attempts, 1):
        error = f" (error {a.error})" if a.error else ""
        out.append(f"  {i}. {_line(a.span)}  {a.duration_ms:.1f} ms  -> {a.status}{error}")
        out += [f"       {model_call(call)}" for call in a.model_calls]
        if a.created is not None:
            out.append(
                f"       {genai.CREATE_MEMORY} in {a.created['attributes'].get(genai.MEMORY_STORE_ID)}"
            )
    if found.extractions:
        out.append("extraction:")
        out += [f"  {_line(s)}  {_ms(s):.1f} ms" for s in found.extractions]
    out.append("recalls that returned it:")
    out += [f"  {_line(s)}{via(found, s)}  {rank(s, found.episode_id)}" for s in found.recalls]
    if not found.recalls:
        out.append("  (none in these spans)")
    if found.changes:
        out.append("changed:")
        out += [f"  {_line(s)}{via(found, s)}" for s in found.changes]
    return "\n".join(out)
