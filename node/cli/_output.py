"""How the CLI prints: node responses as text (or as JSON with `--json`), tables, times.

Every text printer passes what the node sent through `safe` (or `quoted`), so a value
holding control characters (a newline, an ANSI escape) is shown escaped and can never
move the cursor, clear the screen or forge a line of output. `--json` output is built
by `as_json` from the response's descriptor (see `_json`), with the schemas under
`docs/cli-json/`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC
from typing import TYPE_CHECKING, Any

from google.protobuf.message import Message

from factnode.api.v1 import factnode_pb2 as pb
from factnode.clock import describe_skew

from ._json import enum_name, to_json

if TYPE_CHECKING:
    from google.protobuf.timestamp_pb2 import Timestamp


def safe(text: object) -> str:
    """`text` with every unprintable character (control, format, line separators) escaped
    as Python writes it in a string literal (`\\n`, `\\x1b`, `\\u202e`)."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)


def quoted(text: str) -> str:
    """A value in quotes, escaped as `safe` does (Python's repr: it escapes the same set)."""
    return repr(text)


def show_time(ts: Timestamp | None) -> str:
    """A timestamp as ISO 8601 with a Z, or "-" when unset."""
    if ts is None or (ts.seconds == 0 and ts.nanos == 0):
        return "-"
    return ts.ToDatetime(tzinfo=UTC).isoformat().replace("+00:00", "Z")


def outcome(d: pb.Decision) -> str:
    return enum_name(pb.Outcome.DESCRIPTOR, d.outcome)


def state(value: int) -> str:
    return enum_name(pb.BeliefState.DESCRIPTOR, value)


def key_text(k: pb.Key) -> str:
    return f"{safe(k.namespace)} / {safe(k.subject)} / {safe(k.predicate)}"


