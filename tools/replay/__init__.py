"""Replay an export through the current pipeline and report what changed —
``episodic replay`` (seed 003, "Replay for Eval": when you change the agent, re-run old
episodes and check the new output is still good).

What it does, on a scratch database (an embedded PostgreSQL in a temporary directory, or a
database created for the run on ``admin_url`` and dropped afterwards; never the suite's
own database):

1. **Stage.** Every thread of the export is written, with all its messages, into the
   dataset ``replay-old``, and — when recall queries are asked — its old episodes too,
   window by window, completed with their exported summary, key learnings, entities,
   event type and actor, embedded with the configured embedder and indexed for recall
   exactly like the summariser indexes (:mod:`episodic.store.recall_index`); once the
   replay knows the export's language (step 3), they are moved to its model like the
   Summariser moves a dataset (below).
2. **Simulate.** The threads are written again, into ``replay-new``, in time order across
   the whole export, through the same domain functions the services run: Ingest's
   ``create_thread``/``add_messages``/``end_thread`` and the Scheduler's
   ``record_thread_started``/``record_activity``/``request_episode``, with the Scheduler's
   clock injected. Before each event every timer due by then fires
   (``claim_due_timers``/``fire_timer`` at the event's time), so the inactivity timer
   (``EPISODIC_AUTO_EPISODE_INTERVAL``), the new-thread pull-forward and explicit ends
   (``EndThread``, reconstructed from the old explicit episodes and the thread's last end)
   happen when they would have. After the last event the remaining timers fire, as if the
   pipeline had been left running. The backstop never fires in a replay: it only covers
   threads whose timer notices were lost, and here none is.
3. **Summarise.** The summariser's :class:`Pipeline` (the configured LLM and embedder,
   ``EPISODIC_LLM_*`` / ``EPISODIC_EMBEDDING_*``) works through the new episodes in the
   order they were opened, retries included; semantic extraction is skipped.
4. **Compare**, per thread: the windows (old and new ``start..end`` lists), the current
   summaries (cosine similarity of the two summary texts' vectors, in the replayed
   dataset's model), and the entities of all summarised episodes (added, removed); per
   query: the top-k threads Recall ranks over the old and the new episodes (same ranking,
   same ``as_of``, the query embedded by each dataset's model) and their overlap.

Each dataset's model. As the Summariser does (services/summariser/spaces.py, issue 40), a
dataset whose language is not English is embedded by the multilingual model when one is on
(``EPISODIC_EMBEDDING_MULTILINGUAL``): the replay builds the same embedders
(:func:`~episodic.providers.factory.make_dataset_embedders`), the pipeline detects the
language and moves the new dataset to its model, and the old dataset, given that language,
is moved by the same :func:`follow_language` (uncapped, like ``episodic reindex --reembed
--dataset``), so both are compared in one space, the one the language calls for.

The clock. ``received`` (default) replays each message at the time the old suite received
it — the clock its timers ran on — so an unchanged pipeline reproduces the old windows.
``created`` replays at the messages' own timestamps (what the writer said they were,
e.g. the original times of a backfill): how the pipeline would have cut the conversation
had it been live.

Every write goes through the store's domain functions (never SQL of its own), so a change
of the schema or of how text is stored (sealed per dataset) is followed here for free; the
scratch dataset keys are random and never leave the process.

The replay is written in five modules, re-exported here (the import path of everything
above): :mod:`~episodic.ops.replay.reading` (the export, one thread at a time:
:class:`ExportReader`), :mod:`~episodic.ops.replay.scratch` (:func:`scratch_database`),
:mod:`~episodic.ops.replay.run` (steps 1-4 on one scratch database, running the services'
code in process), :mod:`~episodic.ops.replay.report` (what
changed: :class:`ThreadDiff`, :class:`QueryDiff`, :class:`ReplayReport` and its text) and
:mod:`~episodic.ops.replay.entry` (:func:`replay`, from the export's lines to the report). A
test that replaces a name the run reads (``make_dataset_embedders``) replaces it in
``run``.
"""

from __future__ import annotations

# Every public name of the module this package was, re-exported; those outside __all__ as
# `name as name` (the tests read the scratch datasets' names from here).
from .entry import CLOCKS, replay
from .reading import Bundle as Bundle
from .reading import ExportReader, ReplayError
from .report import SIMILARITY_MEASURE as SIMILARITY_MEASURE
from .report import QueryDiff, ReplayReport, ThreadDiff
from .report import Window as Window
from .run import NEW_DATASET as NEW_DATASET
from .run import OLD_DATASET as OLD_DATASET
from .scratch import scratch_database

__all__ = [
    "CLOCKS",
    "ExportReader",
    "QueryDiff",
    "ReplayError",
    "ReplayReport",
    "ThreadDiff",
    "replay",
    "scratch_database",
]
