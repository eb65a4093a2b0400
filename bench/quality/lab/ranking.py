"""The recall lab's ranking variants scored on the cached features: Recall's own order and
the older fusions (``VARIANTS``), the ranking switches ``--options`` flips
(``ranking_variants``), the learned fusion fitted on the development half
(``fit_ranker``, ``learned``, ``choose_ranker``, ``choose_extras``, ``choose_rerank``), the
time a question names (``named_time_windows``), and R@1 / R@5 / MRR on both halves
(``score_halves``, ``score_options``, ``score_variants``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import locomo
from bench.harness.suite import rrf
from episodic.store.ranking_options import EXTRA_SIGNALS

# -- variants -------------------------------------------------------------------------


def rank_default(c: list[dict]) -> list[str]:
    """Recall's own order: the candidates as it answered them (by relevance, unless a
    second look, ``RankingOptions.rerank_top``, reordered its first few)."""
    return [x["label"] for x in c]


def rank_rrf(c: list[dict]) -> list[str]:
    lex = [x["label"] for x in sorted(c, key=lambda x: -x["lexical"])]
    sem = [x["label"] for x in sorted(c, key=lambda x: -x["semantic"])]
    return rrf(lex, sem)


def rank_similarity_only(c: list[dict]) -> list[str]:
    return [x["label"] for x in sorted(c, key=lambda x: -x["similarity"])]


def rank_absolute(c: list[dict]) -> list[str]:
    return [x["label"] for x in sorted(c, key=lambda x: -x["absolute_relevance"])]


def fused(
    share: float = 0.5,
    ws: float = 0.7,
    wr: float = 0.3,
    wa: float = 0.0,
    recency_span: float = 0.0,
) -> Any:
    """Score fusion with another lexical share / weights, plus ``wa`` × calibrated
    relevance, recomputed from the cached relative signals; ``recency_span`` as
    RankingOptions' (the features must come from a run with the seed's recency)."""

    def rank(c: list[dict]) -> list[str]:
        span = max([1.0, *(1.0 / max(x["recency"], 1e-12) - 1.0 for x in c)])

        def score(x: dict) -> float:
            sim = min(1.0, share * x["lexical"] + (1 - share) * x["semantic"]) ** 3
            recency = x["recency"]
            if recency_span:
                days = 1.0 / max(recency, 1e-12) - 1.0
                recency = 1.0 / (1.0 + days / (recency_span * span))
            return ws * sim + wr * recency + wa * x["absolute_relevance"]

        return [x["label"] for x in sorted(c, key=lambda x: -score(x))]

    return rank


def rank_rrf_recency(c: list[dict]) -> list[str]:
    """RRF of lexical, semantic and recency ranks."""
    lex = [x["label"] for x in sorted(c, key=lambda x: -x["lexical"])]
    sem = [x["label"] for x in sorted(c, key=lambda x: -x["semantic"])]
    rec = [x["label"] for x in sorted(c, key=lambda x: -x["recency"])]
    return rrf(lex, sem, rec)


VARIANTS = {
    "default (score fusion, 0.7/0.3)": rank_default,
    "similarity only (no recency)": rank_similarity_only,
    "recency weight 0.1 (0.9/0.1)": fused(ws=0.9, wr=0.1),
    "lexical share 0.3 (semantic 0.7)": fused(share=0.3),
    "lexical share 0.7 (semantic 0.3)": fused(share=0.7),
    "rank fusion (RRF k=60) of lexical and semantic": rank_rrf,
    "rank fusion (RRF k=60) of lexical, semantic and recency": rank_rrf_recency,
    "calibrated relevance as the ranking": rank_absolute,
    "default + 0.5 x calibrated relevance": fused(wa=0.5),
    "score fusion, recency relative to the span (recency_span 8)": fused(recency_span=8.0),
}


def learned_variants(rows: list[dict], split: dict[str, set[str]]) -> dict[str, Any]:
    """The learned fusion's rows for the README (code's weights; the features must come
    from a run with the seed's recency, ``--options off``)."""
    from episodic.store.recall_queries import LEARNED_WEIGHTS, RECENCY_SPAN

    w = np.array([LEARNED_WEIGHTS[k] for k in LEARNED_SIGNALS])
    refit = fit_ranker(rows, split["dev"])
    return {
        "learned fusion, seed recency (1 / (1 + days))": learned(w),
        f"learned fusion + recency_span {RECENCY_SPAN:g} (the new default)": learned(
            w, RECENCY_SPAN
        ),
        "learned fusion, similarity only": learned(w, 0.0, 1.0, 0.0),
        "learned fusion relative to the best candidate (not the ideal), refitted": learned(
            refit * 0.5, 4.0, against_ideal=False
        ),
    }


