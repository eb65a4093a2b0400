"""The episode state machine: every state change of an episode, one statement each.

Two independent status columns (seed 000, "Status lifecycle")::

    status:          pending ─► processing ─► completed ─► archived (superseded / deleted)
                        ▲            │
                        └── retry ◄──┴──► failed (retries used up; admin retry → pending)

    semantic_status: pending ─► processing ─► completed | skipped | failed
                     (claimable once summarisation completed)

The transitions, in the order an episode meets them:

=========================  =====================================================  ========
transition                 statement                                              used by
=========================  =====================================================  ========
:func:`open_episode`       INSERT pending over the thread's uncaptured messages   Scheduler
:func:`claim_pending`      pending (due) → processing, CTE + SKIP LOCKED          Summariser
:func:`complete`           processing (mine) → completed; others → archived       Summariser
:func:`record_failure`     processing (mine) → pending (backoff) or failed        Summariser
:func:`renew_claims`       processing (mine): claimed_at = now(), still working   Summariser
:func:`release_claims`     processing (mine) → pending, no retry counted          Summariser
:func:`reclaim_orphaned`   processing (stale) → pending or failed                 Scheduler
:func:`retry_episode`      failed → pending, retries reset (admin)                Scheduler
:func:`delete_episode`     any → archived (soft delete, admin)                    Scheduler
:func:`claim_semantic`     semantic pending → processing                          Summariser
:func:`finish_semantic`    semantic processing (mine) → completed/skipped/failed  Summariser
=========================  =====================================================  ========

Every function takes an open SQLAlchemy connection inside a transaction (READ COMMITTED,
the PostgreSQL default); committing is the caller's job. Every transition is one
state-guarded ``UPDATE … WHERE <expected state> … RETURNING`` on the database clock, and the
caller learns from the returned row (or its absence) whether it won: a worker whose claim
was reclaimed, released or deleted meanwhile writes nothing. ``now`` is the injected clock
(see :mod:`episodic.store.sql`).

Windows
-------
An episode covers the messages ``start_sequence .. end_sequence`` of its thread. Opening one
(:func:`open_episode`, whatever the trigger) locks the thread row ``FOR UPDATE`` — the lock
Ingest's ``AddMessages`` takes to bump ``threads.last_sequence`` — so under that lock
``captured_sequence`` (end of the last window opened) and ``last_sequence`` are exact: the
new window is ``captured_sequence + 1 .. last_sequence`` and ``captured_sequence`` moves to
its end in the same transaction. Windows of a thread are therefore contiguous from 1 and
never overlap, whatever interleaving of triggers, writers and replicas; the exclusion
constraint ``episodes_windows_disjoint`` backs this up in the schema.

A window holds at most :data:`MAX_WINDOW_MESSAGES` messages and :data:`MAX_WINDOW_BYTES`
bytes of stored content: a longer stretch is opened as several consecutive windows in the
same transaction, under the same lock (:func:`open_episodes`).

Windows are permanent. An episode that failed for good (``failed``), or was soft-deleted
(``archived``), KEEPS its window: ``captured_sequence`` is never rolled back, and the next
episode starts after it. Nothing is lost by that: summarisation reads the thread before the
window (its newest 400,000 characters), so the next episode's rolling summary still covers
the failed window's messages; only that
window's key learnings and semantic extraction wait until an operator retries it
(:func:`retry_episode` re-processes exactly the same window). Re-capturing the messages in
a later window instead would make two episodes extract the same messages, which is what
windows exist to prevent.

One current episode per thread
------------------------------
:func:`complete` serialises on the thread row, archives the thread's other completed
episode and completes this one in one transaction; if a *newer* window of the thread
completed first (an out-of-order finish), this one goes straight to ``archived``: a
thread's one current episode is always its latest window. A partial unique index backs it.

Retries
-------
:func:`record_failure` puts a processing episode back to ``pending`` with an exponential
backoff (``backoff * 2^retry_count``, capped) until ``retry_count`` would exceed
``max_retries``; then it is ``failed`` with the error kept. :func:`reclaim_orphaned`
treats a processing claim older than the reclaim timeout as a failed attempt of a lost
worker (same bound). :func:`retry_episode` (admin) is the only way out of ``failed``.

The machine is written in five modules, re-exported here (the import path of everything
above): :mod:`~episodic.store.episode_states` (the statuses, channels and visible columns
every transition shares), :mod:`~episodic.store.episode_windows` (opening episodes: the
windows and their caps), :mod:`~episodic.store.episode_claims` (claiming, renewing and
releasing work), :mod:`~episodic.store.episode_completion` (completing, failing, the
extraction's end, reclaiming a lost worker's claims) and :mod:`~episodic.store.episode_admin`
(an operator's read, retry and delete). A test that changes a window's cap
(``MAX_WINDOW_MESSAGES``, ``MAX_WINDOW_BYTES``) sets it on ``episode_windows``, which reads it.
"""

from __future__ import annotations

from episodic.store.episode_admin import (
    delete_episode,
    get_episode,
    retry_episode,
)
from episodic.store.episode_claims import (
    any_due,
    claim_pending,
    claim_semantic,
    hand_back,
    in_turns,
    release_claims,
    renew_claims,
)
from episodic.store.episode_completion import (
    ReclaimResult,
    complete,
    finish_semantic,
    hold_semantic_claim,
    reclaim_orphaned,
    record_failure,
)
from episodic.store.episode_states import (
    CHANNELS,
    EPISODE_COLUMNS,
    EPISODES_CHANNEL,
    MAX_ERROR_CHARS,
    RECLAIM_ERROR,
    SEMANTIC_CHANNEL,
    SEMANTIC_STATUSES,
    STATUSES,
    TRIGGERS,
    VISIBLE_COLUMNS,
    episode_columns,
    error_text,
    has_more_episodes_than,
    notify_episodes,
)
from episodic.store.episode_windows import (
    MAX_WINDOW_BYTES,
    MAX_WINDOW_MESSAGES,
    EpisodeToOpen,
    open_episode,
    open_episodes,
    open_episodes_unless_locked,
)

__all__ = [
    "CHANNELS",
    "EPISODES_CHANNEL",
    "EPISODE_COLUMNS",
    "MAX_ERROR_CHARS",
    "MAX_WINDOW_BYTES",
    "MAX_WINDOW_MESSAGES",
    "RECLAIM_ERROR",
    "SEMANTIC_CHANNEL",
    "SEMANTIC_STATUSES",
    "STATUSES",
    "TRIGGERS",
    "VISIBLE_COLUMNS",
    "EpisodeToOpen",
    "ReclaimResult",
    "any_due",
    "claim_pending",
    "claim_semantic",
    "complete",
    "delete_episode",
    "episode_columns",
    "error_text",
    "finish_semantic",
    "get_episode",
    "hand_back",
    "has_more_episodes_than",
    "hold_semantic_claim",
    "in_turns",
    "notify_episodes",
    "open_episode",
    "open_episodes",
    "open_episodes_unless_locked",
    "reclaim_orphaned",
    "record_failure",
    "release_claims",
    "renew_claims",
    "retry_episode",
]
