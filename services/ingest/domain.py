"""Threads and messages: the write path's rules, free of gRPC.

Every function takes an open SQLAlchemy connection inside a transaction; committing is the
caller's job, so an accepted message is durable exactly when the caller's commit returns.
The one exception is :func:`write_messages`, AddMessages' entry point, which takes the
engine: it chooses between one autocommitted statement (a thread it knows) and a
transaction (everything else). On a Citus store the known thread's write is two statements
in a transaction instead (:class:`TwoSteps`).

This module is the entry point the servicer, replay and the tests import; the rules live
in its siblings, one seam each: :mod:`.model` (:class:`NewMessage`, :class:`Receipt`, the
results), :mod:`.checks` (what a request is refused for before anything is written),
:mod:`.threads` (CreateThread, GetThread, EndThread, ListThreads, ListMessages),
:mod:`.writes` (AddMessages: :func:`write_messages`, :func:`add_messages`,
:class:`ThreadRoutes`) and :mod:`.statements` (AddMessages' SQL, :class:`TwoSteps`). A test
that replaces a name replaces it in the module that reads it (``writes.append_statement``,
``writes.fetch_one_autocommitted``), not here.
"""

from .checks import MAX_IDEMPOTENCY_KEY_CHARS as MAX_IDEMPOTENCY_KEY_CHARS
from .checks import MAX_LABEL_CHARS as MAX_LABEL_CHARS
from .checks import RANDOM_UUID_VERSIONS as RANDOM_UUID_VERSIONS
from .checks import ROLES as ROLES
from .checks import check_chosen_thread_id as check_chosen_thread_id
from .checks import check_label as check_label
from .checks import check_metadata as check_metadata
from .checks import check_new_messages as check_new_messages
from .checks import check_thread_key as check_thread_key
from .model import AddResult as AddResult
from .model import MessagesPage as MessagesPage
from .model import NewMessage as NewMessage
from .model import Receipt as Receipt
from .statements import STORED_KEYS as STORED_KEYS
from .statements import TwoSteps as TwoSteps
from .statements import append_statement as append_statement
from .statements import sealed_metadata as sealed_metadata
from .threads import MAX_PAGE_BYTES as MAX_PAGE_BYTES
from .threads import THREAD_ID_LOCK_SPACE as THREAD_ID_LOCK_SPACE
from .threads import create_thread as create_thread
from .threads import end_thread as end_thread
from .threads import find_or_create_thread as find_or_create_thread
from .threads import get_thread as get_thread
from .threads import list_messages as list_messages
from .threads import list_threads as list_threads
from .writes import ThreadRoutes as ThreadRoutes
from .writes import add_messages as add_messages
from .writes import write_messages as write_messages
