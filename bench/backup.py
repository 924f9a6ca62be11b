"""The logical backup's speed: `Ledger.export` and `Ledger.restore` (the replay through the
write path) of a built store, beside the time the store took to build the same way.

    python bench/backup.py                 # 10,000 keys x 10 evidence rows (100,000 rows)
    python bench/backup.py --keys 100000   # the 1M-row store of `e2e.py --scale` (long)

It builds a SQLite store with `e2e.py`'s `build_store` (ten competing pieces of evidence per
key, through `Ledger.ingest` in batches of 5,000 rows), exports it to a file (no gRPC),
imports the file into a fresh store with the same node id, and checks that every key's
served belief is the same on both. The baseline is the build itself: the same rows through
the same write path, in large batches. `import_over_build` is import seconds over build
seconds (the replay decides each original transaction as its own, so it is slower than a
bulk build where the store was written in small transactions). Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e import build_store

from factnode.config import Settings
from factnode.core import Policy
from factnode.ledger import Ledger
from factnode.store import SqlRepository
from factnode.testing import FakeClock


def _ledger(data_dir: Path, node_id: str | None = None) -> Ledger:
    repo = SqlRepository(Settings(data_dir=data_dir).db_url)
    with repo.read() as tx:
        stored = tx.meta("node_id")
    return Ledger(repo, Policy(), node_id or stored or "node-scale", FakeClock())


def _served(ledger: Ledger) -> dict[object, tuple[str, str, str]]:
    """Every served belief, by key (the bench's namespaces are scale:0..99)."""
    out: dict[object, tuple[str, str, str]] = {}
    for n in range(100):
        token = ""
        while True:
            page = ledger.list_beliefs(f"scale:{n}", page_size=1000, page_token=token)
            for b in page.items:
                out[b.key] = (b.version_id, b.state.value, b.rule.value)
            token = page.next_page_token
            if not token:
                break
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=10_000, help="keys (10 evidence rows each)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="factnode-backup-bench-") as tmp:
        root = Path(tmp)
        build_seconds = build_store(root / "a", args.keys)
        original = _ledger(root / "a")
        t0 = time.perf_counter()
        path = root / "export.jsonl"
        with path.open("wb") as fh:
            for line in original.export():
                fh.write(line)
        export_seconds = time.perf_counter() - t0
        (root / "b").mkdir()
        restored = _ledger(root / "b", original.node_id)
        with restored.repo.write() as tx:
            tx.set_meta("node_id", original.node_id)
        t0 = time.perf_counter()
        with path.open("rb") as fh:
            done = restored.restore(fh)
        import_seconds = time.perf_counter() - t0
        same = _served(original) == _served(restored)
        result = {
            "rows": done.evidence,
            "build_seconds": round(build_seconds, 1),
            "export_seconds": round(export_seconds, 1),
            "export_mb": round(path.stat().st_size / 1e6, 1),
            "import_seconds": round(import_seconds, 1),
            "import_over_build": round(import_seconds / build_seconds, 2),
            "export_rows_per_s": round(done.evidence / export_seconds),
            "import_rows_per_s": round(done.evidence / import_seconds),
            "same_beliefs": same,
            "load_avg_1m": os.getloadavg()[0],
        }
        print(
            f"{done.evidence:,} rows: build {build_seconds:.1f} s, export {export_seconds:.1f} s "
            f"({result['export_mb']} MB), import {import_seconds:.1f} s; same beliefs: {same}"
        )
        print(json.dumps(result))


if __name__ == "__main__":
    main()
