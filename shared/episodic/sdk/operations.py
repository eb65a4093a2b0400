"""Every public call of the SDK, written once as a flow (see :mod:`episodic.sdk`): the
requests they build, the rate-limit backoff (:func:`call`), paging, ``wait_for_episode``
and ``wait_ready``. The drivers (:mod:`episodic.sdk.client`, :mod:`episodic.sdk.aio`) run them."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import grpc

from episodic.sdk.channels import MAX_ATTEMPTS, SERVICES
from episodic.sdk.errors import (
    STREAM_RESET,
    DeadlineExceededError,
    EpisodicRpcError,
    ResourceExhaustedError,
    UnavailableError,
)
from episodic.sdk.flow import ClientCore, Emit, Flow, Rpc, Sleep, Stream
from episodic.sdk.types import (
    STATUSES,
    AddMessagesResult,
    DatasetPolicy,
    DatasetSummary,
    EndThreadResult,
    Entity,
    EntitySplit,
    EntityTimelinePage,
    Episode,
    EpisodeFailure,
    ErasureReceipt,
    LifecycleStatus,
    Message,
    MessageLike,
    MessagePage,
    MessageReceipt,
    NewMessage,
    OutcomeResult,
    Page,
    PipelineStatus,
    Procedure,
    ProviderHealth,
    QueryUnderstanding,
    RecallResult,
    RecordEventResult,
    ScoredEpisode,
    ScoredProcedure,
    SweepResult,
    Thread,
    ThreadCompaction,
    duration_of,
    health_of,
    role_value,
    time_of,
    timestamp_of,
    to_new_message,
)
from episodic.v1 import admin_service_pb2 as admin_pb2
from episodic.v1 import episode_pb2, ingest_service_pb2, recall_service_pb2
from episodic.v1 import scheduler_service_pb2 as scheduler_pb2
from episodic.v1 import summariser_service_pb2 as summariser_pb2


def call(
    core: ClientCore,
    service: str,
    method: str,
    request: Any,
    timeout: float | None,
    *,
    retry: bool = True,
) -> Flow[Any]:
    """One RPC of ``service`` within the call's deadline (``timeout``, else the client's).

    ``retry``: the channel repeats the call on UNAVAILABLE (gRPC service config) — only for
    calls safe to repeat — and so does this flow when the stream was reset (UNAVAILABLE
    with reason ``STREAM_RESET``, which the channel sees as INTERNAL). Refused by a rate
    limit (RESOURCE_EXHAUSTED with a RetryInfo) before anything happened, any call is safe
    to repeat: it is, once the server's delay has passed, up to ``rate_limit_retries``
    times and only if the deadline allows.
    """
    channel = service if retry else f"{service}:noretry"
    budget = core.timeout if timeout is None else timeout
    deadline = time.monotonic() + budget
    attempt = 0
    resets = 0
    while True:
        remaining = max(deadline - time.monotonic(), 0.001)
        try:
            return (yield Rpc(channel, service, method, request, remaining))
        except ResourceExhaustedError as error:
            wait = error.retry_after
            if (
                wait is None
                or attempt >= core.rate_limit_retries
                or time.monotonic() + wait >= deadline
            ):
                raise
            attempt += 1
        except UnavailableError as error:
            # gRPC's own retries (the channel's service config) repeat UNAVAILABLE but
            # never see a reset stream, which it reports as INTERNAL: repeat those here,
            # with the same policy, for the calls that are safe to repeat.
            if not retry or error.reason != STREAM_RESET or resets >= MAX_ATTEMPTS - 1:
                raise
            wait = random.uniform(0, min(0.1 * 2**resets, 2.0))  # A6: full jitter
            if time.monotonic() + wait >= deadline:
                raise
            resets += 1
        yield Sleep(wait)


# --------------------------------------------------------------------------- operations
#
# Every public method of both clients, once. Each takes the client first and returns a
# flow; episodic.sdk.client and episodic.sdk.aio turn them into methods with the same name,
# signature and docstring.


def wait_ready(
    core: ClientCore, services: Iterable[str] = SERVICES, timeout: float = 30.0
) -> Flow[None]:
    """Waits until each named service answers its health check with SERVING; raises
    UnavailableError naming the first one that does not within ``timeout`` seconds."""
    from grpc_health.v1 import health_pb2

    deadline = time.monotonic() + timeout
    for service in services:
        while True:
            try:
                # The health service is open: no credentials.
                answer = yield Rpc(
                    service,
                    "health",
                    "Check",
                    health_pb2.HealthCheckRequest(service=""),
                    2.0,
                    authenticate=False,
                )
                if answer.status == health_pb2.HealthCheckResponse.SERVING:
                    break
            except EpisodicRpcError:
                pass
            if time.monotonic() > deadline:
                raise UnavailableError(
                    grpc.StatusCode.UNAVAILABLE,
                    f"{service} at {core.addresses[service]} is not serving",
                    method="Health.Check",
                )
            yield Sleep(0.1)


# -- threads and messages (Ingest)


def create_thread(
    core: ClientCore,
    dataset: str,
    *,
    label: str = "",
    metadata: Mapping[str, Any] | None = None,
    thread_id: str | None = None,
    idempotency_key: str | None = None,
    timeout: float | None = None,
) -> Flow[Thread]:
    """Creates a thread in ``dataset``; starting a thread also tells the Scheduler the
    dataset's other threads are probably over (their idle timers are pulled forward).

    ``idempotency_key``: your own name for the thread (a session key), unique within the
    dataset: called again with it, the thread it created is returned instead of a new one
    (so the call is retried safely on UNAVAILABLE). Prefer it to a ``thread_id`` derived
    from your own data: thread ids are unique across datasets, a key only within its own.
    A ``thread_id`` of your choosing must be a random UUID (``uuid.uuid4()``) unless the
    key covers every dataset (:class:`InvalidArgumentError` otherwise)."""
    request = ingest_service_pb2.CreateThreadRequest(
        dataset=dataset,
        label=label,
        thread_id=thread_id or "",
        idempotency_key=idempotency_key or "",
    )
    if metadata:
        request.metadata.update(dict(metadata))
    answer = yield from call(
        core, "ingest", "CreateThread", request, timeout, retry=bool(idempotency_key)
    )
    return Thread.from_proto(answer.thread)


def start_thread(
    core: ClientCore,
    dataset: str,
    label: str = "",
    *,
    metadata: Mapping[str, Any] | None = None,
    thread_id: str | None = None,
    idempotency_key: str | None = None,
    timeout: float | None = None,
) -> Flow[Thread]:
    """Starts a new conversation thread (same as :meth:`create_thread`)."""
    return (
        yield from create_thread(
            core,
            dataset,
            label=label,
            metadata=metadata,
            thread_id=thread_id,
            idempotency_key=idempotency_key,
            timeout=timeout,
        )
    )


def add_messages_request(
    thread_id: str, messages: Iterable[MessageLike], *, auto_idempotency_keys: bool
) -> tuple[ingest_service_pb2.AddMessagesRequest, bool]:
    """The AddMessages request for ``messages``, and whether it is safe to repeat (every
    message has an idempotency key: given, or generated when ``auto_idempotency_keys``)."""
    request = ingest_service_pb2.AddMessagesRequest(thread_id=thread_id)
    for msg in (to_new_message(m) for m in messages):
        key = msg.idempotency_key
        if not key and auto_idempotency_keys:
            key = f"auto:{uuid.uuid4()}"
        item = request.messages.add(
            role=role_value(msg.role),
            content=msg.content,
            idempotency_key=key or "",
            tool_call_id=msg.tool_call_id or "",
            name=msg.name or "",
        )
        for c in msg.tool_calls:
            item.tool_calls.add(id=c.id, name=c.name, arguments=c.arguments)
        if msg.metadata:
            item.metadata.update(dict(msg.metadata))
        if msg.created_at is not None:
            item.created_at.CopyFrom(timestamp_of(msg.created_at))
    return request, all(m.idempotency_key for m in request.messages)


def add_messages(
    core: ClientCore,
    thread_id: str,
    messages: Iterable[MessageLike],
    *,
    timeout: float | None = None,
) -> Flow[AddMessagesResult]:
    """Appends messages to a thread in one durable batch, in order.

    Each message is a :class:`NewMessage`, a mapping with ``role``/``content`` (and
    optionally ``metadata``, ``created_at``, ``idempotency_key``) or a ``(role, content)``
    tuple. A mapping in OpenAI's chat format keeps its tool calls: an assistant message's
    ``tool_calls`` and a tool message's ``tool_call_id``/``name`` (so a chat completion's
    ``messages`` can be written as they are). With ``auto_idempotency_keys`` (the default) every message without a key gets
    one, so the call is retried safely on UNAVAILABLE and a replay stores nothing twice.
    """
    request, safe = add_messages_request(
        thread_id, messages, auto_idempotency_keys=core.auto_idempotency_keys
    )
    answer = yield from call(core, "ingest", "AddMessages", request, timeout, retry=safe)
    return AddMessagesResult(
        thread_id=answer.thread_id,
        receipts=[MessageReceipt.from_proto(r) for r in answer.receipts],
        stored_count=answer.stored_count,
    )


def add_message(
    core: ClientCore,
    thread_id: str,
    role: str,
    content: str,
    *,
    metadata: Mapping[str, Any] | None = None,
    created_at: datetime | None = None,
    idempotency_key: str | None = None,
    timeout: float | None = None,
) -> Flow[MessageReceipt]:
    """Appends one message and returns its receipt (with its sequence)."""
    result = yield from add_messages(
        core,
        thread_id,
        [NewMessage(role, content, metadata or {}, created_at, idempotency_key)],
        timeout=timeout,
    )
    return result.receipts[0]


def record_event(
    core: ClientCore,
    dataset: str,
    summary: str,
    *,
    event_type: str,
    actor: str = "agent",
    entities: Sequence[str] = (),
    occurred_at: datetime | None = None,
    thread_id: str | None = None,
    idempotency_key: str | None = None,
    timeout: float | None = None,
) -> Flow[RecordEventResult]:
    """Records something the agent knows happened as an event episode, recalled beside the
    summaries: ``event_type`` is decision, tool_call, feedback, milestone or a custom
    lowercase name; ``occurred_at`` defaults to now; ``thread_id`` (optional) must be a
    thread of ``dataset``. With ``auto_idempotency_keys`` (the default) an event without
    a key gets one, so the call is retried safely on UNAVAILABLE."""
    key = idempotency_key or (f"auto:{uuid.uuid4()}" if core.auto_idempotency_keys else "")
    request = ingest_service_pb2.RecordEventRequest(
        dataset=dataset,
        actor=actor,
        event_type=event_type,
        summary=summary,
        entities=list(entities),
        thread_id=thread_id or "",
        idempotency_key=key,
    )
    if occurred_at is not None:
        request.occurred_at.CopyFrom(timestamp_of(occurred_at))
    answer = yield from call(core, "ingest", "RecordEvent", request, timeout, retry=bool(key))
    return RecordEventResult(event=Episode.from_proto(answer.event), stored=answer.stored)


def end_thread(
    core: ClientCore, thread_id: str, *, timeout: float | None = None
) -> Flow[EndThreadResult]:
    """Marks the end of a stretch of conversation: an episode is queued over the
    messages no episode covers yet. The thread stays writable (a checkpoint)."""
    answer = yield from call(
        core,
        "ingest",
        "EndThread",
        ingest_service_pb2.EndThreadRequest(thread_id=thread_id),
        timeout,
        retry=False,
    )
    return EndThreadResult(answer.thread_id, answer.episode_queued, answer.episode_id)


def get_thread(core: ClientCore, thread_id: str, *, timeout: float | None = None) -> Flow[Thread]:
    """Returns one thread (NotFoundError when it does not exist)."""
    answer = yield from call(
        core,
        "ingest",
        "GetThread",
        ingest_service_pb2.GetThreadRequest(thread_id=thread_id),
        timeout,
    )
    return Thread.from_proto(answer.thread)


def list_messages(
    core: ClientCore,
    thread_id: str,
    *,
    page_size: int = 0,
    page_token: str = "",
    start_sequence: int = 0,
    end_sequence: int = 0,
    timeout: float | None = None,
) -> Flow[MessagePage]:
    """One page of a thread's messages in sequence order (0 means the server default
    page size, 100). A compacted thread's page says so (``compaction``)."""
    answer = yield from call(
        core,
        "ingest",
        "ListMessages",
        ingest_service_pb2.ListMessagesRequest(
            thread_id=thread_id,
            page_size=page_size,
            page_token=page_token,
            start_sequence=start_sequence,
            end_sequence=end_sequence,
        ),
        timeout,
    )
    return MessagePage(
        [Message.from_proto(m) for m in answer.messages],
        answer.next_page_token,
        ThreadCompaction.from_proto(answer, "compaction"),
    )


