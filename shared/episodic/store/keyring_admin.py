"""Master-key rotation: data keys re-wrapped under a new master key, no data rewritten.

A data key is stored only wrapped (``datasets.wrapped_key``, by ``master_key_id``).
Rotation unwraps each with the old master key and wraps it with the keyring's active one,
one dataset per transaction (a row lock: a concurrent unwrap reads either the old or the
new wrapping, both valid while the old key is still in the keyring). The sealed values
themselves never change: their data keys are the same.
"""

from __future__ import annotations

from sqlalchemy import Connection, Engine, text

from episodic.crypto import LocalKeyring
from episodic.store.distribution import across_datasets

__all__ = ["rewrap_all", "wrapped_by"]


def wrapped_by(conn: Connection) -> dict[str, int]:
    """How many data keys each master key wraps."""
    return {
        str(k): int(n)
        for k, n in conn.execute(
            text(
                across_datasets("key rotation counts the data keys of every dataset")
                + "SELECT master_key_id, count(*) FROM datasets WHERE key_id IS NOT NULL "
                "GROUP BY master_key_id ORDER BY master_key_id"
            )
        )
    }


def rewrap_all(engine: Engine, keyring: LocalKeyring) -> int:
    """Re-wraps every data key not wrapped by the keyring's active master key; returns
    how many."""
    active = keyring.active_key_id
    done = 0
    while True:
        with engine.begin() as conn:
            # The candidates unlocked, then each dataset's row locked on its own: Citus
            # takes row locks only in a statement that names one dataset (one shard).
            # Datasets go in name order, as before, so two rotations cannot deadlock.
            candidates = (
                conn.execute(
                    text(
                        across_datasets("key rotation finds the data keys of every dataset")
                        + "SELECT dataset FROM datasets "
                        "WHERE key_id IS NOT NULL AND master_key_id <> :active "
                        "ORDER BY dataset LIMIT 100"
                    ),
                    {"active": active},
                )
                .scalars()
                .all()
            )
            for dataset in candidates:
                row = conn.execute(
                    text(
                        "SELECT key_id, master_key_id, wrapped_key FROM datasets "
                        "WHERE dataset = :d AND key_id IS NOT NULL AND master_key_id <> :active "
                        "FOR UPDATE"
                    ),
                    {"d": dataset, "active": active},
                ).first()
                if row is None:  # re-wrapped or erased meanwhile
                    continue
                key_id, master_key_id, wrapped = row
                context = f"{dataset}|{key_id}"
                material = keyring.unwrap(master_key_id, bytes(wrapped), context)
                new_id, blob = keyring.wrap(material, context)
                conn.execute(
                    text(
                        "UPDATE datasets SET master_key_id = :m, wrapped_key = :w, "
                        "updated_at = now() WHERE dataset = :d"
                    ),
                    {"m": new_id, "w": blob, "d": dataset},
                )
                done += 1
        if len(candidates) < 100:
            return done
