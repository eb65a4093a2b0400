"""What the parts of ``bench.scale.recall_scale`` share: the heavy datasets' names, the
vectors' dimension and topics, the text dataset's window of turns, the ranked ids of a
ranking statement's cursor (``_episode_ids``), recall@N (``recall_at``) and ``log``.
``bench.scale.heavy_path`` reads the last two through ``bench.scale.recall_scale``."""

from __future__ import annotations

import sys
from typing import Any

HEAVY = "heavy-0000"
CLUSTERED = "heavy-clustered"
DIM = 384
# Clustered vectors: CENTROIDS topics; each vector is its topic's unit centroid plus uniform
# noise of per-dimension width NOISE_SCALE (norm ~ NOISE_SCALE * sqrt(DIM / 12) ~ 1), so a
# text's cosine to its topic is ~0.7 and to another text of the topic ~0.5, about what
# MiniLM gives sentences on one subject.
CENTROIDS = 500
NOISE_SCALE = 0.18
TEXT = "heavy-text"
#: --text-dataset: each episode is this many consecutive LoCoMo turns (inclusive range). The
#: corpus holds ~28k distinct windows of 3–8 turns (~20k of 3–6), so 25k episodes need no
#: repeated text.
TEXT_TURNS = (3, 8)


def _episode_ids(cursor: Any) -> list[object]:
    """The ranked episodes' ids of a ranking statement's executed cursor, found by the
    column's name: the count row's columns come first and grow (``abstain_applied`` joined
    them), and an older checkout's statement (``--before``) has fewer."""
    at = [c.name for c in cursor.description].index("episode_id")
    return [r[at] for r in cursor.fetchall() if r[at] is not None]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def recall_at(approximate: list[object], exact: list[object], n: int) -> float:
    """The share of the exact top ``n`` that the approximate top ``n`` holds."""
    want = exact[:n]
    return len(set(approximate[:n]) & set(want)) / len(want) if want else 1.0