def load_session(
    core: ClientCore,
    thread_id: str,
    *,
    start_sequence: int = 0,
    end_sequence: int = 0,
    timeout: float | None = None,
) -> Flow[list[Message]]:
    """Every message of a thread in order (seed 003's ``load_session``), across pages;
    ``timeout`` applies to each page."""
    out: list[Message] = []
    token = ""
    while True:
        page = yield from list_messages(
            core,
            thread_id,
            page_size=1000,
            page_token=token,
            start_sequence=start_sequence,
            end_sequence=end_sequence,
            timeout=timeout,
        )
        out.extend(page.items)
        token = page.next_page_token
        if not token:
            return out


def list_threads(
    core: ClientCore,
    dataset: str,
    *,
    page_size: int = 0,
    page_token: str = "",
    timeout: float | None = None,
) -> Flow[Page[Thread]]:
    """One page of a dataset's threads, most recently active first."""
    answer = yield from call(
        core,
        "ingest",
        "ListThreads",
        ingest_service_pb2.ListThreadsRequest(
            dataset=dataset, page_size=page_size, page_token=page_token
        ),
        timeout,
    )
    return Page([Thread.from_proto(t) for t in answer.threads], answer.next_page_token)


def recent_threads(
    core: ClientCore, dataset: str, n: int = 5, *, timeout: float | None = None
) -> Flow[list[Thread]]:
    """The ``n`` most recently active threads of a dataset (seed 003's
    ``recent_sessions``); none for ``n`` 0, ValueError for a negative ``n``."""
    if n < 0:
        raise ValueError(f"n must not be negative (got {n})")
    if n == 0:
        return []
    out: list[Thread] = []
    token = ""
    while len(out) < n:
        page = yield from list_threads(
            core, dataset, page_size=min(n - len(out), 1000), page_token=token, timeout=timeout
        )
        out.extend(page.items)
        token = page.next_page_token
        if not token:
            break
    return out[:n]


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


