"""The entity canon: one canonical entity per thing a dataset talks about, whatever it is
called ("project Atlas", "Atlas project", "atlas").

Three tables, every row of one dataset (migration 0009):

- ``entities``: the canonical entity — an id, and which of its aliases is its name (the
  first spelling it was met under; its blind token, so the name is sealed once, in
  ``entity_aliases``).
- ``entity_aliases``: every spelling (sealed with the dataset's key: people's words), as
  normalised by
  :func:`~episodic.providers.entities.normalise_entity`) the entity was met under, keyed by
  the spelling's blind token. That token is the very token an episode keeps in
  ``episodes.entity_tokens`` for that spelling, so the canon never rewrites episodes: the
  episodes of an entity are those whose tokens overlap its aliases' tokens, and merging or
  splitting entities moves alias rows only. Anything else that carries entities the same
  way (a token per normalised spelling) is covered by the same canon.
- ``entity_keys``: the match keys (:func:`~episodic.providers.entities.entity_match_key`,
  blind tokens too) that lead a new spelling to an existing entity — how "the Atlas
  project" finds "project atlas" on write and on query.

Resolution of a spelling: its alias if it has one (exact, so a split is respected), else the
entity of its match key, else — on write only — a new entity. Writers
(:func:`record_mentions`, in the summariser's completing transaction) are idempotent and
race-safe: keys and aliases are unique per dataset and inserted with ``ON CONFLICT DO
NOTHING``, so two workers meeting the same new spelling at once end with one entity (the
loser drops the entity it had just created and takes the winner's). Writers hold a shared
per-dataset advisory lock, and the clean-up after a thread erasure
(:func:`forget_unmentioned`) the exclusive one, so an entity is never dropped while an
episode naming it is being committed.

Every statement filters by one dataset (the distribution rule).
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from episodic.crypto import DatasetKey
from episodic.errors import FailedPrecondition, InvalidArgument, NotFound
from episodic.providers.entities import entity_match_key, normalise_entity
from episodic.store.episodes import episode_columns
from episodic.store.recall_filters import RecallFilters

__all__ = [
    "Entity",
    "TimelinePage",
    "entity_groups",
    "find_entity",
    "forget_unmentioned",
    "list_entities",
    "merge_entities",
    "record_mentions",
    "resolve_filters",
    "split_alias",
    "timeline",
]

#: Which episodes count as mentions: the current ones (an archived episode is a thread's
#: earlier window, or one an admin deleted).
_MENTIONING = "e.dataset = :d AND e.status = 'completed'"


@dataclass
class Entity:
    """A canonical entity, opened: its name, its aliases with how many current episodes
    mention each, and how many mention any of them."""

    entity_id: uuid.UUID
    name: str
    created_at: datetime
    aliases: list[tuple[str, int]] = field(default_factory=list)
    episode_count: int = 0


def _lock_key(dataset: str) -> int:
    return zlib.crc32(f"episodic entities {dataset}".encode()) - 2**31


def _spellings(raw: Iterable[str]) -> list[str]:
    return sorted({n for n in (normalise_entity(r) for r in raw) if n})


# ---- write --------------------------------------------------------------------------


def record_mentions(conn: Connection, key: DatasetKey, spellings: Iterable[str]) -> list[uuid.UUID]:
    """Files each spelling under its canonical entity (creating what is new) and returns
    the entities' ids, one per distinct spelling, in spelling order. Run it in the
    transaction that stores what mentions them."""
    dataset = key.dataset
    conn.execute(text("SELECT pg_advisory_xact_lock_shared(:k)"), {"k": _lock_key(dataset)})
    # Locks are taken per match key (its row in entity_keys), then per alias of that key:
    # ordered by (key, spelling), two workers filing overlapping names take them in the
    # same order and cannot deadlock ("orion" + "project atlas" against "atlas" + "orion").
    ordered = sorted(_spellings(spellings), key=lambda s: (entity_match_key(s), s))
    by_spelling = {s: _resolve_for_write(conn, key, s) for s in ordered}
    return [by_spelling[s] for s in sorted(by_spelling)]


def _resolve_for_write(conn: Connection, key: DatasetKey, spelling: str) -> uuid.UUID:
    dataset = key.dataset
    alias_token = key.token(spelling)
    found = conn.execute(
        text("SELECT entity_id FROM entity_aliases WHERE dataset = :d AND alias_token = :a"),
        {"d": dataset, "a": alias_token},
    ).scalar()
    if found is not None:
        return found  # type: ignore[no-any-return]
    key_token = key.token(entity_match_key(spelling))
    entity_id = conn.execute(
        text("SELECT entity_id FROM entity_keys WHERE dataset = :d AND key_token = :k"),
        {"d": dataset, "k": key_token},
    ).scalar()
    if entity_id is None:
        entity_id = _create_with_key(conn, key, alias_token, key_token)
    conn.execute(
        text(
            "INSERT INTO entity_aliases (dataset, alias_token, key_token, entity_id, alias) "
            "VALUES (:d, :a, :k, :e, :alias) ON CONFLICT (dataset, alias_token) DO NOTHING"
        ),
        {
            "d": dataset,
            "a": alias_token,
            "k": key_token,
            "e": entity_id,
            "alias": key.seal(spelling, "entity_aliases.alias"),
        },
    )
    # Another worker may have filed the spelling first: its entity is the answer.
    return conn.execute(  # type: ignore[no-any-return]
        text("SELECT entity_id FROM entity_aliases WHERE dataset = :d AND alias_token = :a"),
        {"d": dataset, "a": alias_token},
    ).scalar_one()


def _create_with_key(conn: Connection, key: DatasetKey, alias_token: str, key_token: str) -> Any:
    """A new entity owning ``key_token`` — or, when another transaction claimed the key
    first (the insert waits for it to commit), that transaction's entity."""
    dataset = key.dataset
    mine = uuid.uuid4()
    conn.execute(
        text("INSERT INTO entities (dataset, entity_id, name_token) VALUES (:d, :e, :a)"),
        {"d": dataset, "e": mine, "a": alias_token},
    )
    won = conn.execute(
        text(
            "INSERT INTO entity_keys (dataset, key_token, entity_id) VALUES (:d, :k, :e) "
            "ON CONFLICT (dataset, key_token) DO NOTHING RETURNING entity_id"
        ),
        {"d": dataset, "k": key_token, "e": mine},
    ).scalar()
    if won is not None:
        return mine
    conn.execute(
        text("DELETE FROM entities WHERE dataset = :d AND entity_id = :e"),
        {"d": dataset, "e": mine},
    )
    return conn.execute(
        text("SELECT entity_id FROM entity_keys WHERE dataset = :d AND key_token = :k"),
        {"d": dataset, "k": key_token},
    ).scalar_one()


