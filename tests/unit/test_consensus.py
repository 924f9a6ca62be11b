"""Consensus: one integer-weighted vote per node, echoes count once, exact supermajority."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
from _facts import DAY, LIVES_IN
from hypothesis import given, settings
from hypothesis import strategies as st

from factnode.core import BeliefState, Rule
from factnode.core.consensus import (
    MICROS_PER_HOUR,
    Served,
    Tally,
    VersionTally,
    Vote,
    hour_of,
    latest_votes,
    review_reason,
    served,
    tally,
    vote_weight,
)
from factnode.core.decay import freshness_ppm

HOUR = MICROS_PER_HOUR
NOW = 1000 * DAY + 5 * HOUR  # the start of a UTC hour
HALF_LIFE = 30
DEFAULT = Fraction(66, 100)
FAST = settings(max_examples=150, deadline=None)


def vote(
    voter: str,
    version: str | None,
    evidence: str | None = None,
    *,
    anchor: int = 1,
    worth: int = 1000,
    fresh_since: int = NOW,
    cast_at: int = 0,
) -> Vote:
    """A vote on LIVES_IN; by default on the voter's own evidence, fresh, weight anchor x 10^9."""
    if evidence is None:
        evidence = "" if version is None else f"{voter}:{version}"
    return Vote(voter, LIVES_IN, version, evidence, anchor, worth, fresh_since, cast_at)


def weighted(voter: str, version: str, weight: int, evidence: str | None = None) -> Vote:
    """A fresh vote whose weight is exactly `weight` x 10^6 (anchor=weight, worth_milli=1)."""
    return vote(voter, version, evidence, anchor=weight, worth=1)


def count(votes: list[Vote], threshold: Fraction = DEFAULT, self_id: str = "") -> Tally | None:
    """Tally at NOW with the default vote half-life."""
    return tally(votes, now=NOW, threshold=threshold, half_life_days=HALF_LIFE, self_id=self_id)


def weights(t: Tally | None) -> dict[str, int]:
    """Version id -> counted weight."""
    assert t is not None
    return {v.version_id: v.weight for v in t.versions}


# --- weights -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("anchor", "worth", "age", "half_life_days", "expected"),
    [
        (5, 700, 0, 30, 5 * 700 * 1_000_000),
        (5, 700, 30 * DAY, 30, 5 * 700 * 500_000),
        (5, 700, 60 * DAY, 30, 5 * 700 * 250_000),
        (5, 700, 15 * DAY, 30, 5 * 700 * 707_106),  # floor(10^6 / sqrt(2))
        (1, 1000, 10 * DAY, 10, 1000 * 500_000),
        (3, 500, -2 * DAY, 30, 3 * 500 * 1_000_000),  # evidence dated after the hour has not aged
        (7, 0, 0, 30, 0),
    ],
)
def test_vote_weight(anchor: int, worth: int, age: int, half_life_days: int, expected: int) -> None:
    """A vote weighs the integer anchor x worth_milli x freshness_ppm, halving per half-life."""
    v = vote("n1", "A", anchor=anchor, worth=worth, fresh_since=NOW - age)
    w = vote_weight(v, NOW, half_life_days)
    assert type(w) is int
    assert w == expected


def test_hour_of_is_the_start_of_the_utc_hour() -> None:
    """hour_of truncates to the start of the hour containing the instant."""
    assert hour_of(NOW) == NOW
    assert hour_of(NOW + 1) == NOW
    assert hour_of(NOW + HOUR - 1) == NOW
    assert hour_of(NOW + HOUR) == NOW + HOUR


@pytest.mark.parametrize("offset", [0, 1, 30 * 60 * 1_000_000, HOUR - 1_000_000, HOUR - 1])
def test_weights_agree_within_the_same_utc_hour(offset: int) -> None:
    """Nodes evaluating anywhere in the same UTC hour (:00 to :59) compute identical weights."""
    v = vote("n1", "A", anchor=4, worth=650, fresh_since=NOW - 30 * DAY)
    at_the_hour = vote_weight(v, NOW, HALF_LIFE)
    assert vote_weight(v, NOW + offset, HALF_LIFE) == at_the_hour == 4 * 650 * 500_000


