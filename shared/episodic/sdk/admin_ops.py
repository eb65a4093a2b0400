"""The SDK's flows for administration (Admin): datasets and their entities (list, merge,
split), erasing a dataset or a thread, and a dataset's policy (:data:`UNCHANGED` marks a
field left as it is). Re-exported by :mod:`episodic.sdk.operations`."""

from __future__ import annotations

from collections.abc import Sequence

from episodic.sdk.calling import call
from episodic.sdk.flow import ClientCore, Flow
from episodic.sdk.types import (
    DatasetPolicy,
    DatasetSummary,
    Entity,
    EntitySplit,
    ErasureReceipt,
    Page,
    time_of,
)
from episodic.v1 import admin_service_pb2 as admin_pb2


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