# ---- read ---------------------------------------------------------------------------


def _entity_of_spelling(conn: Connection, key: DatasetKey, spelling: str) -> Any:
    """The entity a spelling resolves to without creating anything (None: unknown)."""
    found = conn.execute(
        text(
            "SELECT entity_id FROM entity_aliases WHERE dataset = :d AND alias_token = :a "
            "UNION ALL "
            "(SELECT entity_id FROM entity_keys WHERE dataset = :d AND key_token = :k) "
            "LIMIT 1"
        ),
        {"d": key.dataset, "a": key.token(spelling), "k": key.token(entity_match_key(spelling))},
    ).scalar()
    return found


def find_entity(conn: Connection, key: DatasetKey, reference: str, *, field: str) -> uuid.UUID:
    """The entity ``reference`` names: its id (a UUID), or any spelling of it. NotFound
    names ``field``."""
    reference = reference.strip()
    if not reference:
        raise InvalidArgument(f"{field} is required (an entity id or a name)", field=field)
    try:
        as_id = uuid.UUID(reference)
    except ValueError:
        as_id = None
    if as_id is not None:
        exists = conn.execute(
            text("SELECT 1 FROM entities WHERE dataset = :d AND entity_id = :e"),
            {"d": key.dataset, "e": as_id},
        ).first()
        if exists is not None:
            return as_id
    spelling = normalise_entity(reference)
    found = _entity_of_spelling(conn, key, spelling) if spelling else None
    if found is None:
        raise NotFound(
            f"{field}: no entity of dataset {key.dataset!r} is called {reference[:80]!r} "
            "(list them with ListEntities)",
            field=field,
        )
    return found  # type: ignore[no-any-return]


