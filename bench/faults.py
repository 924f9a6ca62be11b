"""A fault campaign by hand: N real nodes, a seeded client workload and nemesis, a checker.

    python bench/faults.py --seed 1                      # 3 nodes, 1 minute, SQLite
    python bench/faults.py --seed 1 --nodes 5 --minutes 10
    python bench/faults.py --seed 1 --postgres           # needs FACTNODE_TEST_POSTGRES_URL
    python bench/faults.py --seed 1 --seconds 20 --within-allowance   # as the CI campaign

The same seed replays the same schedule of faults and the same client operations (what the
nodes answer still depends on timing). It prints the seed and the schedule first, then the
counts (operations, acknowledged facts, faults injected by kind, rounds to converge after
the last heal) and, on a failure, the operations and faults touching the failing keys; it
exits 1 on a failure. The last line is one JSON object of the figures. The campaign itself
lives in tests/faults/ (`_campaign.run_campaign`), which the CI tests run too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "faults"))

from _campaign import Report, plan, run_campaign
from _cluster import POSTGRES_ENV


def figures(report: Report, seconds: float) -> dict[str, object]:
    """The run's figures, for the last line."""
    return {
        "seed": report.seed,
        "nodes": report.nodes,
        "store": "postgresql" if report.postgres else "sqlite",
        "schedule_seconds": seconds,
        "wall_seconds": round(report.seconds, 1),
        "operations": dict(report.ops),
        "acknowledged": report.acknowledged,
        "faults_injected": dict(report.injected),
        "faults_skipped": report.skipped,
        "rounds_to_converge": report.rounds_to_converge,
        "violations": len(report.violations),
        "checked": dict(report.checked),
        "notes": report.notes,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--nodes", type=int, default=3)
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--minutes", type=float, help="length of the fault schedule")
    length.add_argument("--seconds", type=float, help="length of the fault schedule")
    parser.add_argument(
        "--within-allowance",
        action="store_true",
        help="keep clock offsets within the allowance, as the CI campaign does",
    )
    parser.add_argument(
        "--postgres", action="store_true", help=f"stores on PostgreSQL ({POSTGRES_ENV})"
    )
    parser.add_argument(
        "--workdir", type=Path, help="where the nodes live (default: a new temp dir)"
    )
    args = parser.parse_args()
    if args.nodes < 2:
        parser.error("--nodes: at least 2 nodes make a federation")
    if args.postgres and not os.environ.get(POSTGRES_ENV):
        parser.error(
            f"--postgres needs {POSTGRES_ENV} (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test)"
        )
    seconds = args.seconds or (args.minutes or 1.0) * 60
    beyond = not args.within_allowance
    _, _, schedule = plan(args.seed, args.nodes, seconds, beyond)
    print(f"seed {args.seed}: {args.nodes} nodes, {seconds:g}s schedule, {len(schedule)} faults")
    for fault in schedule:
        print(f"  {fault.describe()}")
    sys.stdout.flush()
    root = args.workdir or Path(tempfile.mkdtemp(prefix="factnode-faults-"))
    report = run_campaign(
        root,
        args.seed,
        nodes=args.nodes,
        seconds=seconds,
        postgres=args.postgres,
        beyond_allowance=beyond,
    )
    print(report.summary())
    if report.violations:
        print("FAILED: minimal failing history")
        print(report.failing)
    print(json.dumps(figures(report, seconds), sort_keys=True))
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
