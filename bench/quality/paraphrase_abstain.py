"""What ``abstain`` costs on questions asked in other words, beside what it gains on
questions nothing answers: the defaults of the MCP tool and the SDK are chosen from both.

    .venv/bin/python -m bench.quality.paraphrase_abstain [--embedder minilm]

``bench/data/paraphrased.jsonl``: 10 users, 3 sessions each, and a question per session that
shares no content word with it ("what did we decide about pricing?" of "We agreed on the Pro
tier at $29"; the bench checks this with PostgreSQL's english stemmer and stops if one
does). Each user's dataset also holds six sessions of two other users (distractors), so the
answer must be found among nine. Every question is asked of its own dataset (the answer is
there) and of the next user's (a foreign one: nothing there answers it, and it should get
nothing), under each threshold setting:

- off (the SDK's default),
- ``abstain`` (the model's min_relevance and min_match: the MCP tool's default until now),
- ``abstain`` with an explicit ``min_relevance=0`` (the request gate alone) and with an
  explicit ``min_match=0`` (the per-episode cut alone),
- ``min_relevance`` 0.4 (the README's recommendation alone).

It prints, per setting, R@1 and R@3 (the gold session first / within the MCP tool's default
three), the share of own-dataset questions answered with nothing, and the share of foreign
ones answered with nothing. Episodes are written directly (summary = the session's text, as
tests/recall/factory.py writes them) and ranked by Recall's own code (``domain.recall``) in
this process, as ``bench.quality.multilingual_quality --direct`` does.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness import DATA, locomo
from bench.harness.report import log
from bench.quality.multilingual_quality import load, thread_labels, write_sessions

DEFAULT_PATH = DATA / "paraphrased.jsonl"
#: The MCP tool's default number of episodes.
LIMIT = 3


def _shared_words(conn: Any, question: str, text: str) -> set[str]:
    """The english lexemes (stop words out, stemmed) ``question`` shares with ``text``."""
    from sqlalchemy import text as sql

    def lexemes(value: str) -> set[str]:
        return set(
            conn.execute(
                sql("SELECT tsvector_to_array(to_tsvector('english', :t))"), {"t": value}
            ).scalar()
        )

    return lexemes(question) & lexemes(text)


def run(embedder_name: str, users: list[locomo.Conversation]) -> dict[str, dict[str, Any]]:
    from episodic.config import EmbeddingSettings, RecallSettings
    from episodic.providers import make_embedder
    from episodic.services.recall import domain
    from episodic.store.db import make_engine
    from episodic.store.recall_queries import RecallFilters
    from episodic.testing.database import scratch_database
    from episodic.testing.keys import test_vault

    embedder = make_embedder(
        EmbeddingSettings(embedding_provider=embedder_name, embedding_threads=2), 384
    )
    vault = test_vault()
    settings = RecallSettings()
    ranking = domain.ranking_from(settings, embedder.name)
    abstention = domain.abstention(embedder.name)
    if abstention is None:
        raise SystemExit(f"{embedder.name} has no fitted curves: abstain keeps everything")
    n = len(users)
    settings_to_try: dict[str, dict[str, Any]] = {
        "off": {},
        "abstain": {"abstention": abstention},
        "abstain, min_relevance=0 (request gate only)": {
            "abstention": abstention,
            "min_relevance": 0.0,
        },
        "abstain, min_match=0 (per-episode cut only)": {
            "abstention": abstention,
            "min_match": 0.0,
        },
        "min_relevance 0.4 alone": {"min_relevance": 0.4},
    }
    out: dict[str, dict[str, Any]] = {}
    with scratch_database(None, "episodic-para-bench-") as url:
        engine = make_engine(url, pool_size=2)
        try:
            with engine.connect() as conn:
                leaks = [
                    (q.question, words)
                    for conv in users
                    for q in conv.questions
                    for s in conv.sessions
                    if s.thread_id in q.evidence_threads
                    and (
                        words := _shared_words(
                            conn, q.question, " ".join(m.text for m in s.messages)
                        )
                    )
                ]
            if leaks:
                raise SystemExit(f"questions share words with their answer: {leaks}")
            started = time.monotonic()
            for i, conv in enumerate(users):
                # Its own sessions, then six of two other users' (never the next user's:
                # that dataset is where its questions are foreign).
                sessions = [*conv.sessions]
                for other in (users[(i + 3) % n], users[(i + 6) % n]):
                    sessions.extend(other.sessions)
                write_sessions(engine, vault, embedder, conv.dataset, sessions)
            log(f"{embedder_name}: written and indexed in {time.monotonic() - started:.0f}s")
            with engine.connect() as conn:
                labels = thread_labels(conn, vault)

                matches: dict[str, list[float]] = {"own": [], "foreign": []}

                def ask(dataset: str, q: Any, thresholds: dict[str, Any], whose: str) -> list[str]:
                    request = domain.RecallQuery(
                        dataset=dataset,
                        query=q.question,
                        include_episodes=True,
                        limit=LIMIT,
                        similarity_weight=settings.similarity_weight,
                        recency_weight=settings.recency_weight,
                        filters=RecallFilters(as_of=q.asked_at),
                        understanding=domain.read_time(q.question, q.asked_at, False),
                        ranking=ranking,
                        **thresholds,
                    )
                    vector = embedder.embed_query(request.ranked_query or q.question)
                    answer = domain.recall(conn, vault, request, vector)
                    if not thresholds and answer.match is not None:
                        matches[whose].append(answer.match)
                    return [labels[r["thread_id"]] for r in answer.rows]

                for name, thresholds in settings_to_try.items():
                    scores = locomo.Scores(ks=(1, 3))
                    own_empty: list[bool] = []
                    foreign_empty: list[bool] = []
                    for i, conv in enumerate(users):
                        foreign = users[(i + 1) % n].dataset
                        for q in conv.questions:
                            found = ask(conv.dataset, q, thresholds, "own")
                            scores.add("paraphrased", found, q.evidence_threads)
                            own_empty.append(not found)
                            foreign_empty.append(not ask(foreign, q, thresholds, "foreign"))
                    out[name] = {
                        **scores.overall(),
                        "own empty": sum(own_empty) / len(own_empty),
                        "foreign empty": sum(foreign_empty) / len(foreign_empty),
                    }
        finally:
            engine.dispose()
    for whose, values in matches.items():
        values.sort()
        out[f"match, {whose}"] = {"values": values}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--embedder", default="minilm")
    args = parser.parse_args(argv)
    users = [conv for _, conv in load(args.data)]
    results = run(args.embedder, users)
    questions = sum(len(c.questions) for c in users)
    print(
        f"\n{args.embedder}: {questions} paraphrased questions, each of its own dataset "
        f"(9 sessions) and of a foreign one; limit {LIMIT}\n"
    )
    print("| setting | R@1 | R@3 | own questions empty | foreign questions empty |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        if "values" in r:
            continue
        print(
            f"| {name} | {r['R@1']:.3f} | {r['R@3']:.3f} | {100 * r['own empty']:.0f} % "
            f"| {100 * r['foreign empty']:.0f} % |"
        )
    # The request's match (what min_match compares), without thresholds: whether any
    # threshold could tell a paraphrased question from a foreign one.
    for whose in ("own", "foreign"):
        v = results[f"match, {whose}"]["values"]
        print(
            f"\nmatch of {whose}-dataset questions: min {v[0]:.4f}, median "
            f"{v[len(v) // 2]:.4f}, max {v[-1]:.4f}",
            end="",
        )
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