_PHRASE_FIT = (
    ("lexical", 0.738),
    ("semantic", 0.547),
    ("cosine", 0.313),
    ("coverage", 0.308),
    ("passage_coverage", 0.394),
    ("phrase", 0.359),
)
_WORD_FORMS_FIT = (
    ("lexical", 0.735),
    ("semantic", 0.564),
    ("cosine", 0.325),
    ("coverage", 0.4),
    ("passage_coverage", 0.494),
)
_WORD_FORMS_PHRASE_FIT = (
    ("lexical", 0.699),
    ("semantic", 0.548),
    ("cosine", 0.315),
    ("coverage", 0.366),
    ("passage_coverage", 0.438),
    ("phrase", 0.364),
)


#: The fifth pass's fits (``--fit-rerank default+signals``, development half).
_RERANK_PHRASE: tuple[tuple[str, float], ...] = (
    ("lexical", 0.699),
    ("semantic", 0.551),
    ("cosine", 0.316),
    ("coverage", 0.37),
    ("passage_coverage", 0.436),
    ("phrase", 0.345),
)
_RERANK_SPEAKER: tuple[tuple[str, float], ...] = (
    ("lexical", 1.258),
    ("semantic", 1.099),
    ("cosine", 0.633),
    ("coverage", 0.568),
    ("passage_coverage", 0.815),
    ("speaker_coverage", 0.811),
)
_RERANK_BOTH: tuple[tuple[str, float], ...] = (
    ("lexical", 0.6),
    ("semantic", 0.533),
    ("cosine", 0.307),
    ("coverage", 0.265),
    ("passage_coverage", 0.364),
    ("phrase", 0.32),
    ("speaker_coverage", 0.384),
)


