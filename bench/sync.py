"""Federation sync cost over in-process links: idle rounds, rounds after changes, convergence.

    python bench/sync.py [--quick] [--erasures N]

Measures, on `factnode.testing.Federation` (real ledgers on in-memory SQLite, every message
serialized; `InProcessLink.bytes` counts requests and replies):

1. Bytes of an idle round between two nodes holding the same 1,000 and 100,000 keys.
   Both ledgers ingest the very same evidence objects, so they start with the same
   evidence; each node's own votes are still its own, and syncing them is part of the
   protocol, so one round (reported) exchanges them before idle rounds are measured.
   Section 7 expects the two idle figures to be about equal.
2. Bytes after 10, 100 and 1,000 changes among the 100,000 keys: each change is a new,
   stronger version of a distinct key submitted on one node (the one that syncs second,
   so the other pulls the changes first), so its evidence, that node's vote and then the
   other node's vote all move. Rounds run until idle again; the confirming idle round is
   not counted. Bytes per change should be about constant (proportional to the changes):
   within a factor PROPORTION_LIMIT from the fewest changes to the most.
3. Full rounds until 3, 5 and 9 nodes, each starting with its own facts (some keys
   shared, with conflicting versions), hold equal digests (evidence, tombstones, erasure
   receipts and every voter's votes) and a further round moves nothing.
4. Bytes of an idle round between two nodes holding no erasure, then, in the same
   federation, holding `--erasures` (10,000; 1,000 with --quick) erasures with every
   member's receipt of each: both nodes hold 1,000 keys, node a's operator erases N other
   keys (held nowhere: see `erasures_held`) one key at a time, rounds run until idle (node
   b applies each tombstone and signs its receipt, and the receipts cross), and every
   erasure must then be confirmed by both members on both; first 100 erasures, then N.
   Receipts sync in a digest set of their own (DIGEST_SET_RECEIPTS), so an idle round
   compares one more root digest whatever N is: the idle figure with N erasures should be
   about the one with 100 (within IDLE_RATIO_LIMIT), and above the one with none by only
   those roots' hash and count.

Readable figures go first; the last line of output is one JSON object of all figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import platform
import random
import sys
import time
from typing import Any

from factnode.core import MICROS_PER_DAY, Evidence, Policy, Submission
from factnode.federation._index import index_of
from factnode.testing import FakeClock, Federation

SEED = 20240611
START = 20_000 * MICROS_PER_DAY  # FakeClock's default "now"
INGEST_BATCH = 5000
IDLE_ROUNDS = 3
# Changes land on the node that syncs second, so the first round pulls them, as a peer would.
CHANGER = "b"
MAX_ROUNDS = 30
IDLE_RATIO_LIMIT = 1.25  # "about equal": the large idle round within 25% of the small one
PROPORTION_LIMIT = 2.0  # "proportional": bytes per change within a factor 2 across sizes

FULL = {
    "keys": (1_000, 100_000),
    "changes": (10, 100, 1_000),
    "nodes": (3, 5, 9),
    "facts": 150,
    "erasures": 10_000,
}
QUICK = {
    "keys": (1_000, 10_000),
    "changes": (10, 100),
    "nodes": (3, 5, 9),
    "facts": 30,
    "erasures": 1_000,
}
ERASURE_BASE_KEYS = 1_000  # keys held beside the erased ones in section 4
FEW_ERASURES = 100  # section 4's first step: flatness is N erasures held against these


def say(text: str) -> None:
    print(text, flush=True)


def total_bytes(fed: Federation) -> int:
    return sum(link.bytes for link in fed.links.values())


def total_calls(fed: Federation) -> dict[tuple[str, str], int]:
    return {pair: link.calls for pair, link in fed.links.items()}


async def measured_round(fed: Federation) -> tuple[int, bool]:
    """One full round (every node syncs with its peers): bytes moved, and whether it was idle.

    Idle means every exchange stopped at the root digests: one GetDigest request and its
    reply per link used, nothing pulled or pushed."""
    before_bytes, before_calls = total_bytes(fed), total_calls(fed)
    await fed.round()
    after_calls = total_calls(fed)
    idle = all(after_calls[p] - before_calls[p] in (0, 2) for p in after_calls)
    return total_bytes(fed) - before_bytes, idle


def digests_equal(fed: Federation) -> bool:
    """Every node holds the same evidence, tombstones, erasure receipts and votes of every
    voter."""
    ledgers = list(fed.ledgers.values())
    views = [
        (
            index_of(lg).evidence.bucket(""),
            index_of(lg).tombstones.bucket(""),
            index_of(lg).receipts.bucket(""),
            tuple(index_of(lg).votes(v).bucket("") for v in sorted(fed.ledgers)),
        )
        for lg in ledgers
    ]
    return all(v == views[0] for v in views)


async def rounds_until_idle(fed: Federation) -> tuple[int, int, list[int]]:
    """Rounds until digests are equal and a further round moves nothing.

    Returns (rounds that did work, total bytes including the confirming idle round,
    bytes of each round)."""
    per_round: list[int] = []
    for _ in range(MAX_ROUNDS):
        moved, idle = await measured_round(fed)
        per_round.append(moved)
        if idle and digests_equal(fed):
            return len(per_round) - 1, sum(per_round), per_round
    raise RuntimeError(f"no convergence after {MAX_ROUNDS} rounds: {per_round}")


# -- workload ----------------------------------------------------------------------


def base_evidence(fed: Federation, n_keys: int, rng: random.Random) -> list[Evidence]:
    """One fact per key, built once: both nodes ingest these same objects."""
    builder = fed.ledgers[sorted(fed.ledgers)[0]]
    now = fed.clock.now()
    return [
        builder.evidence_of(
            Submission(
                "bench",
                f"subject-{i}",
                ("lives_in", "works_at", "title")[i % 3],
                f"value-{rng.randrange(1_000_000)}",
                "agent_observed",
                f"bench:agent-{rng.randrange(5)}",
                worth=rng.randrange(5, 11) / 10,
                confidence=0.9,
                valid_from=now - rng.randrange(1, 90) * MICROS_PER_DAY,
            ),
            recorded_at=now,
        )
        for i in range(n_keys)
    ]


def load(fed: Federation, evidence: list[Evidence]) -> float:
    """Ingests the same evidence on every node in large batches; returns seconds."""
    t0 = time.perf_counter()
    for ledger in fed.ledgers.values():
        for i in range(0, len(evidence), INGEST_BATCH):
            ledger.ingest([(e, None) for e in evidence[i : i + INGEST_BATCH]])
        index_of(ledger)  # built from the store on first use: not part of any round
    return time.perf_counter() - t0


def change(
    fed: Federation, node: str, evidence: list[Evidence], n: int, rng: random.Random, tag: str
) -> None:
    """`n` distinct keys get a stronger version on `node`: a new belief and a new vote there."""
    ledger = fed.ledgers[node]
    subs = [
        Submission(
            e.key.namespace,
            e.key.subject,
            e.key.predicate,
            f"changed-{tag}-{i}",
            "api_response",  # outranks agent_observed
            "bench:changer",
            worth=0.9,
            confidence=0.9,
            valid_from=fed.clock.now() - MICROS_PER_DAY,
        )
        for i, e in enumerate(rng.sample(evidence, n))
    ]
    ledger.submit_many(subs)


# -- 1 and 2: two nodes --------------------------------------------------------------


async def two_nodes(n_keys: int, changes: tuple[int, ...], rng: random.Random) -> dict[str, Any]:
    """Idle bytes with `n_keys` keys in sync, then the cost of each batch of changes."""
    fed = Federation(["a", "b"], FakeClock(START), Policy(), seed=SEED)
    try:
        evidence = base_evidence(fed, n_keys, rng)
        load_s = load(fed, evidence)
        say(f"  {n_keys:>7,} keys: loaded on both nodes in {load_s:.1f}s")

        t0 = time.perf_counter()
        first, _ = await measured_round(fed)
        votes_s = time.perf_counter() - t0
        extra, _, _ = await rounds_until_idle(fed)
        say(
            f"           first round (each node's own {n_keys:,} votes to the other): "
            f"{first:,} B in {votes_s:.1f}s; {extra} more round(s) before idle"
        )
        idle = []
        for _ in range(IDLE_ROUNDS):
            moved, was_idle = await measured_round(fed)
            assert was_idle, "a round after convergence did more than compare roots"
            idle.append(moved)
        out: dict[str, Any] = {
            "keys": n_keys,
            "load_seconds": round(load_s, 1),
            "vote_exchange_bytes": first,
            "vote_exchange_seconds": round(votes_s, 1),
            "idle_round_bytes": max(idle),
        }
        say(f"           idle round: {max(idle):,} B (both nodes sync once with the other)")

        per_change: dict[str, Any] = {}
        for n in changes:
            change(fed, CHANGER, evidence, n, rng, f"n{n}")
            t0 = time.perf_counter()
            rounds, moved, per_round = await rounds_until_idle(fed)
            seconds = time.perf_counter() - t0
            # The confirming idle round is the protocol's floor, not the changes' cost.
            cost = moved - per_round[-1]
            per_change[str(n)] = {
                "rounds": rounds,
                "bytes": cost,
                "bytes_first_round": per_round[0],
                "bytes_per_change": round(cost / n),
                "seconds": round(seconds, 1),
            }
            say(
                f"           {n:>5,} changes: {cost:,} B over {rounds} round(s) "
                f"(first {per_round[0]:,} B), {cost / n:,.0f} B per change, {seconds:.1f}s"
            )
        if per_change:
            out["changes"] = per_change
        return out
    finally:
        fed.close()


# -- 3. convergence ------------------------------------------------------------------


def distinct_facts(fed: Federation, facts: int, rng: random.Random) -> None:
    """Each node submits its own facts: a third on keys every node shares, in conflict."""
    nodes = sorted(fed.ledgers)
    now = fed.clock.now()
    shared = [f"shared-{i}" for i in range(max(facts // 3, 1))]
    for node in nodes:
        subs = []
        for i in range(facts):
            subject = rng.choice(shared) if i % 3 == 0 else f"{node}-own-{i}"
            subs.append(
                Submission(
                    "bench",
                    subject,
                    "lives_in",
                    f"value-{rng.randrange(4)}" if subject in shared else f"value-{i}",
                    rng.choice(("agent_observed", "api_response", "document_extracted")),
                    f"bench:{node}",
                    worth=rng.randrange(3, 11) / 10,
                    confidence=0.9,
                    valid_from=now - rng.randrange(1, 90) * MICROS_PER_DAY,
                )
            )
        # A node may draw the same shared key twice: keep one fact per key and value.
        unique = {(s.subject, s.object, s.attribution, s.valid_from): s for s in subs}
        fed.ledgers[node].submit_many(list(unique.values()))


async def convergence(
    n_nodes: int, facts: int, rng: random.Random, fanout: int = 0
) -> dict[str, Any]:
    fed = Federation([f"n{i}" for i in range(n_nodes)], FakeClock(START), fanout=fanout, seed=SEED)
    try:
        distinct_facts(fed, facts, rng)
        t0 = time.perf_counter()
        rounds, moved, per_round = await rounds_until_idle(fed)
        seconds = time.perf_counter() - t0
        how = f"fanout {fanout}" if fanout else "every peer"
        say(
            f"  {n_nodes} nodes ({how}): converged in {rounds} round(s), {moved:,} B, "
            f"{seconds:.1f}s; bytes per round {per_round}"
        )
        return {"nodes": n_nodes, "fanout": fanout, "rounds": rounds, "bytes": moved}
    finally:
        fed.close()


# -- 4. erasures held -----------------------------------------------------------------


async def idle_bytes(fed: Federation) -> int:
    """The largest of IDLE_ROUNDS idle rounds, each of which must stop at the root digests."""
    idle = []
    for _ in range(IDLE_ROUNDS):
        moved, was_idle = await measured_round(fed)
        assert was_idle, "a round after convergence did more than compare roots"
        idle.append(moved)
    return max(idle)


async def erasures_held(n_erasures: int, rng: random.Random) -> dict[str, Any]:
    """Idle bytes between two nodes holding no erasure, then FEW_ERASURES and `n_erasures`
    erasures with both members' receipts of each, in one federation."""
    fed = Federation(["a", "b"], FakeClock(START), Policy(), seed=SEED)
    try:
        evidence = base_evidence(fed, ERASURE_BASE_KEYS + n_erasures, rng)
        # The erased keys are held nowhere (each receipt says it removed none): on SQLite
        # 3.40 FTS5 reports "database disk image is malformed" at the 1,002nd 'optimize'
        # after a delete (`SqlSearch.unindex`), so a node cannot erase 10,000 held keys
        # one by one. What an idle round compares is the same either way.
        load(fed, evidence[:ERASURE_BASE_KEYS])
        await rounds_until_idle(fed)
        idle = {0: await idle_bytes(fed)}
        say(f"  no erasure held: idle round {idle[0]:,} B")
        out: dict[str, Any] = {"steps": {}}
        erased = 0
        for held in sorted({min(FEW_ERASURES, n_erasures), n_erasures}):
            t0 = time.perf_counter()
            for e in evidence[ERASURE_BASE_KEYS + erased : ERASURE_BASE_KEYS + held]:
                fed.ledgers["a"].erase(key=e.key, operator="bench", reason="bench")
            erase_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            rounds, moved, per_round = await rounds_until_idle(fed)
            spread_s = time.perf_counter() - t0
            moved -= per_round[-1]  # the confirming idle round is not the erasures' cost
            for node, ledger in fed.ledgers.items():
                with ledger.repo.read() as tx:
                    receipts = list(tx.all_receipts())
                assert len(receipts) == 2 * held, (node, len(receipts))
                assert {r.node for r in receipts} == set(fed.ledgers), node
            idle[held] = await idle_bytes(fed)
            say(
                f"  {held - erased:,} erasures made on a in {erase_s:.1f}s, tombstones and both "
                f"members' receipts on both after {rounds} round(s), {moved:,} B, "
                f"{spread_s:.1f}s; {held:,} held ({2 * held:,} receipts): idle round "
                f"{idle[held]:,} B"
            )
            out["steps"][str(held)] = {
                "erased_seconds": round(erase_s, 1),
                "spread_rounds": rounds,
                "spread_bytes": moved,
                "spread_seconds": round(spread_s, 1),
            }
            erased = held
        few = min(FEW_ERASURES, n_erasures)
        ratio = idle[n_erasures] / idle[few]
        verdict = "flat, as expected" if ratio <= IDLE_RATIO_LIMIT else "NOT flat: investigate"
        say(
            f"  idle round with {n_erasures:,} erasures held vs {few:,}: ratio {ratio:.3f} "
            f"({verdict}); vs none: +{idle[n_erasures] - idle[0]} B (the tombstone and receipt "
            "sets' root digests, empty with none, carry a hash and a count)"
        )
        out.update(
            erasures=n_erasures,
            receipts=2 * n_erasures,
            idle_round_bytes={str(n): b for n, b in idle.items()},
            idle_ratio=round(ratio, 3),
        )
        return out
    finally:
        fed.close()


