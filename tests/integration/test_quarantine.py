"""Quarantine on open (issue 41, finding 9): evidence a SQLite store holds from before the
text rule is quarantined when the node opens the store: counted and listed by status,
never offered to peers again, and removed by an operator's erasure by id."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from _console import OPERATOR, InProcessNode

from factnode.api.v1 import factnode_pb2 as pb
from factnode.cli import _output as out
from factnode.core import Evidence, Key, Policy, Submission, ids
from factnode.federation._index import index_of
from factnode.ledger import Ledger
from factnode.metrics import Metrics
from factnode.store import SqlRepository
from factnode.testing import FakeClock, Federation

NS = "user:ana"
NUL_SUBJECT = "a\x00b"


def _before_the_rule(db: Path, honest: bool = True) -> Evidence:
    """Writes a fact with a NUL in its subject into a SQLite store, as a node before the
    text rule did (beside an honest one, unless told not to); returns the bad evidence."""
    repo = SqlRepository(f"sqlite:///{db}")
    try:
        ledger = Ledger(repo, Policy(), "old", FakeClock())
        if honest:
            ledger.submit(Submission(NS, "ana", "lives_in", "Porto", "user_stated", "ana"))
        good = ledger.evidence_of(Submission(NS, "bob", "lives_in", "Lisbon", "user_stated", "b"))
        key = Key(NS, NUL_SUBJECT, "lives_in")
        bad = replace(
            good,
            key=key,
            version_id=ids.version_id(key, good.object),
            evidence_id=ids.evidence_id(
                key, good.object, good.attribution, good.source, good.valid_from,
                good.worth_milli, good.confidence_milli, None, None,
            ),
        )  # fmt: skip
        ledger.ingest([(bad, None)])
    finally:
        repo.close()
    return bad


def test_opening_a_store_quarantines_what_the_rule_refuses(tmp_path: Path) -> None:
    """A ledger opened on the store holds the bad evidence quarantined, naming its field;
    it is in no digest and no offer, while the honest evidence is."""
    bad = _before_the_rule(tmp_path / "old.db")
    repo = SqlRepository(f"sqlite:///{tmp_path / 'old.db'}")
    try:
        ledger = Ledger(repo, Policy(), "old", FakeClock())
        [q] = ledger.quarantined_now()
        assert (q.evidence_id, q.field) == (bad.evidence_id, "subject")
        assert "NUL" in q.reason
        _, offered, votes = ledger.offer({"evidence": [""], "all_votes": [""], "votes": [""]})
        assert [e.key.subject for e in offered] == ["ana"]
        assert all(v.key.subject != NUL_SUBJECT for v in votes)
        assert ledger.counts().evidence == 2  # held, readable, just never offered
        index = index_of(ledger)
        assert index.evidence.get(bad.evidence_id) is None
        assert index.evidence.get(offered[0].evidence_id) is not None
    finally:
        repo.close()


async def test_a_quarantined_item_is_never_offered_to_a_peer(tmp_path: Path) -> None:
    """A node opened on such a store syncs with a peer: the peer never receives the bad
    item (nothing refused, every round), and gets the honest one."""
    _before_the_rule(tmp_path / "old.db", honest=False)
    fed = Federation(
        ["old", "peer"],
        repositories={
            "old": SqlRepository(f"sqlite:///{tmp_path / 'old.db'}"),
            "peer": SqlRepository(f"sqlite:///{tmp_path / 'peer.db'}"),
        },
    )
    metrics = Metrics()
    fed.ledgers["peer"].on_refused(metrics.peer_refused)
    try:
        fed.ledgers["old"].submit(Submission(NS, "ana", "lives_in", "Porto", "user_stated", "a"))
        results = []
        for _ in range(3):
            for n in ("old", "peer"):
                results.extend(await fed.syncers[n].sync_round(force=True))
        served = fed.ledgers["peer"].served(Key(NS, "ana", "lives_in"))[0]
        peer_counts = fed.ledgers["peer"].counts()
    finally:
        fed.close()
    assert all(r.ok and not r.rejected for r in results), [r.rejected for r in results]
    assert metrics.registry.get_sample_value(
        "factnode_peer_items_refused_total", {"kind": "evidence"}
    ) in (None, 0.0)
    assert served is not None and served.object == "Porto"
    assert peer_counts.evidence == 1


def test_status_lists_the_quarantine_and_an_erasure_removes_it(tmp_path: Path) -> None:
    """A served node on such a store counts and lists the item in GetStatus (and so in
    `factnode status` and its --json); an operator's erasure by id removes it."""
    data = tmp_path / "node"
    bad = _before_the_rule(tmp_path / "old.db")
    node = InProcessNode(data, database_url=f"sqlite:///{tmp_path / 'old.db'}")
    try:
        with node.client(OPERATOR) as client:
            status = client.status()
            assert status.counts["quarantined"] == 1
            [(evidence_id, key, field, _)] = status.quarantined
            assert (evidence_id, key.subject, field) == (bad.evidence_id, NUL_SUBJECT, "subject")
            client.erase("quarantined: NUL from before the rule", evidence_id=bad.evidence_id)
            after = client.status()
            assert after.quarantined == () and "quarantined" not in after.counts
    finally:
        node.close()


def test_the_status_text_names_the_quarantine_and_the_remedy() -> None:
    """`factnode status` prints the count, each item and how to remove it."""
    reply = pb.GetStatusResponse(node_id="n", counts=pb.StatusCounts(quarantined=1))
    reply.quarantined.add(
        evidence_id="e" * 32, key=pb.Key(namespace=NS, subject=NUL_SUBJECT, predicate="p"),
        field="subject", reason="must not contain NUL (U+0000)",
    )  # fmt: skip
    text = out.status(reply)
    assert "quarantined 1" in text and "e" * 32 in text
    assert "factnode erase --evidence ID" in text
    assert "\x00" not in text
