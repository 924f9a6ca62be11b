"""The arbitration rules are one table (`RULES`) that drives every place that applies,
weighs or explains them."""

from __future__ import annotations

from dataclasses import replace

import pytest
from _facts import DAY, POLICY, fact

from factnode.core import (
    RULES,
    Evidence,
    Policy,
    Rule,
    _rules,
    arbitrate,
    arbitration,
    policy_from_mapping,
)
from factnode.core import policy as policy_module
from factnode.core.arbitration import describe, pairwise, representatives, strength

ARBITRATION = (Rule.TRUST_ANCHOR, Rule.RECENCY, Rule.WORTH, Rule.CONFIDENCE)


# Each rule's (strong, weak) setting of `fact`.
_SETTINGS: dict[Rule, tuple[str, object, object]] = {
    Rule.TRUST_ANCHOR: ("anchor", "user_stated", "api_response"),
    Rule.RECENCY: ("day", 5, 1),
    Rule.WORTH: ("worth", 0.9, 0.5),
    Rule.CONFIDENCE: ("confidence", 0.9, 0.8),
}


def _strong_in(rule: Rule, obj: str, *, weak: bool = False) -> Evidence:
    """Evidence strong under `rule` and weak under every later rule (with `weak`: the
    reverse), equal to its counterpart under every earlier rule."""
    later = ARBITRATION[ARBITRATION.index(rule) + 1 :]
    settings: dict[str, object] = {}
    for r, (name, strong, low) in _SETTINGS.items():
        if r is rule:
            high = not weak
        elif r in later:
            high = weak
        else:
            high = True  # earlier rules: both sides equal
        settings[name] = strong if high else low
    return fact(obj, **settings)  # type: ignore[arg-type]


def test_the_table_lists_the_arbitration_rules_in_design_order() -> None:
    """RULES holds trust_anchor, recency, worth and confidence, in that order (specification §5)."""
    assert tuple(r.rule for r in RULES) == ARBITRATION


@pytest.mark.parametrize("rule", ARBITRATION, ids=[r.value for r in ARBITRATION])
def test_the_first_rule_of_the_table_that_discriminates_decides(rule: Rule) -> None:
    """A version strong under one rule and weak under every later one wins by that rule, in
    arbitration and in pairwise comparison."""
    strong, weak = _strong_in(rule, "Porto"), _strong_in(rule, "Lisbon", weak=True)
    verdict = arbitrate([strong, weak], POLICY)
    assert verdict is not None
    assert (verdict.version_id, verdict.rule) == (strong.version_id, rule)
    assert pairwise(strong, weak, POLICY) == (1, rule)
    assert pairwise(weak, strong, POLICY) == (-1, rule)


def test_arbitration_follows_the_table_when_its_order_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the table reversed, confidence is applied first: arbitration, pairwise order and
    each version's strongest evidence read the order from the table, not from elsewhere."""
    anchored = fact("Porto", anchor="user_stated", confidence=0.8)
    confident = fact("Lisbon", anchor="api_response", confidence=0.9)
    assert pairwise(anchored, confident, POLICY) == (1, Rule.TRUST_ANCHOR)
    same_version = fact("Porto", anchor="api_response", source="bob", confidence=0.9)
    assert representatives([anchored, same_version], POLICY)[anchored.version_id] == anchored

    monkeypatch.setattr(arbitration, "RULES", tuple(reversed(RULES)))
    verdict = arbitrate([anchored, confident], POLICY)
    assert verdict is not None
    assert (verdict.version_id, verdict.rule) == (confident.version_id, Rule.CONFIDENCE)
    assert pairwise(anchored, confident, POLICY) == (-1, Rule.CONFIDENCE)
    assert representatives([anchored, same_version], POLICY)[anchored.version_id] == same_version


def test_strength_lists_each_rules_metric_in_table_order() -> None:
    """A piece of evidence's strength is its metric under each rule of the table, in order."""
    e = fact("Porto", anchor="api_response", day=3, worth=0.7, confidence=0.8)
    assert strength(e, POLICY) == tuple(row.metric(e, POLICY) for row in RULES)
    assert [m[0] for m in strength(e, POLICY)] == [80, 3 * DAY, 700, 800]


@pytest.mark.parametrize("rule", ARBITRATION, ids=[r.value for r in ARBITRATION])
def test_describe_gives_the_tables_reason(rule: Rule) -> None:
    """`describe` reads each rule's reason from its row of the table."""
    [row] = [r for r in RULES if r.rule is rule]
    strong, weak = _strong_in(rule, "Porto"), _strong_in(rule, "Lisbon", weak=True)
    assert describe(rule, strong, weak, POLICY) == row.reason(strong, weak, POLICY)