def ranking_variants() -> dict[str, Any]:
    """The ranking switches (recall_queries.RankingOptions) a run can flip with
    ``--options``: each is scored by recomputing every candidate's signals with it."""
    from dataclasses import replace

    from episodic.store.recall_queries import (
        DEFAULT_RANKING,
        THIRD_PASS_WEIGHTS,
        RankingOptions,
    )

    # the learned fusion's weights of the second and third passes (refitted in the fourth)
    earlier = dict(weights=THIRD_PASS_WEIGHTS)
    # the third pass's default (before word forms and the weights refitted with them)
    third = replace(DEFAULT_RANKING, word_forms=False, **earlier)
    variants = {
        "off": RankingOptions(),  # every switch off: Recall before this issue
        "default": DEFAULT_RANKING,
        "stop-phrases": RankingOptions(strip_stop_phrases=True),
        "term-weights": RankingOptions(weight_generic_terms=True),
        "head-field-0.2": RankingOptions(head_share=0.2),
        "head-field-0.4": RankingOptions(head_share=0.4),
        "learned": RankingOptions(fusion="learned", **earlier),
        "recency-span-8": RankingOptions(recency_span=8.0),
        "learned+recency-span-8": RankingOptions(fusion="learned", recency_span=8.0, **earlier),
        # the first version's order (seed recency, for --fit-ranker) with every optional
        # signal of the third pass computed, so the fit can try each alone and together
        "off+signals": RankingOptions(passage_depth=3, entity_match=True, feedback=3),
        "off+depth-2": RankingOptions(passage_depth=2),
        "off+depth-5": RankingOptions(passage_depth=5),
        "off+feedback-5": RankingOptions(feedback=5),
        # the second pass's default (before recency from a named time)
        "second-pass": RankingOptions(fusion="learned", recency_span=8.0, **earlier),
        "off+named-time": RankingOptions(named_time_recency=True),
        "third-pass": third,
        # the fourth pass: "default+…" is the third pass's default plus each switch
        "default+word-forms": replace(third, word_forms=True),
        "off+phrase": RankingOptions(phrase=True),
        "off+phrase+word-forms": RankingOptions(phrase=True, word_forms=True),
        # fitted by --fit-extras off+phrase / off+phrase+word-forms (dev half, named-time
        # recency): phrase added, the five signals refitted with word forms on (the new
        # default), and both
        "default+phrase-fit": replace(third, phrase=True, weights=_PHRASE_FIT),
        "default+word-forms-fit": replace(third, word_forms=True, weights=_WORD_FORMS_FIT),
        "default+word-forms+phrase-fit": replace(
            third, word_forms=True, phrase=True, weights=_WORD_FORMS_PHRASE_FIT
        ),
        "default+rm3-3": replace(third, expansion=3),
        "default+rm3-5": replace(third, expansion=5),
        "default+rm3-10": replace(third, expansion=10),
        "default+word-forms+rm3-3": replace(third, word_forms=True, expansion=3),
        # the fifth pass (on a copy re-indexed with the speakers' words): the seed's recency
        # for --fit-extras, then the fitted weights on today's default
        "off+speaker+word-forms": RankingOptions(speaker=True, word_forms=True),
        # today's default with both signals computed, not fused (for --fit-rerank)
        "off+speaker+phrase+word-forms": RankingOptions(speaker=True, phrase=True, word_forms=True),
        "default+signals": replace(DEFAULT_RANKING, phrase=True, speaker=True),
        # the fourth pass's default (before the second look)
        "fourth-pass": replace(DEFAULT_RANKING, phrase=False, rerank_top=0, rerank_weights=()),
    }
    # fitted by --fit-rerank default+signals (dev half): the second look at the top 5
    fitted = {
        "default+phrase-top5": (_RERANK_PHRASE, {"phrase": True}),
        "default+speaker-top5": (_RERANK_SPEAKER, {"speaker": True}),
        "default+speaker+phrase-top5": (_RERANK_BOTH, {"phrase": True, "speaker": True}),
    }
    for name, (weights, switches) in fitted.items():
        if weights:
            variants[name] = replace(
                DEFAULT_RANKING, rerank_top=5, rerank_weights=weights, **switches
            )
    return variants


# -- the learned fusion (recall_queries.LEARNED_WEIGHTS) --------------------------------

#: The signals of the learned fusion, in recall_queries.LEARNED_WEIGHTS' order.
LEARNED_SIGNALS = ("lexical", "semantic", "cosine", "coverage", "passage_coverage")


def _signals(candidates: list[dict], names: tuple[str, ...] = LEARNED_SIGNALS) -> np.ndarray:
    return np.array([[c[k] for k in names] for c in candidates], dtype=float)


#: The signals whose ideal is 1 (relative to the best candidate, or a share of the query's
#: words); the others' ideal is the candidates' best (recall_queries.similarity_sql).
_IDEAL_ONE = ("lexical", "semantic", "coverage", "passage_coverage")


def _days(candidates: list[dict]) -> np.ndarray:
    """Days since each candidate ended, from the seed's recency 1 / (1 + days): the
    features must come from a run with ``recency_span`` 0 (``--options off``)."""
    return np.array([1.0 / max(c["recency"], 1e-12) - 1.0 for c in candidates])


