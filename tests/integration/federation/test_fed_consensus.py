"""Five real nodes vote their local beliefs: a supermajority is adopted, anything less is contested.

Every fact has the same event time, worth 0.5 and anchor agent_observed (60) unless said
otherwise, so each node's vote weighs the same and tallies are in the ratio of the voters.
Each node also holds the others' evidence, relayed and capped at federation_received (20),
which never outweighs its own first-party evidence: each node votes its own view.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from _fednet import (
    BELIEVED,
    CONTESTED,
    RPC_TIMEOUT,
    Federation,
    StartFederation,
    event_time,
    key,
    unique_ns,
)
from google.protobuf.timestamp_pb2 import Timestamp

from factnode.api.v1 import factnode_pb2 as pb
from factnode.core import Key, ids

NODES = ["n1", "n2", "n3", "n4", "n5"]
CONSENSUS = "federation_consensus"


@dataclass(frozen=True)
class Keys:
    """The keys the module's facts were submitted under."""

    namespace: str
    three_to_two: pb.Key  # n1-n3 Porto, n4-n5 Lisbon: 60%
    three_to_one: pb.Key  # n1-n3 Porto, n4 Lisbon, n5 no first-party evidence: 75%
    protected: pb.Key  # n1-n3 Porto, n4 Lisbon as user_confirmed (protected): ~78%
    echoed: pb.Key  # only n1 observed Porto, every other node echoes it; n4 Lisbon
    swing: pb.Key  # 3:2 until n5's operator resolves it for Porto


def version(k: pb.Key, obj: str) -> str:
    return ids.version_id(Key(k.namespace, k.subject, k.predicate), obj)


@pytest.fixture(scope="module")
def fed5(start_federation: StartFederation) -> Federation:
    """Five nodes, each peering with the other four."""
    return start_federation(NODES)


@pytest.fixture(scope="module")
def keys(fed5: Federation) -> Keys:
    """Conflicting facts submitted on chosen nodes, then synced until no round moves anything."""
    ns = unique_ns("vote")
    k = Keys(
        ns,
        key(ns, "ana", "lives_in"),
        key(ns, "ravi", "lives_in"),
        key(ns, "mia", "lives_in"),
        key(ns, "leo", "lives_in"),
        key(unique_ns("swing"), "ana", "lives_in"),
    )
    at = event_time()

    def say(node: str, kk: pb.Key, obj: str, **kw: object) -> None:
        # Distinct sources: independent observations, so distinct evidence ids.
        fed5[node].submit(kk, obj, source=f"agent:{node}", valid_from=at, **kw)  # type: ignore[arg-type]

    for node in ("n1", "n2", "n3"):
        for kk in (k.three_to_two, k.three_to_one, k.protected, k.swing):
            say(node, kk, "Porto")
    for node in ("n4", "n5"):
        say(node, k.three_to_two, "Lisbon")
        say(node, k.swing, "Lisbon")
    say("n4", k.three_to_one, "Lisbon")
    # 85 x 300 against 3 x 60 x 500: Porto has 78%, but n4's belief is first-party truth.
    say("n4", k.protected, "Lisbon", attribution="user_confirmed", worth=0.3)
    # Porto: one observation, 60 x 500, however many nodes echo it; Lisbon 60 x 280: 64% : 36%.
    # Counted per echo (3 more nodes x 20 x 500) Porto would have 78%. On the nodes that hold
    # both relayed (both at 20), Porto's worth leads by more than the 0.2 margin: they vote Porto.
    say("n1", k.echoed, "Porto")
    say("n4", k.echoed, "Lisbon", worth=0.28)
    fed5.sync_until_quiet()
    return k


def served(fed: Federation, k: pb.Key) -> dict[str, tuple[str, int, str]]:
    """Each node's served (object, state, rule) for a key."""
    out = {}
    for node in fed:
        b = node.belief(k)
        assert b is not None, f"{node.node_id} has no belief for {k}"
        out[node.node_id] = (b.object, b.state, b.rule)
    return out


def test_three_to_two_is_contested_on_every_node(fed5: Federation, keys: Keys) -> None:
    """Votes 3:2 (60%, not above 66%) adopt nothing: each node serves its own belief, CONTESTED."""
    porto = ("Porto", CONTESTED, "trust_anchor")
    lisbon = ("Lisbon", CONTESTED, "trust_anchor")
    assert served(fed5, keys.three_to_two) == {
        "n1": porto,
        "n2": porto,
        "n3": porto,
        "n4": lisbon,
        "n5": lisbon,
    }
    # The transition to CONTESTED is logged, and so is every later change of tally while it
    # stays CONTESTED (e.g. 2:2 and then the fifth vote), so the last entry has the 3:2 tally.
    for node in fed5:
        log = node.facts.ListDecisions(
            pb.ListDecisionsRequest(key=keys.three_to_two, page_size=1000), timeout=RPC_TIMEOUT
        ).decisions
        entries = [d for d in log if d.rule == CONSENSUS]
        assert entries[0].detail.startswith("tally: "), entries[0].detail
        last = entries[-1]
        assert last.outcome == pb.OUTCOME_CONTESTED, node.node_id
        assert "60.0% by n1, n2, n3" in last.detail, last.detail
        assert "40.0% by n4, n5" in last.detail, last.detail


