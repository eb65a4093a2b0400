"""The package's layers, read from the sources' imports (no import is executed).

From the bottom: the generated stubs (``episodic.v1``); the core (errors, config,
validation, …); ``episodic.store`` (SQL over our schema) and ``episodic.providers`` (models
and HTTP providers); the runtime (``episodic.serving``); the four services
(``episodic.services.*``, the top-level ``services/`` folder), each deployable alone; and
beside them the SDK (``episodic.sdk``: the blocking and asyncio clients, ``episodic.sdk.client``
and ``episodic.sdk.aio``, and the core they share) and the tools (CLI, console, MCP, and
``episodic.ops``: export, import, replay, trace, ``episodic up`` and the embedded PostgreSQL).
A newcomer who adds an import across a layer gets a test failure that says
which rule and why, instead of a service image that drags in another service's code or an
SDK that needs PostgreSQL drivers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: What the SDK may not reach, even through another module: it installs without the
#: server extra (tests/packaging/test_core_install.py installs it so), and a client that
#: imports the store would need SQLAlchemy and a database driver.
SERVER_SIDE = (
    "episodic.store",
    "episodic.serving",
    "episodic.services",
    "episodic.providers",
    "episodic.ops.runtime",
    "episodic.ops.supervisor",
)
#: (``episodic.client`` and ``episodic.aio`` are the clients' first import paths, kept as
#: re-exports of ``episodic.sdk.client`` and ``episodic.sdk.aio``.)
SDK = ("episodic.sdk", "episodic.client", "episodic.aio")
#: The SDK's old import paths: kept for code outside the repository; nothing inside imports
#: them (tests/sdk/test_compat.py checks they still work).
SDK_COMPAT = ("episodic.client", "episodic.aio")

#: What the store and the providers may not import: everything that runs them.
ABOVE_STORE = (
    "episodic.serving",
    "episodic.services",
    "episodic.cli",
    "episodic.console",
    "episodic.mcp",
    "episodic.mcp_server",
    "episodic.client",
    "episodic.sdk",
    "episodic.aio",
    # the operator's tools: export, import, replay, trace, `episodic up` and the embedded
    # PostgreSQL
    "episodic.ops",
)

#: Modules of shared/ that import a service's code, each for a reason; any other is a
#: layering mistake (a tool should call a service over gRPC, or the code it needs should
#: move down into the store or the core).
IMPORTS_SERVICES = {
    # Replays a recorded Recall, AddMessages, … against a copy of the store, in process:
    # it runs the services' domain code by design (the replay's run; its other modules
    # read, report and make the scratch database).
    "episodic.ops.replay.run",
    # `episodic reindex --reembed` runs the Summariser's re-embedding in the operator's
    # process (it must hold the space fence the Summariser holds).
    "episodic.cli.operations",
}


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted((ROOT / "shared" / "episodic").rglob("*.py")):
        parts = path.relative_to(ROOT / "shared").with_suffix("").parts
        if parts[1:2] == ("v1",):  # generated
            continue
        yield ".".join(parts).removesuffix(".__init__"), path
    for path in sorted((ROOT / "services").rglob("*.py")):
        parts = ("episodic", "services", *path.relative_to(ROOT / "services").with_suffix("").parts)
        yield ".".join(parts).removesuffix(".__init__"), path


def _imports(module: str, path: Path) -> set[str]:
    """The ``episodic`` modules ``path`` imports (relative imports resolved), at any depth
    of the file (an import inside a function is an import too)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("episodic"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            if base.startswith("episodic"):
                found.add(base)
                # `from episodic.store import recall_queries`: the submodule too
                found.update(f"{base}.{a.name}" for a in node.names)
    return found


GRAPH = {module: _imports(module, path) for module, path in _modules()}


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _known(name: str) -> str | None:
    """The module of the graph ``name`` is (itself, or the package it names)."""
    while name and name not in GRAPH:
        name = name.rpartition(".")[0]
    return name or None


def test_the_sdk_reaches_nothing_of_the_server_side() -> None:
    seen: set[str] = set()
    path: dict[str, str] = {}
    stack = [module for module in GRAPH if _under(module, SDK)]
    while stack:
        module = stack.pop()
        if module in seen:
            continue
        seen.add(module)
        for target in GRAPH.get(module, ()):
            known = _known(target)
            if _under(target, SERVER_SIDE):
                chain = [target, module]
                while chain[-1] in path:
                    chain.append(path[chain[-1]])
                pytest.fail(f"the SDK imports the server side: {' <- '.join(chain)}")
            if known and known not in seen:
                path.setdefault(known, module)
                stack.append(known)


@pytest.mark.parametrize("layer", ["episodic.store", "episodic.providers"])
def test_the_store_and_providers_import_nothing_that_runs_them(layer: str) -> None:
    wrong = {
        module: sorted(t for t in targets if _under(t, ABOVE_STORE))
        for module, targets in GRAPH.items()
        if _under(module, (layer,))
    }
    assert not {m: t for m, t in wrong.items() if t}, (
        f"{layer} must not import what runs it (the runtime, the services, the tools, the SDK)"
    )


def test_the_providers_do_not_read_the_store() -> None:
    """A provider turns text into vectors, summaries, entities: it is handed what it needs,
    so it can be tested (and replaced) without a database."""
    wrong = {
        module: sorted(t for t in targets if _under(t, ("episodic.store",)))
        for module, targets in GRAPH.items()
        if _under(module, ("episodic.providers",))
    }
    assert not {m: t for m, t in wrong.items() if t}


def test_nothing_in_the_package_imports_the_sdks_old_paths() -> None:
    """``episodic.client`` and ``episodic.aio`` only re-export ``episodic.sdk.client`` and
    ``episodic.sdk.aio`` for code outside the repository; code inside imports the SDK's
    modules, so the old paths can go without touching it."""
    wrong = {
        module: sorted(t for t in targets if _under(t, SDK_COMPAT))
        for module, targets in GRAPH.items()
        if not _under(module, SDK_COMPAT)
    }
    assert not {m: t for m, t in wrong.items() if t}, wrong


def test_each_service_imports_no_other_service() -> None:
    """Each service deploys alone; what two share lives below them (store, core)."""
    wrong = []
    for module, targets in GRAPH.items():
        if not _under(module, ("episodic.services",)) or module == "episodic.services":
            continue
        own = module.split(".")[2]
        for target in targets:
            other = _under(target, ("episodic.services",)) and target != "episodic.services"
            if other and target.split(".")[2] != own:
                wrong.append(f"{module} -> {target}")
    assert not wrong, wrong


def test_only_the_known_tools_import_a_services_code() -> None:
    importers = {
        module
        for module, targets in GRAPH.items()
        if not _under(module, ("episodic.services",))
        and any(_under(t, ("episodic.services",)) for t in targets)
    }
    assert importers == IMPORTS_SERVICES, (
        "a module of shared/ imports a service's code: call the service over gRPC, or move "
        "what it needs into the store or the core (or, if it must run the service's code in "
        "process, add it to IMPORTS_SERVICES with the reason)"
    )


def test_the_rules_name_modules_that_exist() -> None:
    """A rule naming a module that moved would pass without checking anything."""
    named = {*SERVER_SIDE, *SDK, *SDK_COMPAT, *ABOVE_STORE, *IMPORTS_SERVICES}
    assert not {name for name in named if name not in GRAPH}


def test_the_graph_is_read() -> None:
    """The rules above would pass on an empty graph: the walk must find the modules and
    their imports (and resolve the services' relative imports)."""
    assert len(GRAPH) > 100
    assert "episodic.store.recall_queries" in GRAPH["episodic.services.recall.domain"]
    assert "episodic.services.recall.events" in GRAPH["episodic.services.recall.domain"]
    assert "episodic.sdk" in GRAPH["episodic.sdk.client"]
    assert "episodic.sdk.client" in GRAPH["episodic.client"]
    assert "episodic.serving.guard" in GRAPH["episodic.serving.server"]
    assert "episodic.ops.runtime" in GRAPH["episodic.ops.supervisor"]
