"""Generates the Python gRPC stubs from proto/ into shared/episodic/v1/.

Run with ``python -m episodic.devtools.protogen``. The test suite regenerates into a
temporary folder and compares, so committed stubs can never drift from the protos.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
PROTO_ROOT = REPO_ROOT / "proto"
STUB_ROOT = REPO_ROOT / "shared"


def proto_files() -> list[Path]:
    return sorted((PROTO_ROOT / "episodic" / "v1").glob("*.proto"))


def generate(out_dir: Path) -> list[Path]:
    """Runs protoc for every proto file into ``out_dir``; returns the generated files."""
    import grpc_tools
    from grpc_tools import protoc

    wkt = Path(grpc_tools.__file__).parent / "_proto"
    out_dir.mkdir(parents=True, exist_ok=True)
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{wkt}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *[str(p.relative_to(PROTO_ROOT)) for p in proto_files()],
    ]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed; see its output above")
    generated = sorted((out_dir / "episodic" / "v1").glob("*_pb2*.py*"))
    return generated


def main() -> int:
    files = generate(STUB_ROOT)
    init = STUB_ROOT / "episodic" / "v1" / "__init__.py"
    if not init.exists():
        init.write_text('"""Generated protobuf and gRPC stubs for episodic.v1 (do not edit)."""\n')
    print(f"generated {len(files)} files into {STUB_ROOT / 'episodic' / 'v1'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
