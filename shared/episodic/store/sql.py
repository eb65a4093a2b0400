"""What every statement of the store shares: the clock and the claimant's identity.

The clock. Rows are stamped and compared on the database's clock (``now()``), never the
machine's: replicas on several hosts agree on it. Tests and ``RunSweep(as_of=…)`` may inject
a time (the bind parameter ``:now``; ``None`` means the database's clock). The injected time
only moves the horizon of *decisions* — what is due, stale or quiet — through :data:`NOW`.
It is never written into a row as if it were the database's time:

- stamps (``created_at``, ``updated_at``, ``claimed_at``) are always ``now()``;
- "due at once" is :data:`DUE_NOW`, never later than the database's now, so a sweep run at
  a far-future ``as_of`` cannot park work where live workers will not reach it;
- only deadlines computed *from* an injected time (an idle timer armed at ``:now + 30
  min`` in a test) carry it, and those are what the test asked for.
"""

from __future__ import annotations

import os
import secrets
import socket

__all__ = ["DUE_NOW", "NOW", "worker_id"]

#: "Now" for decisions (due? stale? quiet?): the injected ``:now``, else the database's clock.
#: It reads as ``coalesce(:now, now())``, written without COALESCE: Citus refuses a
#: non-immutable function inside CASE or COALESCE in a write ("non-IMMUTABLE functions are
#: not allowed in CASE or COALESCE statements"), and an array subscript picks the same arm.
NOW = (
    "(ARRAY[now(), CAST(:now AS timestamptz)])"
    "[1 + CAST(CAST(:now AS timestamptz) IS NOT NULL AS integer)]"
)
#: "Due at once": the earlier of the injected time and the database's clock.
DUE_NOW = f"LEAST({NOW}, now())"


def worker_id() -> str:
    """``host:pid:random`` — unique per process (and per call), readable in the
    ``claimed_by`` columns of timers and episodes."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