def test_weights_may_change_at_the_next_utc_hour() -> None:
    """An hour later the vote has aged one more hour and may weigh less."""
    v = vote("n1", "A", anchor=4, worth=650, fresh_since=NOW - 30 * DAY)
    assert vote_weight(v, NOW + HOUR, HALF_LIFE) == 4 * 650 * 499_518  # floor(10^6 x 0.5^(721/720))


def test_fresh_since_within_the_current_hour_has_not_aged() -> None:
    """Evidence dated after the start of the current hour counts as fully fresh."""
    v = vote("n1", "A", anchor=2, worth=300, fresh_since=NOW + 10 * 60 * 1_000_000)
    assert vote_weight(v, NOW + 20 * 60 * 1_000_000, HALF_LIFE) == 2 * 300 * 1_000_000


@settings(max_examples=100, deadline=None)
@given(
    hour=st.integers(0, 24 * 3650),
    a=st.integers(0, HOUR - 1),
    b=st.integers(0, HOUR - 1),
    age_hours=st.integers(-48, 24 * 400),
    anchor=st.integers(1, 7),
    worth=st.integers(0, 1000),
)
def test_any_two_instants_in_one_hour_give_the_same_weight(
    hour: int, a: int, b: int, age_hours: int, anchor: int, worth: int
) -> None:
    """Weights are a function of the UTC hour only, never of the minute or second."""
    start = hour * HOUR
    v = vote("n1", "A", anchor=anchor, worth=worth, fresh_since=start - age_hours * HOUR - 12345)
    assert vote_weight(v, start + a, HALF_LIFE) == vote_weight(v, start + b, HALF_LIFE)


# --- one vote per node ---------------------------------------------------------------------


def test_latest_vote_replaces_earlier_ones_in_any_order() -> None:
    """A node's latest vote (by cast_at) replaces its earlier ones, whatever the input order."""
    votes = [
        vote("n1", "A", cast_at=1),
        vote("n1", "B", cast_at=3),
        vote("n1", "A", cast_at=2),
        vote("n2", "B", cast_at=1),
        vote("n3", "C", cast_at=5),
        vote("n3", "B", cast_at=9),
    ]
    for order in itertools.permutations(votes):
        latest = latest_votes(order)
        assert latest == {"n1": votes[1], "n2": votes[3], "n3": votes[5]}
        t = count(list(order))
        assert t is not None
        assert t.consensus == "B"
        assert weights(t) == {"B": 3 * 1000 * 1_000_000}
        assert t.versions == (VersionTally("B", 3_000_000_000, ("n1", "n2", "n3")),)


def test_a_later_abstention_withdraws_a_nodes_vote() -> None:
    """A node whose latest vote abstains no longer counts for the version it voted before."""
    votes = [
        vote("n1", "A", cast_at=1),
        vote("n1", None, cast_at=2),
        vote("n2", "B"),
        vote("n3", "B"),
    ]
    t = count(votes)
    assert t is not None
    assert weights(t) == {"B": 2_000_000_000}
    assert t.consensus == "B"


# --- echoes --------------------------------------------------------------------------------


def test_echoes_of_one_evidence_count_once() -> None:
    """Three nodes echoing one evidence for A weigh as one; two independent votes for B win."""
    votes = [
        weighted("n1", "A", 10, evidence="e-A"),
        weighted("n2", "A", 10, evidence="e-A"),
        weighted("n3", "A", 10, evidence="e-A"),
        weighted("n4", "B", 10),
        weighted("n5", "B", 10),
    ]
    t = count(votes)
    assert t is not None
    assert t.total == 30_000_000
    assert t.versions == (
        VersionTally("B", 20_000_000, ("n4", "n5")),
        VersionTally("A", 10_000_000, ("n1", "n2", "n3")),
    )
    # 20/30 > 66/100; had the echoes counted three times it would be 20/50.
    assert t.consensus == "B"