def _alias_tokens(conn: Connection, dataset: str, entity_id: Any) -> list[str]:
    return list(
        conn.execute(
            text(
                "SELECT alias_token FROM entity_aliases WHERE dataset = :d AND entity_id = :e "
                "ORDER BY alias_token"
            ),
            {"d": dataset, "e": entity_id},
        ).scalars()
    )


def entity_groups(conn: Connection, key: DatasetKey, spellings: Sequence[str]) -> list[list[str]]:
    """For an entity filter: per requested spelling, the blind tokens of every alias of the
    entity it resolves to (an episode matches when it carries any of them). A spelling the
    canon does not know matches itself only — what filtering did before the canon."""
    groups = []
    for spelling in spellings:
        own = key.token(spelling)
        tokens = conn.execute(  # one round trip: the entity, then all its aliases
            text(
                """
                WITH hit AS (
                    SELECT entity_id FROM entity_aliases WHERE dataset = :d AND alias_token = :a
                    UNION ALL
                    (SELECT entity_id FROM entity_keys WHERE dataset = :d AND key_token = :k)
                    LIMIT 1)
                SELECT alias_token FROM entity_aliases
                WHERE dataset = :d AND entity_id = (SELECT entity_id FROM hit)
                """
            ),
            {"d": key.dataset, "a": own, "k": key.token(entity_match_key(spelling))},
        ).scalars()
        groups.append(sorted({own, *tokens}))
    return groups


def _open_aliases(
    conn: Connection, key: DatasetKey, entity_ids: list[Any]
) -> dict[Any, list[tuple[str, int]]]:
    rows = conn.execute(
        text(
            f"""
            SELECT a.entity_id, a.alias,
                   (SELECT count(*) FROM episodes e
                    WHERE {_MENTIONING} AND e.entity_tokens @> ARRAY[a.alias_token]) AS n
            FROM entity_aliases a
            WHERE a.dataset = :d AND a.entity_id = ANY(:ids)
            """
        ),
        {"d": key.dataset, "ids": entity_ids},
    )
    out: dict[Any, list[tuple[str, int]]] = {}
    for r in rows:
        out.setdefault(r.entity_id, []).append(
            (key.open(bytes(r.alias), "entity_aliases.alias"), int(r.n))
        )
    for aliases in out.values():
        aliases.sort(key=lambda a: (-a[1], a[0]))
    return out


_ENTITY_SELECT = f"""
    SELECT en.entity_id, en.created_at, na.alias AS name,
           (SELECT count(*) FROM episodes e
            WHERE {_MENTIONING} AND e.entity_tokens && ARRAY(
                SELECT a.alias_token FROM entity_aliases a
                WHERE a.dataset = :d AND a.entity_id = en.entity_id)) AS n
    FROM entities en
    JOIN entity_aliases na ON na.dataset = en.dataset AND na.alias_token = en.name_token
    WHERE en.dataset = :d
"""


def _entity(key: DatasetKey, row: Any, aliases: list[tuple[str, int]]) -> Entity:
    return Entity(
        entity_id=row.entity_id,
        name=key.open(bytes(row.name), "entity_aliases.alias"),
        created_at=row.created_at,
        aliases=aliases,
        episode_count=int(row.n),
    )


