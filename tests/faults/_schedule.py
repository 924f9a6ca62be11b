"""The nemesis schedule and the client workload, both drawn from one seed (no I/O here).

The same seed gives the same faults at the same offsets and each client the same sequence
of operations; only what the nodes answer (and so which later operations find something to
act on) depends on the run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# The allowance a node grants a peer's clock (Policy.clock_skew_micros, 5 minutes).
ALLOWANCE_SECONDS = 300

NETWORK_FAULTS = ("isolate", "halves", "bridge", "flaky")
PROCESS_FAULTS = ("kill", "kill-sync", "pause", "clock-within", "clock-beyond", "disk")
FAULT_KINDS = NETWORK_FAULTS + PROCESS_FAULTS
WITHIN_ALLOWANCE = tuple(k for k in PROCESS_FAULTS if k != "clock-beyond")

# Erasures touch only ERASABLE: every fact acknowledged in the other namespace must end up
# held by every node, however long the campaign (with erasures everywhere, a long run
# leaves no fact that no erasure may cover, and that check would judge nothing).
NAMESPACES = ("camp:a", "camp:b")
ERASABLE = "camp:b"
SUBJECTS = tuple(f"s{i}" for i in range(8))
SINGLE, MULTI = "lives_in", "speaks"
PREDICATES = (SINGLE, MULTI)
VALUES = ("porto", "lisbon", "braga")
ANCHORS = ("user_stated", "api_response", "agent_observed", "llm_generated")
WORTHS = (0.5, 0.8)
CONFIDENCES = (0.6, 0.9)
EVENT_STEPS = 4  # event times: the base hour minus 0, 10, 20 or 30 minutes

# How often each operation is drawn (weights).
OPERATION_MIX = (
    ("submit", 50),
    ("read", 24),
    ("retract", 8),
    ("erase-id", 5),
    ("erase-key", 3),
    ("erase-subject", 1),
    ("resolve", 9),
)

Key = tuple[str, str, str]


def all_keys() -> list[Key]:
    """Every key the workload touches."""
    return [(ns, s, p) for ns in NAMESPACES for s in SUBJECTS for p in PREDICATES]


@dataclass(frozen=True)
class Fault:
    """One fault: when it starts (seconds from the start), what, on whom, for how long.

    Partitions name their sides in `groups` (a bridge's middle node is the first group);
    `offset` is a clock fault's offset in seconds; `delay`/`drop` a flaky link's."""

    at: float
    kind: str
    nodes: tuple[str, ...]
    lasts: float
    groups: tuple[tuple[str, ...], ...] = ()
    offset: int = 0
    delay: float = 0.0
    drop: float = 0.0

    def describe(self) -> str:
        what = {
            "isolate": lambda: f"{self.groups[0][0]} cut off from {','.join(self.groups[1])}",
            "halves": lambda: " | ".join(",".join(g) for g in self.groups),
            "bridge": lambda: (
                f"{','.join(self.groups[1])} | {','.join(self.groups[2])} "
                f"joined only through {self.groups[0][0]}"
            ),
            "flaky": lambda: (
                f"{self.nodes[0]}'s links delay {self.delay:.2f}s, drop {self.drop:.2f}"
            ),
            "clock-within": lambda: f"{self.nodes[0]} clock {self.offset:+d}s",
            "clock-beyond": lambda: f"{self.nodes[0]} clock {self.offset:+d}s",
        }.get(self.kind, lambda: self.nodes[0])()
        return f"t={self.at:6.2f}s {self.kind:<12} {what} for {self.lasts:.1f}s"

    def cut_pairs(self) -> list[tuple[str, str]]:
        """The directed links a partition cuts (both ways between its sides)."""
        if self.kind in ("isolate", "halves"):
            sides = [(self.groups[0], self.groups[1])]
        elif self.kind == "bridge":
            sides = [(self.groups[1], self.groups[2])]
        else:
            return []
        return [(a, b) for left, right in sides for a in left for b in right] + [
            (b, a) for left, right in sides for a in left for b in right
        ]


def _partition(kind: str, rng: random.Random, nodes: list[str]) -> tuple[tuple[str, ...], ...]:
    order = nodes[:]
    rng.shuffle(order)
    if kind == "isolate":
        return ((order[0],), tuple(order[1:]))
    if kind == "halves":
        half = len(order) // 2
        return (tuple(order[:half]), tuple(order[half:]))
    # bridge: the first node reaches everyone; the rest split in two sides that it joins.
    rest = order[1:]
    half = max(1, len(rest) // 2)
    return ((order[0],), tuple(rest[:half]), tuple(rest[half:]))


def _track(
    rng: random.Random, kinds: tuple[str, ...], start: float, duration: float
) -> list[tuple[float, str]]:
    """Times and kinds of one track's faults, one after another, cycling through a shuffled
    list of `kinds` so a short campaign still sees each kind."""
    out: list[tuple[float, str]] = []
    cycle: list[str] = []
    t = start
    while t < duration - 2.0:
        if not cycle:
            cycle = list(kinds)
            rng.shuffle(cycle)
        out.append((t, cycle.pop()))
        t += rng.uniform(3.0, 6.0)
    return out


def draw_schedule(
    seed: int,
    nodes: list[str],
    duration: float,
    *,
    disk_node: str,
    clock_node: str,
    beyond_allowance: bool = True,
) -> list[Fault]:
    """The faults of a campaign of `duration` seconds: a network track (partitions, flaky
    links) and a process track (crashes, pauses, clocks, a full disk) that overlap.
    Without `beyond_allowance` no clock is offset by more than the allowance."""
    rng = random.Random(f"{seed}:nemesis")
    faults: list[Fault] = []
    for at, kind in _track(rng, NETWORK_FAULTS, 1.0, duration):
        lasts = rng.uniform(2.0, 4.0)
        if kind == "flaky":
            victim = rng.choice(nodes)
            faults.append(
                Fault(
                    at,
                    kind,
                    (victim,),
                    lasts,
                    delay=rng.uniform(0.05, 0.3),
                    drop=rng.uniform(0.02, 0.1),
                )
            )
        else:
            groups = _partition(kind, rng, nodes)
            faults.append(Fault(at, kind, tuple(n for g in groups for n in g), lasts, groups))
    kinds = PROCESS_FAULTS if beyond_allowance else WITHIN_ALLOWANCE
    for at, kind in _track(rng, kinds, 2.0, duration):
        lasts = rng.uniform(1.0, 3.0)
        victim = rng.choice(nodes)
        offset = 0
        if kind == "disk":
            victim = disk_node
        elif kind.startswith("clock"):
            victim = clock_node
            low, high = (
                (30, ALLOWANCE_SECONDS - 60)
                if kind == "clock-within"
                else (
                    ALLOWANCE_SECONDS + 120,
                    3 * ALLOWANCE_SECONDS,
                )
            )
            offset = rng.randint(low, high) * rng.choice((1, -1))
        faults.append(Fault(at + 0.5, kind, (victim,), lasts, offset=offset))
    faults.sort(key=lambda f: f.at)
    return faults


@dataclass(frozen=True)
class Draft:
    """One client operation as drawn, before it runs."""

    kind: str
    node: str
    key: Key | None = None
    value: str | None = None
    anchor: str = "user_stated"
    worth: float = 0.5
    confidence: float = 0.9
    step: int | None = None  # event time step (None: unset, i.e. now)
    target: int = 0  # erase-id: which of this client's earlier submissions


@dataclass
class Workload:
    """One client's operations, drawn one at a time from its own seeded generator."""

    seed: int
    client: int
    nodes: list[str]
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(f"{self.seed}:client:{self.client}")

    def next(self) -> Draft:
        rng = self.rng
        kind = rng.choices([k for k, _ in OPERATION_MIX], [w for _, w in OPERATION_MIX])[0]
        node = rng.choice(self.nodes)
        key = rng.choice(all_keys())
        if kind.startswith("erase"):
            key = (ERASABLE, key[1], key[2])
        value = rng.choice(VALUES)
        anchor = rng.choice(ANCHORS)
        return Draft(
            kind,
            node,
            key,
            value,
            anchor,
            rng.choice(WORTHS),
            rng.choice(CONFIDENCES),
            rng.choice([*range(EVENT_STEPS), None]),
            rng.randrange(1 << 16),
        )