def test_echoes_count_at_the_highest_weight_among_them() -> None:
    """Votes on the same evidence id count once, at the highest of their weights."""
    votes = [
        weighted("n1", "A", 4, evidence="e-A"),
        weighted("n2", "A", 7, evidence="e-A"),
        weighted("n3", "A", 5, evidence="e-A"),
        weighted("n4", "B", 3),
    ]
    t = count(votes)
    assert weights(t) == {"A": 7_000_000, "B": 3_000_000}
    assert t is not None and t.total == 10_000_000 and t.consensus == "A"


# --- abstentions ---------------------------------------------------------------------------


def test_abstentions_add_no_weight() -> None:
    """Abstaining votes neither add to a version nor to the total."""
    votes = [vote("n1", "A"), vote("n2", "A"), vote("n3", "A"), vote("n4", "B")]
    abstaining = [vote(f"x{i}", None, anchor=7) for i in range(5)]
    assert count(votes + abstaining) == count(votes)
    t = count(votes + abstaining)
    assert t is not None and t.total == 4_000_000_000 and t.consensus == "A"


def test_only_abstentions_is_no_tally() -> None:
    """A key on which every node abstains has no tally at all."""
    assert count([vote("n1", None), vote("n2", None, cast_at=4)]) is None
    assert count([]) is None


# --- exact thresholds ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("threshold", "for_a", "for_b", "adopted"),
    [
        (DEFAULT, 66, 34, None),  # exactly 66%: not adopted
        (DEFAULT, 67, 33, "A"),
        (DEFAULT, 660, 340, None),
        (DEFAULT, 661, 339, "A"),  # 66.1%
        (DEFAULT, 33, 17, None),  # 66% exactly again, at another scale
        (DEFAULT, 2, 1, "A"),  # 66.67%
        (Fraction(1, 2), 50, 50, None),
        (Fraction(1, 2), 51, 49, "A"),
        (Fraction(1, 2), 49, 51, "B"),
        (Fraction(3, 4), 75, 25, None),
        (Fraction(3, 4), 76, 24, "A"),
        (Fraction(3, 4), 70, 30, None),
        (Fraction(3, 4), 67, 33, None),  # adopted at 66/100, not at 3/4
    ],
)
def test_threshold_is_exact(
    threshold: Fraction, for_a: int, for_b: int, adopted: str | None
) -> None:
    """A version is adopted only when strictly above the threshold share, compared in integers."""
    t = count([weighted("n1", "A", for_a), weighted("n2", "B", for_b)], threshold)
    assert t is not None
    assert t.total == (for_a + for_b) * 1_000_000
    assert t.consensus == adopted


