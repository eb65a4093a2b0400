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
"""

from __future__ import annotations

import math

__all__ = [
    "COEFFICIENTS",
    "INTERCEPT",
    "RECOMMENDED_MIN_RELEVANCE",
    "relevance",
    "relevance_sql",
]

#: Logistic intercept and weights of (cosine, coverage, passage_coverage); see the module
#: docstring for how they were fitted. Refitted (2026-12-01) once the query's irregular word
#: forms counted in coverage and the summaries' sentences were chosen by TF-IDF (before:
#: -5.086, (6.537, 3.874, 4.526)): coverage rose for foreign questions too, and held-out
#: abstention at 0.6 had fallen to 80.7 % (docs/benchmarks.md "Summariser, fifth pass").
INTERCEPT = -5.109
COEFFICIENTS = (6.648, 3.764, 4.373)
#: The threshold the README recommends for ``min_relevance``, chosen on the development
#: half among 0.1, 0.2, … 0.9: the highest at which real questions lose at most 1 point of
#: R@5 (dev: 85.0 % of foreign questions get nothing, R@5 .910 → .907; 0.7 lost 1.6
#: points). Held out: 82.5 %, R@5 .925 → .919.
RECOMMENDED_MIN_RELEVANCE = 0.6


def relevance(cosine: float, coverage: float, passage_coverage: float) -> float:
    """The calibrated relevance of one episode (the SQL of :func:`relevance_sql`, in Python)."""
    z = INTERCEPT + sum(
        w * x for w, x in zip(COEFFICIENTS, (cosine, coverage, passage_coverage), strict=True)
    )
    return 1.0 / (1.0 + math.exp(-z))


def relevance_sql(cosine: str, coverage: str, passage_coverage: str) -> str:
    """The same as a SQL expression over three float8 expressions."""
    w_cos, w_cov, w_pass = COEFFICIENTS
    z = (
        f"({INTERCEPT!r} + {w_cos!r} * ({cosine}) + {w_cov!r} * ({coverage}) "
        f"+ {w_pass!r} * ({passage_coverage}))"
    )
    return f"(1.0 / (1.0 + exp(-greatest(least({z}, 50.0), -50.0))))::float8"
