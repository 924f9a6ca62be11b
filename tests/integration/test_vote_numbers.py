"""A voter never contradicts itself by losing its disk (specification §7): a node whose store was
emptied, or restored from an export older than some of its votes, numbers its next votes above
every vote it signed before, though its store no longer says how far it had counted. (A
repeated number with other content is an equivocation to its peers, who then count it zero
on the key and refuse its later votes there: tests/integration/federation/
test_fed_restore_votes.py shows the fleet it kept from going quiet.)"""

from __future__ import annotations

import io

from factnode.core import MICROS_PER_DAY, Key, Submission
from factnode.ledger import Ledger
from factnode.testing import FakeClock, memory_ledger

NODE = "node-votes"
ANA, BO, DI = (Key("votes:numbers", s, "lives_in") for s in ("ana", "bo", "di"))
HOUR = 3_600_000_000


def _own_votes(ledger: Ledger) -> dict[Key, int]:
    """The number of this node's vote on each key it votes on."""
    with ledger.repo.read() as tx:
        held = tx.votes([ANA, BO, DI])
    return {k: v.seq for k, vs in held.items() for v in vs if v.voter == NODE}


def _story(ledger: Ledger, clock: FakeClock) -> bytes:
    """Votes on ana and bo, an export, then votes again on ana (new evidence) and on di:
    the export's replay casts fewer votes than the node signed."""
    ledger.submit(Submission(*ANA, "Oslo", "agent_observed", "agent:a"))
    ledger.submit(Submission(*BO, "Bergen", "agent_observed", "agent:a"))
    export = b"".join(ledger.export())
    clock.advance(HOUR)
    ledger.submit(Submission(*ANA, "Oslo", "user_stated", "user:ana"))
    ledger.submit(Submission(*DI, "Lima", "agent_observed", "agent:a"))
    return export


def test_a_restore_numbers_the_votes_it_replays_above_every_vote_signed_before() -> None:
    """Restored a day later from an export taken before its last votes, the node replays the
    export by a clock running at the export's times, yet numbers each vote it casts above the
    highest number it signed before the restore."""
    clock = FakeClock()
    before = memory_ledger(clock=clock, node_id=NODE)
    export = _story(before, clock)
    signed = _own_votes(before)
    assert signed.keys() == {ANA, BO, DI}

    clock.advance(MICROS_PER_DAY)
    after = memory_ledger(clock=clock, node_id=NODE)
    after.restore(io.BytesIO(export))
    replayed = _own_votes(after)
    assert replayed.keys() == {ANA, BO}
    assert min(replayed.values()) > max(signed.values()), (signed, replayed)
    after.submit(Submission(*DI, "Lima", "agent_observed", "agent:a"))
    assert _own_votes(after)[DI] > max(replayed.values())


def test_an_emptied_store_numbers_its_votes_above_those_it_signed() -> None:
    """Started again on an empty store an hour later, the node told its facts again votes on
    them with numbers above every one it signed before; its own store's counter still orders
    what it casts next, though its clock is then set back."""
    clock = FakeClock()
    before = memory_ledger(clock=clock, node_id=NODE)
    _story(before, clock)
    signed = _own_votes(before)

    clock.advance(HOUR)
    again = memory_ledger(clock=clock, node_id=NODE)
    again.submit(Submission(*BO, "Bergen", "agent_observed", "agent:a"))
    again.submit(Submission(*ANA, "Oslo", "agent_observed", "agent:a"))
    now = _own_votes(again)
    assert min(now.values()) > max(signed.values()), (signed, now)
    assert now[ANA] > now[BO]
    clock.advance(-MICROS_PER_DAY)
    again.submit(Submission(*DI, "Lima", "agent_observed", "agent:a"))
    assert _own_votes(again)[DI] > now[ANA]
