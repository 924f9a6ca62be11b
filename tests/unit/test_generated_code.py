"""The committed gRPC code in node/api/v1 is exactly what proto/generate.py produces."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
GENERATOR = REPO_ROOT / "proto" / "generate.py"
API_PACKAGE = Path("node/api/v1")
# Every file protoc writes ends in one of these; __init__.py files are hand-written.
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi")

_TOOLS = ("grpc_tools", "mypy_protobuf")

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in _TOOLS),
    reason="grpcio-tools or mypy-protobuf is not installed (pip install -e '.[test]'), "
    "so the code cannot be regenerated",
)


def _generated(root: Path) -> dict[str, Path]:
    folder = root / API_PACKAGE
    return {
        p.name: p
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name.endswith(GENERATED_SUFFIXES)
    }


def test_committed_generated_code_matches_a_fresh_generation(tmp_path: Path) -> None:
    """Regenerating from proto/ gives the committed files byte for byte, and no others."""
    run = subprocess.run(
        [sys.executable, str(GENERATOR), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, f"proto/generate.py failed:\n{run.stderr}"

    fresh = _generated(tmp_path)
    committed = _generated(REPO_ROOT)
    assert fresh, "proto/generate.py wrote no files"
    fix = "run `python proto/generate.py` and commit the result"
    missing, stale = sorted(set(fresh) - set(committed)), sorted(set(committed) - set(fresh))
    assert not (missing or stale), (
        f"generated files in {API_PACKAGE}: missing {missing}, stale {stale}; {fix}"
    )
    differing = [
        name for name, path in fresh.items() if path.read_bytes() != committed[name].read_bytes()
    ]
    assert not differing, f"out of date in {API_PACKAGE}: {', '.join(differing)}; {fix}"
