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

__all__ = ["DUE_NOW", "NOW", "or_now", "pick_time", "worker_id"]


def or_now(expression: str) -> str:
    """``coalesce(expression, now())`` as SQL that Citus accepts in a write: it refuses a
    clock inside CASE or COALESCE ("non-IMMUTABLE functions are not allowed in CASE or
    COALESCE statements"). LEAST and GREATEST skip NULLs, so this is ``now()`` when the
    expression is NULL and the expression otherwise. (An array pick such as
    ``(ARRAY[now(), x])[…]`` in an UPDATE's SET crashed the Citus 14.0.1 coordinator's
    backend here: do not use one.)"""
    return f"LEAST({expression}, GREATEST({expression}, now()))"


def pick_time(condition: str, then: str, otherwise: str) -> str:
    """``CASE WHEN condition THEN then ELSE otherwise END`` for timestamps, without a CASE
    (see :func:`or_now`): the arm not taken is pushed to +infinity by GREATEST with an
    infinity chosen by the condition (an array of constants), and LEAST keeps the other.
    ``condition`` must not be NULL."""

    def infinity_if(c: str) -> str:
        return (
            "(ARRAY[CAST('-infinity' AS timestamptz), CAST('infinity' AS timestamptz)])"
            f"[1 + CAST(({c}) AS integer)]"
        )

    return (
        f"LEAST(GREATEST({then}, {infinity_if(f'NOT ({condition})')}), "
        f"GREATEST({otherwise}, {infinity_if(condition)}))"
    )


#: "Now" for decisions (due? stale? quiet?): the injected ``:now``, else the database's clock.
NOW = or_now("CAST(:now AS timestamptz)")
#: "Due at once": the earlier of the injected time and the database's clock.
DUE_NOW = f"LEAST({NOW}, now())"


def worker_id() -> str:
    """``host:pid:random`` — unique per process (and per call), readable in the
    ``claimed_by`` columns of timers and episodes."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
