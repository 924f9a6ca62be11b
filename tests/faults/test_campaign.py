"""Fault campaigns against real nodes (specification §9): partitions, crashes, pauses, clocks and a
full disk while clients write, erase and read; then heal, converge and judge the history.

Each campaign prints its counts. A failure prints the seed, the schedule and the operations
and faults touching the failing keys; `python bench/faults.py --seed N` replays it.
"""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path

import pytest
from _campaign import Report, Sabotage, run_campaign
from _checker import Judge
from _cluster import POSTGRES_ENV, Cluster
from _history import History
from _schedule import FAULT_KINDS, draw_schedule

# Two fixed seeds that each draw every kind of fault the CI campaign uses, and one new seed
# per run. Seed 2 found a node keeping a vote waiting for evidence a key erasure had taken
# everywhere (tests/integration/test_erasure_votes.py pins the fix). Clock offsets stay
# within the allowance here: beyond it, an erasure's reach can differ between nodes (a strict
# xfail in test_clock_beyond_allowance.py); the campaign by hand (bench/faults.py) draws
# them by default.
FIXED_SEEDS = (1, 2)
RANDOM_SEED = random.SystemRandom().randrange(1_000, 1_000_000)
SECONDS = 20.0  # each campaign's schedule; with start, convergence and checks about 35 s
CAMPAIGN_TIMEOUT = 240


def judged(report: Report) -> str:
    """The report as printed, and what to run to replay it."""
    return (
        f"{report.summary()}\nschedule:\n{report.schedule_text()}\n{report.failing}\n"
        f"replay: python bench/faults.py --seed {report.seed} --nodes {report.nodes} "
        f"--seconds {SECONDS:g} --within-allowance{' --postgres' if report.postgres else ''}"
    )


def show(report: Report, capsys: pytest.CaptureFixture[str]) -> None:
    """Prints the campaign's counts into the test log, captured or not."""
    with capsys.disabled():
        print(f"\n{report.summary()}")


@pytest.mark.slow
@pytest.mark.timeout(CAMPAIGN_TIMEOUT)
@pytest.mark.parametrize(
    "seed",
    [*FIXED_SEEDS, RANDOM_SEED],
    ids=[*(f"seed{s}" for s in FIXED_SEEDS), f"random-seed{RANDOM_SEED}"],
)
def test_a_campaign_keeps_every_promise(
    seed: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three SQLite nodes under a seeded nemesis lose nothing acknowledged, keep nothing
    erased, serve what the core computes from their evidence, and converge after healing."""
    report = run_campaign(tmp_path, seed, nodes=3, seconds=SECONDS, beyond_allowance=False)
    show(report, capsys)
    assert not report.violations, judged(report)
    assert report.acknowledged > 0 and sum(report.injected.values()) > 0, judged(report)
    assert report.rounds_to_converge is not None


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.timeout(CAMPAIGN_TIMEOUT)
def test_a_campaign_on_postgresql_keeps_every_promise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same campaign with each node on its own fresh PostgreSQL database (the disk
    fault skips: the data is not in a data directory)."""
    if not os.environ.get(POSTGRES_ENV):
        pytest.skip(f"{POSTGRES_ENV} is not set: the PostgreSQL campaign is skipped")
    report = run_campaign(
        tmp_path, FIXED_SEEDS[0], nodes=3, seconds=SECONDS, postgres=True, beyond_allowance=False
    )
    show(report, capsys)
    assert not report.violations, judged(report)
    assert report.acknowledged > 0


def drop_one_acknowledged_fact(dropped: list[str]) -> Sabotage:
    """A sabotage: deletes one acknowledged fact that must be held from the store of the
    node that acknowledged it, as a node that loses a write would."""

    def sabotage(cluster: Cluster, history: History) -> None:
        judge = Judge(history.ops)
        fact = next(f for f in judge.acks if f.kind == "submit" and not judge.may_be_erased(f))
        db = sqlite3.connect(cluster[fact.node].data_dir / "factnode.db")
        try:
            with db:
                gone = db.execute(
                    "DELETE FROM evidence WHERE evidence_id = ?", (fact.result["evidence"],)
                ).rowcount
        finally:
            db.close()
        assert gone == 1
        dropped.extend([fact.node, fact.result["evidence"]])

    return sabotage


@pytest.mark.slow
@pytest.mark.timeout(CAMPAIGN_TIMEOUT)
def test_the_checker_fails_when_a_node_loses_an_acknowledged_fact(tmp_path: Path) -> None:
    """A node that loses one acknowledged fact (deleted from its store after the run) fails
    the checker, which names that node, that evidence and the key's history."""
    dropped: list[str] = []
    report = run_campaign(
        tmp_path,
        7,
        nodes=3,
        seconds=6.0,
        beyond_allowance=False,
        sabotage=drop_one_acknowledged_fact(dropped),
    )
    node, evidence = dropped
    lost = [v for v in report.violations if v.check == "ack-lost"]
    assert [(v.node, evidence in v.detail) for v in lost] == [(node, True)], judged(report)
    assert evidence in report.failing and "operations on the failing keys" in report.failing


def test_a_seed_draws_the_same_schedule_and_another_seed_another() -> None:
    """The nemesis schedule is a function of the seed: replaying a seed replays its faults."""
    nodes = ["n1", "n2", "n3"]
    one = draw_schedule(11, nodes, 60.0, disk_node="n1", clock_node="n2")
    assert one == draw_schedule(11, nodes, 60.0, disk_node="n1", clock_node="n2")
    assert one != draw_schedule(12, nodes, 60.0, disk_node="n1", clock_node="n2")
    assert {f.kind for f in one} == set(FAULT_KINDS), "a minute draws every kind of fault"


def test_a_partition_cuts_both_ways_between_its_sides_and_nothing_else() -> None:
    """An isolated node loses every link both ways; a bridge keeps its links to both sides."""
    nodes = ["n1", "n2", "n3", "n4", "n5"]
    faults = draw_schedule(5, nodes, 120.0, disk_node="n1", clock_node="n1")
    isolate = next(f for f in faults if f.kind == "isolate")
    alone = isolate.groups[0][0]
    assert set(isolate.cut_pairs()) == {
        p for n in nodes if n != alone for p in ((alone, n), (n, alone))
    }
    bridge = next(f for f in faults if f.kind == "bridge")
    middle = bridge.groups[0][0]
    assert all(middle not in pair for pair in bridge.cut_pairs())
    assert len(bridge.cut_pairs()) == 2 * len(bridge.groups[1]) * len(bridge.groups[2])
