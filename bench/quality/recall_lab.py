"""A fast harness for Recall's ranking and relevance: LoCoMo summarised once, kept, and
every question scored in-process against the same database.

    .venv/bin/python -m bench.quality.recall_lab [--data-dir /tmp/episodic-recall-lab] [--fit]

1. The first run starts an embedded PostgreSQL in ``--data-dir`` (kept between runs), and
   — once — the four services with the offline defaults, which ingest and summarise LoCoMo
   exactly as ``bench.quality.recall_quality`` does (one ended thread per session).
2. Every run asks each question (categories 1–4) of its own conversation's dataset, and of a
   *foreign* dataset (conversation i's questions of conversation i+1's, in file order),
   plus the adversarial category of its own dataset, through the read path's own code
   (``episodic.services.recall.domain.recall``, the SQL the service runs) with every
   candidate returned, and caches the per-candidate signals in ``features.json``.
3. From the cache it scores ranking variants and the calibrated relevance, on the two
   fixed halves of the conversations: **development** = positions 0, 2, 4, 6, 8 of
   locomo10.jsonl (conv-26, conv-41, conv-43, conv-47, conv-49), **held out** = the other
   five. ``--fit`` fits the relevance curve on the development half only and prints the
   constants to write into ``episodic/store/relevance.py``; every run also fits the match
   curve (``fit_match``, the gate ``min_match`` applies) and prints the abstention of
   pairs of thresholds, with the service's named-time exception applied (so they equal
   the service's). ``--confirm`` measures through a running Recall (``--confirm-at T``:
   that ``min_relevance``; ``--confirm-abstain``: ``abstain``, the service's own pair).
4. ``--fit-ranker`` fits the learned fusion (``recall_queries.LEARNED_WEIGHTS``) and
   chooses its temperature and ``recency_span`` on the development half, from the
   features of the first version's ranking (``--options off``: the seed's recency, from
   which each candidate's age is recovered), and prints every ranking variant on both
   halves.

The figures of the running suite come from ``bench.quality.recall_quality``; this harness is for
comparing variants quickly (and honestly: everything is reported on both halves).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.harness import locomo
from bench.harness.lab_store import _database, _keep_keyring, confirm
from bench.harness.report import log
from bench.quality.lab.build import build_database, reindex
from bench.quality.lab.features import recall_features
from bench.quality.lab.late_interaction import (
    NEAREST_CHUNKS,
    PROJECTIONS,
    late_interaction_features,
)
from bench.quality.lab.ranking import (
    VARIANTS,
    choose_extras,
    choose_ranker,
    choose_rerank,
    learned_variants,
    named_time_windows,
    rank_default,
    ranking_variants,
    score_options,
    score_variants,
)
from bench.quality.lab.relevance import (
    abstention,
    choose_abstention,
    curve_inputs,
    fit,
    fit_match,
    with_best,
)
from bench.quality.lab.rerank import (
    choose_local_rerank,
    choose_mix,
    choose_second_look,
    local_rerank_features,
)
from bench.quality.lab.timing import latency, rerank_latency


def _reader_features(path: Path, base: Path, refresh: bool, compute: Any, label: str) -> list[dict]:
    """A second reader's features over the default run's candidates (``base``, the
    ``--options default`` cache), computed on the lab database once and kept at ``path``
    (again with ``refresh``); prints the load average before they are scored."""
    if refresh or not path.exists():
        if not base.exists():
            sys.exit(f"{base} is missing: run --options default first")
        with ExitStack() as stack:
            url = _database(data_dir=path.parent, stack=stack)
            started = time.monotonic()
            got = compute(url, json.loads(base.read_text()))
            log(f"{label} over {len(got)} questions in {time.monotonic() - started:.1f}s")
        path.write_text(json.dumps(got))
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return json.loads(path.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default="/tmp/episodic-recall-lab")
    parser.add_argument("--fit", action="store_true", help="fit the relevance curve (dev half)")
    parser.add_argument("--refresh", action="store_true", help="recompute the features")
    parser.add_argument(
        "--confirm", action="store_true", help="measure the recommended threshold over gRPC"
    )
    parser.add_argument(
        "--confirm-at",
        type=float,
        default=None,
        help="with --confirm: this min_relevance instead of the recommended one",
    )
    parser.add_argument(
        "--confirm-abstain",
        action="store_true",
        help="with --confirm: ask with abstain (the service's thresholds for its model)",
    )
    parser.add_argument(
        "--options",
        default="",
        help="comma-separated ranking switches to score, each alone (features recomputed "
        f"once per switch into features-NAME.json): {', '.join(ranking_variants())}",
    )
    parser.add_argument(
        "--reindex",
        action="store_true",
        help="rebuild the recall index of --data-dir (a copy!) with --chunk-messages / "
        "--head-entities first",
    )
    parser.add_argument(
        "--chunk-messages", type=int, default=0, help="messages per chunk (recall_index)"
    )
    parser.add_argument(
        "--head-entities", action="store_true", help="entities in the document's head"
    )
    parser.add_argument(
        "--no-chunk-overlap",
        action="store_true",
        help="chunks that do not overlap (recall_index.CHUNK_OVERLAP off)",
    )
    parser.add_argument(
        "--pooled-summary-vector",
        action="store_true",
        help="each episode's vector the mean of its quoted sentences' vectors "
        "(extractive.POOL_SUMMARY_VECTOR)",
    )
    parser.add_argument(
        "--resummarise",
        choices=["model", "lexical"],
        default="",
        help="with --reindex: every episode summarised again first, its sentences compared "
        "by the model or by TF-IDF (EPISODIC_SUMMARY_SENTENCE_VECTORS), with this "
        "environment's embedder",
    )
    parser.add_argument(
        "--late-chunks",
        default="",
        metavar="WINDOW[/OVERLAP]",
        help="with --reindex: every chunk's vector by late chunking (EPISODIC_CHUNK_VECTORS="
        "late), the model reading each episode's new messages in windows of WINDOW word "
        "pieces overlapping by OVERLAP (MiniLMEmbedder's default 32), e.g. 256 or 128/16",
    )
    parser.add_argument(
        "--late-summary-vector",
        action="store_true",
        help="with --reindex: each episode's vector pooled from a late read of its window "
        "(the sentences its summary and key learnings quote)",
    )
    parser.add_argument(
        "--reembed",
        action="store_true",
        help="re-embed every chunk and episode vector with this environment's embedder "
        "(e.g. EPISODIC_EMBEDDING_COMPUTE=float or int8)",
    )
    parser.add_argument(
        "--embed-entities",
        action="store_true",
        help="entities in the text of the episode's embedding (summariser pipeline)",
    )
    parser.add_argument(
        "--fit-ranker",
        action="store_true",
        help="fit the learned fusion's weights (recall_queries.LEARNED_WEIGHTS), its "
        "temperature and recency_span on the dev half, from features-off.json",
    )
    parser.add_argument(
        "--fit-extras",
        default="",
        help="NAME: fit the learned fusion with each optional signal of the features in "
        "features-NAME.json (a run of --options NAME with the seed's recency, e.g. "
        "off+signals) alone and together, on the dev half; print both halves",
    )
    parser.add_argument(
        "--speaker-words",
        action="store_true",
        help="with --reindex: the documents also hold their speakers' words "
        "(recall_index.SPEAKER_WORDS), which RankingOptions.speaker reads",
    )
    parser.add_argument(
        "--fit-rerank",
        default="",
        help="NAME: fit the second look at the top candidates (RankingOptions.rerank_top) "
        "with the proximity and speaker signals of features-NAME.json (a run of --options "
        "default+signals) on the dev half; print both halves",
    )
    parser.add_argument(
        "--latency",
        default="",
        help="comma-separated switches to time in-process, interleaved (the first is the "
        "baseline of the ratios), e.g. off,default",
    )
    parser.add_argument(
        "--bm25",
        default="",
        help="K1,B: score --options / --fit-ranker with these BM25 constants instead of "
        "recall_queries' (the features go to features-NAME-bm25-K1-B.json)",
    )
    parser.add_argument(
        "--expansion",
        default="",
        help="WEIGHT,TERMS: score --options with these RM3 constants instead of "
        "recall_queries.EXPANSION_WEIGHT / EXPANSION_TERMS (features-NAME-rm3-W-T.json)",
    )
    parser.add_argument(
        "--bm25-passage",
        default="",
        help="K1,B: BM25 constants for passages only (recall_queries.PASSAGE_BM25; "
        "features-NAME-pbm25-K1-B.json)",
    )
    parser.add_argument(
        "--local-rerank",
        action="store_true",
        help="score Recall's top 10 with the packaged local reranker (bench/quality/packaged_reranker.py; pip install nanoranker==1.2 first) "
        "read four ways (features-xenc.json, from features-default.json) and print every "
        "input, depth and mix on both halves, the mix chosen on the dev half",
    )
    parser.add_argument(
        "--late-interaction",
        action="store_true",
        help="score Recall's top 10 by the question's words' best in-context cosines with "
        "each session's words (features-li.json, from features-default.json)",
    )
    parser.add_argument(
        "--stored-word-forms",
        action="store_true",
        help="only the forms stored word vectors could take, as second-look signals, without "
        "the query-time chunk reading (features-li-forms.json)",
    )
    parser.add_argument(
        "--rerank-latency",
        action="store_true",
        help="time in the same run: in-process Recall top 10, the packaged reranker over its "
        "top 5, and the late interaction's word vectors for its top 10 (every 5th question)",
    )
    parser.add_argument(
        "--latency-every", type=int, default=5, help="--rerank-latency: every N-th question"
    )
    parser.add_argument(
        "--latency-without-sessions",
        action="store_true",
        help="--rerank-latency: skip the whole sessions' word vectors (seconds per question)",
    )
    args = parser.parse_args(argv)
    if args.speaker_words:
        from episodic.store import lexical_document

        lexical_document.SPEAKER_WORDS = True  # read there (recall_index re-exports it)
    suffix = ""
    # The constants are patched in the modules whose statement builders read them.
    if args.bm25_passage:
        from episodic.store import lexical_statistics

        pk1, pb = (float(v) for v in args.bm25_passage.split(","))
        lexical_statistics.PASSAGE_BM25 = (pk1, pb)
        suffix += f"-pbm25-{pk1:g}-{pb:g}"
    if args.expansion:
        from episodic.store import query_terms

        w, terms = args.expansion.split(",")
        query_terms.EXPANSION_WEIGHT, query_terms.EXPANSION_TERMS = float(w), int(terms)
        suffix += f"-rm3-{float(w):g}-{int(terms)}"
    if args.bm25:  # before any statement is built (they are cached with the constants)
        from episodic.store import lexical_statistics, ranking_options

        k1, b = (float(v) for v in args.bm25.split(","))
        # the episodes' BM25 (lexical_statistics.bm25), and the events' (store/events.py,
        # imported later, takes them from ranking_options)
        for module in (lexical_statistics, ranking_options):
            module.BM25_K1, module.BM25_B = k1, b
        suffix += f"-bm25-{k1:g}-{b:g}"
    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    _keep_keyring(data_dir)
    conversations = locomo.load()
    split = locomo.halves(conversations)
    cache = data_dir / "features.json"
    if args.reindex:
        with ExitStack() as stack:
            url = _database(data_dir, stack)
            started = time.monotonic()
            done = reindex(
                url,
                args.chunk_messages or None,
                args.head_entities,
                args.embed_entities,
                chunk_overlap=not args.no_chunk_overlap,
                reembed=args.reembed,
                pooled_summary_vector=args.pooled_summary_vector,
                resummarise=args.resummarise,
                late_chunks=args.late_chunks,
                late_summary_vector=args.late_summary_vector,
            )
            log(f"re-indexed {done} episodes in {time.monotonic() - started:.1f}s")
        for old in data_dir.glob("features*.json"):
            old.unlink()
    if args.refresh or not cache.exists():
        with ExitStack() as stack:
            url = _database(data_dir, stack)
            import psycopg

            with psycopg.connect(url) as conn:
                threads, done = conn.execute(
                    "SELECT (SELECT count(*) FROM threads), "
                    "(SELECT count(*) FROM episodes WHERE status = 'completed')"
                ).fetchone()
            if done < sum(len(c.sessions) for c in conversations):
                build_database(url, conversations, ingest=not threads)
            started = time.monotonic()
            rows = recall_features(url, conversations, locomo.adversarial_questions())
            log(f"features of {len(rows)} recalls in {time.monotonic() - started:.1f}s")
        cache.write_text(json.dumps(rows))
    if args.latency:
        with ExitStack() as stack:
            url = _database(data_dir, stack)
            print(f"load average before {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
            print(latency(url, conversations, [n.strip() for n in args.latency.split(",")]))
            print(f"load average after {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return 0
    if args.rerank_latency:
        with ExitStack() as stack:
            url = _database(data_dir, stack)
            print(f"load average before {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
            print(
                rerank_latency(
                    url, conversations, args.latency_every, not args.latency_without_sessions
                )
            )
            print(f"load average after {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return 0
    if args.stored_word_forms:
        rows = _reader_features(
            data_dir / f"features-li-forms{suffix}.json",
            data_dir / f"features-default{suffix}.json",
            args.refresh,
            lambda url, base: late_interaction_features(
                url, conversations, base, read_chunks=False
            ),
            "stored word forms",
        )
        print(choose_second_look(rows, split, "xenc_late-interaction"))
        for form in (
            "li-int8",
            "li-distinct",
            *(f"li-p{dims}-distinct" for dims in PROJECTIONS),
            "li-p128-all",
            "li-near1",
            "li-near1-p64",
            f"li-near{NEAREST_CHUNKS}",
            f"li-near{NEAREST_CHUNKS}-p64",
        ):
            print(f"stored word vectors as {form}:")
            print(choose_second_look(rows, split, f"xenc_{form}"))
        return 0
    if args.late_interaction:
        rows = _reader_features(
            data_dir / f"features-li{suffix}.json",
            data_dir / f"features-default{suffix}.json",
            args.refresh,
            lambda url, base: late_interaction_features(url, conversations, base),
            "late interaction",
        )
        print(choose_mix(rows, split, "late-interaction"))
        print(choose_second_look(rows, split, "xenc_late-interaction"))
        print(choose_mix(rows, split, "word-chunk"))
        print(choose_second_look(rows, split, "xenc_word-chunk"))
        print(choose_second_look(rows, split, ""))
        print(choose_mix(rows, split, "nearest-chunks"))
        print(choose_second_look(rows, split, "xenc_nearest-chunks"))
        for form in (
            "li-int8",
            "li-sign",
            "li-sign-raw",
            "li-distinct",
            "li-sign-distinct",
            "nearest-chunks-int8",
            "nearest-chunks-p128",
            "nearest-chunks-p64",
        ):
            print(f"stored word vectors as {form}:")
            print(choose_second_look(rows, split, f"xenc_{form}"))
        return 0
    if args.local_rerank:
        rows = _reader_features(
            data_dir / f"features-xenc{suffix}.json",
            data_dir / f"features-default{suffix}.json",
            args.refresh,
            lambda url, base: local_rerank_features(url, conversations, base),
            "local reranker",
        )
        print(choose_local_rerank(rows, split))
        return 0
    if args.fit_rerank:
        rows = json.loads((data_dir / f"features-{args.fit_rerank}{suffix}.json").read_text())
        print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(choose_rerank(rows, split))
        return 0
    if args.fit_extras:
        rows = json.loads((data_dir / f"features-{args.fit_extras}{suffix}.json").read_text())
        print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(choose_extras(rows, split))
        print("\nthe same with recency from the time a question names (the third pass's default):")
        print(choose_extras(rows, split, named_time_windows(conversations)))
        return 0
    if args.fit_ranker:
        off = data_dir / f"features-off{suffix}.json"
        if not off.exists():
            sys.exit(f"{off} is missing: run --options off first")
        rows = json.loads(off.read_text())
        print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(choose_ranker(rows, split))
        print(score_variants(rows, split, {**VARIANTS, **learned_variants(rows, split)}))
        return 0
    if args.options:
        chosen = [n.strip() for n in args.options.split(",") if n.strip()]
        known = ranking_variants()
        caches = {name: data_dir / f"features-{name}{suffix}.json" for name in chosen}
        missing = [n for n, path in caches.items() if args.refresh or not path.exists()]
        if missing:
            with ExitStack() as stack:  # one server for every switch
                url = _database(data_dir, stack)
                for name in missing:
                    started = time.monotonic()
                    got = recall_features(
                        url, conversations, locomo.adversarial_questions(), known[name]
                    )
                    log(f"{name}: {len(got)} recalls in {time.monotonic() - started:.1f}s")
                    caches[name].write_text(json.dumps(got))
        print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(score_options(caches, split))
        return 0
    rows = with_best(json.loads(cache.read_text()))
    from episodic.store import relevance as relmod

    curve = relmod.curve_for(f"{os.environ.get('EPISODIC_EMBEDDING_PROVIDER', 'minilm')}:")
    coef: tuple[float, list[float]] = (
        curve.intercept,
        [*curve.coefficients, *curve.best_coefficients],
    )
    if args.fit:
        coef = fit(rows, split["dev"])
        print(
            f"fitted on dev: INTERCEPT = {coef[0]:.3f}, "
            f"COEFFICIENTS = {tuple(round(b, 3) for b in coef[1])}"
        )

    def rel(c: dict) -> float:
        z = coef[0] + sum(b * v for b, v in zip(coef[1], curve_inputs(c), strict=True))
        return 1 / (1 + math.exp(-max(min(z, 50), -50)))

    for r in rows:  # the curve in use (fitted or the code's), for the variants that use it
        for c in r["candidates"]:
            c["absolute_relevance"] = rel(c)
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    # the variants recompute recency from the seed's 1 / (1 + days): they are scored on
    # features-off.json by --fit-ranker; here only Recall's own order
    print(score_variants(rows, split, {"Recall's default": rank_default}))
    ms = sorted(r["ms"] for r in rows if r["kind"] == "own")
    print(
        f"in-process recall (all candidates): p50 {ms[len(ms) // 2]:.1f} ms, "
        f"p99 {ms[int(len(ms) * 0.99)]:.1f} ms"
    )
    named = named_time_windows(conversations)
    for t in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
        print(f"-- min_relevance {t}\n{abstention(rows, split, t, rel, named_times=named)}")
    # The request-level gate (relevance.MatchCurve): the code's unless --fit.
    match_coef = (
        fit_match(rows, split["dev"])
        if args.fit or curve.match is None
        else (curve.match.intercept, list(curve.match.coefficients))
    )
    print(
        f"match curve{' fitted on dev' if args.fit else ''}: INTERCEPT = {match_coef[0]:.3f}, "
        f"COEFFICIENTS = {tuple(round(b, 3) for b in match_coef[1])}"
    )

    def match(best: list[float]) -> float:
        z = match_coef[0] + sum(b * v for b, v in zip(match_coef[1], best, strict=True))
        return 1 / (1 + math.exp(-max(min(z, 50), -50)))

    print(choose_abstention(rows, split, rel, match, named))
    if args.confirm:
        provider = os.environ.get("EPISODIC_EMBEDDING_PROVIDER")
        with ExitStack() as stack:
            confirm(
                _database(data_dir, stack),
                conversations,
                split,
                {"EPISODIC_EMBEDDING_PROVIDER": provider} if provider else None,
                args.confirm_at,
                args.confirm_abstain,
            )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OTEL_TRACES_EXPORTER", "none")
    sys.exit(main())
