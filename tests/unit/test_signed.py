"""Signed votes (specification §7): what a voter signs, which of its votes is current, and what
proves that it equivocated; and the roster's check of a signature against its signer."""

from __future__ import annotations

import dataclasses
import datetime as dt
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from factnode.certs import ensure_ca, issue_node_cert, revoke
from factnode.core import BeliefState, Evidence, Key, Policy, Rule
from factnode.core.consensus import Vote, latest_votes, newer, review_reason, served, tally
from factnode.core.signed import (
    Signature,
    equivocates,
    equivocation_in,
    evidence_payload,
    marked,
    proofs_among,
    refusal,
    tombstone_payload,
    vote_payload,
    votes_numbered_after,
    withdrawn,
    without_equivocators,
)
from factnode.federation.members import Roster
from factnode.federation.trust import Authority, Signer
from factnode.store import Tombstone
from factnode.testing import memory_ledger

KEY = Key("team:infra", "build", "python_version")
VOTE = Vote("a", KEY, "1" * 32, "2" * 32, 60, 500, 1_000, 5_000, seq=7)


@pytest.mark.parametrize(
    "change",
    [
        {"voter": "b"},
        {"key": Key("team:infra", "build", "os")},
        {"version_id": "3" * 32},
        {"version_id": None},
        {"evidence_id": "4" * 32},
        {"anchor": 61},
        {"worth_milli": 501},
        {"fresh_since": 1_001},
        {"cast_at": 5_001},
        {"seq": 8},
    ],
)
def test_the_signed_bytes_cover_every_field_of_a_vote(change: dict[str, object]) -> None:
    """Changing any field a vote says, its voter and number included, changes what is signed."""
    assert vote_payload(dataclasses.replace(VOTE, **change)) != vote_payload(VOTE)  # type: ignore[arg-type]


def test_the_signature_itself_is_not_signed() -> None:
    """Two signatures of one vote sign the same bytes (ECDSA signatures differ run to run)."""
    assert vote_payload(dataclasses.replace(VOTE, signature=b"x")) == vote_payload(VOTE)


def test_key_parts_cannot_run_into_each_other() -> None:
    """Length-prefixed parts: moving a character between key parts changes the bytes."""
    a = dataclasses.replace(VOTE, key=Key("ab", "c", "p"))
    b = dataclasses.replace(VOTE, key=Key("a", "bc", "p"))
    assert vote_payload(a) != vote_payload(b)


def test_the_highest_number_is_current_whatever_the_clock() -> None:
    """A later number wins though its cast_at is earlier (a clock set back), and an earlier
    number loses though its cast_at is later (a clock running ahead)."""
    old = dataclasses.replace(VOTE, seq=3, cast_at=9_000_000)
    new = dataclasses.replace(VOTE, version_id="3" * 32, seq=4, cast_at=1)
    assert newer(new, old) and not newer(old, new)
    assert latest_votes([old, new]) == {"a": new}
    assert latest_votes([new, old]) == {"a": new}


def test_unnumbered_votes_are_still_ordered_by_time() -> None:
    """Votes of seq 0 (stored before votes were signed) keep the cast_at order among
    themselves, and any numbered vote replaces them."""
    early = dataclasses.replace(VOTE, seq=0, cast_at=1)
    late = dataclasses.replace(VOTE, seq=0, cast_at=2, version_id="3" * 32)
    assert newer(late, early)
    assert newer(dataclasses.replace(VOTE, seq=1, cast_at=0), late)


NOW = 1_796_000_000 * 1_000_000  # a wall-clock instant, in microseconds


@pytest.mark.parametrize(
    ("counter", "after", "now", "expected"),
    [
        (41, 0, NOW, NOW),  # a counter from before numbers followed the clock: the clock
        (NOW + 5, 0, NOW, NOW + 5),  # votes cast faster than the clock ticks: the counter
        (NOW + 5, 0, NOW - 3_600_000_000, NOW + 5),  # a clock set back: the counter
        (0, 0, NOW, NOW),  # a store that counts none (emptied, or restored): the clock
        (0, NOW + 9, NOW, NOW + 9),  # a relay showed a higher number of its own: after it
        (41, 40, 0, 41),  # no clock to go by: the counter, as before
    ],
)
def test_votes_are_numbered_after_the_counter_the_copies_and_the_clock(
    counter: int, after: int, now: int, expected: int
) -> None:
    """A voter's next votes number after the highest of its counter, its own copies and the
    clock (specification §7: a voter never contradicts itself by losing its disk)."""
    assert votes_numbered_after(counter, after, now) == expected


