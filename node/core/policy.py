"""The arbitration policy: trust anchors, margins, thresholds and half-lives.

Defaults are built in (specification §3-§7); an operator's TOML file overrides
them. A bad file is refused at load with the field and the reason.
"""

from __future__ import annotations

import hashlib
import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from factnode.core._model import MICROS_PER_DAY
from factnode.core._rules import MARGIN_SETTINGS

DEFAULT_ANCHORS: Mapping[str, int] = {
    "codebase_verified": 100,
    "user_stated": 90,
    "user_confirmed": 85,
    "api_response": 80,
    "document_extracted": 70,
    "agent_observed": 60,
    "agent_inferred": 40,
    "llm_generated": 30,
    "federation_received": 20,
}

# Days; None never decays.
DEFAULT_HALF_LIFE_DAYS: Mapping[str, int | None] = {
    "codebase_verified": None,
    "user_stated": None,
    "user_confirmed": None,
    "api_response": 180,
    "document_extracted": 180,
    "agent_observed": 180,
    "agent_inferred": 30,
    "llm_generated": 30,
    "federation_received": 30,
}

DEFAULT_MULTI_VALUED = frozenset({"knows", "speaks", "interested_in"})


class PolicyError(ValueError):
    """A policy value is invalid; names the field and the reason."""

    def __init__(self, field_name: str, reason: str) -> None:
        super().__init__(f"policy field {field_name!r}: {reason}")
        self.field = field_name
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Policy:
    """Everything the rules need to know that an operator may change."""

    anchors: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_ANCHORS))
    half_life_days: Mapping[str, int | None] = field(
        default_factory=lambda: dict(DEFAULT_HALF_LIFE_DAYS)
    )
    min_confidence_milli: int = 400
    worth_margin_milli: int = 200
    confidence_margin_milli: int = 0
    multi_valued: frozenset[str] = DEFAULT_MULTI_VALUED
    consensus_threshold: Fraction = Fraction(66, 100)
    vote_half_life_days: int = 30
    # Days evidence is kept after its expiry before the decay job purges it as an erasure
    # does (specification §6, retention); None: kept for ever.
    retain_decayed_days: int | None = None
    protect_anchor: str = "user_confirmed"
    default_max_anchor: str = "federation_received"
    # The anchor ceiling of each member's relayed evidence, by node id (`[federation.max_anchor]`
    # in the node's configuration); members not named count at `default_max_anchor`.
    member_caps: Mapping[str, str] = field(default_factory=dict)
    # How far in this node's future a peer's tombstone or vote may be dated (clock skew).
    clock_skew_seconds: int = 300
    # How many of one peer's votes may wait for evidence this node does not hold: a vote
    # waits until its evidence arrives, and no peer may fill the store with such votes.
    max_waiting_votes_per_peer: int = 10_000

    def anchor_value(self, attribution: str, cap: str | None = None) -> int:
        """Trust value of an anchor; relayed evidence counts at most at its peer's cap."""
        value = self.anchors[attribution]
        if cap is not None:
            value = min(value, self.anchors[cap])
        return value

    def cap_for(self, node_id: str) -> str:
        """The anchor ceiling this node sets for evidence from member `node_id` (specification §7)."""
        return self.member_caps.get(node_id, self.default_max_anchor)

    def margin_milli(self, setting: str) -> int:
        """A rule's margin in thousandths, by its setting's name (`_rules.RULES`)."""
        if setting not in MARGIN_SETTINGS:
            raise KeyError(setting)
        value: int = getattr(self, f"{setting}_milli")
        return value

    def is_multi_valued(self, predicate: str) -> bool:
        """Multi-valued predicates never contradict: each value stands on its own."""
        return predicate in self.multi_valued

    def half_life_micros(self, attribution: str) -> int | None:
        """Decay half-life of an anchor in microseconds; None never decays."""
        days = self.half_life_days.get(attribution)
        return None if days is None else days * MICROS_PER_DAY

    @property
    def clock_skew_micros(self) -> int:
        """The clock-skew allowance in microseconds."""
        return self.clock_skew_seconds * 1_000_000


