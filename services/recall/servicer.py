"""RecallService: parse the request, call the domain, map the result."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any

import grpc
import numpy as np
import psycopg
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError

from episodic import access, convert, genai, metrics
from episodic.config import RecallSettings
from episodic.errors import InvalidArgument, ProviderError, Unavailable
from episodic.providers import second_opinion
from episodic.providers.dataset_embedders import DatasetEmbedders
from episodic.providers.rerank import HttpReranker
from episodic.providers.second_opinion import SecondOpinion
from episodic.providers.second_opinion import available as opinion_available
from episodic.providers.types import Embedder
from episodic.store import embedding_space, recall_queries, records
from episodic.store import procedures as procedure_store
from episodic.store.embedding_space import SpaceWatch
from episodic.store.nearest_walks import NearestWalks
from episodic.store.recall_queries import Approximation, RecallFilters
from episodic.store.vault import Vault
from episodic.temporal import QueryTime
from episodic.v1 import episode_pb2
from episodic.v1 import recall_service_pb2 as pb
from episodic.v1 import recall_service_pb2_grpc as pb_grpc
from episodic.validation import (
    check_dataset,
    cursor_int,
    decode_page_token,
    encode_page_token,
    page_size,
    parse_optional_uuid,
    parse_uuid,
)

from . import domain
from . import events as recall_events
from .events import MAX_ACTOR_CHARS, EventScope

log = logging.getLogger(__name__)

_KNOWN_INCLUDES = {pb.RECALL_INCLUDE_EPISODES, pb.RECALL_INCLUDE_PROCEDURES}


def _optional(message: Any, field: str) -> Any:
    return getattr(message, field) if message.HasField(field) else None


def _includes(values: list[int]) -> tuple[bool, bool]:
    """Whether the request includes episodes, and procedures."""
    for i, value in enumerate(values):
        if value not in _KNOWN_INCLUDES:
            raise InvalidArgument(
                f"include[{i}] is {'unspecified' if value == 0 else f'unknown ({value})'}; "
                "use RECALL_INCLUDE_EPISODES or RECALL_INCLUDE_PROCEDURES",
                field=f"include[{i}]",
            )
    return pb.RECALL_INCLUDE_EPISODES in values, pb.RECALL_INCLUDE_PROCEDURES in values


def _event_scope(request: pb.RecallRequest) -> EventScope | None:
    """Events join the recall unless excluded; an actor filter keeps only that actor's."""
    actor = domain.check_text(request.actor.strip(), "actor", MAX_ACTOR_CHARS) or None
    if request.exclude_events:
        if actor is not None:
            raise InvalidArgument(
                "actor filters events, and exclude_events leaves them out: set one of them",
                field="actor",
            )
        return None
    return EventScope(actor=actor)


def _scored(row: Any) -> episode_pb2.ScoredEpisode:
    return episode_pb2.ScoredEpisode(
        episode=convert.episode(row),
        relevance_score=float(row["relevance"]),
        similarity=float(row["similarity"]),
        recency=float(row["recency"]),
        lexical=float(row["lexical"]),
        semantic=float(row["semantic"]),
        relevance=float(row.get("absolute_relevance") or 0.0),
    )


def _understanding(
    understood: QueryTime | None, selected: list[Any]
) -> pb.QueryUnderstanding | None:
    """What Recall read from the query about time, for the response."""
    if understood is None:
        return None
    out = pb.QueryUnderstanding(
        ranked_query=understood.remainder,
        expressions=[
            pb.TimeExpression(
                text=e.text, kind=e.kind, start=convert.ts(e.start), end=convert.ts(e.end)
            )
            for e in understood.expressions
        ],
        window_start=convert.ts(understood.start),
        window_end=convert.ts(understood.end),
        time_only=understood.time_only,
        applied=understood.applied,
        notes=list(understood.notes),
    )
    if understood.ordinal is not None:
        o = understood.ordinal
        out.ordinal.CopyFrom(
            pb.SessionOrdinal(
                text=o.text,
                position=o.position,
                from_end=o.from_end,
                count=o.count,
                scope=o.scope,
                event_type=o.event_type or "",
                thread_ids=[str(t) for t in selected],
            )
        )
    return out