def _float_misjudged() -> tuple[int, int]:
    """Weights (a, b) with 100·a > 66·(a+b) exactly, yet a/(a+b) > 0.66 is False in floats."""
    for digits in range(2, 30):
        total = 10**digits
        for a in range(66 * total // 100 + 1, 66 * total // 100 + 50):
            assert 100 * a > 66 * total
            if not a / total > 0.66:
                return a, total - a
    raise AssertionError("no weights where float and integer comparison disagree")


def test_float_comparison_would_decide_otherwise() -> None:
    """At a share a hair above 66%, floats say 'not above' while the integer rule adopts."""
    a, b = _float_misjudged()
    t = count([weighted("n1", "A", a), weighted("n2", "B", b)])
    assert t is not None
    w_a = weights(t)["A"]
    # The point of the test: these weights fool a floating-point comparison...
    assert not w_a / t.total > 0.66
    assert not w_a / t.total > float(DEFAULT)
    # ...but the exact rule holds, and the tally follows it.
    assert 100 * w_a > 66 * t.total
    assert t.consensus == "A"


@pytest.mark.parametrize(
    ("for_a", "for_b", "adopted"),
    [
        (3, 2, None),  # 60% < 66%: contested
        (3, 1, "A"),  # 75%
        (2, 1, "A"),  # 66.7%
        (1, 1, None),
        (2, 2, None),
        (5, 0, "A"),
    ],
)
def test_equal_weight_vote_counts(for_a: int, for_b: int, adopted: str | None) -> None:
    """With equal weights, 3:2 leaves the key contested and 3:1 adopts the majority."""
    votes = [vote(f"a{i}", "A") for i in range(for_a)] + [vote(f"b{i}", "B") for i in range(for_b)]
    t = count(votes)
    assert t is not None
    assert t.consensus == adopted
    # Contested keys keep every version with its tally.
    assert {v.version_id for v in t.versions} == {"A", "B"} - ({"B"} if for_b == 0 else set())


# --- properties ----------------------------------------------------------------------------

VOTERS = ("n1", "n2", "n3", "n4", "n5")
VERSIONS = ("A", "B", "C")
THRESHOLDS = (DEFAULT, Fraction(1, 2), Fraction(2, 3), Fraction(3, 4))


@st.composite
def votes_strategy(draw: st.DrawFn) -> list[Vote]:
    """A few votes per node over three versions, shared evidence ids and some abstentions."""
    out: list[Vote] = []
    for _ in range(draw(st.integers(0, 10))):
        version = draw(st.sampled_from((*VERSIONS, None)))
        # One evidence id stands for one version; several nodes may rest on the same one.
        evidence = "" if version is None else f"{version}{draw(st.integers(1, 2))}"
        out.append(
            Vote(
                voter=draw(st.sampled_from(VOTERS)),
                key=LIVES_IN,
                version_id=version,
                evidence_id=evidence,
                anchor=draw(st.integers(1, 7)),
                worth_milli=draw(st.sampled_from([1, 100, 500, 701, 1000])),
                fresh_since=NOW - draw(st.integers(-2, 200)) * DAY // 3,
                cast_at=draw(st.integers(0, 3)),
            )
        )
    return out


@FAST
@given(data=st.data(), votes=votes_strategy(), threshold=st.sampled_from(THRESHOLDS))
def test_tally_ignores_vote_order(
    data: st.DataObject, votes: list[Vote], threshold: Fraction
) -> None:
    """The same vote set in any order gives an identical tally."""
    shuffled = data.draw(st.permutations(votes))
    assert count(shuffled, threshold, "n1") == count(votes, threshold, "n1")
    assert latest_votes(shuffled) == latest_votes(votes)


@FAST
@given(data=st.data(), votes=votes_strategy(), threshold=st.sampled_from(THRESHOLDS))
def test_duplicate_votes_change_nothing(
    data: st.DataObject, votes: list[Vote], threshold: Fraction
) -> None:
    """Receiving the same vote again (an exact duplicate) leaves the tally unchanged."""
    extra = data.draw(st.lists(st.sampled_from(votes), max_size=6)) if votes else []
    assert count(votes + extra, threshold) == count(votes, threshold)


@FAST
@given(
    data=st.data(),
    votes=votes_strategy(),
    threshold=st.sampled_from(THRESHOLDS),
    anchor_less=st.integers(0, 3),
    worth_less=st.integers(0, 1000),
    older=st.integers(0, 40 * DAY),
)
def test_an_echo_never_changes_the_outcome(
    data: st.DataObject,
    votes: list[Vote],
    threshold: Fraction,
    anchor_less: int,
    worth_less: int,
    older: int,
) -> None:
    """Another node echoing counted evidence at the same or lower weight changes no outcome."""
    before = count(votes, threshold)
    counted = [v for v in latest_votes(votes).values() if v.version_id is not None]
    if before is None or not counted:
        return
    base = data.draw(st.sampled_from(sorted(counted, key=lambda v: v.voter)))
    echo = Vote(
        "echo",
        base.key,
        base.version_id,
        base.evidence_id,
        max(base.anchor - anchor_less, 0),
        max(base.worth_milli - worth_less, 0),
        base.fresh_since - older,
        base.cast_at,
    )
    assert vote_weight(echo, NOW, HALF_LIFE) <= vote_weight(base, NOW, HALF_LIFE)
    after = count([*votes, echo], threshold)
    assert after is not None
    assert (after.consensus, after.total, weights(after)) == (
        before.consensus,
        before.total,
        weights(before),
    )


@FAST
@given(votes=votes_strategy(), threshold=st.sampled_from(THRESHOLDS))
def test_adopted_version_is_exactly_above_threshold(votes: list[Vote], threshold: Fraction) -> None:
    """A version is adopted iff W_v·den > num·W_total (100·W_v > 66·W_total by default)."""
    t = count(votes, threshold)
    if t is None:
        assert all(v.version_id is None for v in latest_votes(votes).values())
        return
    assert t.total == sum(v.weight for v in t.versions)
    above = [
        v.version_id
        for v in t.versions
        if v.weight * threshold.denominator > threshold.numerator * t.total
    ]
    assert above == ([] if t.consensus is None else [t.consensus])
    if t.consensus is not None and threshold == DEFAULT:
        assert 100 * weights(t)[t.consensus] > 66 * t.total


# --- the served belief ---------------------------------------------------------------------


def result(consensus: str | None, peer_voted: bool = True) -> Tally:
    """A tally of A against B with the given outcome."""
    return Tally(
        consensus,
        10,
        (VersionTally("A", 6, ("n1", "n2")), VersionTally("B", 4, ("n3",))),
        peer_voted,
    )


TRUST = Rule.TRUST_ANCHOR
BELIEVED, CONTESTED, AMBIGUOUS = BeliefState.BELIEVED, BeliefState.CONTESTED, BeliefState.AMBIGUOUS
ADOPTED_A = Served("A", BELIEVED, Rule.FEDERATION_CONSENSUS)


@pytest.mark.parametrize(
    ("local", "ambiguous", "protected", "outcome", "expected"),
    [
        # Consensus replaces a differing unprotected local belief.
        ("B", False, False, result("A"), ADOPTED_A),
        # A relayed majority never overwrites protected first-party truth.
        ("B", False, True, result("A"), Served("B", CONTESTED, TRUST)),
        # Agreeing with consensus, protected or not, is the consensus.
        ("A", False, True, result("A"), ADOPTED_A),
        ("A", False, False, result("A"), ADOPTED_A),
        # Without consensus the local belief stands, contested.
        ("B", False, False, result(None), Served("B", CONTESTED, TRUST)),
        ("A", False, True, result(None), Served("A", CONTESTED, TRUST)),
        # Only the node's own vote: the local belief is served unchanged.
        ("B", False, False, result("A", peer_voted=False), Served("B", BELIEVED, TRUST)),
        ("B", True, False, result(None, peer_voted=False), Served("B", AMBIGUOUS, TRUST)),
        # No votes at all: the local belief unchanged.
        ("B", False, False, None, Served("B", BELIEVED, TRUST)),
        ("B", True, False, None, Served("B", AMBIGUOUS, TRUST)),
        # A locally ambiguous key takes the consensus.
        ("B", True, False, result("A"), ADOPTED_A),
        # No local belief: consensus if any, else the heaviest version, contested.
        (None, False, False, result("A"), ADOPTED_A),
        (None, False, False, result(None), Served("A", CONTESTED, Rule.TIEBREAK)),
        (None, False, False, None, None),
    ],
)
def test_served_belief(
    local: str | None,
    ambiguous: bool,
    protected: bool,
    outcome: Tally | None,
    expected: Served | None,
) -> None:
    """Consensus is served unless it would overwrite protected truth; else local, contested."""
    rule = TRUST if local is not None else None
    assert served(local, rule, ambiguous, protected, outcome) == expected


def test_own_vote_alone_is_not_a_peer_vote() -> None:
    """A tally of only the node's own vote (peers abstaining) reports no peer vote."""
    votes = [vote("self", "A"), vote("n2", None), vote("n3", None)]
    t = count(votes, self_id="self")
    assert t is not None
    assert t.consensus == "A" and not t.peer_voted
    assert served("A", TRUST, False, False, t) == Served("A", BELIEVED, TRUST)
    with_peer = count([*votes, vote("n4", "A")], self_id="self")
    assert with_peer is not None and with_peer.peer_voted


# --- freshness in millionths ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("age_hours", "expected"),
    [
        (0, 1_000_000),
        (1, 999_037),  # floor(10^6 x 0.5^(1/720))
        (360, 707_106),
        (720, 500_000),
        (24 * 365, 217),
        (24 * 365 * 10, 1),  # would round to 0; never does
    ],
)
def test_freshness_ppm_is_the_exact_floor_with_a_floor_of_one(
    age_hours: int, expected: int
) -> None:
    """freshness_ppm = max(1, floor(10^6 x 0.5^(age / half_life))) in whole hours."""
    assert freshness_ppm(age_hours, 720) == expected


