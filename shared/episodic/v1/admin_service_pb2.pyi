import datetime

from episodic.v1 import access_pb2 as _access_pb2
from episodic.v1 import entity_pb2 as _entity_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LanguageOrigin(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LANGUAGE_ORIGIN_UNSPECIFIED: _ClassVar[LanguageOrigin]
    LANGUAGE_ORIGIN_DEFAULT: _ClassVar[LanguageOrigin]
    LANGUAGE_ORIGIN_DETECTED: _ClassVar[LanguageOrigin]
    LANGUAGE_ORIGIN_SET: _ClassVar[LanguageOrigin]
LANGUAGE_ORIGIN_UNSPECIFIED: LanguageOrigin
LANGUAGE_ORIGIN_DEFAULT: LanguageOrigin
LANGUAGE_ORIGIN_DETECTED: LanguageOrigin
LANGUAGE_ORIGIN_SET: LanguageOrigin

class ApiKey(_message.Message):
    __slots__ = ("key_id", "prefix", "name", "role", "datasets", "created_at", "expires_at", "revoked_at", "created_by")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    DATASETS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    REVOKED_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    prefix: str
    name: str
    role: _access_pb2.AccessRole
    datasets: _containers.RepeatedScalarFieldContainer[str]
    created_at: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    revoked_at: _timestamp_pb2.Timestamp
    created_by: str
    def __init__(self, key_id: _Optional[str] = ..., prefix: _Optional[str] = ..., name: _Optional[str] = ..., role: _Optional[_Union[_access_pb2.AccessRole, str]] = ..., datasets: _Optional[_Iterable[str]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revoked_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_by: _Optional[str] = ...) -> None: ...

class CreateApiKeyRequest(_message.Message):
    __slots__ = ("name", "role", "datasets", "expires_at")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    DATASETS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    name: str
    role: _access_pb2.AccessRole
    datasets: _containers.RepeatedScalarFieldContainer[str]
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., role: _Optional[_Union[_access_pb2.AccessRole, str]] = ..., datasets: _Optional[_Iterable[str]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateApiKeyResponse(_message.Message):
    __slots__ = ("key", "secret")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    key: ApiKey
    secret: str
    def __init__(self, key: _Optional[_Union[ApiKey, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class ListApiKeysRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "include_inactive")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_INACTIVE_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    include_inactive: bool
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., include_inactive: _Optional[bool] = ...) -> None: ...

class ListApiKeysResponse(_message.Message):
    __slots__ = ("keys", "next_page_token")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[ApiKey]
    next_page_token: str
    def __init__(self, keys: _Optional[_Iterable[_Union[ApiKey, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RevokeApiKeyRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: str
    def __init__(self, key: _Optional[str] = ...) -> None: ...

class RevokeApiKeyResponse(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: ApiKey
    def __init__(self, key: _Optional[_Union[ApiKey, _Mapping]] = ...) -> None: ...

class AuditEvent(_message.Message):
    __slots__ = ("event_id", "occurred_at", "key_prefix", "action", "dataset", "target", "details")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    KEY_PREFIX_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    event_id: int
    occurred_at: _timestamp_pb2.Timestamp
    key_prefix: str
    action: str
    dataset: str
    target: str
    details: _struct_pb2.Struct
    def __init__(self, event_id: _Optional[int] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., key_prefix: _Optional[str] = ..., action: _Optional[str] = ..., dataset: _Optional[str] = ..., target: _Optional[str] = ..., details: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ListAuditEventsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "dataset")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    dataset: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., dataset: _Optional[str] = ...) -> None: ...

class ListAuditEventsResponse(_message.Message):
    __slots__ = ("events", "next_page_token")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[AuditEvent]
    next_page_token: str
    def __init__(self, events: _Optional[_Iterable[_Union[AuditEvent, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DatasetSummary(_message.Message):
    __slots__ = ("dataset", "thread_count", "message_count", "last_activity_at")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    THREAD_COUNT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVITY_AT_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    thread_count: int
    message_count: int
    last_activity_at: _timestamp_pb2.Timestamp
    def __init__(self, dataset: _Optional[str] = ..., thread_count: _Optional[int] = ..., message_count: _Optional[int] = ..., last_activity_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListDatasetsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "prefix")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    prefix: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., prefix: _Optional[str] = ...) -> None: ...

class ListDatasetsResponse(_message.Message):
    __slots__ = ("datasets", "next_page_token")
    DATASETS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    datasets: _containers.RepeatedCompositeFieldContainer[DatasetSummary]
    next_page_token: str
    def __init__(self, datasets: _Optional[_Iterable[_Union[DatasetSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ErasureReceipt(_message.Message):
    __slots__ = ("receipt_id", "scope", "dataset", "dataset_digest", "thread_id", "rows_deleted", "started_at", "finished_at", "data_key_destroyed", "audit_events_pseudonymised", "api_keys_scrubbed", "digest")
    class RowsDeletedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    RECEIPT_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    DATASET_DIGEST_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    ROWS_DELETED_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    DATA_KEY_DESTROYED_FIELD_NUMBER: _ClassVar[int]
    AUDIT_EVENTS_PSEUDONYMISED_FIELD_NUMBER: _ClassVar[int]
    API_KEYS_SCRUBBED_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    receipt_id: str
    scope: str
    dataset: str
    dataset_digest: str
    thread_id: str
    rows_deleted: _containers.ScalarMap[str, int]
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    data_key_destroyed: bool
    audit_events_pseudonymised: int
    api_keys_scrubbed: int
    digest: str
    def __init__(self, receipt_id: _Optional[str] = ..., scope: _Optional[str] = ..., dataset: _Optional[str] = ..., dataset_digest: _Optional[str] = ..., thread_id: _Optional[str] = ..., rows_deleted: _Optional[_Mapping[str, int]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., data_key_destroyed: _Optional[bool] = ..., audit_events_pseudonymised: _Optional[int] = ..., api_keys_scrubbed: _Optional[int] = ..., digest: _Optional[str] = ...) -> None: ...

class DeleteDatasetRequest(_message.Message):
    __slots__ = ("dataset",)
    DATASET_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    def __init__(self, dataset: _Optional[str] = ...) -> None: ...

class DeleteDatasetResponse(_message.Message):
    __slots__ = ("receipt",)
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    receipt: ErasureReceipt
    def __init__(self, receipt: _Optional[_Union[ErasureReceipt, _Mapping]] = ...) -> None: ...

class DeleteThreadRequest(_message.Message):
    __slots__ = ("thread_id",)
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    def __init__(self, thread_id: _Optional[str] = ...) -> None: ...

class DeleteThreadResponse(_message.Message):
    __slots__ = ("receipt",)
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    receipt: ErasureReceipt
    def __init__(self, receipt: _Optional[_Union[ErasureReceipt, _Mapping]] = ...) -> None: ...

class DeleteProcedureRequest(_message.Message):
    __slots__ = ("dataset", "procedure_id")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    PROCEDURE_ID_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    procedure_id: str
    def __init__(self, dataset: _Optional[str] = ..., procedure_id: _Optional[str] = ...) -> None: ...

class DeleteProcedureResponse(_message.Message):
    __slots__ = ("forgotten_sources",)
    FORGOTTEN_SOURCES_FIELD_NUMBER: _ClassVar[int]
    forgotten_sources: int
    def __init__(self, forgotten_sources: _Optional[int] = ...) -> None: ...

class DatasetPolicy(_message.Message):
    __slots__ = ("dataset", "retention_days", "compact_after_days", "effective_retention_days", "effective_compact_after_days", "encrypted", "language", "language_origin")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    RETENTION_DAYS_FIELD_NUMBER: _ClassVar[int]
    COMPACT_AFTER_DAYS_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_RETENTION_DAYS_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_COMPACT_AFTER_DAYS_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTED_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_ORIGIN_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    retention_days: int
    compact_after_days: int
    effective_retention_days: int
    effective_compact_after_days: int
    encrypted: bool
    language: str
    language_origin: LanguageOrigin
    def __init__(self, dataset: _Optional[str] = ..., retention_days: _Optional[int] = ..., compact_after_days: _Optional[int] = ..., effective_retention_days: _Optional[int] = ..., effective_compact_after_days: _Optional[int] = ..., encrypted: _Optional[bool] = ..., language: _Optional[str] = ..., language_origin: _Optional[_Union[LanguageOrigin, str]] = ...) -> None: ...

class GetDatasetPolicyRequest(_message.Message):
    __slots__ = ("dataset",)
    DATASET_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    def __init__(self, dataset: _Optional[str] = ...) -> None: ...

class GetDatasetPolicyResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: DatasetPolicy
    def __init__(self, policy: _Optional[_Union[DatasetPolicy, _Mapping]] = ...) -> None: ...

class SetDatasetPolicyRequest(_message.Message):
    __slots__ = ("dataset", "retention_days", "compact_after_days", "language", "update_mask")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    RETENTION_DAYS_FIELD_NUMBER: _ClassVar[int]
    COMPACT_AFTER_DAYS_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    retention_days: int
    compact_after_days: int
    language: str
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, dataset: _Optional[str] = ..., retention_days: _Optional[int] = ..., compact_after_days: _Optional[int] = ..., language: _Optional[str] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class SetDatasetPolicyResponse(_message.Message):
    __slots__ = ("policy",)
    POLICY_FIELD_NUMBER: _ClassVar[int]
    policy: DatasetPolicy
    def __init__(self, policy: _Optional[_Union[DatasetPolicy, _Mapping]] = ...) -> None: ...

class ListEntitiesRequest(_message.Message):
    __slots__ = ("dataset", "page_size", "page_token")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    page_size: int
    page_token: str
    def __init__(self, dataset: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListEntitiesResponse(_message.Message):
    __slots__ = ("entities", "next_page_token")
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    entities: _containers.RepeatedCompositeFieldContainer[_entity_pb2.Entity]
    next_page_token: str
    def __init__(self, entities: _Optional[_Iterable[_Union[_entity_pb2.Entity, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class MergeEntitiesRequest(_message.Message):
    __slots__ = ("dataset", "into", "sources")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    INTO_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    into: str
    sources: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, dataset: _Optional[str] = ..., into: _Optional[str] = ..., sources: _Optional[_Iterable[str]] = ...) -> None: ...

class MergeEntitiesResponse(_message.Message):
    __slots__ = ("entity",)
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    entity: _entity_pb2.Entity
    def __init__(self, entity: _Optional[_Union[_entity_pb2.Entity, _Mapping]] = ...) -> None: ...

class SplitEntityRequest(_message.Message):
    __slots__ = ("dataset", "alias")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    ALIAS_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    alias: str
    def __init__(self, dataset: _Optional[str] = ..., alias: _Optional[str] = ...) -> None: ...

class SplitEntityResponse(_message.Message):
    __slots__ = ("split_off", "remaining")
    SPLIT_OFF_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    split_off: _entity_pb2.Entity
    remaining: _entity_pb2.Entity
    def __init__(self, split_off: _Optional[_Union[_entity_pb2.Entity, _Mapping]] = ..., remaining: _Optional[_Union[_entity_pb2.Entity, _Mapping]] = ...) -> None: ...
