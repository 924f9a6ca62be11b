"""The verbs that talk to a node: each builds its request from the arguments, sends it
through the typed client and returns the response with its text."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from factnode.api.v1 import factnode_pb2 as pb
from factnode.client import Client
from factnode.client import _calls as calls

from . import _output as out
from ._exits import EXIT_OK, EXIT_REJECTED, EXIT_SYNC_FAILED, UsageError
from ._json import to_json


class Reply(NamedTuple):
    """What a verb prints (the response as JSON with `--json`, else `text`) and its exit code."""

    response: Message | dict[str, Any]
    text: str
    exit_code: int = EXIT_OK


def parse_time(text: str, option: str) -> datetime:
    """ISO 8601 (a date, or a date and time); UTC where no offset is given."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"{option}: {text!r} is not an ISO 8601 date or time (e.g. 2025-03-01T12:00Z)"
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _ts(text: str, option: str) -> Timestamp:
    ts = Timestamp()
    try:
        ts.FromDatetime(parse_time(text, option))
    except (OverflowError, ValueError):
        # In UTC the time falls outside 0001-01-01..9999-12-31 (e.g. 9999-12-31T23:00-05:00).
        raise UsageError(f"{option}: {text!r} is outside 0001-01-01..9999-12-31 in UTC") from None
    return ts


def _key(args: argparse.Namespace) -> pb.Key:
    return pb.Key(namespace=args.namespace, subject=args.subject, predicate=args.predicate)


def _key_of(parts: list[str]) -> pb.Key:
    return pb.Key(namespace=parts[0], subject=parts[1], predicate=parts[2])


def _time_travel(req: Any, args: argparse.Namespace) -> Any:
    if getattr(args, "as_of", None):
        req.as_of.CopyFrom(_ts(args.as_of, "--as-of"))
    if args.known_at:
        req.known_at.CopyFrom(_ts(args.known_at, "--known-at"))
    return req


def submit(node: Client, args: argparse.Namespace) -> Reply:
    fact = pb.FactInput(
        key=_key(args), object=args.value, attribution=args.anchor, source=args.source or ""
    )
    if args.worth is not None:
        fact.worth = args.worth
    if args.confidence is not None:
        fact.confidence = args.confidence
    if args.valid_from:
        fact.valid_from.CopyFrom(_ts(args.valid_from, "--valid-from"))
    if args.corrects:
        fact.corrects = args.corrects
    if args.contradicts:
        parts = args.contradicts.split("/")
        if len(parts) != 3:
            raise UsageError("--contradicts: give the other key as NAMESPACE/SUBJECT/PREDICATE")
        fact.contradicts.CopyFrom(_key_of(parts))
    req = pb.SubmitFactRequest(fact=fact, idempotency_key=args.idempotency_key or "")
    r: Any = node.send(calls.SUBMIT, req)
    rejected = r.decision.outcome == pb.OUTCOME_REJECTED
    return Reply(r, out.submitted(r), EXIT_REJECTED if rejected else EXIT_OK)


def get(node: Client, args: argparse.Namespace) -> Reply:
    b: Any = node.send(calls.BELIEF, _time_travel(pb.GetBeliefRequest(key=_key(args)), args))
    return Reply(b, out.belief(b))


def history(node: Client, args: argparse.Namespace) -> Reply:
    r: Any = node.send(calls.HISTORY, _time_travel(pb.GetHistoryRequest(key=_key(args)), args))
    return Reply(r, out.history(r))


def explain(node: Client, args: argparse.Namespace) -> Reply:
    r: Any = node.send(calls.EXPLAIN, _time_travel(pb.ExplainRequest(key=_key(args)), args))
    return Reply(r, out.explanation(r))


def retract(node: Client, args: argparse.Namespace) -> Reply:
    req = pb.RetractRequest(key=_key(args), reason=args.reason or "")
    if args.value is not None:
        req.object = args.value
    if args.at:
        req.at.CopyFrom(_ts(args.at, "--at"))
    for name in ("anchor", "source", "worth", "confidence"):
        if getattr(args, name) is not None:
            setattr(req, "attribution" if name == "anchor" else name, getattr(args, name))
    r: Any = node.send(calls.RETRACT, req)
    return Reply(r, out.retracted(r))


def decisions(node: Client, args: argparse.Namespace) -> Reply:
    req = pb.ListDecisionsRequest(
        namespace=args.namespace or "", page_size=args.limit, page_token=args.page_token or ""
    )
    if args.key:
        req.key.CopyFrom(_key_of(args.key))
    r: Any = node.send(calls.DECISIONS, req)
    return Reply(r, out.decisions(r))