def test_a_contested_key_is_queued_with_both_versions_on_every_node(
    fed5: Federation, keys: Keys
) -> None:
    """ListContested on every node lists the 3:2 key with both versions, and no settled key."""
    both = {version(keys.three_to_two, "Porto"), version(keys.three_to_two, "Lisbon")}
    want = {
        (keys.namespace, "ana", "lives_in"),  # three_to_two
        (keys.namespace, "leo", "lives_in"),  # echoed
    }
    for node in fed5:
        queued = node.contested(keys.namespace)
        expected = want | ({(keys.namespace, "mia", "lives_in")} if node.node_id == "n4" else set())
        assert set(queued) == expected, node.node_id
        entry = queued[(keys.namespace, "ana", "lives_in")]
        assert entry.state == CONTESTED
        assert {v.version_id for v in entry.versions} == both, node.node_id
        assert {v.object for v in entry.versions} == {"Porto", "Lisbon"}
        assert entry.served_version_id == node.belief(keys.three_to_two).version_id  # type: ignore[union-attr]
        # Every version is kept with its tally: equal weights, three voters against two.
        tally = {v.object: v for v in entry.versions}
        assert sorted(tally["Porto"].voters) == ["n1", "n2", "n3"], node.node_id
        assert sorted(tally["Lisbon"].voters) == ["n4", "n5"], node.node_id
        assert (tally["Porto"].share_milli, tally["Lisbon"].share_milli) == (600, 400)
        assert 2 * tally["Porto"].weight == 3 * tally["Lisbon"].weight
        # GetBelief carries the same tallies where peers have voted.
        served_tallies = node.belief(keys.three_to_two).tallies  # type: ignore[union-attr]
        assert {t.object: t.share_milli for t in served_tallies} == {"Porto": 600, "Lisbon": 400}


def test_three_to_one_is_adopted_on_every_node(fed5: Federation, keys: Keys) -> None:
    """Votes 3:1 (75%) are adopted everywhere, by the dissenting node and the abstaining one too."""
    assert set(served(fed5, keys.three_to_one).values()) == {("Porto", BELIEVED, CONSENSUS)}


def test_a_protected_local_belief_stays_contested_against_a_majority(
    fed5: Federation, keys: Keys
) -> None:
    """A node whose belief rests on user_confirmed evidence keeps it, CONTESTED, against 78%."""
    states = served(fed5, keys.protected)
    assert states.pop("n4") == ("Lisbon", CONTESTED, "trust_anchor")
    assert set(states.values()) == {("Porto", BELIEVED, CONSENSUS)}


def test_an_echoed_observation_counts_once(fed5: Federation, keys: Keys) -> None:
    """Votes resting on the same relayed evidence count once: 64% is contested everywhere."""
    states = served(fed5, keys.echoed)
    assert states.pop("n4") == ("Lisbon", CONTESTED, "trust_anchor")
    assert states.pop("n1") == ("Porto", CONTESTED, "trust_anchor")
    # The other three hold both versions relayed; Porto wins there on worth.
    assert set(states.values()) == {("Porto", CONTESTED, "worth")}


def test_an_operator_resolution_settles_the_contested_key_it_looked_at(
    fed5: Federation, keys: Keys
) -> None:
    """Resolving a 3:2 key on a dissenting node pins it there (BELIEVED by operator_resolution,
    out of the queue); its vote is still its local belief, so the other nodes' tallies and
    states do not move (specification §7: a pin is the vote only where the key was locally tied)."""
    before = served(fed5, keys.swing)
    assert before["n5"] == ("Lisbon", CONTESTED, "trust_anchor")
    assert {state for _, state, _ in before.values()} == {CONTESTED}
    resolved = fed5["n5"].review.ResolveContested(
        pb.ResolveContestedRequest(
            key=keys.swing,
            version_id=version(keys.swing, "Porto"),
            reason="checked",
            operator="ops",
        ),
        timeout=RPC_TIMEOUT,
    )
    assert resolved.belief.object == "Porto", resolved.note
    assert resolved.decision.rule == "operator_resolution"
    fed5.sync_until_quiet()
    after = served(fed5, keys.swing)
    assert after.pop("n5") == ("Porto", BELIEVED, "operator_resolution")
    assert after == {n: state for n, state in before.items() if n != "n5"}
    assert (keys.swing.namespace, "ana", "lives_in") not in fed5["n5"].contested(
        keys.swing.namespace
    )


def test_a_fact_every_node_agreed_on_two_years_ago_stays_adopted(fed5: Federation) -> None:
    """Votes on evidence two years old weigh at least 1 ppm of freshness, never 0: a fact all
    five nodes hold is BELIEVED on every node and none queues it for review."""
    ns = unique_ns("old")
    k = key(ns, "ana", "born_in")
    two_years_ago = Timestamp()
    two_years_ago.FromDatetime(datetime.now(UTC) - timedelta(days=730))
    for node in NODES:
        fed5[node].submit(
            k, "Porto", source=f"agent:{node}", attribution="user_stated", valid_from=two_years_ago
        )
    fed5.sync_until_quiet()
    assert {state for _, state, _ in served(fed5, k).values()} == {BELIEVED}
    assert {obj for obj, _, _ in served(fed5, k).values()} == {"Porto"}
    for node in fed5:
        assert node.contested(ns) == {}
