"""The episodic memory as the tools reach it (:class:`Memory`): the SDK's client, made on
first use; calls whose errors of the services become tool errors that say what to change
(:func:`_tool_error`); the dataset a call is for; and a thread only when it is one of that
dataset, so that a tool touches no other (:func:`_thread_not_found`)."""

from collections.abc import Callable
from typing import Any

import grpc
from mcp.server.mcpserver.exceptions import ToolError

from episodic.sdk.client import EpisodicClient, EpisodicRpcError, NotFoundError, Thread

#: The environment variable naming the default dataset.
DATASET_ENV = "EPISODIC_MCP_DATASET"


def _thread_not_found(thread_id: str) -> NotFoundError:
    """The services' NOT_FOUND for a thread that does not exist (or the caller may not see),
    word for word (episodic.store.owners.thread_not_found): the answer for a thread of
    another dataset than the call's, which must not tell that it exists."""
    return NotFoundError(
        grpc.StatusCode.NOT_FOUND,
        f"thread {thread_id} does not exist",
        metadata={"thread_id": thread_id},
        method="GetThread",
    )


def _tool_error(err: EpisodicRpcError, client: EpisodicClient) -> ToolError:
    code = err.code.name
    where = f" (field {err.field})" if err.field else ""
    text = f"episodic refused the call: {code}{where}: {err.message}"
    if code == "UNAVAILABLE":
        addresses = ", ".join(f"{k} {v}" for k, v in sorted(client.addresses.items()))
        text = (
            f"episodic memory is unreachable ({err.message}); is `episodic up` running? "
            f"addresses: {addresses}"
        )
    elif code == "UNAUTHENTICATED":
        text += " — the MCP server needs EPISODIC_API_KEY in its environment"
    elif code == "RESOURCE_EXHAUSTED" and "larger than max" in err.message:
        text += " — the call is too large for one request: send its messages over several calls"
    elif code == "PERMISSION_DENIED":
        text += " — the server's API key does not allow this dataset or call"
    elif isinstance(err, NotFoundError):
        text = f"not found: {err.message} (list_threads shows the thread ids that exist)"
    return ToolError(text)


class Memory:
    """What the tools of one server share: ``client`` (or a factory called once, on first
    use) and ``default_dataset``, which answers for tool calls without a ``dataset``."""

    def __init__(
        self,
        client: EpisodicClient | Callable[[], EpisodicClient],
        default_dataset: str | None = None,
    ) -> None:
        self._client = client
        self._made: EpisodicClient | None = None
        self.default_dataset = default_dataset

    def client(self) -> EpisodicClient:
        if self._made is None:
            self._made = self._client() if callable(self._client) else self._client
        return self._made

    def call(self, fn: Callable[[EpisodicClient], Any]) -> Any:
        c = self.client()
        try:
            return fn(c)
        except EpisodicRpcError as err:
            raise _tool_error(err, c) from None

    def dataset_of(self, value: str | None) -> str:
        chosen = (value or "").strip() or self.default_dataset
        if not chosen:
            raise ToolError(
                "no dataset: pass `dataset` (whose memory, e.g. 'user_42') — this server has "
                f"no default (start it with --dataset or {DATASET_ENV})"
            )
        return chosen

    def thread_of(self, c: EpisodicClient, thread_id: str, dataset: str) -> Thread:
        """The thread, if it is one of ``dataset``. The services check only that the key
        covers the thread's dataset, and a key may cover several (``acme/*``), so the call
        that names a thread by id learns its dataset first (GetThread, the one extra call
        at most a tool makes for it: load_thread and remember need the thread anyway) and
        answers for another dataset's thread as for a thread that does not exist."""
        thread = c.get_thread(thread_id)
        if thread.dataset != dataset:
            raise _thread_not_found(thread.thread_id)
        return thread

    @property
    def dataset_help(self) -> str:
        """The description of every tool's ``dataset`` argument."""
        return (
            "Whose memory to use, e.g. 'user_42' (letters, digits, _ . : @ -, '/' between parts). "
            + (
                f"Default: '{self.default_dataset}'; usually leave it out."
                if self.default_dataset
                else "Required: this server has no default dataset."
            )
        )