def table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    """A plain aligned text table; every cell escaped by `safe`."""
    cells = [list(headers), *[[safe(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def as_json(doc: Message | dict[str, Any]) -> str:
    """A response as `--json` prints it (see `_json.to_json`), keys sorted."""
    value = to_json(doc) if isinstance(doc, Message) else doc
    # ASCII only: a value's control or non-ASCII characters come as \\u escapes, never raw.
    return json.dumps(value, indent=2, sort_keys=True)


def evidence_line(e: pb.Evidence) -> str:
    """One piece of evidence: id, anchor, source, worth, confidence, event time, origin."""
    return (
        f"evidence {safe(e.evidence_id)}: {safe(e.anchor)} from {quoted(e.source)}, "
        f"worth {e.worth:.3f}, confidence {e.confidence:.3f}, valid from {show_time(e.valid_from)}"
        + (" (defaulted to ingestion time)" if e.valid_from_defaulted else "")
        + (f", origin {safe(e.origin_node)}" if e.origin_node else "")
    )


def belief_lines(b: pb.Belief) -> list[str]:
    lines = [f"{key_text(b.key)}"]
    if b.believed_values:
        lines.append("  values:  " + ", ".join(quoted(v.object) for v in b.believed_values))
    else:
        lines.append(f"  value:   {quoted(b.object)}")
    lines += [
        f"  state:   {state(b.state)}",
        f"  rule:    {safe(b.rule)}",
        f"  version: {safe(b.version_id)}",
        f"  {evidence_line(b.evidence)}",
    ]
    return lines


def submitted(r: pb.SubmitFactResponse) -> str:
    d = r.decision
    lines = [f"{outcome(d)} by rule {safe(d.rule)}" + (f": {safe(d.detail)}" if d.detail else "")]
    lines.append(f"evidence {safe(r.evidence_id)}, version {safe(r.version_id)}")
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
                quoted(v.object),
                enum_name(pb.VersionStatus.DESCRIPTOR, v.status),
                ", ".join(filter(None, (spans, _decayed(v)))) or _unserved(v),
                str(len(v.evidence)),
                v.version_id[:12],
            )
        )
    out = table(rows, ("value", "status", "believed (event time)", "evidence", "version"))
    ended = [f"{quoted(v.object)} ended by {_ending(e)}" for v in r.versions for e in v.ended_by]
    return "\n".join([out, *ended])


def _decayed(v: pb.VersionHistory) -> str:
    """When a DECAYED version's claims expired, and the confirmation they counted from."""
    if not v.HasField("decayed_at"):
        return ""
    return f"decayed {show_time(v.decayed_at)} (last confirmed {show_time(v.confirmed_at)})"


def _unserved(v: pb.VersionHistory) -> str:
    """A version believed at no event time now: never, or until an operator's resolution."""
    if v.HasField("served_until"):
        return f"served until the resolution at {show_time(v.served_until)}"
    return "never believed"


def _ending(e: pb.Evidence) -> str:
    """What ends a version: a retraction, or a fact on another key that contradicts it."""
    who = f"{safe(e.anchor)} ({safe(e.source)}), from {show_time(e.valid_from)}"
    if e.retracts:
        return f"a retraction by {who}"
    k = e.key
    return (
        f"{safe(k.namespace)} {safe(k.subject)} {safe(k.predicate)} = {quoted(e.object)}, "
        f"which contradicts it, by {who}"
    )


def explanation(r: pb.ExplainResponse) -> str:
    b = r.belief
    lines = [f"believes {quoted(b.object)} ({state(b.state)}, rule {safe(b.rule)})"]
    if not r.comparisons:
        lines.append("no other version competes")
    for cmp in r.comparisons:
        lines.append(f"  beats {quoted(cmp.object)} by {safe(cmp.rule)}: {safe(cmp.reason)}")
    if r.review:
        lines.append(safe(r.review))
    if r.HasField("believed_again"):
        lines.append(safe(r.believed_again.text))
    return "\n".join(lines)


def retracted(r: pb.RetractResponse) -> str:
    """The retraction's decision (RETRACTED, or DISBELIEVED naming what outranked it)."""
    lines = [f"{outcome(r.decision)} by rule {safe(r.decision.rule)}"]
    if r.decision.detail:
        lines.append(safe(r.decision.detail))
    if r.HasField("believed_again"):
        lines.append(safe(r.believed_again.text))
    return "\n".join(lines)


def hits(r: pb.SearchBeliefsResponse) -> str:
    if not r.hits:
        return "no belief matches"
    rows = [
        (
            f"{h.score:.3g}",
            key_text(h.belief.key),
            quoted(h.object),
            state(h.belief.state),
            safe(h.belief.rule),
            safe(h.anchor),
        )
        for h in r.hits
    ]
    text = table(rows, ("score", "key", "value", "state", "rule", "anchor"))
    if r.next_page_token:
        text += f"\nmore: --page-token {safe(r.next_page_token)}"
    return text


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
        text += f"\nmore: --page-token {safe(r.next_page_token)}"
    return text


def _share(v: pb.VersionTally) -> str:
    return f"{v.share_milli / 10:.1f}%"


def _threshold(k: pb.ContestedKey) -> str:
    t = k.consensus_threshold
    return f"{t.numerator * 100 / t.denominator:g}%" if t.denominator else "-"


def _queued_header(k: pb.ContestedKey) -> list[str]:
    lines = [f"{key_text(k.key)}: {state(k.state)}"]
    if k.detail:
        lines.append(f"  why: {safe(k.detail)}")
    return lines


def contested(k: pb.ContestedKey) -> str:
    """One queued key as `review list` prints it: the reason, then one line per version
    with its share of the counted vote weight, its voters and its local rule."""
    lines = _queued_header(k)
    voted = any(v.weight for v in k.versions)
    for v in k.versions:
        mark = "*" if v.local_belief else " "
        voters = ", ".join(safe(n) for n in v.voters) or "none"
        value = quoted(v.object) if v.object else f"version {safe(v.version_id)}"
        rule = f", {safe(v.local_rule)}" if v.local_rule else ""
        lines.append(
            f" {mark} {value} {_share(v) if voted else 'no votes'}"
            + (f", voters: {voters}" if voted else "")
            + f" (version {safe(v.version_id[:12])}{rule})"
        )
    return "\n".join(lines)


def contested_detail(k: pb.ContestedKey, h: pb.GetHistoryResponse) -> str:
    """One queued key in full (`review show`): the reason and threshold, then each version
    with its share, weight, voters, local rule and every piece of its evidence."""
    lines = _queued_header(k)
    served = next((v for v in k.versions if v.version_id == k.served_version_id), None)
    lines.append(
        f"  served: {quoted(served.object) if served else safe(k.served_version_id) or '-'}"
        f" (provisionally); consensus needs more than {_threshold(k)} of the counted vote weight"
    )
    held = {v.version_id: v for v in h.versions}
    voted = any(v.weight for v in k.versions)
    for v in k.versions:
        mark = "*" if v.local_belief else " "
        value = quoted(v.object) if v.object else "(no evidence held here)"
        lines.append(f" {mark} {value}  version {safe(v.version_id)}")
        if voted:
            lines.append(f"      share {_share(v)}, weight {v.weight:,}")
            lines.append(f"      voters: {', '.join(safe(n) for n in v.voters) or 'none'}")
        else:
            lines.append("      no votes counted (no peer has voted on this key)")
        lines.append(f"      local rule: {safe(v.local_rule) or '-'}")
        evidence = held[v.version_id].evidence if v.version_id in held else []
        if not evidence:
            lines.append("      evidence: none held on this node")
        lines += [f"      {evidence_line(e)}" for e in evidence]
    return "\n".join(lines)


def review_queue(r: pb.ListContestedResponse) -> str:
    if not r.keys:
        return "the review queue is empty"
    text = "\n".join(contested(k) for k in r.keys)
    if r.next_page_token:
        text += f"\nmore: --page-token {safe(r.next_page_token)}"
    return text


def resolved(r: pb.ResolveContestedResponse) -> str:
    return f"{outcome(r.decision)} by rule {safe(r.decision.rule)}\n{safe(r.note)}"


def erased(r: pb.EraseResponse) -> str:
    line = (
        f"erased {r.evidence_erased} evidence across {r.keys_affected} key(s); "
        f"tombstone {safe(r.erasure_id)}"
    )
    again = [f"{key_text(b.key)}: {safe(b.text)}" for b in r.believed_again]
    return "\n".join([line, *again])


def coverage_line(c: pb.ErasureCoverage) -> str:
    """E.g. "confirmed by 7 of 9 members; waiting: n4, n8"."""
    return safe(c.summary)


def erasures(r: pb.ListErasuresResponse) -> str:
    if not r.erasures:
        return "no erasure is held on this node"
    rows = [
        (
            safe(e.erasure_id),
            show_time(e.erased_at),
            safe(e.scope),
            safe(e.origin_node),
            "complete" if e.complete else "waiting",
            safe(e.summary),
        )
        for e in r.erasures
    ]
    text = table(rows, ("erasure", "erased", "scope", "made on", "state", "coverage"))
    if r.next_page_token:
        text += f"\nmore: --page-token {safe(r.next_page_token)}"
    return text


def erasure_detail(e: pb.ErasureCoverage) -> str:
    lines = [
        f"erasure {safe(e.erasure_id)} ({safe(e.scope)}), made on {safe(e.origin_node)} at "
        f"{show_time(e.erased_at)} by {safe(e.operator)}: {safe(e.reason)}",
        safe(e.summary),
    ]
    revoked = set(e.revoked)
    rows = [
        (
            safe(r.node_id),
            "revoked since" if r.node_id in revoked else "confirmed",
            show_time(r.applied_at),
            str(r.removed),
        )
        for r in e.receipts
    ]
    rows += [(safe(n), "waiting: no receipt heard yet", "-", "-") for n in e.waiting]
    rows += [
        (safe(n), "revoked: not waited for", "-", "-")
        for n in e.revoked
        if n not in {r.node_id for r in e.receipts}
    ]
    lines.append(table(rows, ("member", "receipt", "applied", "removed")))
    return "\n".join(lines)


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
        f"node {safe(r.node_id)} (factnode {safe(r.version)}) listening on "
        f"{safe(r.listen_address)}",
        f"store: {safe(r.database)}",
        f"replica {safe(r.replica)} answering; background work (lease) on "
        f"{safe(r.lease_holder) or 'no replica'}",
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
    elif not r.members:
        lines.append("no peers configured")
    if r.members:
        lines.append(_member_table(r.members))
    if r.quarantined:
        lines.append(
            f"quarantined {n.quarantined}: held from before the text rule, never offered to "
            "peers; remove each with `factnode erase --evidence ID --reason ...`"
        )
        lines.append(
            table(
                [
                    (
                        q.evidence_id,
                        f"{q.key.namespace}/{q.key.subject}/{q.key.predicate}",
                        q.field,
                        q.reason,
                    )
                    for q in r.quarantined
                ],
                ("quarantined evidence", "key", "field", "why"),
            )
        )
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
    text = table(rows, ("peer", "result", "evidence in", "evidence out"))
    failed = [p for p in r.results if not p.ok]
    if failed:
        text += "\n" + "\n".join(
            f"sync with {safe(p.node_id)} ({safe(p.address)}) failed: {safe(p.error)}"
            for p in failed
        )
    return text


def _member_table(members: Iterable[pb.Member]) -> str:
    rows = [
        (
            safe(m.node_id) + (" (this node)" if m.self else ""),
            safe(m.address) or "-",
            show_time(m.last_heard),
            show_time(m.certificate_expires),
            "revoked" if m.revoked else (safe(m.refused) or "member"),
            safe(m.max_anchor),
            str(m.incarnation) if m.incarnation else "-",
        )
        for m in members
    ]
    return table(
        rows, ("member", "address", "last heard", "certificate expires", "state", "cap", "record")
    )


def members(r: pb.ListMembersResponse) -> str:
    lines = [_member_table(r.members)]
    number = r.revocation_list_number
    lines.append(f"revocation list: number {number}" if number else "revocation list: none held")
    return "\n".join(lines)


def revoked(r: pb.RevokeResponse) -> str:
    head = (
        f"revocation list number {r.number} applied"
        if r.applied
        else f"not applied: this node holds list number {r.number}, the same or newer"
    )
    who = ", ".join(map(safe, r.revoked)) if r.revoked else "none of the members this node knows"
    return f"{head}; revoked: {who}"


def restored(r: Any) -> str:
    """An import's summary."""
    differed = (
        "\nthe file's policy differed: its evidence was decided by this node's policy"
        if r.policy_differed
        else ""
    )
    return (
        f"imported into node {safe(r.node_id)}: {r.evidence:,} evidence, {r.tombstones:,} "
        f"tombstones, {r.pins:,} pins replayed; {r.decisions:,} decisions logged{differed}"
    )
