"""The package's layers, read from the sources' imports (no import is executed).

Three folders, one installed package ``episodic``, each folder above the one before:

- ``shared/`` (``shared/episodic``), from the bottom: the generated stubs
  (``episodic.v1``); the core (errors, config, validation, …); ``episodic.store`` (SQL over
  our schema) and ``episodic.providers`` (models and HTTP providers); the runtime
  (``episodic.serving``); and beside them the SDK (``episodic.sdk``: the blocking and
  asyncio clients, ``episodic.sdk.client`` and ``episodic.sdk.aio``, and the core they
  share) and the tools that call the services over gRPC or run no service's code (console,
  MCP, and ``episodic.ops``: export, import, trace, ``episodic up`` and the embedded
  PostgreSQL);
- ``services/``: the four services (``episodic.services.*``), each deployable alone;
- ``tools/``: what runs the services' code in process, above them: the CLI
  (``episodic.cli``: ``reindex --reembed`` runs the Summariser's re-embedding), the replay
  (``episodic.ops.replay``: an export replayed through the services' domain code) and the
  developer tooling that reads the CLI (``episodic.devtools``). pyproject.toml's
  ``package-dir`` installs them under these names.

Nothing in ``shared/`` imports ``services/`` or ``tools/``, and no service imports
``tools/``. A newcomer who adds an import across a layer gets a test failure that says
which rule and why, instead of a service image that drags in another service's code or an
SDK that needs PostgreSQL drivers.
"""

from __future__ import annotations

import ast
import tomllib
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

#: The top-level folders besides shared/episodic and the packages they are installed as
#: (pyproject.toml's package-dir): the services, and above them the tools that run the
#: services' code in process.
SERVICES = {"services": "episodic.services"}
TOOLS = {
    "tools/cli": "episodic.cli",
    "tools/replay": "episodic.ops.replay",
    "tools/devtools": "episodic.devtools",
}
#: The packages of tools/: above the services, so nothing below imports them.
ABOVE_SERVICES = tuple(TOOLS.values())


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted((ROOT / "shared" / "episodic").rglob("*.py")):
        parts = path.relative_to(ROOT / "shared").with_suffix("").parts
        if parts[1:2] == ("v1",):  # generated
            continue
        yield ".".join(parts).removesuffix(".__init__"), path
    for folder, package in {**SERVICES, **TOOLS}.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = (package, *path.relative_to(ROOT / folder).with_suffix("").parts)
            yield ".".join(parts).removesuffix(".__init__"), path


#: Which folder each module of the graph comes from.
FOLDER = {
    module: next(
        (f for f in (*SERVICES, *TOOLS) if path.is_relative_to(ROOT / f)), "shared/episodic"
    )
    for module, path in _modules()
}


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


def test_nothing_in_shared_imports_a_services_code() -> None:
    """shared/ is below the services: a tool that needs a service calls it over gRPC, what
    two need lives in the store or the core, and what must run a service's code in process
    lives in tools/ (above the services)."""
    wrong = {
        module: sorted(t for t in targets if _under(t, ("episodic.services",)))
        for module, targets in GRAPH.items()
        if FOLDER[module] == "shared/episodic"
    }
    wrong = {m: t for m, t in wrong.items() if t}
    assert not wrong, (
        "a module of shared/ imports a service's code: call the service over gRPC, move what "
        f"it needs into the store or the core, or move the module into tools/: {wrong}"
    )


def test_nothing_below_the_tools_imports_them() -> None:
    """tools/ (the CLI, the replay, devtools) is above shared/ and the services: neither
    imports it, even lazily inside a function (a CLI-only helper lives in the CLI)."""
    wrong = {
        module: sorted(t for t in targets if _under(t, ABOVE_SERVICES))
        for module, targets in GRAPH.items()
        if FOLDER[module] not in TOOLS
    }
    wrong = {m: t for m, t in wrong.items() if t}
    assert not wrong, (
        "shared/ or a service imports tools/ (episodic.cli, episodic.ops.replay, "
        f"episodic.devtools): move what both need down into shared/: {wrong}"
    )


def test_every_package_of_tools_is_walked() -> None:
    """A package added to tools/ (and to package-dir) but not to TOOLS would escape the
    rules above."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = {
        folder: package
        for package, folder in config["package-dir"].items()
        if folder.startswith("tools/")
    }
    assert mapped == TOOLS
    assert {p.name for p in (ROOT / "tools").iterdir() if p.is_dir()} - {"__pycache__"} == {
        f.removeprefix("tools/") for f in TOOLS
    }


def test_the_rules_name_modules_that_exist() -> None:
    """A rule naming a module that moved would pass without checking anything."""
    named = {*SERVER_SIDE, *SDK, *SDK_COMPAT, *ABOVE_STORE, *ABOVE_SERVICES}
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
    # tools/, named as installed, its relative imports resolved
    assert "episodic.cli._common" in GRAPH["episodic.cli.operations"]
    assert "episodic.services.summariser.reembed" in GRAPH["episodic.cli.operations"]
    assert "episodic.ops.replay.reading" in GRAPH["episodic.ops.replay.run"]
    assert "episodic.ops.replay" in GRAPH["episodic.cli.data"]
    assert "episodic.cli" in GRAPH["episodic.devtools.reference"]
    assert FOLDER["episodic.ops.replay.run"] == "tools/replay"
    assert FOLDER["episodic.ops.export"] == "shared/episodic"


#: Imports each module of the services in turn with none of the services' modules loaded
#: before it, and prints those that fail.
_EACH_MODULE_FIRST = """
import importlib, pkgutil, sys
import episodic.services as services
names = [m.name for m in pkgutil.walk_packages(services.__path__, "episodic.services.")]
for name in names:
    for loaded in [k for k in sys.modules if k.startswith("episodic.services")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        print(f"{name}: {exc!r}")
print(f"imported {len(names)}")
"""


def test_every_service_module_imports_before_the_others() -> None:
    """A module imported first (by a test, a tool, an operator's shell) loads whatever
    the order: no import cycle among a service's modules that only the usual order hides
    (summariser.episode_vector first failed: spaces, reembed and pipeline came back to
    it half-loaded)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _EACH_MODULE_FIRST],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    *failed, last = done.stdout.strip().splitlines()
    assert not failed, "\n".join(failed)
    assert int(last.split()[-1]) > 20, last  # every service's modules were walked
