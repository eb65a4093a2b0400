"""The MCP server (:func:`build_server`): the SDK's MCPServer with MCP's error kinds for a
tool call (:class:`_EpisodicMCPServer`), its name and instructions for the model, and the
nine tools of :mod:`episodic.mcp.write_tools` and :mod:`episodic.mcp.read_tools`."""

from collections.abc import Callable
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult, InputRequiredResult
from pydantic import ValidationError

from episodic.mcp.arguments import arguments_error, schema_problems
from episodic.mcp.memory import Memory
from episodic.mcp.read_tools import register_read_tools
from episodic.mcp.write_tools import register_write_tools
from episodic.sdk.client import EpisodicClient

SERVER_NAME = "episodic"
INSTRUCTIONS = (
    "Long-term episodic memory of past conversations. Call `recall` before answering "
    "anything that may depend on earlier conversations (preferences, decisions, facts the "
    "user shared, what happened last time). Save the conversation with `remember` (keep the "
    "returned thread_id and pass it on later calls) and call `end_thread` when a task or "
    "topic is finished, so it is summarised into an episode that `recall` can find. "
    "Before a task you will do with tools, call `recall_procedures` to see how it was done "
    "before; when you know how a conversation turned out, say so with `record_outcome`."
)


class _EpisodicMCPServer(MCPServer[Any]):
    """The SDK's server, with MCP's error kinds for a tool call (2025-11-25, SEP-1303): an
    unknown tool is a protocol error (-32602) naming the tools there are; arguments that do
    not fit the tool's schema are a tool error that names them, for the model to correct
    (the SDK sends pydantic's text, which names an internal model and links its docs)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        tools = {tool.name: tool for tool in await self.list_tools()}
        if name not in tools:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"Unknown tool: {name!r}; the tools are {', '.join(tools)}",
            )
        # The tool's input schema, strictly: the SDK's own parsing is pydantic's lax mode,
        # which takes "5" for 5 and "true" for true, so a model's malformed call would
        # run as if it were right instead of being told what to fix.
        # In a worker thread: the check is pure Python, and a large allowed call (1,000
        # messages of 128 tool calls) took 20 s, which held every other request of the
        # server (every session, over HTTP) behind it.
        problems = await anyio.to_thread.run_sync(
            schema_problems, tools[name].input_schema, arguments or {}, name
        )
        if problems:
            raise ToolError(
                f"invalid arguments for {name}: {'; '.join(problems)} (the tool's input "
                "schema says what each argument takes)"
            )
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):  # the arguments, not the call
                raise ToolError(arguments_error(name, exc.__cause__)) from exc.__cause__
            raise


def build_server(
    client: EpisodicClient | Callable[[], EpisodicClient],
    default_dataset: str | None = None,
) -> MCPServer[Any]:
    """The MCP server with its nine tools over ``client`` (or a factory called once, on
    first use). ``default_dataset`` answers for tool calls without a ``dataset``."""
    memory = Memory(client, default_dataset)
    server: MCPServer[Any] = _EpisodicMCPServer(
        SERVER_NAME,
        title="Episodic memory",
        instructions=INSTRUCTIONS,
        version=_version(),
    )
    # In this order: the help of `episodic mcp` lists the tools so (tests/mcp checks it).
    register_write_tools(server, memory)
    register_read_tools(server, memory)
    return server


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("episodic")
    except Exception:  # not installed as a distribution (a source tree)
        return ""
