"""Confirmations travel like votes (specification §6): a restatement taken by one member
moves the claim's `confirmed_at` on every member where its signer's cap allows, so the
fleet computes the same expiries; forged or future-dated confirmations are refused."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from factnode.core import (
    MICROS_PER_DAY,
    Confirmation,
    Key,
    Outcome,
    Policy,
    Rule,
    Submission,
    expiry,
)
from factnode.core.signed import confirmation_payload
from factnode.ledger import Ledger, NotFound
from factnode.testing import Federation

DAY = MICROS_PER_DAY
KEY = Key("fleet", "ana", "lives_in")
NODES = ["a", "b", "c"]
# Every member's relayed evidence counts up to agent_observed: a member's restatement of an
# llm_generated claim (30) counts wherever it is held.
TRUSTING = replace(Policy(), default_max_anchor="agent_observed")


def _rounds(fed: Federation, n: int = 3) -> None:
    for _ in range(n):
        asyncio.run(fed.round())


def _value(ledger: Ledger) -> str | None:
    try:
        return ledger.belief(KEY).object
    except NotFound:
        return None


def _ends(ledger: Ledger, evidence_id: str) -> int | None:
    [held] = ledger.evidence_by_ids([evidence_id]).values()
    return expiry(held, ledger.policy)


@pytest.fixture
def fed() -> Federation:
    federation = Federation(NODES, policy=TRUSTING)
    yield federation
    federation.close()


def test_a_restatement_on_one_member_revives_the_claim_on_all(fed: Federation) -> None:
    """a states an llm_generated fact (0.9: it holds about 35 days); on day 20 a client of b
    restates it. Every member then holds b's confirmation and computes the same expiry,
    day 20 + 35; on day 40, past the first expiry, all still believe it. On day 60 it has
    expired everywhere, and each member's decay job logs the same DECAYED change."""
    said = Submission(*KEY, "Porto", "llm_generated", "gpt", 0.5, 0.9, fed.clock.now())
    first = fed.ledgers["a"].submit(said)
    _rounds(fed)
    start = fed.clock.now()
    assert {n: _ends(fed.ledgers[n], first.evidence_id) for n in NODES} == dict.fromkeys(
        NODES, _ends(fed.ledgers["a"], first.evidence_id)
    )
    fed.clock.advance(20 * DAY)
    again = fed.ledgers["b"].submit(said)
    assert again.decision.outcome is Outcome.DUPLICATE and "restated" in again.decision.detail
    _rounds(fed)
    ends = {n: _ends(fed.ledgers[n], first.evidence_id) for n in NODES}
    assert len(set(ends.values())) == 1, ends
    assert ends["a"] is not None and ends["a"] > start + 50 * DAY
    fed.clock.advance(20 * DAY)
    assert {n: _value(fed.ledgers[n]) for n in NODES} == dict.fromkeys(NODES, "Porto")
    fed.clock.advance(20 * DAY)
    assert {n: _value(fed.ledgers[n]) for n in NODES} == dict.fromkeys(NODES, None)
    for n in NODES:
        assert fed.ledgers[n].run_decay().decayed == 1
        [logged] = [
            d.decision
            for d in fed.ledgers[n].decisions(KEY).items
            if d.decision.outcome is Outcome.DECAYED
        ]
        assert (logged.rule, logged.evidence_id) == (Rule.DECAY, first.evidence_id)


def test_a_member_capped_below_the_claim_cannot_keep_it_alive() -> None:
    """With the default cap (federation_received, below llm_generated) b's restatement of
    a's claim is held on a, so the fleet's digests agree, but it does not extend the claim
    there: a member keeps no claim alive with more weight than its own statement has."""
    fed = Federation(NODES)
    try:
        said = Submission(*KEY, "Porto", "llm_generated", "gpt", 0.5, 0.9, fed.clock.now())
        first = fed.ledgers["a"].submit(said)
        _rounds(fed)
        before = _ends(fed.ledgers["a"], first.evidence_id)
        fed.clock.advance(20 * DAY)
        fed.ledgers["b"].submit(said)
        _rounds(fed)
        with fed.ledgers["a"].repo.read() as tx:
            held = tx.confirmations([first.evidence_id])
        assert [c.signer for c in held] == ["b"]
        assert _ends(fed.ledgers["a"], first.evidence_id) == before
        assert _ends(fed.ledgers["b"], first.evidence_id) != before
    finally:
        fed.close()


def test_forged_and_future_confirmations_are_refused(fed: Federation) -> None:
    """A confirmation whose signature does not verify, one naming another signer than the
    key that signed it, and one dated beyond the receiver's clock allowance are refused,
    counted, and move nothing."""
    said = Submission(*KEY, "Porto", "llm_generated", "gpt", 0.5, 0.9, fed.clock.now())
    first = fed.ledgers["a"].submit(said)
    _rounds(fed)
    before = _ends(fed.ledgers["c"], first.evidence_id)
    now = fed.clock.advance(DAY)
    honest = Confirmation(first.evidence_id, "b", now, 0)
    assert fed.ledgers["b"].offer_confirmations([""]) == []  # b has taken no restatement
    b_sign = fed.ledgers["b"].serving.sign
    assert b_sign is not None
    good = replace(honest, signature=b_sign(confirmation_payload(honest)))
    forged = replace(good, confirmed_at=now + 1)  # altered after signing
    renamed = replace(good, signer="a")  # b's signature, a's name
    future = replace(honest, confirmed_at=now + DAY)
    future = replace(future, signature=b_sign(confirmation_payload(future)))
    received = fed.ledgers["c"].receive("b", None, [], [], [], (), (), [forged, renamed, future])
    assert received.accepted == 0
    assert len(received.rejected) == 3
    assert _ends(fed.ledgers["c"], first.evidence_id) == before
    # The control: the same confirmation, honestly signed, is taken and counts.
    assert fed.ledgers["c"].receive("b", None, [], [], [], (), (), [good]).accepted == 1
    assert _ends(fed.ledgers["c"], first.evidence_id) == expiry(
        fed.ledgers["c"].evidence_by_ids([first.evidence_id])[first.evidence_id],
        fed.ledgers["c"].policy,
    )
    assert _ends(fed.ledgers["c"], first.evidence_id) != before


def test_retention_purges_on_one_member_and_the_tombstone_reaches_all() -> None:
    """With retain_decayed_days = 10, a's decay job purges a claim expired more than ten
    days ago; its hash tombstone reaches b (whose own job has not run), which erases its
    copy too."""
    fed = Federation(["a", "b"], policy=replace(Policy(), retain_decayed_days=10))
    try:
        said = Submission(*KEY, "Porto", "llm_generated", "gpt", 0.5, 0.8, fed.clock.now())
        first = fed.ledgers["a"].submit(said)  # 0.8 halves to the 0.4 floor in 30 days
        _rounds(fed)
        assert fed.ledgers["b"].evidence_by_ids([first.evidence_id])
        fed.clock.advance(45 * DAY)
        assert fed.ledgers["b"].evidence_by_ids([first.evidence_id])  # expired, still held
        assert fed.ledgers["a"].run_decay().tombstoned == 1
        _rounds(fed)
        for n in ("a", "b"):
            assert fed.ledgers[n].evidence_by_ids([first.evidence_id]) == {}, n
            assert fed.ledgers[n].counts().erasures == 1, n
    finally:
        fed.close()
