"""AdminService: API keys, the audit log, erasure, datasets' lifecycle policy and the entity
canon's merges and splits (served by the Ingest process). Every action is written to the audit log with the acting key's
prefix, in the action's transaction (an erasure: when it finished, with its receipt)."""

from __future__ import annotations

from datetime import UTC, datetime

import grpc
from sqlalchemy import Engine, text

from episodic import access, convert, genai
from episodic.access import Role
from episodic.config import PrivacySettings
from episodic.errors import InvalidArgument
from episodic.store import audit, datasets, entities, erasure, keys, languages, owners
from episodic.store import procedures as procedure_store
from episodic.store.vault import Vault
from episodic.v1 import access_pb2
from episodic.v1 import admin_service_pb2 as pb
from episodic.v1 import admin_service_pb2_grpc as pb_grpc
from episodic.validation import (
    check_dataset,
    cursor_int,
    cursor_text,
    decode_page_token,
    encode_page_token,
    page_size,
    parse_uuid,
)


def _role(value: int) -> Role:
    if value == access_pb2.ACCESS_ROLE_UNSPECIFIED or value not in Role._value2member_map_:
        raise InvalidArgument(
            "role is required: ACCESS_ROLE_READER, _WRITER, _ADMIN or _SERVICE", field="role"
        )
    return Role(value)