@given(
    signed=st.lists(st.integers(0, 10_000), min_size=1, max_size=20),
    lost_at=st.integers(0, 19),
    start=st.integers(0, 10**12),
    gap=st.integers(1, 10**9),
)
def test_a_voter_that_loses_its_counter_never_repeats_a_number(
    signed: list[int], lost_at: int, start: int, gap: int
) -> None:
    """A voter casts votes at non-decreasing clock readings (`signed`: the time each took, at
    most one vote per microsecond on average) and loses its counter once, later on the clock:
    every number it signs, before and after the loss, is new and above the ones before."""
    numbers: list[int] = []
    counter, now = 0, start
    for i, took in enumerate(signed):
        now += took + 1
        if i == lost_at:
            counter, now = 0, now + gap  # the store is lost; the clock keeps going
        counter = votes_numbered_after(counter, 0, now) + 1
        numbers.append(counter)
    assert numbers == sorted(set(numbers))


def test_two_contents_under_one_number_prove_equivocation() -> None:
    """Same voter, key and number with different content: equivocation; the same vote twice,
    another number, another voter or an unnumbered vote: not."""
    other = dataclasses.replace(VOTE, version_id="3" * 32)
    assert equivocates(VOTE, other)
    assert not equivocates(VOTE, dataclasses.replace(VOTE, signature=b"another"))
    assert not equivocates(VOTE, dataclasses.replace(other, seq=8))
    assert not equivocates(VOTE, dataclasses.replace(other, voter="b"))
    assert not equivocates(dataclasses.replace(VOTE, seq=0), dataclasses.replace(other, seq=0))


def test_the_proof_is_the_same_pair_in_any_order() -> None:
    """Whichever of the two votes a node held first, it keeps the same proof."""
    other = dataclasses.replace(VOTE, version_id="3" * 32)
    one, two = equivocation_in(VOTE, other), equivocation_in(other, VOTE)
    assert one is not None and one == two
    assert (one.voter, one.key, one.seq) == ("a", KEY, 7)
    assert equivocation_in(None, VOTE) is None
    assert equivocation_in(VOTE, VOTE) is None


def test_an_equivocator_counts_zero_on_the_key() -> None:
    """The votes that count leave out every equivocating voter, and only those."""
    b = dataclasses.replace(VOTE, voter="b")
    assert without_equivocators([VOTE, b], {"a"}) == [b]
    assert without_equivocators([VOTE, b], ()) == [VOTE, b]


def test_a_withdrawal_votes_for_nothing() -> None:
    """A withdrawn vote names no version and no evidence, for the same voter and key."""
    w = withdrawn(VOTE, 9)
    assert (w.voter, w.key, w.version_id, w.evidence_id, w.cast_at) == ("a", KEY, None, "", 9)


def test_every_refusal_names_its_reason() -> None:
    """Each failed check has a sentence; a valid signature has none."""
    assert refusal(Signature.VALID) == ""
    for check in Signature:
        if check is not Signature.VALID:
            assert refusal(check)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA with certificates for a, b and x; and, in another directory, a foreign CA's z."""
    out = tmp_path_factory.mktemp("ca")
    ensure_ca(out)
    for n in ("a", "b", "x"):
        issue_node_cert(out, n)
    foreign = out / "foreign"
    issue_node_cert(foreign, "z")
    return out


def _signer(certs: Path, node_id: str) -> Signer:
    authority = Authority((certs / "ca.crt").read_bytes())
    return Signer(
        authority, (certs / f"{node_id}.crt").read_bytes(), (certs / f"{node_id}.key").read_bytes()
    )


def _roster(certs: Path) -> Roster:
    authority = Authority((certs / "ca.crt").read_bytes())
    signer = Signer(authority, (certs / "b.crt").read_bytes(), (certs / "b.key").read_bytes())
    return Roster(memory_ledger(), authority, signer)


def _signed(certs: Path, v: Vote) -> Vote:
    return dataclasses.replace(v, signature=_signer(certs, v.voter).sign(vote_payload(v)))


def test_the_roster_checks_a_vote_against_its_voters_certificate(certs: Path) -> None:
    """Valid once the voter's certificate is learned; unknown before; unsigned, altered,
    re-attributed or renumbered: refused, each for its reason."""
    roster = _roster(certs)
    v = _signed(certs, VOTE)
    assert roster.verify_vote(v) is Signature.UNKNOWN_SIGNER
    roster.learn([(certs / "a.crt").read_bytes()], by="b")
    assert roster.certificate_of("a") is not None
    assert roster.verify_vote(v) is Signature.VALID
    assert roster.verify_vote(dataclasses.replace(v, signature=b"")) is Signature.UNSIGNED
    assert roster.verify_vote(dataclasses.replace(v, anchor=100)) is Signature.BAD
    assert roster.verify_vote(dataclasses.replace(v, seq=8)) is Signature.BAD
    roster.learn([(certs / "x.crt").read_bytes()], by="b")
    assert roster.verify_vote(dataclasses.replace(v, voter="x")) is Signature.BAD


def test_a_foreign_certificate_teaches_the_roster_nothing(certs: Path) -> None:
    """A certificate from another CA passed on in a delta is refused: its signer stays
    unknown and its votes are refused as such."""
    roster = _roster(certs)
    roster.learn([(certs / "foreign" / "z.crt").read_bytes()], by="b")
    assert roster.certificate_of("z") is None
    z = Vote("z", KEY, None, "", 0, 0, 0, 0, seq=1, signature=b"anything")
    assert roster.verify_vote(z) is Signature.UNKNOWN_SIGNER