# -- episode administration (Recall reads, Scheduler writes)


def list_episodes(
    core: ClientCore,
    dataset: str,
    *,
    status: str | None = None,
    thread_id: str | None = None,
    page_size: int = 0,
    page_token: str = "",
    timeout: float | None = None,
) -> Flow[Page[Episode]]:
    """One page of a dataset's episodes, newest first; ``status`` is e.g.
    ``"completed"`` or ``"failed"`` (any when None)."""
    if status is not None and status not in STATUSES:
        raise ValueError(f"unknown status {status!r}; use one of {sorted(STATUSES)}")
    answer = yield from call(
        core,
        "recall",
        "ListEpisodes",
        recall_service_pb2.ListEpisodesRequest(
            dataset=dataset,
            status=STATUSES[status] if status else episode_pb2.EPISODE_STATUS_UNSPECIFIED,
            thread_id=thread_id or "",
            page_size=page_size,
            page_token=page_token,
        ),
        timeout,
    )
    return Page([Episode.from_proto(e) for e in answer.episodes], answer.next_page_token)


def iter_episodes(
    core: ClientCore,
    dataset: str,
    *,
    status: str | None = None,
    thread_id: str | None = None,
    timeout: float | None = None,
) -> Stream[Episode]:
    """Every episode of a dataset (optionally of one status or thread), newest first."""
    token = ""
    while True:
        page = yield from list_episodes(
            core,
            dataset,
            status=status,
            thread_id=thread_id,
            page_size=1000,
            page_token=token,
            timeout=timeout,
        )
        for item in page.items:
            yield Emit(item)
        token = page.next_page_token
        if not token:
            return


