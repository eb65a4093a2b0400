"""LoCoMo's original ``locomo10.json`` read session by session (with the reference summaries),
for the Summariser's benchmarks; ``locomo.py`` reads the questions' form, ``locomo10.jsonl``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.harness import REPO
from bench.harness import REPO as REPO_ROOT
from episodic.providers import ChatMessage

LOCOMO = REPO.parent / "shared" / "bench" / "locomo10.json"


@dataclass(frozen=True)
class Turn:
    role: str
    speaker: str
    text: str
    at: datetime


def _when(value: str) -> datetime:
    # LoCoMo writes "1:56 pm on 8 May, 2023".
    return datetime.strptime(value.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def locomo_sessions(path: Path) -> list[list[Turn]]:
    """Every non-empty session, round-robin over the conversations (variety of speakers)."""
    per_conversation: list[list[list[Turn]]] = []
    for sample in json.loads(path.read_text()):
        conv = sample["conversation"]
        numbers = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))
        sessions = []
        for n in numbers:
            if not conv[f"session_{n}"]:
                continue
            start = _when(conv[f"session_{n}_date_time"])
            turns = []
            for i, turn in enumerate(conv[f"session_{n}"]):
                text = turn["text"]
                if turn.get("blip_caption"):
                    text += f" [shares image: {turn['blip_caption']}]"
                role = "user" if turn["speaker"] == conv["speaker_a"] else "assistant"
                turns.append(Turn(role, turn["speaker"], text, start + timedelta(seconds=30 * i)))
            sessions.append(turns)
        per_conversation.append(sessions)
    out = []
    for i in range(max(len(s) for s in per_conversation)):
        out += [sessions[i] for sessions in per_conversation if i < len(sessions)]
    return out


DEFAULT_PATH = REPO_ROOT.parent / "shared" / "bench" / "locomo10.json"


@dataclass(frozen=True)
class Session:
    """One LoCoMo session with its reference summary."""

    key: str  # "conv-26/session_3"
    conversation: str
    number: int
    messages: list[ChatMessage]  # sequences continue across a conversation's sessions
    reference: str


def load_sessions(path: Path) -> list[Session]:
    """Every session of every conversation, in order."""
    sessions: list[Session] = []
    for sample in json.loads(path.read_text()):
        conv = sample["conversation"]
        speaker_a = conv["speaker_a"]
        sequence = 0
        numbers = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))
        for n in numbers:
            turns = conv[f"session_{n}"]
            if not turns:
                continue
            start = _when(conv[f"session_{n}_date_time"])
            messages = []
            for i, turn in enumerate(turns):
                sequence += 1
                text = turn["text"]
                if turn.get("blip_caption"):
                    text += f" [shares image: {turn['blip_caption']}]"
                messages.append(
                    ChatMessage(
                        sequence,
                        "user" if turn["speaker"] == speaker_a else "assistant",
                        text,
                        start + timedelta(seconds=30 * i),
                        turn["speaker"],
                    )
                )
            sessions.append(
                Session(
                    key=f"{sample['sample_id']}/session_{n}",
                    conversation=sample["sample_id"],
                    number=n,
                    messages=messages,
                    reference=sample.get("session_summary", {}).get(f"session_{n}_summary", ""),
                )
            )
    return sessions
