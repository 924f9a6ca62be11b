"""Peer input: what this node offers its peers from its store, and applying what a peer
sent (tombstones, relayed evidence, votes), each item checked, never believed."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from factnode.core import Evidence, Key, Rule, ids
from factnode.core.consensus import Vote, hour_of, newer
from factnode.core.peer_checks import latest_per_key, tombstone_problem, vote_problem
from factnode.core.validation import describe_violations, relayed_violations
from factnode.ledger._forgetting import Forgetting
from factnode.ledger._model import Committed, Received
from factnode.ledger._writing import Writing
from factnode.store import Tombstone


class PeerInput(Writing, Forgetting):
    """Sync's side of the ledger: offer, receive and recount votes."""

    _counted_hour: int | None = None

    def offer(
        self, prefixes: dict[str, list[str]], have_ids: Collection[str] = ()
    ) -> tuple[list[Tombstone], list[Evidence], list[Vote]]:
        """What this node holds under the given buckets ("evidence", "tombstones", "votes":
        its own votes), leaving out ids the caller already has."""
        have = set(have_ids)
        with self.repo.read() as tx:
            tombstones = [
                t
                for t in tx.tombstones_under(prefixes.get("tombstones", []))
                if t.erasure_id not in have
            ]
            evidence = [
                e
                for e in tx.evidence_under(prefixes.get("evidence", []))
                if e.evidence_id not in have
            ]
            votes = tx.votes_under(self.node_id, prefixes.get("votes", []))
        relayed = [replace(e, origin_recorded_at=e.first_recorded_at) for e in evidence]
        return tombstones, relayed, votes

    def receive(
        self,
        peer_id: str,
        peer_cap: str | None,
        tombstones: Sequence[Tombstone],
        evidence: Sequence[Evidence],
        votes: Sequence[Vote],
        votes_complete_under: Collection[str] = (),
    ) -> Received:
        """Applies what a peer sent, tombstones first: erased evidence cannot come back in the
        same delta. Relayed evidence counts with its anchor capped at the peer's ceiling. Votes
        count for `peer_id`, the node the connection proved; a vote older than the one held
        from that peer is ignored, one dated in this node's future or resting on erased
        evidence is refused, and a kept vote counts only as weighed from evidence held here.

        `votes_complete_under` names key-id prefixes under which `votes` are all the peer's
        votes (a pull answers with every vote the peer holds there): a vote of the peer's held
        under them and not sent is one the peer withdrew, and it stops counting."""
        cap_name = peer_cap or self.policy.default_max_anchor
        rejected: list[tuple[str, str]] = []
        accepted = 0
        now = self.clock.now()
        fx = Committed()
        with self.repo.write() as tx:
            known = tx.known_erasures([t.erasure_id for t in tombstones])
            for t in tombstones:
                problem = tombstone_problem(t, now, self.policy.clock_skew_micros)
                if problem:
                    rejected.append((t.erasure_id, problem))
                    continue
                accepted += 1
                if t.erasure_id in known:
                    continue
                known.add(t.erasure_id)
                self._apply_erasure(tx, t, tx.evidence_covered(t), fx)

            items: list[tuple[Evidence, str | None]] = []
            # Evidence held already (in any status) was decided when it first arrived: a
            # replayed or repeated item is taken as held, not decided and logged again, so
            # no peer can grow the decision log by resending what it sent.
            held_ids = tx.stored_evidence_ids({e.evidence_id for e in evidence})
            for e in evidence:
                problems = relayed_violations(e, self.policy)
                if problems:
                    rejected.append((e.evidence_id, describe_violations(problems)))
                    continue
                if e.evidence_id in held_ids:
                    accepted += 1
                    continue
                held_ids.add(e.evidence_id)
                cap = min(
                    (c for c in (e.anchor_cap, cap_name) if c is not None),
                    key=lambda name: self.policy.anchors[name],
                )
                items.append(
                    (
                        replace(
                            e,
                            version_id=ids.statement_version(e.key, e.object, retracts=e.retracts),
                            anchor_cap=cap,
                            recorded_at=now,
                            origin_recorded_at=e.first_recorded_at,
                        ),
                        None,
                    )
                )
            for e, ruling in self._ingest_in(tx, items, fx)[0]:
                if ruling.decision.rule is Rule.ERASED:
                    rejected.append((e.evidence_id, "covered by an erasure"))
                else:
                    accepted += 1

            named = [v.evidence_id for v in votes if v.version_id is not None]
            erased = tx.erased_ids(named)
            held = tx.evidence(named)
            good: list[Vote] = []
            room: int | None = None  # how many more of this peer's votes may wait
            for v in votes:
                problem = vote_problem(v, self.policy, now)
                if not problem and v.version_id is not None:
                    named_evidence = held.get(v.evidence_id)
                    if v.evidence_id in erased:
                        problem = "the vote rests on erased evidence"
                    elif named_evidence is None:
                        if room is None:
                            most = self.policy.max_waiting_votes_per_peer
                            room = most - tx.waiting_votes(peer_id)
                        if room <= 0:
                            problem = (
                                "too many of this peer's votes wait for evidence this node "
                                f"does not hold (at most {self.policy.max_waiting_votes_per_peer})"
                            )
                        room -= 1
                    elif (named_evidence.key, named_evidence.version_id) != (
                        v.key,
                        v.version_id,
                    ):
                        problem = "unknown version: the evidence it names is for another version"
                if problem:
                    rejected.append((ids.key_id(v.key), problem))
                    continue
                good.append(replace(v, voter=peer_id))
            good = latest_per_key(good)
            withdrawn: set[Key] = set()
            if votes_complete_under:
                sent = {v.key for v in votes}
                withdrawn = {
                    v.key
                    for v in tx.votes_under(peer_id, votes_complete_under)
                    if v.key not in sent
                }
            # The votes as they were, so a change of tally is logged (`_refresh`).
            before = tx.votes({v.key for v in good} | withdrawn) if good or withdrawn else {}
            if withdrawn:
                tx.delete_votes(peer_id, withdrawn)
                fx.votes_removed.extend((peer_id, k) for k in withdrawn)
            fresh: list[Vote] = []
            if good:
                current = before  # withdrawn keys are not among these
                for v in good:
                    held_vote = next((o for o in current[v.key] if o.voter == peer_id), None)
                    # An older vote arriving late never replaces a newer one. A newer one is
                    # kept even when it says the same (its later time must be held, so a vote
                    # cast between the two and arriving later still loses to it).
                    if held_vote is None or newer(v, held_vote):
                        fresh.append(v)
                tx.put_votes(fresh)
                fx.votes_put.extend(fresh)
            self._refresh(
                tx,
                tx.key_states({v.key for v in fresh} | withdrawn),
                now,
                fx,
                votes_before=before,
            )
            accepted += len(good)
        self._after(fx)
        if fx.erasures_added:
            # As after a local erase: the erased bytes must not linger in the WAL or old pages.
            self.repo.after_erase()
        return Received(accepted, rejected)

    def reconsider_if_hour_changed(self) -> bool:
        """Vote weights move with the UTC hour: recount every voted key once per hour."""
        hour = hour_of(self.clock.now())
        if hour == self._counted_hour:
            return False
        self._counted_hour = hour
        self.reconsider()
        return True

    def reconsider(self, keys: Collection[Key] | None = None) -> None:
        """Recounts votes (freshness moves with the UTC hour) for `keys`, or every voted key."""
        fx = Committed()
        with self.repo.write() as tx:
            if keys is None:
                keys = {v.key for v in tx.all_votes()}
            self._refresh(tx, tx.key_states(keys), self.clock.now(), fx)
        self._after(fx)