def search_episodes(
    core: ClientCore, dataset: str, query: str, *, limit: int = 0, timeout: float | None = None
) -> Flow[list[ScoredEpisode]]:
    """Current episodes matching ``query`` by text alone (no recency), best first."""
    answer = yield from call(
        core,
        "recall",
        "SearchEpisodes",
        recall_service_pb2.SearchEpisodesRequest(dataset=dataset, query=query, page_size=limit),
        timeout,
    )
    return [ScoredEpisode.from_proto(e) for e in answer.episodes]


def entity_timeline(
    core: ClientCore,
    dataset: str,
    entity: str,
    *,
    page_size: int = 0,
    page_token: str = "",
    timeout: float | None = None,
) -> Flow[EntityTimelinePage]:
    """Everything about one entity, in order: a page of the current episodes mentioning it
    under any alias, oldest first. ``entity`` is its id or any name of it ("atlas", "the
    Atlas project"); NotFoundError when the dataset has no such entity."""
    answer = yield from call(
        core,
        "recall",
        "EntityTimeline",
        recall_service_pb2.EntityTimelineRequest(
            dataset=dataset, entity=entity, page_size=page_size, page_token=page_token
        ),
        timeout,
    )
    return EntityTimelinePage(
        [Episode.from_proto(e) for e in answer.episodes],
        answer.next_page_token,
        entity=Entity.from_proto(answer.entity),
    )


