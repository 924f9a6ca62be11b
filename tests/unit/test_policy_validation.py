"""Policy defaults and overrides, and checking submissions before they become evidence."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from _facts import DAY, POLICY

from factnode.core import (
    MICROS_PER_DAY,
    InvalidInput,
    Key,
    Policy,
    PolicyError,
    Submission,
    load_policy,
    make_evidence,
    policy_from_mapping,
)
from factnode.core.validation import (
    MAX_INSTANT,
    MAX_KEY_PART_BYTES,
    MAX_OBJECT_BYTES,
    MAX_SOURCE_BYTES,
    MIN_INSTANT,
)

# --- Policy -----------------------------------------------------------------


def test_default_anchor_table_is_design_section_3() -> None:
    """The built-in trust anchors are exactly specification §3's table."""
    assert dict(Policy().anchors) == {
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


def test_default_thresholds_margins_and_predicates() -> None:
    """Defaults: min_confidence 0.4, margins 0.2 and 0, knows/speaks/interested_in multi-valued."""
    p = Policy()
    assert (p.min_confidence_milli, p.worth_margin_milli, p.confidence_margin_milli) == (
        400,
        200,
        0,
    )
    assert p.multi_valued == frozenset({"knows", "speaks", "interested_in"})
    assert p.is_multi_valued("speaks") and not p.is_multi_valued("lives_in")
    assert p.consensus_threshold == Fraction(66, 100)
    assert p.vote_half_life_days == 30
    assert (p.protect_anchor, p.default_max_anchor) == ("user_confirmed", "federation_received")


@pytest.mark.parametrize(
    ("anchor", "days"),
    [
        ("codebase_verified", None),
        ("user_stated", None),
        ("user_confirmed", None),
        ("api_response", 180),
        ("document_extracted", 180),
        ("agent_observed", 180),
        ("agent_inferred", 30),
        ("llm_generated", 30),
        ("federation_received", 30),
    ],
)
def test_default_half_lives(anchor: str, days: int | None) -> None:
    """Default half-lives are specification §6's: first-party never decays."""
    expected = None if days is None else days * MICROS_PER_DAY
    assert Policy().half_life_micros(anchor) == expected


def test_relayed_anchor_is_capped() -> None:
    """Relayed evidence counts at most at its peer's anchor ceiling."""
    assert Policy().anchor_value("user_stated", "federation_received") == 20
    assert Policy().anchor_value("llm_generated", "user_stated") == 30


def test_toml_file_overrides_defaults(tmp_path: Path) -> None:
    """A TOML policy file overrides the fields it names and keeps every other default."""
    path = tmp_path / "policy.toml"
    path.write_text(
        "min_confidence = 0.3\n"
        "worth_margin = 0.25\n"
        "confidence_margin = 0.05\n"
        'multi_valued = ["knows", "owns"]\n'
        'consensus_threshold = "3/4"\n'
        "vote_half_life_days = 7\n"
        'protect_anchor = "team_lead"\n'
        "[anchors]\n"
        "team_lead = 95\n"
        "llm_generated = 10\n"
        "[half_life_days]\n"
        "team_lead = 365\n"
        'api_response = "never"\n'
    )
    p = load_policy(path)
    assert (p.min_confidence_milli, p.worth_margin_milli, p.confidence_margin_milli) == (
        300,
        250,
        50,
    )
    assert p.multi_valued == frozenset({"knows", "owns"})
    assert p.consensus_threshold == Fraction(3, 4)
    assert p.vote_half_life_days == 7
    assert p.protect_anchor == "team_lead"
    assert p.anchors["team_lead"] == 95 and p.anchors["llm_generated"] == 10
    assert p.anchors["user_stated"] == 90
    assert p.half_life_micros("team_lead") == 365 * DAY
    assert p.half_life_micros("api_response") is None
    assert p.half_life_micros("agent_inferred") == 30 * DAY
    assert p.default_max_anchor == "federation_received"


def test_empty_mapping_is_the_defaults() -> None:
    """An empty policy table gives the built-in defaults."""
    assert policy_from_mapping({}) == Policy()


def test_new_anchor_without_half_life_never_decays() -> None:
    """An added anchor without a stated half-life does not decay."""
    assert policy_from_mapping({"anchors": {"oracle": 50}}).half_life_micros("oracle") is None


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"surprise": 1}, "surprise"),
        ({"min_confidence": 1.5}, "min_confidence"),
        ({"min_confidence": -0.1}, "min_confidence"),
        ({"min_confidence": math.nan}, "min_confidence"),
        ({"min_confidence": "high"}, "min_confidence"),
        ({"worth_margin": True}, "worth_margin"),
        ({"confidence_margin": 2}, "confidence_margin"),
        ({"anchors": 5}, "anchors"),
        ({"anchors": {"oracle": -1}}, "anchors.oracle"),
        ({"anchors": {"oracle": 1001}}, "anchors.oracle"),
        ({"anchors": {"oracle": 1.5}}, "anchors.oracle"),
        ({"anchors": {"oracle": True}}, "anchors.oracle"),
        ({"anchors": {"bad name": 5}}, "anchors.bad name"),
        ({"half_life_days": []}, "half_life_days"),
        ({"half_life_days": {"nobody": 10}}, "half_life_days.nobody"),
        ({"half_life_days": {"api_response": 0}}, "half_life_days.api_response"),
        ({"half_life_days": {"api_response": -3}}, "half_life_days.api_response"),
        ({"half_life_days": {"api_response": 1.5}}, "half_life_days.api_response"),
        ({"half_life_days": {"api_response": "soon"}}, "half_life_days.api_response"),
        ({"multi_valued": "knows"}, "multi_valued"),
        ({"multi_valued": ["knows", ""]}, "multi_valued"),
        ({"multi_valued": [1]}, "multi_valued"),
        ({"consensus_threshold": 0}, "consensus_threshold"),
        ({"consensus_threshold": 1}, "consensus_threshold"),
        ({"consensus_threshold": "1/0"}, "consensus_threshold"),
        ({"consensus_threshold": "most"}, "consensus_threshold"),
        ({"consensus_threshold": True}, "consensus_threshold"),
        ({"vote_half_life_days": "never"}, "vote_half_life_days"),
        ({"vote_half_life_days": 0}, "vote_half_life_days"),
        ({"protect_anchor": "nobody"}, "protect_anchor"),
        ({"default_max_anchor": 3}, "default_max_anchor"),
        ({"max_waiting_votes_per_peer": -1}, "max_waiting_votes_per_peer"),
        ({"max_waiting_votes_per_peer": 2.5}, "max_waiting_votes_per_peer"),
        ({"max_waiting_votes_per_peer": True}, "max_waiting_votes_per_peer"),
    ],
)
def test_bad_policy_field_is_refused_by_name(data: dict[str, Any], field: str) -> None:
    """A bad policy value is refused with a PolicyError naming the field."""
    with pytest.raises(PolicyError) as info:
        policy_from_mapping(data)
    assert info.value.field == field
    assert repr(field) in str(info.value)


