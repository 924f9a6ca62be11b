"""The `factnode` command line: run a node, and talk to one over gRPC.

Exit codes (for scripts): 0 success, 1 internal error, 2 usage or configuration
error, 3 node unreachable, 4 refused (authentication or permission), 5 not found,
6 invalid argument (the node named the bad fields).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import error_details_pb2
from grpc_status import rpc_status

import factnode
from factnode import health
from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from google.protobuf.timestamp_pb2 import Timestamp

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_REFUSED, EXIT_NOT_FOUND, EXIT_INVALID = (
    range(7)
)
# `submit` whose decision is REJECTED (no provenance, low confidence): recorded, not believed.
EXIT_REJECTED = 7
DEFAULT_ADDRESS = "127.0.0.1:7420"

_EXIT_FOR = {
    grpc.StatusCode.UNAVAILABLE: EXIT_UNREACHABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED: EXIT_UNREACHABLE,
    grpc.StatusCode.UNAUTHENTICATED: EXIT_REFUSED,
    grpc.StatusCode.PERMISSION_DENIED: EXIT_REFUSED,
    grpc.StatusCode.NOT_FOUND: EXIT_NOT_FOUND,
    grpc.StatusCode.INVALID_ARGUMENT: EXIT_INVALID,
}


class UsageError(Exception):
    """A command-line argument is wrong; exits 2 with the message."""


# -- formatting -----------------------------------------------------------------


def parse_time(text: str, option: str) -> datetime:
    """ISO 8601 (a date, or a date and time); UTC where no offset is given."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"{option}: {text!r} is not an ISO 8601 date or time (e.g. 2025-03-01T12:00Z)"
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _ts(text: str | None, option: str) -> Any:
    if text is None:
        return None
    from google.protobuf.timestamp_pb2 import Timestamp

    ts = Timestamp()
    try:
        ts.FromDatetime(parse_time(text, option))
    except (OverflowError, ValueError):
        # In UTC the time falls outside 0001-01-01..9999-12-31 (e.g. 9999-12-31T23:00-05:00).
        raise UsageError(f"{option}: {text!r} is outside 0001-01-01..9999-12-31 in UTC") from None
    return ts


def show_time(ts: Timestamp | None) -> str:
    if ts is None or (ts.seconds == 0 and ts.nanos == 0):
        return "-"
    return ts.ToDatetime(tzinfo=UTC).isoformat().replace("+00:00", "Z")


def _enum(value: int, enum: Any, prefix: str) -> str:
    return str(enum.Name(value)).removeprefix(prefix)


def outcome(d: pb.Decision) -> str:
    return _enum(d.outcome, pb.Outcome, "OUTCOME_")


def state(value: int) -> str:
    return _enum(value, pb.BeliefState, "BELIEF_STATE_")


def key_text(k: pb.Key) -> str:
    return f"{k.namespace} / {k.subject} / {k.predicate}"


