"""The client side of a campaign: operations drawn from the seed run against random nodes,
and every call recorded (invoked, ok / fail / unknown, what the node acknowledged)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
from _schedule import EVENT_STEPS, MULTI, Draft, Key, Workload
from google.protobuf.timestamp_pb2 import Timestamp

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.core import Key as CoreKey
from factnode.core import ids

OP_TIMEOUT = 4.0  # seconds for one client call
# A refusal that says nothing was done; any other error leaves the outcome unknown.
DEFINITE = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.ALREADY_EXISTS,
    }
)


@dataclass
class Op:
    """One client call: what was asked, of whom, when, and how it ended."""

    index: int
    client: int
    kind: str
    node: str
    key: Key | None
    args: dict[str, Any]
    invoked: float
    completed: float | None = None
    status: str = "pending"  # ok | fail | unknown | skipped
    result: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        key = "/".join(self.key) if self.key else "-"
        end = f"{self.completed:7.2f}" if self.completed is not None else "      ?"
        args = " ".join(f"{k}={v}" for k, v in self.args.items() if v is not None)
        res = " ".join(f"{k}={v}" for k, v in self.result.items())
        return (
            f"#{self.index:<4} c{self.client} {self.invoked:7.2f}-{end} {self.node:<3} "
            f"{self.kind:<13} {key:<24} {args} -> {self.status} {res}"
        )


def event_base() -> datetime:
    """The campaign's latest event time: the start of the previous UTC hour."""
    return datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)


def _ts(when: datetime) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(when)
    return ts


def _key(k: Key) -> pb.Key:
    return pb.Key(namespace=k[0], subject=k[1], predicate=k[2])


