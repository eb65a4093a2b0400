"""An absolute relevance for a recalled episode: how likely it is to answer the query, in
[0, 1], comparable across queries and datasets.

Ranking (recall_queries) scores each signal *relative to the best candidate of the request*,
which orders episodes well but cannot say "nothing here fits": a lone unrelated episode is
its own best match. Relevance uses only absolute signals of one episode:

- ``cosine``: the best cosine between the query's embedding and the episode's summary or any
  chunk of its thread (clipped at 0) — on the embedder's own scale;
- ``coverage``: the share of the query's distinct lexemes (stop words already dropped by
  the text-search configuration) that occur anywhere in the episode's document;
- ``passage_coverage``: the same share for the episode's best chunk (a question whose words
  all occur in one exchange is better matched than one whose words are scattered).

and maps them through a logistic curve, ``1 / (1 + exp(-(b0 + b·x)))``. The coefficients
below were fitted (bench/recall_lab.py, ``--fit``: logistic regression, L2 1e-3, Newton
steps, classes weighted equally) on the development half of LoCoMo (conversations at even positions of
locomo10.jsonl: conv-26, conv-41, conv-43, conv-47, conv-49), with the offline defaults
(MiniLM, english configuration): positives are the gold episodes of each question asked of
its own conversation, negatives every episode of another conversation's dataset asked the
same question. They are tied to the embedder: another embedder (or a multilingual one) has
another cosine scale, and the curve should be refitted for it.

``min_relevance`` on RecallRequest drops episodes below a threshold; the recommended value
is :data:`RECOMMENDED_MIN_RELEVANCE` (README "Recall quality").

One curve per embedder family (:data:`CURVES`, chosen by :func:`curve_for` from the name
of the embedder Recall runs): the MiniLM curve above, and one fitted the same way for
multilingual-e5-small on the same store re-embedded with it (``episodic reindex --reembed``;
docs/benchmarks.md "Moving a store to another embedding model"). An embedder without a
curve of its own (an OpenAI model) gets MiniLM's, which the README says to re-check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "COEFFICIENTS",
    "CURVES",
    "E5",
    "INTERCEPT",
    "MINILM",
    "RECOMMENDED_MIN_RELEVANCE",
    "Curve",
    "curve_for",
    "relevance",
    "relevance_sql",
]


@dataclass(frozen=True)
class Curve:
    """A logistic relevance curve fitted for one embedder's cosine scale, and the
    ``min_relevance`` recommended with it: the highest of 0.1, 0.2, … 0.9 at which real
    questions of the development half lose at most 1 point of R@5."""

    intercept: float
    coefficients: tuple[float, float, float]  # (cosine, coverage, passage_coverage)
    recommended_min_relevance: float


#: MiniLM (the default embedder). Refitted (2026-12-01) once the query's irregular word
#: forms counted in coverage and the summaries' sentences were chosen by TF-IDF (before:
#: -5.086, (6.537, 3.874, 4.526)): coverage rose for foreign questions too, and held-out
#: abstention at 0.6 had fallen to 80.7 % (docs/benchmarks.md "Summariser, fifth pass").
#: At 0.6 (dev): 85.0 % of foreign questions get nothing, R@5 .910 → .907 (0.7 lost 1.6
#: points). Held out: 82.5 %, R@5 .925 → .919.
MINILM = Curve(-5.109, (6.648, 3.764, 4.373), 0.6)

#: multilingual-e5-small (2026-12-01, the LoCoMo store re-embedded with it). e5's cosines
#: sit in a narrow high band for related and unrelated text alike, so the fit leans on the
#: words matched (cosine weight 3.1 against MiniLM's 6.6) and separates less: at 0.3 (dev)
#: 54.8 % of foreign questions get nothing, R@5 .927 → .917 (0.4 lost 1.2 points); held
#: out 56.9 %, .936 → .924. MiniLM's curve on e5 gave 25.8 % at 0.6.
E5 = Curve(-6.242, (3.074, 4.771, 5.367), 0.3)

#: Curves by embedder family: the part of ``Embedder.name`` before the colon.
CURVES: dict[str, Curve] = {"minilm": MINILM, "e5": E5}


def curve_for(embedder_name: str) -> Curve:
    """The curve fitted for the embedder called ``embedder_name`` (MiniLM's if none)."""
    return CURVES.get(embedder_name.partition(":")[0], MINILM)


#: MiniLM's curve as module constants (what the bench tools print and refit).
INTERCEPT = MINILM.intercept
COEFFICIENTS = MINILM.coefficients
#: The threshold the README recommends for ``min_relevance`` with the default embedder.
RECOMMENDED_MIN_RELEVANCE = MINILM.recommended_min_relevance


def relevance(
    cosine: float, coverage: float, passage_coverage: float, curve: Curve = MINILM
) -> float:
    """The calibrated relevance of one episode (the SQL of :func:`relevance_sql`, in Python)."""
    z = curve.intercept + sum(
        w * x for w, x in zip(curve.coefficients, (cosine, coverage, passage_coverage), strict=True)
    )
    return 1.0 / (1.0 + math.exp(-z))


def relevance_sql(cosine: str, coverage: str, passage_coverage: str, curve: Curve = MINILM) -> str:
    """The same as a SQL expression over three float8 expressions."""
    w_cos, w_cov, w_pass = curve.coefficients
    z = (
        f"({curve.intercept!r} + {w_cos!r} * ({cosine}) + {w_cov!r} * ({coverage}) "
        f"+ {w_pass!r} * ({passage_coverage}))"
    )
    return f"(1.0 / (1.0 + exp(-greatest(least({z}, 50.0), -50.0))))::float8"
