"""Recall in French, Spanish and German: the hand-written test set of
``bench/data/multilingual.jsonl`` (30 users, 153 sessions, 120 questions, one gold session
each) through the running suite, with the English defaults and with the multilingual
options.

    .venv/bin/python -m bench.quality.multilingual_quality [--embedders minilm,e5] [--direct]
        [--multilingual auto,off]

For each embedder it starts the four services (offline defaults otherwise: extractive
summaries), writes every user's sessions three times — into a dataset whose language is
set to English (never detected: what a dataset nobody set got before detection), one set
to its own (french / spanish / german, with SetDatasetPolicy), and one left unset for the
Summariser to detect (it prints which were detected right) — and asks every question of
each with ``as_of`` = the question's time. ``--direct`` writes two (the english
configuration and the language set). Scores are session-level R@1, R@5 and MRR within each
user's own sessions (as with LoCoMo), per language and overall, with the Recall latency.

Through the suite it also prints R@1 by how many sessions the user had when asked (each
question asked again as of the end of each session from its own on: a new user's first,
shortest sessions) and, beside the other languages in the same run, English: the first
``--english`` (1) conversations of LoCoMo written into the same suite.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.harness import DATA, locomo
from bench.harness.report import log
from bench.harness.suite import ingest_and_summarise, start_suite

DEFAULT_PATH = DATA / "multilingual.jsonl"


def load(path: Path) -> list[tuple[str, locomo.Conversation]]:
    """(language, conversation) per user, in LoCoMo's shapes (one thread per session)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        row["conversation_id"] = row["dataset"]
        for question in row["questions"]:
            question["category"] = "single-hop"
        tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"ml-{os.getpid()}.jsonl"
        tmp.write_text(json.dumps(row), encoding="utf-8")
        (conversation,) = locomo.load(tmp)
        tmp.unlink()
        out.append((row["language"], conversation))
    return out


def write_sessions(
    engine: Any,
    vault: Any,
    embedder: Any,
    dataset: str,
    sessions: list[locomo.Session],
    language: str | None = None,
) -> None:
    """Each session as a completed episode of ``dataset`` written directly (summary = the
    session's text, indexed with ``embedder``, as tests/recall/factory.py writes them),
    labelled with its thread id; ``language``: the dataset's, set first (None: unset)."""
    from episodic.store.languages import resolve_language, set_language
    from tests.recall.factory import make_episode

    with engine.begin() as conn:
        vault.for_write(conn, dataset)
        if language:
            set_language(conn, vault, dataset, resolve_language(conn, language))
        for session in sessions:
            make_episode(
                conn,
                dataset,
                [m.text for m in session.messages],
                ended_at=session.messages[-1].ts,
                label=session.thread_id,
                embedder=embedder,
            )


def thread_labels(conn: Any, vault: Any) -> dict[Any, str]:
    """Every thread's label (what :func:`write_sessions` named it) by thread id."""
    return {
        r["thread_id"]: r["label"]
        for r in (
            vault.open_one(conn, row, "threads")
            for row in conn.exec_driver_sql("SELECT * FROM threads").mappings().all()
        )
    }


def _with_dataset(conv: locomo.Conversation, suffix: str) -> locomo.Conversation:
    return locomo.Conversation(conv.conversation_id + suffix, conv.sessions, conv.questions)


