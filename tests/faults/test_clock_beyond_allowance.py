"""Defects the fault campaign found with a clock offset beyond the allowance (seed 3's
`clock-beyond` fault, `python bench/faults.py --seed 3 --seconds 20`), kept as regression
tests.

Both came from ordering or bounding by a node's wall clock: a vote was ordered by its
`cast_at`, which a receiver refused beyond the allowance in its future; a tombstone's
`erased_at` beyond it was cut to each receiver's own clock on arrival, so receivers differed.
Both are fixed: votes are ordered by the sequence number their voter signs (specification §7);
a receiver keeps such a tombstone as signed and gossips a signed bound, its clock when it
applied it, which decides coverage of the evidence it originates only, so every node judges
alike (specification §6, `factnode.core.erasure_bounds`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from _campaign import converge
from _checker import read_store
from _cluster import Cluster, faketime_library

from factnode.api.v1 import factnode_pb2 as pb

AHEAD = 600  # seconds: twice the allowance
K = pb.Key(namespace="skew:a", subject="ana", predicate="lives_in")
F = TypeVar("F", bound=Callable[..., None])


def regression(test: F) -> F:
    """A real-node scenario of a fixed defect: slow, needs libfaketime."""
    for m in (
        pytest.mark.skipif(
            faketime_library() is None,
            reason="libfaketime is not installed (apt-get install faketime)",
        ),
        pytest.mark.timeout(180),
        pytest.mark.slow,
    ):
        test = m(test)
    return test


def submit(cluster: Cluster, node: str, value: str, source: str) -> str:
    fact = pb.FactInput(key=K, object=value, anchor="user_stated", source=source)
    reply = cluster[node].facts.SubmitFact(pb.SubmitFactRequest(fact=fact), timeout=15)
    return str(reply.evidence_id)


def set_clock(cluster: Cluster, node: str, offset: int) -> None:
    n = cluster[node]
    n.stop()
    n.clock_offset = offset
    n.restart()


def evidence_held(cluster: Cluster) -> dict[str, set[str]]:
    """Each stopped node's active evidence ids."""
    now = time.time_ns() // 1000
    return {
        n.node_id: set(read_store(n.node_id, f"sqlite:///{n.data_dir}/factnode.db", now).evidence)
        for n in cluster.nodes.values()
    }


@regression
def test_votes_cast_by_a_clock_beyond_the_allowance_converge_once_the_clock_is_right(
    tmp_path: Path,
) -> None:
    """After a node's clock ran 10 minutes ahead and was set right, its votes reach every
    peer within a bounded number of sync rounds."""
    cluster = Cluster(tmp_path, ["n1", "n2"], seed=0)
    cluster["n2"].clock_offset = AHEAD
    try:
        cluster.start()
        submit(cluster, "n2", "porto", "skew-vote")
        cluster["n1"].sync()
        set_clock(cluster, "n2", 0)
        rounds, differing = converge(cluster)
        assert rounds is not None, f"no convergence: {differing}"
    finally:
        cluster.close()


@regression
def test_an_erasure_from_a_clock_beyond_the_allowance_leaves_every_node_the_same_evidence(
    tmp_path: Path,
) -> None:
    """A key erasure made on a node 10 minutes ahead, reaching two peers at different times,
    leaves all three nodes holding the same evidence after healing and converging: evidence
    recorded on n1 after n1 applied the erasure is a later write on every node."""
    cluster = Cluster(tmp_path, ["n1", "n2", "n3"], seed=0)
    cluster["n3"].clock_offset = AHEAD
    try:
        cluster.start()
        cluster.cut(cluster.links_of("n2"))
        erased = cluster["n3"].admin.Erase(pb.EraseRequest(key=K, reason="skew"), timeout=15)
        assert erased.erasure_id
        cluster["n1"].sync("n3")  # n1 bounds the erasure to its clock now
        time.sleep(1.5)
        later = submit(cluster, "n1", "braga", "after-the-erasure")
        time.sleep(1.5)
        cluster.proxy.heal()
        cluster.cut([("n1", "n2"), ("n2", "n1")])
        cluster["n2"].sync("n3")  # n2 bounds it later, past the new evidence
        cluster.heal_network()
        set_clock(cluster, "n3", 0)
        rounds, differing = converge(cluster)
        cluster.stop()
        held = evidence_held(cluster)
        assert rounds is not None, f"no convergence: {differing}; {later} held by " + str(
            sorted(n for n, ids in held.items() if later in ids)
        )
        assert len({frozenset(ids) for ids in held.values()}) == 1, held
        assert all(later in ids for ids in held.values()), held
    finally:
        cluster.close()
