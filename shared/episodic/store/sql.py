"""What every statement of the store shares: the clock and the claimant's identity.

The clock. Rows are stamped and compared on the database's clock (``now()``), never the
machine's: replicas on several hosts agree on it. Tests and ``RunSweep(as_of=…)`` inject a
time instead; :data:`NOW` is the snippet every statement uses for "now", reading the bind
parameter ``:now`` (``None`` means the database's ``now()``).
"""

from __future__ import annotations

import os
import secrets
import socket

__all__ = ["NOW", "worker_id"]

#: "Now" in SQL: the injected ``:now`` when a caller gave one, else the database's clock.
NOW = "coalesce(CAST(:now AS timestamptz), now())"


def worker_id() -> str:
    """``host:pid:random`` — unique per process (and per call), readable in the
    ``claimed_by`` columns of timers and episodes."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
