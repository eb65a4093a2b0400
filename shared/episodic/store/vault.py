"""Datasets' keys, from the database row to a key that seals and opens values.

Every process that reads or writes user text holds one :class:`Vault`. The write path
asks :meth:`Vault.for_write` (which registers a new dataset — with a fresh data key when
encryption is on — and refuses one that is being erased); the read path asks
:meth:`Vault.for_read`. Unwrapped keys are cached by key id; a dataset's current key id is
cached for a few seconds only on the read path, and every sealed value names its key
(:func:`episodic.crypto.value_fingerprint`), so a reader whose cached key went stale
(the dataset was erased and created again) notices and fetches the new one.

:func:`open_row` turns a row as stored (sealed ``bytea`` columns) into the row clients
see; :data:`SEALED_COLUMNS` says which columns of which table are sealed, and how.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, RowMapping, text

from episodic.config import PrivacySettings
from episodic.crypto import (
    KEYRING_FILE_NAME,
    ClearKey,
    DataKey,
    DatasetKey,
    KeyProvider,
    LocalKeyring,
    WrongKey,
    new_data_key,
    open_json,
)
from episodic.errors import ConfigurationError, FailedPrecondition

__all__ = [
    "SEALED_COLUMNS",
    "DatasetErasing",
    "KeyUnavailable",
    "Vault",
    "make_vault",
    "open_row",
]

#: Sealed columns per table: "text" or "json" (how the opened value is read), and the
#: column name used as the value's authenticated context (a row's ``thread_label`` is
#: ``threads.label``).
SEALED_COLUMNS: dict[str, dict[str, tuple[str, str]]] = {
    "messages": {
        "content": ("text", "messages.content"),
        "metadata": ("json", "messages.metadata"),
        "tools": ("json", "messages.tools"),
    },
    "threads": {
        "label": ("text", "threads.label"),
        "metadata": ("json", "threads.metadata"),
    },
    "episodes": {
        "summary": ("text", "episodes.summary"),
        "key_learnings": ("json", "episodes.key_learnings"),
        "entities": ("json", "episodes.entities"),
        "actor": ("text", "episodes.actor"),
        "thread_label": ("text", "threads.label"),
    },
    "facts": {"statement": ("text", "facts.statement")},
    "events": {
        "summary": ("text", "events.summary"),
        "entities": ("json", "events.entities"),
        "actor": ("text", "events.actor"),
        "thread_label": ("text", "threads.label"),
    },
    "entity_aliases": {"alias": ("text", "entity_aliases.alias")},
}

#: How long a reader trusts the key id it read for a dataset. Only matters when a dataset
#: is erased and created again within it (a stale key is then noticed and replaced).
READ_KEY_TTL = 5.0
_MAX_CACHED = 10_000


class DatasetErasing(FailedPrecondition):
    def __init__(self, dataset: str) -> None:
        super().__init__(
            f"dataset {dataset!r} is being erased: nothing can be written to it until "
            "DeleteDataset has finished, and then it starts empty",
            reason="DATASET_ERASING",
            dataset=dataset,
        )


class KeyUnavailable(FailedPrecondition):
    def __init__(self, dataset: str, detail: str) -> None:
        super().__init__(
            f"the data key of dataset {dataset!r} cannot be opened: {detail}",
            reason="ENCRYPTION_KEY_UNAVAILABLE",
            dataset=dataset,
        )


class Vault:
    """Seals new text of datasets created while ``encrypt`` is on (needs ``provider``);
    opens any dataset's text it has the master key for."""

    def __init__(self, provider: KeyProvider | None, *, encrypt: bool) -> None:
        if encrypt and provider is None:
            raise ValueError("encryption needs a key provider")
        self.provider = provider
        self.encrypt = encrypt
        self._lock = threading.Lock()
        self._keys: OrderedDict[str, DataKey] = OrderedDict()  # by key id
        self._current: dict[str, tuple[float, DatasetKey]] = {}  # dataset → (fetched, key)

    # ---- the write path ---------------------------------------------------------------

    def for_write(self, conn: Connection, dataset: str) -> DatasetKey:
        """The key new text of ``dataset`` is sealed with, registering the dataset on its
        first write. The row is share-locked until the caller commits, so an erasure cannot
        start underneath (and once one has started, this raises DatasetErasing)."""
        row = self._dataset_row(conn, dataset, lock=True)
        if row is None:
            self._register(conn, dataset)
            row = self._dataset_row(conn, dataset, lock=True)
            assert row is not None
        if row["erasing_since"] is not None:
            raise DatasetErasing(dataset)
        return self.key_of(dataset, row["key_id"], row["master_key_id"], row["wrapped_key"])

    def _register(self, conn: Connection, dataset: str) -> None:
        key_id = master_key_id = wrapped = None
        if self.encrypt:
            assert self.provider is not None
            key_id = str(uuid.uuid4())
            material = new_data_key()
            master_key_id, wrapped = self.provider.wrap(material, _context(dataset, key_id))
        conn.execute(
            text(
                "INSERT INTO datasets (dataset, key_id, master_key_id, wrapped_key) "
                "VALUES (:d, :k, :m, :w) ON CONFLICT (dataset) DO NOTHING"
            ),
            {"d": dataset, "k": key_id, "m": master_key_id, "w": wrapped},
        )

    # ---- the read path ----------------------------------------------------------------

    def for_read(self, conn: Connection, dataset: str, *, fresh: bool = False) -> DatasetKey:
        """The key to open ``dataset``'s text with (a ClearKey for a dataset stored in the
        clear, or one that does not exist)."""
        now = time.monotonic()
        if not fresh:
            cached = self._current.get(dataset)
            if cached is not None and now - cached[0] < READ_KEY_TTL:
                return cached[1]
        row = self._dataset_row(conn, dataset, lock=False)
        key: DatasetKey = (
            ClearKey(dataset)
            if row is None
            else self.key_of(dataset, row["key_id"], row["master_key_id"], row["wrapped_key"])
        )
        with self._lock:
            if len(self._current) >= _MAX_CACHED:
                self._current.clear()
            self._current[dataset] = (now, key)
        return key

    def open_rows(
        self, conn: Connection, dataset: str, rows: list[Any], table: str
    ) -> list[dict[str, Any]]:
        """``rows`` of ``dataset`` (of ``table``) with their sealed columns opened."""
        if not rows:
            return []
        key = self.for_read(conn, dataset)
        try:
            return [open_row(key, r, table) for r in rows]
        except WrongKey:  # sealed with a newer key than the one cached
            key = self.for_read(conn, dataset, fresh=True)
            return [open_row(key, r, table) for r in rows]

    def open_one(self, conn: Connection, row: Any, table: str) -> dict[str, Any]:
        """One row (its ``dataset`` column names the dataset) with sealed columns opened."""
        return self.open_rows(conn, row["dataset"], [row], table)[0]

    # ---- keys -------------------------------------------------------------------------

    def key_of(
        self,
        dataset: str,
        key_id: Any,
        master_key_id: str | None,
        wrapped: bytes | None,
    ) -> DatasetKey:
        """The key a ``datasets`` row describes (unwrapped once, then cached)."""
        if key_id is None:
            return ClearKey(dataset)
        kid = str(key_id)
        with self._lock:
            key = self._keys.get(kid)
            if key is not None:
                self._keys.move_to_end(kid)
                return key
        if self.provider is None:
            raise KeyUnavailable(
                dataset,
                "it is encrypted and no master keyring is configured (EPISODIC_MASTER_KEY_FILE)",
            )
        if master_key_id is None or wrapped is None:
            raise KeyUnavailable(dataset, "its row has no wrapped key")
        try:
            material = self.provider.unwrap(master_key_id, bytes(wrapped), _context(dataset, kid))
        except FailedPrecondition:
            raise
        except Exception as err:  # a wrong master key fails authentication
            raise KeyUnavailable(
                dataset, f"master key {master_key_id!r} did not open it ({type(err).__name__})"
            ) from None
        key = DataKey(key_id=kid, dataset=dataset, material=material)
        with self._lock:
            self._keys[kid] = key
            while len(self._keys) > _MAX_CACHED:
                self._keys.popitem(last=False)
        return key

    def forget(self, dataset: str) -> None:
        """Drops what this process cached for ``dataset`` (after erasing it)."""
        with self._lock:
            cached = self._current.pop(dataset, None)
            if cached is not None and cached[1].key_id is not None:
                self._keys.pop(cached[1].key_id, None)

    @staticmethod
    def _dataset_row(conn: Connection, dataset: str, *, lock: bool) -> RowMapping | None:
        return (
            conn.execute(
                text(
                    "SELECT key_id, master_key_id, wrapped_key, erasing_since FROM datasets "
                    "WHERE dataset = :d" + (" FOR SHARE" if lock else "")
                ),
                {"d": dataset},
            )
            .mappings()
            .first()
        )