@contextmanager
def _reading(
    engine: Engine, context: grpc.ServicerContext | None, *, snapshot: bool = False
) -> Iterator[Connection]:
    """A connection for one call's reads.

    The engine runs in autocommit (each read is one statement: one round trip, one
    snapshot) with a statement_timeout ceiling set per connection, which bounds the work of
    any call. A caller with a short deadline gets it enforced exactly instead: a
    transaction with a local statement_timeout (two more round trips), so the database
    stops as soon as that client gives up. ``snapshot``: the call's statements read one
    snapshot (a REPEATABLE READ transaction, two more round trips), for a call whose later
    statements depend on what an earlier one found — an entity a concurrent merge deletes
    in between would otherwise be found and then missing. A lost connection is
    UNAVAILABLE (the SDK retries reads), a cancelled statement DEADLINE_EXCEEDED.
    """
    remaining = context.time_remaining() if context is not None else None
    short = remaining is not None and remaining < domain.EXACT_DEADLINE_BELOW
    try:
        with engine.connect() as conn:
            if short or snapshot:
                conn = conn.execution_options(
                    isolation_level="REPEATABLE READ" if snapshot else "READ COMMITTED"
                )
                with conn.begin():
                    if short:
                        conn.execute(
                            text("SELECT set_config('statement_timeout', :ms, true)"),
                            {"ms": str(max(1, int(remaining * 1000)))},  # type: ignore[operator]
                        )
                    yield conn
            else:
                yield conn
    except DBAPIError as err:
        if isinstance(err.orig, psycopg.errors.QueryCanceled):
            raise domain.DeadlineExceeded(
                "the database did not answer within the call's deadline"
            ) from err
        if err.connection_invalidated or isinstance(err.orig, psycopg.OperationalError):
            raise Unavailable("the database is unreachable; retry shortly") from err
        raise


