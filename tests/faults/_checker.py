"""The checker: what each node holds once the campaign is over, read from its store after it
stopped, judged against the history of acknowledged calls and against a fresh recomputation
with the core's pure functions."""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from _history import Op
from _schedule import Fault, Key, all_keys

from factnode.core import Evidence, KeyState, Policy
from factnode.core import Key as CoreKey
from factnode.core.consensus import Vote, tally
from factnode.core.serving import counted_votes, view
from factnode.store import SqlRepository

Row = tuple[str, str, str, str]  # version_id, evidence_id, rule, state


@dataclass
class NodeStore:
    """What one stopped node holds: active evidence, erasures, votes, and per key what it
    serves as stored, what the core recomputes over its evidence, and the tally."""

    node: str
    evidence: dict[str, Evidence] = field(default_factory=dict)
    erasures: set[str] = field(default_factory=set)
    # Each voter's vote as its digest sees it: without cast_at (re-casting an unchanged vote
    # is no change, and does not travel).
    votes: set[tuple[str, Key, str | None, str]] = field(default_factory=set)
    stored: dict[Key, list[Row]] = field(default_factory=dict)
    recomputed: dict[Key, list[Row]] = field(default_factory=dict)
    tallies: dict[Key, object] = field(default_factory=dict)


def _vote_row(v: Vote) -> tuple[str, Key, str | None, str]:
    return (v.voter, tuple(v.key), v.version_id, v.evidence_id)  # type: ignore[return-value]


def read_store(node: str, url: str, now: int, policy: Policy | None = None) -> NodeStore:
    """Reads a stopped node's store at `url` (a SQLite file is copied first, so nothing is
    written beside the node's own) and recomputes every workload key with `serving.view`."""
    policy = policy or Policy()
    with tempfile.TemporaryDirectory() as tmp:
        if url.startswith("sqlite:///"):
            src = Path(url.removeprefix("sqlite:///"))
            for suffix in ("", "-wal", "-shm"):
                if Path(f"{src}{suffix}").exists():
                    shutil.copy(f"{src}{suffix}", f"{tmp}/copy.db{suffix}")
            url = f"sqlite:///{tmp}/copy.db"
        repo = SqlRepository(url, cache_keys=0)
        try:
            return _observe(repo, node, now, policy)
        finally:
            repo.close()


def _observe(repo: SqlRepository, node: str, now: int, policy: Policy) -> NodeStore:
    out = NodeStore(node)
    keys = [CoreKey(*k) for k in all_keys()]
    with repo.read() as tx:
        out.evidence = tx.evidence(list(tx.all_evidence_ids()))
        out.erasures = set(tx.all_erasure_ids())
        out.votes = {_vote_row(v) for v in tx.all_votes()}
        states = tx.key_states(keys)
        votes = tx.votes(keys)
        pins = tx.pins(keys)
        beliefs = tx.beliefs(keys)
    for k in keys:
        answer = view(
            k, states.get(k, KeyState()), votes.get(k, []), pins.get(k), policy, node, now
        )
        out.recomputed[tuple(k)] = [  # type: ignore[index]
            (v.version_id, v.evidence.evidence_id, str(v.rule), str(v.state)) for v in answer.values
        ]
        out.stored[tuple(k)] = [  # type: ignore[index]
            (b.version_id, b.evidence_id, str(b.rule), str(b.state)) for b in beliefs.get(k, [])
        ]
        out.tallies[tuple(k)] = whole_tally(  # type: ignore[index]
            votes.get(k, []), states.get(k, KeyState()), policy, node, now
        )
    return out


def whole_tally(
    votes: Sequence[Vote], state: KeyState, policy: Policy, node: str, now: int
) -> tuple[str | None, int, tuple[tuple[str, int], ...]] | None:
    """The tally of every vote the node holds on a key, its own as stored and each peer's as
    the node counts it against the evidence it holds. Unlike the served answer's tally this
    is counted even when only the node itself votes, so nodes holding the same votes and
    evidence must agree on it."""
    held = {e.evidence_id: e for e in state.evidence}
    mine = [v for v in votes if v.voter == node]
    t = tally(
        [*mine, *counted_votes(votes, held, policy, node)],
        now=now,
        threshold=policy.consensus_threshold,
        half_life_days=policy.vote_half_life_days,
        self_id=node,
    )
    if t is None:
        return None
    return (t.consensus, t.total, tuple((v.version_id, v.weight) for v in t.versions))


@dataclass(frozen=True)
class Violation:
    """One broken promise: which check, on which node, about which keys, and how."""

    check: str
    node: str
    keys: tuple[Key, ...]
    detail: str

    def describe(self) -> str:
        keys = ", ".join("/".join(k) for k in self.keys)
        return f"[{self.check}] {self.node}: {self.detail} (keys: {keys})"


ERASES = ("erase-id", "erase-key", "erase-subject")