def fit_ranker(
    rows: list[dict],
    dev: set[str],
    l2: float = 1e-2,
    steps: int = 600,
    names: tuple[str, ...] = LEARNED_SIGNALS,
) -> np.ndarray:
    """Listwise logistic regression on the development half: per own question, a softmax
    over its candidates' linear scores, the gold sessions (uniformly) the target; gradient
    ascent on the mean log-likelihood with an L2 penalty. Returns the weights."""
    data = []
    for r in rows:
        if r["kind"] != "own" or r["conversation"] not in dev or not r["candidates"]:
            continue
        gold = np.array([c["label"] in r["gold"] for c in r["candidates"]], dtype=float)
        if gold.any():
            data.append((_signals(r["candidates"], names), gold / gold.sum()))
    w = np.zeros(len(names))
    for _ in range(steps):
        grad = -l2 * w
        for x, target in data:
            s = x @ w
            p = np.exp(s - s.max())
            grad += x.T @ (target - p / p.sum()) / len(data)
        w += 0.5 * grad
    return w


def learned(
    weights: np.ndarray,
    recency_span: float = 0.0,
    ws: float = 0.7,
    wr: float = 0.3,
    against_ideal: bool = True,
    names: tuple[str, ...] = LEARNED_SIGNALS,
    named_times: dict[str, tuple[float, float]] | None = None,
) -> Any:
    """The learned fusion as Recall computes it (exp(score − best score)), plus recency
    scaled like RankingOptions.recency_span (0: the seed's day scale). ``named_times``:
    per question, the window it names as days before it was asked (``named_time_windows``):
    recency 1 / (1 + days outside it), as RankingOptions.named_time_recency."""

    def rank(c: list[dict], question: str | None = None) -> list[str]:
        if not c:
            return []
        x = _signals(c, names)
        s = x @ weights
        # the ideal candidate: best on both relative signals, every query word matched in
        # its document and in one passage, the best cosine (and optional signal) among the
        # candidates
        ideal = x.max(axis=0)
        ideal[[i for i, n in enumerate(names) if n in _IDEAL_ONE]] = 1.0
        similarity = np.exp(s - (ideal @ weights if against_ideal else s.max()))
        similarity[(x[:, 0] <= 0) & (x[:, 1] <= 0)] = 0.0
        days = _days(c)
        if recency_span:
            recency = 1.0 / (1.0 + days / (recency_span * max(days.max(), 1.0)))
        else:
            recency = 1.0 / (1.0 + days)
        if named_times and question in named_times:
            latest, earliest = named_times[question]  # days before the question
            recency = 1.0 / (1.0 + np.maximum(np.maximum(days - earliest, latest - days), 0.0))
        score = ws * similarity + wr * recency
        order = sorted(range(len(c)), key=lambda i: (-score[i], days[i]))
        return [c[i]["label"] for i in order]

    rank.wants_question = True  # type: ignore[attr-defined]
    return rank


def choose_ranker(rows: list[dict], split: dict[str, set[str]]) -> str:
    """Fits the weights on the development half, then chooses the temperature (the scale
    of the weights) and recency_span on the same half by MRR with the seed's weights
    (0.7 / 0.3); prints both halves of every grid point for the README."""
    w = fit_ranker(rows, split["dev"])
    lines = [f"fitted on dev: {dict(zip(LEARNED_SIGNALS, np.round(w, 3).tolist(), strict=True))}"]
    best: tuple[float, float, float] = (-1.0, 0.0, 0.0)
    for t in (0.25, 0.5, 0.75, 1.0):
        for span in (0.0, 1.0, 2.0, 4.0, 8.0):
            cells = score_halves(rows, split, learned(w * t, span))
            lines.append(f"temperature {t} recency_span {span}: " + " ".join(cells))
            if float(cells[2]) > best[0]:
                best = (float(cells[2]), t, span)
    _, t, span = best
    lines.append(
        f"chosen on dev MRR: temperature {t}, recency_span {span}; LEARNED_WEIGHTS = "
        f"{dict(zip(LEARNED_SIGNALS, np.round(w * t, 3).tolist(), strict=True))}"
    )
    return "\n".join(lines)