def get_episode(
    core: ClientCore, episode_id: str, *, timeout: float | None = None
) -> Flow[Episode]:
    """One episode in any status (archived ones too, for provenance), or an event by the id
    recall and list_episodes give it."""
    answer = yield from call(
        core,
        "recall",
        "GetEpisode",
        recall_service_pb2.GetEpisodeRequest(episode_id=episode_id),
        timeout,
    )
    return Episode.from_proto(answer.episode)


def delete_episode(
    core: ClientCore, episode_id: str, *, timeout: float | None = None
) -> Flow[Episode]:
    """Soft-deletes an episode (it becomes archived and leaves recall) and returns it; an
    event's id (``Episode.is_event``) erases the event for good, returned as it was,
    marked archived."""
    answer = yield from call(
        core,
        "scheduler",
        "DeleteEpisode",
        scheduler_pb2.DeleteEpisodeRequest(episode_id=episode_id),
        timeout,
        retry=False,
    )
    return Episode.from_proto(answer.episode)


def retry_episode(
    core: ClientCore, episode_id: str, *, timeout: float | None = None
) -> Flow[Episode]:
    """Puts a failed episode back to pending (FailedPreconditionError otherwise)."""
    answer = yield from call(
        core,
        "scheduler",
        "RetryEpisode",
        scheduler_pb2.RetryEpisodeRequest(episode_id=episode_id),
        timeout,
        retry=False,
    )
    return Episode.from_proto(answer.episode)


def request_episode(
    core: ClientCore, thread_id: str, *, timeout: float | None = None
) -> Flow[Episode | None]:
    """Asks the Scheduler for an episode over the thread's uncaptured messages now (an
    operator's manual trigger); None when there was nothing to capture."""
    answer = yield from call(
        core,
        "scheduler",
        "RequestEpisode",
        scheduler_pb2.RequestEpisodeRequest(
            thread_id=thread_id, trigger=episode_pb2.EPISODE_TRIGGER_MANUAL
        ),
        timeout,
        retry=False,
    )
    return Episode.from_proto(answer.episode) if answer.episode_queued else None