def run(
    embedder: str,
    users: list[tuple[str, locomo.Conversation]],
    multilingual: str = "auto",
    english: list[locomo.Conversation] | None = None,
) -> dict[str, Any]:
    """Through the running suite: every user written three times (see the module
    docstring), each question asked of each; then the default variant ("unset
    (detected)") per session count, and ``english`` (LoCoMo conversations, written into
    the same suite in the same pass) beside it."""
    from episodic.store.db import make_engine
    from episodic.testing.database import scratch_database

    results: dict[str, Any] = {}
    with ExitStack() as stack:
        url = stack.enter_context(scratch_database(None, "episodic-ml-bench-"))
        engine = make_engine(url, pool_size=2)
        stack.callback(engine.dispose)
        env = {
            "EPISODIC_EMBEDDING_PROVIDER": embedder,
            "EPISODIC_EMBEDDING_MULTILINGUAL": multilingual,
            "EPISODIC_LOG_LEVEL": "WARNING",
        }
        label = f"{embedder}, multilingual {multilingual}" if embedder == "minilm" else embedder
        _, client = start_suite(stack, url, env, start_timeout=300, call_timeout=300)
        # "english set": the language set to English, so never detected (what a dataset
        # nobody set a language for got before detection); "unset (detected)": the
        # Summariser detects it from the text (EPISODIC_DETECT_LANGUAGE, the default).
        variants = {"english set": ".en", "language set": ".lang", "unset (detected)": ""}
        convs = []
        for language, conv in users:
            for suffix in variants.values():
                c = _with_dataset(conv, suffix)
                if suffix:
                    client.set_dataset_policy(
                        c.dataset, language="english" if suffix == ".en" else language
                    )
                convs.append(c)
        english = list(english or [])
        started = time.monotonic()
        ingest_and_summarise(client, engine, convs + english)
        log(
            f"{label}: {len(convs)} users written and summarised in {time.monotonic() - started:.0f}s"
        )
        detected = []
        for _language, conv in users:
            want = client.get_dataset_policy(_with_dataset(conv, ".lang").dataset).language
            got = client.get_dataset_policy(conv.dataset)
            detected.append((conv.dataset, want, got.language, got.language_origin))
        results["detection"] = detected
        for name, suffix in variants.items():
            per_language: dict[str, locomo.Scores] = {}
            latency: list[float] = []
            for language, conv in users:
                c = _with_dataset(conv, suffix)
                scores = per_language.setdefault(language, locomo.Scores())
                for q in c.questions:
                    _ask(client, c.dataset, q, q.asked_at, scores, language, latency)
            results[f"{label}, {name}"] = {"scores": per_language, **_p50_p99(latency)}
        results["per session count"] = _per_session_count(client, users)
        if english:
            scores, latency = locomo.Scores(), []
            for conv in english:
                for q in conv.questions:
                    if q.evidence_threads:
                        _ask(client, conv.dataset, q, q.asked_at, scores, q.category, latency)
            results["english"] = {
                "label": f"{label}, English (LoCoMo, {len(english)} conversation"
                + ("s)" if len(english) > 1 else ")"),
                "scores": scores,
                **_p50_p99(latency),
            }
    return results


def _ask(
    client: Any,
    dataset: str,
    q: locomo.Question,
    as_of: Any,
    scores: locomo.Scores,
    category: str,
    latency: list[float] | None = None,
) -> None:
    """Asks ``q`` of ``dataset`` as of ``as_of`` through Recall and scores the sessions it
    returns under ``category`` (with the call's time in ms added to ``latency``)."""
    t0 = time.perf_counter()
    answer = client.recall(dataset, q.question, limit=10, as_of=as_of)
    if latency is not None:
        latency.append((time.perf_counter() - t0) * 1000)
    scores.add(category, [e.episode.thread_label for e in answer.episodes], q.evidence_threads)