def choose_extras(
    rows: list[dict],
    split: dict[str, set[str]],
    named_times: dict[str, tuple[float, float]] | None = None,
) -> str:
    """The third pass: each optional signal (ranking_options.EXTRA_SIGNALS present in the
    features) alone, then together, added to the learned fusion: weights fitted on the
    development half, temperature and recency_span chosen there by MRR (as
    :func:`choose_ranker`), both halves printed. The features must come from a run with
    the seed's recency and the switches on (``--options off+signals``)."""
    present = [n for n in EXTRA_SIGNALS if rows and n in _first_candidate(rows)]
    groups: dict[str, tuple[str, ...]] = {"base (LEARNED_SIGNALS)": ()}
    if "cosine_depth" in present:
        groups["passage depth: cosine_depth + passage_depth"] = ("cosine_depth", "passage_depth")
        groups["passage depth: cosine_depth only"] = ("cosine_depth",)
        groups["passage depth: passage_depth only"] = ("passage_depth",)
    for name in ("entity_match", "feedback_cosine", "phrase", "speaker_coverage"):
        if name in present:
            groups[name] = (name,)
    groups["all present"] = tuple(present)
    lines = [
        "| signals added | weights (dev) | temperature, span | dev R@1 / R@5 / MRR "
        "| held out R@1 / R@5 / MRR |",
        "|---|---|---|---|---|",
    ]
    for label, extra in groups.items():
        names = (*LEARNED_SIGNALS, *extra)
        w = fit_ranker(rows, split["dev"], names=names)
        best: tuple[float, float, float, list[str]] = (-1.0, 0.0, 0.0, [])
        for t in (0.25, 0.5, 0.75, 1.0):
            for span in (0.0, 4.0, 8.0):
                cells = score_halves(
                    rows, split, learned(w * t, span, names=names, named_times=named_times)
                )
                if float(cells[2]) > best[0]:
                    best = (float(cells[2]), t, span, cells)
        _, t, span, cells = best
        weights = dict(zip(names, np.round(w * t, 3).tolist(), strict=True))
        lines.append(
            f"| {label} | {weights} | {t}, {span:g} | {' / '.join(cells[:3])} "
            f"| {' / '.join(cells[3:])} |"
        )
    return "\n".join(lines)


def choose_rerank(rows: list[dict], split: dict[str, set[str]]) -> str:
    """The fifth pass: the learned fusion with the proximity and speaker signals (each,
    then both) fitted on the development half on features of Recall's default order with
    the signals computed (``--options default+signals``: its recency as Recall computed
    it), the temperature chosen there by MRR; printed on both halves fused over the whole
    list and as a second look at the default's top k (recall_queries.reorder_top)."""
    from dataclasses import replace

    from episodic.store.recall_queries import DEFAULT_RANKING, reorder_top

    def ordered(weights: dict[str, float], top: int) -> Any:
        options = replace(
            DEFAULT_RANKING,
            phrase=True,
            speaker=True,
            rerank_top=top,
            rerank_weights=tuple(weights.items()),
        )

        def rank(c: list[dict]) -> list[str]:
            return [x["label"] for x in reorder_top(c, options, 0.7, 0.3)]

        return rank

    lines = [
        f"Recall's default: {' / '.join(score_halves(rows, split))}",
        "| signals | weights (dev) | fused over | dev R@1 / R@5 / MRR | held out R@1 / R@5 / MRR |",
        "|---|---|---|---|---|",
    ]
    groups = {"phrase": ("phrase",), "speaker": ("speaker_coverage",)}
    groups["both"] = ("phrase", "speaker_coverage")
    for label, extra in groups.items():
        names = (*LEARNED_SIGNALS, *extra)
        w = fit_ranker(rows, split["dev"], names=names)
        best: tuple[float, float] = (-1.0, 0.0)
        for t in (0.25, 0.5, 0.75, 1.0):
            weights = dict(zip(names, (w * t).tolist(), strict=True))
            mrr = float(score_halves(rows, split, ordered(weights, 10**6))[2])
            if mrr > best[0]:
                best = (mrr, t)
        weights = dict(zip(names, np.round(w * best[1], 3).tolist(), strict=True))
        for top in (10**6, 3, 5, 10):
            cells = score_halves(rows, split, ordered(weights, top))
            where = "every candidate" if top == 10**6 else f"the default's top {top}"
            lines.append(
                f"| {label} | {weights} | {where} | {' / '.join(cells[:3])} "
                f"| {' / '.join(cells[3:])} |"
            )
    return "\n".join(lines)


