"""A fleet converging from one seed each: rounds against N, bytes per member per round.

    python bench/fleet.py [--sizes 10,30,100] [--keys 200] [--tally-rounds 30] [--quick]
    python bench/fleet.py --merge RUN.json [RUN.json ...]

`--merge` takes the JSON lines of earlier runs (sizes measured apart, e.g. N=100 alone) and
fits, checks and draws their sizes together, as one run over all of them would.

Runs `factnode.testing.Fleet`: N in-process members, each a real ledger on in-memory
SQLite with a real certificate from one CA and a roster, syncing through the real sync
code over `InProcessLink`s (every message serialized; requests and answers counted apart).
Each member starts knowing ONE seed address: member i's seed is a member chosen at random
among members 0..i-1 (member 0's is member 1), so the seed graph is a random tree and the
fleet is connected (a seed chosen among all members can leave the fleet in pieces that no
protocol could join). `--keys` keys each get conflicting evidence (two or three different
values, on two or three random members). Every round, every member runs one sync round at
once (`fanout` 3, partners chosen at random among the members it knows).

For each N it prints:
- rounds until every member holds every member's record AND every piece of evidence
  (so every member's local belief is the same: specification §5's belief is a function of the
  evidence).
- rounds (counted from the start) until every member holds every voter's current signed
  vote (votes travel through any member and count for their signer, specification §7) AND
  every member serves every key the same value, state and tally (who votes for what) as
  every other, so as a node holding everything would: the fleet's promise, which must
  grow like log N. Tried for at most `--tally-rounds` rounds after the first figure.
- bytes each member sends per round (its requests and pushes as caller plus its answers
  as callee), median and max over members and rounds: busy (the rounds until
  convergence) and idle (after convergence: member-rounds in which none of the member's
  exchanges found any bucket differing). Idle bytes must not grow with N.
- vote rows each member stores at the end (median, max).

The members share one process, so by default they share one memo of the signatures found
valid (`share_signature_checks`): a signature's check is a pure function of the signer's
certificate and the signed bytes, so the memo changes no round, byte or row, only the wall
time, which otherwise spends most of N=100's busy rounds checking each of 20,000 votes once
per member, all on one core (a real fleet spreads that over its members' machines).
`--check-each` checks on every member, as a real fleet does.

Fits rounds = a + b ln N by least squares to each of the two round counts (states a, b,
R^2), checks that idle bytes per
member-round at the largest N are within IDLE_LIMIT of the smallest, writes
docs/fleet-rounds.svg, and ends with one JSON line of every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from factnode.core import Key, Submission
from factnode.federation import members
from factnode.federation._index import index_of
from factnode.federation.trust import Identity
from factnode.ledger import NotFound
from factnode.testing import Fleet

SEED = 20261202
FANOUT = 3
MAX_ROUNDS = 60
IDLE_ROUNDS = 3
STEP_SECONDS = 3600.0
IDLE_LIMIT = 1.25  # idle bytes per member-round at the largest N within 25% of the smallest
CITIES = ("Lisbon", "Porto", "Faro", "Braga", "Coimbra")
SVG = Path(__file__).resolve().parents[1] / "docs" / "fleet-rounds.svg"


def say(text: str) -> None:
    print(text, flush=True)


def share_signature_checks() -> None:
    """Every member of this process remembers a valid signature once any member checked it
    (the module docstring says why that changes no figure but wall time)."""
    check = members.signed_by  # type: ignore[attr-defined]
    valid: set[bytes] = set()

    def signed_by(identity: Identity, payload: bytes, signature: bytes) -> bool:
        seen = hashlib.blake2b(
            b"%d/%b/%b/" % (identity.serial, identity.node_id.encode(), signature) + payload,
            digest_size=16,
        ).digest()
        if seen in valid:
            return True
        if not check(identity, payload, signature):
            return False
        valid.add(seen)
        return True

    members.signed_by = signed_by  # type: ignore[attr-defined]


def seeds_for(ids: list[str], rng: random.Random) -> dict[str, list[str]]:
    """One seed each: a random earlier member (a random tree, so the fleet is connected)."""
    return {n: [Fleet.address(rng.choice(ids[:i]) if i else ids[1])] for i, n in enumerate(ids)}


def spread_evidence(fleet: Fleet, ids: list[str], keys: int, rng: random.Random) -> int:
    """Conflicting evidence for `keys` keys on random members; the distinct pieces made."""
    made = 0
    for k in range(keys):
        values = rng.sample(CITIES, rng.choice((2, 3)))
        for value, member in zip(values, rng.sample(ids, len(values)), strict=True):
            fleet.ledgers[member].submit(
                Submission(
                    "fleet:bench", f"s{k}", "lives_in", value, "agent_observed",
                    f"agent:{member}", worth=rng.choice((0.5, 0.6, 0.7)), confidence=0.9,
                )
            )  # fmt: skip
            made += 1
    return made


def holds_everything(fleet: Fleet, evidence: int) -> bool:
    """Every member holds every member's record and every piece of evidence."""
    roots = {index_of(ledger).evidence.bucket("") for ledger in fleet.ledgers.values()}
    return fleet.knows_everyone() and len(roots) == 1 and next(iter(roots))[1] == evidence