def record_activity(
    core: ClientCore, thread_id: str, *, timeout: float | None = None
) -> Flow[datetime | None]:
    """Tells the Scheduler a thread received messages (Ingest does this after every
    write; exposed for completeness and tools). Returns when its idle timer fires."""
    answer = yield from call(
        core,
        "scheduler",
        "RecordActivity",
        scheduler_pb2.RecordActivityRequest(thread_id=thread_id),
        timeout,
        retry=False,
    )
    return time_of(answer, "fire_at")


def record_thread_started(
    core: ClientCore, thread_id: str, *, timeout: float | None = None
) -> Flow[int]:
    """Tells the Scheduler a thread started (Ingest does this on CreateThread); returns
    how many sibling timers were pulled forward."""
    answer = yield from call(
        core,
        "scheduler",
        "RecordThreadStarted",
        scheduler_pb2.RecordThreadStartedRequest(thread_id=thread_id),
        timeout,
        retry=False,
    )
    return int(answer.timers_pulled_forward)


def run_sweep(
    core: ClientCore, *, as_of: datetime | None = None, timeout: float | None = None
) -> Flow[SweepResult]:
    """Runs one pass of the Scheduler's periodic work now (tests, operators)."""
    request = scheduler_pb2.RunSweepRequest()
    if as_of is not None:
        request.as_of.CopyFrom(timestamp_of(as_of))
    a = yield from call(core, "scheduler", "RunSweep", request, timeout, retry=False)
    return SweepResult(
        a.episodes_created,
        a.timers_dropped,
        a.timers_caught_up,
        a.claims_reclaimed,
        a.backstop_episodes,
        a.threads_purged,
        a.threads_compacted,
    )


def process_pending(
    core: ClientCore, max_episodes: int = 0, *, timeout: float | None = None
) -> Flow[int]:
    """Makes the Summariser process up to ``max_episodes`` pending episodes now;
    returns how many completed."""
    answer = yield from call(
        core,
        "summariser",
        "ProcessPending",
        summariser_pb2.ProcessPendingRequest(max_episodes=max_episodes),
        timeout,
        retry=False,
    )
    return int(answer.completed)


def check_providers(
    core: ClientCore, *, timeout: float | None = None
) -> Flow[dict[str, ProviderHealth]]:
    """Whether the Summariser's LLM and embedding providers answer."""
    a = yield from call(
        core, "summariser", "CheckProviders", summariser_pb2.CheckProvidersRequest(), timeout
    )
    return {
        "llm": ProviderHealth(a.llm.name, a.llm.ok, a.llm.error),
        "embedder": ProviderHealth(a.embedder.name, a.embedder.ok, a.embedder.error),
    }


def list_datasets(
    core: ClientCore,
    *,
    prefix: str = "",
    page_size: int = 0,
    page_token: str = "",
    timeout: float | None = None,
) -> Flow[Page[DatasetSummary]]:
    """One page of the datasets, most recently active first (an admin key for every
    dataset); ``prefix`` keeps those starting with it, e.g. ``"acme/"``."""
    answer = yield from call(
        core,
        "admin",
        "ListDatasets",
        admin_pb2.ListDatasetsRequest(prefix=prefix, page_size=page_size, page_token=page_token),
        timeout,
    )
    return Page(
        [
            DatasetSummary(
                d.dataset, d.thread_count, d.message_count, time_of(d, "last_activity_at")
            )
            for d in answer.datasets
        ],
        answer.next_page_token,
    )


def list_entities(
    core: ClientCore,
    dataset: str,
    *,
    page_size: int = 0,
    page_token: str = "",
    timeout: float | None = None,
) -> Flow[Page[Entity]]:
    """One page of a dataset's canonical entities, oldest first, with their aliases and
    counts (an admin key for the dataset)."""
    answer = yield from call(
        core,
        "admin",
        "ListEntities",
        admin_pb2.ListEntitiesRequest(dataset=dataset, page_size=page_size, page_token=page_token),
        timeout,
    )
    return Page([Entity.from_proto(e) for e in answer.entities], answer.next_page_token)