def test_reasons_read_as_before() -> None:
    """The table's reasons keep the texts the CLI, README and demo show."""
    porto, lisbon = fact("Porto", day=5, worth=0.9), fact("Lisbon", anchor="llm_generated")
    assert describe(Rule.TRUST_ANCHOR, porto, lisbon, POLICY) == (
        "anchor user_stated (90) outranks llm_generated (30)"
    )
    assert describe(Rule.RECENCY, porto, fact("Faro"), POLICY) == (
        "event time 1970-01-06T00:00:00Z is later than 1970-01-02T00:00:00Z"
    )
    assert describe(Rule.WORTH, porto, fact("Faro"), POLICY) == (
        "worth 0.900 leads 0.500 by more than the margin 0.200"
    )
    assert describe(Rule.CONFIDENCE, porto, fact("Faro", confidence=0.8), POLICY) == (
        "confidence 0.900 leads 0.800 by more than the margin 0.000"
    )
    assert describe(Rule.TIEBREAK, porto, fact("Faro"), POLICY) == (
        "no rule discriminates; the lowest version id is believed provisionally"
    )


def test_the_policy_knows_exactly_the_tables_margins() -> None:
    """The policy file's margin settings are the table's: each is read in thousandths by the
    rule that names it, and a rule without a margin discriminates on any lead."""
    margins = {r.rule: r.margin for r in RULES}
    assert margins == {
        Rule.TRUST_ANCHOR: None,
        Rule.RECENCY: None,
        Rule.WORTH: "worth_margin",
        Rule.CONFIDENCE: "confidence_margin",
    }
    settings = [m for m in margins.values() if m is not None]
    assert set(settings) <= policy_module._KNOWN_FIELDS
    p = policy_from_mapping({name: 0.05 * (i + 1) for i, name in enumerate(settings)})
    for row in RULES:
        expected = 0 if row.margin is None else round(50 * (settings.index(row.margin) + 1))
        assert row.margin_milli(p) == expected
    with pytest.raises(KeyError):
        Policy().margin_milli("min_confidence")


@pytest.mark.parametrize("rule", [r.rule for r in RULES if r.margin is not None])
def test_a_margin_rule_discriminates_only_beyond_its_margin(rule: Rule) -> None:
    """A rule with a margin measures it on its one-value metric: a lead of exactly the margin
    does not discriminate, one thousandth more does."""
    [row] = [r for r in RULES if r.rule is rule]
    p = replace(POLICY, worth_margin_milli=100, confidence_margin_milli=100)
    base = fact("Porto", worth=0.5, confidence=0.5)
    assert len(row.metric(base, p)) == 1
    field = f"{rule.value}_milli"
    at_margin = replace(base, **{field: 600})
    beyond = replace(base, **{field: 601})
    assert not _rules.leads(row.metric(at_margin, p), row.metric(base, p), row.margin_milli(p))
    assert _rules.leads(row.metric(beyond, p), row.metric(base, p), row.margin_milli(p))


@pytest.mark.parametrize(
    ("a", "b", "winner"),
    [
        # First-party agent_inferred (40) against codebase_verified capped at 20.
        (fact("Porto", anchor="agent_inferred"), fact("Lisbon", anchor="codebase_verified",
         cap="federation_received", day=5), "Porto"),
        # Both capped to 20: the stated 90 beats the stated 30.
        (fact("Porto", cap="federation_received"), fact("Lisbon", anchor="llm_generated",
         cap="federation_received", day=5), "Porto"),
        # Taken at the spec's word: first-party federation_received (20) ties a user_stated
        # capped at 20, and the stated 90 decides for the relayed claim.
        (fact("Porto", cap="federation_received"), fact("Lisbon", anchor="federation_received",
         day=5), "Porto"),
        # A lower cap on the same stated anchor: the capped values differ and decide.
        (fact("Porto", anchor="api_response", cap="agent_observed"), fact("Lisbon",
         anchor="api_response", cap="federation_received", day=5), "Porto"),
    ],
    ids=["capped-value-first", "capped-tie-stated-decides", "spec-edge", "lower-cap-loses"],
)  # fmt: skip
def test_trust_anchor_compares_capped_then_stated_anchors(
    a: Evidence, b: Evidence, winner: str
) -> None:
    """trust_anchor's metric is (anchor as counted here, anchor as stated): lexicographic, so
    it decides before recency, in either order of comparison."""
    [row] = [r for r in RULES if r.rule is Rule.TRUST_ANCHOR]
    assert row.metric(a, POLICY) == (
        POLICY.anchor_value(a.attribution, a.anchor_cap),
        POLICY.anchors[a.attribution],
    )
    verdict = arbitrate([a, b], POLICY)
    assert verdict is not None
    assert verdict.rule is Rule.TRUST_ANCHOR
    assert verdict.version_id == (a if a.object == winner else b).version_id
    assert pairwise(a, b, POLICY) == (1 if a.object == winner else -1, Rule.TRUST_ANCHOR)
