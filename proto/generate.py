"""Regenerates the committed gRPC code in node/api/v1 from the .proto files in proto/.

Usage: python proto/generate.py [--out DIR]   (DIR defaults to the repository root)

Needs grpcio-tools, and mypy-protobuf for the typed service stubs (*_pb2_grpc.pyi).
The .proto folders mirror the import name (factnode/api/v1), so generated modules import
each other as factnode.api.v1.xxx_pb2 and nothing is rewritten afterwards; the files land
in node/api/v1, the folder that installs as factnode.api.v1.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent
REPO_ROOT = PROTO_ROOT.parent
PROTO_PACKAGE = Path("factnode/api/v1")
# Where the package `factnode` lives in the repository (pyproject.toml maps it).
SOURCE_PACKAGE = Path("node/api/v1")
MYPY_GRPC_PLUGIN = "protoc-gen-mypy_grpc"


def proto_files() -> list[Path]:
    """The .proto sources, in a stable order."""
    return sorted((PROTO_ROOT / PROTO_PACKAGE).glob("*.proto"))


def find_mypy_grpc_plugin() -> str | None:
    """The mypy-protobuf service-stub plugin: beside this interpreter first, then on PATH."""
    beside = Path(sys.executable).parent / MYPY_GRPC_PLUGIN
    if beside.is_file():
        return str(beside)
    return shutil.which(MYPY_GRPC_PLUGIN)


def generate(out: Path) -> None:
    """Writes the generated modules under `out` (node/api/v1/...); raises on any protoc error."""
    with tempfile.TemporaryDirectory() as tmp:
        _protoc(Path(tmp))
        target = out / SOURCE_PACKAGE
        target.mkdir(parents=True, exist_ok=True)
        for f in sorted((Path(tmp) / PROTO_PACKAGE).iterdir()):
            shutil.copyfile(f, target / f.name)


def _protoc(out: Path) -> None:
    """Runs protoc with the Python, stub and service-stub plugins into `out`."""
    from grpc_tools import protoc  # type: ignore[import-untyped]

    plugin = find_mypy_grpc_plugin()
    if plugin is None:
        raise RuntimeError(f"{MYPY_GRPC_PLUGIN} not found: pip install mypy-protobuf")
    out.mkdir(parents=True, exist_ok=True)
    well_known = resources.files("grpc_tools") / "_proto"
    args = [
        "grpc_tools.protoc",
        f"--proto_path={PROTO_ROOT}",
        f"--proto_path={well_known}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        f"--plugin={MYPY_GRPC_PLUGIN}={plugin}",
        f"--mypy_grpc_out={out}",
        *(str(p) for p in proto_files()),
    ]
    code = protoc.main(args)
    if code != 0:
        raise RuntimeError(f"protoc failed with exit code {code}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=REPO_ROOT, help="output root (default: the repository root)"
    )
    ns = parser.parse_args(argv)
    try:
        generate(ns.out.resolve())
    except RuntimeError as exc:
        print(f"generate.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
