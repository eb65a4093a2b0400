"""Backfill: load existing conversations into episodic through the normal write path.

``episodic import FILE`` (:mod:`episodic.cli.integrations`) reads JSON lines, maps them to
threads and messages, and writes them with the SDK exactly as an agent would:
``CreateThread``, ``AddMessages`` in batches, then ``EndThread``. Nothing is written to the
database directly, so validation, limits, sequences, the Scheduler's triggers and the
audit trail all apply.

Input formats (detected per line, so one file may mix them):

1. **simple** — one message per line, the messages of a thread in order::

       {"dataset": "user_42", "thread": "chat-2024-05-01", "label": "billing",
        "role": "user", "content": "…", "ts": "2024-05-01T09:30:00Z",
        "name": "Alice", "metadata": {"channel": "email"}}

   ``dataset`` (unless ``--dataset`` is given), ``thread``, ``role`` (user, assistant,
   system or tool) and ``content`` are required; ``ts`` (ISO 8601; naive means UTC) is the
   message's original time; ``name`` (the speaker) is stored as ``metadata["name"]``, which
   the summariser uses to name speakers; ``label`` may sit on any line of the thread
   (default: the source thread id).
2. **threaded** — one conversation per line, the format of LoCoMo's ``locomo10.jsonl``::

       {"conversation_id": "conv-26", "threads": [{"thread_id": "conv-26/session_1",
        "started_at": "…", "messages": [{"role", "content", "ts", "name"}, …]}, …]}

   The ``conversation_id`` is the dataset (unless ``--dataset`` overrides it), each
   thread's ``thread_id`` its label; other keys (``questions``) are ignored.
3. **openai** — one conversation per line in OpenAI's chat format, as agent frameworks
   log it (and fine-tuning files hold it)::

       {"id": "run-812", "dataset": "support_agent", "outcome": "success",
        "messages": [{"role": "user", "content": "…"},
                     {"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
                      "type": "function", "function": {"name": "…", "arguments": "{…}"}}]},
                     {"role": "tool", "tool_call_id": "c1", "content": "…"}, …]}

   ``id`` (or ``thread``) is the source thread id (default: a digest of the line);
   ``dataset`` as above; the optional ``outcome`` (success, failure or partial; or an
   object ``{"outcome", "score", "note"}``) is recorded after the thread is written, so
   procedures are learned from it. Tool calls keep their ids, names and arguments in the
   other formats too (a message's ``tool_calls``, ``tool_call_id`` and, on a tool message
   that answers a call, ``name`` as the tool's name).
4. **export** — the records of ``episodic export`` (:mod:`episodic.ops.export`):
   ``{"type": "thread", …}`` with ``thread_id, dataset, label, metadata`` and
   ``{"type": "message", …}`` with ``thread_id, sequence, role, content, metadata,
   created_at, idempotency_key`` (fields at the top level or under a ``"thread"`` /
   ``"message"`` key; other fields are ignored). ``episode`` records are skipped (episodes
   are made again by the pipeline, not copied), and so are the ``dataset`` and ``end``
   lines that frame an export and any type this reader does not know (counted in
   :attr:`ImportPlan.skipped`); an export without its ``end`` line did not complete, which
   :attr:`ImportPlan.warnings` says.

Identity and resumability. Every thread is found or created by its thread key in its
dataset, ``import:<source thread id>`` (:func:`thread_key`, ``CreateThreadRequest.
idempotency_key``): the same source thread is the same thread in every run, its id is the
server's random one, and the key is the dataset's own, so no writer of another dataset can
take it first or learn that it exists. (Thread ids are global: an id derived from the source
ids, as imports before this revision made with ``uuid5(NAMESPACE, "<dataset>\\n<source
thread id>")`` (:func:`thread_uuid`), could be guessed and created first elsewhere. Such a
thread, found in the thread's own dataset, is still used, so an import begun then resumes
into it.) ``--keep-thread-ids`` creates each thread with the file's own id instead.
Every message has a deterministic idempotency key, ``import:<source thread id>:<index>``
(the index of the message in its source thread; the export format keeps the exported key
when it has one). Re-running an import after a crash therefore never duplicates anything:
the thread key finds the thread, a stored prefix of the thread's messages is skipped
(checked by the idempotency key of its last stored message), and any batch that is sent
again is answered from the idempotency keys without storing a second copy. The input must
be the same file (or one that only appends): a key that comes back with other content is
refused by Ingest (ALREADY_EXISTS, ``IDEMPOTENCY_KEY_REUSED``), and so is a thread key
that comes back with another label or metadata.

Episodes. After the last message of each thread, the import calls ``EndThread``: the
explicit trigger queues one episode over the thread at once, instead of waiting for the
inactivity timer (30 minutes after the import) or the backstop. An episode's
``started_at``/``ended_at`` are the ``created_at`` of the first and last message of its
window, i.e. the original timestamps, so recall's ``since``/``until``/``as_of`` and its
recency see the conversation's own history, not the time of the import. (The thread's own
``created_at``/``last_activity_at`` are the import time: ``CreateThread`` takes no
timestamp. Threads are imported in the order of their first message, so ``recent_threads``
lists them in historical order.) Re-running skips ``EndThread`` for a thread whose
messages are all covered by episodes already.

The file is read whole before anything is written (threads may be interleaved and the
export may list its threads after their messages); the progress bar's total comes from
that pass.

The import is written in four modules, re-exported here (the import path of everything
above): :mod:`~episodic.ops.backfill.plan` (what a file holds: :class:`ImportPlan`, its
threads and messages, and the identity of what the import writes: :func:`thread_key`,
:func:`idempotency_key`, :func:`thread_uuid`), :mod:`~episodic.ops.backfill.reading` (the
formats above read into a plan: :func:`read_plan`, :class:`InputError`),
:mod:`~episodic.ops.backfill.writing` (the plan written through the SDK: :class:`Importer`,
:func:`batches`, :class:`ImportStats` and the errors that stop an import) and
:mod:`~episodic.ops.backfill.progress` (the terminal's :class:`ProgressBar`).
"""