def vote_completeness(fleet: Fleet) -> float:
    """The share of (member, voter) pairs where the member holds the voter's current votes."""
    own = {n: index_of(ledger).votes(n).bucket("") for n, ledger in fleet.ledgers.items()}
    voters = [n for n, (_digest, count) in own.items() if count]
    pairs = held = 0
    for ledger in fleet.ledgers.values():
        index = index_of(ledger)
        for voter in voters:
            pairs += 1
            held += index.votes(voter).bucket("") == own[voter]
    return held / pairs if pairs else 1.0


def served_alike(fleet: Fleet, keys: int) -> bool:
    """Every member serves every key in the same state with the same tally (consensus,
    versions, weights, voters): what a node holding every vote serves. (The value a
    CONTESTED key shows is each member's own local belief, specification §7, so it may differ.)"""
    first: list[Any] | None = None
    for ledger in fleet.ledgers.values():
        view: list[Any] = []
        for k in range(keys):
            key = Key("fleet:bench", f"s{k}", "lives_in")
            try:
                state = ledger.belief(key).state
            except NotFound:
                state = None
            tally = ledger.tally_of(key)
            counted = tally and (
                tally.consensus,
                tuple((v.version_id, v.weight, v.voters) for v in tally.versions),
            )
            view.append((state, counted))
        if first is None:
            first = view
        elif view != first:
            return False
    return True


def counters(fleet: Fleet) -> dict[tuple[str, str], tuple[int, int]]:
    return {k: (link.requested, link.answered) for k, link in fleet.links.items()}


async def measured_round(fleet: Fleet) -> tuple[dict[str, int], set[str]]:
    """One round of every member at once: bytes each member sent, and the members all of
    whose exchanges (as caller or callee) found nothing differing."""
    before = counters(fleet)
    running = sorted(fleet.syncers)
    for n in running:
        for state in [*fleet.syncers[n].states.values(), *fleet.syncers[n].seeds.values()]:
            state.next_attempt = 0.0
    # Hundreds of exchanges share one process's threads here: no step of one may time out.
    results = await asyncio.gather(
        *(fleet.syncers[n].sync_round(timeout=STEP_SECONDS) for n in running)
    )
    sent = dict.fromkeys(running, 0)
    for (caller, callee), link in fleet.links.items():
        req0, ans0 = before.get((caller, callee), (0, 0))
        sent[caller] += link.requested - req0
        sent[callee] += link.answered - ans0
    busy: set[str] = set()
    for caller, round_results in zip(running, results, strict=True):
        for r in round_results:
            if not r.ok or r.differing_buckets:
                busy.update((caller, r.node_id))
    return sent, set(running) - busy


