"""The plans of a peer's delta (`core.delta`): given this loaded state and these items, exactly
these items refused (with these reasons), decided, taken, put and withdrawn."""

from __future__ import annotations

from dataclasses import replace

from factnode.core import Decision, Evidence, Key, Outcome, Policy, Rule, Ruling, ids
from factnode.core.consensus import Vote
from factnode.core.delta import (
    PeerEvidencePlan,
    PeerVotesLoad,
    PeerVotesPlan,
    Refusal,
    Screened,
    VoteChanges,
    own_votes_to_recast,
    peer_evidence_outcome,
    plan_peer_evidence,
    plan_peer_votes,
    plan_vote_changes,
    screen_delta,
    voters_waiting,
    withdrawn_keys,
)
from factnode.core.signed import Signature
from factnode.store import Tombstone
from tests.unit._facts import DAY, LIVES_IN, NS, POLICY, fact

NOW = 10 * DAY
WORKS_AT = Key(NS, "ana", "works_at")
SPEAKS = Key(NS, "ana", "speaks")


def _vote(
    voter: str,
    e: Evidence | None,
    *,
    key: Key = LIVES_IN,  # an abstention's
    seq: int = 1,
    cast_at: int = DAY,
    evidence_id: str | None = None,
) -> Vote:
    """`voter`'s vote for `e`'s version (None: an abstention on `key`)."""
    if e is None:
        return Vote(voter, key, None, "", 0, 0, 0, cast_at, seq)
    return Vote(
        voter,
        e.key,
        e.version_id,
        evidence_id or e.evidence_id,
        90,
        e.worth_milli,
        e.valid_from,
        cast_at,
        seq,
    )


def _tombstone(n: int, *, scope: str = "evidence", origin: str = "n2") -> Tombstone:
    return Tombstone(f"{n:032x}", scope, "a" * 32, DAY, "op", "asked", ("b" * 32,), origin)


def _key_id(key: Key) -> str:
    return ids.key_id(key)


def test_screening_refuses_each_malformed_or_badly_signed_item_and_names_it() -> None:
    """A tombstone of an unknown scope, evidence whose signature does not verify, a vote
    whose signer is unknown: each refused with its reason and its failed check; the good
    ones pass, in order; this node's own vote relayed back is set apart, never taken."""
    good_t, bad_t = _tombstone(1), _tombstone(2, scope="galaxy")
    good_e, bad_e = fact("Lisbon", cap="user_stated"), fact("Porto", day=2, cap="user_stated")
    mine, theirs, stranger = _vote("n1", good_e), _vote("n3", good_e), _vote("n9", good_e)
    screened = screen_delta(
        [good_t, bad_t],
        [good_e, bad_e],
        [mine, theirs, stranger],
        peer_id="n2",
        node_id="n1",
        policy=POLICY,
        now=NOW,
        verify_tombstone=lambda t: Signature.VALID,
        verify_evidence=lambda e: Signature.BAD if e is bad_e else Signature.VALID,
        verify_vote=lambda v: Signature.UNKNOWN_SIGNER if v.voter == "n9" else Signature.VALID,
    )
    assert screened == Screened(
        tombstones=(good_t,),
        evidence=(good_e,),
        votes=(theirs,),
        own_votes=(mine,),
        refused=(
            Refusal(bad_t.erasure_id, "unknown erasure scope 'galaxy'", "tombstone"),
            Refusal(
                bad_e.evidence_id,
                "its signature does not verify against its signer's certificate",
                "evidence",
                "bad_signature",
            ),
            Refusal(
                _key_id(LIVES_IN),
                "its signer's certificate is not known here",
                "vote",
                "unknown_signer",
            ),
        ),
    )


def test_a_node_that_checks_no_signatures_takes_only_the_links_own_votes() -> None:
    """Without a vote check, a vote relayed for another voter is refused (no count of a
    failed signature), and the link's own vote is taken; a vote dated in the future is
    refused for its form."""
    e = fact("Lisbon")
    relayed, own = _vote("n3", e), _vote("n2", e)
    future = _vote("n2", fact("ACME", key=WORKS_AT), seq=0, cast_at=NOW + 3600 * 10**6)
    screened = screen_delta(
        [], [], [relayed, own, future], peer_id="n2", node_id="n1", policy=POLICY, now=NOW
    )
    assert screened.votes == (own,)
    assert screened.own_votes == ()
    assert screened.refused == (
        Refusal(_key_id(LIVES_IN), "a vote of n3 relayed by n2, unsigned here", "vote"),
        Refusal(_key_id(WORKS_AT), "cast_at lies in this node's future", "vote"),
    )