class AdminServicer(pb_grpc.AdminServiceServicer):
    def __init__(
        self,
        engine: Engine,
        vault: Vault,
        privacy: PrivacySettings,
        read_engine: Engine | None = None,
    ) -> None:
        self.engine = engine
        # Reporting reads (ListDatasets, ListAuditEvents) may lag and go to a replica; keys
        # and policies are read where they are written, so a change shows at once.
        self.read_engine = read_engine or engine
        self.vault = vault
        self.privacy = privacy

    def CreateApiKey(
        self, request: pb.CreateApiKeyRequest, context: grpc.ServicerContext
    ) -> pb.CreateApiKeyResponse:
        role = _role(request.role)
        expires_at = convert.optional_from_ts(request, "expires_at")
        if expires_at is not None and expires_at <= datetime.now(UTC):
            raise InvalidArgument("expires_at lies in the past", field="expires_at")
        actor = access.current().prefix
        with self.engine.begin() as conn:
            minted = keys.create_key(
                conn,
                role=role,
                datasets=list(request.datasets),
                name=request.name,
                expires_at=expires_at,
                created_by=actor,
            )
            audit.record(
                conn,
                key_prefix=actor,
                action="key.create",
                target=str(minted.row["key_id"]),
                details={
                    "prefix": f"ek_{minted.row['prefix']}",
                    "role": role.label,
                    "datasets": list(minted.row["datasets"]),
                },
            )
        return pb.CreateApiKeyResponse(key=convert.api_key(minted.row), secret=minted.secret)

    def ListApiKeys(
        self, request: pb.ListApiKeysRequest, context: grpc.ServicerContext
    ) -> pb.ListApiKeysResponse:
        limit = page_size(request.page_size, default=50, maximum=1000)
        filters = {"all": request.include_inactive}
        cursor = decode_page_token(request.page_token, expect=filters)
        before = None
        if cursor:
            try:
                before = (datetime.fromisoformat(cursor["at"]), parse_uuid(cursor["id"], "id"))
            except (KeyError, TypeError, ValueError, InvalidArgument):
                raise InvalidArgument("page_token is malformed", field="page_token") from None
        with self.engine.connect() as conn:
            rows, more = keys.list_keys(
                conn, include_inactive=request.include_inactive, before=before, limit=limit
            )
        token = ""
        if more:
            last = rows[-1]
            token = encode_page_token(
                {**filters, "at": last["created_at"].isoformat(), "id": str(last["key_id"])}
            )
        return pb.ListApiKeysResponse(
            keys=[convert.api_key(r) for r in rows], next_page_token=token
        )

    def RevokeApiKey(
        self, request: pb.RevokeApiKeyRequest, context: grpc.ServicerContext
    ) -> pb.RevokeApiKeyResponse:
        if not request.key.strip():
            raise InvalidArgument("key is required (its id, its prefix or the key)", field="key")
        actor = access.current().prefix
        with self.engine.begin() as conn:
            row = keys.revoke_key(conn, request.key.strip())
            audit.record(
                conn,
                key_prefix=actor,
                action="key.revoke",
                target=str(row["key_id"]),
                details={"prefix": f"ek_{row['prefix']}"},
            )
        return pb.RevokeApiKeyResponse(key=convert.api_key(row))

    def ListDatasets(
        self, request: pb.ListDatasetsRequest, context: grpc.ServicerContext
    ) -> pb.ListDatasetsResponse:
        limit = page_size(request.page_size, default=50, maximum=1000)
        prefix = request.prefix
        if prefix and ("\x00" in prefix or len(prefix) > 128):
            raise InvalidArgument("prefix is not a dataset prefix", field="prefix")
        filters = {"prefix": prefix}
        cursor = decode_page_token(request.page_token, expect=filters)
        before = None
        if cursor:
            try:
                before = (datetime.fromisoformat(cursor["at"]), cursor_text(cursor, "dataset"))
            except (KeyError, TypeError, ValueError):
                raise InvalidArgument("page_token is malformed", field="page_token") from None
        with self.read_engine.connect() as conn:
            rows, more = datasets.list_datasets(conn, prefix=prefix, before=before, limit=limit)
        token = ""
        if more:
            last = rows[-1]
            token = encode_page_token(
                {**filters, "at": last["last_activity_at"].isoformat(), "dataset": last["dataset"]}
            )
        return pb.ListDatasetsResponse(
            datasets=[
                pb.DatasetSummary(
                    dataset=r["dataset"],
                    thread_count=r["thread_count"],
                    message_count=r["message_count"],
                    last_activity_at=convert.ts(r["last_activity_at"]),
                )
                for r in rows
            ],
            next_page_token=token,
        )

    def ListAuditEvents(
        self, request: pb.ListAuditEventsRequest, context: grpc.ServicerContext
    ) -> pb.ListAuditEventsResponse:
        dataset = check_dataset(request.dataset) if request.dataset else None
        limit = page_size(request.page_size, default=100, maximum=1000)
        filters = {"dataset": dataset or ""}
        cursor = decode_page_token(request.page_token, expect=filters)
        before = None
        if cursor and cursor.get("before") is not None:
            try:
                before = cursor_int(cursor, "before")
            except ValueError:
                raise InvalidArgument("page_token is malformed", field="page_token") from None
        with self.read_engine.connect() as conn:
            rows, more = audit.list_events(conn, dataset=dataset, before=before, limit=limit)
        token = encode_page_token({**filters, "before": rows[-1]["event_id"]}) if more else ""
        return pb.ListAuditEventsResponse(
            events=[convert.audit_event(r) for r in rows], next_page_token=token
        )

    @genai.memory_rpc("AdminService/DeleteDataset")
    def DeleteDataset(
        self, request: pb.DeleteDatasetRequest, context: grpc.ServicerContext
    ) -> pb.DeleteDatasetResponse:
        dataset = check_dataset(request.dataset)
        access.require_dataset(dataset)
        receipt = erasure.erase_dataset(
            self.engine,
            dataset,
            actor=access.current().prefix,
            batch_rows=self.privacy.erasure_batch_rows,
        )
        self.vault.forget(dataset)
        return pb.DeleteDatasetResponse(receipt=convert.receipt(receipt))

    @genai.memory_rpc("AdminService/DeleteThread")
    def DeleteThread(
        self, request: pb.DeleteThreadRequest, context: grpc.ServicerContext
    ) -> pb.DeleteThreadResponse:
        thread_id = parse_uuid(request.thread_id, "thread_id")
        with self.engine.connect() as conn:
            dataset = owners.require_thread(conn, thread_id)
        receipt = erasure.erase_thread(
            self.engine,
            thread_id,
            dataset=dataset,
            actor=access.current().prefix,
            vault=self.vault,
            batch_rows=self.privacy.erasure_batch_rows,
        )
        return pb.DeleteThreadResponse(receipt=convert.receipt(receipt))

    def DeleteProcedure(
        self, request: pb.DeleteProcedureRequest, context: grpc.ServicerContext
    ) -> pb.DeleteProcedureResponse:
        dataset = check_dataset(request.dataset)
        procedure_id = parse_uuid(request.procedure_id, "procedure_id")
        access.require_dataset(dataset)
        with self.engine.begin() as conn:
            forgotten = procedure_store.delete_procedure(
                conn, self.vault, dataset, procedure_id, actor=access.current().prefix
            )
        return pb.DeleteProcedureResponse(forgotten_sources=forgotten)

    def GetDatasetPolicy(
        self, request: pb.GetDatasetPolicyRequest, context: grpc.ServicerContext
    ) -> pb.GetDatasetPolicyResponse:
        dataset = check_dataset(request.dataset)
        access.require_dataset(dataset)
        with self.engine.connect() as conn:
            policy = datasets.get_policy(conn, dataset, self.privacy)
        return pb.GetDatasetPolicyResponse(policy=_policy(policy))

    def SetDatasetPolicy(
        self, request: pb.SetDatasetPolicyRequest, context: grpc.ServicerContext
    ) -> pb.SetDatasetPolicyResponse:
        dataset = check_dataset(request.dataset)
        access.require_dataset(dataset)
        changing = _policy_fields(request)
        days: dict[str, int | None] = {}  # the day counts this call changes
        for field in ("retention_days", "compact_after_days"):
            if field not in changing:
                continue
            value = getattr(request, field) if request.HasField(field) else None
            if value is not None and not 1 <= value <= 36_500:
                raise InvalidArgument(
                    f"{field} must be between 1 and 36500 days (leave it unset for the "
                    "global default)",
                    field=field,
                )
            days[field] = value
        language = (
            request.language if "language" in changing and request.HasField("language") else None
        )
        with self.engine.begin() as conn:
            details: dict[str, int | str | None] = dict(days)
            if language is not None:
                # The language first, and without the dataset's row: re-stemming a large
                # dataset takes minutes, during which its CreateThread and every other
                # writer that share-locks the row must not wait (set_language).
                languages.hold_language(conn, dataset, exclusive=True)
                if not datasets.registered(conn, dataset):
                    self.vault.for_write(conn, dataset)  # registers it: nothing to re-stem
                if language.strip().lower() == languages.AUTO:
                    details["language"] = languages.AUTO
                    details["detected"] = languages.hand_back_to_detection(
                        conn, self.vault, dataset
                    )
                else:
                    config = languages.resolve_language(conn, language)
                    languages.set_language(conn, self.vault, dataset, config)
                    details["language"] = config
            # The row's update lock before Vault.for_write's share lock: two calls each
            # upgrading from the share lock to set_policy's update would deadlock.
            conn.execute(
                text("SELECT 1 FROM datasets WHERE dataset = :d FOR NO KEY UPDATE"),
                {"d": dataset},
            )
            self.vault.for_write(conn, dataset)  # registers a new dataset (with its key)
            kept = datasets.own_days(conn, dataset)  # under the row's lock: no one changes them
            policy = datasets.set_policy(conn, dataset, self.privacy, **{**kept, **days})
            audit.record(
                conn,
                key_prefix=access.current().prefix,
                action="dataset.policy",
                dataset=dataset,
                details=details,
            )
        return pb.SetDatasetPolicyResponse(policy=_policy(policy))

    # ---- the entity canon ----------------------------------------------------------

    def ListEntities(
        self, request: pb.ListEntitiesRequest, context: grpc.ServicerContext
    ) -> pb.ListEntitiesResponse:
        dataset = check_dataset(request.dataset)
        access.require_dataset(dataset)
        limit = page_size(request.page_size, default=50, maximum=1000)
        filters = {"dataset": dataset}
        cursor = decode_page_token(request.page_token, expect=filters)
        after = None
        if cursor:
            try:
                after = (datetime.fromisoformat(cursor["at"]), parse_uuid(cursor["id"], "id"))
            except (KeyError, TypeError, ValueError, InvalidArgument):
                raise InvalidArgument("page_token is malformed", field="page_token") from None
        with self.engine.connect() as conn:
            key = self.vault.for_read(conn, dataset)
            page, more = entities.list_entities(conn, key, after=after, limit=limit)
        token = ""
        if more:
            last = page[-1]
            token = encode_page_token(
                {**filters, "at": last.created_at.isoformat(), "id": str(last.entity_id)}
            )
        return pb.ListEntitiesResponse(
            entities=[convert.entity(e) for e in page], next_page_token=token
        )

    def MergeEntities(
        self, request: pb.MergeEntitiesRequest, context: grpc.ServicerContext
    ) -> pb.MergeEntitiesResponse:
        dataset = check_dataset(request.dataset)
        access.require_dataset(dataset)
        _check_reference(request.into, "into")
        if not request.sources:
            raise InvalidArgument(
                "sources is required: the entities to merge into `into`", field="sources"
            )
        if len(request.sources) > MAX_MERGE_SOURCES:
            raise InvalidArgument(
                f"{len(request.sources)} sources; at most {MAX_MERGE_SOURCES} per call",
                field="sources",
            )
        for i, source in enumerate(request.sources):
            _check_reference(source, f"sources[{i}]")
        with self.engine.begin() as conn:
            key = self.vault.for_read(conn, dataset)
            into = entities.find_entity(conn, key, request.into, field="into")
            sources = [
                entities.find_entity(conn, key, s, field=f"sources[{i}]")
                for i, s in enumerate(request.sources)
            ]
            merged = entities.merge_entities(conn, key, into, sources)
            audit.record(  # ids only: entity names are people's words
                conn,
                key_prefix=access.current().prefix,
                action="entity.merge",
                dataset=dataset,
                target=str(into),
                details={"sources": sorted({str(s) for s in sources})},
            )
        return pb.MergeEntitiesResponse(entity=convert.entity(merged))

    def SplitEntity(
        self, request: pb.SplitEntityRequest, context: grpc.ServicerContext
    ) -> pb.SplitEntityResponse:
        dataset = check_dataset(request.dataset)
        access.require_dataset(dataset)
        _check_reference(request.alias, "alias")
        with self.engine.begin() as conn:
            key = self.vault.for_read(conn, dataset)
            split_off, remaining = entities.split_alias(conn, key, request.alias)
            audit.record(
                conn,
                key_prefix=access.current().prefix,
                action="entity.split",
                dataset=dataset,
                target=str(remaining.entity_id),
                details={"split_off": str(split_off.entity_id)},
            )
        return pb.SplitEntityResponse(
            split_off=convert.entity(split_off), remaining=convert.entity(remaining)
        )