def vote_rows(fleet: Fleet) -> list[int]:
    out = []
    for ledger in fleet.ledgers.values():
        with ledger.repo.read() as tx:
            out.append(sum(1 for _ in tx.all_votes()))
    return out


async def run_size(n: int, keys: int, tally_rounds: int) -> dict[str, Any]:
    rng = random.Random(f"{SEED}:{n}")
    ids = [f"m{i:03d}" for i in range(n)]
    started = time.perf_counter()
    fleet = Fleet(ids, seeds_for(ids, rng), fanout=FANOUT, seed=SEED)
    try:
        evidence = spread_evidence(fleet, ids, keys, rng)
        busy_bytes: list[int] = []
        rounds = None
        for r in range(1, MAX_ROUNDS + 1):
            sent, _idle = await measured_round(fleet)
            busy_bytes.extend(sent.values())
            print(f"  N={n} round {r}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
            if holds_everything(fleet, evidence):
                rounds = r
                break
        if rounds is None:
            raise SystemExit(f"N={n}: no convergence within {MAX_ROUNDS} rounds")
        share_at_convergence = vote_completeness(fleet)
        idle_bytes: list[int] = []
        tally_complete = None
        if share_at_convergence == 1.0 and served_alike(fleet, keys):
            tally_complete = rounds
        for r in range(rounds + 1, rounds + 1 + max(IDLE_ROUNDS, tally_rounds)):
            sent, idle = await measured_round(fleet)
            print(f"  N={n} round {r}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
            if tally_complete is None:
                busy_bytes.extend(sent.values())
            idle_bytes.extend(sent[m] for m in idle)
            if (
                tally_complete is None
                and vote_completeness(fleet) == 1.0
                and served_alike(fleet, keys)
            ):
                tally_complete = r
            if r >= (tally_complete or r) + IDLE_ROUNDS or r >= rounds + tally_rounds:
                break
        rows = vote_rows(fleet)
        figures = {
            "n": n,
            "evidence": evidence,
            "rounds": rounds,
            "vote_sets_held_at_convergence": round(share_at_convergence, 3),
            "rounds_until_every_vote_held": tally_complete,
            "tally_rounds_tried": tally_rounds,
            "busy_bytes_median": int(statistics.median(busy_bytes)),
            "busy_bytes_max": max(busy_bytes),
            "idle_member_rounds": len(idle_bytes),
            "idle_bytes_median": int(statistics.median(idle_bytes)) if idle_bytes else None,
            "idle_bytes_max": max(idle_bytes) if idle_bytes else None,
            "vote_rows_median": int(statistics.median(rows)),
            "vote_rows_max": max(rows),
            "seconds": round(time.perf_counter() - started, 1),
        }
    finally:
        fleet.close()
    return figures


def fit_log(points: list[tuple[int, int]]) -> tuple[float, float, float]:
    """Least squares rounds = a + b ln N: (a, b, R^2)."""
    xs = [math.log(n) for n, _ in points]
    ys = [float(r) for _, r in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    a = my - b * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - (a + b * x)) ** 2 for x, y in zip(xs, ys, strict=True))
    return a, b, (1 - ss_res / ss_tot) if ss_tot else 1.0


Series = tuple[str, str, list[tuple[int, int]], tuple[float, float, float]]


def svg(series: list[Series], keys: int) -> str:
    """Rounds against N (log axis): each series' measured points and fitted a + b ln N."""
    width, height, left, bottom, top, right = 560, 340, 60, 50, 30, 20
    lo, hi = math.log(5), math.log(200)
    ymax = max(5, max(r for _, _, points, _ in series for _, r in points) + 2)

    def x(n: float) -> float:
        return left + (math.log(n) - lo) / (hi - lo) * (width - left - right)

    def y(r: float) -> float:
        return height - bottom - r / ymax * (height - bottom - top)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="18" text-anchor="middle">Rounds until the fleet agrees '
        f"(fanout {FANOUT}, one seed each, {keys} keys)</text>",
        f'<line x1="{left}" y1="{y(0)}" x2="{width - right}" y2="{y(0)}" stroke="black"/>',
        f'<line x1="{left}" y1="{y(0)}" x2="{left}" y2="{top}" stroke="black"/>',
        f'<text x="{width / 2}" y="{height - 12}" text-anchor="middle">members N (log scale)</text>',
        f'<text x="16" y="{height / 2}" transform="rotate(-90 16 {height / 2})" '
        'text-anchor="middle">rounds</text>',
    ]
    for n in (10, 30, 100):
        parts.append(
            f'<line x1="{x(n):.1f}" y1="{y(0)}" x2="{x(n):.1f}" y2="{y(0) + 5}" stroke="black"/>'
            f'<text x="{x(n):.1f}" y="{y(0) + 18}" text-anchor="middle">{n}</text>'
        )
    for r in range(0, ymax + 1, max(1, ymax // 5)):
        parts.append(
            f'<line x1="{left - 5}" y1="{y(r):.1f}" x2="{left}" y2="{y(r):.1f}" stroke="black"/>'
            f'<text x="{left - 8}" y="{y(r) + 4:.1f}" text-anchor="end">{r}</text>'
        )
    for i, (label, colour, points, (a, b, r2)) in enumerate(series):
        curve = " ".join(
            f"{x(math.exp(t)):.1f},{y(a + b * t):.1f}"
            for t in (lo + j * (hi - lo) / 40 for j in range(41))
            if 0 <= a + b * t <= ymax
        )
        parts.append(
            f'<polyline points="{curve}" fill="none" stroke="{colour}" stroke-dasharray="4 3"/>'
        )
        for n, r in points:
            parts.append(f'<circle cx="{x(n):.1f}" cy="{y(r):.1f}" r="4" fill="{colour}"/>')
            parts.append(f'<text x="{x(n) + 7:.1f}" y="{y(r) - 7:.1f}">{r}</text>')
        parts.append(
            f'<text x="{left + 10}" y="{top + 14 + 16 * i}" fill="{colour}">{label}: '
            f"{a:.2f} + {b:.2f} ln N (R² {r2:.2f})</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10,30,100", help="fleet sizes (default %(default)s)")
    parser.add_argument("--keys", type=int, default=200, help="keys with conflicting evidence")
    parser.add_argument(
        "--tally-rounds", type=int, default=30, help="rounds after convergence to wait for votes"
    )
    parser.add_argument("--quick", action="store_true", help="sizes 10,30 and 100 keys")
    parser.add_argument("--no-svg", action="store_true", help="do not write docs/fleet-rounds.svg")
    parser.add_argument(
        "--check-each", action="store_true",
        help="every member checks every signature itself (slower; same figures)",
    )  # fmt: skip
    parser.add_argument(
        "--merge", nargs="+", type=Path, metavar="RUN_JSON",
        help="files holding earlier runs' JSON lines: fit and draw their sizes together",
    )  # fmt: skip
    args = parser.parse_args()
    if args.merge:
        results, keys = merged(args.merge)
        conclude(results, keys, svg_wanted=not args.no_svg)
        return
    sizes = [10, 30] if args.quick else [int(s) for s in args.sizes.split(",")]
    keys = 100 if args.quick else args.keys
    if not args.check_each:
        share_signature_checks()
    say(
        f"fleet: sizes {sizes}, {keys} keys, fanout {FANOUT}, one seed each, seed {SEED}, "
        f"signature checks {'on each member' if args.check_each else 'shared in process'}"
    )
    results = []
    for n in sizes:
        fig = asyncio.run(run_size(n, keys, args.tally_rounds))
        results.append(fig)
        report(fig)
    conclude(results, keys, svg_wanted=not args.no_svg and not args.quick)


def merged(paths: list[Path]) -> tuple[list[dict[str, Any]], int]:
    """The sizes of earlier runs' JSON lines (one per file's last line), by N; every run must
    have used the same keys and fanout."""
    runs = [json.loads(p.read_text().strip().splitlines()[-1]) for p in paths]
    settings = {(r["keys"], r["fanout"]) for r in runs}
    if len(settings) != 1:
        raise SystemExit(f"--merge: runs with different keys or fanout: {sorted(settings)}")
    by_n = {f["n"]: f for r in runs for f in r["sizes"]}
    results = [by_n[n] for n in sorted(by_n)]
    say(f"fleet: merged sizes {sorted(by_n)} from {len(paths)} runs, {runs[0]['keys']} keys")
    for fig in results:
        report(fig)
    return results, runs[0]["keys"]


def report(fig: dict[str, Any]) -> None:
    """One size's figures, on one line."""
    tried = fig["tally_rounds_tried"]
    say(
        f"N={fig['n']:>4}: {fig['rounds']} rounds until every member holds every record and "
        f"all {fig['evidence']} pieces of evidence; then {fig['vote_sets_held_at_convergence']:.0%} "
        f"of (member, voter) vote sets held; every vote held and every tally alike at "
        f"round {fig['rounds_until_every_vote_held'] or f'> {tried} more'}; "
        f"bytes/member/round busy median {fig['busy_bytes_median']:,} max "
        f"{fig['busy_bytes_max']:,}, idle median {fig['idle_bytes_median']} max "
        f"{fig['idle_bytes_max']} ({fig['idle_member_rounds']} idle member-rounds); vote "
        f"rows/member median {fig['vote_rows_median']:,} max {fig['vote_rows_max']:,} "
        f"({fig['seconds']} s)"
    )


def conclude(results: list[dict[str, Any]], keys: int, svg_wanted: bool) -> None:
    """The fits over every size, the idle check, the picture and the JSON line."""
    points = [(f["n"], f["rounds"]) for f in results]
    fit = fit_log(points) if len(points) > 1 else (float(points[0][1]), 0.0, 1.0)
    say(f"records and evidence: rounds = {fit[0]:.2f} + {fit[1]:.2f} ln N (R^2 {fit[2]:.3f})")
    agreed = [
        (f["n"], f["rounds_until_every_vote_held"])
        for f in results
        if f["rounds_until_every_vote_held"] is not None
    ]
    tally_fit = None
    if len(agreed) == len(results) > 1:
        tally_fit = fit_log(agreed)
        say(
            f"every vote held, tallies alike: rounds = {tally_fit[0]:.2f} + "
            f"{tally_fit[1]:.2f} ln N (R^2 {tally_fit[2]:.3f})"
        )
    idle = [f["idle_bytes_median"] for f in results if f["idle_bytes_median"]]
    idle_ratio = idle[-1] / idle[0] if len(idle) > 1 else 1.0
    idle_ok = idle_ratio <= IDLE_LIMIT
    say(
        f"idle bytes per member-round, largest N / smallest N: {idle_ratio:.2f} "
        f"({'flat' if idle_ok else 'GROWS'}; limit {IDLE_LIMIT})"
    )
    if svg_wanted:
        series: list[Series] = [("records and evidence", "#888888", points, fit)]
        if tally_fit is not None:
            series.append(("every vote held, tallies alike", "#1f5fa8", agreed, tally_fit))
        SVG.write_text(svg(series, keys))
        say(f"wrote {SVG}")
    print(
        json.dumps(
            {
                "bench": "fleet",
                "python": platform.python_version(),
                "fanout": FANOUT,
                "keys": keys,
                "sizes": results,
                "fit": {"a": round(fit[0], 3), "b": round(fit[1], 3), "r2": round(fit[2], 4)},
                "tally_fit": tally_fit
                and {
                    "a": round(tally_fit[0], 3),
                    "b": round(tally_fit[1], 3),
                    "r2": round(tally_fit[2], 4),
                },
                "idle_ratio": round(idle_ratio, 3),
                "idle_flat": idle_ok,
            }
        )
    )
    if not idle_ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