def list_entities(
    conn: Connection,
    key: DatasetKey,
    *,
    after: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> tuple[list[Entity], bool]:
    """A page of the dataset's entities, oldest first (names are sealed, so the database
    cannot sort by them), each with its aliases and counts; and whether more follow."""
    rows = list(
        conn.execute(
            text(
                _ENTITY_SELECT
                + """
                  AND (CAST(:at AS timestamptz) IS NULL
                       OR (en.created_at, en.entity_id) > (CAST(:at AS timestamptz), :id))
                ORDER BY en.created_at, en.entity_id
                LIMIT :n
                """
            ),
            {
                "d": key.dataset,
                "at": after[0] if after else None,
                "id": after[1] if after else uuid.UUID(int=0),
                "n": limit + 1,
            },
        )
    )
    more = len(rows) > limit
    rows = rows[:limit]
    aliases = _open_aliases(conn, key, [r.entity_id for r in rows])
    return [_entity(key, r, aliases.get(r.entity_id, [])) for r in rows], more


def get_entity(conn: Connection, key: DatasetKey, entity_id: Any) -> Entity:
    row = conn.execute(
        text(_ENTITY_SELECT + " AND en.entity_id = :e"), {"d": key.dataset, "e": entity_id}
    ).one()
    return _entity(key, row, _open_aliases(conn, key, [entity_id]).get(entity_id, []))


# ---- admin: merge and split -----------------------------------------------------------


def _hold_for_admin(conn: Connection, dataset: str) -> None:
    """An admin change of the canon (merge, split) holds the dataset's canon lock
    exclusively, first: changes run one at a time, and never between the locks of a
    summariser filing names (record_mentions holds the lock shared). Each took row locks
    in its own order (a merge its entities then their aliases, a split the alias then its
    entity, filing the aliases then a new entity), and together they deadlocked."""
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _lock_key(dataset)})


def merge_entities(
    conn: Connection, key: DatasetKey, into: uuid.UUID, sources: Sequence[uuid.UUID]
) -> Entity:
    """Moves every alias and match key of ``sources`` to ``into`` and drops the sources;
    ``into`` keeps its id and name. Merging an entity into itself is refused."""
    dataset = key.dataset
    others = [s for s in dict.fromkeys(sources)]
    if into in others:
        raise InvalidArgument("an entity cannot be merged into itself", field="sources")
    if not others:
        raise InvalidArgument("sources is required: the entities to merge in", field="sources")
    _hold_for_admin(conn, dataset)
    # Lock the entities involved (in id order): one of them may be gone by now.
    locked = conn.execute(
        text(
            "SELECT entity_id FROM entities WHERE dataset = :d AND entity_id = ANY(:ids) "
            "ORDER BY entity_id FOR UPDATE"
        ),
        {"d": dataset, "ids": [into, *others]},
    ).scalars()
    if len(set(locked)) != len(others) + 1:
        raise NotFound("an entity to merge no longer exists (merged meanwhile?)", field="sources")
    for table in ("entity_aliases", "entity_keys"):
        conn.execute(
            text(
                f"UPDATE {table} SET entity_id = :into WHERE dataset = :d AND entity_id = ANY(:ids)"
            ),
            {"d": dataset, "into": into, "ids": others},
        )
    conn.execute(
        text("DELETE FROM entities WHERE dataset = :d AND entity_id = ANY(:ids)"),
        {"d": dataset, "ids": others},
    )
    return get_entity(conn, key, into)


