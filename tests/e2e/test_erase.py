"""An erased value is gone from every read path, the node's output and the SQLite files."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from _e2e import RPC_TIMEOUT, ServerProcess
from google.protobuf.timestamp_pb2 import Timestamp

from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc


@dataclass
class Planted:
    """Secret values and sources about `ana` in `ns`, and a survivor about `rui`."""

    ns: str
    lives_in: list[bytes]  # ana's secret address and its source
    works_at: list[bytes]  # ana's secret employer and its source
    survivor: bytes
    evidence_ids: list[str]

    def key(self, subject: str = "ana", predicate: str = "lives_in") -> pb.Key:
        return pb.Key(namespace=self.ns, subject=subject, predicate=predicate)


def plant(facts: pb_grpc.FactServiceStub) -> Planted:
    """Ana lives at a secret address (with a weaker rival, so Explain compares them) and works
    at a secret place; Rui's fact in the same namespace must survive an erase about Ana."""
    tag = uuid.uuid4().hex
    ns = f"user:erase-{tag[:8]}"
    home, work = f"Rua-Secreta-{tag}", f"Firma-Secreta-{tag}"
    home_source, work_source = f"whisper-{tag}", f"gossip-{tag}"
    survivor = f"Faro-{tag}"

    def submit(subject: str, predicate: str, value: str, anchor: str, src: str, t: int) -> str:
        fact = pb.FactInput(
            key=pb.Key(namespace=ns, subject=subject, predicate=predicate),
            object=value,
            anchor=anchor,
            source=src,
            valid_from=Timestamp(seconds=t),
        )
        r = facts.SubmitFact(pb.SubmitFactRequest(fact=fact), timeout=RPC_TIMEOUT)
        return str(r.evidence_id)

    ids = [
        submit("ana", "lives_in", home, "user_stated", home_source, 1_700_000_000),
        submit("ana", "lives_in", "Porto", "llm_generated", "gpt", 1_710_000_000),
        submit("ana", "lives_in", home, "api_response", home_source, 1_705_000_000),
        submit("ana", "works_at", work, "user_stated", work_source, 1_700_000_000),
    ]
    submit("rui", "lives_in", survivor, "user_stated", "rui", 1_700_000_000)
    return Planted(
        ns,
        [home.encode(), home_source.encode()],
        [work.encode(), work_source.encode()],
        survivor.encode(),
        ids,
    )


def observe(call: Callable[..., Any], request: Any) -> bytes:
    """What a client sees from one call: the serialized response, or the error's text."""
    try:
        return bytes(call(request, timeout=RPC_TIMEOUT).SerializeToString())
    except grpc.RpcError as err:
        trailers = b"".join(
            v if isinstance(v, bytes) else v.encode() for _, v in err.trailing_metadata() or ()
        )
        return f"{err.code()} {err.details()}".encode() + trailers


def watched(facts: pb_grpc.FactServiceStub, ns: str) -> bytes:
    """Every BeliefChange a watch from the start of `ns` delivers, up to a fresh sentinel fact."""
    sentinel = f"sentinel-{uuid.uuid4().hex[:8]}"
    fact = pb.FactInput(
        key=pb.Key(namespace=ns, subject=sentinel, predicate="lives_in"),
        object="Nowhere",
        anchor="user_stated",
        source="e2e",
    )
    facts.SubmitFact(pb.SubmitFactRequest(fact=fact), timeout=RPC_TIMEOUT)
    stream = facts.WatchBeliefs(pb.WatchBeliefsRequest(namespace=ns), timeout=RPC_TIMEOUT)
    out = b""
    try:
        for change in stream:
            out += change.SerializeToString()
            if change.key.subject == sentinel:
                return out
    finally:
        stream.cancel()
    raise AssertionError("the watch ended before the sentinel")