def make_vault(settings: PrivacySettings, *, data_dir: Path | None = None) -> Vault:
    """The vault a service runs with: the keyring of EPISODIC_MASTER_KEY_FILE, if any. A
    command run beside `episodic up` (``data_dir``) finds the data directory's keyring."""
    if settings.master_key_file is None and data_dir is not None:
        default = data_dir.expanduser().resolve() / KEYRING_FILE_NAME
        if default.exists():
            settings = settings.model_copy(update={"master_key_file": default})
    if settings.master_key_file is None:
        if settings.encryption == "required":
            raise ConfigurationError(
                "EPISODIC_ENCRYPTION=required but EPISODIC_MASTER_KEY_FILE is not set"
            )
        return Vault(None, encrypt=False)
    keyring = LocalKeyring.load(settings.master_key_file)
    return Vault(keyring, encrypt=settings.encrypt_new_datasets)


def _context(dataset: str, key_id: str) -> str:
    """What a wrapped data key is bound to: it unwraps for this dataset and key id only."""
    return f"{dataset}|{key_id}"


def open_row(key: DatasetKey, row: Any, table: str) -> dict[str, Any]:
    """A stored row of ``table`` with its sealed columns (those present) opened."""
    out = dict(row._mapping) if hasattr(row, "_mapping") else dict(row)  # a Row, or a mapping
    for column, (kind, context) in SEALED_COLUMNS[table].items():
        value = out.get(column)
        if value is None:
            continue
        raw = bytes(value)
        out[column] = open_json(key, raw, context) if kind == "json" else key.open(raw, context)
    return out