def review(node: Client, args: argparse.Namespace) -> Reply:
    r: Any
    if args.review_command == "list":
        req = pb.ListContestedRequest(namespace=args.namespace or "", page_size=args.limit)
        r = node.send(calls.REVIEW, req)
        return Reply(r, out.review_queue(r))
    if args.review_command == "show":
        r = node.send(calls.CONTESTED, pb.GetContestedRequest(key=_key(args)))
        h: Any = node.send(calls.HISTORY, pb.GetHistoryRequest(key=_key(args)))
        return Reply({**to_json(r), "history": to_json(h)}, out.contested_detail(r, h))
    resolve = pb.ResolveContestedRequest(key=_key(args), reason=args.reason, operator=args.operator)
    if (args.version is None) == (args.value is None):
        raise UsageError("review resolve: give exactly one of --version or --value")
    if args.version is not None:
        resolve.version_id = args.version
    else:
        resolve.object = args.value
    r = node.send(calls.RESOLVE, resolve)
    return Reply(r, out.resolved(r))


def erase(node: Client, args: argparse.Namespace) -> Reply:
    req = pb.EraseRequest(reason=args.reason, operator=args.operator)
    given = [x for x in (args.evidence, args.key, args.subject) if x]
    if len(given) != 1:
        raise UsageError("erase: give exactly one of --evidence, --key or --subject")
    if args.evidence:
        req.evidence_id = args.evidence
    elif args.key:
        req.key.CopyFrom(_key_of(args.key))
    else:
        req.subject.CopyFrom(pb.SubjectScope(namespace=args.subject[0], subject=args.subject[1]))
    r: Any = node.send(calls.ERASE, req)
    return Reply(r, out.erased(r))


def decay(node: Client, args: argparse.Namespace) -> Reply:
    req = pb.RunDecayRequest()
    if args.now:
        req.now.CopyFrom(_ts(args.now, "--now"))
    r: Any = node.send(calls.DECAY, req)
    return Reply(r, out.decayed(r))


def status(node: Client, args: argparse.Namespace) -> Reply:
    r: Any = node.send(calls.STATUS, pb.GetStatusRequest())
    return Reply(r, out.status(r))


def sync(node: Client, args: argparse.Namespace) -> Reply:
    r: Any = node.send(calls.SYNC, pb.SyncNowRequest(peer_node_id=args.peer or ""))
    failed = any(not p.ok for p in r.results)
    return Reply(r, out.synced(r), EXIT_SYNC_FAILED if failed else EXIT_OK)


def members(node: Client, args: argparse.Namespace) -> Reply:
    r: Any = node.send(calls.MEMBERS, pb.ListMembersRequest())
    return Reply(r, out.members(r))


def revoke(node: Client, args: argparse.Namespace) -> Reply:
    try:
        data = Path(args.file).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {args.file}: {exc.strerror}") from None
    r: Any = node.send(calls.REVOKE, pb.RevokeRequest(revocation_list=data))
    return Reply(r, out.revoked(r))


def export(node: Client, args: argparse.Namespace) -> Reply:
    target = Path(args.file)
    if target.exists():
        raise UsageError(f"export: {args.file} exists; give a new file")
    partial = target.with_name(target.name + ".partial")
    size = 0
    try:
        with partial.open("wb") as fh:
            for piece in node.export():
                fh.write(piece)
                size += len(piece)
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    r = pb.BackupResponse(destination=str(target.absolute()), bytes=size)
    return Reply(r, f"exported {size:,} bytes to {target}")


def _pieces(path: Path, size: int = 256 * 1024) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while piece := fh.read(size):
            yield piece


def import_(node: Client, args: argparse.Namespace) -> Reply:
    path = Path(args.file)
    if not path.is_file():
        raise UsageError(f"import: no file {args.file}")
    done = node.restore(_pieces(path), force_policy=args.force_policy)
    r = pb.ImportResponse(
        node_id=done.node_id, evidence=done.evidence, tombstones=done.tombstones,
        pins=done.pins, decisions=done.decisions, policy_differed=done.policy_differed,
    )  # fmt: skip
    return Reply(r, out.restored(r))


def backup(node: Client, args: argparse.Namespace) -> Reply:
    done = node.backup(args.name)
    r = pb.BackupResponse(destination=done.destination, bytes=done.bytes)
    return Reply(r, f"copied the store ({done.bytes:,} bytes) to {done.destination}")
