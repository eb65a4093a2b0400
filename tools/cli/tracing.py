"""``episodic trace``: an episode's journey, from the spans the services wrote."""

from __future__ import annotations

import argparse
import os
import sys

from ._common import CommandGroups, guarded

GROUP = "observability"


def cmd_trace(args: argparse.Namespace) -> int:
    from episodic.ops import journey
    from episodic.semconv import TRACE_FILE_ENV  # not telemetry: no OpenTelemetry here

    path = args.spans or os.environ.get(TRACE_FILE_ENV)
    if not path:
        print(
            f"episodic trace: no spans: pass --spans FILE or set {TRACE_FILE_ENV}", file=sys.stderr
        )
        return 2
    try:
        spans = journey.read_spans(path)
    except OSError as err:
        print(f"episodic trace: cannot read {path}: {err.strerror}", file=sys.stderr)
        return 2
    found = journey.journey(spans, args.episode_id)
    print(journey.render(found))
    return 1 if found.empty else 0


def register(groups: CommandGroups) -> None:
    """Adds ``trace``."""
    trace = groups.add(
        GROUP, "trace", "an episode's journey: the write, the trigger, each attempt, its recalls"
    )
    trace.description = (
        "Follows an episode through the spans the services wrote: which write armed its "
        "timer, which trigger fired, each summarise attempt with its duration, outcome and "
        "failed model calls, the extraction, and every recall that returned it (rank, top_k). "
        "Reads the suite's span file (EPISODIC_TRACE_FILE, or --spans) or OTLP/JSON lines "
        "(a collector's file exporter). Exit 1 when no span names the episode."
    )
    trace.add_argument("episode_id")
    trace.add_argument("--spans", help="span file or OTLP/JSON file (default: EPISODIC_TRACE_FILE)")
    trace.set_defaults(func=guarded(cmd_trace))
