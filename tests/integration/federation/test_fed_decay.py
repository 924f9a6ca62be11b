"""Decay across a real fleet over mTLS (specification §6, §9): three `factnode serve`
processes whose clocks a test moves together (libfaketime, reading its offset from a file),
so that claims reach their expiries in seconds. The same evidence and restatements give
every member the same expiry, the same tallies, the same DECAYED change and the same
answers; a restatement taken by one member revives the claim on all."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from _fednet import BELIEVED, Federation, StartFederation, event_time, key, unique_ns

from factnode.api.v1 import factnode_pb2 as pb
from factnode.core import MICROS_PER_DAY

FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
NODES = ["a", "b", "c"]
DAY_SECONDS = 86_400

pytestmark = pytest.mark.skipif(
    not FAKETIME_LIB.exists(), reason="libfaketime is not installed (apt-get install faketime)"
)


class FleetClock:
    """The offset every node's libfaketime reads (re-read at most once a second)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.set(0)

    def set(self, days: int) -> None:
        self.path.write_text(f"+{days * DAY_SECONDS}\n")
        time.sleep(0.2)  # the nodes read the file at every clock call (FAKETIME_NO_CACHE)


@pytest.fixture(scope="module")
def fleet(start_federation: StartFederation, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    clock = FleetClock(tmp_path_factory.mktemp("clock") / "offset")

    def configure(fed: Federation) -> None:
        for node in fed:
            node.extra_env = {
                "LD_PRELOAD": str(FAKETIME_LIB),
                "FAKETIME_TIMESTAMP_FILE": str(clock.path),
                "FAKETIME_NO_CACHE": "1",
            }
            # Each member's relayed evidence counts up to agent_observed here, so a member's
            # restatement of an llm_generated claim counts on every member.
            node.peer_max_anchor = {p.node_id: "agent_observed" for p in node.peers}

    fed = start_federation(NODES, configure=configure)
    return fed, clock


def _version(history: pb.GetHistoryResponse | None) -> pb.VersionHistory:
    assert history is not None
    [version] = history.versions
    return version


def test_a_restatement_on_one_member_revives_the_claim_on_every_member(fleet) -> None:  # type: ignore[no-untyped-def]
    fed, clock = fleet
    k = key(unique_ns("decay"), "ana", "lives_in")
    when = event_time()
    said = {"source": "gpt", "attribution": "llm_generated", "confidence": 0.9, "valid_from": when}
    # llm_generated 0.9 at a 30-day half-life holds 30 x log2(0.9 / 0.4), about 35.1 days.
    fed["a"].submit(k, "Porto", **said)
    fed.sync_until_quiet()
    ends = {n: _version(fed[n].history(k)).intervals[-1].end.ToMicroseconds() for n in NODES}
    assert len(set(ends.values())) == 1, ends
    first_end = ends["a"]

    clock.set(20)
    again = fed["b"].submit(k, "Porto", **said)
    assert again.decision.outcome == pb.OUTCOME_DUPLICATE
    assert "restated" in again.decision.detail, again.decision.detail
    fed.sync_until_quiet()
    ends = {n: _version(fed[n].history(k)).intervals[-1].end.ToMicroseconds() for n in NODES}
    assert len(set(ends.values())) == 1, ends
    assert ends["a"] - first_end > 19 * MICROS_PER_DAY  # counted from b's restatement

    clock.set(40)  # past the first expiry, before the confirmed one
    tallies = {}
    for n in NODES:
        b = fed[n].belief(k)
        assert b is not None and (b.object, b.state) == ("Porto", BELIEVED), n
        tallies[n] = sorted((t.object, t.weight, t.share_milli, tuple(t.voters)) for t in b.tallies)
    assert tallies["a"] and tallies["a"] == tallies["b"] == tallies["c"], tallies

    clock.set(60)  # past both
    for n in NODES:
        assert fed[n].belief(k) is None, n
        version = _version(fed[n].history(k))
        assert version.status == pb.VERSION_STATUS_DECAYED
        assert version.decayed_at.ToMicroseconds() == ends["a"]
        # The node's own hourly job may have run when its clock jumped: then this one finds
        # nothing left to record. Either way the log holds exactly one DECAYED change.
        fed[n].admin.RunDecay(pb.RunDecayRequest(), timeout=30)
        logged = fed[n].facts.ListDecisions(pb.ListDecisionsRequest(key=k), timeout=30)
        decayed = [d for d in logged.decisions if d.outcome == pb.OUTCOME_DECAYED]
        assert [d.rule for d in decayed] == ["decay"], n
