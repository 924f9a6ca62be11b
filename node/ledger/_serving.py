"""What every part of the ledger shares: recomputing a key's served belief and own vote
after its evidence or votes changed, and telling observers what a commit changed."""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace

from factnode.clock import Clock
from factnode.core import (
    Arbitrated,
    Decision,
    Evidence,
    FieldViolation,
    Instant,
    InvalidInput,
    Key,
    KeyState,
    Policy,
    Verdict,
    arbitrate,
    representatives,
)
from factnode.core.consensus import (
    Tally,
    Vote,
    retallied,
    same_vote,
    tally,
    transition,
)
from factnode.core.erasure_bounds import ErasureBound, lowered_bounds
from factnode.core.receipts import Receipt, newer_receipts
from factnode.core.serving import counted_votes, decayed_since, own_vote, peer_voted, serve
from factnode.core.signed import vote_payload, votes_numbered_after, withdrawn
from factnode.core.story import decayed_decision
from factnode.core.validation import MAX_KEY_PART_BYTES, check_instant, check_key, check_text
from factnode.ledger._memory import CheckedMemory, ServedMemory
from factnode.ledger._model import Belief, Committed, Signing, belief_from_rows, served_of
from factnode.store import Repository, StoredBelief
from factnode.store.repository import Transaction, Writes

# The node_meta entry holding the highest sequence number this node signed a vote with.
VOTE_SEQ_META = "vote_seq"


class _VoteChange(enum.Enum):
    """What a refresh does with this node's vote on a key."""

    KEEP = "keep"  # the held vote stands
    PUT = "put"  # a new or changed vote
    REMOVE = "remove"  # none now, and none signed to withdraw


