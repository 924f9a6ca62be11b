"""The verbs that talk to a node: each builds its request from the arguments, sends it
through the typed client and returns the response with its text."""

from __future__ import annotations

import argparse
import time
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
from ._exits import EXIT_OK, EXIT_REJECTED, EXIT_SYNC_FAILED, EXIT_WAIT_TIMEOUT, UsageError
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


Key3 = tuple[str, str, str]


def _key(args: argparse.Namespace) -> Key3:
    return (args.namespace, args.subject, args.predicate)


def _key_of(parts: list[str]) -> Key3:
    return (parts[0], parts[1], parts[2])


def _when(text: str | None, option: str) -> datetime | None:
    """An optional time option as a datetime, checked to fit a Timestamp (naming the option)."""
    if not text:
        return None
    _ts(text, option)
    return parse_time(text, option)


def _time_travel(req: Any, args: argparse.Namespace) -> Any:
    as_of = _when(getattr(args, "as_of", None), "--as-of")
    return calls.time_travel(req, as_of, _when(args.known_at, "--known-at"))


def submit(node: Client, args: argparse.Namespace) -> Reply:
    # Built here, not by `calls.submit_request`: that one checks the fact before sending
    # without the node's trust anchors, and the CLI wants the node's full list of bad fields
    # (an unknown anchor among them) in one answer.
    fact = pb.FactInput(
        key=pb.Key(namespace=args.namespace, subject=args.subject, predicate=args.predicate),
        object=args.value, anchor=args.anchor, source=args.source or "",
    )  # fmt: skip
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
        fact.contradicts.CopyFrom(pb.Key(namespace=parts[0], subject=parts[1], predicate=parts[2]))
    req = pb.SubmitFactRequest(fact=fact, idempotency_key=args.idempotency_key or "")
    r: Any = node.send(calls.SUBMIT, req)
    rejected = r.decision.outcome == pb.OUTCOME_REJECTED
    return Reply(r, out.submitted(r), EXIT_REJECTED if rejected else EXIT_OK)


def get(node: Client, args: argparse.Namespace) -> Reply:
    req = _time_travel(pb.GetBeliefRequest(key=calls.key_pb(_key(args))), args)
    b: Any = node.send(calls.BELIEF, req)
    return Reply(b, out.belief(b))


def search(node: Client, args: argparse.Namespace) -> Reply:
    if args.limit < 0:
        raise UsageError("--limit: must not be negative")
    req = calls.search_request(
        args.query, args.namespace or "", args.subject, args.predicate, args.state or (),
        args.anchor or (), _when(args.as_of, "--as-of"), _when(args.known_at, "--known-at"),
        args.limit, args.page_token or "",
    )  # fmt: skip
    r: Any = node.send(calls.SEARCH, req)
    return Reply(r, out.hits(r))


def history(node: Client, args: argparse.Namespace) -> Reply:
    req = calls.history_request(_key(args), _when(args.known_at, "--known-at"))
    r: Any = node.send(calls.HISTORY, req)
    return Reply(r, out.history(r))


def explain(node: Client, args: argparse.Namespace) -> Reply:
    req = _time_travel(pb.ExplainRequest(key=calls.key_pb(_key(args))), args)
    r: Any = node.send(calls.EXPLAIN, req)
    return Reply(r, out.explanation(r))


def retract(node: Client, args: argparse.Namespace) -> Reply:
    req = calls.retract_request(
        _key(args), args.reason or "", args.value, _when(args.at, "--at"), args.anchor,
        args.source, args.worth, args.confidence,
    )  # fmt: skip
    r: Any = node.send(calls.RETRACT, req)
    return Reply(r, out.retracted(r))


def decisions(node: Client, args: argparse.Namespace) -> Reply:
    key = _key_of(args.key) if args.key else None
    req = calls.decisions_request(key, args.namespace or "", args.limit, args.page_token or "")
    r: Any = node.send(calls.DECISIONS, req)
    return Reply(r, out.decisions(r))


def review(node: Client, args: argparse.Namespace) -> Reply:
    r: Any
    if args.review_command == "list":
        req = pb.ListContestedRequest(namespace=args.namespace or "", page_size=args.limit)
        r = node.send(calls.REVIEW, req)
        return Reply(r, out.review_queue(r))
    key = calls.key_pb(_key(args))
    if args.review_command == "show":
        r = node.send(calls.CONTESTED, pb.GetContestedRequest(key=key))
        h: Any = node.send(calls.HISTORY, pb.GetHistoryRequest(key=key))
        return Reply({**to_json(r), "history": to_json(h)}, out.contested_detail(r, h))
    if (args.version is None) == (args.value is None):
        raise UsageError("review resolve: give exactly one of --version or --value")
    resolve = calls.resolve_request(_key(args), args.reason, args.version, args.value,
                                    args.operator)  # fmt: skip
    r = node.send(calls.RESOLVE, resolve)
    return Reply(r, out.resolved(r))


def erase(node: Client, args: argparse.Namespace) -> Reply:
    given = [x for x in (args.evidence, args.key, args.subject) if x]
    if len(given) != 1:
        raise UsageError("erase: give exactly one of --evidence, --key or --subject")
    req = calls.erase_request(
        args.reason, args.operator, args.evidence or None,
        _key_of(args.key) if args.key else None,
        (args.subject[0], args.subject[1]) if args.subject else None,
    )  # fmt: skip
    r: Any = node.send(calls.ERASE, req)
    if not args.wait:
        return Reply(r, out.erased(r))
    coverage = _confirmed(node, r.erasure_id, args.timeout)
    text = f"{out.erased(r)}\n{out.coverage_line(coverage)}"
    code = EXIT_OK if coverage.complete else EXIT_WAIT_TIMEOUT
    return Reply({**to_json(r), "coverage": to_json(coverage)}, text, code)


# How often `erase --wait` asks whether every member has confirmed.
WAIT_POLL_SECONDS = 1.0


def _confirmed(node: Client, erasure_id: str, timeout: float) -> Any:
    """The erasure's coverage once every current member confirmed it, or when `timeout`
    seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        coverage: Any = node.send(calls.ERASURE, pb.GetErasureRequest(erasure_id=erasure_id))
        left = deadline - time.monotonic()
        if coverage.complete or left <= 0:
            return coverage
        time.sleep(min(WAIT_POLL_SECONDS, left))


def erasures(node: Client, args: argparse.Namespace) -> Reply:
    r: Any
    if args.action == "show":
        if not args.erasure_id:
            raise UsageError("erasures show: give the erasure's id")
        r = node.send(calls.ERASURE, pb.GetErasureRequest(erasure_id=args.erasure_id))
        return Reply(r, out.erasure_detail(r))
    if args.erasure_id:
        raise UsageError("erasures: an erasure id goes with `show` (factnode erasures show ID)")
    if args.limit < 0:
        raise UsageError("--limit: must not be negative")
    req = pb.ListErasuresRequest(page_size=args.limit, page_token=args.page_token or "")
    r = node.send(calls.ERASURES, req)
    return Reply(r, out.erasures(r))


def decay(node: Client, args: argparse.Namespace) -> Reply:
    r: Any = node.send(calls.DECAY, calls.decay_request(_when(args.now, "--now")))
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
