"""The MCP server's first import path, kept for compatibility: the server lives in the
package :mod:`episodic.mcp` (one module per part: the tools' schemas, their answers, the
check of their arguments, the tools themselves, the server and its transports).

``episodic mcp`` (:mod:`episodic.cli.integrations`) and code written against this module
import :data:`DATASET_ENV`, :func:`build_server` and :func:`serve` from here; they, and the
other public names this module had, are re-exported unchanged. New code imports
:mod:`episodic.mcp` (or its modules) directly.
"""

from episodic.mcp import DATASET_ENV, build_server, serve
from episodic.mcp.arguments import parse_time as parse_time
from episodic.mcp.read_tools import MAX_LOAD as MAX_LOAD
from episodic.mcp.read_tools import MAX_RECALL as MAX_RECALL
from episodic.mcp.schemas import EndThreadOutput as EndThreadOutput
from episodic.mcp.schemas import EpisodeOut as EpisodeOut
from episodic.mcp.schemas import FunctionIn as FunctionIn
from episodic.mcp.schemas import LoadThreadOutput as LoadThreadOutput
from episodic.mcp.schemas import MessageIn as MessageIn
from episodic.mcp.schemas import MessageOut as MessageOut
from episodic.mcp.schemas import ProcedureOut as ProcedureOut
from episodic.mcp.schemas import ProcedureSourceOut as ProcedureSourceOut
from episodic.mcp.schemas import ProceduresOutput as ProceduresOutput
from episodic.mcp.schemas import ProcedureStepOut as ProcedureStepOut
from episodic.mcp.schemas import RecallOutput as RecallOutput
from episodic.mcp.schemas import RecordEventOutput as RecordEventOutput
from episodic.mcp.schemas import RecordOutcomeOutput as RecordOutcomeOutput
from episodic.mcp.schemas import RememberOutput as RememberOutput
from episodic.mcp.schemas import SearchOutput as SearchOutput
from episodic.mcp.schemas import ThreadOut as ThreadOut
from episodic.mcp.schemas import ThreadsOutput as ThreadsOutput
from episodic.mcp.schemas import ToolCallIn as ToolCallIn
from episodic.mcp.schemas import ToolCallOut as ToolCallOut
from episodic.mcp.server import INSTRUCTIONS as INSTRUCTIONS
from episodic.mcp.server import SERVER_NAME as SERVER_NAME

__all__ = ["DATASET_ENV", "build_server", "serve"]