def covers(erase: Op, fact: Op) -> bool:
    """Whether `erase`'s scope takes in `fact`'s evidence."""
    assert fact.key is not None and erase.key is not None
    if erase.kind == "erase-id":
        return bool(erase.args.get("evidence")) and erase.args["evidence"] == fact.result.get(
            "evidence"
        )
    if erase.kind == "erase-key":
        return erase.key == fact.key
    return erase.key[:2] == fact.key[:2]


class Judge:
    """The history's acknowledged facts and erasures, and the checks over the stores."""

    def __init__(self, ops: Sequence[Op]) -> None:
        self.ops = ops
        self.acks = [
            o
            for o in ops
            if o.kind in ("submit", "retract")
            and o.status == "ok"
            and o.result.get("evidence")
            and o.result.get("outcome") != "REJECTED"
        ]
        self.erases = [o for o in ops if o.kind in ERASES and o.status in ("ok", "unknown")]
        self.sources = {o.args["source"]: o for o in ops if "source" in o.args}
        # How much each check looked at, so a report shows it judged something.
        self.checked: Counter[str] = Counter()

    def may_be_erased(self, fact: Op) -> bool:
        """An erasure that may cover the fact: any covering erasure not finished before the
        fact was invoked, or one that was but whose erased_at (its node's clock) is not
        before the fact's decision (the acknowledging node's clock): coverage is by time."""
        for e in self.erases:
            if not covers(e, fact):
                continue
            done_before = e.completed is not None and e.completed < fact.invoked
            if not done_before or e.status != "ok" or e.result["erased_at"] >= fact.result["at"]:
                return True
        return False

    def must_be_gone(self, fact: Op) -> Op | None:
        """An acknowledged erasure invoked after the fact was acknowledged that covers it:
        by its id, or by key or subject when the fact was recorded (the acknowledging node's
        clock) at or before the erasure (the erasing node's clock), the rule specification §6 sets.
        A fact acknowledged first but stamped later by a clock running ahead is counted
        as spared by skew (see `spared_by_skew`), not as erased."""
        for e in self.erases:
            done = fact.completed
            before = done is not None and done < e.invoked
            if e.status == "ok" and covers(e, fact) and before and self._stamped_before(fact, e):
                return e
        return None

    @staticmethod
    def _stamped_before(fact: Op, erase: Op) -> bool:
        return erase.kind == "erase-id" or fact.result["at"] <= erase.result["erased_at"]

    def spared_by_skew(self) -> list[Op]:
        """Facts acknowledged before an erasure of their key or subject was invoked, yet
        recorded after its erased_at because the two nodes' clocks disagreed."""
        out = []
        for fact in self.acks:
            for e in self.erases:
                done = fact.completed
                if e.status != "ok" or e.kind == "erase-id" or not covers(e, fact):
                    continue
                if (
                    done is not None
                    and done < e.invoked
                    and fact.result["at"] > e.result["erased_at"]
                ):
                    out.append(fact)
                    break
        return out

    def check(self, stores: dict[str, NodeStore]) -> list[Violation]:
        out: list[Violation] = []
        out += self.acknowledged_held(stores)
        out += self.erased_gone(stores)
        out += self.phantoms(stores)
        out += self.recomputed(stores)
        out += self.converged(stores)
        out += self.reads()
        return out

    def acknowledged_held(self, stores: dict[str, NodeStore]) -> list[Violation]:
        """Each acknowledged fact is held by its node and, after syncing, by every node."""
        out = []
        for fact in self.acks:
            if self.may_be_erased(fact):
                continue
            assert fact.key is not None
            self.checked["facts that must be held everywhere"] += 1
            for node, store in stores.items():
                if fact.result["evidence"] not in store.evidence:
                    check = "ack-lost" if node == fact.node else "ack-not-synced"
                    out.append(
                        Violation(
                            check,
                            node,
                            (fact.key,),
                            f"does not hold {fact.kind} #{fact.index} (evidence "
                            f"{fact.result['evidence']}, acknowledged by {fact.node})",
                        )
                    )
        return out

    def erased_gone(self, stores: dict[str, NodeStore]) -> list[Violation]:
        """No node holds evidence acknowledged before an acknowledged erasure covering it."""
        out = []
        for fact in self.acks:
            erase = self.must_be_gone(fact)
            if erase is None:
                continue
            assert fact.key is not None
            self.checked["facts that must be gone everywhere"] += 1
            for node, store in stores.items():
                if fact.result["evidence"] in store.evidence:
                    out.append(
                        Violation(
                            "erased-held",
                            node,
                            (fact.key,),
                            f"holds evidence {fact.result['evidence']} of #{fact.index}, "
                            f"erased by #{erase.index} ({erase.kind} on {erase.node})",
                        )
                    )
        return out

    def phantoms(self, stores: dict[str, NodeStore]) -> list[Violation]:
        """Every piece of evidence held was asked for by a client call, as asked."""
        out = []
        for node, store in stores.items():
            self.checked["pieces of evidence traced to a call"] += len(store.evidence)
            for e in store.evidence.values():
                op = self.sources.get(e.source)
                key = (e.key.namespace, e.key.subject, e.key.predicate)
                if op is None or op.key != key:
                    out.append(
                        Violation(
                            "phantom",
                            node,
                            (key,),
                            f"holds {e.evidence_id} from {e.source!r}, which no call asked for",
                        )
                    )
                elif op.kind == "submit" and e.object != op.args["value"]:
                    out.append(
                        Violation(
                            "phantom",
                            node,
                            (key,),
                            f"{e.evidence_id} has value {e.object!r}, #{op.index} asked for {op.args['value']!r}",
                        )
                    )
        return out

    def recomputed(self, stores: dict[str, NodeStore]) -> list[Violation]:
        """What each node stores as served equals the core's answer over its evidence."""
        out = []
        for node, store in stores.items():
            self.checked["keys recomputed"] += len(store.stored)
            self.checked["served values recomputed"] += sum(map(len, store.stored.values()))
            for k, rows in store.stored.items():
                if sorted(rows) != sorted(store.recomputed[k]):
                    out.append(
                        Violation(
                            "recompute",
                            node,
                            (k,),
                            f"serves {rows}, the core computes {store.recomputed[k]}",
                        )
                    )
        return out

    def converged(self, stores: dict[str, NodeStore]) -> list[Violation]:
        """Every node holds the same evidence, erasures, votes and tallies."""
        out: list[Violation] = []
        first, *rest = stores.values()
        for other in rest:
            diff = set(first.evidence) ^ set(other.evidence)
            if diff:
                keys = {
                    tuple(s.evidence[i].key)
                    for s in (first, other)
                    for i in diff
                    if i in s.evidence
                }
                out.append(
                    Violation(
                        "diverged",
                        other.node,
                        tuple(sorted(keys)),  # type: ignore[arg-type]
                        f"evidence differs from {first.node}'s: {sorted(diff)}",
                    )
                )
            if first.erasures != other.erasures:
                out.append(
                    Violation("diverged", other.node, (), f"erasures differ from {first.node}'s")
                )
            if first.votes != other.votes:
                keys = {v[1] for v in first.votes ^ other.votes}
                out.append(
                    Violation(
                        "diverged",
                        other.node,
                        tuple(sorted(keys)),
                        f"votes differ from {first.node}'s: only {first.node} holds "
                        f"{sorted(first.votes - other.votes, key=str)}, only {other.node} holds "
                        f"{sorted(other.votes - first.votes, key=str)}",
                    )
                )
            bad = [k for k in first.tallies if first.tallies[k] != other.tallies[k]]
            if bad:
                shown = "; ".join(
                    f"{'/'.join(k)}: {first.tallies[k]} vs {other.tallies[k]}" for k in bad
                )
                out.append(
                    Violation(
                        "diverged",
                        other.node,
                        tuple(bad),
                        f"tallies differ from {first.node}'s: {shown}",
                    )
                )
        return out

    def reads(self) -> list[Violation]:
        """No read returned evidence that an erasure acknowledged by the same node before the
        read began had taken away."""
        by_evidence = {f.result["evidence"]: f for f in self.acks}
        out = []
        for r in self.ops:
            if r.kind != "read" or r.status != "ok":
                continue
            for _, evidence_id in r.result.get("values", ()):
                fact = by_evidence.get(evidence_id)
                if fact is None:
                    continue
                erase = self.must_be_gone(fact)
                self.checked["read values checked against erasures"] += 1
                if (
                    erase is not None
                    and erase.node == r.node
                    and erase.completed is not None
                    and erase.completed < r.invoked
                ):
                    assert r.key is not None
                    out.append(
                        Violation(
                            "read-erased",
                            r.node,
                            (r.key,),
                            f"read #{r.index} returned {evidence_id} of #{fact.index}, erased "
                            f"by #{erase.index} before the read began",
                        )
                    )
        return out


