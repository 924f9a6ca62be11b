"""What every part of the ledger shares: recomputing a key's served belief and own vote
after its evidence or votes changed, and telling observers what a commit changed."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace

from factnode.clock import Clock
from factnode.core import (
    Arbitrated,
    Evidence,
    FieldViolation,
    Instant,
    InvalidInput,
    Key,
    KeyState,
    Policy,
)
from factnode.core.consensus import Vote
from factnode.core.erasure_bounds import ErasureBound, lowered_bounds
from factnode.core.receipts import Receipt, newer_receipts
from factnode.core.refresh import (
    Refreshing,
    RefreshLoad,
    StoredBelief,
    local_verdicts,
    may_be_pinned,
    plan_refresh,
    worked_out,
)
from factnode.core.serving import counted_votes, decayed_since, peer_voted
from factnode.core.signed import vote_payload, votes_numbered_after
from factnode.core.story import decayed_decision
from factnode.core.validation import MAX_KEY_PART_BYTES, check_instant, check_key, check_text
from factnode.ledger._memory import CheckedMemory, ServedMemory
from factnode.ledger._model import Belief, Committed, Signing, belief_from_rows
from factnode.store import Repository
from factnode.store.repository import Transaction, Writes

# The node_meta entry holding the highest sequence number this node signed a vote with.
VOTE_SEQ_META = "vote_seq"


def check_filters(**filters: str | None) -> None:
    """Raises InvalidInput naming each list filter (a namespace or subject; None or "" for
    none) that breaks the text rule or is longer than a key part may be: the filter
    reaches a query, and a NUL there failed it on PostgreSQL."""
    out: list[FieldViolation] = []
    for name, value in filters.items():
        if value:
            check_text(out, name, value, MAX_KEY_PART_BYTES, required=False)
    if out:
        raise InvalidInput(out)


def check_key_input(key: Key) -> None:
    """Raises InvalidInput naming each bad part of a key."""
    out: list[FieldViolation] = []
    check_key(out, key)
    if out:
        raise InvalidInput(out)


def check_times(as_of: Instant | None, known_at: Instant | None) -> None:
    """Raises InvalidInput for an as-of or known-at time out of range."""
    out: list[FieldViolation] = []
    check_instant(out, "as_of", as_of)
    check_instant(out, "known_at", known_at)
    if out:
        raise InvalidInput(out)


class Serving:
    """The node's identity, store and policy, the served-read memory, and the served-belief
    computation every write shares: the one component every other part of the ledger holds."""

    def __init__(self, repo: Repository, policy: Policy, node_id: str, clock: Clock) -> None:
        self.repo = repo
        self.policy = policy
        self.node_id = node_id
        self.clock = clock
        # GetBelief's answers for hot keys; the store tells it what each commit touched.
        self.memory = (CheckedMemory if repo.shared else ServedMemory)(repo.cache_keys, clock.now)
        repo.watch(self.memory)
        self._observers: list[Callable[[Committed], None]] = []
        # Told, after each delta a peer sent, how many of its items of each kind were refused.
        self.refusal_observers: list[Callable[[Mapping[str, int]], None]] = []
        self.signing = Signing()

    @property
    def sign(self) -> Callable[[bytes], bytes] | None:
        """This node's signing key (`Signing.sign`)."""
        return self.signing.sign

    def close(self) -> None:
        """Stops the served memory following the repository's commits (`Ledger.close`)."""
        self.repo.unwatch(self.memory)

    def on_commit(self, observer: Callable[[Committed], None]) -> None:
        """Calls `observer` after every committed write with what it changed (the federation
        keeps its digests this way, so the ledger never imports the federation)."""
        self._observers.append(observer)

    def announce(self, tx: Transaction, committed: Committed) -> None:
        """Tells every observer what `tx` changed once it commits: still under the writer
        lock, so observers see commits in the order they were made (a digest updated out of
        order would keep what the store dropped). `committed` is read then, complete."""

        def tell(_touched: object) -> None:
            for observer in list(self._observers):
                observer(committed)

        tx.after_commit(tell)

    def apply(self, tx: Transaction, changes: Writes, fx: Committed) -> None:
        """Writes `changes` in `tx` and notes in `fx` what they change that peers compare."""
        tx.apply(changes)
        fx.note(changes)

    def put_bounds(self, tx: Transaction, bounds: Sequence[ErasureBound], fx: Committed) -> None:
        """Keeps each of `bounds` that is new or lower than the bound held for its erasure and
        node (`core.erasure_bounds.lowered_bounds`)."""
        held = tx.erasure_bounds({b.erasure_id for b in bounds})
        self.apply(tx, Writes(erasure_bounds=lowered_bounds(held, bounds)), fx)

    def put_receipts(self, tx: Transaction, receipts: Sequence[Receipt], fx: Committed) -> int:
        """Keeps each of `receipts` that is new or later than the one held for its erasure and
        member (`core.receipts.newer_receipts`); returns how many it kept."""
        held = tx.receipts({r.erasure_id for r in receipts})
        newer = newer_receipts(held, receipts)
        if newer:
            self.apply(tx, Writes(receipts=newer), fx)
        return len(newer)

    def refresh(
        self,
        tx: Transaction,
        states: dict[Key, KeyState],
        now: Instant,
        fx: Committed,
        *,
        current: dict[Key, list[StoredBelief]] | None = None,
        quiet: Collection[Key] = (),
        known: Mapping[Key, Arbitrated] | None = None,
        votes_before: Mapping[Key, Sequence[Vote]] | None = None,
    ) -> dict[Key, list[StoredBelief]]:
        """Recomputes each key's local belief, this node's vote and the served belief,
        records what changed, and returns every key's served rows (`core.refresh`: load,
        `plan_refresh`, apply). `quiet` keys change without announcing (erased keys);
        `known` holds the given states already arbitrated; `votes_before` the votes held
        before this transaction changed them, where it did (else the votes read here are
        the ones before)."""
        if not states:
            return {}
        keys = list(states)
        if current is None:
            current = tx.beliefs(keys)
        votes = tx.votes(keys)
        local = local_verdicts(states, self.policy, now, known)
        pinnable = may_be_pinned(local, votes, self.node_id)
        pins = {k: p.version_id for k, p in tx.pins(pinnable).items()}
        loads = {
            k: RefreshLoad(
                st,
                current.get(k, ()),
                votes.get(k, ()),
                (votes_before or {}).get(k),
                k in quiet,
            )
            for k, st in states.items()
        }
        who = Refreshing(self.node_id, self.policy, now, self.sign is not None, fx.evidence_added)
        plan = plan_refresh(loads, local, pins, who, fx.tallies)
        numbered, last = self.numbered(tx, plan.votes) if plan.votes else ([], "")
        self.apply(
            tx,
            Writes(
                meta={VOTE_SEQ_META: last} if last else {},
                votes_removed={self.node_id: plan.votes_dropped} if plan.votes_dropped else {},
                votes=numbered,
                beliefs=plan.beliefs,
                decisions=plan.decisions,
                changed_at=now,
            ),
            fx,
        )
        fx.tallies.update(plan.tallies)
        return plan.served

    def materialise(
        self, tx: Transaction, keys: Collection[Key], now: Instant, fx: Committed
    ) -> int:
        """Brings the stored present of `keys` up to `now` where evidence expired since it
        was worked out (`serving.decayed_since`): recomputes those keys and logs one DECAYED
        decision (rule decay) for each whose served belief changed. The decay job does this
        page by page, and a write that decides on a key's served belief does it first, so no
        expiry is folded into another decision unlogged. Returns how many were logged."""
        if not keys:
            return 0
        current = tx.beliefs(list(keys))
        states = tx.key_states(list(keys))
        stale = {
            k: st
            for k, st in states.items()
            if decayed_since(st, self.policy, worked_out(current.get(k, [])), now)
        }
        if not stale:
            return 0
        served = self.refresh(tx, stale, now, fx, current=current)
        logged = [
            d
            for k in sorted(stale)
            if (
                d := decayed_decision(
                    k,
                    stale[k],
                    [(b.version_id, b.state) for b in current.get(k, [])],
                    [(b.version_id, b.state) for b in served.get(k, [])],
                    self.policy,
                    now,
                )
            )
            is not None
        ]
        self.apply(tx, Writes(decisions=logged), fx)
        return len(logged)

    def numbered(
        self, tx: Transaction, votes: Sequence[Vote], after: int = 0
    ) -> tuple[list[Vote], str]:
        """This node's new votes, numbered after every vote it cast before (on any key, so a
        vote cast again after its key was erased still outnumbers the old one), after `after`
        (a number of its own a relay showed it) and after the clock, so they outnumber those it
        signed before it lost its store (`core.signed.votes_numbered_after`), and signed;
        beside the last number, which the write keeps (`VOTE_SEQ_META`)."""
        last = votes_numbered_after(int(tx.meta(VOTE_SEQ_META) or 0), after, self.clock.now())
        out = []
        for seq, v in enumerate(votes, start=last + 1):
            numbered = replace(v, seq=seq)
            if self.sign is not None:
                numbered = replace(numbered, signature=self.sign(vote_payload(numbered)))
            out.append(numbered)
        return out, str(last + len(votes))

    def cast(self, tx: Transaction, votes: Sequence[Vote], fx: Committed, after: int = 0) -> None:
        """Stores this node's `votes`, numbered and signed (`numbered`)."""
        numbered, last = self.numbered(tx, votes, after)
        self.apply(tx, Writes(meta={VOTE_SEQ_META: last}, votes=numbered), fx)

    def peer_votes_counted(self, votes: Iterable[Vote], state: KeyState) -> list[Vote]:
        """The peers' votes on a key as this node counts them: each weighed from the key's
        active evidence held here; a vote whose evidence has not arrived waits."""
        held = {e.evidence_id: e for e in state.evidence}
        return counted_votes(list(votes), held, self.policy, self.node_id)

    def peer_voted(self, votes: Iterable[Vote]) -> bool:
        """Whether any node but this one votes among `votes`."""
        return peer_voted(list(votes), self.node_id)

    def publish(self, tx: Transaction, beliefs: Mapping[Key, Belief]) -> None:
        """Offers GetBelief's answers for keys without peer votes, as this write leaves them,
        to the served memory (kept once the write commits)."""
        if self.memory.capacity and beliefs:
            keys = list(beliefs)
            votes = tx.votes(keys)
            states = tx.key_states(keys)  # in the write's key cache: no read
            now = self.clock.now()
            answers = {
                k: (b, states[k].next_expiry(self.policy, now))
                for k, b in beliefs.items()
                if not self.peer_voted(votes.get(k, ()))
            }
            tx.after_commit(lambda touched: self.memory.publish(answers, touched))

    def beliefs(
        self, tx: Transaction, keys: Iterable[Key], held: Mapping[str, Evidence] | None = None
    ) -> dict[Key, Belief]:
        """The served beliefs of `keys`; `held` is evidence the caller already has in hand."""
        rows = tx.beliefs(list(keys))
        wanted = [b.evidence_id for bs in rows.values() for b in bs]
        reps = {i: held[i] for i in wanted if i in held} if held else {}
        if len(reps) < len(wanted):
            reps.update(tx.evidence([i for i in wanted if i not in reps]))
        out = {}
        for key, bs in rows.items():
            if bs:
                out[key] = belief_from_rows(bs, reps)
        return out


class Component:
    """A part of the ledger (writing, reading, forgetting, review, peer input) over the one
    serving component all of them share; the node's identity, store, policy and clock are
    the serving component's."""

    def __init__(self, serving: Serving) -> None:
        self._serving = serving
        self.repo = serving.repo
        self.policy = serving.policy
        self.node_id = serving.node_id
        self.clock = serving.clock


def bearing_on(tx: Transaction, evidence: Sequence[Evidence]) -> set[Key]:
    """The other keys whose state holds some of `evidence` (specification §5): the keys it names in
    `contradicts`, and those named by the assertions it corrects."""
    corrects = {e.corrects for e in evidence if e.corrects}
    corrected = tx.evidence(corrects).values() if corrects else ()
    return {e.contradicts for e in (*evidence, *corrected) if e.contradicts is not None}
