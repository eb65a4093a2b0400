"""An MCP server that gives a model episodic memory: ``episodic mcp``.

Nine tools, each a thin layer over the SDK (:class:`episodic.sdk.client.EpisodicClient`), so
addresses, API key (``EPISODIC_API_KEY``) and TLS (``EPISODIC_TLS_CA_FILE``, client
certificates) come from the same environment variables and options as every other
command:

- ``remember`` — append messages to a thread (starting one when no ``thread_id`` is given),
  tool calls and their results included (OpenAI's chat format);
- ``end_thread`` — queue the thread's episode now (the explicit trigger);
- ``record_outcome`` — say how a thread (or one episode's stretch) turned out: success,
  failure or partial; procedures are learned from the successes;
- ``recall_procedures`` — "how did we do this before?": the procedures that fit a task
  (goal, numbered steps with where each argument came from, support), before acting;
- ``record_event`` — record something that happened (a decision, a tool call, feedback, a
  milestone) as an event, recalled beside the episodes;
- ``recall`` — episodes rendered for a prompt, with relative and absolute times
  (:func:`episodic.render.render_episodes`), by meaning and recency, within a time range,
  or as of an earlier moment;
- ``search_episodes`` — episodes by text match alone;
- ``list_threads`` — the most recently active threads;
- ``load_thread`` — a thread's messages verbatim, with their tool calls and results.

Every tool answers with concise text for the model and, for applications, structured
content that matches the tool's published output schema. Errors of the services become
tool errors (``isError``) whose text says what to change.

The dataset (whose memory) is the tool call's ``dataset`` argument, else the server's
default (``--dataset`` or ``EPISODIC_MCP_DATASET``), and a tool touches no other: a tool
given a thread id reads the thread's dataset first (GetThread) and answers for a thread of
another dataset exactly as for one that does not exist, even when the API key covers both
(a tenant's ``acme/*`` key behind a server for ``acme/u1``). Transports: stdio (a host
starts the server per session) and streamable HTTP (``--transport http``; it binds
127.0.0.1 by default, with DNS-rebinding protection, and has no authentication of its own:
every caller acts with the server's episodic credentials).

Errors follow MCP (2025-11-25, SEP-1303): an unknown tool is a JSON-RPC -32602 error; an
argument the tool's schema refuses, like a failure of the call itself, is a tool error
naming the argument, which the model can correct. A line on stdio, or a POST's body over
HTTP (status 400), that is not JSON gets -32700 and one that is no valid JSON-RPC message
-32600 (with its id when it has a valid one), with words that say what is wrong — where
the SDK's stdio transport said nothing and its HTTP transport pydantic's text.

Built on the official MCP Python SDK (``mcp`` 2.x, whose high-level server is
``mcp.server.mcpserver.MCPServer`` — FastMCP's name in mcp 1.x).

Its modules, from the bottom: :mod:`~episodic.mcp.schemas` (the tools' arguments and the
structured content of their answers, as pydantic models), :mod:`~episodic.mcp.answers`
(the SDK's results as those models and as text for the model),
:mod:`~episodic.mcp.arguments` (time arguments, and the strict check of a call's arguments
against the tool's schema), :mod:`~episodic.mcp.memory` (the client, the services' errors
as tool errors, and the dataset a call may touch), :mod:`~episodic.mcp.write_tools` and
:mod:`~episodic.mcp.read_tools` (the nine tools), :mod:`~episodic.mcp.server`
(:func:`build_server`) and :mod:`~episodic.mcp.transports` (:func:`serve`: stdio with its
input checked, streamable HTTP). This package re-exports :data:`DATASET_ENV`,
:func:`build_server` and :func:`serve`, as :mod:`episodic.mcp_server` (the first path of
this server, which ``episodic mcp`` imports) still does.
"""

from episodic.mcp.memory import DATASET_ENV
from episodic.mcp.server import build_server
from episodic.mcp.transports import serve

__all__ = ["DATASET_ENV", "build_server", "serve"]
