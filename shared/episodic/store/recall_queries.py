"""The SQL of the read path: ranked recall, listing, search and single reads of episodes.

Ranking (seed 000, "Ranking"), computed entirely in SQL over every candidate:

    relevance  = similarity × similarity_weight + recency × recency_weight
    recency    = 1 / (1 + days / (RECENCY_SPAN × span)): days since the episode ended,
                 measured from as_of (≥ 0), in units of the dataset's own span (the days
                 since its oldest candidate, ≥ 1); RankingOptions.recency_span 0 gives the
                 first version's 1 / (1 + days); when the query names the time something
                 happened (RecallFilters.named_time), 1 / (1 + days) counted from that
                 window instead (RankingOptions.named_time_recency)
    similarity = exp(fit − ideal fit), fit = Σ LEARNED_WEIGHTS × (lexical, semantic, the
                 raw best cosine, the query words' coverage of the document and of the best
                 passage); the ideal is 1 on each but the cosine, the candidates' best
                 (RankingOptions.fusion "score" gives the first version:
                 (LEXICAL_SHARE × lexical + (1 − LEXICAL_SHARE) × semantic) ^ BAND_EXPONENT)
    lexical    = (document + passage) / 2

    document   = BM25 of the query against the episode's document (the thread's messages up
                 to the episode's end, its summary and key learnings; english stemming),
                 divided by the best such BM25 among the candidates (0 when none matches);
    passage    = the best BM25 of any chunk of the thread's messages (a few consecutive
                 messages; statistics over the candidates' chunks), divided likewise — a
                 long thread is found by the passage that answers, not by its average;
    semantic   = the best cosine between the query's embedding and the episode's summary
                 embedding or any chunk of its thread's messages, clipped at 0, divided by
                 the best such cosine among the candidates.

So similarity is in [0, 1]: 1 for an episode that best matches the query on both signals,
lower as an episode matches less well *relative to the best match* (BM25 has no absolute
scale, and neither do cosines across embedders). The exponent (or the learned weights'
scale) makes the band of "about as similar as the best" narrow: recency then orders
episodes within that band (seed 002: "sort by ts DESC within a similarity band") instead
of lifting yesterday's loosely related
chat over last month's exact answer. Without a query, similarity is 0 and the order is plain
recency.

Candidates are the dataset's completed episodes that pass the filters; every one is scored
(a btree on (dataset, status) finds them), so the top N is exactly the top N of the
formula, including a very recent, moderately similar episode that an approximate nearest
neighbour search by similarity alone would not have fetched. Per-dataset candidate sets are
small (research/postgres-limits.md: ~1–1.5 ms for the vector part at 1M episodes).

A large dataset (more episodes than ``recall_approximate_above``; services/recall/domain.py
chooses) takes the approximate path instead: the same formula over a generous candidate
set — the episodes nearest the query by summary and by chunk (the HNSW indexes, iterative
scan), the best lexical matches (by the exact lexical signals among the holders of a
selective query word, and by ts_rank through GIN), the most recent ones and each query
word's densest documents and chunks — while BM25's statistics and the best BM25 come from the whole filtered dataset
(:func:`_dataset_statistics`), so a candidate scores as on the exact path; the semantic
signal is normalised by the best cosine among the candidates (the HNSW nearest, which holds
the dataset's best with high probability). docs/benchmarks.md "Recall at scale" has its recall@N
against the exact ranking.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache
from itertools import pairwise
from typing import Any, cast

import numpy as np
from sqlalchemy import Connection, RowMapping, text

from episodic import metrics
from episodic.crypto import DatasetKey
from episodic.store.episodes import episode_columns
from episodic.store.raw_statement import fetch_all
from episodic.store.recall_index import DATASET_CONFIG, TEXT_SEARCH_CONFIG, query_tokens
from episodic.store.relevance import (
    FITTED_CONFIG,
    MINILM,
    Abstention,
    CosineScale,
    Curve,
    on_reference_scale,
    on_reference_scale_sql,
    relevance_sql,
    request_match_sql,
)

#: The calibrated relevance's context: each signal's best over every episode the statement
#: scored (window maxima, computed before the time filters and the LIMIT), so an episode
#: is judged beside the request's best match (``episodic.store.relevance``). The cosine's
#: is the one the semantic signal is normalised by: on the approximate path with
#: ``exact_cosine``, the dataset's best rather than the pool's.
_REQUEST_BEST = (
    "n.best_cosine",
    "max(n.coverage) OVER ()",
    "max(n.passage_coverage) OVER ()",
)

__all__ = [
    "BAND_EXPONENT",
    "BM25_B",
    "BM25_K1",
    "COUNT_STATEMENT",
    "DEFAULT_RANKING",
    "EXTRA_SIGNALS",
    "FEEDBACK_SHARE",
    "FUSIONS",
    "LEARNED_WEIGHTS",
    "LEXICAL_COVERAGE",
    "LEXICAL_SHARE",
    "RECENCY_BAND",
    "RECENCY_BANDS",
    "RECENCY_SPAN",
    "SECOND_LOOK",
    "SECOND_LOOK_WEIGHTS",
    "THIRD_PASS_WEIGHTS",
    "Approximation",
    "Opening",
    "Ranking",
    "RankingOptions",
    "RecallFilters",
    "blinded_lexemes",
    "calibrated_sql",
    "count_up_to",
    "fused_relevance_sql",
    "lexical_scale_for",
    "list_episodes",
    "match_sql",
    "named_time_params",
    "query_term_tokens",
    "rank",
    "rank_episodes",
    "ranked_recency_sql",
    "read_opening",
    "recall_sql",
    "recall_statement",
    "recency_band_for",
    "recency_gate",
    "relevant_sql",
    "reorder_top",
    "scaled_lexical",
    "similarity_sql",
    "span_cte",
    "threads_in_order",
    "threshold_params",
    "unfiltered_params",
]

BM25_K1 = 1.2
BM25_B = 0.75
#: BM25's (k1, b) for passages (chunks of a few messages), when they differ from the
#: document's; None: BM25_K1 and BM25_B for both fields.
PASSAGE_BM25: tuple[float, float] | None = None
#: Share of the lexical signal in similarity (the rest is the semantic signal).
LEXICAL_SHARE = 0.5
#: Sharpness of similarity: (relative match)^BAND_EXPONENT.
BAND_EXPONENT = 3

_EPISODE_COLUMNS = episode_columns("e", ":dataset")


@dataclass(frozen=True)
class RankingOptions:
    """Switches of the ranking, each measured alone on LoCoMo (bench/recall_lab.py,
    docs/concepts/recall.md); :data:`DEFAULT_RANKING` is what Recall runs.

    - ``strip_stop_phrases``: the query's framing ("what did we discuss about", "do you
      remember", "what kind of") is removed before it is embedded and tokenised
      (:func:`episodic.query_focus.strip_stop_phrases`; applied by the read path's domain).
    - ``strip_function_words``: the function words of the language the query is written in
      ("est-ce que", "qué", "wo") are left out of the text matched lexically (not of the
      embedded one): in a dataset tokenised in another language they are words like any
      other, and matched whichever session used them
      (:func:`episodic.query_focus.strip_function_words`; English queries are unchanged).
    - ``weight_generic_terms``: query-side term weighting: the lexemes of words that occur
      in questions about any topic (:data:`episodic.query_focus.GENERIC_WORDS`) count
      ``GENERIC_WEIGHT`` in BM25 instead of 1.
    - ``head_share``: share of the lexical signal given to a third field, BM25 over the
      episode's summary and key learnings alone (the weight-A part of its document), beside
      the whole document and the best passage; 0 leaves the field out of the statement.
    - ``fusion``: how the signals become similarity. ``"score"`` (the first version):
      ``(LEXICAL_SHARE × lexical + (1 − LEXICAL_SHARE) × semantic) ^ BAND_EXPONENT``.
      ``"learned"``: a linear score of five signals with the weights of
      :data:`LEARNED_WEIGHTS` (fitted on LoCoMo's development half only), made relative
      as ``exp(score − ideal score)``, the ideal being a candidate best on both relative
      signals with every query word matched: 1 for such a candidate, the band's width set
      by the fit. It keeps single-signal winners (an exact lexical match with a
      weak embedding, or the reverse) that a product-like fusion loses, and it reads how
      many of the query's words matched, which the relative signals cannot tell.
    - ``named_time_recency``: when the query names the time something happened ("what was
      Sam doing on December 4?", which the time parser does not apply as a window:
      ``RecallFilters.named_time``), recency is the seed's ``1 / (1 + days)`` counted from
      that window (0 inside it) instead of from ``as_of``: the question's "now" is the time
      it names. Without a named time, recency is as ``recency_span`` says.
    - ``passage_depth`` (k ≥ 2), ``entity_match``, ``feedback`` (k episodes): compute the
      optional signals of :data:`EXTRA_SIGNALS`; ``weights`` fuses them (the learned fusion's
      weights including theirs; empty: :data:`LEARNED_WEIGHTS`).
    - ``recency_span``: how "recent" is scaled. 0: the seed's ``1 / (1 + days)``; above 0:
      ``1 / (1 + days / (recency_span × span))``, ``span`` being the days between the
      dataset's oldest candidate and ``as_of`` (at least one day): a month-long history
      and a ten-year one then decay alike over their own time, instead of the most recent
      day of either outweighing everything before it.
    - ``word_forms``: query-side OR-expansion with the irregular forms the english stemmer
      keeps apart ("broken" also looks for "broke" and "break";
      :func:`episodic.query_focus.word_forms`); each added lexeme counts as the query word
      it stands for in the coverage signals (an English table: datasets with another
      text-search configuration are left as they are).
    - ``expansion`` (k episodes): RM3-style lexical feedback. A first pass ranks as without
      it; the strongest words of its k best episodes' documents (weight in those documents
      × idf over the filtered dataset, :data:`EXPANSION_TERMS` of them, not the query's
      own) join the query with at most :data:`EXPANSION_WEIGHT` of a query word's weight in
      BM25, and a second pass ranks with them. They do not count in the coverage signals.
    - ``phrase``: compute the proximity signal ``phrase`` (:data:`EXTRA_SIGNALS`): the
      query's adjacent word pairs ("basketball career", "lgbtq conference") found close
      together, in order, in the episode's document; fused when ``weights`` has it.
    - ``speaker``: compute ``speaker_coverage`` (:data:`EXTRA_SIGNALS`): the share of the
      query's other words that the person it names said in the episode's thread ("What
      did Caroline research?": did Caroline say "research", not only Melanie?), from the
      speaker-word pairs of the document (``recall_index.speaker_word_tokens``); fused
      when ``weights`` has it.
    - ``rerank_top`` (k), ``rerank_weights``: a second look at the best k candidates of
      the ranking: they are put in the order of the learned fusion with ``rerank_weights``
      (which may weigh ``phrase`` and ``speaker_coverage``: their switches must be on),
      the rest left where they are (:func:`reorder_top`). Which episodes make the top k,
      their ``relevance`` and everything below it are the ranking's own; only who comes
      first among them changes. (Fused over the whole list, the same signals lifted a few
      candidates into the top five and pushed as many gold ones out on LoCoMo's held-out
      half; docs/benchmarks.md "Ranking, fifth pass".)
    - ``cosine_scale``: the embedder's cosines are put on MiniLM's scale before they are
      fused (the ``semantic`` and ``cosine`` signals;
      :func:`episodic.store.relevance.on_reference_scale`), so that a model whose cosines
      sit in a narrow band (e5) separates a clear semantic winner as much as the weights,
      fitted on MiniLM's, expect, and recency orders only near ties. None: as they are
      (MiniLM, a model nobody measured). The calibrated relevance reads the raw cosines
      (its curves are fitted per embedder).
    - ``recency_band``: recency only breaks ties inside the similarity band (seed 002:
      "sort by ts DESC within a similarity band"). A candidate's recency term is weighed
      by :func:`recency_gate`: whole for the candidates as similar as the best, fading
      linearly to nothing for those whose similarity is ``recency_band`` (a share of the
      best's) or more below it. 0: the seed's sum, recency weighed alike everywhere, so a
      newer session can overtake an older one however much better the older matches as
      long as the difference in similarity is below ``recency_weight / similarity_weight``
      — which decides the ranking whenever an embedder's semantic signal is compressed
      (e5 on short sessions in other languages). Without a query every similarity is 0,
      every candidate is in the band, and the order is plain recency.
    - ``lexical_coverage``: the lexical signals, each relative to the best candidate's BM25,
      are also scaled by the largest share of the query's weight that any candidate holds
      (the idf of the query words it contains over the idf of every query word, words the
      dataset lacks included). Off, the dataset's best lexical match is a full match (1.0)
      however little of the query it holds: one content word shared by chance (a
      paraphrase in another language that shares nothing else with its own session)
      outweighs the meaning. A candidate holding every query word keeps 1.0 either way.
    - ``relevance_curve``: the calibrated relevance and match curves (and, in the
      service, ``abstain``'s thresholds) for a dataset in
      :data:`~episodic.store.relevance.FITTED_CONFIG`; ``other_language_curve``: those for
      a dataset in any other configuration (None: the same curve is computed there, and
      ``abstain`` keeps every episode).
    """

    strip_stop_phrases: bool = False
    strip_function_words: bool = False
    weight_generic_terms: bool = False
    head_share: float = 0.0
    fusion: str = "score"
    recency_span: float = 0.0
    passage_depth: int = 0
    entity_match: bool = False
    feedback: int = 0
    weights: tuple[tuple[str, float], ...] = ()
    named_time_recency: bool = False
    word_forms: bool = False
    expansion: int = 0
    phrase: bool = False
    speaker: bool = False
    rerank_top: int = 0
    rerank_weights: tuple[tuple[str, float], ...] = ()
    relevance_curve: Curve = MINILM
    other_language_curve: Curve | None = None
    cosine_scale: CosineScale | None = None
    recency_band: float = 0.0
    lexical_coverage: bool = False

    def __post_init__(self) -> None:
        if self.fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, not {self.fusion!r}")
        if not 0.0 <= self.recency_band <= 1.0:
            raise ValueError(
                f"recency_band must be 0 (off) or a share of the best similarity up to 1, "
                f"not {self.recency_band}"
            )
        if self.recency_span < 0:
            raise ValueError(f"recency_span must be 0 (days) or above, not {self.recency_span}")
        if self.passage_depth < 0 or self.passage_depth == 1:
            raise ValueError(
                f"passage_depth must be 0 (off) or 2 and above, not {self.passage_depth}"
            )
        if self.feedback < 0:
            raise ValueError(
                f"feedback must be 0 (off) or a number of episodes, not {self.feedback}"
            )
        if self.expansion < 0:
            raise ValueError(
                f"expansion must be 0 (off) or a number of episodes, not {self.expansion}"
            )
        computed = self.signals()
        if self.rerank_top < 0 or (self.rerank_top and not self.rerank_weights):
            raise ValueError(
                f"rerank_top must be 0 (off) or a number of candidates with rerank_weights, "
                f"not {self.rerank_top}"
            )
        for name, _ in (*self.weights, *self.rerank_weights):
            if name not in computed:
                raise ValueError(
                    f"a weight for {name!r} needs its signal: one of {', '.join(computed)}"
                )

    def signals(self) -> tuple[str, ...]:
        """The signals the statement computes under these switches (LEARNED_WEIGHTS' five,
        and the optional ones of :data:`EXTRA_SIGNALS` whose switch is on)."""
        extra = {
            "cosine_depth": self.passage_depth > 0,
            "passage_depth": self.passage_depth > 0,
            "entity_match": self.entity_match,
            "feedback_cosine": self.feedback > 0,
            "phrase": self.phrase,
            "speaker_coverage": self.speaker,
        }
        return (*LEARNED_WEIGHTS, *(name for name in EXTRA_SIGNALS if extra[name]))

    def weighted_terms(self) -> bool:
        """Whether the query's lexemes carry a weight and the query word they stand for
        (``:weights``, ``:terms``): BM25 multiplies each lexeme's part by its weight, and
        the coverage signals count the query words matched, not the lexemes."""
        return self.weight_generic_terms or self.word_forms or self.expansion > 0

    def learned_weights(self) -> dict[str, float]:
        """The learned fusion's weights: ``weights`` when given (a fit that includes the
        optional signals), else :data:`LEARNED_WEIGHTS` (an optional signal without a
        weight is computed, returned, and not fused: what the lab needs to fit it)."""
        return dict(self.weights) if self.weights else dict(LEARNED_WEIGHTS)


#: The ways of fusing the signals (RankingOptions.fusion).
FUSIONS = ("score", "learned")

#: The learned fusion's weights, one per signal of the candidate (the names of the
#: ranking's columns: ``lexical`` and ``semantic`` relative to the best candidate,
#: ``cosine`` the raw best cosine, ``coverage``/``passage_coverage`` the share of the
#: query's words in the document / best passage). Fitted by
#: ``python -m bench.recall_lab --fit-ranker``: a listwise logistic regression (softmax over
#: each question's candidates, the gold sessions the target, L2 0.01) on the development
#: half of LoCoMo only (conv-26, 41, 43, 47, 49), then scaled by the temperature chosen on
#: the same half with the recency term on (docs/concepts/recall.md). Refitted in the
#: fourth pass with the query's irregular word forms on (``word_forms``) and recency from
#: a named time (``python -m bench.recall_lab --fit-extras off+phrase+word-forms``, its
#: base row); the third pass's were 0.773, 0.564, 0.324, 0.341, 0.451
#: (:data:`THIRD_PASS_WEIGHTS`).
LEARNED_WEIGHTS: dict[str, float] = {
    "lexical": 0.735,
    "semantic": 0.564,
    "cosine": 0.325,
    "coverage": 0.4,
    "passage_coverage": 0.494,
}
#: The learned fusion's weights before the fourth pass (fitted without word forms).
THIRD_PASS_WEIGHTS: tuple[tuple[str, float], ...] = (
    ("lexical", 0.773),
    ("semantic", 0.564),
    ("cosine", 0.324),
    ("coverage", 0.341),
    ("passage_coverage", 0.451),
)

#: The optional signals (each computed only when its RankingOptions switch is on):
#: ``cosine_depth`` the mean of the episode's ``passage_depth`` best chunk cosines and
#: ``passage_depth`` the sum of its ``passage_depth`` best passage BM25s relative to the
#: candidates' best such sum (an episode matching the question in several places);
#: ``entity_match`` the idf-weighted share of the query's names and phrases that are among
#: the episode's entities, relative to the candidates' best (``entity_match``);
#: ``feedback_cosine`` pseudo-relevance feedback (``feedback``: Rocchio on the query
#: vector): the best cosine of the episode's summary or chunks with the query and with the
#: centroid of the ``feedback`` first-pass best episodes' best passages, mixed
#: ``1 : FEEDBACK_SHARE``. In the fit, the ideal candidate has the candidates' best of each.
#: ``phrase`` (proximity): the share of the query's adjacent word pairs that the episode's
#: document holds within :data:`PHRASE_WINDOW` positions, in the query's order
#: (``phrase``).
#: ``speaker_coverage``: the best, over the query's words taken as a speaker's name, of the
#: share of the query's other words that this speaker said in the episode's thread
#: (``speaker``); 0 when the query names no speaker of the thread.
EXTRA_SIGNALS = (
    "cosine_depth",
    "passage_depth",
    "entity_match",
    "feedback_cosine",
    "phrase",
    "speaker_coverage",
)

#: RankingOptions.phrase: how far apart (in the document's positions, stop words counted)
#: two words adjacent in the query may be and still count as the query's phrase.
PHRASE_WINDOW = 3

#: Rocchio's share of the feedback centroid in ``feedback_cosine``.
FEEDBACK_SHARE = 0.5

#: RankingOptions.expansion: how many feedback words join the query, and the weight of the
#: strongest of them in BM25 (a query word's is 1; the others in proportion to their score).
EXPANSION_TERMS = 10
EXPANSION_WEIGHT = 0.3
#: The feedback documents' words considered (by their weight in those documents) before
#: their idf is counted over the dataset.
EXPANSION_POOL = 40

#: recency_span chosen with LEARNED_WEIGHTS (same half, same run of the lab).
RECENCY_SPAN = 8.0
#: RankingOptions.recency_band (RecallSettings.ranking_recency_band), per embedder (the
#: part of its name before ":"): recency orders the candidates within this share of the best
#: similarity. Measured with lexical coverage on, band 0 -> 0.1: e5 on the short
#: multilingual set R@1 .795 -> .866 (`python -m bench.multilingual_quality --path
#: bench/data/multilingual_short.jsonl --direct --embedders e5 --bands 0,0.1`); MiniLM on
#: LoCoMo through the suite R@1 .764 -> .752, R@5 .939 -> .924, MRR .840 -> .827
#: (`python -m bench.recall_quality`, the band by env), so MiniLM, and any model nobody
#: measured, keeps recency everywhere (0, the seed's sum).
RECENCY_BANDS: dict[str, float] = {"e5": 0.1}
RECENCY_BAND = 0.0


def recency_band_for(embedder_name: str) -> float:
    """The recency band measured for the embedder called ``embedder_name``."""
    return RECENCY_BANDS.get(embedder_name.partition(":")[0], RECENCY_BAND)


#: How much the words count beside the meaning, per embedder (the part of its name before
#: ":"): a factor on the lexical weights of the learned fusion and of the second look
#: (lexical, coverage, passage_coverage, phrase), which were fitted on English LoCoMo with
#: MiniLM. With e5 (the model of datasets in other languages) they let a stemmed content word
#: shared by chance outweigh a clear semantic winner. Measured with `python -m
#: bench.multilingual_quality --direct --embedders e5 --lexical-scales 1,0.5,0.3,0.2` (each
#: dataset's language set), R@1 at 1 / 0.5 / 0.3 / 0.2: the long set (French, Spanish,
#: German, 120 questions whose words meet their sessions') .958 / .967 / .967 / .967 (0.1:
#: .950); the short set (7 languages, 112 paraphrasing questions) .795 / .893 / .920 / .938;
#: a third set written later by another hand, held out from the choice of 0.5 and used only
#: to check 0.3 against it (bench/data/multilingual_third.jsonl) .732 / .866 / .893 / .902.
#: 0.3: the gain on both paraphrasing sets, nothing lost where the words meet, and a step
#: from where the long set starts to lose (0.1), so a rare name or number the question
#: shares with its session still counts. MiniLM, and any model nobody measured, keeps the
#: fitted weights (1).
LEXICAL_SCALES: dict[str, float] = {"e5": 0.3}
LEXICAL_SCALE = 1.0
#: The weights a lexical scale multiplies.
LEXICAL_SIGNALS = ("lexical", "coverage", "passage_coverage", "phrase")


def lexical_scale_for(embedder_name: str) -> float:
    """The lexical scale measured for the embedder called ``embedder_name``."""
    return LEXICAL_SCALES.get(embedder_name.partition(":")[0], LEXICAL_SCALE)


def scaled_lexical(
    weights: Iterable[tuple[str, float]], scale: float
) -> tuple[tuple[str, float], ...]:
    """``weights`` with those of :data:`LEXICAL_SIGNALS` multiplied by ``scale``."""
    return tuple((n, w * scale if n in LEXICAL_SIGNALS else w) for n, w in weights)


#: The second look at the best :data:`SECOND_LOOK` candidates (``RankingOptions.rerank_top``,
#: ``RecallSettings.ranking_second_look``): the learned fusion with the proximity signal
#: (``phrase``), fitted on LoCoMo's development half only (``python -m bench.recall_lab
#: --fit-rerank default+signals``: listwise logistic regression over every candidate, the
#: temperature 0.25 chosen by development MRR); of the fifth pass's three fits (proximity,
#: the speaker signal, both) the best development MRR as a second look at the top 5
#: (docs/benchmarks.md "Ranking, fifth pass"). Five, so that the episodes of the top five are the
#: ranking's own (R@5 unchanged by construction) and only their order is refined.
SECOND_LOOK = 5
SECOND_LOOK_WEIGHTS: tuple[tuple[str, float], ...] = (
    ("lexical", 0.699),
    ("semantic", 0.551),
    ("cosine", 0.316),
    ("coverage", 0.37),
    ("passage_coverage", 0.436),
    ("phrase", 0.345),
)

#: RankingOptions.lexical_coverage (RecallSettings.ranking_lexical_coverage). Measured
#: (issue 40, `python -m bench.multilingual_quality --direct --coverage off,on`; see
#: docs/concepts/recall.md "A word shared by chance").
LEXICAL_COVERAGE = True

#: The ranking Recall runs (RecallSettings.ranking_fusion / recency_span choose another).
DEFAULT_RANKING = RankingOptions(
    fusion="learned",
    strip_function_words=True,
    recency_span=RECENCY_SPAN,
    recency_band=RECENCY_BAND,
    named_time_recency=True,
    word_forms=True,
    phrase=True,
    rerank_top=SECOND_LOOK,
    rerank_weights=SECOND_LOOK_WEIGHTS,
    lexical_coverage=LEXICAL_COVERAGE,
)


@dataclass(frozen=True)
class RecallFilters:
    """Which completed episodes of a dataset are candidates. Empty means no filter."""

    since: datetime | None = None  # the episode's span ends at or after this
    until: datetime | None = None  # the episode's span starts at or before this
    thread_ids: Sequence[uuid.UUID] = field(default_factory=tuple)
    entities: Sequence[str] = field(default_factory=tuple)  # all of these (normalised)
    #: The entities resolved by the canon (store/entities.py): per entity, the blind tokens
    #: of all its aliases, any of which matches. None: match ``entities`` spelled exactly.
    entity_groups: Sequence[Sequence[str]] | None = None
    event_type: str | None = None
    as_of: datetime | None = None  # nothing that ended after it; recency measured from it
    #: The window [start, end) of a time the query names as when something happened (not
    #: applied as a filter): recency is measured from it under
    #: RankingOptions.named_time_recency.
    named_time: tuple[datetime, datetime] | None = None


def _filter_params(key: DatasetKey, filters: RecallFilters) -> dict[str, object]:
    return {"dataset": key.dataset, **_filter_values(key, filters)}


def unfiltered_params() -> dict[str, object]:
    """The filter parameters of a recall without filters, ``dataset`` aside: what the
    benches that send Recall's bare SQL bind (bench/recall_speed.py, recall_scale.py,
    partition_cost.py), from the one place a new filter's parameters are added."""
    return _filter_values(None, RecallFilters())


def _filter_values(key: DatasetKey | None, filters: RecallFilters) -> dict[str, object]:
    """``key``: the dataset's, to blind the entities (None: no entity filter)."""
    return {
        "since": filters.since,
        "until": filters.until,
        "thread_ids": list(filters.thread_ids) or None,
        **entity_params(key, filters.entities, filters.entity_groups),
        "event_type": filters.event_type,
        "as_of": filters.as_of,
        **named_time_params(filters.named_time),
    }


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


def named_time_params(named_time: tuple[datetime, datetime] | None) -> dict[str, object]:
    """The parameters of :func:`ranked_recency_sql`'s named time (None: not named)."""
    start, end = named_time if named_time is not None else (None, None)
    return {"named_start": start, "named_end": end}


def entity_params(
    key: DatasetKey | None,
    entities: Sequence[str],
    entity_groups: Sequence[Sequence[str]] | None,
) -> dict[str, object]:
    """Stored entities are blind tokens (``entity_tokens`` of episodes and events). Entities
    with one spelling are all required (``@>``, the GIN index); each with several (resolved
    by the canon) needs any one of them. Parameters of ``entity_clauses``. ``key`` blinds
    ``entities`` (None only without them)."""
    groups = entity_groups
    if groups is None:
        if entities and key is None:
            raise ValueError("entities need the dataset's key to be blinded")
        groups = [[key.token(e)] for e in entities] if key is not None else []
    single = sorted({g[0] for g in groups if len(g) == 1})
    several = [sorted(g) for g in groups if len(g) > 1]
    return {
        "entities": single or None,
        "entity_any": several[0] if several else None,
        "entity_groups": json.dumps(several[1:]) if len(several) > 1 else None,
    }


def entity_clauses(alias: str) -> str:
    """The entity filter on ``alias.entity_tokens`` (parameters from ``entity_params``)."""
    return f"""
      AND (CAST(:entities AS text[]) IS NULL OR {alias}.entity_tokens @> CAST(:entities AS text[]))
      AND (CAST(:entity_any AS text[]) IS NULL OR {alias}.entity_tokens && CAST(:entity_any AS text[]))
      AND (CAST(:entity_groups AS jsonb) IS NULL OR NOT EXISTS (
            SELECT 1 FROM jsonb_array_elements(CAST(:entity_groups AS jsonb)) g
            WHERE NOT {alias}.entity_tokens && ARRAY(SELECT jsonb_array_elements_text(g))))"""


_CANDIDATES = (
    """
    SELECT e.episode_id, e.thread_id, e.end_sequence, e.ended_at, e.embedding,
           e.search_vector, e.search_length
    FROM episodes e
    WHERE e.dataset = :dataset AND e.status = 'completed'
      AND (CAST(:as_of AS timestamptz) IS NULL OR e.ended_at <= CAST(:as_of AS timestamptz))
      AND (CAST(:since AS timestamptz) IS NULL OR e.ended_at >= CAST(:since AS timestamptz))
      AND (CAST(:until AS timestamptz) IS NULL OR e.started_at <= CAST(:until AS timestamptz))
      AND (CAST(:thread_ids AS uuid[]) IS NULL OR e.thread_id = ANY(CAST(:thread_ids AS uuid[])))
    """
    + entity_clauses("e")
    + """
      AND (CAST(:event_type AS text) IS NULL OR e.event_type = CAST(:event_type AS text))"""
)

# A lexeme as a quoted tsquery operand ('it''s', backslashes doubled), so OR-ing the query's
# lexemes never re-parses or re-stems them.
QUOTED_LEXEME = r"""'''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || ''''"""


def recency_sql(moment: str) -> str:
    """Recency of a timestamp expression: 1 at ``as_of`` (or now), halving after a day —
    the one definition episodes (``ended_at``) and events (``occurred_at``) share."""
    return (
        "1.0 / (1.0 + greatest(extract(epoch FROM "
        f"(coalesce(CAST(:as_of AS timestamptz), now()) - {moment})), 0) / 86400.0)"
    )


#: One query lexeme (``q.lexeme``) as a tsquery of its own.
_LEXEME_QUERY = f"CAST({QUOTED_LEXEME.replace('lexeme', 'q.lexeme')} AS tsquery)"


def span_cte(source: str, moment: str = "ended_at") -> str:
    """``span``: the days between the oldest ``moment`` of ``source``'s rows (the filtered
    candidates) and ``as_of`` (or now), at least one (RankingOptions.recency_span)."""
    return f"""
        span AS (
            SELECT greatest(extract(epoch FROM (coalesce(CAST(:as_of AS timestamptz), now())
                                               - min(x.{moment}))) / 86400.0, 1.0) AS days
            FROM {source} x
        ),"""


def ranked_recency_sql(moment: str, options: RankingOptions) -> str:
    """Recency of ``moment`` under ``options``: the seed's day scale (:func:`recency_sql`),
    or days counted in units of ``recency_span`` × the dataset's span (needs
    :func:`span_cte`). Episodes and events (store/events.py) share it."""
    if not options.recency_span:
        recency = recency_sql(moment)
    else:
        recency = (
            "1.0 / (1.0 + greatest(extract(epoch FROM "
            f"(coalesce(CAST(:as_of AS timestamptz), now()) - {moment})), 0) / 86400.0 "
            f"/ ({float(options.recency_span)} * (SELECT days FROM span)))"
        )
    if not options.named_time_recency:
        return recency
    # Days between the moment and the named window (0 inside it), on the seed's day scale.
    return (
        f"CASE WHEN CAST(:named_start AS timestamptz) IS NULL THEN {recency} "
        "ELSE 1.0 / (1.0 + greatest("
        f"extract(epoch FROM (CAST(:named_start AS timestamptz) - {moment})), "
        f"extract(epoch FROM ({moment} - CAST(:named_end AS timestamptz))), 0) / 86400.0) END"
    )


def recency_gate(similarity: float, best: float, band: float) -> float:
    """How much of its recency a candidate of ``similarity`` keeps when the best candidate's
    is ``best`` (``RankingOptions.recency_band``): 1 within a hair of the best, down to 0 at
    ``band`` × ``best`` below it; 1 for every candidate when ``band`` is 0 (off) or nothing
    is similar at all (no query: plain recency)."""
    if band <= 0.0 or best <= 0.0:
        return 1.0
    return min(1.0, max(0.0, 1.0 - (best - similarity) / (band * best)))


def fused_relevance_sql(options: RankingOptions, similarity: str, recency: str) -> str:
    """``relevance``: ``:ws`` × similarity + ``:wr`` × recency, the recency term weighed by
    :func:`recency_gate` against the best similarity among the rows (a window maximum: the
    statement's candidates, before any limit). Episodes and events share it."""
    fused = f"CAST(:ws AS float8) * {similarity} + CAST(:wr AS float8) * {recency}"
    band = float(options.recency_band)
    if not band:
        return fused
    best = f"max({similarity}) OVER ()"
    gate = (
        f"CASE WHEN {best} > 0 THEN least(1.0, greatest(0.0, "
        f"1.0 - ({best} - {similarity}) / ({band!r} * {best}))) ELSE 1.0 END"
    )
    return f"CAST(:ws AS float8) * {similarity} + CAST(:wr AS float8) * {recency} * {gate}"


def similarity_sql(options: RankingOptions, signals: dict[str, str]) -> str:
    """Similarity under ``options`` from a candidate's signal expressions, keyed by the
    names of :data:`LEARNED_WEIGHTS` (``lexical`` and ``semantic`` relative to the best
    candidate, ``cosine``, ``coverage``, ``passage_coverage``), and optionally
    ``best_cosine``, the ideal's cosine (the candidates' best by default; the dataset's when
    the approximate path reads it). Episodes and events (store/events.py) share it."""
    lexical, semantic = signals["lexical"], signals["semantic"]
    if options.fusion == "learned":
        # a signal the caller does not compute (an event has no speakers) counts 0 in the
        # fit and in the ideal alike
        weights = {n: w for n, w in options.learned_weights().items() if n in signals}
        fit = " + ".join(f"{w} * {signals[name]}" for name, w in weights.items())
        # Relative to the ideal candidate: best on both relative signals, every query word
        # in its document and in one passage, the candidates' best cosine. 1 only for a
        # candidate that is all of these (as the score fusion gives 1 only to the best on
        # both signals), so a lone episode that matches one way only does not score 1;
        # and, as there, 0 for a candidate that matches neither way.
        best_cosine = signals.get("best_cosine", f"max({signals['cosine']}) OVER ()")

        def ideal_of(name: str) -> str:
            if name == "cosine":
                return best_cosine
            if name in EXTRA_SIGNALS:  # the candidates' best: 0 when none has it
                return f"max({signals[name]}) OVER ()"
            return "1.0"

        ideal = " + ".join(f"{w} * {ideal_of(name)}" for name, w in weights.items())
        return (
            f"CASE WHEN {lexical} > 0 OR {semantic} > 0 THEN exp(({fit}) - ({ideal})) ELSE 0.0 END"
        )
    return (
        f"power(least(1.0, {LEXICAL_SHARE} * {lexical} + {1.0 - LEXICAL_SHARE} * {semantic}), "
        f"{BAND_EXPONENT})"
    )


def _signals(lexical: str) -> dict[str, str]:
    """The signals of ``normed`` (``n``) by the names of LEARNED_WEIGHTS and EXTRA_SIGNALS
    (an optional one is a column only when its switch is on); the cosines on MiniLM's scale
    (``RankingOptions.cosine_scale``)."""
    return {
        "lexical": lexical,
        "semantic": "n.sem_rel",
        "cosine": "n.scaled_cosine",
        "best_cosine": "n.scaled_best_cosine",
        "coverage": "n.coverage",
        "passage_coverage": "n.passage_coverage",
        **{name: f"n.{name}" for name in EXTRA_SIGNALS},
    }


def approximate_parts(with_vector: bool) -> dict[str, str]:
    """The approximate path's candidates (a large dataset) by source: a generous set that
    holds the exact top N with high probability, re-scored by the exact formula. The
    episodes whose summary is nearest the query and those of the threads whose chunks are
    (HNSW with iterative scan, the filters applied as it walks), the best lexical matches
    (the GIN index finds the documents with any query lexeme; ts_rank orders them) and the
    most recent episodes (recency alone can carry one into the top). Every part applies the
    request's filters. Named so that bench/recall_scale.py can tell which source holds (or
    should have held) an exact top-N episode."""
    # The lexical part of the default fusion (LEARNED_WEIGHTS): what orders the selective
    # words' holders, whose exact BM25 the dataset's statistics have already computed.
    lexical_fit = (
        f"{LEARNED_WEIGHTS['lexical'] / 2} * (coalesce(d.score / nullif((SELECT score FROM "
        "best_document), 0.0), 0.0) + coalesce(p.score / nullif((SELECT score FROM "
        f"best_passage), 0.0), 0.0)) + ({LEARNED_WEIGHTS['coverage']} * coalesce(d.matched, 0.0) "
        f"+ {LEARNED_WEIGHTS['passage_coverage']} * coalesce(p.matched, 0.0)) "
        "/ greatest((SELECT count(*) FROM q), 1)"
    )
    parts = {
        # Ranked as the exact formula's lexical signals rank them; ts_rank (below) ties
        # on documents of similar length and ignores how rare each word is.
        "best lexical": f"""SELECT coalesce(d.episode_id, p.episode_id) AS episode_id
            FROM dataset_doc_bm25 d FULL JOIN dataset_passage_bm25 p
              ON p.episode_id = d.episode_id
            ORDER BY {lexical_fit} DESC LIMIT :approx_candidates""",
        "lexical": f"""SELECT x.episode_id FROM ({_CANDIDATES}) x
            WHERE x.search_vector @@ (SELECT tq FROM qq)
            ORDER BY ts_rank(x.search_vector, (SELECT tq FROM qq), 1) DESC
            LIMIT :approx_candidates""",
        "recent": f"""SELECT x.episode_id FROM ({_CANDIDATES}) x
            ORDER BY x.ended_at DESC LIMIT :approx_recent""",
        # The normalising maxima (best document and best passage BM25) must be the
        # dataset's, and ts_rank over all the query's words weighs a common word like a
        # rare one: so, per query word, the documents and the threads of the chunks that
        # hold it most densely (GIN indexes; a rare word's best holders carry the best BM25).
        "densest documents": f"""SELECT best.episode_id FROM q CROSS JOIN LATERAL (
                SELECT x.episode_id FROM ({_CANDIDATES}) x
                WHERE x.search_vector @@ {_LEXEME_QUERY}
                ORDER BY ts_rank(x.search_vector, {_LEXEME_QUERY}, 1) DESC
                LIMIT :approx_per_lexeme) best""",
        "densest chunks": f"""SELECT x.episode_id
            FROM q CROSS JOIN LATERAL (
                SELECT m.thread_id FROM message_chunks m
                WHERE m.dataset = :dataset AND m.search_vector @@ {_LEXEME_QUERY}
                ORDER BY ts_rank(m.search_vector, {_LEXEME_QUERY}, 1) DESC
                LIMIT :approx_per_lexeme) dense
            JOIN ({_CANDIDATES}) x ON x.thread_id = dense.thread_id""",
    }
    if with_vector:
        parts["nearest summaries"] = f"""SELECT x.episode_id FROM ({_CANDIDATES}) x
                ORDER BY x.embedding <=> CAST(:qvec AS vector) LIMIT :approx_candidates"""
        parts["nearest chunks"] = f"""SELECT x.episode_id
                FROM (SELECT m.thread_id FROM message_chunks m WHERE m.dataset = :dataset
                      ORDER BY m.embedding <=> CAST(:qvec AS vector)
                      LIMIT :approx_candidates) near
                JOIN ({_CANDIDATES}) x ON x.thread_id = near.thread_id"""
    return parts


#: The episodes nearest the time a query names (RankingOptions.named_time_recency ranks
#: them by it): those ending in or after the window, earliest first, and those ending in or
#: before it, latest first — two walks of the (dataset, ended_at) order. Nothing when the
#: query names no time (the NULL comparisons match no row).
_NEAREST_NAMED_TIME = f"""(SELECT x.episode_id, x.ended_at FROM ({_CANDIDATES}) x
            WHERE x.ended_at >= CAST(:named_start AS timestamptz)
            ORDER BY x.ended_at LIMIT :near_limit)
        UNION
        (SELECT x.episode_id, x.ended_at FROM ({_CANDIDATES}) x
            WHERE x.ended_at <= CAST(:named_end AS timestamptz)
            ORDER BY x.ended_at DESC LIMIT :near_limit)"""


def _approximate_pool(with_vector: bool, options: RankingOptions) -> str:
    """The union of :func:`approximate_parts`, and — when recency counts from the time a
    query names — the episodes nearest that time (recency alone can carry one into the
    top, as the most recent ones otherwise)."""
    parts = list(approximate_parts(with_vector).values())
    if options.named_time_recency:
        parts.append(
            "SELECT episode_id FROM ("
            + _NEAREST_NAMED_TIME.replace(":near_limit", ":approx_recent")
            + ") near"
        )
    return "\n            UNION\n            ".join(f"({p})" for p in parts)


@lru_cache(maxsize=16)
def recall_sql(
    *,
    with_query: bool,
    with_vector: bool,
    approximate: bool = False,
    options: RankingOptions = DEFAULT_RANKING,
    exact_cosine: bool = False,
    guarded: bool = False,
) -> str:
    """The ranking statement. ``with_query``: score similarity (lexical part);
    ``with_vector``: also the semantic part (needs ``:qvec``). ``approximate``: score only
    the candidates of :func:`_approximate_pool` (needs ``:approx_candidates`` and
    ``:approx_recent``); without a query it is exact (the order is the time order).
    ``exact_cosine`` (approximate path): normalise the semantic signal by the dataset's
    best cosine, read from every filtered summary and chunk vector, instead of the
    candidates' best (see :class:`Approximation`).
    ``options``: see :class:`RankingOptions` (with ``weight_generic_terms``, ``:weights``
    holds each lexeme's weight, in the order of ``:lexemes``). ``guarded`` (the exact path
    with a query, inside :func:`recall_statement`'s ``guarded`` form): no candidate is read
    when the dataset's count (its ``total``) is above ``:exact_up_to``."""
    if guarded and (approximate or not with_query):
        raise ValueError("only the exact statement with a query is guarded")
    if not with_query:
        candidates = _CANDIDATES
        if approximate:  # recency alone: the newest episodes by the index, as ranked below
            candidates += " ORDER BY e.ended_at DESC, e.episode_id DESC LIMIT :limit"
            if options.named_time_recency:  # or those nearest the time the query names
                candidates = (
                    f"SELECT x.* FROM ({_CANDIDATES}) x WHERE x.episode_id IN ("
                    f"SELECT newest.episode_id FROM ({candidates}) newest UNION "
                    "SELECT near.episode_id FROM ("
                    f"{_NEAREST_NAMED_TIME.replace(':near_limit', ':limit')}) near)"
                )
        span = span_cte(f"({_CANDIDATES})") if options.recency_span else ""
        return f"""
            WITH c AS ({candidates}),{span}
            scored AS (
                SELECT c.episode_id, c.ended_at, 0.0::float8 AS similarity,
                       0.0::float8 AS lexical, 0.0::float8 AS semantic,
                       ({ranked_recency_sql("c.ended_at", options)})::float8 AS recency
                FROM c
            )
            SELECT {_EPISODE_COLUMNS}, s.similarity, s.lexical, s.semantic, s.recency,
                   {fused_relevance_sql(options, "s.similarity", "s.recency")} AS relevance,
                   0.0::float8 AS cosine, 0.0::float8 AS coverage,
                   0.0::float8 AS passage_coverage, 0.0::float8 AS absolute_relevance,
                   1.0::float8 AS request_match, true AS passes
            FROM scored s
            JOIN episodes e ON e.dataset = :dataset AND e.episode_id = s.episode_id
            ORDER BY relevance DESC, s.ended_at DESC, s.episode_id DESC
            LIMIT :limit
        """
    query_lexemes = "q AS (SELECT DISTINCT lexeme FROM unnest(CAST(:lexemes AS text[])) AS lexeme)"
    weight, weight_join = None, ""
    matched, query_words = "count(*)::float8", "count(*)"
    if options.weighted_terms():
        # term: the query word's own lexeme a lexeme stands for (itself, or the word an
        # irregular form expands); NULL for a feedback word, which no coverage counts.
        query_lexemes = (
            "q AS (SELECT lexeme, max(weight) AS weight, min(term) AS term FROM unnest("
            "CAST(:lexemes AS text[]), CAST(:weights AS float8[]), CAST(:terms AS text[])) "
            "AS u(lexeme, weight, term) GROUP BY lexeme)"
        )
        weight, weight_join = "qw.weight", "\n            JOIN q qw ON qw.lexeme = t.lexeme"
        matched, query_words = "count(DISTINCT qw.term)::float8", "count(DISTINCT term)"
    lexical = "((n.doc_rel + n.passage_rel) / 2.0)"
    head_ctes, head_score, head_join, head_rel = "", "", "", ""
    if options.head_share > 0:
        h = options.head_share
        lexical = f"({(1.0 - h) / 2} * (n.doc_rel + n.passage_rel) + {h} * n.head_rel)"
        head_score = "\n                   coalesce(hb.score, 0.0) AS head_lexical,"
        head_join = "\n            LEFT JOIN head_bm25 hb ON hb.episode_id = c.episode_id"
        head_rel = (
            "                   coalesce(r.head_lexical / nullif(max(r.head_lexical) OVER (), "
            "0.0), 0.0) AS head_rel,\n"
        )
        head_ctes = f"""
        -- The summary and key learnings alone (the weight-A positions of the document).
        heads AS MATERIALIZED (
            SELECT c.episode_id, ts_filter(c.tsv, '{{a}}') AS tsv FROM c
        ),
        hlens AS (
            SELECT h.episode_id,
                   greatest((SELECT coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0)
                             FROM unnest(h.tsv) u), 1)::float8 AS dl
            FROM heads h
        ),
        hstats AS (SELECT count(*)::float8 AS n, greatest(avg(dl), 1.0) AS avgdl FROM hlens),
        hterms AS (
            SELECT h.episode_id, u.lexeme,
                   coalesce(array_length(u.positions, 1), 1)::float8 AS tf
            FROM heads h CROSS JOIN LATERAL unnest({_only_query_lexemes("h.tsv")}) AS u
            WHERE h.tsv @@ (SELECT tq FROM qq)
        ),
        hdf AS (SELECT lexeme, count(*)::float8 AS df FROM hterms GROUP BY lexeme),
        head_bm25 AS (
            SELECT t.episode_id, {_bm25("t", "hdf", "l.dl", "s", weight)} AS score
            FROM hterms t
            JOIN hdf ON hdf.lexeme = t.lexeme
            JOIN hlens l ON l.episode_id = t.episode_id{weight_join}
            CROSS JOIN hstats s
            GROUP BY t.episode_id
        ),"""
    chunk_cos = "NULL::float8"
    summary_cos = "0.0::float8"
    if with_vector:
        chunk_cos = "1.0 - (m.embedding <=> (SELECT v FROM qv))"
        summary_cos = "coalesce(1.0 - (c.embedding <=> (SELECT v FROM qv)), 0.0)"
    query_ctes = f"""
        qv AS (SELECT CAST(:qvec AS vector) AS v),
        -- The query's lexemes, blinded like the index (recall_index.query_tokens).
        {query_lexemes},
        -- The query's lexemes OR-ed, quoted for tsquery: documents that contain none of
        -- them are skipped before their lexemes are unnested (NULL, no rows, without any).
        qq AS (
            SELECT string_agg({QUOTED_LEXEME}, ' | ')::tsquery AS tq,
                   array_agg(lexeme) AS lexemes
            FROM q
        ),"""
    # BM25's statistics: over the candidates, which on the exact path are the whole
    # filtered dataset; the approximate path scores a part of it, so it counts them over
    # the whole filtered dataset instead (else every query word looks common among
    # candidates chosen for matching it, and the scores, hence the order, differ).
    doc_stats = "SELECT count(*)::float8 AS n, greatest(avg(dl), 1.0) AS avgdl FROM docs"
    doc_df = "\n        ddf AS (SELECT lexeme, count(*)::float8 AS df FROM dterms GROUP BY lexeme),"
    passage_stats = "SELECT count(*)::float8 AS n, greatest(avg(dl), 1.0) AS avgdl FROM passages"
    passage_df = (
        "\n        pdf AS (SELECT lexeme, count(*)::float8 AS df FROM pterms GROUP BY lexeme),"
    )
    # The normalising maxima: the candidates' best, the dataset's on the approximate path.
    best_doc, best_passage = "max(r.doc_lexical) OVER ()", "max(r.passage_lexical) OVER ()"
    best_cosine = "max(r.semantic) OVER ()"
    dataset_ctes = dataset_best = ""
    if approximate:
        dataset_ctes, doc_stats, passage_stats = _dataset_statistics(options)
        best_doc, best_passage = (
            "(SELECT score FROM best_document)",
            "(SELECT score FROM best_passage)",
        )
        doc_df = passage_df = ""  # counted over the dataset (dataset_ctes)
        if exact_cosine and with_vector:
            dataset_best += _dataset_best_cosine()
            best_cosine = "greatest((SELECT cos FROM best_cosine), max(r.semantic) OVER ())"
        # The dataset's statistics come first: the pool takes the best-scoring holders of
        # the selective words from them.
        head = f"""
        WITH {query_ctes}{dataset_ctes}
        pool AS MATERIALIZED (
            {_approximate_pool(with_vector, options)}
        ),
        c AS MATERIALIZED (
            SELECT x.*, coalesce(x.search_vector, ''::tsvector) AS tsv
            FROM ({_CANDIDATES}) x
            WHERE x.episode_id IN (SELECT episode_id FROM pool)
        ),"""
    else:
        head = f"""
        WITH c AS MATERIALIZED (
            -- An episode not indexed yet is found by its summary's embedding alone.
            SELECT x.*, coalesce(x.search_vector, ''::tsvector) AS tsv
            FROM ({_CANDIDATES}) x{_SIZE_GUARD if guarded else ""}
        ),{query_ctes}"""
    if options.recency_span:  # the approximate path's c is a part of the candidates
        head += span_cte(f"({_CANDIDATES})" if approximate else "c")
    # The largest share of the query's weight a candidate holds (RankingOptions.
    # lexical_coverage): the candidates' best, or the dataset's on the approximate path.
    query_idf_cte, doc_share, passage_share = "", "", ""
    if options.lexical_coverage:
        query_idf_cte = _query_idf(options)
        best_doc_idf, best_passage_idf = "max(r.doc_idf) OVER ()", "max(r.passage_idf) OVER ()"
        if approximate:
            best_doc_idf = f"greatest({best_doc_idf}, (SELECT idf FROM best_document))"
            best_passage_idf = f"greatest({best_passage_idf}, (SELECT idf FROM best_passage))"
        doc_share = (
            f" * least(1.0, coalesce({best_doc_idf} / nullif((SELECT doc FROM query_idf), "
            "0.0), 1.0))"
        )
        passage_share = (
            f" * least(1.0, coalesce({best_passage_idf} / nullif((SELECT passage FROM "
            "query_idf), 0.0), 1.0))"
        )
    extra = _extra_signal_sql(options, with_vector, lexical)

    def scaled(cosine: str) -> str:  # on MiniLM's scale (the map is increasing: max commutes)
        return on_reference_scale_sql(cosine, options.cosine_scale)

    chunk_vector = extra["chunk_vector"]
    depth_lexical, depth_open, depth_close = (
        extra["depth_lexical"],
        extra["depth_open"],
        extra["depth_close"],
    )
    depth_cosine, passage_cosines = extra["depth_cosine"], extra["passage_cosines"]
    entity_ctes, extra_raw, extra_join = extra["entity_ctes"], extra["raw"], extra["join"]
    extra_rel, feedback_ctes = extra["rel"], extra["feedback_ctes"]
    scored_from, extra_scored, extra_out = extra["scored_from"], extra["scored"], extra["out"]
    return f"""{head}
        -- Document level: the thread's messages up to the episode's end, and its summary.
        docs AS (
            SELECT c.episode_id, {_document_length("c")} AS dl FROM c
        ),
        dstats AS ({doc_stats}),
        dterms AS (
            SELECT c.episode_id, u.lexeme,
                   coalesce(array_length(u.positions, 1), 1)::float8 AS tf
            FROM c CROSS JOIN LATERAL unnest({_only_query_lexemes("c.tsv")}) AS u
            WHERE c.tsv @@ (SELECT tq FROM qq)
        ),{head_ctes}{doc_df}
        nq AS (SELECT greatest({query_words}, 1)::float8 AS n FROM q),
        doc_bm25 AS (
            SELECT t.episode_id, {_bm25("t", "ddf", "d.dl", "s", weight)} AS score,
                   {matched} AS matched, {_matched_idf("ddf", "s", weight)} AS matched_idf
            FROM dterms t
            JOIN ddf ON ddf.lexeme = t.lexeme{weight_join}
            JOIN docs d ON d.episode_id = t.episode_id
            CROSS JOIN dstats s
            GROUP BY t.episode_id
        ),
        -- Passage level: the thread's chunks (keyed by thread; the primary key serves this).
        passages AS MATERIALIZED (
            SELECT row_number() OVER () AS pid, c.episode_id, m.search_vector AS tsv,
                   greatest(m.search_length, 1)::float8 AS dl, {chunk_cos} AS cos{chunk_vector}
            FROM c
            JOIN message_chunks m
              ON m.dataset = :dataset AND m.thread_id = c.thread_id
              AND m.end_sequence <= c.end_sequence
        ),
        pstats AS ({passage_stats}),
        pterms AS (
            SELECT p.pid, p.episode_id, p.dl, u.lexeme,
                   coalesce(array_length(u.positions, 1), 1)::float8 AS tf
            FROM passages p CROSS JOIN LATERAL unnest({_only_query_lexemes("p.tsv")}) AS u
            WHERE p.tsv @@ (SELECT tq FROM qq)
        ),
{passage_df}
        passage_bm25 AS (
            SELECT episode_id, max(score) AS score, max(matched) AS matched,
                   max(matched_idf) AS matched_idf{depth_lexical}
            FROM ({depth_open}
                SELECT t.pid, t.episode_id, {_bm25("t", "pdf", "t.dl", "s", weight, passage=True)} AS score,
                       {matched} AS matched, {_matched_idf("pdf", "s", weight)} AS matched_idf
                FROM pterms t
                JOIN pdf ON pdf.lexeme = t.lexeme{weight_join}
                CROSS JOIN pstats s
                GROUP BY t.pid, t.episode_id{depth_close}
            ) per_passage
            GROUP BY episode_id
        ),
        passage_cos AS (
            SELECT episode_id, max(cos) AS cos{depth_cosine} FROM {passage_cosines}
            GROUP BY episode_id
        ),{entity_ctes}
        {dataset_best}{query_idf_cte}
        raw AS (
            SELECT c.episode_id, c.ended_at,
                   coalesce(db.score, 0.0) AS doc_lexical,
                   coalesce(pb.score, 0.0) AS passage_lexical,{head_score}
                   coalesce(db.matched_idf, 0.0) AS doc_idf,
                   coalesce(pb.matched_idf, 0.0) AS passage_idf,
                   greatest({summary_cos}, coalesce(pc.cos, 0.0), 0.0) AS semantic,
                   coalesce(db.matched, 0.0) / (SELECT n FROM nq) AS coverage,
                   coalesce(pb.matched, 0.0) / (SELECT n FROM nq) AS passage_coverage,
                   ({ranked_recency_sql("c.ended_at", options)})::float8 AS recency{extra_raw}
            FROM c
            LEFT JOIN doc_bm25 db ON db.episode_id = c.episode_id
            LEFT JOIN passage_bm25 pb ON pb.episode_id = c.episode_id
            LEFT JOIN passage_cos pc ON pc.episode_id = c.episode_id{head_join}{extra_join}
        ),
        normed AS (
            SELECT r.*,
                   coalesce(r.doc_lexical / nullif({best_doc}, 0.0), 0.0){doc_share}
                       AS doc_rel,
                   coalesce(r.passage_lexical / nullif({best_passage}, 0.0),
                            0.0){passage_share} AS passage_rel,
{head_rel}                   coalesce({scaled("r.semantic")} / nullif({scaled(best_cosine)}, 0.0), 0.0)
                       AS sem_rel,{extra_rel}
                   {scaled("r.semantic")} AS scaled_cosine,
                   {scaled(best_cosine)} AS scaled_best_cosine,
                   {best_cosine} AS best_cosine
            FROM raw r
        ),{feedback_ctes}
        scored AS (
            SELECT n.episode_id, n.ended_at, n.recency,
                   n.semantic::float8 AS cosine, n.coverage::float8 AS coverage,
                   n.passage_coverage::float8 AS passage_coverage,
                   {calibrated_sql(("n.semantic", "n.coverage", "n.passage_coverage"), _REQUEST_BEST, options)} AS absolute_relevance,
                   {match_sql(_REQUEST_BEST, options)} AS request_match,
                   ({similarity_sql(options, _signals(lexical))})::float8 AS similarity,
                   ({lexical})::float8 AS lexical,
                   n.sem_rel::float8 AS semantic{extra_scored}
            FROM {scored_from} n
        )
        SELECT {_EPISODE_COLUMNS}, s.similarity, s.lexical, s.semantic, s.recency,
               {fused_relevance_sql(options, "s.similarity", "s.recency")} AS relevance,
               s.cosine, s.coverage, s.passage_coverage, s.absolute_relevance,
               s.request_match,
               coalesce({relevant_sql("s.ended_at", options)}, false) AS passes{extra_out}
        FROM scored s
        JOIN episodes e ON e.dataset = :dataset AND e.episode_id = s.episode_id
        -- Those the thresholds leave out come after every one they keep, and only to fill
        -- the limit: the caller drops them. So the top rows that pass are the same as with
        -- the condition in a WHERE, and a request whose every candidate is left out still
        -- answers its match (RecalledEpisodes.match) and that it abstained.
        ORDER BY passes DESC, relevance DESC, s.ended_at DESC, s.episode_id DESC
        LIMIT :limit
    """


def _extra_signal_sql(options: RankingOptions, with_vector: bool, lexical: str) -> dict[str, str]:
    """The pieces of the ranking statement that compute the optional signals
    (:data:`EXTRA_SIGNALS`) whose switch is on; empty strings leave the statement as it
    was without them."""
    on = set(options.signals()) - set(LEARNED_WEIGHTS)
    pieces = dict.fromkeys(
        (
            "chunk_vector",
            "depth_lexical",
            "depth_open",
            "depth_close",
            "depth_cosine",
            "entity_ctes",
            "raw",
            "join",
            "rel",
            "feedback_ctes",
            "scored",
            "out",
        ),
        "",
    )
    pieces["passage_cosines"] = "passages"
    pieces["scored_from"] = "normed"
    k = options.passage_depth
    if k:
        # Several places in one episode: its k best passages (BM25) and chunks (cosine).
        pieces["depth_lexical"] = (
            f",\n                   sum(score) FILTER (WHERE rn <= {k}) AS depth_score"
        )
        pieces["depth_open"] = """
                SELECT ranked.*, row_number() OVER (
                    PARTITION BY ranked.episode_id ORDER BY ranked.score DESC) AS rn
                FROM ("""
        pieces["depth_close"] = "\n                ) ranked"
        pieces["depth_cosine"] = f", avg(cos) FILTER (WHERE rn <= {k}) AS depth_cos"
        pieces["passage_cosines"] = """(
                SELECT p.episode_id, p.cos, row_number() OVER (
                    PARTITION BY p.episode_id ORDER BY p.cos DESC NULLS LAST) AS rn
                FROM passages p) ranked_cosines"""
        pieces["raw"] += """,
                   coalesce(pb.depth_score, 0.0) AS passage_depth_raw,
                   greatest(coalesce(pc.depth_cos, 0.0), 0.0) AS cosine_depth"""
        pieces["rel"] += """
                   coalesce(r.passage_depth_raw / nullif(max(r.passage_depth_raw) OVER (), 0.0),
                            0.0) AS passage_depth,"""
    if options.entity_match:
        # The query's names and phrases among the episodes' entities (blind tokens, as the
        # entity filter reads them), each weighted by its rarity among the candidates: the
        # speakers' names, on every episode of their dataset, weigh nearly nothing.
        pieces["entity_ctes"] = """
        candidate_entities AS MATERIALIZED (
            SELECT c.episode_id, e.entity_tokens FROM c
            JOIN episodes e ON e.dataset = :dataset AND e.episode_id = c.episode_id
        ),
        entity_idf AS (
            SELECT t.token,
                   ln(1.0 + ((SELECT count(*) FROM c)::float8 - h.df + 0.5) / (h.df + 0.5)) AS idf
            FROM unnest(CAST(:entity_query AS text[])) AS t(token)
            CROSS JOIN LATERAL (
                SELECT count(*)::float8 AS df FROM candidate_entities ce
                WHERE ce.entity_tokens @> ARRAY[t.token]) h
            WHERE h.df > 0
        ),
        entity_hits AS (
            SELECT ce.episode_id, sum(i.idf) AS score
            FROM candidate_entities ce JOIN entity_idf i ON ce.entity_tokens @> ARRAY[i.token]
            GROUP BY ce.episode_id
        ),"""
        pieces["raw"] += ",\n                   coalesce(eh.score, 0.0) AS entity_raw"
        pieces["join"] += "\n            LEFT JOIN entity_hits eh ON eh.episode_id = c.episode_id"
        pieces["rel"] += """
                   coalesce(r.entity_raw / nullif(max(r.entity_raw) OVER (), 0.0), 0.0)
                       AS entity_match,"""
    if options.feedback:
        if with_vector:
            # Rocchio: the first pass (LEARNED_WEIGHTS' fit) picks the best episodes; the
            # centroid of their best chunks joins the query, and every chunk is compared
            # with both (a cosine with q + share × centroid, up to its norm).
            signals = _signals(lexical)
            first_fit = " + ".join(f"{w} * {signals[n]}" for n, w in LEARNED_WEIGHTS.items())
            share = float(FEEDBACK_SHARE)
            pieces["chunk_vector"] = ", m.embedding AS vec"
            pieces["feedback_ctes"] = f"""
        first_pass AS (
            SELECT n.episode_id FROM normed n
            WHERE n.doc_rel > 0 OR n.passage_rel > 0 OR n.sem_rel > 0
            ORDER BY {first_fit} DESC, n.episode_id LIMIT {int(options.feedback)}
        ),
        centroid AS (
            SELECT avg(b.vec) AS v FROM first_pass f CROSS JOIN LATERAL (
                SELECT p.vec FROM passages p WHERE p.episode_id = f.episode_id
                ORDER BY p.cos DESC NULLS LAST LIMIT 1) b
        ),
        feedback AS (
            SELECT p.episode_id,
                   max((p.cos + {share} * (1.0 - (p.vec <=> (SELECT v FROM centroid))))
                       / {1.0 + share}) AS cos
            FROM passages p GROUP BY p.episode_id
        ),
        with_feedback AS (
            SELECT n.*, greatest(coalesce(fb.cos, 0.0), 0.0) AS feedback_cosine
            FROM normed n LEFT JOIN feedback fb ON fb.episode_id = n.episode_id
        ),"""
            pieces["scored_from"] = "with_feedback"
        else:
            pieces["rel"] += "\n                   0.0::float8 AS feedback_cosine,"
    if options.phrase:
        # The query's word pairs as phrase queries (:phrases, built by query_phrase_pairs).
        pieces["entity_ctes"] += """
        phrase_hits AS (
            SELECT c.episode_id, count(*)::float8 AS hits
            FROM c CROSS JOIN unnest(CAST(:phrases AS text[])) AS p(tq)
            WHERE c.tsv @@ CAST(p.tq AS tsquery)
            GROUP BY c.episode_id
        ),"""
        pieces["raw"] += (
            ",\n                   coalesce(ph.hits, 0.0) "
            "/ greatest(cardinality(CAST(:phrases AS text[])), 1) AS phrase"
        )
        pieces["join"] += "\n            LEFT JOIN phrase_hits ph ON ph.episode_id = c.episode_id"
    if options.speaker:
        # The query's (name, word) pairs (:func:`speaker_pair_params`) in the document:
        # per name, how many of the other query words that speaker said; the best name.
        pieces["entity_ctes"] += """
        speaker_pairs AS MATERIALIZED (
            SELECT p.name, p.word, CAST(p.pair AS tsquery) AS tq
            FROM unnest(CAST(:speaker_names AS text[]), CAST(:speaker_words AS text[]),
                        CAST(:speaker_pairs AS text[])) AS p(name, word, pair)
        ),
        speaker_hits AS (
            SELECT h.episode_id, max(h.words)::float8 AS words FROM (
                SELECT c.episode_id, sp.name, count(DISTINCT sp.word) AS words
                FROM c CROSS JOIN speaker_pairs sp
                WHERE c.tsv @@ sp.tq
                GROUP BY c.episode_id, sp.name) h
            GROUP BY h.episode_id
        ),"""
        pieces["raw"] += (
            ",\n                   coalesce(sh.words, 0.0) "
            "/ CAST(:speaker_word_count AS float8) AS speaker_coverage"
        )
        pieces["join"] += "\n            LEFT JOIN speaker_hits sh ON sh.episode_id = c.episode_id"
    for name in EXTRA_SIGNALS:
        if name in on:
            pieces["scored"] += f",\n                   n.{name}::float8 AS {name}"
            pieces["out"] += f", s.{name}"
    return pieces


def _idf(df: str, stats: str) -> str:
    """BM25's idf of a lexeme whose document frequency is ``df`` (NULL: none holds it)."""
    return f"ln(1.0 + ({stats}.n - coalesce({df}, 0.0) + 0.5) / (coalesce({df}, 0.0) + 0.5))"


def _matched_idf(df: str, stats: str, weight: str | None) -> str:
    """Summed over a document's (passage's) matching query lexemes: their idf (times their
    weight), the part of the query's weight it holds (RankingOptions.lexical_coverage)."""
    weighted = f"{weight} * " if weight else ""
    return f"sum({weighted}{_idf(f'{df}.df', stats)})"


def _query_idf(options: RankingOptions) -> str:
    """A CTE ``query_idf`` (``doc``, ``passage``): the query's whole weight, the sum of its
    words' idf over the documents (passages) — a word the dataset lacks (df 0) included, and
    a word that stands for several lexemes (its irregular forms) counted once at its best —
    against which :func:`_matched_idf` is a share. Reads ``q``, ``ddf``, ``pdf``, ``dstats``
    and ``pstats`` as both paths define them."""
    weighted = options.weighted_terms()
    weight = "q.weight * " if weighted else ""
    word = "coalesce(q.term, q.lexeme)" if weighted else "q.lexeme"

    def whole(df: str, stats: str) -> str:
        return (
            f"(SELECT coalesce(sum(w), 0.0) FROM (SELECT max({weight}{_idf('f.df', 's')}) AS w "
            f"FROM q LEFT JOIN {df} f ON f.lexeme = q.lexeme CROSS JOIN {stats} s "
            f"GROUP BY {word}) per_word)"
        )

    return f"""
        query_idf AS (
            SELECT {whole("ddf", "dstats")} AS doc, {whole("pdf", "pstats")} AS passage
        ),"""


def _document_length(alias: str) -> str:
    """An episode's document length in lexemes: its stored ``search_length``, else counted
    from its lexical document (``alias.tsv``; an episode indexed before lengths were kept)."""
    return (
        f"coalesce({alias}.search_length, (SELECT sum(coalesce(array_length(u.positions, 1), 1))"
        f" FROM unnest({alias}.tsv) u))::float8"
    )


def _dataset_statistics(options: RankingOptions = DEFAULT_RANKING) -> tuple[str, str, str]:
    """What the approximate path takes from the whole filtered dataset rather than from its
    candidates, for its scores to equal the exact path's (which computes them over every
    filtered episode): BM25's statistics and the best BM25, by which the lexical signals
    are normalised. Returns CTEs to precede the pool (``dataset_dterms``, ``dataset_pterms``:
    every document and passage holding a selective query lexeme, found through the GIN
    indexes on ``search_vector``, with the lexemes' counts; ``ddf`` and ``pdf``; their
    exact BM25 per episode, whose best the pool takes; ``best_document``,
    ``best_passage``) and the bodies of ``dstats`` and ``pstats``. The counts and average lengths come from index-only scans of the
    covering indexes of 0013 (no document, vector or chunk row read). A passage is an
    (episode, chunk of its thread up to the episode's end) pair, as on the exact path."""
    passages_of = _passages_of_candidates()
    # Weighted query lexemes (RankingOptions.weighted_terms) score as on the exact path.
    weight, weight_join, matched = None, "", "count(*)::float8"
    if options.weighted_terms():
        weight, weight_join = "qw.weight", " JOIN q qw ON qw.lexeme = t.lexeme"
        matched = "count(DISTINCT qw.term)::float8"
    # ``search_length`` alone: it is written with ``search_vector`` (recall_index), so the
    # exact path's fallback (counting the document's lexemes) never applies.
    # The best BM25 is computed over the documents (passages) holding a selective query
    # lexeme (at most :approx_selective_df holders): reading every holder of a word most
    # documents contain would cost what the exact path costs. A document holding only
    # common words scores little (their idf is small); the candidates' best covers it.
    ctes = f"""
        ddf AS (
            SELECT q.lexeme, df.df FROM q CROSS JOIN LATERAL (
                SELECT count(*)::float8 AS df FROM ({_CANDIDATES}) x
                WHERE x.search_vector @@ {_LEXEME_QUERY}) df
        ),
        pdf AS (
            SELECT q.lexeme, df.df FROM q CROSS JOIN LATERAL (
                SELECT count(*)::float8 AS df FROM {passages_of}
                WHERE m.search_vector @@ {_LEXEME_QUERY}) df
        ),
        selective AS (
            SELECT (SELECT string_agg({QUOTED_LEXEME}, ' | ')::tsquery FROM ddf
                    WHERE df > 0 AND df <= :approx_selective_df) AS doc_tq,
                   (SELECT string_agg({QUOTED_LEXEME}, ' | ')::tsquery FROM pdf
                    WHERE df > 0 AND df <= :approx_selective_df) AS passage_tq
        ),
        dataset_dterms AS MATERIALIZED (
            SELECT x.episode_id, x.search_length::float8 AS dl, u.lexeme,
                   coalesce(array_length(u.positions, 1), 1)::float8 AS tf
            FROM ({_CANDIDATES}) x
            CROSS JOIN LATERAL unnest({_only_query_lexemes("x.search_vector")}) AS u
            WHERE x.search_vector @@ (SELECT doc_tq FROM selective)
        ),
        dataset_pterms AS MATERIALIZED (
            SELECT x.episode_id, m.start_sequence, m.start_offset,
                   greatest(m.search_length, 1)::float8 AS dl, u.lexeme,
                   coalesce(array_length(u.positions, 1), 1)::float8 AS tf
            FROM {passages_of}
            CROSS JOIN LATERAL unnest({_only_query_lexemes("m.search_vector")}) AS u
            WHERE m.search_vector @@ (SELECT passage_tq FROM selective)
        ),
        dataset_dstats AS MATERIALIZED (
            SELECT count(*)::float8 AS n, greatest(avg(x.search_length), 1.0) AS avgdl
            FROM ({_CANDIDATES}) x
        ),
        dataset_pstats AS MATERIALIZED (
            SELECT count(*)::float8 AS n, greatest(avg(greatest(m.search_length, 1)), 1.0)
                   AS avgdl
            FROM {passages_of}
        ),
        -- The exact document and best-passage BM25 (and how many query words each holds)
        -- of every holder of a selective word: the best of them normalise the lexical
        -- signal, and the pool takes the best of them by their lexical score.
        dataset_doc_bm25 AS MATERIALIZED (
            SELECT t.episode_id, {_bm25("t", "ddf", "t.dl", "s", weight)} AS score,
                   {matched} AS matched, {_matched_idf("ddf", "s", weight)} AS matched_idf
            FROM dataset_dterms t JOIN ddf ON ddf.lexeme = t.lexeme{weight_join}
            CROSS JOIN dataset_dstats s
            GROUP BY t.episode_id
        ),
        dataset_passage_bm25 AS MATERIALIZED (
            SELECT episode_id, max(score) AS score, max(matched) AS matched,
                   max(matched_idf) AS matched_idf FROM (
                SELECT t.episode_id, {_bm25("t", "pdf", "t.dl", "s", weight, passage=True)} AS score,
                       {matched} AS matched, {_matched_idf("pdf", "s", weight)} AS matched_idf
                FROM dataset_pterms t JOIN pdf ON pdf.lexeme = t.lexeme{weight_join}
                CROSS JOIN dataset_pstats s
                GROUP BY t.episode_id, t.start_sequence, t.start_offset) per_passage
            GROUP BY episode_id
        ),
        best_document AS (
            SELECT max(score) AS score, max(matched_idf) AS idf FROM dataset_doc_bm25
        ),
        best_passage AS (
            SELECT max(score) AS score, max(matched_idf) AS idf FROM dataset_passage_bm25
        ),"""
    doc_stats = "SELECT n, avgdl FROM dataset_dstats"
    passage_stats = "SELECT n, avgdl FROM dataset_pstats"
    return ctes, doc_stats, passage_stats


def _passages_of_candidates() -> str:
    """FROM items: every filtered episode (``x``) joined to the chunks of its thread up to
    its end (``m``): the exact path's passages."""
    return f"""({_CANDIDATES}) x
              JOIN message_chunks m
                ON m.dataset = :dataset AND m.thread_id = x.thread_id
                AND m.end_sequence <= x.end_sequence"""


def _dataset_best_cosine() -> str:
    """The best cosine between the query and any filtered summary or passage of the
    dataset, as the exact path's ``max(semantic)``: a read of every such vector (no index
    answers a maximum exactly; HNSW's nearest neighbours miss it on hard data)."""
    return f"""
        best_cosine AS (
            SELECT greatest(
                (SELECT max(1.0 - (x.embedding <=> (SELECT v FROM qv))) FROM ({_CANDIDATES}) x),
                (SELECT max(1.0 - (m.embedding <=> (SELECT v FROM qv)))
                 FROM {_passages_of_candidates()}),
                0.0) AS cos
        ),"""


def _only_query_lexemes(tsv: str) -> str:
    """The query's lexemes of ``tsv`` with their positions, without unnesting the rest:
    setweight marks them (weight B, unused elsewhere), ts_filter keeps only the marked."""
    return f"ts_filter(setweight({tsv}, 'B', (SELECT lexemes FROM qq)), '{{b}}')"


def _bm25(
    terms: str,
    df: str,
    length: str,
    stats: str,
    weight: str | None = None,
    *,
    passage: bool = False,
) -> str:
    """Okapi BM25 summed over a document's (or passage's) matching terms, each term times
    its query-side ``weight`` expression when given; a ``passage``'s constants are
    :data:`PASSAGE_BM25` (when set), a document's BM25_K1 and BM25_B."""
    weighted = f"{weight} * " if weight else ""
    k1, b = PASSAGE_BM25 if passage and PASSAGE_BM25 else (BM25_K1, BM25_B)
    return (
        f"sum({weighted}ln(1.0 + ({stats}.n - {df}.df + 0.5) / ({df}.df + 0.5)) * {terms}.tf "
        f"* ({k1} + 1.0) / ({terms}.tf + {k1} * (1.0 - {b} "
        f"+ {b} * {length} / {stats}.avgdl)))"
    )


# The count, and whether the dataset has any event (one probe of the events' primary key):
# most datasets have none, and then Recall skips the events' statement (a round trip);
# whether ``abstain``'s thresholds hold for the dataset (_threshold_sql's condition); and
# whether the dataset is still settling (RecalledEpisodes.chunks_pending, episodes_pending):
# a probe of episodes_dataset_chunks_pending_idx (dataset, episode_id) WHERE chunks_pending
# and one of (dataset, status). The ORDER BY is the first index's order: as an EXISTS the
# planner took the Summariser's queue index (completed_at) WHERE chunks_pending instead and
# read every pending row of the partition, so another dataset's backlog of 20k cost 14-30 ms
# (0.04 ms this way; migration 0020). Named apart from the episode's own columns
# (r.chunks_pending), which the ranking rows carry.
COUNT_STATEMENT = (
    "SELECT count(*) AS episode_count, "
    "EXISTS (SELECT 1 FROM events ev WHERE ev.dataset = :dataset) AS has_events, "
    "(SELECT true FROM episodes cp WHERE cp.dataset = :dataset AND cp.chunks_pending "
    "AND cp.status = 'completed' ORDER BY cp.episode_id LIMIT 1) IS NOT NULL "
    "AS dataset_chunks_pending, "
    "EXISTS (SELECT 1 FROM episodes ep WHERE ep.dataset = :dataset "
    "AND ep.status IN ('pending', 'processing')) AS dataset_episodes_pending, "
    f"{ABSTAIN_APPLIED_SQL} AS abstain_applied "
    "FROM episodes WHERE dataset = :dataset "
    "AND status = 'completed' AND (CAST(:as_of AS timestamptz) IS NULL "
    "OR ended_at <= CAST(:as_of AS timestamptz))"
)


#: The exact statement's candidates when the dataset's size is not known: none when the
#: dataset has more completed episodes than ``:exact_up_to`` (its count, ``total``, is
#: read first: a one-time filter, so no candidate is read then). Measured: no slower than
#: the unguarded statement (docs/benchmarks.md "Recall, sixth pass").
_SIZE_GUARD = "\n            WHERE (SELECT t.episode_count FROM total t) <= :exact_up_to"


@lru_cache(maxsize=16)
def recall_statement(
    *,
    with_query: bool,
    with_vector: bool,
    approximate: bool = False,
    options: RankingOptions = DEFAULT_RANKING,
    exact_cosine: bool = False,
    guarded: bool = False,
) -> str:
    """The ranking and the dataset's episode count in one statement (one round trip, one
    snapshot): one row per ranked episode, each carrying ``episode_count``,
    ``has_events`` and ``abstain_applied``; a single row with only those when no episode
    qualifies. ``guarded``
    (the exact statement with a query): the count is taken first and nothing is ranked
    when it is above ``:exact_up_to`` — the size probe of a dataset not seen before,
    within the ranking (:class:`SizeGuard`)."""
    ranking = recall_sql(
        with_query=with_query,
        with_vector=with_vector,
        approximate=approximate,
        options=options,
        exact_cosine=exact_cosine,
        guarded=guarded,
    )
    if guarded:  # the count as a CTE, which the ranking's candidates read (_SIZE_GUARD)
        return f"""
        WITH total AS MATERIALIZED ({COUNT_STATEMENT})
        SELECT total.episode_count, total.has_events, total.abstain_applied, total.dataset_chunks_pending,
               total.dataset_episodes_pending, r.*
        FROM total
        LEFT JOIN ({ranking}) r ON true
        ORDER BY r.passes DESC NULLS LAST, r.relevance DESC NULLS LAST, r.ended_at DESC,
                 r.episode_id DESC
    """
    return f"""
        SELECT total.episode_count, total.has_events, total.abstain_applied, total.dataset_chunks_pending,
               total.dataset_episodes_pending, r.*
        FROM ({COUNT_STATEMENT}) total
        LEFT JOIN ({ranking}) r ON true
        ORDER BY r.passes DESC NULLS LAST, r.relevance DESC NULLS LAST, r.ended_at DESC,
                 r.episode_id DESC
    """


def _driver_form(sql: str) -> str:
    """``sql`` as SQLAlchemy's psycopg dialect compiles ``text(sql)`` (``:name`` becomes
    ``%(name)s``), for :meth:`~sqlalchemy.engine.Connection.exec_driver_sql`: a statement
    sent on every call then skips SQLAlchemy's per-call compilation and parameter
    processing (its events still fire, its errors are still wrapped)."""
    from sqlalchemy.dialects.postgresql import psycopg

    return str(text(sql).compile(dialect=psycopg.dialect()))


@lru_cache(maxsize=16)
def _driver_statement(
    with_query: bool,
    with_vector: bool,
    options: RankingOptions,
    approximate: bool = False,
    exact_cosine: bool = False,
    guarded: bool = False,
) -> str:
    """The ranking statement (:func:`recall_statement`) in the driver's form."""
    return _driver_form(
        recall_statement(
            with_query=with_query,
            with_vector=with_vector,
            approximate=approximate,
            options=options,
            exact_cosine=exact_cosine,
            guarded=guarded,
        )
    )


#: How the approximate statement is planned (see :func:`rank`).
CUSTOM_PLANS = "force_custom_plan"


@dataclass(frozen=True)
class Approximation:
    """How the approximate path gathers candidates (see :func:`_approximate_pool`)."""

    #: How many episodes each of the nearest-summary, nearest-chunk and lexical parts adds.
    candidates: int = 400
    #: How many of the most recent episodes join them.
    recent: int = 100
    #: Per query word, how many of the documents and of the chunks that hold it most
    #: densely join them (they carry the dataset's best BM25, which normalises the
    #: lexical signal).
    per_lexeme: int = 50
    #: A query word held by at most this many documents (passages) is selective: the
    #: best BM25 that normalises the lexical signal is computed over all its holders.
    selective_df: int = 5000
    #: Normalise the semantic signal by the dataset's best cosine (every filtered summary
    #: and chunk vector read) rather than the candidates' best (the HNSW nearest, which
    #: misses the dataset's best on hard data): the exact path's semantic scores, at the
    #: price of that read (docs/benchmarks.md "Recall at scale").
    exact_cosine: bool = False


@dataclass(frozen=True)
class SizeGuard:
    """How :func:`rank` ranks a dataset whose size is not known yet: exactly if it has at
    most ``exact_up_to`` completed episodes — which the exact statement checks itself, from
    the count it reads anyway, before reading any candidate — else, with a second
    statement, ``otherwise``. It spares the size probe a statement of its own (or a part of
    the opening's, ~0.2-0.3 ms: docs/benchmarks.md "Recall, sixth pass")."""

    exact_up_to: int
    otherwise: Approximation


@dataclass(frozen=True)
class Ranking:
    """What one ranking statement answered (see :func:`rank`)."""

    #: Column name to value (dicts, as :func:`~episodic.store.raw_statement.fetch_all`
    #: reads them): the candidates the thresholds keep, best first.
    rows: list[dict[str, Any]]
    count: int
    #: Whether the dataset has any event at all (else ranking its events can be skipped).
    has_events: bool
    #: The query's tokens as sent (None without a query), for the events' ranking to reuse.
    lexemes: list[str] | None
    #: The request's match (``relevance.request_match``: how likely the dataset holds an
    #: answer at all) when there was a query and at least one candidate; else None.
    match: float | None = None
    #: Whether the thresholds left out every candidate there was (there was at least one).
    withheld: bool = False
    #: Whether ``abstain``'s thresholds held: it was asked, with a query, by a model with
    #: curves, of a dataset in the language they were fitted in (else every candidate is
    #: kept, as without it).
    abstain_applied: bool = False
    #: Whether a current episode of the dataset still waits for its chunk index, and
    #: whether episodes of it are queued or being summarised (the dataset is settling).
    chunks_pending: bool = False
    episodes_pending: bool = False


def reorder_top(
    rows: Sequence[Any],
    options: RankingOptions,
    similarity_weight: float,
    recency_weight: float,
) -> list[Any]:
    """``rows`` (ranked, best first) with their first ``options.rerank_top`` episodes put in
    the order of the learned fusion with ``options.rerank_weights``
    (``RankingOptions.rerank_top``): ``similarity_weight`` × exp(fit − ideal fit) +
    ``recency_weight`` × recency, the ideal being, among those k, 1 on the relative
    signals and the coverages and the best of the others (the cosine, the optional
    signals), as the ranking's own fusion has it over every candidate. Rows without one of
    the weighted signals (events) keep their places; a tie keeps the ranking's order."""
    k = options.rerank_top
    if k < 2 or len(rows) < 2:
        return list(rows)
    weights = dict(options.rerank_weights)
    head = [i for i, r in enumerate(rows[:k]) if all(name in r for name in weights)]
    if len(head) < 2:
        return list(rows)

    def signal(row: Any, name: str) -> float:  # the cosine on MiniLM's scale, as fused
        value = float(row[name])
        return on_reference_scale(value, options.cosine_scale) if name == "cosine" else value

    ideal = {
        name: 1.0
        if name not in EXTRA_SIGNALS and name != "cosine"
        else max(signal(rows[i], name) for i in head)
        for name in weights
    }
    best = sum(w * ideal[name] for name, w in weights.items())

    def similarity(row: Any) -> float:
        if float(row["lexical"]) > 0 or float(row["semantic"]) > 0:
            fit = sum(w * signal(row, name) for name, w in weights.items())
            return float(np.exp(fit - best))
        return 0.0

    similarities = {i: similarity(rows[i]) for i in head}
    best_similarity = max(similarities.values())

    def score(i: int) -> float:  # the first pass's fusion, recency gated alike
        gate = recency_gate(similarities[i], best_similarity, options.recency_band)
        return (
            similarity_weight * similarities[i] + recency_weight * float(rows[i]["recency"]) * gate
        )

    reordered = [rows[i] for i in sorted(head, key=score, reverse=True)]  # stable on ties
    out = list(rows)
    for i, row in zip(head, reordered, strict=True):
        out[i] = row
    return out


def rank_episodes(conn: Connection, **arguments: Any) -> tuple[list[dict[str, Any]], int]:
    """:func:`rank`'s rows and count (same arguments)."""
    ranking = rank(conn, **arguments)
    return ranking.rows, ranking.count


def rank(
    conn: Connection,
    *,
    key: DatasetKey,
    filters: RecallFilters,
    query: str | None,
    query_vector: np.ndarray | None,
    similarity_weight: float,
    recency_weight: float,
    limit: int,
    min_relevance: float | None = None,
    min_match: float | None = None,
    abstention: Abstention | None = None,
    approximate: Approximation | None = None,
    options: RankingOptions = DEFAULT_RANKING,
    opening: Opening | None = None,
    guard: SizeGuard | None = None,
) -> Ranking:
    """The top ``limit`` candidates of ``key``'s dataset by relevance, best first, with
    ``similarity``, ``recency`` and ``relevance`` columns beside the episode's (sealed, as
    stored: open them with ``key``), and how many completed episodes the dataset has (that
    ended by ``as_of``, when given; other filters do not apply to the count). Without
    ``query`` (or with ``similarity_weight`` 0) similarity is 0 and nothing is searched;
    without ``query_vector`` the semantic part is 0. Each row also carries the episode's
    absolute ``absolute_relevance`` (:mod:`episodic.store.relevance`) and its inputs
    (``cosine``, ``coverage``, ``passage_coverage``), and the request's ``request_match``
    (``relevance.request_match``, 1 without a query); with a query, candidates whose
    absolute relevance is below ``min_relevance`` are left out, and every candidate when
    the request's match is below ``min_match`` (without a query, nothing is matched and
    neither applies); ``abstention`` (``abstain``): the model's thresholds where the
    request sets none, for a dataset in the configuration they were fitted in. ``approximate``: score only a generous
    candidate set of the dataset (a large one) instead of every episode. ``options``:
    :class:`RankingOptions`. ``opening``: what :func:`read_opening` read for this call
    (with the query's lexemes, and their word forms under ``options.word_forms``: then no
    round trip for them here); None: they are read now. ``guard`` (a dataset of unknown
    size, with a query, no ``approximate``, no ``as_of``: its count is then its size, and no
    ``options.expansion``): :class:`SizeGuard`; the count returned is the dataset's either
    way."""
    with_query = bool(query and query.strip()) and similarity_weight > 0
    with_vector = with_query and query_vector is not None
    if guard is not None and (
        not with_query or approximate is not None or filters.as_of is not None or options.expansion
    ):
        raise ValueError("a size guard needs a query, the exact path, no as_of, no expansion")
    params: dict[str, object] = {
        **_filter_params(key, filters),
        "ws": float(similarity_weight),
        "wr": float(recency_weight),
        "limit": limit,
        **threshold_params(min_relevance, min_match, abstention, options),
    }
    if approximate is not None:
        params.update(_approximation_params(approximate))
    if guard is not None:
        params["exact_up_to"] = guard.exact_up_to
    lexemes: list[str] | None = None
    if with_query:
        assert query is not None
        weighted: list[tuple[str, float, str]] | None = None
        if opening is not None and opening.lexemes is not None:
            weighted = query_term_tokens(key, opening.lexemes, opening.forms or ())
        elif options.weighted_terms():
            weighted = query_terms(conn, key, query, options)
        if weighted is None:
            lexemes = params["lexemes"] = query_tokens(conn, key, query)
        elif options.weighted_terms():
            lexemes = [t for t, _, term in weighted if term == t]  # the query's own
            params["lexemes"] = [t for t, _, _ in weighted]
            params["weights"] = [w for _, w, _ in weighted]
            params["terms"] = [term for _, _, term in weighted]
        else:
            lexemes = params["lexemes"] = [t for t, _, _ in weighted]
        if options.phrase:
            params["phrases"] = (
                phrase_pairs(key, opening.ordered)
                if opening is not None and opening.ordered is not None
                else query_phrase_pairs(conn, key, query)
            )
        if options.speaker:
            if opening is not None and opening.lexemes is not None:
                own, forms = [w for w, _ in opening.lexemes], opening.forms or []
            else:
                own, forms = query_lexemes(conn, key, query), []
            params.update(speaker_pair_params(key, own, forms))
        if options.entity_match:
            from episodic.query_focus import query_phrases

            params["entity_query"] = sorted({key.token(p) for p in query_phrases(query)})
        params["qvec"] = (
            np.asarray(query_vector, dtype=np.float32)
            if with_vector and query_vector is not None
            else None
        )
    if with_query and options.expansion:
        # RM3-style feedback: a first pass without it picks the episodes whose words join
        # the query (the second pass, below, ranks with them).
        first_options = replace(options, expansion=0)
        first = _execute(
            conn,
            _ranking_statement(with_query, with_vector, approximate, first_options),
            {**params, "limit": options.expansion, **threshold_params(0.0, 0.0, None)},
        )
        tokens = cast(list[str], params["lexemes"])
        feedback = expansion_terms(
            conn, key, filters, [r for r in first if r["episode_id"]], tokens
        )
        params["lexemes"] = [*tokens, *(t for t, _ in feedback)]
        params["weights"] = [*cast(list[float], params["weights"]), *(w for _, w in feedback)]
        params["terms"] = [*cast(list[str | None], params["terms"]), *(None for _ in feedback)]
    statement = _ranking_statement(with_query, with_vector, approximate, options, guard is not None)
    rows = _execute(conn, statement, params)
    count = int(rows[0]["episode_count"]) if rows else 0
    if guard is not None and count > guard.exact_up_to:  # too large: nothing was ranked
        approximate = guard.otherwise
        statement = _ranking_statement(with_query, with_vector, approximate, options)
        rows = _execute(conn, statement, {**params, **_approximation_params(approximate)})
        count = int(rows[0]["episode_count"]) if rows else 0
    candidates = [r for r in rows if r["episode_id"] is not None]
    ranked = [r for r in candidates if r["passes"]]
    metrics.recall_ranked(candidates=count, results=len(ranked))
    has_events = bool(rows[0]["has_events"]) if rows else True
    return Ranking(
        ranked,
        count,
        has_events,
        lexemes,
        match=float(candidates[0]["request_match"]) if with_query and candidates else None,
        withheld=bool(candidates) and not ranked,
        abstain_applied=with_query and bool(rows) and bool(rows[0]["abstain_applied"]),
        chunks_pending=bool(rows) and bool(rows[0]["dataset_chunks_pending"]),
        episodes_pending=bool(rows) and bool(rows[0]["dataset_episodes_pending"]),
    )


def _approximation_params(approximate: Approximation) -> dict[str, object]:
    return {
        "approx_candidates": approximate.candidates,
        "approx_recent": approximate.recent,
        "approx_per_lexeme": approximate.per_lexeme,
        "approx_selective_df": approximate.selective_df,
    }


def _ranking_statement(
    with_query: bool,
    with_vector: bool,
    approximate: Approximation | None,
    options: RankingOptions,
    guarded: bool = False,
) -> tuple[str, bool]:
    """The ranking statement in the driver's form (compiled once per variant, not per
    call), and whether it is the approximate one."""
    if approximate is None:
        return _driver_statement(with_query, with_vector, options, guarded=guarded), False
    statement = _driver_statement(
        with_query, with_vector, options, approximate=True, exact_cosine=approximate.exact_cosine
    )
    return statement, True


def _execute(
    conn: Connection, statement: tuple[str, bool], params: dict[str, object]
) -> list[dict[str, Any]]:
    """The rows of a ranking statement (:func:`rank`, :func:`_ranking_statement`), sent on
    the connection's psycopg connection without SQLAlchemy's Core
    (:func:`episodic.store.raw_statement.fetch_all`: observed, traced, errors as
    SQLAlchemy's)."""
    sql, approximate = statement
    if not approximate:
        return fetch_all(conn, sql, params)
    # psycopg prepares a statement run five times on a connection, and PostgreSQL then
    # switches to a generic plan (one planned before the dataset and the query's words are
    # known) whenever its estimated cost is below the custom plans': for this statement it
    # always is (the estimates are far off), and the generic plan ran 2-9x longer than the
    # custom one at 1M episodes, up to 87 s (docs/benchmarks.md "Recall at scale"). So this
    # statement is always planned for its parameters.
    conn.exec_driver_sql(f"SET plan_cache_mode = {CUSTOM_PLANS}")
    try:
        return fetch_all(conn, sql, params)
    finally:
        conn.exec_driver_sql("RESET plan_cache_mode")


def query_phrase_pairs(conn: Connection, key: DatasetKey, query: str) -> list[str]:
    """The query's adjacent word pairs (its lexemes in the order written, stop words
    skipped) as phrase tsqueries of ``key``'s tokens: the second within
    :data:`PHRASE_WINDOW` positions after the first ("When did Caroline go to the LGBTQ
    conference?" gives caroline→go, go→lgbtq, lgbtq→conference)."""
    rows = conn.execute(
        text(f"SELECT u.lexeme, u.positions FROM unnest(to_tsvector({DATASET_CONFIG}, :q)) u"),
        {"q": query, "dataset": key.dataset},
    ).all()
    order = [lexeme for _, lexeme in sorted((p, lexeme) for lexeme, ps in rows for p in ps)]
    return phrase_pairs(key, order)


def phrase_pairs(key: DatasetKey, order: Sequence[str]) -> list[str]:
    """:func:`query_phrase_pairs` from the query's lexemes in the order written
    (:attr:`Opening.ordered`)."""

    def quoted(lexeme: str) -> str:
        return "'" + key.token(lexeme).replace("\\", "\\\\").replace("'", "''") + "'"

    pairs = dict.fromkeys((a, b) for a, b in pairwise(order) if a != b)
    return [
        " | ".join(f"({quoted(a)} <{n}> {quoted(b)})" for n in range(1, PHRASE_WINDOW + 1))
        for a, b in pairs
    ]


def query_lexemes(conn: Connection, key: DatasetKey, query: str) -> list[str]:
    """The query's distinct lexemes (not blinded), in the dataset's configuration."""
    return [
        r[0]
        for r in conn.execute(
            text(f"SELECT DISTINCT lexeme FROM unnest(to_tsvector({DATASET_CONFIG}, :q))"),
            {"q": query, "dataset": key.dataset},
        )
    ]


def speaker_pair_params(
    key: DatasetKey, lexemes: Sequence[str], forms: Sequence[tuple[str, str]] = ()
) -> dict[str, object]:
    """The statement's parameters of ``RankingOptions.speaker``: every ordered pair of the
    query's distinct ``lexemes`` (one taken as a speaker's name, the other as a word, or
    a word's irregular form from ``forms``: (form, word) lexemes) as the token of the
    document's speaker-word pair (:func:`~episodic.store.recall_index.speaker_pair`), with
    the name and the query word it counts for; ``speaker_words``: how many other words a
    name can cover (the query's words less one). Which word is a name is not guessed:
    only a speaker's pairs are in a document."""
    from episodic.store.recall_index import speaker_pair

    own = sorted(set(lexemes))
    stands_for = [(w, w) for w in own] + [(f, w) for f, w in forms if w in own and f not in own]
    names, words, pairs = [], [], []
    for name in own:
        for lexeme, word in stands_for:
            if word != name:
                names.append(name)
                words.append(word)
                pairs.append("'" + _quoted_token(key.token(speaker_pair(name, lexeme))) + "'")
    return {
        "speaker_names": names,
        "speaker_words": words,
        "speaker_pairs": pairs,
        "speaker_word_count": max(len(own) - 1, 1),
    }


def _quoted_token(token: str) -> str:
    return token.replace("\\", "\\\\").replace("'", "''")


def query_terms(
    conn: Connection, key: DatasetKey, query: str, options: RankingOptions
) -> list[tuple[str, float, str]]:
    """The query's lexemes as ``key``'s tokens, each with its weight in BM25 and the token
    of the query word it stands for (``RankingOptions.weighted_terms``): the query's own
    lexemes stand for themselves and weigh 1, or
    :data:`episodic.query_focus.GENERIC_WEIGHT` for a generic word under
    ``weight_generic_terms``; under ``word_forms`` the stems of the irregular forms of its
    words (:func:`episodic.query_focus.word_forms`, only when the dataset's configuration
    is english) weigh 1 and stand for the word they are a form of."""
    from episodic.query_focus import GENERIC_WORDS, word_forms

    forms = word_forms(query) if options.word_forms else []
    rows = conn.execute(
        text(
            f"""
            WITH cfg AS (SELECT {DATASET_CONFIG} AS c)
            SELECT DISTINCT u.lexeme, NULL::text AS word,
                   u.lexeme IN (SELECT g.lexeme FROM cfg, unnest(to_tsvector(cfg.c, :generic)) g)
                       AS generic
            FROM cfg, unnest(to_tsvector(cfg.c, :q)) u
            UNION
            SELECT a.lexeme, o.lexeme, false
            FROM cfg, unnest(CAST(:forms AS text[]), CAST(:words AS text[])) AS f(form, word)
            CROSS JOIN LATERAL unnest(to_tsvector(cfg.c, f.form)) a
            CROSS JOIN LATERAL unnest(to_tsvector(cfg.c, f.word)) o
            WHERE cfg.c = CAST('english' AS regconfig)
            """
        ),
        {
            "q": query,
            "generic": GENERIC_WORDS if options.weight_generic_terms else "",
            "forms": [f for f, _ in forms],
            "words": [w for _, w in forms],
            "dataset": key.dataset,
        },
    ).all()
    return query_term_tokens(
        key,
        [(lexeme, generic) for lexeme, word, generic in rows if word is None],
        [(lexeme, word) for lexeme, word, _ in rows if word is not None],
    )


def query_term_tokens(
    key: DatasetKey,
    lexemes: Sequence[tuple[str, bool]],
    forms: Sequence[tuple[str, str]],
) -> list[tuple[str, float, str]]:
    """:func:`query_terms`' answer from the lexemes it read: the query's own ``lexemes``
    (each with whether it is generic) and the ``forms`` (lexeme of a form, lexeme of the
    query word it is a form of), as ``key``'s tokens — also what :func:`read_opening` read
    for them."""
    from episodic.query_focus import GENERIC_WEIGHT

    own = dict(lexemes)
    out = {
        key.token(lexeme): (GENERIC_WEIGHT if generic else 1.0, key.token(lexeme))
        for lexeme, generic in own.items()
    }
    for lexeme, word in forms:
        if lexeme not in own and word in own:
            out.setdefault(key.token(lexeme), (1.0, key.token(word)))
    return sorted((token, weight, term) for token, (weight, term) in out.items())


def expansion_terms(
    conn: Connection,
    key: DatasetKey,
    filters: RecallFilters,
    first: Sequence[Any],
    lexemes: Sequence[str],
) -> list[tuple[str, float]]:
    """RM3-style feedback words (``RankingOptions.expansion``): the tokens of the ``first``
    pass's episodes' documents that are not among ``lexemes``, scored by their share of
    each document (tf / length, weighted by the episode's first-pass similarity) × their
    idf over the filtered dataset; the best :data:`EXPANSION_TERMS`, each with a weight of
    :data:`EXPANSION_WEIGHT` × its score / the best score."""
    weights = [max(float(r["similarity"]), 0.0) for r in first]
    if not first or sum(weights) <= 0:
        return []
    rows = conn.execute(
        text(
            f"""
            WITH fb AS (
                SELECT e.search_vector AS tsv, r.w,
                       greatest(coalesce(e.search_length, length(e.search_vector)), 1)::float8
                           AS dl
                FROM unnest(CAST(:ids AS uuid[]), CAST(:fbw AS float8[])) AS r(id, w)
                JOIN episodes e ON e.dataset = :dataset AND e.episode_id = r.id
            ),
            pool AS (
                SELECT u.lexeme,
                       sum(fb.w * coalesce(array_length(u.positions, 1), 1) / fb.dl) AS tf
                FROM fb CROSS JOIN LATERAL unnest(fb.tsv) u
                WHERE u.lexeme <> ALL (CAST(:lexemes AS text[]))
                GROUP BY u.lexeme ORDER BY tf DESC, u.lexeme LIMIT :pool
            ),
            n AS (SELECT count(*)::float8 AS n FROM ({_CANDIDATES}) x)
            SELECT q.lexeme, q.tf * ln(1.0 + (n.n - d.df + 0.5) / (d.df + 0.5)) AS score
            FROM pool q CROSS JOIN n CROSS JOIN LATERAL (
                SELECT count(*)::float8 AS df FROM ({_CANDIDATES}) x
                WHERE x.search_vector @@ {_LEXEME_QUERY}) d
            ORDER BY score DESC, q.lexeme LIMIT :terms
            """
        ),
        {
            **_filter_params(key, filters),
            "ids": [r["episode_id"] for r in first],
            "fbw": [w / sum(weights) for w in weights],
            "lexemes": list(lexemes),
            "pool": EXPANSION_POOL,
            "terms": EXPANSION_TERMS,
        },
    ).all()
    best = max((float(score) for _, score in rows), default=0.0)
    if best <= 0:
        return []
    return [(lexeme, EXPANSION_WEIGHT * float(score) / best) for lexeme, score in rows if score > 0]


def count_up_to(conn: Connection, dataset: str, bound: int) -> int:
    """How many completed episodes ``dataset`` has, counting no further than ``bound``
    (an index-only scan of at most ``bound`` entries: cheap however large the dataset)."""
    return int(
        conn.execute(
            text(
                "SELECT count(*) FROM (SELECT 1 FROM episodes WHERE dataset = :dataset "
                "AND status = 'completed' LIMIT :bound) x"
            ),
            {"dataset": dataset, "bound": bound},
        ).scalar_one()
    )


# ---- before the ranking: one round trip ----------------------------------------------
#
# A recall needs three things before its ranking statement: the dataset's key (to blind the
# query's words and open the rows), the query's lexemes (stemmed by the database, in the
# dataset's text search configuration), and, the first time a process sees the dataset,
# whether it is large enough for the approximate path. Sent one by one they were three
# round trips besides the ranking; :func:`read_opening` reads them in one.


@dataclass(frozen=True)
class Opening:
    """What :func:`read_opening` read, in one snapshot."""

    #: The dataset's ``datasets`` row key columns (``key_id``, ``master_key_id``,
    #: ``wrapped_key``), or None when the dataset has no row (stored in the clear).
    key_row: dict[str, Any] | None
    #: The query's distinct lexemes, each with whether it is a generic question word
    #: (:data:`episodic.query_focus.GENERIC_WORDS`); None when no query was given.
    lexemes: list[tuple[str, bool]] | None
    #: How many completed episodes the dataset has, counted no further than the bound
    #: asked for (:func:`count_up_to`); None when no bound was given.
    size: int | None
    #: Under ``RankingOptions.word_forms``: (lexeme of a form, lexeme of the query word it
    #: is a form of) for the forms asked for, in a dataset whose configuration is english
    #: (else none); None when none were asked for.
    forms: list[tuple[str, str]] | None = None
    #: Under ``RankingOptions.phrase``: the query's lexemes in the order written (stop words
    #: skipped), for its word pairs (:func:`phrase_pairs`); None when not asked for.
    ordered: list[str] | None = None


@lru_cache(maxsize=32)
def _opening_statement(
    with_query: bool,
    with_generic: bool,
    with_size: bool,
    with_forms: bool = False,
    with_order: bool = False,
) -> str:
    config = f"CAST(coalesce(d.text_search_config, '{TEXT_SEARCH_CONFIG}') AS regconfig)"
    size = (
        "(SELECT count(*) FROM (SELECT 1 FROM episodes WHERE dataset = :dataset "
        "AND status = 'completed' LIMIT :bound) x)"
        if with_size
        else "NULL::bigint"
    )
    # Stemming the generic words costs ~0.5 ms: only when the ranking weighs them.
    generic = (
        f"u.lexeme IN (SELECT g.lexeme FROM unnest(to_tsvector({config}, :generic)) g)"
        if with_generic
        else "false"
    )
    lexemes = (
        f"""(SELECT array_agg(ARRAY[u.lexeme, ({generic})::text] ORDER BY u.lexeme)
             FROM (SELECT DISTINCT lexeme FROM unnest(to_tsvector({config}, :q))) u)"""
        if with_query
        else "NULL::text[]"
    )
    # What query_terms reads for the word forms, in the same statement.
    forms = (
        f"""(SELECT array_agg(ARRAY[a.lexeme, o.lexeme])
             FROM unnest(CAST(:forms AS text[]), CAST(:words AS text[])) AS f(form, word)
             CROSS JOIN LATERAL unnest(to_tsvector({config}, f.form)) a
             CROSS JOIN LATERAL unnest(to_tsvector({config}, f.word)) o
             WHERE {config} = CAST('english' AS regconfig))"""
        if with_forms
        else "NULL::text[]"
    )
    # What query_phrase_pairs reads (the lexemes by position), in the same statement.
    ordered = (
        f"""(SELECT array_agg(u.lexeme ORDER BY p.position)
             FROM unnest(to_tsvector({config}, :q)) u
             CROSS JOIN LATERAL unnest(u.positions) AS p(position))"""
        if with_query and with_order
        else "NULL::text[]"
    )
    return _driver_form(
        f"""
        SELECT d.dataset IS NOT NULL AS has_row, d.key_id, d.master_key_id, d.wrapped_key,
               {lexemes} AS lexemes, {size} AS size, {forms} AS forms, {ordered} AS ordered
        FROM (SELECT 1) one LEFT JOIN datasets d ON d.dataset = :dataset
        """
    )


def read_opening(
    conn: Connection,
    dataset: str,
    *,
    query: str | None,
    size_bound: int | None,
    generic: bool = False,
    forms: Sequence[tuple[str, str]] = (),
    ordered: bool = False,
) -> Opening:
    """The dataset's key row, ``query``'s lexemes (when given) and its size counted up to
    ``size_bound`` (when given), in one statement: what :func:`count_up_to`, the key lookup
    of :meth:`episodic.store.vault.Vault.for_read` and the lexemes of
    :func:`~episodic.store.recall_index.query_tokens` read, in the same configuration.
    ``generic``: also mark each lexeme that a generic question word stems to (for
    ``RankingOptions.weight_generic_terms``; else every lexeme is marked not generic).
    ``forms``: (form, word) pairs of :func:`episodic.query_focus.word_forms`, stemmed as
    :func:`query_terms` stems them (``RankingOptions.word_forms``). ``ordered``: also the
    query's lexemes in the order written (``RankingOptions.phrase``: its word pairs then
    cost no round trip of their own)."""
    from episodic.query_focus import GENERIC_WORDS

    params: dict[str, object] = {"dataset": dataset}
    if query is not None:
        params["q"] = query
        if generic:
            params["generic"] = GENERIC_WORDS
    if size_bound is not None:
        params["bound"] = size_bound
    with_forms = query is not None and bool(forms)
    if with_forms:
        params["forms"] = [f for f, _ in forms]
        params["words"] = [w for _, w in forms]
    with_order = query is not None and ordered
    statement = _opening_statement(
        query is not None, generic, size_bound is not None, with_forms, with_order
    )
    (row,) = fetch_all(conn, statement, params)
    lexemes = None
    if query is not None:
        lexemes = [(lexeme, marked == "true") for lexeme, marked in row["lexemes"] or []]
    return Opening(
        key_row=row if row["has_row"] else None,
        lexemes=lexemes,
        size=None if row["size"] is None else int(row["size"]),
        forms=[(a, o) for a, o in row["forms"] or []] if with_forms else None,
        ordered=list(row["ordered"] or []) if with_order else None,
    )


def blinded_lexemes(
    key: DatasetKey, lexemes: Sequence[tuple[str, bool]]
) -> list[tuple[str, float]]:
    """``lexemes`` (:attr:`Opening.lexemes`) as ``key``'s tokens with their query-side
    weights, sorted: what :func:`~episodic.store.recall_index.weighted_query_tokens`
    returns (its tokens alone are :func:`~episodic.store.recall_index.query_tokens`')."""
    from episodic.query_focus import GENERIC_WEIGHT

    return sorted(
        (key.token(lexeme), GENERIC_WEIGHT if generic else 1.0) for lexeme, generic in lexemes
    )


def threads_in_order(
    conn: Connection,
    dataset: str,
    *,
    as_of: datetime | None,
    since: datetime | None,
    until: datetime | None,
    position: int,
    from_end: bool,
    count: int,
) -> list[uuid.UUID]:
    """A dataset's sessions by order in time: its threads ordered by their first episode's
    start (archived episodes count: they keep the thread's early windows), those that had
    started by ``as_of`` (and started within ``since``..``until`` when given); ``count``
    threads from 1-based ``position``, counted from the latest when ``from_end``."""
    direction = "DESC" if from_end else "ASC"
    return list(
        conn.execute(
            text(
                f"""
                SELECT thread_id FROM (
                    SELECT thread_id, min(started_at) AS first_at FROM episodes
                    WHERE dataset = :dataset
                    GROUP BY thread_id
                ) t
                WHERE first_at <= coalesce(CAST(:as_of AS timestamptz), now())
                  AND (CAST(:since AS timestamptz) IS NULL OR first_at >= CAST(:since AS timestamptz))
                  AND (CAST(:until AS timestamptz) IS NULL OR first_at <= CAST(:until AS timestamptz))
                ORDER BY first_at {direction}, thread_id {direction}
                OFFSET :skip LIMIT :count
                """
            ),
            {
                "dataset": dataset,
                "as_of": as_of,
                "since": since,
                "until": until,
                "skip": max(position - 1, 0),
                "count": count,
            },
        ).scalars()
    )


def list_episodes(
    conn: Connection,
    dataset: str,
    *,
    status: str | None,
    thread_id: uuid.UUID | None,
    before: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> tuple[list[RowMapping], bool]:
    """A dataset's episodes newest first (by ``ended_at``, then id), keyset-paged; the bool
    says whether more follow."""
    rows = (
        conn.execute(
            text(
                f"SELECT {_EPISODE_COLUMNS} FROM episodes e "
                "WHERE e.dataset = :dataset "
                "AND (CAST(:status AS text) IS NULL OR e.status = CAST(:status AS text)) "
                "AND (CAST(:thread AS uuid) IS NULL OR e.thread_id = CAST(:thread AS uuid)) "
                "AND (CAST(:at AS timestamptz) IS NULL OR (e.ended_at, e.episode_id) < "
                "     (CAST(:at AS timestamptz), CAST(:id AS uuid))) "
                "ORDER BY e.ended_at DESC, e.episode_id DESC LIMIT :limit"
            ),
            {
                "dataset": dataset,
                "status": status,
                "thread": thread_id,
                "at": before[0] if before else None,
                "id": before[1] if before else None,
                "limit": limit + 1,
            },
        )
        .mappings()
        .all()
    )
    return list(rows[:limit]), len(rows) > limit
