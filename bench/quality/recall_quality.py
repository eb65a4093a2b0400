"""Session-level retrieval quality on LoCoMo: episodes through the real services versus raw
text baselines, computed in the same run.

    .venv/bin/python -m bench.quality.recall_quality [--limit-conversations N] [--output out.json]

What it does:

1. Starts PostgreSQL (embedded, in a temporary directory, unless ``--database-url`` names
   an admin URL of a server to create a scratch database on) and the four services as
   processes with the offline defaults (MiniLM embedder, extractive summariser).
2. Ingests every LoCoMo session as one thread of its conversation's dataset, through the
   SDK, with the original timestamps (``created_at``) and the speaker's name in each
   message's metadata, then ends the thread: the Scheduler opens an episode and the
   Summariser completes it (summary, key learnings, entities, embedding) — the pipeline as
   deployed. If the Summariser does not index episodes for recall yet, the benchmark
   indexes them with ``index_episode`` and says so.
3. Asks every question (categories 1–4 with evidence) through ``Recall`` with
   ``as_of`` = the question's time and ``context_episodes`` = 10, and scores the sessions
   returned: recall_any@1/3/5/10 and MRR, overall and per category.
4. Computes the baselines on the same sessions and questions in this process: BM25 over
   the raw session text (as in research/retrieval-baselines.md, and with PostgreSQL's
   english stemming), the same embedder over raw-text chunks (max over chunks), their
   reciprocal-rank fusion, and the episodes' summary embedding alone (without and with
   the seed's recency term).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import grpc
import numpy as np
import psycopg

from bench.harness import REPO, locomo
from bench.harness.report import log
from bench.harness.suite import _recall, ingest_and_summarise, rrf, start_suite

# NLTK's English stop words (the list the research baseline removed).
_STOPWORD_TEXT = """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
    she her hers herself it its itself they them their theirs themselves what which who whom
    this that these those am is are was were be been being have has had having do does did
    doing a an the and but if or because as until while of at by for with about against
    between into through during before after above below to from up down in out on off over
    under again further then once here there when where why how all any both each few more
    most other some such no nor not only own same so than too very s t can will just don
    should now d ll m o re ve y ain aren couldn didn doesn hadn hasn haven isn ma mightn
    mustn needn shan shouldn wasn weren won wouldn
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_TOKEN = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    """Research baseline tokenizer: lowercase alphanumerics, stop words out, no stemming."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


def bm25_scores(docs: list[Counter[str]], query: list[str], k1: float, b: float) -> np.ndarray:
    """Okapi BM25 with idf = ln(1 + (N - df + 0.5) / (df + 0.5))."""
    n = len(docs)
    lengths = np.array([sum(d.values()) for d in docs], dtype=float)
    avg = max(lengths.mean(), 1.0)
    scores = np.zeros(n)
    for term in set(query):
        df = sum(1 for d in docs if term in d)
        if not df:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        tf = np.array([d.get(term, 0) for d in docs], dtype=float)
        scores += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths / avg))
    return scores


def ranking(ids: list[str], scores: np.ndarray) -> list[str]:
    order = sorted(range(len(ids)), key=lambda i: (-scores[i], i))
    return [ids[i] for i in order]


def raw_chunks(session: locomo.Session, words: int = 180) -> list[str]:
    """Consecutive messages packed into chunks within the embedder's 256-token window."""
    chunks: list[str] = []
    current: list[str] = []
    count = 0
    for m in session.messages:
        w = len(m.text.split())
        if current and count + w > words:
            chunks.append("\n".join(current))
            current, count = [], 0
        current.append(m.text)
        count += w
    if current:
        chunks.append("\n".join(current))
    return chunks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--database-url", help="admin URL of a PostgreSQL with pgvector")
    parser.add_argument("--output", help="also write the scores as JSON here")
    parser.add_argument(
        "--embedding-provider", default="minilm", help="EPISODIC_EMBEDDING_PROVIDER"
    )
    parser.add_argument(
        "--encryption",
        choices=("on", "off"),
        default="on",
        help="encryption at rest of the datasets (on, as `episodic up` runs)",
    )
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO))
    from bench.quality.temporal_questions import build_temporal_questions
    from episodic.config import EmbeddingSettings
    from episodic.providers import make_embedder
    from episodic.store.db import make_engine
    from episodic.store.recall_index import index_missing
    from episodic.testing.database import scratch_database
    from episodic.testing.keys import test_vault
    from episodic.v1.recall_service_pb2_grpc import RecallServiceStub

    conversations = locomo.load(limit=args.limit_conversations)
    n_questions = sum(len(c.questions) for c in conversations)
    log(
        f"{len(conversations)} conversations, "
        f"{sum(len(c.sessions) for c in conversations)} sessions, {n_questions} questions"
    )

    with ExitStack() as stack:
        # -- database
        url = stack.enter_context(scratch_database(args.database_url, "episodic-bench-"))
        engine = make_engine(url, pool_size=2)
        stack.callback(engine.dispose)

        # -- services, as deployed but driven explicitly (no polling loops)
        env = {
            "EPISODIC_EMBEDDING_PROVIDER": args.embedding_provider,
            "EPISODIC_LOG_LEVEL": "WARNING",
            "EPISODIC_ENCRYPTION": "auto" if args.encryption == "on" else "off",
        }
        procs, client = start_suite(stack, url, env, start_timeout=180, call_timeout=120)

        ingest_and_summarise(client, engine, conversations)

        embedder = make_embedder(
            EmbeddingSettings(embedding_provider=args.embedding_provider, embedding_threads=2),
            384,
        )
        # What the summariser's completion hook runs, for episodes it did not index.
        vault = test_vault()  # the keyring the services were started with
        indexed_by_bench = index_missing(engine, embedder, vault)
        if indexed_by_bench:
            log(f"the summariser did not index {indexed_by_bench} episodes; indexed here")

        # -- the system under test: Recall through gRPC, reading time in the query and
        # literally (the same requests with literal_query), interleaved
        channel = grpc.insecure_channel(procs["recall"].address)
        stack.callback(channel.close)
        stub = RecallServiceStub(channel)
        rows: dict[str, locomo.Scores] = {}
        ours = locomo.Scores()
        ours_literal = locomo.Scores()
        ours_sim = locomo.Scores()
        latency: dict[bool, list[float]] = {True: [], False: []}
        started = time.monotonic()
        for conv in conversations:
            for q in conv.questions:
                for scores, literal, extra in (
                    (ours, False, {}),
                    (ours_literal, True, {}),
                    (ours_sim, False, {"recency_weight": 0.0}),
                ):
                    ranking_, ms = _recall(
                        stub, conv.dataset, q.question, q.asked_at, literal, **extra
                    )
                    if not extra:
                        latency[literal].append(ms)
                    scores.add(q.category, ranking_, q.evidence_threads)
        recall_seconds = time.monotonic() - started
        log(f"{3 * n_questions} recalls in {recall_seconds:.1f}s")

        # -- abstention at the recommended min_relevance (episodic/store/relevance.py):
        # each question also asked of the next conversation's dataset (nothing there should
        # match), LoCoMo's adversarial questions of their own, and the real questions again
        # with the threshold (what it costs them). Halves as in bench/quality/recall_lab.py.
        from episodic.store.relevance import RECOMMENDED_MIN_RELEVANCE as threshold

        split = locomo.halves(conversations)
        adversarial = locomo.adversarial_questions()
        thresholded = {h: locomo.Scores() for h in split}
        unthresholded = {h: locomo.Scores() for h in split}
        empty: dict[tuple[str, str], list[bool]] = {}
        for i, conv in enumerate(conversations):
            half = next(h for h, ids in split.items() if conv.conversation_id in ids)
            foreign = conversations[(i + 1) % len(conversations)]
            for q in conv.questions:
                kept, _ = _recall(
                    stub, conv.dataset, q.question, q.asked_at, False, min_relevance=threshold
                )
                thresholded[half].add(q.category, kept, q.evidence_threads)
                full, _ = _recall(stub, conv.dataset, q.question, q.asked_at, False)
                unthresholded[half].add(q.category, full, q.evidence_threads)
                got, _ = _recall(
                    stub, foreign.dataset, q.question, q.asked_at, False, min_relevance=threshold
                )
                empty.setdefault((half, "foreign"), []).append(not got)
            for q in adversarial.get(conv.conversation_id, []) if len(conversations) > 1 else []:
                got, _ = _recall(
                    stub, conv.dataset, q.question, q.asked_at, False, min_relevance=threshold
                )
                empty.setdefault((half, "adversarial"), []).append(not got)

        # -- temporal questions built from the sessions' dates (bench/quality/temporal_questions.py)
        temporal = {True: locomo.Scores(), False: locomo.Scores()}
        questions_t = build_temporal_questions(conversations, seed=0)
        by_id = {c.conversation_id: c for c in conversations}
        for tq in questions_t:
            for literal in (False, True):
                ranking_, ms = _recall(
                    stub, by_id[tq.conversation_id].dataset, tq.question, tq.asked_at, literal
                )
                latency[literal].append(ms)
                temporal[literal].add(tq.kind, ranking_, tq.evidence_threads)
        log(f"{2 * len(questions_t)} temporal recalls")

        # -- baselines over the raw sessions, and the summary embedding alone
        base = {
            k: locomo.Scores()
            for k in ("bm25", "bm25_pg", "chunks", "rrf", "summary", "summary_rec")
        }
        with engine.connect() as conn:
            labelled = conn.exec_driver_sql(
                "SELECT t.dataset, t.label, e.embedding::text AS vec FROM episodes e "
                "JOIN threads t USING (thread_id) WHERE e.status = 'completed'"
            ).mappings()
            summaries = {
                r["label"]: np.array(json.loads(r["vec"]), dtype=np.float32)
                for r in (vault.open_one(conn, row, "threads") for row in labelled.all())
            }
            encrypted = conn.exec_driver_sql(
                "SELECT count(*) FILTER (WHERE key_id IS NOT NULL), count(*) FROM datasets"
            ).one()
        log(f"datasets encrypted at rest: {encrypted[0]} of {encrypted[1]}")
        with psycopg.connect(url) as pgc:

            def lexemes(text: str) -> Counter[str]:
                return Counter(
                    {
                        lex: n or 1
                        for lex, n in pgc.execute(
                            "SELECT lexeme, array_length(positions, 1) "
                            "FROM unnest(to_tsvector('english', %s))",
                            (text,),
                        )
                    }
                )

            for conv in conversations:
                ids = [s.thread_id for s in conv.sessions]
                raw = [Counter(tokens(s.text)) for s in conv.sessions]
                stemmed = [lexemes(s.text) for s in conv.sessions]
                chunk_vectors = [embedder.embed(raw_chunks(s)) for s in conv.sessions]
                questions = list(conv.questions)
                qvecs = embedder.embed([q.question for q in questions])
                for q, qv in zip(questions, qvecs, strict=True):
                    r_bm25 = ranking(ids, bm25_scores(raw, tokens(q.question), 1.5, 0.75))
                    r_pg = ranking(ids, bm25_scores(stemmed, list(lexemes(q.question)), 1.2, 0.75))
                    r_chunks = ranking(
                        ids, np.array([float((v @ qv).max()) for v in chunk_vectors])
                    )
                    base["bm25"].add(q.category, r_bm25, q.evidence_threads)
                    base["bm25_pg"].add(q.category, r_pg, q.evidence_threads)
                    base["chunks"].add(q.category, r_chunks, q.evidence_threads)
                    base["rrf"].add(q.category, rrf(r_bm25, r_chunks), q.evidence_threads)
                    cos = np.array(
                        [float(summaries[i] @ qv) if i in summaries else -1.0 for i in ids]
                    )
                    days = np.array(
                        [
                            max(0.0, (q.asked_at - s.messages[-1].ts).total_seconds() / 86400)
                            for s in conv.sessions
                        ]
                    )
                    base["summary"].add(q.category, ranking(ids, cos), q.evidence_threads)
                    base["summary_rec"].add(
                        q.category,
                        ranking(ids, 0.7 * np.clip(cos, 0, 1) + 0.3 / (1 + days)),
                        q.evidence_threads,
                    )

        rows = {
            "BM25 over raw session text (k1=1.5, b=0.75, no stemming)": base["bm25"],
            "BM25 over raw session text (PostgreSQL english stemming)": base["bm25_pg"],
            "same embedder over raw-text chunks (max over chunks)": base["chunks"],
            "reciprocal-rank fusion of the two (k=60)": base["rrf"],
            "summary embedding alone": base["summary"],
            "summary × 0.7 + 1/(1+days) × 0.3": base["summary_rec"],
            "**episodes via Recall (default 0.7/0.3, as_of)**": ours,
            "episodes via Recall, query read literally (literal_query)": ours_literal,
            "episodes via Recall, recency weight 0 (diagnostic)": ours_sim,
        }
        print(locomo.table(rows))
        print("\nTemporal questions (bench/quality/temporal_questions.py, seed 0), R@k per kind:\n")
        print(
            locomo.table(
                {
                    "Recall, time understood (default)": temporal[False],
                    "Recall, query read literally": temporal[True],
                }
            )
        )
        for literal in (False, True):
            values = sorted(latency[literal])
            print(
                f"Recall latency, {'literal' if literal else 'time understood'}: p50 "
                f"{values[len(values) // 2]:.2f} ms, p99 {values[int(len(values) * 0.99)]:.2f} ms "
                f"({len(values)} calls, interleaved)"
            )
        print(f"\nAbstention at min_relevance {threshold}:\n")
        print(
            "| half | foreign questions with nothing | adversarial with nothing "
            "| R@1 without → with | R@5 without → with | MRR without → with |"
        )
        print("|---|---|---|---|---|---|")
        for half in split:
            f, a = empty.get((half, "foreign"), []), empty.get((half, "adversarial"), [])
            b, t = unthresholded[half].overall(), thresholded[half].overall()
            print(
                f"| {half} | {sum(f) / max(len(f), 1):.3f} ({len(f)}) | "
                f"{sum(a) / max(len(a), 1):.3f} ({len(a)}) | {b['R@1']:.3f} → {t['R@1']:.3f} | "
                f"{b['R@5']:.3f} → {t['R@5']:.3f} | "
                f"{b['MRR']:.3f} → {t['MRR']:.3f} |"
            )
        rows["temporal: time understood"] = temporal[False]
        rows["temporal: literal"] = temporal[True]
        print(
            f"\n{len(conversations)} conversations, {n_questions} questions; embedder "
            f"{embedder.name}; mean Recall latency over gRPC "
            f"{1000 * recall_seconds / (2 * n_questions):.1f} "
            f"ms; episodes indexed by the benchmark: {indexed_by_bench}; load average "
            f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
        if args.output:
            Path(args.output).write_text(
                json.dumps(
                    {
                        name: {"overall": s.overall(), "by_category": s.by_category()}
                        for name, s in rows.items()
                    },
                    indent=2,
                )
            )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OTEL_TRACES_EXPORTER", "none")
    sys.exit(main())