def test_bad_policy_file_is_refused(tmp_path: Path) -> None:
    """A policy file that is missing or not TOML is refused, naming the file field."""
    with pytest.raises(PolicyError) as missing:
        load_policy(tmp_path / "absent.toml")
    assert missing.value.field == "policy_file"
    broken = tmp_path / "broken.toml"
    broken.write_text("min_confidence = = 0.3\n")
    with pytest.raises(PolicyError) as invalid:
        load_policy(broken)
    assert invalid.value.field == "policy_file"


def test_bad_value_in_toml_file_names_the_field(tmp_path: Path) -> None:
    """A bad value read from a file names its field just like one given as a mapping."""
    path = tmp_path / "policy.toml"
    path.write_text("[anchors]\noracle = 5000\n")
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert info.value.field == "anchors.oracle"


# --- Validation -------------------------------------------------------------


def _submit(**changes: Any) -> Submission:
    fields: dict[str, Any] = {
        "namespace": "user:ana",
        "subject": "ana",
        "predicate": "lives_in",
        "object": "Porto",
        "attribution": "user_stated",
        "source": "ana",
        "valid_from": DAY,
    }
    fields.update(changes)
    return Submission(**fields)


def _bad_fields(sub: Submission) -> list[str]:
    with pytest.raises(InvalidInput) as info:
        make_evidence(sub, POLICY, recorded_at=2 * DAY, origin_node="n1")
    return [v.field for v in info.value.violations]


def test_every_bad_field_is_listed_at_once() -> None:
    """InvalidInput lists one violation for every bad field, not just the first."""
    sub = Submission(
        namespace="",
        subject=" ",
        predicate="p" * (MAX_KEY_PART_BYTES + 1),
        object="",
        attribution="hearsay",
        source="s" * (MAX_SOURCE_BYTES + 1),
        worth=1.5,
        confidence=math.nan,
        valid_from=MAX_INSTANT + 1,
    )
    assert sorted(_bad_fields(sub)) == sorted(
        [
            "namespace",
            "subject",
            "predicate",
            "object",
            "anchor",
            "source",
            "worth",
            "confidence",
            "valid_from",
        ]
    )


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"namespace": ""}, "namespace"),
        ({"subject": ""}, "subject"),
        ({"predicate": "   "}, "predicate"),
        ({"object": ""}, "object"),
        ({"attribution": "rumour"}, "anchor"),
        ({"worth": -0.001}, "worth"),
        ({"worth": 1.001}, "worth"),
        ({"worth": math.nan}, "worth"),
        ({"worth": math.inf}, "worth"),
        ({"confidence": math.nan}, "confidence"),
        ({"confidence": 2}, "confidence"),
        ({"confidence": True}, "confidence"),
        ({"namespace": "n" * (MAX_KEY_PART_BYTES + 1)}, "namespace"),
        ({"subject": "é" * (MAX_KEY_PART_BYTES // 2 + 1)}, "subject"),
        ({"object": "o" * (MAX_OBJECT_BYTES + 1)}, "object"),
        ({"source": "s" * (MAX_SOURCE_BYTES + 1)}, "source"),
        ({"valid_from": MAX_INSTANT + 1}, "valid_from"),
        ({"valid_from": MIN_INSTANT - 1}, "valid_from"),
        ({"corrects": ""}, "corrects"),
        ({"contradicts": Key("user:ana", "", "works_at")}, "contradicts.subject"),
        ({"idempotency_key": "k" * 129}, "idempotency_key"),
    ],
)
def test_one_bad_field(changes: dict[str, Any], field: str) -> None:
    """A single bad field is reported by its name and nothing else is."""
    assert _bad_fields(_submit(**changes)) == [field]


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"worth": 0.0, "confidence": 1.0},
        {"worth": 1, "confidence": 0},
        {"source": ""},  # no source is a REJECTED decision, not invalid input
        {"namespace": "n" * MAX_KEY_PART_BYTES},
        {"object": "o" * MAX_OBJECT_BYTES},
        {"valid_from": MIN_INSTANT},
        {"valid_from": MAX_INSTANT},
        {"valid_from": None},
        {"attribution": "federation_received"},
    ],
)
def test_valid_edges_are_accepted(changes: dict[str, Any]) -> None:
    """Values at the documented limits are valid."""
    make_evidence(_submit(**changes), POLICY, recorded_at=2 * DAY, origin_node="n1")


