"""The recall lab's relevance and abstention: the relevance curve (``fit``) and the match
curve (``fit_match``) fitted on the development half by logistic regression, and what a
threshold or a pair of them leaves of foreign, adversarial and real questions on both
halves (``abstention_figures``, ``abstention``, ``choose_abstention``).
``bench.quality.language_curves`` fits its curves with the same functions."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.harness import locomo
from bench.quality.lab.ranking import rank_default

#: The curve's inputs: the episode's own three signals, then their best over the request's
#: candidates (``episodic.store.relevance``). The lab's rows hold every candidate of a
#: LoCoMo dataset (Recall asked for MAX_CONTEXT_EPISODES), so the best over them is the
#: statement's best over everything it scored.
_SIGNALS = ("cosine", "coverage", "passage_coverage")


def curve_inputs(c: dict) -> list[float]:
    """The curve's inputs for candidate ``c`` (see ``_SIGNALS``); ``c["best"]`` is set by
    :func:`with_best`."""
    return [c[k] for k in _SIGNALS] + list(c["best"])


def with_best(rows: list[dict]) -> list[dict]:
    """Each candidate's ``best``: the request's best of each signal (its context)."""
    for r in rows:
        best = tuple(max((c[k] for c in r["candidates"]), default=0.0) for k in _SIGNALS)
        for c in r["candidates"]:
            c["best"] = best
    return rows


def fit(rows: list[dict], dev: set[str], l2: float = 1e-3) -> tuple[float, list[float]]:
    """The relevance curve: logistic regression on the development half, gold episodes of
    own questions positives, every candidate of a foreign question a negative."""
    xs, ys = [], []
    for r in rows:
        if r["conversation"] not in dev:
            continue
        if r["kind"] == "own":
            for c in r["candidates"]:
                if c["label"] in r["gold"]:
                    xs.append(curve_inputs(c))
                    ys.append(1.0)
        elif r["kind"] == "foreign":
            for c in r["candidates"]:
                xs.append(curve_inputs(c))
                ys.append(0.0)
    return _logistic(xs, ys, l2)


def request_best(r: dict) -> list[float]:
    """The request's best of each signal over its candidates (what the match curve reads)."""
    return [max((c[k] for c in r["candidates"]), default=0.0) for k in _SIGNALS]


def fit_match(rows: list[dict], dev: set[str], l2: float = 1e-3) -> tuple[float, list[float]]:
    """The match curve (does the dataset hold an answer at all?): logistic regression on the
    development half over each request's best signals, a question asked of its own
    conversation a positive, the same question asked of another's a negative."""
    chosen = [r for r in rows if r["conversation"] in dev and r["kind"] in ("own", "foreign")]
    return _logistic(
        [request_best(r) for r in chosen], [float(r["kind"] == "own") for r in chosen], l2
    )


def _logistic(xs: list[list[float]], ys: list[float], l2: float) -> tuple[float, list[float]]:
    """Intercept and weights of an L2-regularised logistic regression (Newton steps),
    the two classes weighted equally."""
    x = np.hstack([np.ones((len(xs), 1)), np.array(xs)])
    y = np.array(ys)
    # balance the classes so the curve is not dominated by the many negatives
    w = np.where(y == 1, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    beta = np.zeros(x.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-x @ beta))
        grad = x.T @ (w * (p - y)) / len(y) + l2 * np.r_[0, beta[1:]]
        hess = (x.T * (w * p * (1 - p))) @ x / len(y) + l2 * np.diag(
            np.r_[0, np.ones(len(beta) - 1)]
        )
        beta -= np.linalg.solve(hess, grad)
    return float(beta[0]), [float(b) for b in beta[1:]]


