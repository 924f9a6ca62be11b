"""What every servicer shares: the node's context, the change signal and conversions
that need more than one ledger read (tallies)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TypeVar

from factnode import _wire as wire
from factnode.api.v1 import factnode_pb2 as pb
from factnode.config import DEFAULT_WATCH_STREAMS_PER_CLIENT as DEFAULT_STREAMS
from factnode.core import Decision, Key, Outcome
from factnode.core.consensus import Tally
from factnode.core.story import BelievedAgain
from factnode.federation.members import Roster
from factnode.federation.sync import Syncer
from factnode.ledger import Belief, Explanation, Ledger, NotFound
from factnode.metrics import Metrics
from factnode.server._background import Background
from factnode.server._errors import ResourceExhausted
from factnode.server._group_commit import GroupCommit

T = TypeVar("T")

log = logging.getLogger("factnode.server")

STREAM_BATCH = 256  # SubmitFacts commits in batches of this many valid items
WATCH_POLL_SECONDS = 1.0


async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    # The store is synchronous; keep it off the event loop.
    return await asyncio.to_thread(fn, *args, **kwargs)


class Changes:
    """One notifier for every WatchBeliefs stream of this process.

    This node's commits poke it; so does, while streams wait, a timer every `poll_seconds`
    (the only way to hear of writes made through another replica on the same PostgreSQL
    store). On a poke it reads the head of the belief-change log once, and only when the
    head moved does it wake the waiting streams, however many there are: an idle stream
    costs no reads and no wake-ups, and a thousand of them cost one read per poke."""

    def __init__(self, head: Callable[[], int], poll_seconds: float = WATCH_POLL_SECONDS) -> None:
        self._read_head = head
        self.poll_seconds = poll_seconds
        self.head = 0  # the latest change position this notifier has read
        self.waiting = 0  # streams waiting for the head to move
        self.wakeups = 0  # times a waiting stream was woken (a stream's wait that returned)
        self.reads = 0  # times the head was read
        self._poked = asyncio.Event()
        self._moved = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Reads the head and starts following it; call on the serving event loop."""
        self._loop = asyncio.get_running_loop()
        self.head = await run(self._read_head)
        self.reads += 1
        self._task = asyncio.create_task(self._follow())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def notify(self) -> None:
        """Something may have changed a served belief (call on the event loop)."""
        self._poked.set()

    def notify_threadsafe(self) -> None:
        """As `notify`, from any thread (the ledger's commit observers run in the writer's)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._poked.set)

    async def _follow(self) -> None:
        while True:
            timeout = self.poll_seconds if self.waiting else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poked.wait(), timeout)
            self._poked.clear()
            if not self.waiting:
                continue  # nobody to wake: a stream reads the log itself before it waits
            try:
                head = await run(self._read_head)
            except Exception as exc:  # a store outage must not end every watch for good
                log.warning("reading the belief-change log failed: %s", type(exc).__name__)
                await asyncio.sleep(self.poll_seconds)
                continue
            self.reads += 1
            if head > self.head:
                self.head = head
                moved, self._moved = self._moved, asyncio.Event()
                moved.set()

    async def wait_beyond(self, seen: int) -> None:
        """Returns once the change log's head is past `seen` (a head read before the stream's
        own last read of the log, so no change committed since can be missed)."""
        self.waiting += 1
        if self.waiting == 1:
            self._poked.set()  # start the poll timer, which sleeps while nobody waits
        try:
            while self.head <= seen:
                await self._moved.wait()
        finally:
            self.waiting -= 1
        self.wakeups += 1


class StreamQuota:
    """How many streams each client may hold open at once."""

    def __init__(self, most: int) -> None:
        self.most = most
        self._open: dict[object, int] = {}

    @contextlib.contextmanager
    def hold(self, client: object, describe: str) -> Iterator[None]:
        """Holds one of `client`'s streams; RESOURCE_EXHAUSTED beyond `most`."""
        held = self._open.get(client, 0)
        if held >= self.most:
            raise ResourceExhausted(
                f"{describe} already holds {held} WatchBeliefs streams "
                f"(at most {self.most}: watch_streams_per_client)"
            )
        self._open[client] = held + 1
        try:
            yield
        finally:
            left = self._open[client] - 1
            if left:
                self._open[client] = left
            else:
                del self._open[client]


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
    watch_quota: StreamQuota = field(default_factory=lambda: StreamQuota(DEFAULT_STREAMS))
    # A SQLite file: its reads are local and never wait for a writer in WAL mode (`read`).
    inline_reads: bool = False
    # The federation's members as this node knows them; None when the node does not federate.
    roster: Roster | None = None
    # The largest message the server sends (`max_message_bytes`): SubmitFacts' reply too.
    max_reply_bytes: int = 4 * 1024 * 1024
    # This process among the node's replicas (specification §10), and its background work's lease.
    replica: str = ""
    background: Background | None = None
    # Read again after an import: a restored node serves no data until its first round.
    restored: Callable[[], None] = lambda: None

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
        msg.consensus_threshold.CopyFrom(wire.threshold_pb(threshold))
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


def believed_again_by(ledger: Ledger, key: Key, decision: Decision) -> BelievedAgain | None:
    """The version a retraction (`decision`) made believed again, as Explain tells it, or
    None where it made none (Explain's story names the retractions that ended its rival)."""
    if decision.outcome is not Outcome.RETRACTED or not decision.evidence_id:
        return None
    try:
        again = ledger.explain(key).believed_again
    except NotFound:
        return None
    if again is None or decision.evidence_id not in again.ended_by:
        return None
    return again