def _p50_p99(latency: list[float]) -> dict[str, float]:
    ordered = sorted(latency)
    return {"p50": ordered[len(ordered) // 2], "p99": ordered[int(len(ordered) * 0.99)]}


def _per_session_count(
    client: Any, users: list[tuple[str, locomo.Conversation]]
) -> dict[str, dict[int, locomo.Scores]]:
    """R@1 of the default variant (the language detected) by how many sessions the user had
    when asked: each question asked again as of the end of each session from its own on
    (``as_of`` leaves out every episode that ended after it), so count 2 ranks the gold
    among the user's first two sessions — a new user's memory from its first, shortest
    sessions. Count 1 has one candidate: it checks that the first session is found at all."""
    by_language: dict[str, dict[int, locomo.Scores]] = {}
    for language, conv in users:
        counts = by_language.setdefault(language, {})
        ends = [max(m.ts for m in session.messages) for session in conv.sessions]
        order = {session.thread_id: i for i, session in enumerate(conv.sessions)}
        for q in conv.questions:
            first = min(order[t] for t in q.evidence_threads)
            for seen in range(first, len(conv.sessions)):
                scores = counts.setdefault(seen + 1, locomo.Scores())
                _ask(client, conv.dataset, q, ends[seen], scores, language)
    return by_language


def run_direct(
    embedder_name: str,
    users: list[tuple[str, locomo.Conversation]],
    only: str | None = None,
    abstain: bool = False,
    bands: tuple[float | None, ...] = (None,),
    misses: int = 0,
    coverages: tuple[bool | None, ...] = (None,),
    lexical_scales: tuple[float | None, ...] = (None,),
) -> dict[str, Any]:
    """The same questions without the Summariser (whose extractive summaries embed every
    sentence: with e5 on a shared 2-core machine that takes the better part of an hour):
    each session becomes a completed episode written directly (summary = the session's
    text, as tests/recall/factory.py writes them), indexed with ``index_episode`` (chunks
    embedded with the embedder under test, lexemes with the dataset's configuration) and
    ranked by Recall's own code (``domain.recall``, with the ranking and relevance curves
    Recall runs for that embedder) in this process. ``abstain``: also each question with
    ``abstain``'s thresholds for the embedder, of its own dataset and of the next user's of
    the same language (a foreign one: it should get nothing) — LoCoMo's abstention check
    on hand-written questions in other languages. ``bands``: values of
    ``RecallSettings.ranking_recency_band`` (None: the default; 0: the seed's sum), each
    ranked on the same store in the same run; ``coverages``: likewise, values of
    ``RecallSettings.ranking_lexical_coverage`` (each with each band); ``lexical_scales``:
    likewise, values of ``RecallSettings.ranking_lexical_scale`` (a factor on the fitted
    lexical weights of the fusion and the second look: how much the words count beside
    the meaning; None: the embedder's); ``misses``: the score
    parts of that many missed questions per variant (the gold session beside the one
    ranked first)."""
    from episodic.config import EmbeddingSettings, RecallSettings
    from episodic.providers import make_embedder
    from episodic.services.recall import domain
    from episodic.store.db import make_engine
    from episodic.store.recall_queries import RecallFilters
    from episodic.store.relevance import Abstention
    from episodic.testing.database import scratch_database
    from episodic.testing.keys import test_vault

    embedder = make_embedder(
        EmbeddingSettings(embedding_provider=embedder_name, embedding_threads=2), 384
    )
    vault = test_vault()
    settings = RecallSettings()

    def varied(
        band: float | None, coverage: bool | None, scale: float | None = None
    ) -> RecallSettings:
        update: dict[str, float | bool] = {}
        if scale is not None:
            update["ranking_lexical_scale"] = scale
        if band is not None:
            update["ranking_recency_band"] = band
        if coverage is not None:
            update["ranking_lexical_coverage"] = coverage
        return settings.model_copy(update=update)

    def label(band: float | None, coverage: bool | None) -> str:
        parts = [f"band {band:g}"] if band is not None else []
        if coverage is not None:
            parts.append(f"coverage {'on' if coverage else 'off'}")
        return ", ".join(parts)

    rankings = {
        ", ".join(
            p for p in (label(band, coverage), f"lexical x{scale:g}" if scale else "") if p
        ): domain.ranking_from(varied(band, coverage, scale), embedder.name)
        for band in bands
        for coverage in coverages
        for scale in lexical_scales
    }
    # what abstain asks for (the servicer's): the model's English thresholds in an English
    # dataset, its other-language curve's elsewhere (relevance.OTHER_LANGUAGE_CURVES), or
    # nothing kept out where it has none
    thresholds = domain.abstention(embedder.name) or Abstention(0.0, 0.0)
    # each user's foreign dataset: the next user of the same language
    by_language: dict[str, list[locomo.Conversation]] = {}
    for language, conv in users:
        by_language.setdefault(language, []).append(conv)
    foreign_of = {
        conv.dataset: convs[(i + 1) % len(convs)].dataset
        for convs in by_language.values()
        for i, conv in enumerate(convs)
    }
    results: dict[str, Any] = {}
    vectors: dict[str, Any] = {}
    with ExitStack() as stack:
        url = stack.enter_context(scratch_database(None, "episodic-ml-bench-"))
        engine = make_engine(url, pool_size=2)
        stack.callback(engine.dispose)
        variants = {"english config": "", "language set": ".lang"}
        if only:
            variants = {only: variants[only]}
        started = time.monotonic()
        for language, conv in users:
            for suffix in variants.values():
                write_sessions(
                    engine,
                    vault,
                    embedder,
                    conv.dataset + suffix,
                    conv.sessions,
                    language if suffix else None,
                )
        log(f"{embedder_name}: written and indexed in {time.monotonic() - started:.0f}s")
        with engine.connect() as conn:
            labels = thread_labels(conn, vault)
            for (variant, suffix), fusion in ((v, f) for v in variants.items() for f in rankings):
                name = f"{variant}, {fusion}" if fusion else variant
                ranking = rankings[fusion]
                missed: list[str] = []
                per_language: dict[str, locomo.Scores] = {}
                abstaining: dict[str, locomo.Scores] = {}
                foreign_empty: dict[str, list[bool]] = {}
                latency: list[float] = []

                def ask(
                    dataset: str, q: Any, gate: bool, ranking: Any = ranking
                ) -> list[dict[str, Any]]:
                    request = domain.RecallQuery(
                        dataset=dataset,
                        query=q.question,
                        include_episodes=True,
                        limit=10,
                        similarity_weight=settings.similarity_weight,
                        recency_weight=settings.recency_weight,
                        filters=RecallFilters(as_of=q.asked_at),
                        understanding=domain.read_time(q.question, q.asked_at, False),
                        min_relevance=None if gate else 0.0,
                        min_match=None if gate else 0.0,
                        abstention=thresholds if gate else None,
                        ranking=ranking,
                    )
                    text = request.ranked_query or q.question
                    if text not in vectors:  # each variant asks the same questions
                        vectors[text] = embedder.embed_query(text)
                    vector = vectors[text]
                    return domain.recall(conn, vault, request, vector).rows

                for language, conv in users:
                    scores = per_language.setdefault(language, locomo.Scores())
                    for q in conv.questions:
                        t0 = time.perf_counter()
                        rows = ask(conv.dataset + suffix, q, False)
                        latency.append((time.perf_counter() - t0) * 1000)
                        found = [labels[r["thread_id"]] for r in rows]
                        scores.add(language, found, q.evidence_threads)
                        if len(missed) < misses and found and found[0] not in q.evidence_threads:
                            missed.append(_miss(q, rows, labels))
                        if abstain:
                            abstaining.setdefault(language, locomo.Scores()).add(
                                language,
                                [
                                    labels[r["thread_id"]]
                                    for r in ask(conv.dataset + suffix, q, True)
                                ],
                                q.evidence_threads,
                            )
                            foreign = foreign_of[conv.dataset] + suffix
                            foreign_empty.setdefault(language, []).append(not ask(foreign, q, True))
                latency.sort()
                results[f"{embedder_name}, {name} (direct)"] = {
                    "scores": per_language,
                    "p50": latency[len(latency) // 2],
                    "p99": latency[int(len(latency) * 0.99)],
                    "misses": missed,
                }
                if abstain:
                    results[f"{embedder_name}, {name} (direct)"]["abstain"] = (
                        abstaining,
                        foreign_empty,
                        thresholds,
                    )
    return results


_PARTS = ("relevance", "similarity", "recency", "lexical", "semantic", "cosine")


def _miss(q: Any, rows: list[dict[str, Any]], labels: dict[Any, str]) -> str:
    """One missed question's score parts: the session ranked first and the gold one."""
    gold = next(
        ((i, r) for i, r in enumerate(rows) if labels[r["thread_id"]] in q.evidence_threads),
        None,
    )
    shown = [("first", 0, rows[0])] + ([("gold", gold[0], gold[1])] if gold else [])
    parts = "; ".join(
        f"{who} (#{i + 1}) " + " ".join(f"{p} {float(row[p]):.3f}" for p in _PARTS)
        for who, i, row in shown
    )
    return f"{q.question!r}: {parts}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", default=str(DEFAULT_PATH))
    parser.add_argument("--embedders", default="minilm,e5")
    parser.add_argument(
        "--direct",
        action="store_true",
        help="episodes written and indexed directly, ranked in-process (no Summariser)",
    )
    parser.add_argument(
        "--only", choices=("english config", "language set"), help="--direct: one variant"
    )
    parser.add_argument(
        "--abstain",
        action="store_true",
        help="--direct: also abstention (each question with abstain, of its own dataset and "
        "of another user's of the same language)",
    )
    parser.add_argument(
        "--bands",
        default="",
        help="--direct: values of EPISODIC_RANKING_RECENCY_BAND, comma-separated, each "
        "ranked on the same store (0: recency everywhere, the seed's sum); default: what "
        "Recall runs",
    )
    parser.add_argument(
        "--coverage",
        default="",
        help="--direct: values of EPISODIC_RANKING_LEXICAL_COVERAGE (on, off), "
        "comma-separated, each ranked on the same store (off: the best lexical match is a "
        "full one however little of the question it holds); default: what Recall runs",
    )
    parser.add_argument(
        "--misses", type=int, default=0, help="--direct: score parts of this many misses each"
    )
    parser.add_argument(
        "--lexical-scales",
        default="",
        help="--direct: values of EPISODIC_RANKING_LEXICAL_SCALE (a factor on the fitted "
        "lexical weights), comma-separated, each ranked on the same store; default: the "
        "embedder's",
    )
    parser.add_argument(
        "--multilingual",
        default="auto",
        help="through the suite: values of EPISODIC_EMBEDDING_MULTILINGUAL (auto, off), "
        "comma-separated, each a run of its own (auto: with minilm, datasets in other "
        "languages are embedded by e5)",
    )
    parser.add_argument(
        "--english",
        type=int,
        default=1,
        metavar="N",
        help="through the suite: also the first N conversations of LoCoMo (English), written "
        "into the same suite and reported beside (0: none)",
    )
    parser.add_argument(
        "--locomo",
        type=int,
        metavar="N",
        help="--direct: the first N conversations of LoCoMo (English) instead of --path",
    )
    args = parser.parse_args(argv)
    if (
        args.abstain or args.bands or args.coverage or args.misses or args.locomo
    ) and not args.direct:
        parser.error("--abstain, --bands, --coverage, --misses and --locomo need --direct")
    if args.lexical_scales and not args.direct:
        parser.error("--lexical-scales needs --direct")
    scales = (
        tuple(float(x) for x in args.lexical_scales.split(",")) if args.lexical_scales else (None,)
    )
    users = (
        [("en", c) for c in locomo.load(limit=args.locomo)]
        if args.locomo
        else load(Path(args.path))
    )
    bands = tuple(float(b) for b in args.bands.split(",")) if args.bands else (None,)
    coverages = (
        tuple({"on": True, "off": False}[c] for c in args.coverage.split(","))
        if args.coverage
        else (None,)
    )
    log(f"{len(users)} users, {sum(len(c.questions) for _, c in users)} questions")
    for embedder in args.embedders.split(","):  # each embedder's table as soon as it is done
        if args.direct:
            report(
                users,
                run_direct(
                    embedder,
                    users,
                    args.only,
                    args.abstain,
                    bands,
                    args.misses,
                    coverages,
                    scales,
                ),
            )
            continue
        english = locomo.load(limit=args.english) if args.english else None
        for multilingual in args.multilingual.split(",") if embedder == "minilm" else ["auto"]:
            report(users, run(embedder, users, multilingual, english))
    return 0


def report(users: list[tuple[str, locomo.Conversation]], results: dict[str, Any]) -> None:
    """Prints one embedder's results: detection, the table, misses and abstention."""
    detection = results.pop("detection", None)
    per_count = results.pop("per session count", None)
    english = results.pop("english", None)
    if detection:
        right = sum(want == got and origin == "detected" for _, want, got, origin in detection)
        print(f"languages detected by the Summariser: {right} of {len(detection)} datasets right")
        for dataset, want, got, origin in detection:
            if want != got or origin != "detected":
                print(f"  {dataset}: {got} ({origin}), set would be {want}")
    languages = sorted({lang for lang, _ in users})
    head = "| variant | " + " | ".join(f"{lang} R@1 / R@5 / MRR" for lang in languages)
    print(head + " | all R@1 / R@5 / MRR | Recall p50 / p99 ms |")
    print("|---" * (len(languages) + 3) + "|")
    for name, r in results.items():
        cells = []
        overall = locomo.Scores()
        for lang in languages:
            o = r["scores"][lang].overall()
            cells.append(f"{o['R@1']:.3f} / {o['R@5']:.3f} / {o['MRR']:.3f}")
            overall._rows.extend(r["scores"][lang]._rows)
        o = overall.overall()
        cells.append(f"{o['R@1']:.3f} / {o['R@5']:.3f} / {o['MRR']:.3f}")
        cells.append(f"{r['p50']:.1f} / {r['p99']:.1f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    if english:
        o = english["scores"].overall()
        print(
            f"| {english['label']} | "
            + " | ".join("" for _ in languages)
            + f" | {o['R@1']:.3f} / {o['R@5']:.3f} / {o['MRR']:.3f} | "
            f"{english['p50']:.1f} / {english['p99']:.1f} |"
        )
    if per_count:
        counts = sorted({n for by in per_count.values() for n in by})
        print("\nR@1 by how many sessions the user had when asked (language detected):")
        print("| sessions | " + " | ".join(languages) + " | all | questions |")
        print("|---" * (len(languages) + 3) + "|")
        for n in counts:
            every = locomo.Scores()
            cells = []
            for lang in languages:
                scores = per_count.get(lang, {}).get(n, locomo.Scores())
                every._rows.extend(scores._rows)
                cells.append(f"{scores.overall()['R@1']:.3f}")
            o = every.overall()
            print(f"| {n} | " + " | ".join(cells) + f" | {o['R@1']:.3f} | {int(o['n'])} |")
    for name, r in results.items():
        if r.get("misses"):
            print(f"\nmisses of {name} (score parts: the first ranked, then the gold):")
            for line in r["misses"]:
                print(f"- {line}")
    abstained = {name: r["abstain"] for name, r in results.items() if "abstain" in r}
    if abstained:
        print(
            "\n| variant (abstain's thresholds) | "
            + " | ".join(f"{lang} foreign empty, R@5 without → with" for lang in languages)
            + " | all |"
        )
        print("|---" * (len(languages) + 2) + "|")
        for name, (own, foreign, _thresholds) in abstained.items():
            cells = []
            before_all, after_all, empty_all = locomo.Scores(), locomo.Scores(), []
            for lang in languages:
                before, after = results[name]["scores"][lang], own[lang]
                before_all._rows.extend(before._rows)
                after_all._rows.extend(after._rows)
                empty_all.extend(foreign[lang])
                cells.append(
                    f"{100 * sum(foreign[lang]) / len(foreign[lang]):.1f} %, "
                    f"{before.overall()['R@5']:.3f} → {after.overall()['R@5']:.3f}"
                )
            cells.append(
                f"{100 * sum(empty_all) / len(empty_all):.1f} %, "
                f"{before_all.overall()['R@5']:.3f} → {after_all.overall()['R@5']:.3f}"
            )
            label = f"{name} (abstain)"
            print(f"| {label} | " + " | ".join(cells) + " |")
    print(f"\nload average {', '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)


if __name__ == "__main__":
    os.environ.setdefault("OTEL_TRACES_EXPORTER", "none")
    sys.exit(main())