def _milli(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PolicyError(name, f"must be a number in [0, 1], got {value!r}")
    if math.isnan(value) or not 0 <= value <= 1:
        raise PolicyError(name, f"must be in [0, 1], got {value!r}")
    return round(Fraction(str(value)) * 1000)


def _fraction(name: str, value: Any) -> Fraction:
    try:
        if isinstance(value, bool):
            raise ValueError
        frac = Fraction(str(value)) if isinstance(value, int | float | str) else None
    except (ValueError, ZeroDivisionError):
        frac = None
    # Below one half two versions could both pass.
    if frac is None or not Fraction(1, 2) <= frac < 1:
        raise PolicyError(name, f'must be a fraction in [1/2, 1) such as "66/100", got {value!r}')
    return frac


def _days(name: str, value: Any) -> int | None:
    if value in ("never", None):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise PolicyError(
            name, f'must be a positive whole number of days or "never", got {value!r}'
        )
    return value


def _anchor_name(name: str, value: Any, anchors: Mapping[str, int]) -> str:
    if not isinstance(value, str) or value not in anchors:
        raise PolicyError(name, f"unknown anchor {value!r}; known: {', '.join(sorted(anchors))}")
    return value


_KNOWN_FIELDS = {
    "anchors",
    "half_life_days",
    "min_confidence",
    *MARGIN_SETTINGS,
    "multi_valued",
    "consensus_threshold",
    "vote_half_life_days",
    "retain_decayed_days",
    "protect_anchor",
    "default_max_anchor",
    "clock_skew_seconds",
    "max_waiting_votes_per_peer",
}


def policy_from_mapping(data: Mapping[str, Any], base: Policy | None = None) -> Policy:
    """Build a policy from a parsed TOML table; fields not given keep `base` (the defaults)."""
    policy = base or Policy()
    unknown = sorted(set(data) - _KNOWN_FIELDS)
    if unknown:
        raise PolicyError(
            unknown[0], f"unknown field; known fields: {', '.join(sorted(_KNOWN_FIELDS))}"
        )

    anchors = dict(policy.anchors)
    raw_anchors = data.get("anchors", {})
    if not isinstance(raw_anchors, Mapping):
        raise PolicyError("anchors", "must be a table of anchor = value")
    for name, value in raw_anchors.items():
        if not name or not name.replace("_", "").isalnum():
            raise PolicyError(f"anchors.{name}", "anchor names are letters, digits and '_'")
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1000:
            raise PolicyError(
                f"anchors.{name}", f"must be a whole number in [0, 1000], got {value!r}"
            )
        anchors[name] = value

    half_lives = dict(policy.half_life_days)
    raw_half = data.get("half_life_days", {})
    if not isinstance(raw_half, Mapping):
        raise PolicyError("half_life_days", "must be a table of anchor = days")
    for name, value in raw_half.items():
        _anchor_name(f"half_life_days.{name}", name, anchors)
        half_lives[name] = _days(f"half_life_days.{name}", value)
    for name in anchors:
        # A new anchor without a stated half-life does not decay.
        half_lives.setdefault(name, None)

    changes: dict[str, Any] = {"anchors": anchors, "half_life_days": half_lives}
    for name in ("min_confidence", *MARGIN_SETTINGS):
        if name in data:
            changes[f"{name}_milli"] = _milli(name, data[name])
    if "multi_valued" in data:
        raw = data["multi_valued"]
        if not isinstance(raw, list) or not all(isinstance(p, str) and p for p in raw):
            raise PolicyError("multi_valued", "must be a list of predicate names")
        changes["multi_valued"] = frozenset(raw)
    if "consensus_threshold" in data:
        changes["consensus_threshold"] = _fraction(
            "consensus_threshold", data["consensus_threshold"]
        )
    if "vote_half_life_days" in data:
        days = _days("vote_half_life_days", data["vote_half_life_days"])
        if days is None:
            raise PolicyError("vote_half_life_days", "votes must age; give a number of days")
        changes["vote_half_life_days"] = days
    if "retain_decayed_days" in data:
        changes["retain_decayed_days"] = _days("retain_decayed_days", data["retain_decayed_days"])
    if "clock_skew_seconds" in data:
        skew = data["clock_skew_seconds"]
        if isinstance(skew, bool) or not isinstance(skew, int) or not 0 <= skew <= 86_400:
            raise PolicyError(
                "clock_skew_seconds",
                f"must be a whole number of seconds in [0, 86400], got {skew!r}",
            )
        changes["clock_skew_seconds"] = skew
    if "max_waiting_votes_per_peer" in data:
        most = data["max_waiting_votes_per_peer"]
        if isinstance(most, bool) or not isinstance(most, int) or not 0 <= most <= 10_000_000:
            raise PolicyError(
                "max_waiting_votes_per_peer",
                f"must be a whole number in [0, 10000000], got {most!r}",
            )
        changes["max_waiting_votes_per_peer"] = most
    for name in ("protect_anchor", "default_max_anchor"):
        if name in data:
            changes[name] = _anchor_name(name, data[name], anchors)
        else:
            _anchor_name(name, getattr(policy, name), anchors)
    return replace(policy, **changes)


def load_policy(path: str | Path) -> Policy:
    """Read a TOML policy file over the built-in defaults."""
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise PolicyError("policy_file", f"no such file: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError("policy_file", f"not valid TOML: {exc}") from None
    return policy_from_mapping(data)


# Settings that bound what a peer may send, or how long expired evidence is kept, not what
# evidence decides: two nodes that differ only in them hold the same beliefs for the same
# evidence.
_PEER_LIMITS = frozenset(
    {"clock_skew_seconds", "max_waiting_votes_per_peer", "retain_decayed_days"}
)


def policy_fingerprint(policy: Policy) -> str:
    """A SHA-256 (hex) of everything in `policy` that decides beliefs from evidence: two
    policies with one fingerprint give the same beliefs, decisions and votes for the same
    evidence. An export carries it so an import can tell that its node decides otherwise."""
    canonical: dict[str, Any] = {}
    for name in sorted(Policy.__dataclass_fields__):
        if name in _PEER_LIMITS:
            continue
        value = getattr(policy, name)
        if isinstance(value, Mapping):
            value = sorted(value.items())
        elif isinstance(value, frozenset):
            value = sorted(value)
        elif isinstance(value, Fraction):
            value = [value.numerator, value.denominator]
        canonical[name] = value
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
