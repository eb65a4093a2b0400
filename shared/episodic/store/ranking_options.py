"""The ranking's switches and the constants measured for them.

:class:`RankingOptions` (each switch measured alone on LoCoMo) and :data:`DEFAULT_RANKING`,
what Recall runs; the learned fusion's weights and the optional signals; the recency band
and the lexical scale measured per embedder; the second look's weights; BM25's constants.
Nothing here builds SQL: the ranking statement that applies them is
:mod:`episodic.store.ranking_sql` (with :mod:`episodic.store.lexical_statistics`), its
formula the docstring of :mod:`episodic.store.recall_queries`.

The SQL modules import these constants by name, so a test or a bench that changes one
changes it in the module that reads it: BM25's in ``lexical_statistics``, ``EXPANSION_*``
and ``PHRASE_WINDOW``, ``PHRASE_PAIRS`` in ``query_terms``, ``FEEDBACK_SHARE``, ``LEXICAL_SHARE`` and
``BAND_EXPONENT`` in ``ranking_sql`` (before any statement is built: they are cached).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from episodic.store.relevance import MINILM, CosineScale, Curve

__all__ = [
    "BAND_EXPONENT",
    "BM25_B",
    "BM25_K1",
    "DEFAULT_RANKING",
    "EXPANSION_POOL",
    "EXPANSION_TERMS",
    "EXPANSION_WEIGHT",
    "EXTRA_SIGNALS",
    "FEEDBACK_SHARE",
    "FUSIONS",
    "LEARNED_WEIGHTS",
    "LEXICAL_COVERAGE",
    "LEXICAL_SCALE",
    "LEXICAL_SCALES",
    "LEXICAL_SHARE",
    "LEXICAL_SIGNALS",
    "PASSAGE_BM25",
    "PHRASE_PAIRS",
    "PHRASE_WINDOW",
    "RECENCY_BAND",
    "RECENCY_BANDS",
    "RECENCY_SPAN",
    "SECOND_LOOK",
    "SECOND_LOOK_WEIGHTS",
    "THIRD_PASS_WEIGHTS",
    "RankingOptions",
    "lexical_scale_for",
    "recency_band_for",
    "scaled_lexical",
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


@dataclass(frozen=True)
class RankingOptions:
    """Switches of the ranking, each measured alone on LoCoMo (bench/quality/recall_lab.py,
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
      the rest left where they are (:func:`~episodic.store.recall_queries.reorder_top`).
      Which episodes make the top k, their ``relevance`` and everything below it are the
      ranking's own; only who comes first among them changes. (Fused over the whole list,
      the same signals lifted a few candidates into the top five and pushed as many gold
      ones out on LoCoMo's held-out half; docs/benchmarks.md "Ranking, fifth pass".)
    - ``cosine_scale``: the embedder's cosines are put on MiniLM's scale before they are
      fused (the ``semantic`` and ``cosine`` signals;
      :func:`episodic.store.relevance.on_reference_scale`), so that a model whose cosines
      sit in a narrow band (e5) separates a clear semantic winner as much as the weights,
      fitted on MiniLM's, expect, and recency orders only near ties. None: as they are
      (MiniLM, a model nobody measured). The calibrated relevance reads the raw cosines
      (its curves are fitted per embedder).
    - ``recency_band``: recency only breaks ties inside the similarity band (seed 002:
      "sort by ts DESC within a similarity band"). A candidate's recency term is weighed
      by :func:`~episodic.store.ranking_sql.recency_gate`: whole for the candidates as
      similar as the best, fading linearly to nothing for those whose similarity is
      ``recency_band`` (a share of the best's) or more below it. 0: the seed's sum, recency
      weighed alike everywhere, so a newer session can overtake an older one however much
      better the older matches as long as the difference in similarity is below
      ``recency_weight / similarity_weight``
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
#: ``python -m bench.quality.recall_lab --fit-ranker``: a listwise logistic regression (softmax over
#: each question's candidates, the gold sessions the target, L2 0.01) on the development
#: half of LoCoMo only (conv-26, 41, 43, 47, 49), then scaled by the temperature chosen on
#: the same half with the recency term on (docs/concepts/recall.md). Refitted in the
#: fourth pass with the query's irregular word forms on (``word_forms``) and recency from
#: a named time (``python -m bench.quality.recall_lab --fit-extras off+phrase+word-forms``, its
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

#: RankingOptions.phrase: at most this many of the query's adjacent word pairs count, its
#: first. Each pair is matched against every candidate: a pasted paragraph's 200 pairs took
#: a second over the ~2,700 candidates of a dataset of 100k (docs/benchmarks.md).
PHRASE_PAIRS = 32

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
#: multilingual set R@1 .795 -> .866 (`python -m bench.quality.multilingual_quality --path
#: bench/data/multilingual_short.jsonl --direct --embedders e5 --bands 0,0.1`); MiniLM on
#: LoCoMo through the suite R@1 .764 -> .752, R@5 .939 -> .924, MRR .840 -> .827
#: (`python -m bench.quality.recall_quality`, the band by env), so MiniLM, and any model nobody
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
#: bench.quality.multilingual_quality --direct --embedders e5 --lexical-scales 1,0.5,0.3,0.2` (each
#: dataset's language set), R@1 at 1 / 0.5 / 0.3 / 0.2: the long set (French, Spanish,
#: German, 120 questions whose words meet their sessions') .958 / .967 / .967 / .967 (0.1:
#: .950); the short set (7 languages, 112 paraphrasing questions) .795 / .893 / .920 / .938;
#: a third set written later by another hand (bench/data/multilingual_third.jsonl) .732 /
#: .866 / .893 / .902; a fourth, written blind to the ranking and held out until this
#: choice (bench/data/multilingual_fourth.jsonl), 0.5 / 0.3 / 0.2: .875 / .911 / .929.
#: English LoCoMo embedded by e5 (4 conversations) 0.3 -> 0.2: R@1 .765 -> .763, R@5 .943
#: -> .945. 0.2: the gain on all three paraphrasing sets, nothing lost where the words meet
#: or in English, one step from where the long set starts to lose (0.1), so a rare name or
#: number the question shares with its session still counts. MiniLM, and any model nobody
#: measured, keeps the fitted weights (1).
LEXICAL_SCALES: dict[str, float] = {"e5": 0.2}
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
#: (``phrase``), fitted on LoCoMo's development half only (``python -m bench.quality.recall_lab
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
#: (issue 40, `python -m bench.quality.multilingual_quality --direct --coverage off,on`; see
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
