"""Who a call is from, and what it may touch. Pure rules, no gRPC and no database.

Every call runs as a :class:`Principal`: the API key it presented, the services' own key,
or — only in development mode on loopback — an anonymous administrator. A principal has a
role (reader < writer < admin; "service" for the services' calls to each other) and a set
of datasets: exact names (``user_42``), tenant prefixes (``acme/*``) or all (``*``).

Every RPC declares the least role and the scope it needs in the contracts (the ``access``
option of ``proto/episodic/v1/access.proto``); :func:`rule_of` reads it. The interceptor
(:mod:`episodic.serving.guard`) enforces the role and global scopes before the handler runs; a
handler confines a call to the principal's datasets with :func:`require_dataset` (a dataset
the request names: PERMISSION_DENIED) and :func:`require_visible` (the dataset owning a
thread or episode the request names by id: NOT_FOUND, exactly as for an id that does not
exist, so existence never leaks across datasets).
"""

from __future__ import annotations

import contextvars
import enum
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any

from google.protobuf import descriptor_pool
from google.protobuf.descriptor import MethodDescriptor

from episodic.errors import InvalidArgument, NotFound, PermissionDenied
from episodic.v1 import access_pb2
from episodic.validation import DATASET_PATTERN, MAX_DATASET_CHARS

__all__ = [
    "ALL_DATASETS",
    "ANONYMOUS",
    "Principal",
    "Role",
    "Rule",
    "check_scopes",
    "current",
    "method_rules",
    "require_dataset",
    "require_global",
    "require_visible",
    "rule_of",
    "running_as",
]

ALL_DATASETS = "*"


class Role(enum.IntEnum):
    """Roles of keys; each includes the ones below it, except SERVICE (see :meth:`allows`)."""

    READER = 1
    WRITER = 2
    ADMIN = 3
    SERVICE = 4

    @classmethod
    def parse(cls, name: str) -> Role:
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise InvalidArgument(
                f"role {name!r} is not one of reader, writer, admin, service", field="role"
            ) from None

    @property
    def label(self) -> str:
        return self.name.lower()

    def allows(self, needed: Role) -> bool:
        """Whether a principal of this role may make a call that needs ``needed``:
        reader < writer < admin; the service role makes only the services' own calls, and an
        admin may make those too (an operator's manual trigger)."""
        if needed is Role.SERVICE:
            return self in (Role.SERVICE, Role.ADMIN)
        if self is Role.SERVICE:
            return False
        return self >= needed


@dataclass(frozen=True)
class Rule:
    """What an RPC needs (from its ``access`` option)."""

    role: Role
    global_scope: bool  # every dataset: only keys for "*"


@dataclass(frozen=True)
class Principal:
    """Who is calling. ``prefix`` names the key in logs and the audit log."""

    prefix: str
    role: Role
    datasets: tuple[str, ...]  # exact names, "acme/*" prefixes, or "*"
    key_id: str | None = None

    @property
    def all_datasets(self) -> bool:
        return ALL_DATASETS in self.datasets

    def scope_text(self, shown: int = 5) -> str:
        """The key's datasets for a message: a few of them, and how many there are (a
        key may hold thousands, and a refusal listing them all overflowed gRPC's 16 KB
        trailers: the client saw RESOURCE_EXHAUSTED instead of the refusal)."""
        if len(self.datasets) <= shown:
            return ", ".join(self.datasets)
        return (
            f"{', '.join(self.datasets[:shown])} and {len(self.datasets) - shown} more "
            f"({len(self.datasets)} datasets)"
        )

    def covers(self, dataset: str) -> bool:
        """Whether the key may touch ``dataset``."""
        for scope in self.datasets:
            if scope in (ALL_DATASETS, dataset):
                return True
            if scope.endswith("/*") and dataset.startswith(scope[:-1]):
                return True
        return False


#: Development mode on loopback without keys: everything is allowed, and audits say so.
ANONYMOUS = Principal(prefix="anonymous", role=Role.ADMIN, datasets=(ALL_DATASETS,))

_current: contextvars.ContextVar[Principal | None] = contextvars.ContextVar(
    "episodic_principal", default=None
)


def current() -> Principal:
    """The principal of the call being handled. Outside a call (domain code in tests, the
    CLI working on the database directly) there is none, and that is a programming error:
    use :func:`running_as`."""
    principal = _current.get()
    if principal is None:
        raise RuntimeError("no principal: the call did not pass the guard (see running_as)")
    return principal


