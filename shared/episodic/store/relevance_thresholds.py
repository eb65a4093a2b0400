"""The calibrated relevance in the ranking statements, and the thresholds a row is held to.

The relevance and the request's match (:mod:`episodic.store.relevance`) with the curve of
the dataset's language (:func:`calibrated_sql`, :func:`match_sql`), and the condition of
``min_relevance``, ``min_match`` and ``abstain`` on a scored row (:func:`relevant_sql`,
its parameters :func:`threshold_params`; :data:`ABSTAIN_APPLIED_SQL`, whether
``abstain``'s thresholds hold for the dataset). Episodes, events and the dataset's count
share them.
"""

from __future__ import annotations

from episodic.store.ranking_options import RankingOptions
from episodic.store.recall_index import DATASET_CONFIG
from episodic.store.relevance import (
    FITTED_CONFIG,
    Abstention,
    relevance_sql,
    request_match_sql,
)

__all__ = [
    "ABSTAIN_APPLIED_SQL",
    "IN_FITTED_CONFIG",
    "calibrated_sql",
    "match_sql",
    "relevant_sql",
    "threshold_params",
]


def relevant_sql(moment: str, options: RankingOptions) -> str:
    """The ``min_relevance`` and ``min_match`` condition on a scored row (``s``): its
    calibrated relevance and its request's match (the same on every row of a request), or
    — under ``named_time_recency`` — its ``moment`` inside the time the query names. What
    happened then answers "what was Sam doing on December 4?" whatever its words, and both
    curves read only words and meaning. Episodes and events share it."""
    relevant = (
        f"(s.absolute_relevance >= {_threshold_sql('min_relevance')} "
        f"AND s.request_match >= {_threshold_sql('min_match')})"
    )
    if not options.named_time_recency:
        return relevant
    return (
        f"({relevant} OR ({moment} >= CAST(:named_start AS timestamptz) "
        f"AND {moment} <= CAST(:named_end AS timestamptz)))"
    )


#: Whether the dataset is ranked in the configuration :data:`CURVES` were fitted in.
IN_FITTED_CONFIG = f"({DATASET_CONFIG} = CAST('{FITTED_CONFIG}' AS regconfig))"


def calibrated_sql(
    episode: tuple[str, str, str], best: tuple[str, str, str], options: RankingOptions
) -> str:
    """The calibrated relevance (:func:`~episodic.store.relevance.relevance_sql`) with the
    curve of the dataset's language: ``options.relevance_curve`` in the configuration it
    was fitted in, ``options.other_language_curve`` (when there is one) elsewhere."""
    fitted = relevance_sql(episode, best, options.relevance_curve)
    other = options.other_language_curve
    if other is None:
        return fitted
    return (
        f"(CASE WHEN {IN_FITTED_CONFIG} THEN {fitted} "
        f"ELSE {relevance_sql(episode, best, other)} END)"
    )


def match_sql(best: tuple[str, str, str], options: RankingOptions) -> str:
    """The request's match (:func:`~episodic.store.relevance.request_match_sql`) with the
    curve of the dataset's language, as :func:`calibrated_sql`."""
    fitted = request_match_sql(best, options.relevance_curve)
    other = options.other_language_curve
    if other is None:
        return fitted
    return f"(CASE WHEN {IN_FITTED_CONFIG} THEN {fitted} ELSE {request_match_sql(best, other)} END)"


def _threshold_sql(name: str) -> str:
    """The threshold ``name`` a row is held to: the request's own when it set one (0
    included), else ``abstain``'s (``abstain_<name>``) when the dataset is ranked in the
    text-search configuration the curves were fitted in (``abstain_config``; NULL: not
    abstaining), or ``abstain_other_<name>`` (the other-language curve's) in any other
    configuration — NULL when the model has no such curve: then 0, since the English curves
    were measured to cut a third of the real answers there (docs/benchmarks.md "Abstention
    in other languages")."""
    return (
        f"(CASE WHEN CAST(:{name} AS float8) IS NOT NULL THEN CAST(:{name} AS float8) "
        f"WHEN {DATASET_CONFIG} = CAST(:abstain_config AS regconfig) "
        f"THEN CAST(:abstain_{name} AS float8) "
        f"WHEN CAST(:abstain_config AS regconfig) IS NOT NULL "
        f"THEN coalesce(CAST(:abstain_other_{name} AS float8), 0.0) ELSE 0.0 END)"
    )


#: Whether ``abstain``'s thresholds hold for the dataset (the answer's abstain_applied):
#: the curves fitted in its configuration exist for the model (:func:`_threshold_sql`).
ABSTAIN_APPLIED_SQL = (
    f"(coalesce({DATASET_CONFIG} = CAST(:abstain_config AS regconfig), false) "
    "OR (CAST(:abstain_config AS regconfig) IS NOT NULL "
    "AND CAST(:abstain_other_min_relevance AS float8) IS NOT NULL))"
)


def threshold_params(
    min_relevance: float | None,
    min_match: float | None,
    abstention: Abstention | None,
    options: RankingOptions | None = None,
) -> dict[str, object]:
    """The parameters of :func:`relevant_sql`: the request's thresholds (None: unset, so
    ``abstain``'s hold; an explicit 0 keeps everything even with ``abstain``), and
    ``abstain``'s (None: not abstaining) with the configuration they hold in, and in other
    configurations those of ``options.other_language_curve`` (when it has one)."""
    if abstention is not None and options is None:
        raise ValueError("abstaining needs the ranking's options (their other-language curve)")
    other = (
        options.other_language_curve.abstention
        if abstention is not None and options is not None and options.other_language_curve
        else None
    )
    return {
        "min_relevance": None if min_relevance is None else float(min_relevance),
        "min_match": None if min_match is None else float(min_match),
        "abstain_min_relevance": abstention.min_relevance if abstention else 0.0,
        "abstain_min_match": abstention.min_match if abstention else 0.0,
        "abstain_config": FITTED_CONFIG if abstention else None,
        "abstain_other_min_relevance": other.min_relevance if other else None,
        "abstain_other_min_match": other.min_match if other else None,
    }
