"""Generates the gRPC stubs from proto/: Python into shared/episodic/v1/ and Go into
clients/stubs/go (committed), Java into clients/stubs/java (generated, not committed); the
TypeScript client's code comes from buf.gen.yaml.

Run with ``python -m episodic.devtools.protogen`` (every language whose generator is
installed; ``--lang java`` etc. for some: `make java-stubs`). The test suite regenerates the
committed stubs into a temporary folder and compares, so they can never drift from the
protos; the Java stubs are generated and compiled by the Java tests instead.

==========  =====================================  ==========================================
part        generator                              where it comes from
==========  =====================================  ==========================================
python      protoc's python, pyi, grpc_python      grpcio-tools (the dev extra)
go          protoc-gen-go                          Debian: protoc-gen-go
go-grpc     protoc-gen-go-grpc                     Debian: protoc-gen-go-grpc
java        protoc's built-in java, and            Debian: protobuf-compiler (the protoc of
            grpc_java_plugin                       libprotobuf-java), protobuf-compiler-grpc-
                                                   java-plugin
==========  =====================================  ==========================================

The Python and Go parts run on grpcio-tools' protoc, so their bytes depend only on pinned
versions. The Go plugins are not on PyPI or npm (Debian packages them; buf's remote plugins
are out of reach): a Go part whose generator is missing is left as committed, and said so.

Java is generated, not committed: a message class runs only on the protobuf-java of the
protoc that made it, so the classes are made by the protoc of the runtime that will run them
(Debian's 3.21.12 here; ``PROTOC=…`` for another), beside the ``*Grpc`` service classes and
google.rpc's ``Status`` and ``ErrorInfo`` (from googleapis-common-protos' protos: Debian's
proto-google-common-protos 1.16 has no ``ErrorInfo``).
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PROTO_ROOT = REPO_ROOT / "proto"
STUB_ROOT = REPO_ROOT / "shared"
CLIENT_STUBS = REPO_ROOT / "clients" / "stubs"
#: Where `make java-stubs` writes the Java stubs (ignored by git: they are generated).
JAVA_STUBS = CLIENT_STUBS / "java"
#: google/rpc's protos the Java classes are generated with, as googleapis-common-protos ships
#: them (grpcio-status's dependency): the details of a call's error (``ErrorInfo``).
RPC_PROTOS = ("google/rpc/status.proto", "google/rpc/error_details.proto")

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


# ---- Java: generated, not committed ------------------------------------------------------


def java_protoc() -> tuple[Path | None, str]:
    """The protoc that makes the Java messages: ``$PROTOC``, else Debian's ``/usr/bin/protoc``
    (the version of Debian's protobuf-java); or None and why."""
    chosen = os.environ.get("PROTOC")
    protoc = Path(chosen or "/usr/bin/protoc")
    if not protoc.is_file():
        if chosen:
            return None, f"PROTOC={chosen} is not a file"
        return None, (
            "needs Debian's protoc (apt-get install protobuf-compiler libprotobuf-dev), "
            "or PROTOC=<the protoc of the protobuf-java you run>"
        )
    if not chosen and not Path("/usr/include/google/protobuf/descriptor.proto").exists():
        # the well-known types the contracts import: protobuf-compiler only recommends them
        return None, "needs google/protobuf/descriptor.proto (apt-get install libprotobuf-dev)"
    return protoc, ""


def java_grpc_plugin() -> tuple[Path | None, str]:
    """grpc-java's protoc plugin (Debian's ``grpc_java_plugin``, or ``protoc-gen-grpc-java``
    as grpc-java releases name it); or None and why."""
    for name in ("grpc_java_plugin", "protoc-gen-grpc-java"):
        path = _on_path(name)
        if path is not None:
            return path, ""
    return None, (
        "needs grpc_java_plugin (Debian: apt-get install protobuf-compiler-grpc-java-plugin)"
    )


def java_missing() -> str:
    """Why the Java stubs cannot be generated here ("" when they can)."""
    return "; ".join(why for why in (java_protoc()[1], java_grpc_plugin()[1]) if why)


def protoc_version(protoc: Path) -> str:
    """``3.21.12`` for a protoc that says ``libprotoc 3.21.12``."""
    out = subprocess.run([str(protoc), "--version"], capture_output=True, text=True, check=True)
    return out.stdout.split()[-1]


def rpc_root() -> Path:
    """The folder holding googleapis-common-protos' ``google/rpc/*.proto``."""
    from google.rpc import error_details_pb2

    return Path(error_details_pb2.__file__).resolve().parents[2]


def _protoc(protoc: Path, root: Path, args: Sequence[str], files: Sequence[str]) -> None:
    done = subprocess.run(
        [str(protoc), f"-I{root}", *args, *files], cwd=root, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"{protoc} failed: {done.stdout}{done.stderr}")


def generate_java(out: Path, protoc: Path, plugin: Path) -> list[Path]:
    """Writes the Java stubs into ``out``: the ``episodic.v1`` messages (an outer class per
    proto) and a ``…Grpc`` class per service, with google.rpc's ``Status`` and error details
    (``com.google.rpc``). The messages are for the protobuf-java of ``protoc``'s version, the
    service classes for grpc-java of ``plugin``'s or later. Returns the files."""
    out.mkdir(parents=True, exist_ok=True)
    grpc = [f"--plugin=protoc-gen-grpc-java={plugin}", f"--grpc-java_out={out}"]
    _protoc(protoc, PROTO_ROOT, [f"--java_out={out}", *grpc], _relative_protos())
    _protoc(protoc, rpc_root(), [f"--java_out={out}"], RPC_PROTOS)
    return sorted(p for p in out.rglob("*.java"))


def write_java(out: Path = JAVA_STUBS) -> int:
    """Regenerates ``out`` (clients/stubs/java: nothing else lives there) from scratch;
    returns how many files it wrote."""
    protoc, why = java_protoc()
    plugin, why_plugin = java_grpc_plugin()
    if protoc is None or plugin is None:
        raise RuntimeError(f"java: {why or why_plugin}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        fresh = Path(tmp) / "java"
        count = len(generate_java(fresh, protoc, plugin))
        shutil.rmtree(out, ignore_errors=True)
        fresh.rename(out)
    return count


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
    if "java" in languages:
        why = java_missing()
        if why:
            print(f"java: skipped, {why}")
            failed = failed or bool(args.lang)
        else:
            protoc = java_protoc()[0]
            assert protoc is not None
            print(
                f"java: generated {write_java()} files into {JAVA_STUBS.relative_to(REPO_ROOT)} "
                f"(messages for protobuf-java {protoc_version(protoc)}, from {protoc})"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