def abstention_figures(
    rows: list[dict],
    split: dict[str, set[str]],
    threshold: float,
    rel: Any,
    match: Any = None,
    min_match: float = 0.0,
    named_times: dict[str, tuple[float, float]] | None = None,
) -> dict[str, dict[str, float]]:
    """Per half, unrounded: the shares of foreign and adversarial questions left with
    nothing, of real questions left with nothing, and R@5 / MRR of the real ones before and
    after, at ``threshold`` (and, with the ``match`` curve, ``min_match``: a request whose
    match is below it keeps nothing but the named time's episodes). ``named_times`` (the
    questions that name a time, :func:`named_time_windows`): as the Recall service does, an
    episode inside the named time is kept whatever its relevance — its recency is then
    exactly 1 (the features' default options rank recency from the named time); without
    it the figures overstate abstention and the R@5 lost."""
    out = {}
    for half in ("dev", "held-out"):
        chosen = [r for r in rows if r["conversation"] in split[half]]
        foreign = [r for r in chosen if r["kind"] == "foreign"]
        adv = [r for r in chosen if r["kind"] == "adversarial"]
        own = [r for r in chosen if r["kind"] == "own"]

        def kept(r: dict) -> list[dict]:
            named = named_times is not None and r["question"] in named_times
            gated = match is not None and match(request_best(r)) < min_match
            return [
                c
                for c in r["candidates"]
                if (not gated and rel(c) >= threshold) or (named and c["recency"] >= 1.0 - 1e-9)
            ]

        before, after = locomo.Scores(), locomo.Scores()
        for r in own:
            before.add(r["category"], rank_default(r["candidates"]), tuple(r["gold"]))
            after.add(r["category"], rank_default(kept(r)), tuple(r["gold"]))
        b, a = before.overall(), after.overall()
        out[half] = {
            "foreign": sum(not kept(r) for r in foreign) / max(len(foreign), 1),
            "foreign_n": len(foreign),
            "adversarial": sum(not kept(r) for r in adv) / max(len(adv), 1),
            "adversarial_n": len(adv),
            "own_empty": sum(not kept(r) for r in own) / max(len(own), 1),
            "r5_before": b["R@5"],
            "r5_after": a["R@5"],
            "mrr_before": b["MRR"],
            "mrr_after": a["MRR"],
        }
    return out


def abstention(
    rows: list[dict],
    split: dict[str, set[str]],
    threshold: float,
    rel: Any,
    match: Any = None,
    min_match: float = 0.0,
    named_times: dict[str, tuple[float, float]] | None = None,
) -> str:
    """:func:`abstention_figures` as lines, one per half."""
    parts = []
    for half, f in abstention_figures(
        rows, split, threshold, rel, match, min_match, named_times
    ).items():
        parts.append(
            f"{half}: foreign abstained {f['foreign']:.3f} ({f['foreign_n']}), adversarial "
            f"abstained {f['adversarial']:.3f} ({f['adversarial_n']}), real questions with "
            f"nothing {f['own_empty']:.3f}, R@5 {f['r5_before']:.3f} -> {f['r5_after']:.3f} "
            f"(lost {100 * (f['r5_before'] - f['r5_after']):.2f} points), "
            f"MRR {f['mrr_before']:.3f} -> {f['mrr_after']:.3f}"
        )
    return "\n".join(parts)


def choose_abstention(
    rows: list[dict],
    split: dict[str, set[str]],
    rel: Any,
    match: Any,
    named_times: dict[str, tuple[float, float]],
    max_lost: float = 1.0,
) -> str:
    """The rule behind ``relevance.Abstention`` and ``recommended_min_relevance``, as a
    table: for each value 0.01 apart, the figures of ``min_relevance`` alone and of both
    thresholds at that value; the chosen value of each is the highest at which the
    development half loses at most ``max_lost`` points of R@5, computed exactly."""
    lines = [
        "| value | min_relevance alone: foreign empty dev / held out, R@5 lost dev / held out "
        "| both (abstain): the same |",
        "|---|---|---|",
    ]
    chosen: dict[str, float] = {}
    for v in [x / 100 for x in range(1, 61)]:
        cells = []
        for name, figures in (
            ("alone", abstention_figures(rows, split, v, rel, None, 0.0, named_times)),
            ("both", abstention_figures(rows, split, v, rel, match, v, named_times)),
        ):
            lost = {h: 100 * (f["r5_before"] - f["r5_after"]) for h, f in figures.items()}
            if lost["dev"] <= max_lost + 1e-9:
                chosen[name] = v
            cells.append(
                f"{100 * figures['dev']['foreign']:.1f} % / "
                f"{100 * figures['held-out']['foreign']:.1f} %, "
                f"{lost['dev']:.3f} / {lost['held-out']:.3f}"
            )
        lines.append(f"| {v:.2f} | {cells[0]} | {cells[1]} |")
    lines.append(
        f"highest with at most {max_lost} point of R@5 lost on dev: min_relevance alone "
        f"{chosen.get('alone')}, both {chosen.get('both')}"
    )
    return "\n".join(lines)
