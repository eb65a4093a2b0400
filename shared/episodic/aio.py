"""The asyncio client's first import path, kept for compatibility: the client lives in
:mod:`episodic.sdk.aio`, beside the blocking client (:mod:`episodic.sdk.client`) and the
core they share, so the SDK is one folder of the package.

Code written against this module (``from episodic.aio import AsyncEpisodicClient``) keeps
working: :class:`AsyncEpisodicClient` and the names it imported from :mod:`episodic.sdk`
are re-exported unchanged (the same objects). New code imports :mod:`episodic.sdk.aio`.
"""

from episodic.sdk.aio import AsyncEpisodicClient
from episodic.sdk.aio import ClientCore as ClientCore
from episodic.sdk.aio import Emit as Emit
from episodic.sdk.aio import EpisodicRpcError as EpisodicRpcError
from episodic.sdk.aio import Flow as Flow
from episodic.sdk.aio import Sleep as Sleep
from episodic.sdk.aio import Step as Step
from episodic.sdk.aio import Stream as Stream
from episodic.sdk.aio import present_as_method as present_as_method
from episodic.sdk.aio import translate_error as translate_error

__all__ = ["AsyncEpisodicClient"]
