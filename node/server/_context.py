"""What every servicer shares: the node's context, the change signal and conversions
that need more than one ledger read (tallies)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeVar

from factnode import _wire as cv
from factnode.api.v1 import factnode_pb2 as pb
from factnode.core import Key
from factnode.core.consensus import Tally
from factnode.federation.members import Roster
from factnode.federation.sync import Syncer
from factnode.ledger import Belief, Explanation, Ledger, NotFound
from factnode.metrics import Metrics
from factnode.server._group_commit import GroupCommit

T = TypeVar("T")

STREAM_BATCH = 256  # SubmitFacts commits in batches of this many valid items
WATCH_POLL_SECONDS = 1.0


async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    # The store is synchronous; keep it off the event loop.
    return await asyncio.to_thread(fn, *args, **kwargs)


class Changes:
    """Wakes belief watchers when this node writes."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout: float) -> None:
        event = self._event
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)


@dataclass
class NodeContext:
    """What every servicer shares."""

    ledger: Ledger
    metrics: Metrics
    changes: Changes
    listen: str
    database: str
    writer: GroupCommit
    syncer: Syncer | None = None
    # A SQLite file: its reads are local and never wait for a writer in WAL mode (`read`).
    inline_reads: bool = False
    # The federation's members as this node knows them; None when the node does not federate.
    roster: Roster | None = None
    # The largest message the server sends (`max_message_bytes`): SubmitFacts' reply too.
    max_reply_bytes: int = 4 * 1024 * 1024

    async def read(self, fn: Callable[..., T], *args: Any, bounded: bool = True) -> T:
        """A bounded read (`bounded`: one key, a page of at most the default size) on a SQLite
        file runs on the event loop; any other in a thread. SQLite gives the GIL back at
        every row, so a read in a thread spent more handing it over, to a busy loop, than
        reading (as-of GetBelief and ListBeliefs, bench/README.md); such a read holds the
        loop for a few milliseconds (longer for a key with very many versions or values)."""
        if self.inline_reads and bounded:
            return fn(*args)
        return await run(fn, *args)


def with_peer_tallies(
    msg: pb.Belief, belief: Belief, explanation: Explanation | None, threshold: Fraction
) -> pb.Belief:
    """`msg` with the tallies a served belief carries: every version's, only where a peer has
    voted, and then the threshold they are measured against."""
    result = explanation.tally if explanation is not None else None
    if explanation is not None and result is not None and result.peer_voted:
        msg.tallies.extend(version_tallies(belief, explanation, result))
        msg.consensus_threshold.CopyFrom(cv.threshold_pb(threshold))
    return msg


def version_objects(belief: Belief, explanation: Explanation) -> dict[str, str]:
    """The value of each version this node holds for the key: the versions local arbitration
    compared (the winner and those it beats) and the served one."""
    local = explanation.local_comparisons
    objects = {c.version_id: c.object for c in local}
    objects.setdefault(belief.version_id, belief.object)
    if local:
        objects.setdefault(local[0].winner.version_id, local[0].winner.object)
    return objects


def version_tallies(
    belief: Belief, explanation: Explanation, result: Tally | None
) -> list[pb.VersionTally]:
    """Every version of a key: the local winner and the versions it beats, with the votes
    behind each (weight, share, voters) where the key has votes."""
    local_winner = (
        explanation.local_comparisons[0].winner.version_id
        if explanation.local_comparisons
        else belief.version_id
    )
    objects = version_objects(belief, explanation)
    rules = {c.version_id: c.rule.value for c in explanation.local_comparisons}
    votes = {t.version_id: t for t in result.versions} if result and result.peer_voted else {}
    order = [
        local_winner,
        *(v for v in objects if v != local_winner),
        *(v for v in votes if v not in objects),
    ]
    out = []
    for vid in order:
        t = votes.get(vid)
        out.append(
            pb.VersionTally(
                version_id=vid,
                object=objects.get(vid, ""),
                weight=t.weight if t else 0,
                share_milli=result.share_milli(vid) if t and result else 0,
                voters=list(t.voters) if t else [],
                local_belief=vid == local_winner,
                local_rule=rules.get(
                    vid, explanation.belief.rule.value if explanation.belief else ""
                ),
            )
        )
    return out


def maybe_belief(ledger: Ledger, key: Key) -> Belief | None:
    try:
        return ledger.belief(key)
    except NotFound:
        return None
