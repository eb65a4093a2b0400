"""``abstain``'s curves for datasets in other languages than English: fitted on one
hand-written set, checked on another written separately, with the model a dataset in
another language is embedded with by default (multilingual-e5-small).

    .venv/bin/python -m bench.quality.language_curves [--fit-on bench/data/multilingual.jsonl]
        [--check-on bench/data/multilingual_short.jsonl] [--embedder e5]

The curves of ``episodic/store/relevance.py`` were fitted on LoCoMo, in English; applied
to the French, Spanish and German set they cut a third of the real answers, and on the
short set every one (its questions paraphrase: few words in common). This harness fits
the same two curves (``bench.quality.recall_lab``'s ``fit`` and ``fit_match``: the episode's
relevance, and the request's match) on questions in other languages:

1. every session of both sets becomes a completed episode written directly in a dataset
   whose language is set (summary = the session's text, indexed by ``index_episode`` with
   the embedder under test: ``bench.quality.multilingual_quality --direct``'s store);
2. every question is asked of its own dataset (positives: its gold session) and of the
   next user's of the same language in the same set (a foreign one: every candidate a
   negative), by Recall's own code (``domain.recall``) with every candidate returned;
3. ``abstain``'s thresholds are chosen as for LoCoMo: the highest value, 0.01 apart and the
   same for both, at which real questions lose at most 1 point of R@5 — here on each set
   the curves were fitted on.

It prints, per set and per language: the English curve's figures (what a dataset in
another language would get if the curves fitted on LoCoMo judged it); the curves fitted on
the ``--fit-on`` set alone and checked on the ``--check-on`` set (on 2026-12-05 they did
not carry over: the long set's questions share words with their sessions, the short set's
paraphrase); the curves fitted on both sets, in two folds each holding out half of the
checking set's users; and last the curves fitted on both, the constants to write into
``relevance.py``.
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
from bench.harness.report import log
from bench.quality.lab.ranking import named_time_windows
from bench.quality.lab.relevance import abstention_figures, curve_inputs, fit, fit_match, with_best
from bench.quality.multilingual_quality import DEFAULT_PATH, load, thread_labels, write_sessions

SHORT_PATH = DEFAULT_PATH.parent / "multilingual_short.jsonl"
HALVES = ("dev", "held-out")  # recall_lab's names: the fitting set, the checking set


def features(
    embedder_name: str, sets: dict[str, list[tuple[str, locomo.Conversation]]]
) -> list[dict[str, Any]]:
    """Every candidate's signals for each question of each set, asked of its own dataset
    and of a foreign one, in ``bench.quality.recall_lab``'s row shape (``conversation``: the
    user's dataset; ``set``: the key of ``sets``; ``language``)."""
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
    rows: list[dict[str, Any]] = []
    with ExitStack() as stack:
        url = stack.enter_context(scratch_database(None, "episodic-language-curves-"))
        engine = make_engine(url, pool_size=2)
        stack.callback(engine.dispose)
        started = time.monotonic()
        for users in sets.values():
            for language, conv in users:
                write_sessions(engine, vault, embedder, conv.dataset, conv.sessions, language)
        log(f"{embedder.name}: written and indexed in {time.monotonic() - started:.0f}s")
        with engine.connect() as conn:
            labels = thread_labels(conn, vault)
            for name, users in sets.items():
                by_language: dict[str, list[locomo.Conversation]] = {}
                for language, conv in users:
                    by_language.setdefault(language, []).append(conv)
                for language, convs in by_language.items():
                    for i, conv in enumerate(convs):
                        foreign = convs[(i + 1) % len(convs)]
                        for q in conv.questions:
                            request = domain.RecallQuery(
                                dataset=conv.dataset,
                                query=q.question,
                                include_episodes=True,
                                limit=domain.MAX_CONTEXT_EPISODES,
                                similarity_weight=settings.similarity_weight,
                                recency_weight=settings.recency_weight,
                                filters=RecallFilters(as_of=q.asked_at),
                                understanding=domain.read_time(q.question, q.asked_at, False),
                                min_relevance=0.0,
                                min_match=0.0,
                                ranking=ranking,
                            )
                            vector = embedder.embed_query(request.ranked_query or q.question)
                            for kind, target in (("own", conv), ("foreign", foreign)):
                                asked = domain.recall(
                                    conn, vault, _in(request, target.dataset), vector
                                )
                                rows.append(
                                    {
                                        "set": name,
                                        "language": language,
                                        "conversation": conv.dataset,
                                        "kind": kind,
                                        "category": "single-hop",
                                        "question": q.question,
                                        "gold": list(q.evidence_threads) if kind == "own" else [],
                                        "candidates": [
                                            {
                                                "label": labels[r["thread_id"]],
                                                **{
                                                    k: float(r[k])
                                                    for k in (
                                                        "cosine",
                                                        "coverage",
                                                        "passage_coverage",
                                                        "absolute_relevance",
                                                    )
                                                },
                                            }
                                            for r in asked.rows
                                        ],
                                    }
                                )
    return with_best(rows)