@contextmanager
def running_as(principal: Principal) -> Iterator[Principal]:
    """Runs the enclosed code as ``principal`` (the guard does this for every call)."""
    token = _current.set(principal)
    try:
        yield principal
    finally:
        _current.reset(token)


def require_dataset(dataset: str) -> None:
    """The request names ``dataset``: the caller's key must cover it (PERMISSION_DENIED,
    which says nothing about the dataset: the caller named it)."""
    principal = current()
    if not principal.covers(dataset):
        raise PermissionDenied(
            f"this API key ({principal.prefix}) may not use dataset {dataset!r}",
            field="dataset",
            reason="DATASET_NOT_ALLOWED",
        )


def require_global(what: str) -> None:
    """The call spans every dataset (``what`` says which part of it)."""
    principal = current()
    if not principal.all_datasets:
        raise PermissionDenied(
            f"{what} spans every dataset; this API key ({principal.prefix}) covers only "
            f"{principal.scope_text()}",
            reason="DATASET_NOT_ALLOWED",
        )


def require_visible(dataset: str | None, not_found: NotFound) -> str:
    """A thread or episode named by id belongs to ``dataset`` (None: it does not exist).
    Answers ``not_found`` — the very error a missing id gets — when the caller's key does
    not cover it, so a key never learns that another dataset's id exists."""
    if dataset is None or not current().covers(dataset):
        raise not_found
    return dataset


# --------------------------------------------------------------------------- rules


def rule_of(method: MethodDescriptor) -> Rule | None:
    """The access rule an RPC declares (None when it declares none: fail closed)."""
    options = method.GetOptions()
    extension: Any = access_pb2.access  # typeshed's extension typing cannot express ours
    if not options.HasExtension(extension):
        return None
    rule = options.Extensions[extension]
    if rule.role == access_pb2.ACCESS_ROLE_UNSPECIFIED or (
        rule.scope == access_pb2.ACCESS_SCOPE_UNSPECIFIED
    ):
        return None
    return Rule(
        role=Role(int(rule.role)),
        global_scope=rule.scope == access_pb2.ACCESS_SCOPE_GLOBAL,
    )


@cache
def method_rules(service_names: tuple[str, ...]) -> dict[str, Rule | None]:
    """``/package.Service/Method`` → its rule, for the given fully qualified services."""
    pool = descriptor_pool.Default()
    rules: dict[str, Rule | None] = {}
    for name in service_names:
        service = pool.FindServiceByName(name)
        for method in service.methods:
            rules[f"/{service.full_name}/{method.name}"] = rule_of(method)
    return rules


# --------------------------------------------------------------------------- scopes


#: Most datasets one key may name (duplicates counted once): every call of the key walks
#: them (Principal.covers), and a prefix ('acme/*') covers any number of datasets.
MAX_KEY_DATASETS = 1000


def check_scopes(datasets: Iterable[str]) -> tuple[str, ...]:
    """Validates a key's dataset scopes: names, ``prefix/*`` or ``*``, at most
    :data:`MAX_KEY_DATASETS` of them (INVALID_ARGUMENT)."""
    out: list[str] = []
    seen: set[str] = set()  # a list's `in` made 20,000 scopes cost a second
    for i, scope in enumerate(datasets):
        scope = scope.strip()
        name = scope[:-2] if scope.endswith("/*") else scope
        if scope != ALL_DATASETS and (
            len(name) > MAX_DATASET_CHARS or not DATASET_PATTERN.fullmatch(name)
        ):
            raise InvalidArgument(
                f"datasets[{i}] {scope[:80]!r} is neither a dataset name, a prefix ending in "
                "'/*' (e.g. 'acme/*') nor '*'",
                field=f"datasets[{i}]",
            )
        if scope not in seen:
            seen.add(scope)
            out.append(scope)
    if len(out) > MAX_KEY_DATASETS:
        raise InvalidArgument(
            f"a key may name at most {MAX_KEY_DATASETS} datasets (got {len(out)}); give "
            "datasets a common prefix and scope the key to it (e.g. 'acme/*'), or make "
            "several keys",
            field="datasets",
        )
    if not out:
        raise InvalidArgument(
            "a key needs at least one dataset (a name, 'acme/*' or '*')", field="datasets"
        )
    return tuple(out)