# -- main ----------------------------------------------------------------------------


async def run(sizes: dict[str, Any]) -> dict[str, Any]:
    rng = random.Random(SEED)
    figures: dict[str, Any] = {"seed": SEED, "python": platform.python_version()}

    say("1-2. Two nodes in sync: idle rounds, and rounds after changes")
    small_keys, large_keys = sizes["keys"]
    small = await two_nodes(small_keys, (), rng)
    large = await two_nodes(large_keys, sizes["changes"], rng)
    ratio = large["idle_round_bytes"] / small["idle_round_bytes"]
    figures["idle_round_bytes"] = {
        str(small_keys): small["idle_round_bytes"],
        str(large_keys): large["idle_round_bytes"],
    }
    figures["idle_ratio"] = round(ratio, 3)
    verdict = (
        "about equal, as expected" if ratio <= IDLE_RATIO_LIMIT else "NOT about equal: investigate"
    )
    say(f"  idle round {large_keys:,} vs {small_keys:,} keys: ratio {ratio:.3f} ({verdict})")
    figures["vote_exchange"] = {
        str(s["keys"]): {"bytes": s["vote_exchange_bytes"], "seconds": s["vote_exchange_seconds"]}
        for s in (small, large)
    }
    figures["changes"] = large["changes"]
    per = [c["bytes_per_change"] for c in large["changes"].values()]
    spread = max(per) / min(per)
    figures["bytes_per_change_spread"] = round(spread, 2)
    verdict = "proportional" if spread <= PROPORTION_LIMIT else "NOT proportional: investigate"
    say(f"  bytes per change {per}: spread x{spread:.2f} ({verdict})")

    say("3. Rounds to converge from different facts")
    figures["converge"] = {}
    for n in sizes["nodes"]:
        c = await convergence(n, sizes["facts"], rng)
        figures["converge"][str(n)] = {"rounds": c["rounds"], "bytes": c["bytes"]}
    c = await convergence(max(sizes["nodes"]), sizes["facts"], rng, fanout=2)
    figures["converge"][f"{c['nodes']}_fanout2"] = {"rounds": c["rounds"], "bytes": c["bytes"]}

    if sizes["erasures"]:
        say("4. Idle rounds with erasures and their receipts held, against none")
        figures["erasures_held"] = await erasures_held(sizes["erasures"], rng)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument(
        "--erasures",
        type=int,
        help="erasures (with every member's receipts) held in section 4 (default: "
        f"{FULL['erasures']:,}, {QUICK['erasures']:,} with --quick; 0 skips it)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)  # a failed or timed-out round shows
    sizes = dict(QUICK if args.quick else FULL)
    if args.erasures is not None:
        if args.erasures < 0:
            parser.error("--erasures: must not be negative")
        sizes["erasures"] = args.erasures
    t0 = time.perf_counter()
    figures = asyncio.run(run(sizes))
    figures["quick"] = args.quick
    figures["seconds"] = round(time.perf_counter() - t0, 1)
    say(f"total {figures['seconds']}s")
    print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
