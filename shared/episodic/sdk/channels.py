"""The SDK's channel policy: addresses from the environment, one channel per service, and
gRPC's own retries (a service config) for the methods safe to repeat."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import grpc

from episodic.endpoints import address_from_env
from episodic.v1 import admin_service_pb2_grpc as admin_grpc
from episodic.v1 import ingest_service_pb2_grpc as ingest_grpc
from episodic.v1 import recall_service_pb2_grpc as recall_grpc
from episodic.v1 import scheduler_service_pb2_grpc as scheduler_grpc
from episodic.v1 import summariser_service_pb2_grpc as summariser_grpc

DEFAULT_TIMEOUT = 10.0
SERVICES = ("ingest", "recall", "scheduler", "summariser")

# --------------------------------------------------------------------------- channels


def default_address(service: str) -> str:
    """Where ``service`` listens unless told otherwise: ``EPISODIC_<SERVICE>_ADDRESS``,
    else ``127.0.0.1:<EPISODIC_<SERVICE>_PORT or the default port>``."""
    return address_from_env(service)


#: Attempts of a call safe to repeat, the first included: the channel's retry policy on
#: UNAVAILABLE, and :func:`call`'s on a reset stream (which the channel never sees).
MAX_ATTEMPTS = 5


def service_config(service: str, methods: Sequence[str]) -> str:
    """gRPC retries (A6): only methods safe to repeat, only on UNAVAILABLE, with backoff."""
    return json.dumps(
        {
            "methodConfig": [
                {
                    "name": [{"service": f"episodic.v1.{service}", "method": m} for m in methods],
                    "retryPolicy": {
                        "maxAttempts": MAX_ATTEMPTS,
                        "initialBackoff": "0.1s",
                        "maxBackoff": "2s",
                        "backoffMultiplier": 2,
                        # ABORTED: the call lost to a concurrent change and did not
                        # take effect (only calls safe to repeat are listed here).
                        "retryableStatusCodes": ["UNAVAILABLE", "ABORTED"],
                    },
                }
            ]
        }
    )


#: The methods each service's channel repeats on UNAVAILABLE: every call the SDK makes
#: without ``retry=False`` (tests/sdk check it), and only those — AddMessages,
#: RecordEvent and CreateThread only when keyed (the SDK sends unkeyed ones on the
#: ``noretry`` channel),
#: SetDatasetPolicy because it names the values it sets (``update_mask``).
RETRIED = {
    "admin": (
        "AdminService",
        (
            "ListApiKeys",
            "ListAuditEvents",
            "ListDatasets",
            "GetDatasetPolicy",
            "SetDatasetPolicy",
            "ListEntities",
        ),
    ),
    "ingest": (
        "IngestService",
        (
            "GetThread",
            "ListMessages",
            "ListThreads",
            "AddMessages",
            "RecordEvent",
            "CreateThread",
            # The last outcome stands: a repeat records the same one again.
            "RecordOutcome",
        ),
    ),
    "recall": (
        "RecallService",
        (
            "Recall",
            "ListEpisodes",
            "SearchEpisodes",
            "GetEpisode",
            "EntityTimeline",
            "ListProcedures",
            "GetProcedure",
        ),
    ),
    "scheduler": ("SchedulerService", ()),
    "summariser": ("SummariserService", ("CheckProviders", "GetPipelineStatus")),
}


#: The process serving a service that shares another's address.
PROCESS_OF = {"admin": "ingest"}

STUBS: dict[str, Callable[[grpc.Channel], Any]] = {
    "admin": admin_grpc.AdminServiceStub,
    "ingest": ingest_grpc.IngestServiceStub,
    "recall": recall_grpc.RecallServiceStub,
    "scheduler": scheduler_grpc.SchedulerServiceStub,
    "summariser": summariser_grpc.SummariserServiceStub,
}
