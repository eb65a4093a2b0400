"""Validate bench/data/multilingual.jsonl (stdlib only).

Usage: python3 bench/data/check_multilingual.py [path]

Checks the schema, unique ids, that every evidence thread exists in the same dataset,
that questions are asked after every message of their dataset, that roles alternate
(user first), that timestamps are ISO 8601 UTC with Z and in order, and the counts per
language. It prints a summary and exits non-zero if anything is wrong. Questions that
copy a long run of words from their gold session are reported as warnings only.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

DEFAULT_PATH = Path(__file__).resolve().parent / "multilingual.jsonl"
LANGUAGES = ("fr", "es", "de")
USERS_PER_LANGUAGE = 10
THREADS_PER_USER = (4, 6)
MESSAGES_PER_THREAD = (6, 12)
QUESTIONS_PER_USER = 4
MAX_EVIDENCE = 2
COPY_NGRAM = 6  # a question sharing this many consecutive words with its gold session is flagged

TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
DATASET_RE = re.compile(r"^ml-(fr|es|de)-(\d{2})$")
TOP_KEYS = {"dataset", "language", "threads", "questions"}
THREAD_KEYS = {"thread_id", "started_at", "messages"}
MESSAGE_KEYS = {"role", "content", "ts", "name"}
QUESTION_KEYS = {"qid", "question", "asked_at", "evidence_threads"}
WORD_RE = re.compile(r"\w+", re.UNICODE)


def parse_ts(value: object, where: str, errors: list[str]) -> datetime | None:
    if not isinstance(value, str) or not TS_RE.match(value):
        errors.append(f"{where}: timestamp {value!r} is not ISO 8601 UTC like 2026-03-02T09:15:00Z")
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        errors.append(f"{where}: timestamp {value!r} is not a valid date")
        return None


def check_keys(obj: object, expected: set[str], where: str, errors: list[str]) -> bool:
    if not isinstance(obj, dict):
        errors.append(f"{where}: expected a JSON object")
        return False
    missing, extra = expected - obj.keys(), obj.keys() - expected
    if missing:
        errors.append(f"{where}: missing keys {sorted(missing)}")
    if extra:
        errors.append(f"{where}: unexpected keys {sorted(extra)}")
    return not missing


def ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    words = WORD_RE.findall(text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def check(path: Path) -> int:
    errors: list[str] = []
    warnings: list[str] = []
    datasets_seen: set[str] = set()
    qids_seen: set[str] = set()
    per_lang: dict[str, Counter] = defaultdict(Counter)

    lines = path.read_text(encoding="utf-8").splitlines()
    for lineno, line in enumerate(lines, 1):
        where = f"line {lineno}"
        if not line.strip():
            errors.append(f"{where}: blank line")
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(f"{where}: invalid JSON ({exc})")
            continue
        if not check_keys(row, TOP_KEYS, where, errors):
            continue

        ds, lang = row["dataset"], row["language"]
        where = f"{ds}"
        m = DATASET_RE.match(ds) if isinstance(ds, str) else None
        if not m:
            errors.append(f"line {lineno}: dataset {ds!r} does not look like ml-fr-01")
            continue
        if lang not in LANGUAGES:
            errors.append(f"{where}: language {lang!r} not in {LANGUAGES}")
        elif m.group(1) != lang:
            errors.append(f"{where}: language {lang!r} does not match the dataset id")
        if ds in datasets_seen:
            errors.append(f"{where}: duplicate dataset")
        datasets_seen.add(ds)
        per_lang[lang]["users"] += 1

        # threads
        threads = row["threads"]
        if not isinstance(threads, list):
            errors.append(f"{where}: threads is not a list")
            continue
        if not THREADS_PER_USER[0] <= len(threads) <= THREADS_PER_USER[1]:
            errors.append(
                f"{where}: {len(threads)} threads, expected {THREADS_PER_USER[0]}-{THREADS_PER_USER[1]}"
            )
        thread_ids: set[str] = set()
        thread_text: dict[str, str] = {}
        last_ts: datetime | None = None  # last message of the previous thread
        for ti, thread in enumerate(threads, 1):
            twhere = f"{where} thread {ti}"
            if not check_keys(thread, THREAD_KEYS, twhere, errors):
                continue
            tid = thread["thread_id"]
            if tid != f"{ds}/session_{ti}":
                errors.append(f"{twhere}: thread_id {tid!r}, expected {ds}/session_{ti!r}")
            if tid in thread_ids:
                errors.append(f"{twhere}: duplicate thread_id {tid!r}")
            thread_ids.add(tid)
            started = parse_ts(thread["started_at"], f"{twhere} started_at", errors)
            if started and last_ts and started <= last_ts:
                errors.append(
                    f"{twhere}: starts at {thread['started_at']}, before the previous thread ended"
                )
            msgs = thread["messages"]
            if not isinstance(msgs, list):
                errors.append(f"{twhere}: messages is not a list")
                continue
            if not MESSAGES_PER_THREAD[0] <= len(msgs) <= MESSAGES_PER_THREAD[1]:
                errors.append(
                    f"{twhere}: {len(msgs)} messages, expected {MESSAGES_PER_THREAD[0]}-{MESSAGES_PER_THREAD[1]}"
                )
            prev_ts = None
            user_names: set[str] = set()
            for mi, msg in enumerate(msgs):
                mwhere = f"{twhere} message {mi + 1}"
                if not check_keys(msg, MESSAGE_KEYS, mwhere, errors):
                    continue
                expected_role = "user" if mi % 2 == 0 else "assistant"
                if msg["role"] != expected_role:
                    errors.append(
                        f"{mwhere}: role {msg['role']!r}, expected {expected_role!r} (roles alternate, user first)"
                    )
                if not isinstance(msg["content"], str) or not msg["content"].strip():
                    errors.append(f"{mwhere}: empty content")
                if not isinstance(msg["name"], str) or not msg["name"].strip():
                    errors.append(f"{mwhere}: empty name")
                elif msg["role"] == "user":
                    user_names.add(msg["name"])
                ts = parse_ts(msg["ts"], f"{mwhere} ts", errors)
                if ts is None:
                    continue
                if mi == 0 and started and ts < started:
                    errors.append(f"{mwhere}: ts before the thread's started_at")
                if prev_ts and ts <= prev_ts:
                    errors.append(f"{mwhere}: ts {msg['ts']} not after the previous message")
                prev_ts = ts
            if len(user_names) > 1:
                errors.append(f"{twhere}: several user names {sorted(user_names)}")
            last_ts = prev_ts or last_ts
            thread_text[tid] = "\n".join(
                m.get("content", "")
                for m in msgs
                if isinstance(m, dict) and isinstance(m.get("content"), str)
            )
            per_lang[lang]["threads"] += 1
            per_lang[lang]["messages"] += len(msgs)

        # questions
        questions = row["questions"]
        if not isinstance(questions, list):
            errors.append(f"{where}: questions is not a list")
            continue
        if len(questions) != QUESTIONS_PER_USER:
            errors.append(f"{where}: {len(questions)} questions, expected {QUESTIONS_PER_USER}")
        for qi, q in enumerate(questions, 1):
            qwhere = f"{where} question {qi}"
            if not check_keys(q, QUESTION_KEYS, qwhere, errors):
                continue
            qid = q["qid"]
            if qid != f"{ds}/q{qi}":
                errors.append(f"{qwhere}: qid {qid!r}, expected {ds}/q{qi!r}")
            if qid in qids_seen:
                errors.append(f"{qwhere}: duplicate qid {qid!r}")
            qids_seen.add(qid)
            text = q["question"]
            if not isinstance(text, str) or not text.strip():
                errors.append(f"{qwhere}: empty question")
                text = ""
            elif not text.rstrip().endswith("?"):
                errors.append(f"{qwhere}: question does not end with '?'")
            elif lang == "es" and "¿" not in text:
                errors.append(f"{qwhere}: Spanish question without opening '¿'")
            asked = parse_ts(q["asked_at"], f"{qwhere} asked_at", errors)
            if asked and last_ts and asked <= last_ts:
                errors.append(
                    f"{qwhere}: asked_at {q['asked_at']} is not after every message of the dataset"
                )
            ev = q["evidence_threads"]
            if not isinstance(ev, list) or not 1 <= len(ev) <= MAX_EVIDENCE:
                errors.append(f"{qwhere}: evidence_threads must list 1-{MAX_EVIDENCE} threads")
                continue
            if len(set(ev)) != len(ev):
                errors.append(f"{qwhere}: duplicate evidence thread")
            for tid in ev:
                if tid not in thread_ids:
                    errors.append(f"{qwhere}: evidence thread {tid!r} is not a thread of {ds}")
                    continue
                shared = ngrams(text, COPY_NGRAM) & ngrams(thread_text.get(tid, ""), COPY_NGRAM)
                if shared:
                    warnings.append(
                        f"{qwhere}: copies {COPY_NGRAM} words from {tid}: {' '.join(sorted(shared)[0])!r}"
                    )
            per_lang[lang]["questions"] += 1
            per_lang[lang]["evidence"] += len(ev)
            per_lang[lang]["multi_evidence"] += len(ev) > 1

    for lang in LANGUAGES:
        if per_lang[lang]["users"] != USERS_PER_LANGUAGE:
            errors.append(f"{lang}: {per_lang[lang]['users']} users, expected {USERS_PER_LANGUAGE}")
    for lang in per_lang:
        if lang not in LANGUAGES:
            errors.append(f"unexpected language {lang!r}")

    print(f"{path}")
    print(
        f"{'lang':<5} {'users':>5} {'threads':>7} {'messages':>8} {'questions':>9} {'2-session qs':>12}"
    )
    total: Counter = Counter()
    for lang in LANGUAGES:
        c = per_lang[lang]
        total.update(c)
        print(
            f"{lang:<5} {c['users']:>5} {c['threads']:>7} {c['messages']:>8} {c['questions']:>9} {c['multi_evidence']:>12}"
        )
    print(
        f"{'all':<5} {total['users']:>5} {total['threads']:>7} {total['messages']:>8} {total['questions']:>9} "
        f"{total['multi_evidence']:>12}"
    )
    for w in warnings:
        print(f"warning: {w}")
    if errors:
        for e in errors:
            print(f"error: {e}")
        print(f"FAILED: {len(errors)} problem(s)")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(check(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_PATH))