#: Entities one MergeEntities call may merge into one.
MAX_MERGE_SOURCES = 100
#: Longest entity reference (an id or a name).
MAX_ENTITY_REFERENCE_CHARS = 500


def _check_reference(value: str, field: str) -> None:
    if not value.strip():
        raise InvalidArgument(f"{field} is required (an entity id or a name)", field=field)
    if len(value) > MAX_ENTITY_REFERENCE_CHARS or "\x00" in value:
        raise InvalidArgument(
            f"{field} is not an entity reference (at most {MAX_ENTITY_REFERENCE_CHARS} "
            "characters, no NUL)",
            field=field,
        )


_LANGUAGE_ORIGINS = {
    "default": pb.LANGUAGE_ORIGIN_DEFAULT,
    "detected": pb.LANGUAGE_ORIGIN_DETECTED,
    "set": pb.LANGUAGE_ORIGIN_SET,
}


def _policy(policy: datasets.Policy) -> pb.DatasetPolicy:
    out = pb.DatasetPolicy(
        dataset=policy.dataset,
        effective_retention_days=policy.effective_retention_days or 0,
        effective_compact_after_days=policy.effective_compact_after_days or 0,
        encrypted=policy.encrypted,
        language=policy.language,
        language_origin=_LANGUAGE_ORIGINS[policy.language_origin],
    )
    if policy.retention_days is not None:
        out.retention_days = policy.retention_days
    if policy.compact_after_days is not None:
        out.compact_after_days = policy.compact_after_days
    return out


def register(server: grpc.Server, servicer: AdminServicer) -> None:
    pb_grpc.add_AdminServiceServicer_to_server(servicer, server)


#: What SetDatasetPolicyRequest.update_mask may name.
POLICY_FIELDS = ("retention_days", "compact_after_days", "language")


def _policy_fields(request: pb.SetDatasetPolicyRequest) -> frozenset[str]:
    """The policy fields a SetDatasetPolicy call changes: those its ``update_mask`` names,
    or every one when it names none (the request's values as they are: unset days are the
    global defaults)."""
    named = list(request.update_mask.paths)
    for path in named:
        if path not in POLICY_FIELDS:
            raise InvalidArgument(
                f"update_mask names {path!r}, which is not a policy field: name "
                + ", ".join(POLICY_FIELDS),
                field="update_mask",
            )
    return frozenset(named or POLICY_FIELDS)