class History:
    """Every call of a campaign, in the order invoked; safe to append from several threads."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.ops: list[Op] = []
        self._lock = threading.Lock()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def invoke(self, client: int, draft: Draft, args: dict[str, Any]) -> Op:
        with self._lock:
            op = Op(len(self.ops), client, draft.kind, draft.node, draft.key, args, self.now())
            self.ops.append(op)
        return op

    def ended(self, op: Op, status: str, **result: Any) -> None:
        op.completed = self.now()
        op.status = status
        op.result = result


class Client:
    """One client thread: its workload's operations, one after another, until stopped."""

    def __init__(
        self,
        client: int,
        seed: int,
        ports: dict[str, int],
        history: History,
        base: datetime,
        pace: float,
    ) -> None:
        self.client = client
        self.workload = Workload(seed, client, sorted(ports))
        self.history = history
        self.base = base
        self.pace = pace
        self.seed = seed
        self.channels = {n: grpc.insecure_channel(f"127.0.0.1:{p}") for n, p in ports.items()}
        self.submitted: list[Op] = []  # this client's submissions, for erase-id to name
        self.errors: list[str] = []  # calls that ended in something other than an RpcError
        self.count = 0

    def close(self) -> None:
        for ch in self.channels.values():
            ch.close()

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            draft = self.workload.next()
            try:
                self.step(draft)
            except Exception as exc:  # anything but an RpcError: a closed channel
                # The call's outcome is unknown; it stays "pending", never acknowledged.
                self.errors.append(f"{draft.kind} on {draft.node}: {exc!r}")
            stop.wait(self.pace)

    def when(self, step: int | None) -> datetime | None:
        return None if step is None else self.base - timedelta(minutes=10 * step)

    def step(self, d: Draft) -> None:
        self.count += 1
        facts = pb_grpc.FactServiceStub(self.channels[d.node])
        admin = pb_grpc.AdminServiceStub(self.channels[d.node])
        review = pb_grpc.ReviewServiceStub(self.channels[d.node])
        handler = {
            "submit": lambda: self._submit(d, facts),
            "read": lambda: self._read(d, facts),
            "retract": lambda: self._retract(d, facts),
            "erase-id": lambda: self._erase(d, admin),
            "erase-key": lambda: self._erase(d, admin),
            "erase-subject": lambda: self._erase(d, admin),
            "resolve": lambda: self._resolve(d, review),
        }[d.kind]
        handler()

    def _call(self, op: Op, call: Any) -> Any:
        """Runs `call`; records fail/unknown from its error and returns None, or its reply."""
        try:
            return call()
        except grpc.RpcError as err:
            code = err.code()
            status = "fail" if code in DEFINITE else "unknown"
            self.history.ended(op, status, code=code.name)
            return None

    def _submit(self, d: Draft, facts: pb_grpc.FactServiceStub) -> None:
        assert d.key is not None and d.value is not None
        source = f"client-{self.seed}-{self.client}-{self.count}"
        fact = pb.FactInput(
            key=_key(d.key),
            object=d.value,
            anchor=d.anchor,
            source=source,
            worth=d.worth,
            confidence=d.confidence,
        )
        when = self.when(d.step)
        if when is not None:
            fact.valid_from.CopyFrom(_ts(when))
        args = {"value": d.value, "anchor": d.anchor, "worth": d.worth, "confidence": d.confidence}
        args |= {"step": d.step, "source": source}
        op = self.history.invoke(self.client, d, args)
        self.submitted.append(op)
        reply = self._call(
            op, lambda: facts.SubmitFact(pb.SubmitFactRequest(fact=fact), timeout=OP_TIMEOUT)
        )
        if reply is not None:
            outcome = pb.Outcome.Name(reply.decision.outcome).removeprefix("OUTCOME_")
            at = reply.decision.decided_at.ToMicroseconds()
            self.history.ended(op, "ok", evidence=reply.evidence_id, outcome=outcome, at=at)

    def _read(self, d: Draft, facts: pb_grpc.FactServiceStub) -> None:
        assert d.key is not None
        op = self.history.invoke(self.client, d, {})
        try:
            b = facts.GetBelief(pb.GetBeliefRequest(key=_key(d.key)), timeout=OP_TIMEOUT)
        except grpc.RpcError as err:
            if err.code() is grpc.StatusCode.NOT_FOUND:
                self.history.ended(op, "ok", values=())
                return
            self.history.ended(
                op, "fail" if err.code() in DEFINITE else "unknown", code=err.code().name
            )
            return
        if d.key[2] == MULTI:
            values = tuple(sorted((v.object, v.evidence.evidence_id) for v in b.believed_values))
        else:
            values = ((b.object, b.evidence.evidence_id),) if b.object else ()
        state = pb.BeliefState.Name(b.state).removeprefix("BELIEF_STATE_")
        self.history.ended(op, "ok", values=values, state=state, rule=b.rule)

    def _retract(self, d: Draft, facts: pb_grpc.FactServiceStub) -> None:
        assert d.key is not None
        source = f"client-{self.seed}-{self.client}-{self.count}"
        req = pb.RetractRequest(
            key=_key(d.key), reason="campaign", anchor=d.anchor, source=source, confidence=0.9
        )
        if d.key[2] == MULTI:
            req.object = d.value or ""
        step = None if d.step is None else min(d.step, EVENT_STEPS - 1)
        when = self.when(step)
        if when is not None:
            req.at.CopyFrom(_ts(when + timedelta(minutes=5)))
        args = {"value": req.object if req.HasField("object") else None, "anchor": d.anchor}
        args |= {"step": step, "source": source}
        op = self.history.invoke(self.client, d, args)
        reply = self._call(op, lambda: facts.Retract(req, timeout=OP_TIMEOUT))
        if reply is not None:
            outcome = pb.Outcome.Name(reply.decision.outcome).removeprefix("OUTCOME_")
            at = reply.decision.decided_at.ToMicroseconds()
            self.history.ended(
                op, "ok", evidence=reply.decision.evidence_id, outcome=outcome, at=at
            )

    def _erase(self, d: Draft, admin: pb_grpc.AdminServiceStub) -> None:
        assert d.key is not None
        req = pb.EraseRequest(reason="campaign", operator="nemesis-client")
        args: dict[str, Any] = {}
        if d.kind == "erase-id":
            acked = [
                o
                for o in self.submitted
                if o.status == "ok" and o.result.get("evidence") and o.key[:1] == d.key[:1]
            ]
            if not acked:
                op = self.history.invoke(self.client, d, {"target": None})
                self.history.ended(op, "skipped")
                return
            target = acked[d.target % len(acked)]
            req.evidence_id = target.result["evidence"]
            args = {"evidence": req.evidence_id, "of": f"#{target.index}"}
        elif d.kind == "erase-key":
            req.key.CopyFrom(_key(d.key))
        else:
            req.subject.CopyFrom(pb.SubjectScope(namespace=d.key[0], subject=d.key[1]))
        op = self.history.invoke(self.client, d, args)
        reply = self._call(op, lambda: admin.Erase(req, timeout=OP_TIMEOUT))
        if reply is not None:
            self.history.ended(
                op,
                "ok",
                erasure=reply.erasure_id,
                erased=reply.evidence_erased,
                erased_at=reply.erased_at.ToMicroseconds(),
            )

    def _resolve(self, d: Draft, review: pb_grpc.ReviewServiceStub) -> None:
        assert d.key is not None and d.value is not None
        version = ids.version_id(CoreKey(*d.key), d.value)
        req = pb.ResolveContestedRequest(
            key=_key(d.key), version_id=version, reason="campaign", operator="nemesis-client"
        )
        op = self.history.invoke(self.client, d, {"value": d.value})
        reply = self._call(op, lambda: review.ResolveContested(req, timeout=OP_TIMEOUT))
        if reply is not None:
            state = pb.BeliefState.Name(reply.belief.state).removeprefix("BELIEF_STATE_")
            self.history.ended(op, "ok", served=reply.belief.object, state=state)
