"""The arbitration rules of specification §5 as one table: each rule, in order, with its metric,
its margin and the reason it gives.

Everything that applies or explains the rules reads `RULES`: arbitration's filters and its
pairwise order, each version's strongest evidence, the policy's margin settings and the
reasons `arbitration.describe` gives. A rule is stated once, here, so no two places have
to agree by position.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from factnode.core._model import Evidence, Rule, iso

if TYPE_CHECKING:
    from factnode.core.policy import Policy

Metric = tuple[int, ...]
"""What a rule compares, higher first; a tuple compares lexicographically."""


@dataclass(frozen=True, slots=True)
class ArbitrationRule:
    """One rule of the order: its metric for a piece of evidence, the policy setting a lead
    must exceed to discriminate (None: any lead does), and the reason it gives for a winner
    beating a loser."""

    rule: Rule
    metric: Callable[[Evidence, Policy], Metric]
    margin: str | None
    reason: Callable[[Evidence, Evidence, Policy], str]

    def margin_milli(self, policy: Policy) -> int:
        """The lead, in the metric's units, that does not yet discriminate."""
        return 0 if self.margin is None else policy.margin_milli(self.margin)


def leads(a: Metric, b: Metric, margin: int) -> bool:
    """Whether metric `a` leads `b` by more than `margin`. A margin is measured on a
    one-value metric; without one, any lexicographic lead counts."""
    if margin == 0:
        return a > b
    return a[0] - b[0] > margin


def _anchor(e: Evidence, policy: Policy) -> Metric:
    # (as counted here, as stated): a peer's cap lowers its claims as a whole but never
    # reorders them, since where the counted values tie the stated anchors decide (specification
    # §5 rule 1). Taken at its word, that includes a first-party `federation_received`
    # against a relayed `user_stated` capped at `federation_received`: both count 20 here,
    # and the relayed claim wins on the stated 90 (tests/unit/test_rules.py pins it).
    anchors = policy.anchors
    stated = anchors[e.attribution]
    cap = e.anchor_cap
    return (stated if cap is None else min(stated, anchors[cap]), stated)


def _counted_as(e: Evidence, policy: Policy) -> str:
    """The anchor whose value `e` counts at here: its peer's cap where that lowers it."""
    if e.anchor_cap is not None and policy.anchors[e.anchor_cap] < policy.anchors[e.attribution]:
        return e.anchor_cap
    return e.attribution


def _anchor_as_counted(e: Evidence, policy: Policy) -> str:
    """ "agent_observed (60)", or for relayed evidence counted below its attribution,
    "agent_observed capped at federation_received (20)"."""
    value = policy.anchor_value(e.attribution, e.anchor_cap)
    counted = _counted_as(e, policy)
    if counted != e.attribution:
        return f"{e.attribution} capped at {counted} ({value})"
    return f"{e.attribution} ({value})"


def _anchor_reason(winner: Evidence, loser: Evidence, policy: Policy) -> str:
    value = policy.anchor_value(winner.attribution, winner.anchor_cap)
    if value != policy.anchor_value(loser.attribution, loser.anchor_cap):
        return (
            f"anchor {_anchor_as_counted(winner, policy)} outranks "
            f"{_anchor_as_counted(loser, policy)}"
        )
    # Counted alike here: the stated anchors decided.
    names = sorted({_counted_as(winner, policy), _counted_as(loser, policy)})
    alike = f"{names[0]} ({value})" if len(names) == 1 else f"{value} ({' and '.join(names)})"
    return (
        f"both count as {alike} here; {winner.attribution} "
        f"({policy.anchors[winner.attribution]}) outranks {loser.attribution} "
        f"({policy.anchors[loser.attribution]}) as stated"
    )


def _recency(e: Evidence, policy: Policy) -> Metric:
    return (e.valid_from,)


def _recency_reason(winner: Evidence, loser: Evidence, policy: Policy) -> str:
    return f"event time {iso(winner.valid_from)} is later than {iso(loser.valid_from)}"


def _worth(e: Evidence, policy: Policy) -> Metric:
    return (e.worth_milli,)


def _confidence(e: Evidence, policy: Policy) -> Metric:
    return (e.confidence_milli,)


def _margined(
    rule: Rule, metric: Callable[[Evidence, Policy], Metric], margin: str
) -> ArbitrationRule:
    """A rule on a value in thousandths (worth, confidence) that must lead by its margin."""

    def reason(winner: Evidence, loser: Evidence, policy: Policy) -> str:
        return (
            f"{rule.value} {metric(winner, policy)[0] / 1000:.3f} leads "
            f"{metric(loser, policy)[0] / 1000:.3f} "
            f"by more than the margin {policy.margin_milli(margin) / 1000:.3f}"
        )

    return ArbitrationRule(rule, metric, margin, reason)


RULES: tuple[ArbitrationRule, ...] = (
    ArbitrationRule(Rule.TRUST_ANCHOR, _anchor, None, _anchor_reason),
    ArbitrationRule(Rule.RECENCY, _recency, None, _recency_reason),
    _margined(Rule.WORTH, _worth, "worth_margin"),
    _margined(Rule.CONFIDENCE, _confidence, "confidence_margin"),
)
"""The rules in the order they apply; the first that discriminates decides."""

TIEBREAK_REASON = "no rule discriminates; the lowest version id is believed provisionally"

MARGIN_SETTINGS: tuple[str, ...] = tuple(r.margin for r in RULES if r.margin is not None)
"""The policy settings that hold the rules' margins (as `<setting>_milli`)."""

BY_RULE: Mapping[Rule, ArbitrationRule] = {r.rule: r for r in RULES}