def test_signatures_are_checked_only_for_items_well_formed_otherwise() -> None:
    """A malformed tombstone or evidence never reaches the signature check."""
    checked: list[object] = []

    def check(item: object) -> Signature:
        checked.append(item)
        return Signature.VALID

    bad_t = _tombstone(1, scope="galaxy")
    bad_e = replace(fact("Lisbon", cap="user_stated"), worth_milli=5000)
    screened = screen_delta(
        [bad_t],
        [bad_e],
        [],
        peer_id="n2",
        node_id="n1",
        policy=POLICY,
        now=NOW,
        verify_tombstone=check,
        verify_evidence=check,
    )
    assert checked == []
    assert [(r.item, r.kind, r.signature) for r in screened.refused] == [
        (bad_t.erasure_id, "tombstone", ""),
        (bad_e.evidence_id, "evidence", ""),
    ]


def test_relayed_evidence_held_or_repeated_is_taken_as_held_and_the_rest_is_recorded_now() -> None:
    """Held evidence and a repeat within the delta are not decided again; new evidence is
    decided as recorded now, with its origin's time, its statement's version and, unsigned,
    the lower of the sender's and the link's ceilings."""
    held = fact("Lisbon", cap="user_stated")
    new = replace(fact("Porto", day=2, cap="agent_observed"), version_id="")
    plan = plan_peer_evidence(
        [held, new, new],
        {held.evidence_id},
        link_cap="api_response",
        policy=POLICY,
        node_id="n1",
        signed=False,
        now=NOW,
    )
    counted = replace(
        new,
        version_id=ids.statement_version(new.key, new.object, retracts=False),
        anchor_cap="agent_observed",
        recorded_at=NOW,
        origin_recorded_at=new.recorded_at,
    )
    assert plan == PeerEvidencePlan(held=2, items=((counted, None),))


def test_signed_relayed_evidence_counts_at_its_origins_ceiling_and_this_nodes_own_at_none() -> None:
    """Signed: the ceiling is the one this node sets for the origin, whatever the sender or
    the link say; this node's own evidence coming back counts uncapped."""
    policy = Policy(member_caps={"n2": "agent_observed"})
    theirs = fact("Lisbon", cap="user_stated")
    own = fact("Porto", day=2)  # origin n1
    plan = plan_peer_evidence(
        [theirs, own],
        (),
        link_cap="codebase_verified",
        policy=policy,
        node_id="n1",
        signed=True,
        now=NOW,
    )
    assert [e.anchor_cap for e, _ in plan.items] == ["agent_observed", None]


def test_evidence_an_erasure_covers_is_refused_and_signatures_of_the_rest_kept() -> None:
    """The rulings read back: ERASED refused as covered by an erasure; the others accepted,
    their signatures (where they came signed) kept."""
    erased, signed, unsigned = (
        fact("Lisbon"),
        replace(fact("Porto", day=2), signature=b"sig"),
        fact("Faro", day=3),
    )

    def ruling(e: Evidence, rule: Rule, outcome: Outcome) -> Ruling:
        return Ruling(Decision(e.key, outcome, rule, NOW, e.evidence_id), None)

    accepted, refused, signatures = peer_evidence_outcome(
        [
            (erased, ruling(erased, Rule.ERASED, Outcome.REJECTED)),
            (signed, ruling(signed, Rule.FIRST_VERSION, Outcome.ACCEPTED)),
            (unsigned, ruling(unsigned, Rule.CORROBORATION, Outcome.CORROBORATED)),
        ]
    )
    assert accepted == 2
    assert refused == (Refusal(erased.evidence_id, "covered by an erasure", "evidence"),)
    assert signatures == {signed.evidence_id: b"sig"}


def test_votes_on_erased_evidence_or_keys_or_another_version_are_refused_with_their_reason() -> (
    None
):
    """Against what is held: a vote resting on erased evidence, one naming unheld evidence on
    a key erased here, one naming evidence of another version are refused; a vote on held
    evidence, an abstention on a held key and a vote that may wait are taken."""
    lisbon = fact("Lisbon")
    porto = fact("Porto", day=2)
    job = fact("ACME", key=WORKS_AT)
    gone = fact("Gone", key=SPEAKS)
    waits = fact("Braga", day=3)
    votes = [
        _vote("n2", lisbon),
        _vote("n2", gone),
        _vote("n3", porto),
        _vote("n3", lisbon, evidence_id=job.evidence_id),
        _vote("n3", None, key=WORKS_AT),
        _vote("n4", waits),
    ]
    load = PeerVotesLoad(
        erased=frozenset({porto.evidence_id}),
        held={lisbon.evidence_id: lisbon, job.evidence_id: job},
        keys_held=frozenset({WORKS_AT}),
        erased_keys=frozenset({SPEAKS}),
        waiting={"n4": 0},
    )
    assert voters_waiting(votes, load) == {"n4"}
    assert plan_peer_votes(votes, load, POLICY) == PeerVotesPlan(
        taken=(votes[0], votes[4], votes[5]),
        refused=(
            Refusal(
                _key_id(SPEAKS),
                "its key was erased here and the evidence it names is not held",
                "vote",
            ),
            Refusal(_key_id(LIVES_IN), "the vote rests on erased evidence", "vote"),
            Refusal(
                _key_id(LIVES_IN),
                "unknown version: the evidence it names is for another version",
                "vote",
            ),
        ),
    )


