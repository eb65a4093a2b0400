"""Every public call of the SDK, written once as a flow (see :mod:`episodic.sdk`): the
requests they build, the rate-limit backoff (:func:`call`), paging, ``wait_for_episode``
and ``wait_ready``. The drivers (:mod:`episodic.sdk.client`, :mod:`episodic.sdk.aio`) run them.

The flows are written in six modules, re-exported here (the import path of everything
above): :mod:`~episodic.sdk.calling` (:func:`call` and ``wait_ready``),
:mod:`~episodic.sdk.thread_ops` (threads and messages), :mod:`~episodic.sdk.recall_ops`
(recall and procedures), :mod:`~episodic.sdk.episode_ops` (episodes and
``wait_for_episode``), :mod:`~episodic.sdk.pipeline_ops` (the Scheduler and the
Summariser) and :mod:`~episodic.sdk.admin_ops` (datasets, entities, erasure, policy)."""

from __future__ import annotations

from episodic.sdk.admin_ops import (
    UNCHANGED,
    delete_dataset,
    delete_thread,
    get_dataset_policy,
    list_datasets,
    list_entities,
    merge_entities,
    set_dataset_policy,
    split_entity,
)
from episodic.sdk.calling import call, wait_ready
from episodic.sdk.episode_ops import (
    delete_episode,
    entity_timeline,
    get_episode,
    iter_episodes,
    list_episodes,
    retry_episode,
    search_episodes,
    wait_for_episode,
)
from episodic.sdk.pipeline_ops import (
    check_providers,
    pipeline_status,
    process_pending,
    record_activity,
    record_thread_started,
    request_episode,
    run_sweep,
)
from episodic.sdk.recall_ops import (
    delete_procedure,
    get_procedure,
    list_procedures,
    recall,
    recall_procedures,
    record_outcome,
)
from episodic.sdk.thread_ops import (
    add_message,
    add_messages,
    add_messages_request,
    create_thread,
    end_thread,
    get_thread,
    list_messages,
    list_threads,
    load_session,
    recent_threads,
    record_event,
    start_thread,
)

__all__ = [
    "UNCHANGED",
    "add_message",
    "add_messages",
    "add_messages_request",
    "call",
    "check_providers",
    "create_thread",
    "delete_dataset",
    "delete_episode",
    "delete_procedure",
    "delete_thread",
    "end_thread",
    "entity_timeline",
    "get_dataset_policy",
    "get_episode",
    "get_procedure",
    "get_thread",
    "iter_episodes",
    "list_datasets",
    "list_entities",
    "list_episodes",
    "list_messages",
    "list_procedures",
    "list_threads",
    "load_session",
    "merge_entities",
    "pipeline_status",
    "process_pending",
    "recall",
    "recall_procedures",
    "recent_threads",
    "record_activity",
    "record_event",
    "record_outcome",
    "record_thread_started",
    "request_episode",
    "retry_episode",
    "run_sweep",
    "search_episodes",
    "set_dataset_policy",
    "split_entity",
    "start_thread",
    "wait_for_episode",
    "wait_ready",
]
