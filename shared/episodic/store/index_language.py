"""The language of a dataset's lexical index: its PostgreSQL text-search configuration and
the lock that keeps a language switch and the writers of stemmed text apart.

Split out of :mod:`episodic.store.recall_index` (issue 42): the configuration is read by
everything that stems (the episode's document and its chunks, events, the query's tokens,
the ranking statement) and changes for its own reasons (a dataset's language detected or
set, :mod:`episodic.store.languages`); :mod:`episodic.store.recall_index` re-exports it.
"""

from __future__ import annotations

from sqlalchemy import Connection, text

__all__ = [
    "DATASET_CONFIG",
    "LANGUAGE_LOCK_SPACE",
    "STEM_CONFIG",
    "TEXT_SEARCH_CONFIG",
    "LanguageSwitching",
    "dataset_config",
    "hold_language",
]

#: PostgreSQL text search configuration of the lexical index and of queries (they must
#: agree) for a dataset that chose none: 'english' stems and drops stop words; other
#: languages still match word for word. A dataset's own is ``datasets.text_search_config``
#: (migration 0007, :mod:`episodic.store.languages`), read in the statement that tokenises.
TEXT_SEARCH_CONFIG = "english"
#: The dataset's configuration (``:dataset``) as a regconfig, inside a statement.
DATASET_CONFIG = (
    "CAST(coalesce((SELECT text_search_config FROM datasets WHERE dataset = :dataset), "
    f"'{TEXT_SEARCH_CONFIG}') AS regconfig)"
)
#: What the index's writers stem in: ``:config`` when the statement is given one (a
#: language switch re-stems in the configuration it has not stored yet), else the
#: dataset's (:data:`DATASET_CONFIG`).
STEM_CONFIG = (
    "CAST(coalesce(CAST(:config AS text), "
    "(SELECT text_search_config FROM datasets WHERE dataset = :dataset), "
    f"'{TEXT_SEARCH_CONFIG}') AS regconfig)"
)
#: The first key of the two-key advisory lock on a dataset's language (a key space of its
#: own: the one-key locks, the entity canon's and the erasure's, never collide with it).
LANGUAGE_LOCK_SPACE = 0x6C67


class LanguageSwitching(Exception):
    """The dataset's language is being switched right now (``set_language`` holds its
    language lock exclusively, re-stemming what is stored: minutes on a large dataset);
    raised by :func:`dataset_config` with ``wait=False`` instead of waiting for it."""

    def __init__(self, dataset: str) -> None:
        super().__init__(f"the language of dataset {dataset!r} is being switched")
        self.dataset = dataset


def dataset_config(
    conn: Connection, dataset: str, *, for_write: bool = False, wait: bool = True
) -> str:
    """The dataset's text-search configuration ('english' for a dataset not registered yet).

    ``for_write``: read to write what was stemmed in it. The dataset's language lock
    (:func:`hold_language`) is held shared until the caller's transaction ends, so
    :func:`episodic.store.languages.set_language` (which holds it exclusively while it
    re-stems what is stored) runs wholly before or after the write. A writer that stemmed
    its text outside the transaction compares this with the configuration it read then,
    and stems again when they differ: otherwise a language detected or set meanwhile would
    leave its rows in the old one. Take it before the dataset's row lock
    (:meth:`~episodic.store.vault.Vault.for_write`) and the thread's and the episodes'
    (set_language takes the dataset's row last, and updates episodes while it holds the
    lock). The row is also read ``FOR KEY SHARE``: it cannot be deleted underneath (a lock
    that waits for no update of the row, and that no update waits for).

    ``wait=False`` (background work that has other datasets to get on with): raises
    :class:`LanguageSwitching` at once when a switch holds (or waits for) the lock."""
    if for_write and not hold_language(conn, dataset, exclusive=False, wait=wait):
        raise LanguageSwitching(dataset)
    value = conn.execute(
        text(
            "SELECT text_search_config FROM datasets WHERE dataset = :d"
            + (" FOR KEY SHARE" if for_write else "")
        ),
        {"d": dataset},
    ).scalar()
    return str(value) if value else TEXT_SEARCH_CONFIG


def hold_language(conn: Connection, dataset: str, *, exclusive: bool, wait: bool = True) -> bool:
    """Takes the dataset's language lock until the transaction ends: shared by whatever
    writes stemmed text (:func:`dataset_config` with ``for_write``, RecordEvent),
    exclusive by a language switch (``set_language``). Not the dataset's row: a switch
    re-stems for minutes on a large dataset, and the row's lock would hold up every
    writer of the dataset meanwhile (CreateThread, the dataset's key) instead of only those
    that stem. ``wait=False``: only if it is free now; returns whether it was taken."""
    lock = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
    if not wait:
        lock = lock.replace("pg_advisory", "pg_try_advisory")
    taken = conn.execute(
        text(f"SELECT {lock}(:space, hashtext(:d))"),
        {"space": LANGUAGE_LOCK_SPACE, "d": dataset},
    ).scalar()
    return taken is not False
