"""Core values become the API's messages field for field, whichever way they are built."""

from __future__ import annotations

from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import given
from hypothesis import strategies as st

from factnode import _wire as cv
from factnode.api.v1 import factnode_pb2 as pb
from factnode.core import BeliefState, Decision, Evidence, Key, Outcome, Rule
from factnode.ledger import Belief

text = st.text(max_size=12)
ids = st.text(alphabet="0123456789abcdef", min_size=32, max_size=32)
keys = st.builds(Key, text, text, text)
instants = st.integers(min_value=0, max_value=253_402_300_799_999_999)


@st.composite
def evidence(draw: st.DrawFn) -> Evidence:
    recorded = draw(instants)
    return Evidence(
        evidence_id=draw(ids),
        key=draw(keys),
        object=draw(text),
        version_id=draw(ids),
        attribution=draw(st.sampled_from(["user_stated", "agent_observed", "llm_generated"])),
        source=draw(text),
        worth_milli=draw(st.integers(0, 1000)),
        confidence_milli=draw(st.integers(0, 1000)),
        valid_from=draw(instants),
        valid_from_defaulted=draw(st.booleans()),
        recorded_at=recorded,
        origin_node=draw(text),
        corrects=draw(st.none() | ids),
        contradicts=draw(st.none() | keys),
        anchor_cap=draw(st.none() | st.just("federation_received")),
        origin_recorded_at=draw(st.none() | instants),
        retracts=draw(st.booleans()),
    )


def _ts(at: int) -> Timestamp:
    return Timestamp(seconds=at // 1_000_000, nanos=at % 1_000_000 * 1000)


def _key(k: Key) -> pb.Key:
    return pb.Key(namespace=k.namespace, subject=k.subject, predicate=k.predicate)


def _expected_evidence(e: Evidence) -> pb.Evidence:
    """The message spelled out field by field with the constructor."""
    return pb.Evidence(
        evidence_id=e.evidence_id,
        key=_key(e.key),
        object=e.object,
        anchor=e.attribution,
        source=e.source,
        valid_from=_ts(e.valid_from),
        valid_from_defaulted=e.valid_from_defaulted,
        origin_node=e.origin_node,
        corrects=e.corrects or "",
        anchor_cap=e.anchor_cap or "",
        contradicts=_key(e.contradicts) if e.contradicts is not None else None,
        retracts=e.retracts,
        version_id=e.version_id,
        worth=e.worth_milli / 1000,
        confidence=e.confidence_milli / 1000,
        recorded_at=_ts(e.recorded_at),
    )


@given(evidence())
def test_evidence_is_filled_field_for_field(e: Evidence) -> None:
    """Filling a message in place gives the message, and the bytes, the constructor gives."""
    expected = _expected_evidence(e)
    assert cv.evidence_pb(e) == expected
    in_place = pb.ListBeliefsResponse().beliefs.add().evidence
    assert cv.fill_evidence(in_place, e).SerializeToString() == expected.SerializeToString()


@given(evidence(), st.lists(st.tuples(ids, text), max_size=3))
def test_a_belief_is_filled_field_for_field(e: Evidence, values: list[tuple[str, str]]) -> None:
    """A belief, its evidence and its believed values, as the constructor would build them."""
    b = Belief(e.key, e.version_id, e.object, BeliefState.BELIEVED, Rule.RECENCY, e, tuple(values))
    expected = pb.Belief(
        key=_key(e.key),
        version_id=e.version_id,
        object=e.object,
        state=pb.BELIEF_STATE_BELIEVED,
        rule=Rule.RECENCY.value,
        evidence=_expected_evidence(e),
        believed_values=[pb.BelievedValue(version_id=v, object=o) for v, o in values],
    )
    assert cv.belief_pb(b) == expected
    page = pb.ListBeliefsResponse()
    cv.fill_belief(page.beliefs.add(), b)
    assert page == pb.ListBeliefsResponse(beliefs=[expected])


decisions = st.builds(
    Decision,
    keys,
    st.sampled_from(list(Outcome)),
    st.sampled_from(list(Rule)),
    instants,
    st.none() | ids,
    st.none() | ids,
    st.none() | ids,
    text,
)


@given(decisions, st.integers(0, 2**40))
def test_a_decision_is_filled_field_for_field(d: Decision, seq: int) -> None:
    """A decision, new or filled in place (as a stream's results are), is the message the
    constructor gives, with the same bytes."""
    expected = pb.Decision(
        key=_key(d.key),
        outcome=pb.Outcome.Value(f"OUTCOME_{d.outcome.value}"),
        rule=d.rule.value,
        decided_at=_ts(d.decided_at),
        evidence_id=d.evidence_id or "",
        version_id=d.version_id or "",
        supersedes=d.supersedes or "",
        detail=d.detail,
        seq=seq,
    )
    built = cv.decision_pb(d, seq)
    assert built == expected and built.HasField("decided_at")
    in_place = pb.SubmitFactsResponse().results.add().decision
    assert cv.fill_decision(in_place, d, seq).SerializeToString() == expected.SerializeToString()


@given(evidence())
def test_relayed_evidence_travels_whole(e: Evidence) -> None:
    """What a peer is sent reads back as the same statement, first recording time included."""
    back = cv.relayed(cv.relayed_pb(e))
    assert back.evidence_id == e.evidence_id and back.key == e.key and back.object == e.object
    assert (back.attribution, back.source, back.origin_node) == (
        e.attribution,
        e.source,
        e.origin_node,
    )
    assert (back.worth_milli, back.confidence_milli) == (e.worth_milli, e.confidence_milli)
    assert (back.valid_from, back.valid_from_defaulted) == (e.valid_from, e.valid_from_defaulted)
    assert (back.corrects, back.contradicts, back.retracts) == (
        e.corrects,
        e.contradicts,
        e.retracts,
    )
    assert back.first_recorded_at == e.first_recorded_at
