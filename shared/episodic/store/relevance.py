"""An absolute relevance for a recalled episode: how likely it is to answer the query, in
[0, 1], comparable across queries and datasets.

Ranking (recall_queries) scores each signal *relative to the best candidate of the request*,
which orders episodes well but cannot say "nothing here fits": a lone unrelated episode is
its own best match. Relevance reads absolute signals instead — three of the episode:

- ``cosine``: the best cosine between the query's embedding and the episode's summary or any
  chunk of its thread (clipped at 0) — on the embedder's own scale;
- ``coverage``: the share of the query's distinct lexemes (stop words already dropped by
  the text-search configuration) that occur anywhere in the episode's document;
- ``passage_coverage``: the same share for the episode's best chunk (a question whose words
  all occur in one exchange is better matched than one whose words are scattered);

and the same three signals' best over everything the request scored (its context: does
the dataset hold anything that fits at all?) — and maps them through a logistic curve,
``1 / (1 + exp(-(b0 + b·x + c·best)))``. The context helps a threshold tell a weak
answer from a stranger's best match: a question asked of its own conversation nearly
always has one strong match even when the episode that answers it matches weakly (a
multi-hop or temporal question), while a question asked of a stranger's has none. Without
it (before 2026-12-02) keeping the weak gold episodes forced thresholds that left a sixth
(MiniLM) to nearly half (e5) of foreign questions answered; with it, fewer (the figures
are below each curve). So an episode's relevance is absolute in its inputs but depends on
its request's best match: the same episode and question get the same relevance in any
dataset whose best match is the same (alone, an episode is its own best match).

The coefficients were fitted (bench/quality/recall_lab.py, ``--fit``: logistic regression, L2
1e-3, Newton steps, classes weighted equally) on the development half of LoCoMo
(conversations at even positions of locomo10.jsonl: conv-26, conv-41, conv-43, conv-47,
conv-49): positives are the gold episodes of each question asked of its own conversation,
negatives every episode of another conversation's dataset asked the same question. They
are tied to the embedder: another embedder (or a multilingual one) has another cosine
scale, and the curve should be refitted for it.

``min_relevance`` on RecallRequest drops episodes below a threshold; the recommended value
is the curve's ``recommended_min_relevance`` (docs/concepts/recall.md).

A second curve (:class:`MatchCurve`) reads only the request's best signals: how likely the
dataset holds an answer at all. ``min_match`` on RecallRequest leaves a request whose match
is below it with nothing, and ``abstain`` applies both thresholds the curve recommends
together (:class:`Abstention`): asked "is anything here?" first, a question keeps the weak
episodes of a real answer that a per-episode threshold alone must cut to leave strangers'
questions empty.

Both curves lean on the words matched, because LoCoMo's questions nearly always share a
name or a place with what answers them: a paraphrase that shares no content word rests on
the cosine alone and is usually judged not to fit (docs/concepts/recall.md, "What abstention cannot see").

One curve per embedder family (:data:`CURVES`, chosen by :func:`curve_for` from the name
of the embedder Recall runs): MiniLM's (the offline default, english configuration), and
one fitted the same way for multilingual-e5-small on the same store re-embedded with it
(``episodic reindex --reembed``; docs/benchmarks.md "Moving a store to another embedding
model"). An embedder without a curve of its own (an OpenAI model) gets MiniLM's, which the
README says to re-check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "COSINE_SCALES",
    "CURVES",
    "E5",
    "E5_OTHER_LANGUAGES",
    "E5_SCALE",
    "FITTED_CONFIG",
    "MINILM",
    "MINILM_SCALE",
    "OTHER_LANGUAGE_CURVES",
    "RECOMMENDED_MIN_RELEVANCE",
    "Abstention",
    "CosineScale",
    "Curve",
    "MatchCurve",
    "cosine_scale_for",
    "curve_for",
    "fitted_curve",
    "on_reference_scale",
    "on_reference_scale_sql",
    "other_language_curve",
    "relevance",
    "relevance_sql",
    "request_match",
    "request_match_sql",
]


#: The text-search configuration the curves of :data:`CURVES` were fitted in (LoCoMo is
#: English): ``abstain`` applies them only to datasets ranked in it. On the hand-written
#: French, Spanish and German set they left nearly every foreign question empty but cut a
#: third of the real answers (docs/benchmarks.md "Abstention in other languages"); datasets
#: in other configurations are judged by :data:`OTHER_LANGUAGE_CURVES` where the model has
#: one. A dataset nobody set a language for is detected from its text (store/languages.py),
#: so one written in French leaves this configuration with its first episodes.
FITTED_CONFIG = "english"


@dataclass(frozen=True)
class MatchCurve:
    """How likely the dataset holds an answer to the query at all, read from the request's
    best (cosine, coverage, passage_coverage) alone: ``1 / (1 + exp(-(b0 + b·best)))``.

    A second decision beside the episodes' relevance: below ``min_match`` a request gets
    nothing at all, while above it an answerable question keeps its weaker episodes too (a
    multi-hop question's second session), which one threshold on each episode cannot do.
    Fitted on the development half of LoCoMo with each question asked of its own
    conversation a positive and of the next conversation a negative (``python -m
    bench.quality.recall_lab --fit``, ``fit_match``)."""

    intercept: float
    #: Weights of the request's best (cosine, coverage, passage_coverage).
    coefficients: tuple[float, float, float]


@dataclass(frozen=True)
class Abstention:
    """What ``abstain`` stands for with one embedder: both thresholds, chosen on the
    development half as the highest value (0.01 apart, the same for both) at which real
    questions lose at most 1 point of R@5 (computed exactly, not from rounded figures;
    the service's named-time exception applied)."""

    min_relevance: float
    min_match: float


@dataclass(frozen=True)
class Curve:
    """A logistic relevance curve fitted for one embedder's cosine scale, and the
    ``min_relevance`` recommended with it: the highest of 0.1, 0.2, … 0.9 at which real
    questions of the development half, asked through the Recall service, lose at most 1
    point of R@5 (``python -m bench.quality.recall_lab --confirm --confirm-at T``)."""

    intercept: float
    #: Weights of the episode's (cosine, coverage, passage_coverage).
    coefficients: tuple[float, float, float]
    #: Weights of the same signals' best over the request's candidates (its context).
    best_coefficients: tuple[float, float, float]
    recommended_min_relevance: float
    #: The request-level curve fitted for the same embedder (None: not fitted; nothing is
    #: then left out on its account).
    match: MatchCurve | None = None
    #: What ``abstain`` applies (None: ``recommended_min_relevance`` alone).
    abstain: Abstention | None = None

    @property
    def abstention(self) -> Abstention:
        """The thresholds ``abstain`` stands for with this curve."""
        return self.abstain or Abstention(self.recommended_min_relevance, 0.0)


#: MiniLM (the default embedder), fitted 2026-12-01 on the LoCoMo lab store built with that
#: day's defaults (``python -m bench.quality.recall_lab --data-dir LAB --fit``). Through the Recall
#: service at 0.4: 84.4 % of foreign questions get nothing on the development half, R@5
#: .931 → .925; held out 82.4 %, .945 → .941. The curve without the context on the same
#: store: 83.8 % / 81.9 % at its recommended 0.6 for R@5 lost 1.0 / 0.5 points, 79.1 % /
#: 76.9 % at 0.5 (docs/benchmarks.md "Abstention beside the request's best match").
#: Its match curve and ``abstain`` (2026-12-02, the same store): the request left empty
#: below a match of 0.29 (and episodes below a relevance of 0.29): 87.7 % / 84.7 % of
#: foreign questions get nothing, R@5 lost 0.89 / 0.40 points (docs/benchmarks.md "A gate
#: on the request's best match").
MINILM = Curve(
    -7.756,
    (4.587, 2.453, 2.957),
    (4.13, 2.419, 2.491),
    0.4,
    match=MatchCurve(-7.004, (6.142, 3.973, 4.498)),
    abstain=Abstention(min_relevance=0.29, min_match=0.29),
)

#: multilingual-e5-small (the same store re-embedded with it). e5's cosines sit in a narrow
#: high band for related and unrelated text alike, so the fit leans on the words matched
#: and separates less. Through the Recall service at 0.3: 74.2 % of foreign questions get
#: nothing on the development half, R@5 .927 → .917; held out 71.7 %, .936 → .935. The
#: curve without the context: 55.9 % / 56.5 % at 0.3.
#: Its match curve and ``abstain``: through the service 79.5 % / 77.3 % empty, R@5 lost
#: 0.8 / 0.1 points, against 74.2 % / 71.7 % for min_relevance 0.3 alone.
E5 = Curve(
    -9.577,
    (2.351, 3.169, 3.744),
    (2.036, 3.242, 3.217),
    0.3,
    match=MatchCurve(-6.988, (1.617, 4.986, 5.616)),
    abstain=Abstention(min_relevance=0.2, min_match=0.2),
)

#: Curves by embedder family: the part of ``Embedder.name`` before the colon.
CURVES: dict[str, Curve] = {"minilm": MINILM, "e5": E5}

#: multilingual-e5-small on datasets in another language than English (the model such a
#: dataset is embedded with by default), fitted 2026-12-05 (``python -m
#: bench.quality.language_curves``) on both hand-written sets of bench/data: the long sessions in
#: French, Spanish and German and the short ones in seven languages, positives each
#: question's gold session, negatives a same-language stranger's. Curves fitted on the long
#: set alone did not carry over to the short one (its questions paraphrase: they share
#: almost no word with the session, and the fit leaned on words), cutting 90 % of its real
#: answers; fitted on both, the curve rests on the cosine and ``abstain`` is the highest
#: value at which real questions of each set lose at most 1 point of R@5. It judges
#: weakly, because e5's cosines barely separate a paraphrase from a stranger's everyday
#: talk: 4.2 % of the long set's and 11.6 % of the short set's foreign questions get
#: nothing (held-out halves of the short set's users: 1.8 % and 16.1 %, R@5 lost 0 and 3.6
#: points). English datasets keep :data:`E5` (or :data:`MINILM`).
E5_OTHER_LANGUAGES = Curve(
    -10.181,
    (6.976, 2.441, 2.048),
    (4.625, -0.167, -0.088),
    0.27,
    match=MatchCurve(-5.886, (6.146, 2.081, 1.715)),
    abstain=Abstention(min_relevance=0.27, min_match=0.27),
)

#: Curves for datasets ranked in another text-search configuration than
#: :data:`FITTED_CONFIG`, by embedder family. A family without one (MiniLM, English-only)
#: keeps every episode there under ``abstain``: its English curves would misjudge them.
OTHER_LANGUAGE_CURVES: dict[str, Curve] = {"e5": E5_OTHER_LANGUAGES}


def fitted_curve(embedder_name: str) -> Curve | None:
    """The curve fitted for the embedder called ``embedder_name``, if one was."""
    return CURVES.get(embedder_name.partition(":")[0])


def other_language_curve(embedder_name: str) -> Curve | None:
    """The curve fitted for the embedder called ``embedder_name`` on datasets in other
    languages than English, if one was (:data:`OTHER_LANGUAGE_CURVES`)."""
    return OTHER_LANGUAGE_CURVES.get(embedder_name.partition(":")[0])


def curve_for(embedder_name: str) -> Curve:
    """The curve fitted for the embedder called ``embedder_name`` (MiniLM's if none)."""
    return fitted_curve(embedder_name) or MINILM


#: The threshold the README recommends for ``min_relevance`` with the default embedder.
RECOMMENDED_MIN_RELEVANCE = MINILM.recommended_min_relevance

Signals = tuple[float, float, float]  # (cosine, coverage, passage_coverage)


def relevance(episode: Signals, best: Signals | None = None, curve: Curve = MINILM) -> float:
    """The calibrated relevance of one episode from its signals and their best over its
    request's candidates (``best``; None: the episode alone, its own best) — the SQL of
    :func:`relevance_sql`, in Python."""
    return _logistic(
        curve.intercept,
        (*curve.coefficients, *curve.best_coefficients),
        (*episode, *(episode if best is None else best)),
    )


def relevance_sql(episode: tuple[str, str, str], best: tuple[str, str, str], curve: Curve) -> str:
    """The same as a SQL expression: ``episode`` the three float8 expressions of an
    episode's signals, ``best`` those of their best over the request (window maxima)."""
    return _logistic_sql(
        curve.intercept, (*curve.coefficients, *curve.best_coefficients), (*episode, *best)
    )


def request_match(best: Signals, curve: Curve) -> float:
    """How likely the dataset holds an answer, from the request's best signals
    (:class:`MatchCurve`); 1.0 with a curve that has none, so nothing is left out."""
    if curve.match is None:
        return 1.0
    return _logistic(curve.match.intercept, curve.match.coefficients, best)


def _logistic(intercept: float, weights: tuple[float, ...], inputs: tuple[float, ...]) -> float:
    z = intercept + sum(w * x for w, x in zip(weights, inputs, strict=True))
    return 1.0 / (1.0 + math.exp(-z))


def request_match_sql(best: tuple[str, str, str], curve: Curve) -> str:
    """:func:`request_match` as a SQL expression of the request's best signals."""
    if curve.match is None:
        return "1.0::float8"
    return _logistic_sql(curve.match.intercept, curve.match.coefficients, best)


def _logistic_sql(intercept: float, weights: tuple[float, ...], inputs: tuple[str, ...]) -> str:
    terms = " + ".join(f"{w!r} * ({x})" for w, x in zip(weights, inputs, strict=True))
    z = f"({intercept!r} + {terms})"
    return f"(1.0 / (1.0 + exp(-greatest(least({z}, 50.0), -50.0))))::float8"


@dataclass(frozen=True)
class CosineScale:
    """Where an embedder's cosines sit, as the ranking's semantic signal reads them (a
    session's best chunk cosine with the question, ``bench.quality.cosine_scale`` on LoCoMo's
    development half): ``chance``, the median for a stranger's session (one of another
    conversation, which cannot answer), and ``answer``, the median for a session that
    answers the question.

    The learned fusion's weights (``ranking_options.LEARNED_WEIGHTS``) were fitted on
    MiniLM's cosines, where a stranger's session and an answer lie far apart. Another
    model may use a narrow band for both (multilingual-e5-small: related and unrelated
    text alike score high), so its semantic signal, relative to the best candidate, barely
    separates a clear winner from the rest and recency decides instead. The ranking maps an
    embedder's cosines onto MiniLM's scale first (:func:`on_reference_scale`): the affine
    map that takes its ``chance`` and ``answer`` to MiniLM's, clipped at 0."""

    chance: float
    answer: float

    def __post_init__(self) -> None:
        if not self.answer > self.chance:
            raise ValueError(
                f"an answer's cosine ({self.answer}) must be above chance ({self.chance})"
            )


#: MiniLM's cosine scale: the reference, the one the fusion was fitted on (measured
#: 2026-12-05 on the development half, ``python -m bench.quality.cosine_scale --every 8
#: --strangers 4 --conversations 2 --half dev``: 45 gold and 152 stranger pairs; every
#: question and session of the half give .173 and .492).
MINILM_SCALE = CosineScale(chance=0.183, answer=0.472)
#: multilingual-e5-small's (the same command, the same questions and sessions): a band a
#: quarter as wide, so the map onto MiniLM's stretches its cosines 3.75 times.
E5_SCALE = CosineScale(chance=0.770, answer=0.847)

#: Cosine scales by embedder family, as :data:`CURVES`.
COSINE_SCALES: dict[str, CosineScale] = {"minilm": MINILM_SCALE, "e5": E5_SCALE}


def cosine_scale_for(embedder_name: str) -> CosineScale | None:
    """The scale measured for the embedder called ``embedder_name``, when it is not
    MiniLM's own (None: its cosines are read as they are — MiniLM, or a model nobody
    measured)."""
    scale = COSINE_SCALES.get(embedder_name.partition(":")[0])
    return None if scale is None or scale == MINILM_SCALE else scale


def _affine(scale: CosineScale) -> tuple[float, float]:
    """(slope, offset) of the map of ``scale`` onto MiniLM's."""
    slope = (MINILM_SCALE.answer - MINILM_SCALE.chance) / (scale.answer - scale.chance)
    return slope, MINILM_SCALE.chance - slope * scale.chance


def on_reference_scale(cosine: float, scale: CosineScale | None) -> float:
    """``cosine`` of the embedder whose scale is ``scale`` on MiniLM's (clipped at 0);
    ``cosine`` itself when ``scale`` is None."""
    if scale is None:
        return cosine
    slope, offset = _affine(scale)
    return max(0.0, offset + slope * cosine)


def on_reference_scale_sql(cosine: str, scale: CosineScale | None) -> str:
    """:func:`on_reference_scale` as a SQL expression of the float8 ``cosine``."""
    if scale is None:
        return cosine
    slope, offset = _affine(scale)
    return f"greatest({offset!r} + {slope!r} * ({cosine}), 0.0)"