def merge_entities(
    core: ClientCore,
    dataset: str,
    into: str,
    sources: Sequence[str],
    *,
    timeout: float | None = None,
) -> Flow[Entity]:
    """Merges ``sources`` into ``into`` (each an entity id or any alias): their aliases
    become ``into``'s. Not retried automatically (a second merge of the same names finds
    them one entity already and is refused)."""
    answer = yield from call(
        core,
        "admin",
        "MergeEntities",
        admin_pb2.MergeEntitiesRequest(dataset=dataset, into=into, sources=list(sources)),
        timeout,
        retry=False,
    )
    return Entity.from_proto(answer.entity)


def split_entity(
    core: ClientCore, dataset: str, alias: str, *, timeout: float | None = None
) -> Flow[EntitySplit]:
    """Splits ``alias`` off its entity into a new entity of its own."""
    answer = yield from call(
        core,
        "admin",
        "SplitEntity",
        admin_pb2.SplitEntityRequest(dataset=dataset, alias=alias),
        timeout,
        retry=False,
    )
    return EntitySplit(Entity.from_proto(answer.split_off), Entity.from_proto(answer.remaining))


def delete_dataset(
    core: ClientCore, dataset: str, *, timeout: float | None = None
) -> Flow[ErasureReceipt]:
    """Erases a dataset — every thread, message, episode, embedding, fact and timer, and
    its data key — and returns the receipt (an admin key for the dataset). Not retried
    automatically: a second call while the first runs gets ABORTED, after it NOT_FOUND."""
    answer = yield from call(
        core,
        "admin",
        "DeleteDataset",
        admin_pb2.DeleteDatasetRequest(dataset=dataset),
        timeout,
        retry=False,
    )
    return ErasureReceipt.from_proto(answer.receipt)


def delete_thread(
    core: ClientCore, thread_id: str, *, timeout: float | None = None
) -> Flow[ErasureReceipt]:
    """Erases one thread and everything derived from it; returns the receipt."""
    answer = yield from call(
        core,
        "admin",
        "DeleteThread",
        admin_pb2.DeleteThreadRequest(thread_id=thread_id),
        timeout,
        retry=False,
    )
    return ErasureReceipt.from_proto(answer.receipt)


def get_dataset_policy(
    core: ClientCore, dataset: str, *, timeout: float | None = None
) -> Flow[DatasetPolicy]:
    """A dataset's retention and compaction policy, and whether it is encrypted."""
    answer = yield from call(
        core,
        "admin",
        "GetDatasetPolicy",
        admin_pb2.GetDatasetPolicyRequest(dataset=dataset),
        timeout,
    )
    return DatasetPolicy.from_proto(answer.policy)


class _Unchanged:
    """The type of :data:`UNCHANGED`."""

    def __repr__(self) -> str:
        return "UNCHANGED"


#: A policy field left as the dataset has it (``set_dataset_policy``'s default).
UNCHANGED = _Unchanged()


def set_dataset_policy(
    core: ClientCore,
    dataset: str,
    *,
    retention_days: int | _Unchanged | None = UNCHANGED,
    compact_after_days: int | _Unchanged | None = UNCHANGED,
    language: str | None = None,
    timeout: float | None = None,
) -> Flow[DatasetPolicy]:
    """Changes what is given of a dataset's policy and keeps the rest: its own retention
    and compaction in days (None: back to the global default), and the language of its
    text ("fr", "pt-BR", "german"; "auto": detected from its text). The request names the
    fields it changes (``update_mask``), so setting the language never resets a retention.
    Nothing given: the policy as it is."""
    request = admin_pb2.SetDatasetPolicyRequest(dataset=dataset)
    if not isinstance(retention_days, _Unchanged):
        request.update_mask.paths.append("retention_days")
        if retention_days is not None:
            request.retention_days = retention_days
    if not isinstance(compact_after_days, _Unchanged):
        request.update_mask.paths.append("compact_after_days")
        if compact_after_days is not None:
            request.compact_after_days = compact_after_days
    if language is not None:
        request.update_mask.paths.append("language")
        request.language = language
    if not request.update_mask.paths:  # an empty mask would mean every field
        return (yield from get_dataset_policy(core, dataset, timeout=timeout))
    answer = yield from call(core, "admin", "SetDatasetPolicy", request, timeout)
    return DatasetPolicy.from_proto(answer.policy)