def _in(request: Any, dataset: str) -> Any:
    from dataclasses import replace

    return replace(request, dataset=dataset)


def _logistic(coef: tuple[float, list[float]], xs: list[float]) -> float:
    z = coef[0] + sum(b * v for b, v in zip(coef[1], xs, strict=True))
    return 1 / (1 + math.exp(-max(min(z, 50), -50)))


def figures_table(
    rows: list[dict[str, Any]],
    split: dict[str, set[str]],
    rel: Any,
    match: Any,
    min_relevance: float,
    min_match: float,
    named: dict[str, tuple[float, float]],
) -> str:
    """One line per set and per language of each set at the given thresholds."""
    lines = [
        "| set | language | foreign questions left empty | real questions left empty "
        "| R@5 without → with | R@1 without → with |",
        "|---|---|---|---|---|---|",
    ]
    languages = sorted({r["language"] for r in rows})
    for half, label in zip(HALVES, ("fitting set", "checking set"), strict=True):
        for language in (None, *languages):
            chosen = [
                r
                for r in rows
                if r["conversation"] in split[half] and language in (None, r["language"])
            ]
            if not chosen:
                continue
            ids = {r["conversation"] for r in chosen}
            f = abstention_figures(
                chosen, {"dev": ids, "held-out": set()}, min_relevance, rel, match, min_match,
                named,
            )["dev"]  # fmt: skip
            r1 = _r1(chosen, rel, match, min_relevance, min_match, named)
            lines.append(
                f"| {label} | {language or 'all'} | {100 * f['foreign']:.1f} % "
                f"({f['foreign_n']}) | {100 * f['own_empty']:.1f} % | "
                f"{f['r5_before']:.3f} → {f['r5_after']:.3f} | {r1[0]:.3f} → {r1[1]:.3f} |"
            )
    return "\n".join(lines)


def _r1(
    rows: list[dict[str, Any]],
    rel: Any,
    match: Any,
    min_relevance: float,
    min_match: float,
    named: dict[str, tuple[float, float]],
) -> tuple[float, float]:
    """R@1 of the real questions without and with the thresholds (as abstention_figures
    keeps candidates)."""
    from bench.quality.lab.relevance import request_best

    own = [r for r in rows if r["kind"] == "own"]
    before = after = 0
    for r in own:
        gated = match is not None and match(request_best(r)) < min_match
        in_named = r["question"] in named
        kept = [
            c
            for c in r["candidates"]
            if (not gated and rel(c) >= min_relevance)
            or (in_named and c.get("recency", 0.0) >= 1.0 - 1e-9)
        ]
        before += bool(r["candidates"]) and r["candidates"][0]["label"] in r["gold"]
        after += bool(kept) and kept[0]["label"] in r["gold"]
    return before / max(len(own), 1), after / max(len(own), 1)


def _curves(coef: tuple[float, list[float]], match_coef: tuple[float, list[float]]) -> Any:
    """The relevance and match functions of fitted coefficients."""
    return (lambda c: _logistic(coef, curve_inputs(c))), (lambda b: _logistic(match_coef, b))


