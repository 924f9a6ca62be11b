"""How the CLI prints: node responses as text (or as JSON with `--json`), tables, times."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC
from typing import TYPE_CHECKING, Any

from google.protobuf import json_format
from google.protobuf.message import Message

from factnode.api.v1 import factnode_pb2 as pb
from factnode.clock import describe_skew

if TYPE_CHECKING:
    from google.protobuf.timestamp_pb2 import Timestamp


def show_time(ts: Timestamp | None) -> str:
    """A timestamp as ISO 8601 with a Z, or "-" when unset."""
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
    """A response as `--json` prints it: proto field names, sorted keys."""
    return json.dumps(
        json_format.MessageToDict(msg, preserving_proto_field_name=True), indent=2, sort_keys=True
    )


def belief_lines(b: pb.Belief) -> list[str]:
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


def submitted(r: pb.SubmitFactResponse) -> str:
    d = r.decision
    lines = [f"{outcome(d)} by rule {d.rule}" + (f": {d.detail}" if d.detail else "")]
    lines.append(f"evidence {r.evidence_id}, version {r.version_id}")
    if r.HasField("belief"):
        lines.append("belief now:")
        lines += ["  " + line for line in belief_lines(r.belief)]
    return "\n".join(lines)


def belief(b: pb.Belief) -> str:
    return "\n".join(belief_lines(b))


def history(r: pb.GetHistoryResponse) -> str:
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
    out = table(rows, ("value", "status", "believed (event time)", "evidence", "version"))
    ended = [f"{v.object!r} ended by {_ending(e)}" for v in r.versions for e in v.ended_by]
    return "\n".join([out, *ended])


def _ending(e: pb.Evidence) -> str:
    """What ends a version: a retraction, or a fact on another key that contradicts it."""
    who = f"{e.attribution} ({e.source}), from {show_time(e.valid_from)}"
    if e.retracts:
        return f"a retraction by {who}"
    k = e.key
    return f"{k.namespace} {k.subject} {k.predicate} = {e.object!r}, which contradicts it, by {who}"


def explanation(r: pb.ExplainResponse) -> str:
    lines = [f"believes {r.belief.object!r} ({state(r.belief.state)}, rule {r.belief.rule})"]
    if not r.comparisons:
        lines.append("no other version competes")
    for cmp in r.comparisons:
        lines.append(f"  beats {cmp.object!r} by {cmp.rule}: {cmp.reason}")
    return "\n".join(lines)


def retracted(r: pb.RetractResponse) -> str:
    """The retraction's decision (RETRACTED, or DISBELIEVED naming what outranked it)."""
    line = f"{outcome(r.decision)} by rule {r.decision.rule}"
    return f"{line}\n{r.decision.detail}" if r.decision.detail else line


def decisions(r: pb.ListDecisionsResponse) -> str:
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
    return text


def contested(k: pb.ContestedKey) -> str:
    lines = [f"{key_text(k.key)}: {state(k.state)}"]
    for v in k.versions:
        mark = "*" if v.local_belief else " "
        lines.append(f" {mark} {v.object!r} (version {v.version_id[:12]}, {v.local_rule})")
    return "\n".join(lines)


def review_queue(r: pb.ListContestedResponse) -> str:
    if not r.keys:
        return "the review queue is empty"
    return "\n".join(contested(k) for k in r.keys)


def resolved(r: pb.ResolveContestedResponse) -> str:
    return f"{outcome(r.decision)} by rule {r.decision.rule}\n{r.note}"


def erased(r: pb.EraseResponse) -> str:
    return (
        f"erased {r.evidence_erased} evidence across {r.keys_affected} key(s); "
        f"tombstone {r.erasure_id}"
    )


def decayed(r: pb.RunDecayResponse) -> str:
    return f"decayed {r.decayed}, tombstoned {r.tombstoned}"


def show_skew(p: pb.PeerStatus) -> str:
    """The peer's clock against this node's, or "-" when never measured."""
    if not p.HasField("clock_skew_ms"):
        return "-"
    return describe_skew(p.clock_skew_ms * 1000)


def status(r: pb.GetStatusResponse) -> str:
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
                    (
                        p.node_id,
                        p.address,
                        show_time(p.last_sync),
                        str(p.lag_seconds),
                        show_skew(p),
                        p.last_error,
                    )
                    for p in r.peers
                ],
                ("peer", "address", "last sync", "lag s", "clock skew", "last error"),
            )
        )
    else:
        lines.append("no peers configured")
    return "\n".join(lines)


def synced(r: pb.SyncNowResponse) -> str:
    if not r.results:
        return "no peers to sync with"
    rows = [
        (
            p.node_id,
            "ok" if p.ok else f"failed: {p.error}",
            str(p.evidence_received),
            str(p.evidence_sent),
        )
        for p in r.results
    ]
    return table(rows, ("peer", "result", "evidence in", "evidence out"))