def touching(ops: Iterable[Op], keys: set[Key]) -> list[Op]:
    """The operations on `keys`: on the key itself, or an erasure whose scope takes it in."""
    out = []
    for o in ops:
        if o.key is None:
            continue
        if o.key in keys or (o.kind == "erase-subject" and any(o.key[:2] == k[:2] for k in keys)):
            out.append(o)
    return out


def failing_history(
    ops: Sequence[Op],
    faults: Sequence[tuple[float, float | None, Fault]],
    violations: Sequence[Violation],
) -> str:
    """The operations touching the failing keys and the faults active while they ran."""
    keys = {k for v in violations for k in v.keys}
    mine = touching(ops, keys) if keys else list(ops)
    lines = [v.describe() for v in violations]
    if mine:
        start = min(o.invoked for o in mine)
        end = max(o.completed or o.invoked for o in mine)
        lines.append(f"-- {len(mine)} operations on the failing keys:")
        lines += [o.describe() for o in mine]
        lines.append("-- faults active meanwhile (applied at, healed at):")
        for began, ended, f in faults:
            if began <= end and (ended is None or ended >= start):
                lines.append(
                    f"applied {began:7.2f} healed {ended if ended is not None else '-':>7} {f.describe()}"
                )
    return "\n".join(lines)