def highest_keeping(
    rows: list[dict[str, Any]], sets: list[set[str]], rel: Any, match: Any, max_lost: float
) -> float:
    """``abstain``'s value (the same for both thresholds, 0.01 apart): the highest at which
    the real questions of every one of ``sets`` lose at most ``max_lost`` points of R@5
    (computed exactly); 0 when even 0.01 loses more."""
    chosen = 0.0
    for v in [x / 100 for x in range(1, 91)]:
        lost = [
            abstention_figures(rows, {"dev": ids, "held-out": set()}, v, rel, match, v)["dev"]
            for ids in sets
        ]
        if all(100 * (f["r5_before"] - f["r5_after"]) <= max_lost + 1e-9 for f in lost):
            chosen = v
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit-on", default=str(DEFAULT_PATH))
    parser.add_argument("--check-on", default=str(SHORT_PATH))
    parser.add_argument("--embedder", default="e5")
    parser.add_argument(
        "--rows",
        type=Path,
        help="a JSON cache of the candidates' signals: read if it exists, else written",
    )
    parser.add_argument(
        "--max-lost", type=float, default=1.0, help="points of R@5 the fitting set may lose"
    )
    args = parser.parse_args(argv)
    from episodic.store.relevance import curve_for

    sets = {"fit": load(Path(args.fit_on)), "check": load(Path(args.check_on))}
    split = {
        half: {conv.dataset for _, conv in sets[name]}
        for half, name in zip(HALVES, sets, strict=True)
    }
    if split["dev"] & split["held-out"]:
        parser.error("the two sets share dataset names")
    log(
        f"fitting on {len(sets['fit'])} users, checking on {len(sets['check'])} "
        f"({sum(len(c.questions) for _, c in sets['check'])} questions)"
    )
    if args.rows is not None and args.rows.exists():
        rows = with_best(json.loads(args.rows.read_text()))
    else:
        rows = features(args.embedder, sets)
        if args.rows is not None:
            args.rows.write_text(json.dumps(rows))
    named = named_time_windows([conv for users in sets.values() for _, conv in users])

    english = curve_for(f"{args.embedder}:")
    english_coef = (english.intercept, [*english.coefficients, *english.best_coefficients])
    english_match = (
        (english.match.intercept, list(english.match.coefficients)) if english.match else None
    )
    thresholds = english.abstention
    print(
        f"\nthe curve fitted on LoCoMo (English) for {args.embedder}, abstain = "
        f"{thresholds.min_relevance} / {thresholds.min_match}:"
    )
    print(
        figures_table(
            rows,
            split,
            lambda c: _logistic(english_coef, curve_inputs(c)),
            (lambda b: _logistic(english_match, b)) if english_match else None,
            thresholds.min_relevance,
            thresholds.min_match,
            named,
        )
    )

    # 1. fitted on the first set alone, checked on the second
    coef, match_coef = fit(rows, split["dev"]), fit_match(rows, split["dev"])
    rel, match = _curves(coef, match_coef)
    chosen = highest_keeping(rows, [split["dev"]], rel, match, args.max_lost)
    print(f"\nfitted on the fitting set alone: abstain = {chosen} / {chosen}")
    print(figures_table(rows, split, rel, match, chosen, chosen, named))

    # 2. fitted on both sets, checked on the users of the second it did not see (two folds)
    check_users = sorted(split["held-out"])
    folds = [set(check_users[0::2]), set(check_users[1::2])]
    for i, held in enumerate(folds):
        seen = split["dev"] | (split["held-out"] - held)
        rel, match = _curves(fit(rows, seen), fit_match(rows, seen))
        chosen = highest_keeping(
            rows, [split["dev"], split["held-out"] - held], rel, match, args.max_lost
        )
        print(
            f"\nfold {i + 1}: fitted on the fitting set and the other half of the checking "
            f"set's users, abstain = {chosen} / {chosen}, figures on the users it did not see:"
        )
        print(figures_table(rows, {"dev": set(), "held-out": held}, rel, match, chosen, chosen,
                            named))  # fmt: skip

    # 3. the curves to ship: fitted on both, thresholds keeping each set's answers
    everyone = split["dev"] | split["held-out"]
    coef, match_coef = fit(rows, everyone), fit_match(rows, everyone)
    rel, match = _curves(coef, match_coef)
    chosen = highest_keeping(rows, [split["dev"], split["held-out"]], rel, match, args.max_lost)
    print(
        f"\nfitted on both sets: relevance Curve({coef[0]:.3f}, "
        f"{tuple(round(b, 3) for b in coef[1][:3])}, {tuple(round(b, 3) for b in coef[1][3:])}"
        f", match=MatchCurve({match_coef[0]:.3f}, {tuple(round(b, 3) for b in match_coef[1])})"
        f", abstain=Abstention({chosen}, {chosen}))"
    )
    print(figures_table(rows, split, rel, match, chosen, chosen, named))
    print(f"\nload average {', '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OTEL_TRACES_EXPORTER", "none")
    sys.exit(main())