def split_alias(conn: Connection, key: DatasetKey, alias: str) -> tuple[Entity, Entity]:
    """Moves one alias (a spelling, matched exactly after normalisation) off its entity
    into a new entity named after it; returns (the new entity, what remains). The match
    key goes with it unless another alias left behind shares it, so later spellings of the
    split-off name find the new entity. FailedPrecondition when it is the entity's only
    alias (there is nothing to split it from)."""
    dataset = key.dataset
    spelling = normalise_entity(alias)
    if not spelling:
        raise InvalidArgument("alias is required (the spelling to split off)", field="alias")
    alias_token = key.token(spelling)
    _hold_for_admin(conn, dataset)
    row = conn.execute(
        text(
            "SELECT entity_id, key_token FROM entity_aliases "
            "WHERE dataset = :d AND alias_token = :a FOR UPDATE"
        ),
        {"d": dataset, "a": alias_token},
    ).first()
    if row is None:
        raise NotFound(
            f"alias: no entity of dataset {dataset!r} has the alias {alias[:80]!r}", field="alias"
        )
    old = row.entity_id
    conn.execute(
        text("SELECT 1 FROM entities WHERE dataset = :d AND entity_id = :e FOR UPDATE"),
        {"d": dataset, "e": old},
    )
    if len(_alias_tokens(conn, dataset, old)) < 2:
        raise FailedPrecondition(
            f"{alias[:80]!r} is the only alias of its entity: there is nothing to split it from",
            reason="ONLY_ALIAS",
            field="alias",
        )
    new = uuid.uuid4()
    conn.execute(
        text("INSERT INTO entities (dataset, entity_id, name_token) VALUES (:d, :e, :a)"),
        {"d": dataset, "e": new, "a": alias_token},
    )
    conn.execute(
        text("UPDATE entity_aliases SET entity_id = :new WHERE dataset = :d AND alias_token = :a"),
        {"d": dataset, "new": new, "a": alias_token},
    )
    _rename_nameless(conn, dataset)
    conn.execute(
        text(
            """
            UPDATE entity_keys k SET entity_id = :new
            WHERE k.dataset = :d AND k.key_token = :k AND k.entity_id = :old
              AND NOT EXISTS (SELECT 1 FROM entity_aliases a
                              WHERE a.dataset = :d AND a.entity_id = :old AND a.key_token = :k)
            """
        ),
        {"d": dataset, "new": new, "old": old, "k": row.key_token},
    )
    return get_entity(conn, key, new), get_entity(conn, key, old)


# ---- the timeline ---------------------------------------------------------------------


@dataclass
class TimelinePage:
    episodes: list[Any]  # episode rows as stored (sealed columns not yet opened)
    more: bool


def timeline(
    conn: Connection,
    key: DatasetKey,
    entity_id: Any,
    *,
    after: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> TimelinePage:
    """The current episodes mentioning any alias of the entity, oldest first (by the
    start of their span), ``limit`` at a time after the cursor ``after``."""
    tokens = _alias_tokens(conn, key.dataset, entity_id)
    rows = list(
        conn.execute(
            text(
                f"""
                SELECT {episode_columns("e", ":d")}
                FROM episodes e
                WHERE {_MENTIONING} AND e.entity_tokens && CAST(:tokens AS text[])
                  AND (CAST(:at AS timestamptz) IS NULL
                       OR (e.started_at, e.episode_id) > (CAST(:at AS timestamptz), :id))
                ORDER BY e.started_at, e.episode_id
                LIMIT :n
                """
            ),
            {
                "d": key.dataset,
                "tokens": tokens,
                "at": after[0] if after else None,
                "id": after[1] if after else uuid.UUID(int=0),
                "n": limit + 1,
            },
        ).mappings()
    )
    return TimelinePage(episodes=rows[:limit], more=len(rows) > limit)


# ---- erasure ----------------------------------------------------------------------------


def _rename_nameless(conn: Connection, dataset: str) -> None:
    """An entity whose name alias went elsewhere (split off, erased) is named after one of
    the aliases it has left."""
    conn.execute(
        text(
            """
            UPDATE entities en SET name_token = (
                SELECT min(a.alias_token) FROM entity_aliases a
                WHERE a.dataset = :d AND a.entity_id = en.entity_id)
            WHERE en.dataset = :d AND NOT EXISTS (
                SELECT 1 FROM entity_aliases a WHERE a.dataset = :d
                  AND a.entity_id = en.entity_id AND a.alias_token = en.name_token)
            """
        ),
        {"d": dataset},
    )


def forget_unmentioned(conn: Connection, dataset: str) -> list[str]:
    """Drops the dataset's aliases no episode (of any status) or event mentions any more — after a
    thread was erased, the names only it used go with it — then the entities left without
    an alias and the match keys no alias of their entity has. Takes the exclusive canon
    lock first, so no summariser is between filing a name and committing the episode that
    names it. Returns the blind tokens of the aliases that went."""
    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _lock_key(dataset)})
    gone = list(
        conn.execute(
            text(
                """
                DELETE FROM entity_aliases a
                WHERE a.dataset = :d AND NOT EXISTS (
                    SELECT 1 FROM episodes e
                    WHERE e.dataset = a.dataset AND e.entity_tokens @> ARRAY[a.alias_token])
                  AND NOT EXISTS (
                    SELECT 1 FROM events ev
                    WHERE ev.dataset = a.dataset AND ev.entity_tokens @> ARRAY[a.alias_token])
                RETURNING a.alias_token
                """
            ),
            {"d": dataset},
        ).scalars()
    )
    if gone:
        conn.execute(
            text(
                """
                DELETE FROM entity_keys k
                WHERE k.dataset = :d AND NOT EXISTS (
                    SELECT 1 FROM entity_aliases a WHERE a.dataset = k.dataset
                      AND a.entity_id = k.entity_id AND a.key_token = k.key_token)
                """
            ),
            {"d": dataset},
        )
        conn.execute(
            text(
                """
                DELETE FROM entities en
                WHERE en.dataset = :d AND NOT EXISTS (
                    SELECT 1 FROM entity_aliases a
                    WHERE a.dataset = en.dataset AND a.entity_id = en.entity_id)
                """
            ),
            {"d": dataset},
        )
        _rename_nameless(conn, dataset)
    return gone