def pipeline_status(
    core: ClientCore,
    dataset: str | None = None,
    *,
    max_errors: int = 0,
    check_providers: bool = True,
    timeout: float | None = None,
) -> Flow[PipelineStatus]:
    """Whether the pipeline moves, for one dataset or the whole suite: episodes per
    status, backlog ages, overdue timers, recent errors and (unless
    ``check_providers=False``, which avoids calling a remote LLM) provider health."""
    a = yield from call(
        core,
        "summariser",
        "GetPipelineStatus",
        summariser_pb2.GetPipelineStatusRequest(
            dataset=dataset or "",
            max_errors=max_errors,
            skip_provider_checks=not check_providers,
        ),
        timeout,
    )
    return PipelineStatus(
        observed_at=time_of(a, "observed_at"),
        status_counts=dict(a.status_counts),
        semantic_status_counts=dict(a.semantic_status_counts),
        oldest_pending_age=duration_of(a, "oldest_pending_age"),
        oldest_processing_age=duration_of(a, "oldest_processing_age"),
        timers_due=a.timers_due,
        oldest_due_timer_age=duration_of(a, "oldest_due_timer_age"),
        timers_waiting=a.timers_waiting,
        threads_uncaptured=a.threads_uncaptured,
        recent_errors=[EpisodeFailure.from_proto(e) for e in a.recent_errors],
        llm=health_of(a, "llm"),
        embedder=health_of(a, "embedder"),
        pending_waiting=a.pending_waiting,
        latest_retry_at=time_of(a, "latest_retry_at"),
        failed_episodes=[EpisodeFailure.from_proto(e) for e in a.failed_episodes],
        threads_without_timer=a.threads_without_timer,
        oldest_untimed_thread_age=duration_of(a, "oldest_untimed_thread_age"),
        lifecycle=LifecycleStatus(
            last_run_at=time_of(a.lifecycle, "last_run_at"),
            threads_purged=a.lifecycle.threads_purged,
            threads_compacted=a.lifecycle.threads_compacted,
            messages_compacted=a.lifecycle.messages_compacted,
            erasures_resumed=a.lifecycle.erasures_resumed,
            datasets_erasing=a.lifecycle.datasets_erasing,
            threads_compacted_total=a.lifecycle.threads_compacted_total,
        ),
    )


def wait_for_episode(
    core: ClientCore,
    thread_id: str,
    *,
    end_sequence: int | None = None,
    timeout: float = 60.0,
    poll_interval: float = 0.2,
) -> Flow[Episode]:
    """Waits until the thread's episode covering ``end_sequence`` (default: the
    thread's last message) is summarised, and returns it — completed, or failed for
    good. Raises DeadlineExceededError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    thread = yield from get_thread(core, thread_id)
    if end_sequence is None:
        end_sequence = thread.message_count
    dataset = thread.dataset
    while True:
        page = yield from list_episodes(core, dataset, thread_id=thread_id, page_size=50)
        for episode in page:
            if episode.end_sequence >= end_sequence and episode.status in (
                "completed",
                "failed",
                "archived",
            ):
                return episode
        if time.monotonic() > deadline:
            raise DeadlineExceededError(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                f"no summarised episode of thread {thread_id} up to message {end_sequence} "
                f"after {timeout:.0f}s (are the scheduler and summariser running?)",
                method="wait_for_episode",
            )
        yield Sleep(poll_interval)