def test_a_revoked_or_expired_voter_is_not_a_member(certs: Path) -> None:
    """After a revocation list names a's certificate, and after a's certificate expires,
    a's validly signed votes are refused as not a member's, even one whose signature was
    checked (and remembered) before."""
    roster = _roster(certs)
    roster.learn([(certs / "a.crt").read_bytes()], by="b")
    v = _signed(certs, VOTE)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=365 * 30)
    assert roster.verify_vote(v, now=later) is Signature.NOT_A_MEMBER
    assert roster.verify_vote(v) is Signature.VALID  # checked once, remembered
    crl, _number = revoke(certs, ["a"])
    roster.revoke(crl.read_bytes())
    assert roster.verify_vote(v) is Signature.NOT_A_MEMBER


def test_relayed_evidence_counts_at_the_cap_set_for_its_origin() -> None:
    """The cap is the one set for the origin, else the default; who delivered it plays no
    part (the function is not even told)."""
    policy = Policy(member_caps={"trusted": "agent_observed"})
    assert policy.cap_for("trusted") == "agent_observed"
    assert policy.cap_for("stranger") == "federation_received"


@pytest.mark.parametrize(
    "change",
    [
        {"object": "Porto"},
        {"attribution": "user_stated"},
        {"source": "other"},
        {"worth_milli": 501},
        {"confidence_milli": 901},
        {"valid_from": 2},
        {"valid_from_defaulted": True},
        {"recorded_at": 4},
        {"origin_node": "b"},
        {"corrects": "5" * 32},
        {"contradicts": Key("team:infra", "build", "os")},
        {"retracts": True},
    ],
)
def test_the_origins_signature_covers_the_evidence_and_its_provenance(
    change: dict[str, object],
) -> None:
    """Changing the statement, its provenance, its origin or when it was first recorded
    changes what the origin signed; the cap a relay counted it at does not."""
    e = Evidence(
        "1" * 32, KEY, "Lisbon", "2" * 32, "agent_observed", "src", 500, 900, 1, False, 3, "a"
    )
    assert evidence_payload(dataclasses.replace(e, **change)) != evidence_payload(e)  # type: ignore[arg-type]
    assert evidence_payload(dataclasses.replace(e, anchor_cap="codebase_verified")) == (
        evidence_payload(e)
    )


def test_proofs_are_found_in_one_delta_and_against_the_vote_held() -> None:
    """Two conflicting votes in one delta, or one offered against the one held, prove the
    equivocation once per voter and key; a vote with another number proves nothing."""
    other = dataclasses.replace(VOTE, version_id="3" * 32)
    [proof] = proofs_among([VOTE, other], {})
    assert (proof.voter, proof.key, proof.seq) == ("a", KEY, 7)
    [against_held] = proofs_among([other], {("a", KEY): VOTE})
    assert against_held == proof
    assert proofs_among([dataclasses.replace(other, seq=8)], {("a", KEY): VOTE}) == []


def test_an_equivocators_marker_counts_zero_and_leaves_no_consensus() -> None:
    """With a's marker held, b's vote alone would have consensus; instead no version has it,
    a counts nowhere, and the tally names a."""
    b = dataclasses.replace(VOTE, voter="b")
    marker = marked(equivocation_in(VOTE, dataclasses.replace(VOTE, anchor=1)))  # type: ignore[arg-type]
    result = tally([b, marker], now=10**12, threshold=Fraction(66, 100), half_life_days=30)
    assert result is not None
    assert result.equivocators == ("a",) and result.consensus is None
    assert [t.voters for t in result.versions] == [("b",)]
    served_now = served("1" * 32, Rule.RECENCY, False, False, result)
    assert served_now is not None and served_now.state is BeliefState.CONTESTED
    assert "a signed two different votes" in review_reason(result, Fraction(66, 100), (), {})


@pytest.mark.parametrize(
    "change",
    [
        {"erasure_id": "9" * 32},
        {"scope": "subject"},
        {"scope_hash": "8" * 32},
        {"erased_at": 6},
        {"operator": "mallory"},
        {"reason": "other"},
        {"evidence_ids": ("7" * 32,)},
        {"origin_node": "b"},
    ],
)
def test_the_erasers_signature_covers_the_whole_tombstone(change: dict[str, object]) -> None:
    """Changing any part of a tombstone, the node it names as its origin included, changes
    what that node signed; the order its evidence ids are listed in does not."""
    t = Tombstone("1" * 32, "key", "2" * 32, 5, "ops", "gdpr", ("3" * 32, "4" * 32), "a")
    assert tombstone_payload(dataclasses.replace(t, **change)) != tombstone_payload(t)  # type: ignore[arg-type]
    reordered = dataclasses.replace(t, evidence_ids=("4" * 32, "3" * 32))
    assert tombstone_payload(reordered) == tombstone_payload(t)
