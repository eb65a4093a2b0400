"""The SDK's flows for recall (Recall) and procedural memory: recalling episodes (with
procedures), recording a tool call's outcome, recalling, listing, reading and deleting
procedures. Kept together: recall returns procedures in the same shape
(:class:`ScoredProcedure`) as ``recall_procedures``. Re-exported by
:mod:`episodic.sdk.operations`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from episodic.sdk.calling import call
from episodic.sdk.flow import ClientCore, Flow
from episodic.sdk.types import (
    OutcomeResult,
    Page,
    Procedure,
    QueryUnderstanding,
    RecallResult,
    ScoredEpisode,
    ScoredProcedure,
    time_of,
    timestamp_of,
)
from episodic.v1 import admin_service_pb2 as admin_pb2
from episodic.v1 import episode_pb2, ingest_service_pb2, recall_service_pb2

# -- recall (Recall)


def recall(
    core: ClientCore,
    dataset: str,
    query: str | None = None,
    *,
    limit: int | None = None,
    similarity_weight: float | None = None,
    recency_weight: float | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    thread_ids: Sequence[str] = (),
    entities: Sequence[str] = (),
    event_type: str | None = None,
    as_of: datetime | None = None,
    literal_query: bool = False,
    actor: str | None = None,
    exclude_events: bool = False,
    exact_entities: bool = False,
    min_relevance: float | None = None,
    min_match: float | None = None,
    abstain: bool = False,
    include_procedures: bool = False,
    procedures: int | None = None,
    timeout: float | None = None,
) -> Flow[RecallResult]:
    """The dataset's most relevant current episodes, best first (and, with
    ``include_procedures``, the ``procedures`` — server default 3 — that fit the query:
    ``result.procedures``).

    Ranked by ``relevance_score = similarity × similarity_weight + recency ×
    recency_weight`` (server defaults 0.7 and 0.3; ``ScoredEpisode.relevance`` is another
    number, the calibrated 0–1 relevance that ``min_relevance`` filters on); without
    ``query``, plain recency order — which is how
    temporal questions ("the last 3 decisions about pricing") are asked:
    ``recall(ds, event_type="decision", entities=["pricing"], limit=3)``.
    ``limit``: how many (server default 3, at most 100). ``since``/``until`` bound the
    episode's span; ``entities`` must all be present (normalised like stored ones);
    ``as_of`` ranks as if it were that time (nothing that ended later is returned).
    Time in the query is understood ("2 days ago", "in July", "our third session"; see
    ``result.understanding``) unless ``literal_query``. Events (``episode.kind ==
    "event"``) come back beside summaries; ``actor`` keeps only the events of that actor,
    ``exclude_events`` leaves events out. ``entities`` match every alias of the entity
    ("atlas" finds "project Atlas") unless ``exact_entities``. ``min_relevance`` leaves out
    episodes whose calibrated ``relevance`` is below it (0: none left out; the README
    recommends a value), so a question nothing answers gets no episodes; ``min_match``
    answers nothing when the request's best match says the dataset likely holds no answer
    (0: always answers); ``abstain`` uses the values of both recommended for the embedding
    model Recall runs (an explicit ``min_relevance`` or ``min_match`` takes precedence, 0
    included: ``abstain=True, min_match=0`` keeps abstain's per-episode cut only).
    """
    request = recall_service_pb2.RecallRequest(
        dataset=dataset,
        query=query or "",
        include=[recall_service_pb2.RECALL_INCLUDE_EPISODES]
        + ([recall_service_pb2.RECALL_INCLUDE_PROCEDURES] if include_procedures else []),
        context_episodes=limit or 0,
        context_procedures=procedures or 0,
        thread_ids=list(thread_ids),
        entities=list(entities),
        event_type=event_type or "",
        literal_query=literal_query,
        actor=actor or "",
        exclude_events=exclude_events,
        exact_entities=exact_entities,
        abstain=abstain,
    )
    # Sent only when given: the fields have presence, and an unset one is abstain's to set.
    if min_relevance is not None:
        request.min_relevance = min_relevance
    if min_match is not None:
        request.min_match = min_match
    if similarity_weight is not None:
        request.similarity_weight = similarity_weight
    if recency_weight is not None:
        request.recency_weight = recency_weight
    for name, value in (("since", since), ("until", until), ("as_of", as_of)):
        if value is not None:
            getattr(request, name).CopyFrom(timestamp_of(value))
    answer = yield from call(core, "recall", "Recall", request, timeout)
    return RecallResult(
        episodes=[ScoredEpisode.from_proto(e) for e in answer.episodes.episodes],
        episode_count=answer.episodes.episode_count,
        understanding=QueryUnderstanding.from_proto(answer),
        match=answer.episodes.match if answer.episodes.HasField("match") else None,
        abstained=answer.episodes.abstained,
        abstain_applied=answer.episodes.abstain_applied,
        procedures=[_scored_procedure(p) for p in answer.procedures],
        chunks_pending=answer.episodes.chunks_pending,
        episodes_pending=answer.episodes.episodes_pending,
    )


def _scored_procedure(m: episode_pb2.ScoredProcedure) -> ScoredProcedure:
    return ScoredProcedure(Procedure.from_proto(m.procedure), m.relevance)


# -- procedural memory (Ingest writes outcomes; Recall reads procedures; Admin deletes)

_OUTCOMES = {
    "success": episode_pb2.OUTCOME_SUCCESS,
    "failure": episode_pb2.OUTCOME_FAILURE,
    "partial": episode_pb2.OUTCOME_PARTIAL,
}


def record_outcome(
    core: ClientCore,
    thread_id: str,
    outcome: str,
    *,
    score: float | None = None,
    note: str = "",
    episode_id: str | None = None,
    timeout: float | None = None,
) -> Flow[OutcomeResult]:
    """Says how a thread turned out: ``outcome`` is "success", "failure" or "partial",
    with an optional ``score`` in [0, 1] and ``note``; ``episode_id`` narrows it to that
    episode's stretch. It may come before or after the episode exists; sending it again
    replaces it (the last one stands). Procedures are learned from successes."""
    if outcome not in _OUTCOMES:
        raise ValueError(f"unknown outcome {outcome!r}; use success, failure or partial")
    request = ingest_service_pb2.RecordOutcomeRequest(
        thread_id=thread_id, outcome=_OUTCOMES[outcome], note=note, episode_id=episode_id or ""
    )
    if score is not None:
        request.score = score
    # The last one stands: repeating the same outcome is harmless.
    answer = yield from call(core, "ingest", "RecordOutcome", request, timeout, retry=True)
    return OutcomeResult(
        thread_id=answer.thread_id,
        episode_id=answer.episode_id,
        outcome=outcome,
        changed=answer.changed,
        recorded_at=time_of(answer, "recorded_at"),
    )


def recall_procedures(
    core: ClientCore,
    dataset: str,
    task: str | None = None,
    *,
    limit: int | None = None,
    timeout: float | None = None,
) -> Flow[list[ScoredProcedure]]:
    """How did we do this before? The dataset's procedures whose goals best fit ``task``
    (most supported without one), best first; procedures that failed more often than they
    worked are left out."""
    answer = yield from call(
        core,
        "recall",
        "Recall",
        recall_service_pb2.RecallRequest(
            dataset=dataset,
            query=task or "",
            include=[recall_service_pb2.RECALL_INCLUDE_PROCEDURES],
            context_procedures=limit or 0,
        ),
        timeout,
    )
    return [_scored_procedure(p) for p in answer.procedures]


def list_procedures(
    core: ClientCore,
    dataset: str,
    *,
    page_size: int = 0,
    page_token: str = "",
    timeout: float | None = None,
) -> Flow[Page[Procedure]]:
    """One page of a dataset's procedures, most successes first."""
    answer = yield from call(
        core,
        "recall",
        "ListProcedures",
        recall_service_pb2.ListProceduresRequest(
            dataset=dataset, page_size=page_size, page_token=page_token
        ),
        timeout,
    )
    return Page([Procedure.from_proto(p) for p in answer.procedures], answer.next_page_token)


def get_procedure(
    core: ClientCore, dataset: str, procedure_id: str, *, timeout: float | None = None
) -> Flow[Procedure]:
    """One procedure of ``dataset``."""
    answer = yield from call(
        core,
        "recall",
        "GetProcedure",
        recall_service_pb2.GetProcedureRequest(dataset=dataset, procedure_id=procedure_id),
        timeout,
    )
    return Procedure.from_proto(answer.procedure)


def delete_procedure(
    core: ClientCore, dataset: str, procedure_id: str, *, timeout: float | None = None
) -> Flow[int]:
    """Deletes a procedure and forgets the stretches it was learned from (they are not
    learned again); returns how many were forgotten."""
    answer = yield from call(
        core,
        "admin",
        "DeleteProcedure",
        admin_pb2.DeleteProcedureRequest(dataset=dataset, procedure_id=procedure_id),
        timeout,
        retry=False,
    )
    return int(answer.forgotten_sources)