class RecallServicer(pb_grpc.RecallServiceServicer):
    def __init__(
        self,
        engine: Engine,
        settings: RecallSettings,
        embedder: Embedder,
        vault: Vault,
        reranker: HttpReranker | None = None,
        multilingual: Embedder | None = None,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.embedder = embedder
        # A dataset in another language than English may be embedded by the multilingual
        # model (its datasets.embedding_model): its queries go through that model, ranked
        # with that model's curves (providers/dataset_embedders.py).
        self.embedders = DatasetEmbedders(embedder, multilingual)
        self.vault = vault
        self.reranker = reranker
        # A second multilingual model's opinion of the best episodes of a dataset in another
        # language (providers/second_opinion.py); loads on its first such query.
        self.second_opinion = (
            SecondOpinion()
            if settings.ranking_second_opinion and multilingual is not None and opinion_available()
            else None
        )
        self._opinion_threads = ThreadPoolExecutor(
            max_workers=2, thread_name_prefix="recall-opinion"
        )
        # Queries are compared with the store's vectors: a Recall whose model the store was
        # moved away from answers FAILED_PRECONDITION (store/embedding_space.py).
        self.space = SpaceWatch(engine, embedder.name)
        self._walks = (
            NearestWalks(engine, settings.recall_walk_threads)
            if settings.recall_walk_threads
            else None
        )
        self.sizes = domain.DatasetSizes(
            settings.recall_approximate_above,
            Approximation(
                candidates=settings.recall_approximate_candidates,
                recent=settings.recall_approximate_recent,
                nearest=settings.recall_approximate_nearest,
                exact_cosine=settings.recall_approximate_exact_cosine,
                walks=self._walks,
            ),
        )
        self.ranking = domain.ranking_from(settings, embedder.name)
        self.abstention = domain.abstention(embedder.name)
        self._by_model = {
            name: (domain.ranking_from(settings, name), domain.abstention(name))
            for name in self.embedders.names
        }

    def close(self) -> None:
        """Stops the servicer's threads (the HNSW walks', the second opinion's) once the
        server has finished its calls: a shutdown hook. A walk still queued is taken back
        by its caller; nothing is left running against a disposed engine."""
        if self._walks is not None:
            self._walks.close()
        self._opinion_threads.shutdown(wait=False, cancel_futures=True)

    def in_dataset_model(
        self, conn: Connection, query: domain.RecallQuery
    ) -> tuple[domain.RecallQuery, str | None]:
        """``query`` ranked as its dataset's model calls for, and that model (None: the
        store's), read on the call's connection: a dataset moved to another model
        (services/summariser/spaces.py) is queried in the new one from its commit on."""
        model = embedding_space.dataset_model(conn, query.dataset)
        if model is None or model == self.embedder.name:
            return query, None
        self.embedders.get(model)  # FAILED_PRECONDITION when this Recall does not run it
        ranking, abstention = self._by_model[model]
        return (
            replace(
                query,
                ranking=ranking,
                abstention=abstention if query.abstention is not None else None,
            ),
            model,
        )

    def query_vector(self, text: str, model: str | None) -> np.ndarray:
        """``text`` embedded as a query by ``model`` (None: the store's, which must still
        be the store's: SpaceWatch)."""
        if model is None:
            self.space.require()
        return self.embedders.get(model).embed_query(text)

    def parse_recall(self, request: pb.RecallRequest) -> domain.RecallQuery:
        """Checks a RecallRequest (INVALID_ARGUMENT names the first bad field)."""
        dataset = check_dataset(request.dataset)
        access.require_dataset(dataset)
        include, include_procedures = _includes(list(request.include))
        query = domain.check_query(request.query)
        limit = domain.check_context_episodes(request.context_episodes, self.settings)
        ws = domain.check_weight(
            _optional(request, "similarity_weight"),
            self.settings.similarity_weight,
            "similarity_weight",
        )
        wr = domain.check_weight(
            _optional(request, "recency_weight"), self.settings.recency_weight, "recency_weight"
        )
        domain.check_weights_usable(ws, wr)
        since = convert.optional_from_ts(request, "since")
        until = convert.optional_from_ts(request, "until")
        domain.check_window(since, until)
        as_of = convert.optional_from_ts(request, "as_of")
        filters = RecallFilters(
            since=since,
            until=until,
            thread_ids=domain.check_thread_ids(list(request.thread_ids), parse_uuid),
            entities=domain.check_entities(list(request.entities)),
            event_type=domain.check_event_type(request.event_type),
            as_of=as_of,
        )
        return domain.RecallQuery(
            dataset=dataset,
            query=query,
            include_episodes=include,
            limit=limit,
            similarity_weight=ws,
            recency_weight=wr,
            filters=filters,
            understanding=domain.read_time(query, as_of, request.literal_query),
            events=_event_scope(request),
            entity_canon=not request.exact_entities,
            # Presence matters: unset lets `abstain` choose, an explicit 0 overrides it.
            min_relevance=domain.check_min_relevance(
                request.min_relevance if request.HasField("min_relevance") else None
            ),
            min_match=domain.check_min_match(
                request.min_match if request.HasField("min_match") else None
            ),
            abstention=self.abstention if request.abstain else None,
            ranking=self.ranking,
            include_procedures=include_procedures,
            procedure_limit=domain.check_context_procedures(request.context_procedures),
        )

    @genai.memory_rpc("RecallService/Recall")
    def Recall(self, request: pb.RecallRequest, context: grpc.ServicerContext) -> pb.RecallResponse:
        query = self.parse_recall(request)
        if not (query.include_episodes or query.include_procedures):
            return pb.RecallResponse()
        ranked = query.ranked_query
        limit = query.limit
        # One reading block for the episodes and the procedures: the dataset's model is
        # read once, and a text both need is embedded once.
        with _reading(self.engine, context) as conn:
            query, model = self.in_dataset_model(conn, query)
            vectors: dict[str, np.ndarray] = {}

            def embedded(text: str) -> np.ndarray:
                if text not in vectors:
                    vectors[text] = self.query_vector(text, model)
                return vectors[text]

            procedures = self.recall_procedures(conn, query, embedded)
            if not query.include_episodes:  # episodes are opt-in (seed 000, "Retrieval")
                return pb.RecallResponse(procedures=procedures)
            vector = None
            if query.needs_embedding and ranked:
                vector = embedded(ranked)
            reranker = self.reranker if vector is not None and query.rerankable else None
            if reranker is not None:  # it may lift a candidate from below the requested limit
                query = replace(query, limit=max(limit, self.settings.rerank_candidates))
            # Only where the dataset is in the multilingual model (model: not the store's).
            opinion = self.second_opinion
            opinion_query: Future[np.ndarray] | None = None
            if (
                opinion is not None
                and model is not None
                and vector is not None
                and query.rerankable
                and ranked
            ):
                # It may lift one from below the requested limit.
                top = self.settings.ranking_second_opinion
                query = replace(query, limit=max(query.limit, top))
                # The query's vector in its space, computed while the ranking runs.
                opinion_query = self._opinion_threads.submit(opinion.query_vector, ranked)
            answer = domain.recall(conn, self.vault, query, vector, self.sizes)
        if opinion is not None and opinion_query is not None and ranked:
            # Not started yet (the threads busy with other calls'): computed here instead.
            computed = None if opinion_query.cancel() else opinion_query.result()
            rows = domain.second_opinion(
                answer.rows,
                lambda texts: opinion.cosines(ranked, texts, computed),
                top=self.settings.ranking_second_opinion,
                weight=second_opinion.WEIGHT,
            )
            answer = replace(answer, rows=rows if reranker is not None else rows[:limit])
        if reranker is not None and ranked:
            try:
                rows = domain.rerank(answer.rows, ranked, reranker.scores)
            except ProviderError as err:
                log.warning("rerank failed; answering in Recall's own order: %s", err)
                rows = answer.rows
            answer = replace(answer, rows=rows[:limit])
        if answer.abstained:
            metrics.recall_abstained()
        return pb.RecallResponse(
            episodes=pb.RecalledEpisodes(
                episodes=[_scored(r) for r in answer.rows],
                episode_count=answer.episode_count,
                match=answer.match,
                abstained=answer.abstained,
                abstain_applied=answer.abstain_applied,
                chunks_pending=answer.chunks_pending,
                episodes_pending=answer.episodes_pending,
            ),
            understanding=_understanding(query.understanding, answer.selected_threads),
            procedures=procedures,
            query_language=query.query_language or "",
        )

    def recall_procedures(
        self,
        conn: Connection,
        query: domain.RecallQuery,
        embedded: Callable[[str], np.ndarray],
    ) -> list[episode_pb2.ScoredProcedure]:
        """RECALL_INCLUDE_PROCEDURES: the procedures whose goals fit the query as written
        (``embedded``: the query's vector in the dataset's model)."""
        if not query.include_procedures:
            return []
        vector = embedded(query.query) if query.query else None
        found = procedure_store.recall_procedures(
            conn, self.vault, query.dataset, query_vector=vector, limit=query.procedure_limit
        )
        return [
            episode_pb2.ScoredProcedure(procedure=convert.procedure(row), relevance=relevance)
            for row, relevance in found
        ]

    def ListProcedures(
        self, request: pb.ListProceduresRequest, context: grpc.ServicerContext
    ) -> pb.ListProceduresResponse:
        dataset = check_dataset(request.dataset)
        access.require_dataset(dataset)
        limit = page_size(request.page_size, default=20, maximum=100)
        filters = {"dataset": dataset}
        cursor = decode_page_token(request.page_token, expect=filters)
        after = None
        if cursor:
            try:  # compared with (success_count integer, procedure_id as text)
                after = (
                    cursor_int(cursor, "ok", bits=32),
                    str(parse_uuid(cursor["pid"], "page_token")),
                )
            except (KeyError, TypeError, ValueError, InvalidArgument):
                raise InvalidArgument("page_token is malformed", field="page_token") from None
        with _reading(self.engine, context) as conn:
            rows, more = procedure_store.list_procedures(
                conn, self.vault, dataset, after=after, limit=limit
            )
        token = ""
        if more:
            last = rows[-1]
            token = encode_page_token(
                {**filters, "ok": last["success_count"], "pid": str(last["procedure_id"])}
            )
        return pb.ListProceduresResponse(
            procedures=[convert.procedure(r) for r in rows], next_page_token=token
        )

    def GetProcedure(
        self, request: pb.GetProcedureRequest, context: grpc.ServicerContext
    ) -> pb.GetProcedureResponse:
        dataset = check_dataset(request.dataset)
        procedure_id = parse_uuid(request.procedure_id, "procedure_id")
        access.require_dataset(dataset)
        with _reading(self.engine, context) as conn:
            row = procedure_store.get_procedure(conn, self.vault, dataset, procedure_id)
        return pb.GetProcedureResponse(procedure=convert.procedure(row))

    @genai.memory_rpc("RecallService/SearchEpisodes")
    def SearchEpisodes(
        self, request: pb.SearchEpisodesRequest, context: grpc.ServicerContext
    ) -> pb.SearchEpisodesResponse:
        dataset = check_dataset(request.dataset)
        access.require_dataset(dataset)
        query = domain.check_query(request.query)
        if query is None:
            raise InvalidArgument("query is required", field="query")
        limit = page_size(
            request.page_size, default=domain.SEARCH_DEFAULT_SIZE, maximum=domain.SEARCH_MAX_SIZE
        )
        with _reading(self.engine, context) as conn:
            model = embedding_space.dataset_model(conn, dataset)
            vector = self.query_vector(query, model)
            rows = domain.search(conn, self.vault, dataset, query, vector, limit)
        return pb.SearchEpisodesResponse(episodes=[_scored(r) for r in rows])

    @genai.memory_rpc("RecallService/GetEpisode")
    def GetEpisode(
        self, request: pb.GetEpisodeRequest, context: grpc.ServicerContext
    ) -> pb.GetEpisodeResponse:
        episode_id = parse_uuid(request.episode_id, "episode_id")
        with _reading(self.engine, context) as conn:
            row = records.get_record(conn, self.vault, episode_id)
        return pb.GetEpisodeResponse(episode=convert.episode(row))

    @genai.memory_rpc("RecallService/ListEpisodes")
    def ListEpisodes(
        self, request: pb.ListEpisodesRequest, context: grpc.ServicerContext
    ) -> pb.ListEpisodesResponse:
        dataset = check_dataset(request.dataset)
        access.require_dataset(dataset)
        status = domain.check_status(request.status)
        thread_id = parse_optional_uuid(request.thread_id, "thread_id")
        limit = page_size(
            request.page_size, default=domain.LIST_DEFAULT_SIZE, maximum=domain.LIST_MAX_SIZE
        )
        filters = {
            "dataset": dataset,
            "status": status or "",
            "thread": str(thread_id) if thread_id else "",
        }
        cursor = decode_page_token(request.page_token, expect=filters)
        before = None
        if cursor:
            try:
                before = (
                    datetime.fromisoformat(cursor["at"]),
                    parse_uuid(cursor["id"], "page_token"),
                )
            except (KeyError, TypeError, ValueError, InvalidArgument):
                raise InvalidArgument("page_token is malformed", field="page_token") from None
        with _reading(self.engine, context) as conn:
            stored, more = recall_queries.list_episodes(
                conn, dataset, status=status, thread_id=thread_id, before=before, limit=limit
            )
            rows = self.vault.open_rows(conn, dataset, stored, "episodes")
            rows, more = recall_events.with_listed_events(
                conn,
                self.vault,
                dataset,
                rows,
                more,
                status=status,
                thread_id=thread_id,
                before=before,
                limit=limit,
            )
        token = ""
        if more:
            last = rows[-1]
            token = encode_page_token(
                {**filters, "at": last["ended_at"].isoformat(), "id": str(last["episode_id"])}
            )
        return pb.ListEpisodesResponse(
            episodes=[convert.episode(r) for r in rows], next_page_token=token
        )

    def EntityTimeline(
        self, request: pb.EntityTimelineRequest, context: grpc.ServicerContext
    ) -> pb.EntityTimelineResponse:
        dataset = check_dataset(request.dataset)
        access.require_dataset(dataset)
        reference = domain.check_entity_reference(request.entity)
        limit = page_size(
            request.page_size, default=domain.TIMELINE_DEFAULT_SIZE, maximum=domain.LIST_MAX_SIZE
        )
        filters = {"dataset": dataset, "entity": reference}
        cursor = decode_page_token(request.page_token, expect=filters)
        after = None
        if cursor:
            try:
                after = (
                    datetime.fromisoformat(cursor["at"]),
                    parse_uuid(cursor["id"], "page_token"),
                )
            except (KeyError, TypeError, ValueError, InvalidArgument):
                raise InvalidArgument("page_token is malformed", field="page_token") from None
        with _reading(self.engine, context, snapshot=True) as conn:
            entity, rows, more = domain.entity_timeline(
                conn, self.vault, dataset, reference, after=after, limit=limit
            )
        token = ""
        if more:
            last = rows[-1]
            token = encode_page_token(
                {**filters, "at": last["started_at"].isoformat(), "id": str(last["episode_id"])}
            )
        return pb.EntityTimelineResponse(
            entity=convert.entity(entity),
            episodes=[convert.episode(r) for r in rows],
            next_page_token=token,
        )


def register(server: grpc.Server, servicer: RecallServicer) -> None:
    pb_grpc.add_RecallServiceServicer_to_server(servicer, server)