def table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    """A plain aligned text table."""
    cells = [list(headers), *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def as_json(msg: Message) -> str:
    return json.dumps(
        json_format.MessageToDict(msg, preserving_proto_field_name=True), indent=2, sort_keys=True
    )


def _belief_lines(b: pb.Belief) -> list[str]:
    lines = [f"{key_text(b.key)}"]
    if b.believed_values:
        lines.append("  values:  " + ", ".join(repr(v.object) for v in b.believed_values))
    else:
        lines.append(f"  value:   {b.object!r}")
    e = b.evidence
    lines += [
        f"  state:   {state(b.state)}",
        f"  rule:    {b.rule}",
        f"  version: {b.version_id}",
        f"  evidence {e.evidence_id}: {e.attribution} from {e.source!r}, worth {e.worth:.3f}, "
        f"confidence {e.confidence:.3f}, valid from {show_time(e.valid_from)}"
        + (" (defaulted to ingestion time)" if e.valid_from_defaulted else ""),
    ]
    return lines


# -- commands ---------------------------------------------------------------------


class Client:
    """Stubs on one channel, with the caller's token and deadline on every call."""

    def __init__(self, args: argparse.Namespace) -> None:
        address = args.address
        if args.ca_cert:
            creds = grpc.ssl_channel_credentials(Path(args.ca_cert).read_bytes())
            self.channel = grpc.secure_channel(address, creds)
        else:
            self.channel = grpc.insecure_channel(address)
        self.metadata = [("authorization", f"Bearer {args.token}")] if args.token else []
        self.timeout = args.timeout
        self.facts = pb_grpc.FactServiceStub(self.channel)
        self.review = pb_grpc.ReviewServiceStub(self.channel)
        self.admin = pb_grpc.AdminServiceStub(self.channel)

    def __call__(self, rpc: Callable[..., Any], request: Any) -> Any:
        return rpc(request, timeout=self.timeout, metadata=self.metadata)


def _key(args: argparse.Namespace) -> pb.Key:
    return pb.Key(namespace=args.namespace, subject=args.subject, predicate=args.predicate)


def cmd_submit(c: Client, args: argparse.Namespace) -> tuple[Message, str]:
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
        fact.contradicts.CopyFrom(pb.Key(namespace=parts[0], subject=parts[1], predicate=parts[2]))
    r = c(
        c.facts.SubmitFact,
        pb.SubmitFactRequest(fact=fact, idempotency_key=args.idempotency_key or ""),
    )
    d = r.decision
    lines = [f"{outcome(d)} by rule {d.rule}" + (f": {d.detail}" if d.detail else "")]
    lines.append(f"evidence {r.evidence_id}, version {r.version_id}")
    if r.HasField("belief"):
        lines.append("belief now:")
        lines += ["  " + line for line in _belief_lines(r.belief)]
    return r, "\n".join(lines)


def cmd_get(c: Client, args: argparse.Namespace) -> tuple[Message, str]:
    req = pb.GetBeliefRequest(key=_key(args))
    if args.as_of:
        req.as_of.CopyFrom(_ts(args.as_of, "--as-of"))
    if args.known_at:
        req.known_at.CopyFrom(_ts(args.known_at, "--known-at"))
    b = c(c.facts.GetBelief, req)
    return b, "\n".join(_belief_lines(b))


def cmd_history(c: Client, args: argparse.Namespace) -> tuple[Message, str]:
    req = pb.GetHistoryRequest(key=_key(args))
    if args.known_at:
        req.known_at.CopyFrom(_ts(args.known_at, "--known-at"))
    r = c(c.facts.GetHistory, req)
    rows = []
    for v in r.versions:
        spans = ", ".join(
            f"{show_time(i.start)} .. {show_time(i.end) if i.HasField('end') else 'now'}"
            for i in v.intervals
        )
        rows.append(
            (
                repr(v.object),
                _enum(v.status, pb.VersionStatus, "VERSION_STATUS_"),
                spans or "never believed",
                str(len(v.evidence)),
                v.version_id[:12],
            )
        )
    return r, table(rows, ("value", "status", "believed (event time)", "evidence", "version"))


def cmd_explain(c: Client, args: argparse.Namespace) -> tuple[Message, str]:
    req = pb.ExplainRequest(key=_key(args))
    if args.as_of:
        req.as_of.CopyFrom(_ts(args.as_of, "--as-of"))
    if args.known_at:
        req.known_at.CopyFrom(_ts(args.known_at, "--known-at"))
    r = c(c.facts.Explain, req)
    lines = [f"believes {r.belief.object!r} ({state(r.belief.state)}, rule {r.belief.rule})"]
    if not r.comparisons:
        lines.append("no other version competes")
    for cmp in r.comparisons:
        lines.append(f"  beats {cmp.object!r} by {cmp.rule}: {cmp.reason}")
    return r, "\n".join(lines)


def cmd_retract(c: Client, args: argparse.Namespace) -> tuple[Message, str]:
    req = pb.RetractRequest(key=_key(args), reason=args.reason or "")
    if args.value is not None:
        req.object = args.value
    if args.at:
        req.at.CopyFrom(_ts(args.at, "--at"))
    r = c(c.facts.Retract, req)
    return r, f"{outcome(r.decision)} ({r.decision.rule})"


def cmd_decisions(c: Client, args: argparse.Namespace) -> tuple[Message, str]:
    req = pb.ListDecisionsRequest(
        namespace=args.namespace or "", page_size=args.limit, page_token=args.page_token or ""
    )
    if args.key:
        req.key.CopyFrom(pb.Key(namespace=args.key[0], subject=args.key[1], predicate=args.key[2]))
    r = c(c.facts.ListDecisions, req)
    rows = [
        (
            str(d.seq),
            show_time(d.decided_at),
            key_text(d.key),
            outcome(d),
            d.rule,
            d.evidence_id[:12],
        )
        for d in r.decisions
    ]
    text = table(rows, ("seq", "decided", "key", "outcome", "rule", "evidence"))
    if r.next_page_token:
        text += f"\nmore: --page-token {r.next_page_token}"
    return r, text


def _contested_text(k: pb.ContestedKey) -> str:
    lines = [f"{key_text(k.key)}: {state(k.state)}"]
    for v in k.versions:
        mark = "*" if v.local_belief else " "
        lines.append(f" {mark} {v.object!r} (version {v.version_id[:12]}, {v.local_rule})")
    return "\n".join(lines)


def cmd_review(c: Client, args: argparse.Namespace) -> tuple[Message, str]:
    if args.review_command == "list":
        r = c(
            c.review.ListContested,
            pb.ListContestedRequest(namespace=args.namespace or "", page_size=args.limit),
        )
        if not r.keys:
            return r, "the review queue is empty"
        return r, "\n".join(_contested_text(k) for k in r.keys)
    if args.review_command == "show":
        r = c(c.review.GetContested, pb.GetContestedRequest(key=_key(args)))
        return r, _contested_text(r)
    req = pb.ResolveContestedRequest(key=_key(args), reason=args.reason, operator=args.operator)
    if (args.version is None) == (args.value is None):
        raise UsageError("review resolve: give exactly one of --version or --value")
    if args.version is not None:
        req.version_id = args.version
    else:
        req.object = args.value
    r = c(c.review.ResolveContested, req)
    return r, f"{outcome(r.decision)} by rule {r.decision.rule}\n{r.note}"


def cmd_erase(c: Client, args: argparse.Namespace) -> tuple[Message, str]:
    req = pb.EraseRequest(reason=args.reason, operator=args.operator)
    given = [x for x in (args.evidence, args.key, args.subject) if x]
    if len(given) != 1:
        raise UsageError("erase: give exactly one of --evidence, --key or --subject")
    if args.evidence:
        req.evidence_id = args.evidence
    elif args.key:
        req.key.CopyFrom(pb.Key(namespace=args.key[0], subject=args.key[1], predicate=args.key[2]))
    else:
        req.subject.CopyFrom(pb.SubjectScope(namespace=args.subject[0], subject=args.subject[1]))
    r = c(c.admin.Erase, req)
    return (
        r,
        f"erased {r.evidence_erased} evidence across {r.keys_affected} key(s); tombstone {r.erasure_id}",
    )


def cmd_decay(c: Client, args: argparse.Namespace) -> tuple[Message, str]:
    req = pb.RunDecayRequest()
    if args.now:
        req.now.CopyFrom(_ts(args.now, "--now"))
    r = c(c.admin.RunDecay, req)
    return r, f"decayed {r.decayed}, tombstoned {r.tombstoned}"


def cmd_status(c: Client, args: argparse.Namespace) -> tuple[Message, str]:
    r = c(c.admin.GetStatus, pb.GetStatusRequest())
    n = r.counts
    lines = [
        f"node {r.node_id} (factnode {r.version}) listening on {r.listen_address}",
        f"store: {r.database}",
        f"evidence {n.evidence}, keys {n.keys}, decisions {n.decisions}, contested {n.contested}, "
        f"ambiguous {n.ambiguous}, rejected {n.rejected}",
    ]
    if r.peers:
        lines.append(
            table(
                [
                    (p.node_id, p.address, show_time(p.last_sync), str(p.lag_seconds), p.last_error)
                    for p in r.peers
                ],
                ("peer", "address", "last sync", "lag s", "last error"),
            )
        )
    else:
        lines.append("no peers configured")
    return r, "\n".join(lines)


def cmd_sync(c: Client, args: argparse.Namespace) -> tuple[Message, str]:
    r = c(c.admin.SyncNow, pb.SyncNowRequest(peer_node_id=args.peer or ""))
    if not r.results:
        return r, "no peers to sync with"
    rows = [
        (
            p.node_id,
            "ok" if p.ok else f"failed: {p.error}",
            str(p.evidence_received),
            str(p.evidence_sent),
        )
        for p in r.results
    ]
    return r, table(rows, ("peer", "result", "evidence in", "evidence out"))


def cmd_certs(args: argparse.Namespace) -> int:
    from factnode.certs import ensure_ca, issue_node_cert

    out = Path(args.out)
    try:
        ensure_ca(out)
        made = [issue_node_cert(out, node_id, tuple(args.host)) for node_id in args.node_ids]
    except (ValueError, OSError) as exc:
        print(f"factnode certs: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(
            json.dumps(
                {
                    "ca": str(out / "ca.crt"),
                    "nodes": {
                        n: {"cert": str(c), "key": str(k)}
                        for n, (c, k) in zip(args.node_ids, made, strict=True)
                    },
                },
                indent=2,
            )
        )
    else:
        print(f"CA: {out / 'ca.crt'} (key {out / 'ca.key'}: keep it private)")
        for node_id, (crt, key) in zip(args.node_ids, made, strict=True):
            print(f"{node_id}: {crt}, {key}")
    return EXIT_OK


def cmd_serve(args: argparse.Namespace) -> int:
    from factnode.config import ConfigError, load_settings
    from factnode.server.app import serve

    env = dict(os.environ)
    for option, var in (
        ("listen", "FACTNODE_LISTEN"),
        ("data_dir", "FACTNODE_DATA_DIR"),
        ("database_url", "FACTNODE_DATABASE_URL"),
        ("node_id", "FACTNODE_NODE_ID"),
    ):
        if getattr(args, option):
            env[var] = getattr(args, option)
    try:
        settings = load_settings(args.config, env)
        asyncio.run(serve(settings, announce=lambda line: print(line, flush=True)))
    except ConfigError as exc:
        print(f"factnode serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        pass
    return EXIT_OK


# -- parser -------------------------------------------------------------------------


def _add_key(p: argparse.ArgumentParser) -> None:
    p.add_argument("namespace", help="scope of the fact, e.g. user:ana")
    p.add_argument("subject", help="what the fact is about, e.g. ana")
    p.add_argument("predicate", help="the property, e.g. lives_in")


def _seconds(text: str) -> float:
    """A positive, finite number of seconds (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="factnode",
        description="Deterministic, explainable beliefs for AI agents. "
        "Run a node with `factnode serve`; the other commands talk to one.",
        epilog="Exit codes: 0 ok, 1 error, 2 usage, 3 unreachable, 4 refused, 5 not found, 6 invalid argument.",
    )
    parser.add_argument("--version", action="version", version=f"factnode {factnode.__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--address",
        default=os.environ.get("FACTNODE_ADDRESS", DEFAULT_ADDRESS),
        help="node to talk to (env FACTNODE_ADDRESS; default %(default)s)",
    )
    common.add_argument(
        "--token",
        default=os.environ.get("FACTNODE_TOKEN"),
        help="bearer token (env FACTNODE_TOKEN)",
    )
    common.add_argument(
        "--ca-cert",
        default=os.environ.get("FACTNODE_CA_CERT"),
        help="CA certificate for a TLS node",
    )
    common.add_argument(
        "--timeout", type=_seconds, default=10.0, help="seconds per call (default %(default)s)"
    )
    common.add_argument("--json", action="store_true", help="print the response as JSON")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("serve", help="run a node")
    p.add_argument("--config", default=os.environ.get("FACTNODE_CONFIG"), help="TOML settings file")
    p.add_argument("--listen", help="host:port to listen on (default 127.0.0.1:7420)")
    p.add_argument("--data-dir", help="where the SQLite store lives")
    p.add_argument("--database-url", help="SQLAlchemy URL, e.g. postgresql+psycopg://user@host/db")
    p.add_argument("--node-id", help="this node's id (persisted on first start)")
    p.set_defaults(run=None)

    p = sub.add_parser("certs", help="make a development CA and node certificates for peer mTLS")
    p.add_argument(
        "node_ids", nargs="+", metavar="NODE_ID", help="node ids to issue certificates for"
    )
    p.add_argument(
        "--out",
        default="certs",
        help="directory (default %(default)s); an existing ca.crt/ca.key there is reused",
    )
    p.add_argument(
        "--host",
        action="append",
        default=["localhost", "127.0.0.1"],
        help="extra host name or IP for the certificates",
    )
    p.add_argument("--json", action="store_true", help="print the file paths as JSON")
    p.set_defaults(run=None)

    p = sub.add_parser(
        "demo",
        help="start a small local federation and walk through a conflict, a consensus and a contested key",
    )
    p.add_argument("--keep", action="store_true", help="leave the nodes running afterwards")
    p.set_defaults(run=None)

    p = sub.add_parser("submit", parents=[common], help="submit a fact and print the decision")
    _add_key(p)
    p.add_argument("value", help="the object of the fact, e.g. Lisbon")
    p.add_argument("--anchor", required=True, help="trust anchor (attribution), e.g. user_stated")
    p.add_argument(
        "--source", help="who or what said it; without one the fact is REJECTED (no_provenance)"
    )
    p.add_argument("--worth", type=float, help="worth in [0, 1] (default 0.5)")
    p.add_argument("--confidence", type=float, help="confidence in [0, 1] (default 0.5)")
    p.add_argument("--valid-from", help="event time (ISO 8601); default: now")
    p.add_argument("--corrects", help="evidence id this corrects (it was never true)")
    p.add_argument(
        "--contradicts", help="another key NAMESPACE/SUBJECT/PREDICATE this fact moves from"
    )
    p.add_argument("--idempotency-key", help="resubmissions with this key are DUPLICATE")
    p.set_defaults(run=cmd_submit)

    for name, fn, helptext in (
        ("get", cmd_get, "the belief for a key"),
        ("explain", cmd_explain, "why the belief beats each other version"),
    ):
        p = sub.add_parser(name, parents=[common], help=helptext)
        _add_key(p)
        p.add_argument("--as-of", help="event time to answer for (ISO 8601)")
        p.add_argument("--known-at", help="what the node knew at this time (ISO 8601)")
        p.set_defaults(run=fn)

    p = sub.add_parser(
        "history", parents=[common], help="every version of a key and when it was believed"
    )
    _add_key(p)
    p.add_argument("--known-at", help="as the node knew it at this time (ISO 8601)")
    p.set_defaults(run=cmd_history)

    p = sub.add_parser("retract", parents=[common], help="end a belief without a replacement")
    _add_key(p)
    p.add_argument("--value", help="for multi-valued predicates: the value to retract")
    p.add_argument("--at", help="when it stopped being true (ISO 8601; default now)")
    p.add_argument("--reason", help="why")
    p.set_defaults(run=cmd_retract)

    p = sub.add_parser("decisions", parents=[common], help="the decision log")
    p.add_argument("--namespace", help="only this namespace")
    p.add_argument(
        "--key", nargs=3, metavar=("NAMESPACE", "SUBJECT", "PREDICATE"), help="only this key"
    )
    p.add_argument("--limit", type=int, default=50, help="page size (default %(default)s)")
    p.add_argument("--page-token", help="continue a listing")
    p.set_defaults(run=cmd_decisions)

    review = sub.add_parser("review", help="contested and ambiguous keys (operator)")
    rsub = review.add_subparsers(dest="review_command", required=True, metavar="SUBCOMMAND")
    p = rsub.add_parser("list", parents=[common], help="the review queue")
    p.add_argument("--namespace", help="only this namespace")
    p.add_argument("--limit", type=int, default=50, help="page size (default %(default)s)")
    p.set_defaults(run=cmd_review)
    p = rsub.add_parser("show", parents=[common], help="one key under review")
    _add_key(p)
    p.set_defaults(run=cmd_review)
    p = rsub.add_parser("resolve", parents=[common], help="choose a version or give a value")
    _add_key(p)
    p.add_argument("--version", help="version id to believe")
    p.add_argument("--value", help="value to believe")
    p.add_argument("--reason", required=True, help="why (kept in the log)")
    p.add_argument(
        "--operator", default=os.environ.get("USER", "operator"), help="your name (default $USER)"
    )
    p.set_defaults(run=cmd_review)

    p = sub.add_parser("erase", parents=[common], help="destroy personal data (operator)")
    p.add_argument("--evidence", help="one evidence id")
    p.add_argument(
        "--key", nargs=3, metavar=("NAMESPACE", "SUBJECT", "PREDICATE"), help="every fact of a key"
    )
    p.add_argument(
        "--subject", nargs=2, metavar=("NAMESPACE", "SUBJECT"), help="every fact about a subject"
    )
    p.add_argument("--reason", required=True, help="why (kept in the tombstone)")
    p.add_argument(
        "--operator", default=os.environ.get("USER", "operator"), help="your name (default $USER)"
    )
    p.set_defaults(run=cmd_erase)

    p = sub.add_parser("decay", parents=[common], help="run the decay job now (operator)")
    p.add_argument("--now", help="evaluate as of this time (ISO 8601)")
    p.set_defaults(run=cmd_decay)

    p = sub.add_parser("status", parents=[common], help="node id, counts and peers (operator)")
    p.set_defaults(run=cmd_status)

    p = sub.add_parser("sync", parents=[common], help="run a sync round now (operator)")
    p.add_argument("--peer", help="only this peer node id")
    p.set_defaults(run=cmd_sync)

    p = sub.add_parser(
        "mcp", parents=[common], help="serve the Model Context Protocol on stdio for an LLM agent"
    )
    p.set_defaults(run=None)
    health.add_command(sub)
    return parser


def _fail(message: str, code: int) -> NoReturn:
    print(f"factnode: {message}", file=sys.stderr)
    raise SystemExit(code)


def _rpc_failure(err: grpc.RpcError, address: str) -> NoReturn:
    code = err.code()
    details = err.details() or ""
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        _fail(
            f"cannot reach a factnode at {address} ({code.name.lower()}): is `factnode serve` running?",
            EXIT_UNREACHABLE,
        )
    lines = [f"{code.name}: {details}"]
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    for detail in status.details if status else ():
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(bad):
            lines = [f"{code.name}: invalid request"] + [
                f"  {v.field}: {v.description}" for v in bad.field_violations
            ]
    _fail("\n".join(lines), _EXIT_FOR.get(code, EXIT_ERROR))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "serve":
        return cmd_serve(args)
    if args.command == "certs":
        return cmd_certs(args)
    if args.command == "health":
        return health.run(args)
    if args.command == "mcp":
        try:
            from factnode import mcp_server
        except ModuleNotFoundError as exc:  # the optional SDK
            _fail(f"{exc}; install it with: pip install 'factnode[mcp]'", EXIT_USAGE)
        return mcp_server.main(
            args.address, token=args.token, ca_cert=args.ca_cert, timeout=args.timeout
        )
    if args.command == "demo":
        from factnode.demo import main as demo

        demo(["--keep"] if args.keep else [])
        return EXIT_OK
    try:
        client = Client(args)
    except OSError as exc:  # e.g. an unreadable --ca-cert
        _fail(str(exc), EXIT_USAGE)
    try:
        response, text = args.run(client, args)
    except UsageError as exc:
        parser.exit(EXIT_USAGE, f"factnode: {exc}\n")
    except grpc.RpcError as err:
        _rpc_failure(err, args.address)
    except OSError as exc:
        _fail(str(exc), EXIT_USAGE)
    finally:
        client.channel.close()
    print(as_json(response) if args.json else text)
    if args.command == "submit" and response.decision.outcome == pb.OUTCOME_REJECTED:
        return EXIT_REJECTED
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
