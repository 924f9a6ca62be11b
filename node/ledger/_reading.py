"""Reading: served beliefs, as-of beliefs, history, explanations, pages of beliefs and of
the decision log, the change feed and counts. Reads never write."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence

from factnode import tokens
from factnode.core import (
    BeliefState,
    Confirmation,
    Decision,
    Evidence,
    FieldViolation,
    Instant,
    InvalidInput,
    Key,
    KeyState,
    Outcome,
    Rule,
    VersionHistory,
    confirmed_at,
    expiry,
    explain,
    history,
    ids,
)
from factnode.core.consensus import Tally, Vote, tally
from factnode.core.recall import MAX_CANDIDATES, MAX_VECTOR_SCAN, Search, fuse
from factnode.core.receipts import coverage
from factnode.core.refresh import StoredBelief
from factnode.core.serving import (
    Answer,
    Pin,
    decayed_since,
    is_present,
    nothing_served,
    served_history,
    view,
)
from factnode.core.story import (
    BELIEVED_AGAIN,
    ERASED,
    BelievedAgain,
    believed_again_by_retraction,
    erasure_story,
    overruled_comparisons,
    review_note,
    served_until_resolution,
)
from factnode.ledger._model import (
    Belief,
    ErasureStatus,
    Explanation,
    Hit,
    NotFound,
    Page,
    belief_from_rows,
    belief_of,
    hit_of,
    stamped,
)
from factnode.ledger._serving import Component, check_filters, check_key_input, check_times
from factnode.store import BeliefChange, Counts, LoggedDecision, Tombstone
from factnode.store.repository import Match, Transaction

# Decisions that change what a key serves: an erasure's story holds until the next of them.
_SERVED_CHANGES = (
    Outcome.ACCEPTED,
    Outcome.SUPERSEDED,
    Outcome.AMBIGUOUS,
    Outcome.RETRACTED,
    Outcome.RESOLVED,
    Outcome.CONTESTED,
    Outcome.ERASED,
)

MAX_PAGE_SIZE = 1000
DEFAULT_PAGE_SIZE = 100


def _page_size(size: int) -> int:
    if size < 0:
        raise InvalidInput([FieldViolation("page_size", "must not be negative")])
    return min(size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


# Candidates whose keys are worked out together: a page of hits seldom needs more.
_SEARCH_CHUNK = 32


def _lazily(query: Callable[[], Sequence[Match]]) -> Iterator[Match]:
    """The matches of `query`, asked for only when the first is wanted."""
    yield from query()


def _values(matches: Iterator[Match]) -> Iterator[tuple[Key, str, str, float]]:
    """Each value (its version id names its key too) once, at its first (best) match."""
    seen: set[str] = set()
    for m in matches:
        if m.version_id not in seen:
            seen.add(m.version_id)
            yield m.key, m.version_id, m.evidence_id, m.score


class Reading(Component):
    """Everything a client or operator reads from the node."""

    def belief(
        self, key: Key, as_of: Instant | None = None, known_at: Instant | None = None
    ) -> Belief:
        """The served belief now or, with `as_of` / `known_at`, what the key serves at that
        event time as known then (`serving.view`: pins and votes count as that view sees
        them, and a view that sees everything answers what the present does)."""
        check_key_input(key)
        check_times(as_of, known_at)
        with self.repo.read() as tx:
            state = tx.key_states([key])[key]
            found = self._belief_in(tx, key, state, as_of, known_at)
        if found is None:
            raise NotFound(
                nothing_served(key, state, self.policy, as_of, known_at, self.clock.now())
            )
        return found

    def _belief_in(
        self,
        tx: Transaction,
        key: Key,
        state: KeyState,
        as_of: Instant | None = None,
        known_at: Instant | None = None,
    ) -> Belief | None:
        """What `belief` answers for a key whose state is `state`, read in `tx`; None: nothing
        is served in that view."""
        if as_of is None and known_at is None:
            rows = tx.beliefs([key]).get(key, [])
            return self._current(tx, key, state, rows, self._stale(rows, state))
        votes = tx.votes([key])[key]
        pin = tx.pins([key]).get(key) if self._may_pin(state, votes) else None
        if is_present(state, pin, as_of, known_at, self.policy, self.clock.now()):
            # The view sees everything: it is GetBelief's answer, read as GetBelief does.
            return self._current(tx, key, state, [], False)
        confirmations = self._confirmations(tx, state, known_at)
        answer = self._answer(key, state, votes, pin, [], as_of, known_at, confirmations)
        # Stamped from what the view knows: evidence recorded by `known_at`.
        known = [e for e in state.evidence if known_at is None or e.recorded_at <= known_at]
        found = belief_of(key, answer)
        return stamped(found, known) if found is not None else None

    def search(
        self, request: Search, may_read: Callable[[str], bool], page_token: str = ""
    ) -> Page[Hit]:
        """The beliefs a text query finds, best first (`SearchBeliefs`, specification §8):
        of the assertions it matches (a bounded number, `_ranked`), those of a value that
        `belief` serves at the search's (as_of, known_at), in namespaces `may_read` allows,
        within the filters. A value is a hit once, at its best-ranked assertion. Keys are
        worked out a few at a time, only until the page is full."""
        check_times(request.as_of, request.known_at)
        offset = tokens.decode_search_position(page_token, request.fingerprint) if page_token else 0
        wanted = offset + request.limit + 1
        hits: list[Hit] = []
        with self.repo.read() as tx:
            candidates = (c for c in self._ranked(tx, request) if may_read(c[0].namespace))
            served: dict[Key, Belief | None] = {}
            states: dict[Key, KeyState] = {}
            while len(hits) < wanted:
                chunk = list(itertools.islice(candidates, _SEARCH_CHUNK))
                if not chunk:
                    break
                states.update(tx.key_states({k for k, *_ in chunk} - states.keys()))
                for key, version_id, evidence_id, score in chunk:
                    if key not in served:
                        served[key] = self._belief_in(
                            tx, key, states[key], request.as_of, request.known_at
                        )
                    hit = hit_of(
                        served[key], version_id, evidence_id, score, states[key].evidence,
                        tx.evidence,
                    )  # fmt: skip
                    if hit is not None and request.admits(hit.belief.state, hit.anchor):
                        hits.append(hit)
                        if len(hits) == wanted:
                            break
        more = len(hits) == wanted
        page = hits[offset : offset + request.limit]
        token = tokens.search_position(request.fingerprint, offset + request.limit) if more else ""
        return Page(page, token)

    def _ranked(self, tx: Transaction, request: Search) -> Iterator[tuple[Key, str, str, float]]:
        """Each matched value once, (key, version id, its best assertion, score), best first.

        By words alone: the assertions matching every word, then those matching any (that
        second, costlier query runs only if the first runs out before the page is full). By
        a vector alone: cosine. By both: the two rankings fused (`recall.fuse`). Which of
        these values a view serves is the caller's to check: stored served rows are not
        trusted here, since an expiry the decay job has not materialised yet may have
        changed what a key serves."""
        prefix, subject, predicate = request.namespace_prefix, request.subject, request.predicate

        def matching(terms: Sequence[str], every_word: bool) -> Iterator[Match]:
            if not terms:
                return iter(())
            return _lazily(
                lambda: tx.search_matches(
                    terms,
                    every_word=every_word,
                    namespace_prefix=prefix,
                    subject=subject,
                    predicate=predicate,
                )
            )

        every = request.terms if len(request.terms) > 1 else ()
        words = itertools.chain(matching(every, True), matching(request.terms, False))
        if request.embedding is None:
            yield from _values(words)
            return
        vectors = tx.vector_matches(
            request.embedding,
            namespace_prefix=prefix,
            subject=subject,
            predicate=predicate,
            scan=MAX_VECTOR_SCAN,
            limit=MAX_CANDIDATES,
        )
        if not request.terms:
            yield from _values(iter(vectors))
            return
        by_words = list(_values(words))
        by_vector = list(_values(iter(vectors)))
        firsts = {v: (k, e) for k, v, e, _ in (*by_vector, *by_words)}
        for version_id, score in fuse(
            [v for _, v, _, _ in by_words], [v for _, v, _, _ in by_vector]
        )[:MAX_CANDIDATES]:
            key, evidence_id = firsts[version_id]
            yield key, version_id, evidence_id, score

    def _confirmations(
        self, tx: Transaction, state: KeyState, known_at: Instant | None
    ) -> list[Confirmation]:
        """The confirmations a view as known at `known_at` counts expiries from: none needed
        for a view as known now (the evidence carries its `confirmed_at`)."""
        if known_at is None:
            return []
        return tx.confirmations([e.evidence_id for e in state.evidence])

    def _stale(self, rows: Sequence[StoredBelief], state: KeyState) -> bool:
        """Whether a claim of the key expired after its served rows were worked out: then
        they are not the present any more, and a read works the present out itself."""
        since = min(b.updated_at for b in rows) if rows else None
        return decayed_since(state, self.policy, since, self.clock.now())

    def _current(
        self, tx: Transaction, key: Key, state: KeyState, rows: Sequence[StoredBelief], stale: bool
    ) -> Belief | None:
        """What the key serves now: its stored `rows`, or, where a claim expired since they
        were worked out (`stale`, from `_stale`), the present view worked out here."""
        if stale:
            found = self._worked_out(tx, key, state)
        else:
            held = {e.evidence_id: e for e in state.evidence}
            found = self._serving.beliefs(tx, [key], held).get(key)
        return stamped(found, state.evidence) if found is not None else None

    def _worked_out(self, tx: Transaction, key: Key, state: KeyState) -> Belief | None:
        """The present view of a key, worked out from its state rather than its stored rows."""
        votes = tx.votes([key])[key]
        pin = tx.pins([key]).get(key)
        return belief_of(key, self._answer(key, state, votes, pin, []))

    def _may_pin(self, state: KeyState, votes: Sequence[Vote]) -> bool:
        """Whether a pin could apply to a key in some view: only where versions can tie
        (two or more held) or peers vote; most keys need no pin read."""
        if self._serving.peer_voted(votes):
            return True
        first = state.evidence[0].version_id if state.evidence else None
        return any(e.version_id != first for e in state.evidence)

    def _answer(
        self,
        key: Key,
        state: KeyState,
        votes: Sequence[Vote],
        pin: Pin | None,
        present: Sequence[StoredBelief],
        as_of: Instant | None = None,
        known_at: Instant | None = None,
        confirmations: Sequence[Confirmation] = (),
    ) -> Answer:
        return view(
            key,
            state,
            votes,
            pin,
            self.policy,
            self.node_id,
            self.clock.now(),
            as_of=as_of,
            known_at=known_at,
            present=[(b.version_id, b.evidence_id, b.rule, b.state) for b in present],
            confirmations=confirmations,
        )

    def served_in_memory(self, key: Key) -> Belief | None:
        """The served belief of a hot key from memory, or None: then ask `served`. Only keys
        no peer votes on are kept (a tally depends on the time); safe on the event loop."""
        found = self._serving.memory.get(key)
        return found

    def served(self, key: Key) -> tuple[Belief, Explanation | None]:
        """The served belief now and, where a peer votes on the key, its explanation with the
        tally: one read transaction for what GetBelief answers. A belief without peer votes
        is kept in memory for `served_in_memory` until a write touches its key."""
        check_key_input(key)
        memory = self._serving.memory
        with self.repo.read() as tx:
            hot = memory.recall(tx, key)  # on PostgreSQL, checked against other replicas' writes
            if hot is not None:
                return hot, None
            epoch = memory.epoch()
            rows = tx.beliefs([key]).get(key, [])
            state = tx.key_states([key])[key]
            stale = self._stale(rows, state)
            found = self._current(tx, key, state, rows, stale)
            if found is None:
                raise NotFound(nothing_served(key, state, self.policy, now=self.clock.now()))
            votes = tx.votes([key])[key]
            if not self._serving.peer_voted(votes):
                if not stale:
                    memory.fill(epoch, key, found, state.next_expiry(self.policy, self.clock.now()))
                return found, None
            pin = tx.pins([key]).get(key)
        return found, self._explained(key, state, votes, pin, [] if stale else rows)

    def list_beliefs(
        self,
        namespace: str,
        subject: str | None = None,
        page_size: int = 0,
        page_token: str = "",
        subject_prefix: str = "",
    ) -> Page[Belief]:
        """Current beliefs of a namespace (and subject, or subjects starting with
        `subject_prefix`), a page at a time, in key order."""
        check_filters(namespace=namespace, subject=subject, subject_prefix=subject_prefix)
        after = tokens.decode_key_position(page_token) if page_token else None

        def rows(tx: Transaction, limit: int) -> list[StoredBelief]:
            return tx.list_beliefs(namespace, subject, after, limit, subject_prefix)

        def position(b: StoredBelief) -> str:
            return tokens.key_position(ids.key_id(b.key), b.version_id)

        return self._page(rows, position, page_size)

    def subjects(
        self, namespace: str, subject_prefix: str = "", page_size: int = 0, page_token: str = ""
    ) -> Page[str]:
        """The subjects with a current belief in a namespace (starting with `subject_prefix`),
        each once, a page at a time, in the database's order of text."""
        check_filters(namespace=namespace, subject_prefix=subject_prefix)
        size = _page_size(page_size)
        after = tokens.decode_subject_position(page_token) if page_token else None
        with self.repo.read() as tx:
            found = tx.list_subjects(namespace, subject_prefix, after, size + 1)
        more = len(found) > size
        found = found[:size]
        return Page(found, tokens.subject_position(found[-1]) if more else "")

    def review_queue(
        self, namespace: str = "", page_size: int = 0, page_token: str = ""
    ) -> Page[Belief]:
        """Every key whose served state is CONTESTED or AMBIGUOUS, and only those, oldest
        first (by when its served belief last changed)."""
        check_filters(namespace=namespace)
        after = tokens.decode_queue_position(page_token) if page_token else None

        def rows(tx: Transaction, limit: int) -> list[StoredBelief]:
            return tx.queued_beliefs(namespace, after, limit)

        def position(b: StoredBelief) -> str:
            return tokens.queue_position(b.updated_at, ids.key_id(b.key), b.version_id)

        def queued(b: Belief) -> bool:
            return b.state in (BeliefState.AMBIGUOUS, BeliefState.CONTESTED)

        return self._page(rows, position, page_size, queued)

    def _page(
        self,
        rows_after: Callable[[Transaction, int], list[StoredBelief]],
        position: Callable[[StoredBelief], str],
        page_size: int,
        keep: Callable[[Belief], bool] | None = None,
    ) -> Page[Belief]:
        """One page of served beliefs: `rows_after` reads the rows after the token's position
        in the page's order, `position` makes the token for the page after a row."""
        size = _page_size(page_size)
        with self.repo.read() as tx:
            rows = rows_after(tx, size + 1)
            more = len(rows) > size
            if more:
                extra, rows = rows[size], rows[:size]
                if extra.key == rows[-1].key:
                    # The page would end between two values of one multi-valued key: take
                    # the rest of them (they follow in version order), so no key is split
                    # into two partial beliefs across pages.
                    last = extra.key
                    rest = [
                        b for b in tx.beliefs([last])[last] if b.version_id > rows[-1].version_id
                    ]
                    rows = rows + rest
            reps = tx.evidence([b.evidence_id for b in rows])
            grouped: dict[Key, list[StoredBelief]] = {}
            for b in rows:
                grouped.setdefault(b.key, []).append(b)
            states = tx.key_states(list(grouped))
            items = []
            for key, bs in grouped.items():
                held = states[key].evidence
                if not self._stale(bs, states[key]):
                    items.append(
                        stamped(belief_from_rows(bs, reps), held) or belief_from_rows(bs, reps)
                    )
                    continue
                # A claim expired since the rows were worked out: the present, worked out
                # here, stays on the page only if it still belongs there.
                found = self._worked_out(tx, key, states[key])
                found = stamped(found, held) if found is not None else None
                if found is not None and (keep is None or keep(found)):
                    items.append(found)
        return Page(items, position(rows[-1]) if more else "")

    def history(self, key: Key, known_at: Instant | None = None) -> list[VersionHistory]:
        """Every version of a key with its validity intervals, statuses and lineage: the
        intervals in which it was served at each event time as known at `known_at`, and the
        served version's status and rule as GetBelief (at `known_at`) gives them."""
        check_key_input(key)
        check_times(None, known_at)
        with self.repo.read() as tx:
            state = tx.key_states([key])[key]
            lineage = tx.lineage(key)
            votes = tx.votes([key])[key]
            pin = tx.pins([key]).get(key)
            present = tx.beliefs([key]).get(key, [])
            confirmations = tx.confirmations([e.evidence_id for e in state.evidence])
        if not state.evidence:
            raise NotFound(f"no evidence for {key}")
        if self._stale(present, state):
            present = []
        now = self.clock.now()
        local = history(
            state.evidence, state.retractions, self.policy, known_at=known_at, lineage=lineage
        )

        def at(as_of: Instant | None) -> Answer:
            return self._answer(key, state, votes, pin, present, as_of, known_at, confirmations)

        def lives(known: Instant | None) -> dict[str, tuple[Instant, Instant]]:
            out = {}
            for e in state.evidence:
                confirmed = confirmed_at(e, confirmations, self.policy, self.node_id, known)
                end = expiry(e, self.policy, confirmed)
                if end is not None:
                    out[e.evidence_id] = (end, confirmed)
            return out

        served = served_history(local, state, at, known_at, lives(known_at), now)
        if pin is None or (known_at is not None and pin.pinned_at > known_at):
            return served
        then = pin.pinned_at - 1

        def before_pin() -> list[VersionHistory]:
            # The key as known just before the resolution (the pin unknown then too).
            earlier = history(
                state.evidence, state.retractions, self.policy, known_at=then, lineage=lineage
            )

            def at_then(as_of: Instant | None) -> Answer:
                return self._answer(key, state, votes, pin, [], as_of, then, confirmations)

            return served_history(earlier, state, at_then, then, lives(then), now)

        return served_until_resolution(served, before_pin, pin)

    def explain(
        self, key: Key, as_of: Instant | None = None, known_at: Instant | None = None
    ) -> Explanation:
        """The belief and, for every other version, the first rule by which the belief beats
        it. Where votes or an operator's pin decided what is served, that is the rule named,
        with the vote shares; local arbitration's own chain is kept beside it. The view at
        (`as_of`, `known_at`) is the one `belief` answers."""
        check_key_input(key)
        check_times(as_of, known_at)
        with self.repo.read() as tx:
            state = tx.key_states([key])[key]
            votes = tx.votes([key])[key]
            pin = tx.pins([key]).get(key)
            present = tx.beliefs([key]).get(key, [])
            latest = tx.latest_decision(key, _SERVED_CHANGES)
            confirmations = self._confirmations(tx, state, known_at)
        if self._stale(present, state):
            present = []
        return self._explained(
            key, state, votes, pin, present, as_of, known_at, latest, confirmations
        )

    def _explained(
        self,
        key: Key,
        state: KeyState,
        votes: Sequence[Vote],
        pin: Pin | None,
        present: Sequence[StoredBelief],
        as_of: Instant | None = None,
        known_at: Instant | None = None,
        latest: LoggedDecision | None = None,
        confirmations: Sequence[Confirmation] = (),
    ) -> Explanation:
        """The explanation of a view; `latest` is the key's latest decision that changed what
        it serves (an erasure's story holds until the next one)."""
        answer = self._answer(key, state, votes, pin, present, as_of, known_at, confirmations)
        belief = belief_of(key, answer)
        if belief is None:
            raise NotFound(
                nothing_served(key, state, self.policy, as_of, known_at, self.clock.now())
            )
        _, local = explain(answer.evidence, self.policy)
        comparisons = local
        if belief.rule in (Rule.FEDERATION_CONSENSUS, Rule.OPERATOR_RESOLUTION):
            comparisons = overruled_comparisons(
                belief.version_id, belief.rule, answer.evidence, self.policy, answer.tally, pin
            )
        again = believed_again_by_retraction(
            key, answer, state, self.policy, as_of=as_of, known_at=known_at
        )
        if again is None and latest is not None:
            again = _erasure_told(key, belief, latest.decision, known_at)
        return Explanation(
            belief, comparisons, local, answer.tally, review_note(answer, pin), again
        )

    def _tally(self, votes: Sequence[Vote], state: KeyState) -> Tally | None:
        """The votes on a key as this node counts them now (peers' checked against its
        evidence)."""
        mine = [v for v in votes if v.voter == self.node_id]
        now = self.clock.now()
        # A vote resting on evidence that has expired here waits, as in `serving.view`.
        counted = self._serving.peer_votes_counted(votes, state.holding(self.policy, now))
        return tally(
            [*mine, *counted],
            now=now,
            threshold=self.policy.consensus_threshold,
            half_life_days=self.policy.vote_half_life_days,
            self_id=self.node_id,
        )

    def explain_many(self, keys: Sequence[Key]) -> dict[Key, Explanation]:
        """`explain` for many keys at once, in one read (a review page), each with its tally;
        keys without a belief are left out."""
        with self.repo.read() as tx:
            states = tx.key_states(keys)
            rows = tx.beliefs(keys)
            votes = tx.votes(keys)
            pins = tx.pins(keys)
        out = {}
        for key in keys:
            try:
                present = rows.get(key, [])
                out[key] = self._explained(
                    key,
                    states[key],
                    votes[key],
                    pins.get(key),
                    [] if self._stale(present, states[key]) else present,
                )
            except NotFound:
                continue
        return out

    def erasures(
        self, members: Mapping[str, bool], page_size: int = 0, page_token: str = ""
    ) -> Page[ErasureStatus]:
        """The erasures held, newest first, each with which of `members` (every member known,
        by whether it is revoked: the federation's roster knows them) have confirmed it
        (specification §6, "Erasure receipts")."""
        size = _page_size(page_size)
        after = tokens.decode_erasure_position(page_token) if page_token else None
        with self.repo.read() as tx:
            heads = tx.erasures_page(after, size + 1)
            more = len(heads) > size
            heads = heads[:size]
            items = self._coverage(tx, heads, members)
        last = heads[-1] if more else None
        token = tokens.erasure_position(last.erased_at, last.erasure_id) if last else ""
        return Page(items, token)

    def erasure(self, erasure_id: str, members: Mapping[str, bool]) -> ErasureStatus:
        """One erasure held here and its coverage among `members` (as `erasures`); NotFound
        when this node holds none such."""
        with self.repo.read() as tx:
            heads = tx.erasures_page(None, 1, erasure_id)
            if not heads:
                raise NotFound(f"no erasure {erasure_id} is held on this node")
            return self._coverage(tx, heads, members)[0]

    def _members(self, tx: Transaction, roster: Mapping[str, bool]) -> dict[str, bool]:
        """Every member known, by whether it is revoked: the member records stored, the
        roster's (`roster`: configured peers and certificates it has seen; its word on
        revocation wins) and this node itself."""
        known = {m.record.node_id: m.revoked for m in tx.member_records()}
        known.update(roster)
        known.setdefault(self.node_id, False)
        return known

    def unconfirmed_erasures(self, members: Mapping[str, bool]) -> tuple[int, Instant | None]:
        """How many erasures held some current member of `members` (as `erasures`) has not
        confirmed yet, and when the oldest of them was made (None: every erasure is confirmed
        by every current member). One aggregate query, for the metrics' periodic refresh."""
        with self.repo.read() as tx:
            known = self._members(tx, members)
            current = sorted(n for n, revoked in known.items() if not revoked)
            return tx.unconfirmed_erasures(current)

    def _coverage(
        self, tx: Transaction, heads: Sequence[Tombstone], known: Mapping[str, bool]
    ) -> list[ErasureStatus]:
        """Each erasure with its coverage: the members known (`_members`), and which of them
        are revoked, against the receipts held."""
        members = self._members(tx, known)
        receipts = tx.receipts({t.erasure_id for t in heads}).values()
        return [ErasureStatus(t, coverage(t.erasure_id, members, receipts)) for t in heads]

    def evidence_by_ids(self, evidence_ids: Sequence[str]) -> dict[str, Evidence]:
        """Stored evidence by id (any status)."""
        with self.repo.read() as tx:
            return tx.evidence(evidence_ids)

    def decisions(
        self, key: Key | None = None, namespace: str = "", page_size: int = 0, page_token: str = ""
    ) -> Page[LoggedDecision]:
        """The decision log, oldest first, optionally for one key or namespace."""
        if key is not None:
            check_key_input(key)
        check_filters(namespace=namespace)
        size = _page_size(page_size)
        after = tokens.decode_seq_position(page_token) if page_token else 0
        with self.repo.read() as tx:
            rows = tx.decisions(key, namespace or None, after, size + 1)
        more = len(rows) > size
        rows = rows[:size]
        return Page(rows, tokens.seq_position(rows[-1].seq) if more else "")

    def changes(
        self, namespace: str = "", after_seq: int = 0, limit: int = 100
    ) -> list[BeliefChange]:
        """Belief changes after a resume point, oldest first."""
        check_filters(namespace=namespace)
        with self.repo.read() as tx:
            return tx.belief_changes(namespace or None, after_seq, limit)

    def last_change(self) -> int:
        """The position of the latest belief change (0: none yet), made through any replica."""
        with self.repo.read() as tx:
            return tx.last_change_seq()

    def counts(self) -> Counts:
        """Sizes of the store."""
        with self.repo.read() as tx:
            return tx.counts()

    def tally_of(self, key: Key) -> Tally | None:
        """The vote count for a key as this node sees it now."""
        with self.repo.read() as tx:
            votes = tx.votes([key])[key]
            state = tx.key_states([key])[key]
        return self._tally(votes, state)

    def meta(self, name: str) -> str | None:
        """A persisted node fact."""
        with self.repo.read() as tx:
            return tx.meta(name)


def _erasure_told(
    key: Key, belief: Belief, logged: Decision, known_at: Instant | None
) -> BelievedAgain | None:
    """The story an erasure logged for the served version, if it still holds in this view:
    no later decision changed what the key serves, and the view knows of the erasure."""
    if logged.outcome is not Outcome.ERASED or not logged.detail.startswith(BELIEVED_AGAIN):
        return None
    if known_at is not None and known_at < logged.decided_at:
        return None
    served = dict(belief.values) if belief.values else {belief.version_id: belief.object}
    obj = served.get(logged.version_id or "")
    if obj is None:
        return None
    text = erasure_story(obj, logged.detail)
    return BelievedAgain(key, logged.version_id or "", obj, ERASED, text)