def named_time_windows(conversations: list[locomo.Conversation]) -> dict[str, tuple[float, float]]:
    """Per question that names when something happened (read, not applied: the read
    path's ``named_time``), the window as (days before the question of its end, of its
    start)."""
    from services.recall import domain

    out = {}
    for conv in conversations:
        for q in conv.questions:
            u = domain.read_time(q.question, q.asked_at, False)
            if u is None or u.applied or u.start is None or u.end is None or u.ordinal:
                continue
            out[q.question] = (
                (q.asked_at - u.end).total_seconds() / 86400,
                (q.asked_at - u.start).total_seconds() / 86400,
            )
    return out


def _first_candidate(rows: list[dict]) -> dict:
    return next(c for r in rows for c in r["candidates"])


def score_halves(rows: list[dict], split: dict[str, set[str]], fn: Any = None) -> list[str]:
    """R@1, R@5 and MRR of the own questions on the development half, then the held-out
    half (six table cells), ranked by ``fn`` (None: Recall's own order)."""
    cells = []
    for half in ("dev", "held-out"):
        s = locomo.Scores()
        for r in rows:
            if r["kind"] == "own" and r["conversation"] in split[half]:
                if fn is None:
                    got = rank_default(r["candidates"])
                elif getattr(fn, "wants_question", False):  # learned(..., named_times=…)
                    got = fn(r["candidates"], r["question"])
                else:
                    got = fn(r["candidates"])
                s.add(r["category"], got, tuple(r["gold"]))
        o = s.overall()
        cells += [f"{o['R@1']:.3f}", f"{o['R@5']:.3f}", f"{o['MRR']:.3f}"]
    return cells


def score_options(caches: dict[str, Path], split: dict[str, set[str]]) -> str:
    """One row per ranking switch (or index variant): Recall's own order on its features."""
    lines = [
        "| variant | dev R@1 | dev R@5 | dev MRR | held-out R@1 | held-out R@5 | held-out MRR "
        "| p50 ms | p99 ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, path in caches.items():
        rows = json.loads(path.read_text())
        ms = sorted(r["ms"] for r in rows if r["kind"] == "own")
        cells = [
            *score_halves(rows, split),
            f"{ms[len(ms) // 2]:.1f}",
            f"{ms[int(len(ms) * 0.99)]:.1f}",
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def score_variants(
    rows: list[dict], split: dict[str, set[str]], variants: dict[str, Any] | None = None
) -> str:
    lines = [
        "| variant | dev R@1 | dev R@5 | dev MRR | held-out R@1 | held-out R@5 | held-out MRR |"
    ]
    lines.append("|---|---|---|---|---|---|---|")
    for name, fn in (variants or VARIANTS).items():
        cells = []
        for half in ("dev", "held-out"):
            s = locomo.Scores()
            for r in rows:
                if r["kind"] == "own" and r["conversation"] in split[half]:
                    s.add(r["category"], fn(r["candidates"]), tuple(r["gold"]))
            o = s.overall()
            cells += [f"{o['R@1']:.3f}", f"{o['R@5']:.3f}", f"{o['MRR']:.3f}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