@settings(max_examples=60, deadline=None)
@given(age=st.integers(0, 24 * 3650), half_life=st.integers(1, 24 * 400))
def test_freshness_ppm_brackets_the_real_value(age: int, half_life: int) -> None:
    """The integer n returned satisfies n <= 10^6 x 2^(-a/h) < n + 1 (or is the floor of 1),
    checked exactly as n^h x 2^a <= 10^(6h) < (n+1)^h x 2^a for small h, and by float else."""
    n = freshness_ppm(age, half_life)
    assert 1 <= n <= 1_000_000
    if half_life <= 48:
        if n > 1:
            assert n**half_life << age <= 10 ** (6 * half_life)
        assert (n + 1) ** half_life << age > 10 ** (6 * half_life)
    else:
        assert abs(n - max(1.0, 1e6 * 0.5 ** (age / half_life))) <= 1


def test_an_agreed_fact_two_years_old_keeps_consensus() -> None:
    """Votes on two-year-old evidence still weigh more than nothing, so agreement holds."""
    old = NOW - 730 * DAY
    votes = [vote(f"n{i}", "A", anchor=90, worth=900, fresh_since=old) for i in range(3)]
    t = count(votes)
    assert t is not None and t.total > 0
    assert t.consensus == "A"


def _split(consensus: str | None, weights: dict[str, int]) -> Tally:
    versions = tuple(
        VersionTally(vid, weight, (f"node-{vid}",)) for vid, weight in sorted(weights.items())
    )
    return Tally(consensus, sum(weights.values()), versions, True)


def test_review_reason_says_why_a_key_waits_for_an_operator() -> None:
    """Votes split below the threshold name the best share; an adopted version the node does
    not serve is named; a local tie names the tied values; values stand in for version ids
    where the node holds them."""
    threshold = Fraction(66, 100)
    split = _split(None, {"a" * 32: 625, "b" * 32: 375})
    assert review_reason(split, threshold, (), {"a" * 32: "Mei"}) == (
        "no version has more than 66% of the counted vote weight; the most is 'Mei' with 62.5%"
    )
    adopted = _split("b" * 32, {"a" * 32: 200, "b" * 32: 800})
    assert review_reason(adopted, threshold, (), {}) == (
        f"the federation adopted {'b' * 12} (80.0% of the counted vote weight), but this node "
        "keeps its own belief"
    )
    objects = {"a" * 32: "Porto", "b" * 32: "Faro"}
    assert review_reason(None, threshold, ("a" * 32, "b" * 32), objects) == (
        "no rule discriminates between 'Faro', 'Porto'"
    )
