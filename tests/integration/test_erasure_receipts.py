"""Erasure receipts among in-process members with real certificates (specification §6): each
member that applies an erasure signs a receipt that reaches every member; a member cut off
is waited for until it confirms; receipts survive an export and import; a restored member
that erases again what a backup brought back signs a new receipt."""

from __future__ import annotations

import datetime as dt
import io

from factnode.core import Submission
from factnode.core.receipts import Coverage
from factnode.testing import FakeClock, Federation, memory_ledger

NS = "user:ana"


def _members(fed: Federation, node: str) -> dict[str, bool]:
    """The members `node`'s roster knows, by whether each is revoked (as the node's
    AdminService asks it)."""
    roster = fed.rosters[node]
    assert roster is not None
    return {m.node_id: m.revoked for m in roster.members(dt.datetime.now(dt.UTC))}


def _status(fed: Federation, node: str, erasure_id: str) -> Coverage:
    return fed.ledgers[node].reading.erasure(erasure_id, _members(fed, node)).coverage


def _coverage(fed: Federation, node: str, erasure_id: str) -> tuple[str, ...]:
    """Each member's receipt as `member:removed`, and `?member` for each waited for."""
    c = _status(fed, node, erasure_id)
    return (*(f"{r.node}:{r.removed}" for r in c.confirmed), *(f"?{n}" for n in c.waiting))


async def test_every_member_confirms_an_erasure_with_a_signed_receipt() -> None:
    fed = Federation(["a", "b", "c"])
    try:
        a = fed.ledgers["a"]
        a.submit(Submission(NS, "ana", "lives_in", "Porto", "user_stated", "chat"))
        a.submit(Submission(NS, "ana", "works_at", "Acme", "user_stated", "chat"))
        for _ in range(2):
            await fed.round()
        done = a.erase(subject=(NS, "ana"), operator="dpo", reason="request")
        # Before any round only the member that erased has confirmed.
        assert _coverage(fed, "a", done.erasure_id) == ("a:2", "?b", "?c")
        for _ in range(2):
            await fed.round()
        for node in fed.ledgers:
            c = _status(fed, node, done.erasure_id)
            assert c.complete, c.summary()
            assert sorted(f"{r.node}:{r.removed}" for r in c.confirmed) == ["a:2", "b:2", "c:2"]
            # Every receipt but the holder's own came signed by the member it names.
            assert all(r.signature for r in c.confirmed if r.node != node)
    finally:
        fed.close()


async def test_a_member_cut_off_is_waited_for_then_confirms() -> None:
    fed = Federation(["a", "b", "c"])
    try:
        a = fed.ledgers["a"]
        a.submit(Submission(NS, "ana", "lives_in", "Porto", "user_stated", "chat"))
        await fed.round()
        fed.partition(["a", "b"], ["c"])
        done = a.erase(subject=(NS, "ana"), operator="dpo", reason="request")
        for _ in range(3):
            await fed.round()
        assert _coverage(fed, "a", done.erasure_id) == ("a:1", "b:1", "?c")
        assert _status(fed, "a", done.erasure_id).summary() == (
            "confirmed by 2 of 3 members; waiting: c"
        )
        fed.heal()
        for _ in range(3):
            await fed.round()
        assert sorted(_coverage(fed, "a", done.erasure_id)) == ["a:1", "b:1", "c:1"]
    finally:
        fed.close()


async def test_a_member_that_held_nothing_confirms_with_zero() -> None:
    """A member that never held the erased evidence still applies the tombstone and says so:
    zero pieces removed is an answer."""
    fed = Federation(["a", "b"])
    try:
        a = fed.ledgers["a"]
        fed.partition(["a"], ["b"])
        a.submit(Submission(NS, "ana", "lives_in", "Porto", "user_stated", "chat"))
        done = a.erase(subject=(NS, "ana"), operator="dpo", reason="request")
        fed.heal()
        for _ in range(2):
            await fed.round()
        assert sorted(_coverage(fed, "a", done.erasure_id)) == ["a:1", "b:0"]
    finally:
        fed.close()


async def test_receipts_survive_an_export_and_a_restored_member_confirms_again() -> None:
    fed = Federation(["a", "b"])
    try:
        a, b = fed.ledgers["a"], fed.ledgers["b"]
        a.submit(Submission(NS, "ana", "lives_in", "Porto", "user_stated", "chat"))
        await fed.round()
        backup = b"".join(b.export())  # b's backup from before the erasure
        done = a.erase(subject=(NS, "ana"), operator="dpo", reason="request")
        for _ in range(2):
            await fed.round()
        after = b"".join(b.export())
        # An export made after the erasure carries both receipts into a fresh store.
        copy = memory_ledger(clock=FakeClock(fed.clock.now()), node_id="b")
        copy.restore(io.BytesIO(after))
        kept = copy.reading.erasure(done.erasure_id, {"a": False}).coverage
        assert sorted(f"{r.node}:{r.removed}" for r in kept.confirmed) == ["a:1", "b:1"]
        first = {r.node: r for r in _status(fed, "b", done.erasure_id).confirmed}["b"]

        # b restored from the backup made before the erasure: it holds Porto again and no
        # tombstone, until a round with a brings the erasure back; b erases again and
        # signs a new receipt, which reaches a.
        a_now = b"".join(a.export())
        fed.close()
        fed = Federation(["a", "b"], clock=FakeClock(fed.clock.now()))
        restored = fed.ledgers["b"]
        restored.restore(io.BytesIO(backup))
        fed.ledgers["a"].restore(io.BytesIO(a_now))
        assert restored.counts().evidence == 1
        fed.clock.advance(5_000_000)
        for _ in range(3):
            await fed.round()
        assert restored.counts().evidence == 0
        again = {r.node: r for r in _status(fed, "a", done.erasure_id).confirmed}
        assert again["b"].removed == 1 and again["b"].applied_at > first.applied_at
    finally:
        fed.close()
