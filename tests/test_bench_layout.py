"""bench/'s imports, read from the sources (no import is executed): no circle among the
benchmarks, and the shared harness (``bench/harness/``) imports no benchmark script.

A circle (recall_lab imported recall_quality, which imported recall_lab) means neither
script can be read or moved alone; what both need belongs in the harness. A harness module
that imports a script makes every benchmark that uses the harness load that script (and
what it imports) and brings the circles back.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


def modules(root: Path) -> dict[str, Path]:
    """Every module under ``root`` (a folder named ``bench``) by dotted name; a package by
    its ``__init__.py``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if "data" in parts:  # bench/data/: the data sets' own check scripts, not benchmarks
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The bench modules ``name`` imports anywhere in it (inside functions too): ``from a.b
    import c`` is ``a.b.c`` when that is a module, else ``a.b``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import bench.x.y` of a name in bench.x
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def graph(root: Path) -> dict[str, set[str]]:
    known = modules(root)
    return {name: imports(name, path, known) for name, path in known.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected group of more than one module (Tarjan), as the
    path that goes round it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return groups


def is_harness(name: str) -> bool:
    return name == "bench.harness" or name.startswith("bench.harness.")


def is_package(name: str, root: Path) -> bool:
    return (root.parent / name.replace(".", "/") / "__init__.py").exists()


def harness_reaching_scripts(edges: dict[str, set[str]], root: Path) -> list[str]:
    return [
        f"{name} imports {target}"
        for name, targets in sorted(edges.items())
        if is_harness(name)
        for target in sorted(targets)
        if not is_harness(target) and not is_package(target, root)
    ]


def test_bench_has_no_import_circle() -> None:
    found = circles(graph(BENCH))
    assert not found, (
        "bench/ imports in a circle (move what both sides need into bench/harness/): "
        + "; ".join(" <-> ".join(group) for group in found)
    )


def test_the_harness_imports_no_script() -> None:
    assert (BENCH / "harness" / "__init__.py").exists()
    crossings = harness_reaching_scripts(graph(BENCH), BENCH)
    assert not crossings, (
        "bench/harness/ is what the scripts share and imports none of them: " + "; ".join(crossings)
    )


def test_a_circle_and_a_harness_crossing_are_named(tmp_path: Path) -> None:
    root = tmp_path / "bench"
    (root / "harness").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "harness" / "__init__.py").write_text("")
    (root / "harness" / "common.py").write_text("def helper():\n    from bench import lab\n")
    (root / "lab.py").write_text("from bench.quality import score\n")
    (root / "quality.py").write_text("def score():\n    from bench.lab import x\n")
    edges = graph(root)
    assert circles(edges) == [["bench.lab", "bench.quality"]]
    assert harness_reaching_scripts(edges, root) == ["bench.harness.common imports bench.lab"]


#: The top-level modules of bench/ besides its __init__: entry points kept for commands in
#: use (bench/README.md, "Compatibility entry points"), each only running its moved module.
COMPATIBILITY = {
    "bench.recall_scale": "bench.scale.recall_scale",
    "bench.heavy_path": "bench.scale.heavy_path",
}


def group(name: str) -> str:
    return name.split(".")[1] if name.count(".") >= 2 else ""


def test_no_script_imports_another_groups_script() -> None:
    edges = graph(BENCH)
    crossings = [
        f"{name} imports {target}"
        for name, targets in sorted(edges.items())
        if group(name) and not is_harness(name) and name not in COMPATIBILITY
        for target in sorted(targets)
        if group(target) and not is_harness(target) and group(target) != group(name)
    ]
    assert not crossings, (
        "what scripts of two groups share belongs in bench/harness/: " + "; ".join(crossings)
    )


def test_the_top_level_holds_only_the_compatibility_entry_points() -> None:
    edges = graph(BENCH)
    top = {name for name in edges if name.count(".") == 1 and not is_package(name, BENCH)}
    assert top == set(COMPATIBILITY), (
        "a script lives in the folder of what it measures (bench/README.md): "
        + ", ".join(sorted(top - set(COMPATIBILITY)))
    )
    for name, target in COMPATIBILITY.items():
        assert edges[name] == {target}, f"{name} only runs {target}"