from __future__ import annotations

# Every public name of the module this package was, re-exported; those outside __all__ as
# `name as name` (episodic.cli.importing reads the limits and the roles from here).
from episodic.ops.backfill.plan import MAX_KEY_CHARS as MAX_KEY_CHARS
from episodic.ops.backfill.plan import (
    NAMESPACE,
    THREAD_KEY_PREFIX,
    ImportMessage,
    ImportPlan,
    ImportThread,
    idempotency_key,
    thread_key,
    thread_uuid,
)
from episodic.ops.backfill.plan import ImportOutcome as ImportOutcome
from episodic.ops.backfill.progress import ProgressBar
from episodic.ops.backfill.reading import FORMATS, SKIP_REASONS, InputError, read_plan
from episodic.ops.backfill.reading import MAX_LABEL_CHARS as MAX_LABEL_CHARS
from episodic.ops.backfill.reading import ROLES as ROLES
from episodic.ops.backfill.writing import DEFAULT_BATCH_BYTES as DEFAULT_BATCH_BYTES
from episodic.ops.backfill.writing import DEFAULT_BATCH_SIZE as DEFAULT_BATCH_SIZE
from episodic.ops.backfill.writing import (
    Importer,
    ImportInterrupted,
    ImportStats,
    ThreadImportError,
    batches,
)
from episodic.ops.backfill.writing import Writer as Writer

__all__ = [
    "FORMATS",
    "NAMESPACE",
    "SKIP_REASONS",
    "THREAD_KEY_PREFIX",
    "ImportInterrupted",
    "ImportMessage",
    "ImportPlan",
    "ImportStats",
    "ImportThread",
    "Importer",
    "InputError",
    "ProgressBar",
    "ThreadImportError",
    "batches",
    "idempotency_key",
    "read_plan",
    "thread_key",
    "thread_uuid",
]