class _Representatives:
    """Each version's strongest evidence over a key's visible evidence, worked out only when a
    version other than the verdict's is asked for (the verdict names its own) and not
    already known."""

    __slots__ = ("_all", "_policy", "_state", "_verdict")

    def __init__(
        self,
        state: KeyState,
        verdict: Verdict | None,
        policy: Policy,
        known: Mapping[str, Evidence] | None = None,
    ):
        self._state = state
        self._verdict = verdict
        self._policy = policy
        self._all = known

    def of(self, version_id: str) -> Evidence | None:
        v = self._verdict
        if v is not None and version_id == v.version_id:
            for e in self._state.evidence:  # the verdict's own evidence is visible
                if e.evidence_id == v.evidence_id:
                    return e
        if self._all is None:
            state = self._state
            self._all = representatives(state.visible(self._policy), self._policy)
        return self._all.get(version_id)


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
        records what changed, and returns every key's served rows. `quiet` keys change
        without announcing (erased keys); `known` holds the given states already
        arbitrated; `votes_before` the votes held before this transaction changed them,
        where it did (else the votes read here are the ones before)."""
        if not states:
            return {}
        # Assertions past their expiry count no more (specification §6); a state that lost
        # some is arbitrated again.
        live = {k: st.holding(self.policy, now) for k, st in states.items()}
        if known is not None:
            known = {k: a for k, a in known.items() if live.get(k) is states.get(k)}
        states = live
        keys = list(states)
        if current is None:
            current = tx.beliefs(keys)
        votes = tx.votes(keys)
        verdicts = self._verdicts(states, known)
        pins = self._pins(tx, verdicts, votes)
        served_rows: dict[Key, list[StoredBelief]] = {}
        changes: list[tuple[Key, Sequence[StoredBelief], bool]] = []
        put: list[Vote] = []
        removed: list[Key] = []
        transitions = []
        for key, state in states.items():
            verdict, reps = verdicts[key]
            pin = pins.get(key)
            held = votes.get(key, [])
            mine, change = self._my_vote(key, verdict, reps, held, now, pin)
            if mine is not None and change is _VoteChange.PUT:
                put.append(mine)
            elif change is _VoteChange.REMOVE:
                removed.append(key)
            others = self.peer_votes_counted(held, state)
            rows, result = self._served_rows(
                key, verdict, reps, [*others, *([mine] if mine else [])], now, pin
            )
            served_rows[key] = rows
            old = current.get(key, [])
            changed = _served_differ(old, rows) or bool(key in quiet and old)
            if changed:
                changes.append((key, rows, key not in quiet))
            before = (votes_before or {}).get(key, held)
            logged = self._logged(key, state, old, rows, result, changed, before, fx, now)
            fx.tallies[key] = result
            if logged is not None:
                transitions.append(logged)
        self._record(tx, put, removed, changes, transitions, fx, now)
        return served_rows

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
            if decayed_since(st, self.policy, _worked_out(current.get(k, [])), now)
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

    def _verdicts(
        self, states: Mapping[Key, KeyState], known: Mapping[Key, Arbitrated] | None
    ) -> dict[Key, tuple[Verdict | None, _Representatives]]:
        """Each key's local verdict and its versions' representatives (`known`: those
        arbitrated already)."""
        verdicts: dict[Key, tuple[Verdict | None, _Representatives]] = {}
        for key, state in states.items():
            memo = known.get(key) if known is not None else None
            if memo is not None:
                verdict = memo.verdict
            else:
                verdict = arbitrate(state.visible(self.policy), self.policy)
            reps = _Representatives(state, verdict, self.policy, memo.reps if memo else None)
            verdicts[key] = (verdict, reps)
        return verdicts

    def _my_vote(
        self,
        key: Key,
        verdict: Verdict | None,
        reps: _Representatives,
        held: Sequence[Vote],
        now: Instant,
        pin: str | None,
    ) -> tuple[Vote | None, _VoteChange]:
        """This node's vote on `key` now, beside what to do with it."""
        mine = self._own_vote(key, verdict, reps, now, pin)
        old_mine = next((v for v in held if v.voter == self.node_id), None)
        if mine is None and old_mine is not None and self.sign is not None:
            # A signed vote is withdrawn by a later signed one that votes for nothing:
            # a relay may hold the old one, and only a higher number replaces it.
            mine = old_mine if old_mine.version_id is None else withdrawn(old_mine, now)
        if same_vote(old_mine, mine):
            return old_mine, _VoteChange.KEEP
        if mine is None:
            return None, _VoteChange.REMOVE
        if old_mine is not None and mine.cast_at <= old_mine.cast_at:
            # Peers keep the latest cast: a changed vote must be cast later.
            mine = replace(mine, cast_at=old_mine.cast_at + 1)
        return mine, _VoteChange.PUT

    def _pins(
        self,
        tx: Transaction,
        verdicts: Mapping[Key, tuple[Verdict | None, _Representatives]],
        votes: Mapping[Key, Sequence[Vote]],
    ) -> dict[Key, str]:
        """The version pinned on each key that has one. Only a key under review can be
        pinned: most writes read no pin at all."""
        pins = tx.pins(
            [
                k
                for k, (verdict, _) in verdicts.items()
                if (verdict is not None and verdict.ambiguous) or self.peer_voted(votes.get(k, ()))
            ]
        )
        return {k: p.version_id for k, p in pins.items()}

    def _logged(
        self,
        key: Key,
        state: KeyState,
        old: Sequence[StoredBelief],
        rows: Sequence[StoredBelief],
        result: Tally | None,
        changed: bool,
        before: Sequence[Vote],
        fx: Committed,
        now: Instant,
    ) -> Decision | None:
        """The decision logging what a refresh changed on `key` (`changed`: what it serves):
        a transition of what it serves, else a change of tally alone, or None. `before` are
        its votes before this transaction changed them."""
        logged = None
        if changed:
            logged = transition(
                key,
                served_of(old[0] if old else None),
                served_of(rows[0] if rows else None),
                result,
                now,
            )
        if logged is None and result is not None and result.peer_voted and rows:
            logged = self._retallied(key, state, result, rows, before, fx, now)
        return logged

    def _retallied(
        self,
        key: Key,
        state: KeyState,
        result: Tally,
        rows: Sequence[StoredBelief],
        before: Sequence[Vote],
        fx: Committed,
        now: Instant,
    ) -> Decision | None:
        """The "tally changed" entry for a key whose served version stays, or None."""
        if key in fx.tallies:
            # Counted already in this transaction: compare with that, or a change would be
            # logged twice (evidence and votes of one delta refresh apart).
            earlier = fx.tallies[key]
        else:
            earlier = self._tally_before(before, state, fx, now)
        return retallied(key, earlier, result, served_of(rows[0]), now)

    def _record(
        self,
        tx: Transaction,
        put: list[Vote],
        removed: list[Key],
        changes: list[tuple[Key, Sequence[StoredBelief], bool]],
        transitions: list[Decision],
        fx: Committed,
        now: Instant,
    ) -> None:
        """Stores what a refresh decided: this node's votes (numbered and signed), the
        served rows that changed and the decisions that log it."""
        numbered, last = self.numbered(tx, put) if put else ([], "")
        self.apply(
            tx,
            Writes(
                meta={VOTE_SEQ_META: last} if last else {},
                votes_removed={self.node_id: removed} if removed else {},
                votes=numbered,
                beliefs=changes,
                decisions=transitions,
                changed_at=now,
            ),
            fx,
        )

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

    def _tally_before(
        self, votes: Sequence[Vote], state: KeyState, fx: Committed, now: Instant
    ) -> Tally | None:
        """The tally `votes` gave before this transaction: counted against the key's evidence
        without what the transaction added."""
        held = {e.evidence_id: e for e in state.evidence if e.evidence_id not in fx.evidence_added}
        mine = [v for v in votes if v.voter == self.node_id]
        return tally(
            [*mine, *counted_votes(votes, held, self.policy, self.node_id)],
            now=now,
            threshold=self.policy.consensus_threshold,
            half_life_days=self.policy.vote_half_life_days,
            self_id=self.node_id,
        )

    def peer_voted(self, votes: Iterable[Vote]) -> bool:
        """Whether any node but this one votes among `votes`."""
        return peer_voted(list(votes), self.node_id)

    def _own_vote(
        self,
        key: Key,
        verdict: Verdict | None,
        reps: _Representatives,
        now: Instant,
        pin: str | None = None,
    ) -> Vote | None:
        """This node's vote on a key at present (`serving.own_vote`)."""
        return own_vote(self.node_id, key, verdict, reps.of, self.policy, now, pin)

    def _served_rows(
        self,
        key: Key,
        verdict: Verdict | None,
        reps: _Representatives,
        votes: Sequence[Vote],
        now: Instant,
        pin: str | None = None,
    ) -> tuple[list[StoredBelief], Tally | None]:
        """The rows to store for what a key serves at present (`serving.serve`)."""
        values, result = serve(verdict, reps.of, votes, self.policy, self.node_id, now, pin)
        rows = [
            StoredBelief(
                key, v.version_id, v.evidence.object, v.evidence.evidence_id, v.rule, v.state, now
            )
            for v in values
        ]
        return rows, result

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


def _worked_out(rows: Sequence[StoredBelief]) -> Instant | None:
    """When a key's served rows were worked out (None: it serves nothing)."""
    return min(b.updated_at for b in rows) if rows else None


def _served_differ(old: Sequence[StoredBelief], rows: Sequence[StoredBelief]) -> bool:
    """Whether a key's served rows differ in what they serve (version, evidence, rule, state)."""
    return [(b.version_id, b.evidence_id, b.rule, b.state) for b in old] != [
        (b.version_id, b.evidence_id, b.rule, b.state) for b in rows
    ]


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