def read_paths(channel: grpc.Channel, p: Planted) -> dict[str, bytes]:
    """Every read path's answer about the planted facts, by name."""
    facts = pb_grpc.FactServiceStub(channel)
    review = pb_grpc.ReviewServiceStub(channel)
    out: dict[str, bytes] = {}
    for predicate in ("lives_in", "works_at"):
        key = p.key("ana", predicate)
        out[f"GetBelief {predicate}"] = observe(facts.GetBelief, pb.GetBeliefRequest(key=key))
        out[f"GetHistory {predicate}"] = observe(facts.GetHistory, pb.GetHistoryRequest(key=key))
        out[f"Explain {predicate}"] = observe(facts.Explain, pb.ExplainRequest(key=key))
        out[f"ListDecisions {predicate}"] = observe(
            facts.ListDecisions, pb.ListDecisionsRequest(key=key)
        )
    out["ListBeliefs namespace"] = observe(facts.ListBeliefs, pb.ListBeliefsRequest(namespace=p.ns))
    out["ListBeliefs subject"] = observe(
        facts.ListBeliefs, pb.ListBeliefsRequest(namespace=p.ns, subject="ana")
    )
    out["ListDecisions namespace"] = observe(
        facts.ListDecisions, pb.ListDecisionsRequest(namespace=p.ns)
    )
    out["ListContested"] = observe(review.ListContested, pb.ListContestedRequest(namespace=p.ns))
    out["WatchBeliefs"] = watched(facts, p.ns)
    return out


def database_bytes(server: ServerProcess) -> bytes:
    """The SQLite database file with its -wal and -shm companions."""
    db = server.db_path
    paths = [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]
    return b"".join(path.read_bytes() for path in paths if path.exists())


@pytest.mark.parametrize("scope", ["key", "subject"])
def test_erased_value_is_absent_from_every_read_path_and_the_database_files(
    channel: grpc.Channel, facts: pb_grpc.FactServiceStub, server: ServerProcess, scope: str
) -> None:
    """After AdminService.Erase (by key or subject) no read path, log line or database file
    byte carries the erased value or source; before it, each did (control)."""
    p = plant(facts)
    erased = p.lives_in if scope == "key" else p.lives_in + p.works_at

    before = read_paths(channel, p)
    for predicate, secrets in (("lives_in", p.lives_in), ("works_at", p.works_at)):
        for path in ("GetBelief", "GetHistory", "Explain"):
            assert all(s in before[f"{path} {predicate}"] for s in secrets), f"control: {path}"
    for path in ("ListBeliefs namespace", "ListBeliefs subject", "WatchBeliefs"):
        assert all(s in before[path] for s in p.lives_in + p.works_at), f"control: {path}"
    logged = before["ListDecisions namespace"]
    assert all(i.encode() in logged for i in p.evidence_ids), "control: the decision log"
    on_disk = database_bytes(server)
    assert all(s in on_disk for s in p.lives_in + p.works_at), "control: the database files"

    request = pb.EraseRequest(reason="gdpr art. 17", operator="olga")
    if scope == "key":
        request.key.CopyFrom(p.key("ana", "lives_in"))
    else:
        request.subject.CopyFrom(pb.SubjectScope(namespace=p.ns, subject="ana"))
    report = pb_grpc.AdminServiceStub(channel).Erase(request, timeout=RPC_TIMEOUT)
    assert report.evidence_erased == (3 if scope == "key" else 4)
    assert report.erasure_id

    after = read_paths(channel, p)
    for path, seen in after.items():
        for secret in erased:
            assert secret not in seen, f"{path} still carries {secret!r}"
    if scope == "key":  # the other key of the subject is untouched
        assert all(s in after["GetBelief works_at"] for s in p.works_at)
    assert p.survivor in after["ListBeliefs namespace"], "the erase reached beyond its scope"

    on_disk = database_bytes(server)
    for secret in erased:
        assert secret not in on_disk, f"{secret!r} is still in the database files"
    assert p.survivor in on_disk
    printed = server.output().encode()
    for secret in erased:
        assert secret not in printed, f"the node printed {secret!r}"