def test_a_voters_waiting_votes_are_bounded_counting_those_already_waiting() -> None:
    """With room for 3 waiting votes per voter and 2 of n2's waiting already, one more of its
    waiting votes is taken and the next refused; an abstention on a key held nowhere here
    waits like a vote on evidence not held; another voter's room is its own."""
    policy = Policy(max_waiting_votes_per_peer=3)
    a, b = fact("Lisbon"), fact("Porto", day=2)
    votes = [_vote("n2", a), _vote("n2", None, key=WORKS_AT), _vote("n3", b)]
    load = PeerVotesLoad(waiting={"n2": 2, "n3": 0})
    assert voters_waiting(votes, load) == {"n2", "n3"}
    plan = plan_peer_votes(votes, load, policy)
    assert plan.taken == (votes[0], votes[2])
    assert plan.refused == (
        Refusal(
            _key_id(WORKS_AT),
            "too many of this voter's votes wait for evidence this node does not hold (at most 3)",
            "vote",
        ),
    )
    assert plan.accepted == 2


def test_plan_counts_one_accepted_vote_per_voter_and_key() -> None:
    """Two votes of one voter on one key are one accepted vote."""
    e = fact("Lisbon")
    votes = [_vote("n2", e, seq=1), _vote("n2", e, seq=2)]
    plan = plan_peer_votes(votes, PeerVotesLoad(held={e.evidence_id: e}), POLICY)
    assert plan.taken == tuple(votes) and plan.accepted == 1


def test_withdrawn_votes_are_the_peers_held_votes_it_did_not_send() -> None:
    """Only the sending peer's held votes count as withdrawn, and only on keys none of its
    sent votes name (refused ones included)."""
    e, job = fact("Lisbon"), fact("ACME", key=WORKS_AT)
    sent = [_vote("n2", e), _vote("n3", job)]
    held = [_vote("n2", e, seq=0), _vote("n2", job), _vote("n2", None, key=SPEAKS)]
    assert withdrawn_keys("n2", sent, held) == {WORKS_AT, SPEAKS}
    assert withdrawn_keys("n2", sent, []) == frozenset()


def test_only_votes_newer_than_those_held_are_put_one_per_voter_and_key() -> None:
    """An older vote arriving late is not put; a newer one is, even saying the same; of two
    votes of one voter on one key, only the latest; the keys recounted are those put,
    withdrawn and newly proven, not those of votes ignored."""
    e, job = fact("Lisbon"), fact("ACME", key=WORKS_AT)
    older = _vote("n2", e, seq=3)
    same_but_newer = _vote("n3", job, seq=5)
    first, latest = _vote("n4", e, seq=1), _vote("n4", e, seq=2)
    held = {
        LIVES_IN: [_vote("n2", e, seq=4), _vote("n4", e, seq=1)],
        WORKS_AT: [_vote("n3", job, seq=4)],
    }
    changes = plan_vote_changes(
        [older, same_but_newer, first, latest], held, withdrawn={SPEAKS}, proven=()
    )
    assert changes == VoteChanges(
        put=(same_but_newer, latest), recount=frozenset({WORKS_AT, LIVES_IN, SPEAKS})
    )
    only_older = plan_vote_changes([older], held)
    assert only_older == VoteChanges(put=(), recount=frozenset())


def test_a_copy_of_its_own_vote_is_outnumbered_only_where_it_would_stay() -> None:
    """n1's own votes relayed back: a copy of the vote it holds, or of an older one, needs
    nothing; a copy on a key where it holds no vote (deleted by an erasure, the copy relayed
    late) is outnumbered by a new vote where the key holds evidence, and left where it does
    not; a copy numbered at or after its held vote with other content (signed before a
    restore from an older backup) is outnumbered too; a vote proven equivocated is never
    re-cast."""
    lisbon, porto, acme = fact("Lisbon"), fact("Porto", day=2), fact("ACME", key=WORKS_AT)
    held = {
        LIVES_IN: _vote("n1", porto, seq=5),
        WORKS_AT: _vote("n1", acme, seq=3),
    }
    assert (
        own_votes_to_recast(
            [held[LIVES_IN], _vote("n1", lisbon, seq=4), _vote("n1", None, key=SPEAKS, seq=2)],
            held,
            keys_held=set(),
        )
        == ()
    )
    assert own_votes_to_recast(
        [_vote("n1", None, key=SPEAKS, seq=2)], held, keys_held={SPEAKS}
    ) == (SPEAKS,)
    restored = [_vote("n1", lisbon, seq=5), _vote("n1", None, key=WORKS_AT, seq=9)]
    assert own_votes_to_recast(restored, held, keys_held=set()) == (LIVES_IN, WORKS_AT)
    proven = {LIVES_IN: replace(held[LIVES_IN], equivocated=True)}
    assert own_votes_to_recast([_vote("n1", lisbon, seq=7)], proven, keys_held={LIVES_IN}) == ()