def erase_dataset_canon(conn: Connection, dataset: str) -> dict[str, list[str]]:
    """Deletes every row of the dataset's canon; returns each table's erased identities."""
    out = {}
    for table, identity in (
        ("entity_keys", "key_token"),
        ("entity_aliases", "alias_token"),
        ("entities", "entity_id::text"),
    ):
        out[table] = list(
            conn.execute(
                text(f"DELETE FROM {table} WHERE dataset = :d RETURNING {identity}"),
                {"d": dataset},
            ).scalars()
        )
    return out


def resolve_filters(conn: Connection, key: DatasetKey, filters: RecallFilters) -> RecallFilters:
    """Recall's entity filter through the canon: each requested entity matches an episode
    carrying any of its aliases ("atlas" finds "project atlas")."""
    if not filters.entities:
        return filters
    return replace(filters, entity_groups=entity_groups(conn, key, filters.entities))


# ---- backfill ---------------------------------------------------------------------------


@dataclass
class BackfillResult:
    datasets: int = 0
    episodes: int = 0
    spellings: int = 0


def backfill(
    engine: Any, vault: Any, *, dataset: str | None = None, batch: int = 200
) -> BackfillResult:
    """Files the entities of every episode written before the canon existed (or of one
    dataset). Idempotent (filing a known spelling changes nothing), so it can be re-run or
    resumed after an interruption. It needs the datasets' keys — the entities of an
    encrypted dataset are sealed — which is why it is a command run with the services'
    keyring and not part of migration 0009."""
    from episodic.crypto import open_json  # the crypto module is light; kept local anyway

    out = BackfillResult()
    with engine.connect() as conn:
        names = (
            [dataset]
            if dataset is not None
            else list(conn.execute(text("SELECT dataset FROM datasets ORDER BY dataset")).scalars())
        )
    for name in names:
        out.datasets += 1
        after = uuid.UUID(int=0)
        while True:
            with engine.begin() as conn:
                key = vault.for_read(conn, name)
                rows = conn.execute(
                    text(
                        "SELECT episode_id, entities FROM episodes WHERE dataset = :d "
                        "AND cardinality(entity_tokens) > 0 AND episode_id > :after "
                        "ORDER BY episode_id LIMIT :n"
                    ),
                    {"d": name, "after": after, "n": batch},
                ).all()
                spellings: set[str] = set()
                for row in rows:
                    spellings.update(open_json(key, bytes(row.entities), "episodes.entities"))
                if spellings:
                    record_mentions(conn, key, spellings)
            out.episodes += len(rows)
            out.spellings += len(spellings)
            if len(rows) < batch:
                break
            after = rows[-1].episode_id
    return out