def test_anchor_added_by_policy_is_valid() -> None:
    """An anchor the operator added to the policy is a known attribution."""
    policy = policy_from_mapping({"anchors": {"oracle": 50}})
    e = make_evidence(_submit(attribution="oracle"), policy, recorded_at=DAY, origin_node="n1")
    assert e.attribution == "oracle"


def test_worth_and_confidence_become_thousandths() -> None:
    """Worth and confidence are stored as integer thousandths."""
    e = make_evidence(
        _submit(worth=0.701, confidence=0.3), POLICY, recorded_at=DAY, origin_node="n"
    )
    assert (e.worth_milli, e.confidence_milli) == (701, 300)


def test_same_statement_gets_the_same_id_anywhere() -> None:
    """Ids cover everything arbitration reads; not the node or the ingestion time."""
    a = make_evidence(_submit(worth=0.2), POLICY, recorded_at=2 * DAY, origin_node="n1")
    b = make_evidence(
        _submit(worth=0.2, source="  ana "),
        POLICY,
        recorded_at=9 * DAY,
        origin_node="n2",
    )
    assert a.evidence_id == b.evidence_id
    assert a.version_id == b.version_id


@pytest.mark.parametrize(
    "changes",
    [
        {"namespace": "user:bob"},
        {"subject": "bob"},
        {"predicate": "works_in"},
        {"object": "Lisbon"},
        {"attribution": "api_response"},
        {"source": "bob"},
        {"valid_from": DAY + 1},
        {"worth": 0.9},
        {"confidence": 0.95},
        {"corrects": "0" * 32},
        {"contradicts": Key("user:ana", "ana", "lived_in")},
    ],
)
def test_any_identity_part_changes_the_evidence_id(changes: dict[str, Any]) -> None:
    """Changing any identity part of a statement changes its evidence id."""
    base = make_evidence(_submit(), POLICY, recorded_at=2 * DAY, origin_node="n1")
    other = make_evidence(_submit(**changes), POLICY, recorded_at=2 * DAY, origin_node="n1")
    assert other.evidence_id != base.evidence_id


def test_version_id_is_the_claim_not_its_provenance() -> None:
    """The same claim from other sources, anchors and times has one version id."""
    base = make_evidence(_submit(), POLICY, recorded_at=2 * DAY, origin_node="n1")
    other = make_evidence(
        _submit(source="bob", attribution="llm_generated", valid_from=5 * DAY),
        POLICY,
        recorded_at=7 * DAY,
        origin_node="n2",
    )
    assert other.version_id == base.version_id
    assert other.evidence_id != base.evidence_id
    assert make_evidence(
        _submit(object="Lisbon"), POLICY, recorded_at=DAY, origin_node="n"
    ).version_id != (base.version_id)


def test_defaulted_event_time_is_ingestion_time_and_flagged() -> None:
    """A submission without valid_from gets its ingestion time as event time, and says so."""
    defaulted = make_evidence(
        _submit(valid_from=None), POLICY, recorded_at=3 * DAY, origin_node="n1"
    )
    assert (defaulted.valid_from, defaulted.valid_from_defaulted) == (3 * DAY, True)
    given = make_evidence(
        _submit(valid_from=3 * DAY), POLICY, recorded_at=3 * DAY, origin_node="n1"
    )
    assert given.valid_from_defaulted is False
    later = make_evidence(_submit(valid_from=None), POLICY, recorded_at=4 * DAY, origin_node="n1")
    assert later.evidence_id != defaulted.evidence_id


def test_invalid_input_message_names_each_field() -> None:
    """The InvalidInput message carries every field and its reason."""
    with pytest.raises(InvalidInput) as info:
        make_evidence(_submit(object="", worth=3), POLICY, recorded_at=DAY, origin_node="n1")
    assert "object: is required" in str(info.value)
    assert "worth: must be in [0, 1]" in str(info.value)
