"""The pure core of factnode: standard library only, no clock, no I/O.

Arbitration (`arbitration`, `decide`), consensus and the served belief (`consensus`),
decay (`decay`), the policy (`policy`), input checks (`validation`), checks on what peers
send (`peer_checks`), the plans of write batches (`plan`) and of a peer's delta (`delta`),
and content-addressed ids (`ids`). Imports nothing outside
`factnode.core` and the standard library (tests/unit/test_imports.py checks it); time
comes in as an argument.
"""

from factnode.core._model import (
    MICROS_PER_DAY,
    MICROS_PER_SECOND,
    BeliefState,
    Confirmation,
    Decision,
    Evidence,
    EvidenceStatus,
    Instant,
    Interval,
    Key,
    Outcome,
    Rule,
    Verdict,
    VersionHistory,
    iso,
)
from factnode.core._rules import RULES, ArbitrationRule
from factnode.core.arbitration import (
    Comparison,
    arbitrate,
    belief_at,
    believed_versions,
    explain,
    history,
    representatives,
    visible,
)
from factnode.core.decay import confirmed_at, expiry, freshness_milli, holds
from factnode.core.decide import Arbitrated, KeyState, Ruling, decide
from factnode.core.policy import Policy, PolicyError, load_policy, policy_from_mapping
from factnode.core.validation import (
    FieldViolation,
    InvalidInput,
    Submission,
    make_evidence,
    make_retraction,
)

__all__ = [
    "MICROS_PER_DAY",
    "MICROS_PER_SECOND",
    "RULES",
    "Arbitrated",
    "ArbitrationRule",
    "BeliefState",
    "Comparison",
    "Confirmation",
    "Decision",
    "Evidence",
    "EvidenceStatus",
    "FieldViolation",
    "Instant",
    "Interval",
    "InvalidInput",
    "Key",
    "KeyState",
    "Outcome",
    "Policy",
    "PolicyError",
    "Rule",
    "Ruling",
    "Submission",
    "Verdict",
    "VersionHistory",
    "arbitrate",
    "belief_at",
    "believed_versions",
    "confirmed_at",
    "decide",
    "expiry",
    "explain",
    "freshness_milli",
    "history",
    "holds",
    "iso",
    "load_policy",
    "make_evidence",
    "make_retraction",
    "policy_from_mapping",
    "representatives",
    "visible",
]
