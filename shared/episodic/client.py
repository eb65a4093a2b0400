"""The blocking client's first import path, kept for compatibility: the client lives in
:mod:`episodic.sdk.client`, beside the asyncio client (:mod:`episodic.sdk.aio`) and the core
they share, so the SDK is one folder of the package.

Code written against this module (``from episodic.client import EpisodicClient``, its
results and errors) keeps working: every public name it had is re-exported unchanged (the
same objects), and so are ``DEFAULT_TIMEOUT``, ``MessageLike`` and the driver's building
blocks it imported from :mod:`episodic.sdk`. New code imports :mod:`episodic.sdk.client`.
"""

from episodic.sdk.client import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
from episodic.sdk.client import (
    EPISODE_STATUSES,
    STREAM_RESET,
    UNCHANGED,
    AbortedError,
    AddMessagesResult,
    AlreadyExistsError,
    DatasetPolicy,
    DatasetSummary,
    DeadlineExceededError,
    EndThreadResult,
    Entity,
    EntitySplit,
    EntityTimelinePage,
    Episode,
    EpisodeFailure,
    EpisodicClient,
    EpisodicRpcError,
    ErasureReceipt,
    FailedPreconditionError,
    InvalidArgumentError,
    LifecycleStatus,
    Message,
    MessagePage,
    MessageReceipt,
    NewMessage,
    NotFoundError,
    OutcomeResult,
    Page,
    PermissionDeniedError,
    PipelineStatus,
    Procedure,
    ProcedureStep,
    ProviderHealth,
    QueryUnderstanding,
    RecallResult,
    RecordEventResult,
    ResourceExhaustedError,
    ScoredEpisode,
    ScoredProcedure,
    SessionOrdinal,
    SweepResult,
    Thread,
    ThreadCompaction,
    TimeExpression,
    ToolCall,
    UnauthenticatedError,
    UnavailableError,
    default_address,
)
from episodic.sdk.client import ClientCore as ClientCore
from episodic.sdk.client import Emit as Emit
from episodic.sdk.client import Flow as Flow
from episodic.sdk.client import MessageLike as MessageLike
from episodic.sdk.client import Sleep as Sleep
from episodic.sdk.client import Step as Step
from episodic.sdk.client import Stream as Stream
from episodic.sdk.client import present_as_method as present_as_method
from episodic.sdk.client import translate_error as translate_error

__all__ = [
    "EPISODE_STATUSES",
    "STREAM_RESET",
    "UNCHANGED",
    "AbortedError",
    "AddMessagesResult",
    "AlreadyExistsError",
    "DatasetPolicy",
    "DatasetSummary",
    "DeadlineExceededError",
    "EndThreadResult",
    "Entity",
    "EntitySplit",
    "EntityTimelinePage",
    "Episode",
    "EpisodeFailure",
    "EpisodicClient",
    "EpisodicRpcError",
    "ErasureReceipt",
    "FailedPreconditionError",
    "InvalidArgumentError",
    "LifecycleStatus",
    "Message",
    "MessagePage",
    "MessageReceipt",
    "NewMessage",
    "NotFoundError",
    "OutcomeResult",
    "Page",
    "PermissionDeniedError",
    "PipelineStatus",
    "Procedure",
    "ProcedureStep",
    "ProviderHealth",
    "QueryUnderstanding",
    "RecallResult",
    "RecordEventResult",
    "ResourceExhaustedError",
    "ScoredEpisode",
    "ScoredProcedure",
    "SessionOrdinal",
    "SweepResult",
    "Thread",
    "ThreadCompaction",
    "TimeExpression",
    "ToolCall",
    "UnauthenticatedError",
    "UnavailableError",
    "default_address",
]
