"""Logical backup: a node's evidence set written as a versioned JSON Lines file, and that
file replayed through the write path into an empty node.

Belief is a function of the set of evidence (specification §5), so evidence (retractions
included), erasure tombstones and pins are a complete backup: an import recomputes
beliefs, history, the review queue and the decision log from them; nothing derived is
copied. The file:

- a header: `{"kind": "header", "format": "factnode-export", "version": 1, "node_id",
  "policy_fingerprint", "exported_at", "factnode"}`;
- one line per item in the order the node decided them (`"kind"`: `evidence`,
  `tombstone` or `pin`); instants are integer microseconds since the Unix epoch;
- a trailer: `{"kind": "trailer", "lines": N, "sha256": HEX}`, N the number of lines before
  it and HEX the SHA-256 of their bytes (newlines included).

An import checks the whole file before it writes anything.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

import factnode
from factnode.core import (
    Evidence,
    EvidenceStatus,
    Instant,
    InvalidInput,
    Key,
    Policy,
)
from factnode.core.erasure_bounds import ErasureBound
from factnode.core.policy import policy_fingerprint
from factnode.core.validation import relayed_violations
from factnode.ledger._model import Committed, NotFound, NotUnderReview
from factnode.store import Tombstone, Writes

if TYPE_CHECKING:
    from factnode.ledger import Ledger

FORMAT = "factnode-export"
FORMAT_VERSION = 1
# The most evidence replayed in one write transaction. Evidence recorded at one instant was
# decided in one transaction (a batch shares its clock reading) and is replayed so, since a
# batch logs one decision for a key that a `contradicts` changed where separate
# transactions may log several.
_REPLAY_BATCH = 5000


class BadExport(Exception):
    """The file is not an intact export: names the line and what is wrong with it."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}" if line else reason)
        self.line = line
        self.reason = reason


class ImportRefused(Exception):
    """This node cannot take the file: it is not empty, is another node, or decides by
    another policy (without `force_policy`). Nothing was written."""


@dataclass(frozen=True, slots=True)
class Restored:
    """What an import replayed."""

    node_id: str
    evidence: int
    tombstones: int
    pins: int
    decisions: int
    policy_differed: bool


@dataclass(frozen=True, slots=True)
class _Pin:
    key: Key
    version_id: str
    operator: str
    reason: str
    pinned_at: Instant


@dataclass(slots=True)
class _Checked:
    header: dict[str, Any]
    evidence: int = 0
    tombstones: int = 0
    pins: int = 0
    decayed: set[str] = field(default_factory=set)


def _line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _key(k: Key) -> list[str]:
    return [k.namespace, k.subject, k.predicate]


def _evidence_record(e: Evidence, status: EvidenceStatus, idem: str | None) -> dict[str, Any]:
    return {
        "kind": "evidence",
        "evidence_id": e.evidence_id,
        "key": _key(e.key),
        "object": e.object,
        "version_id": e.version_id,
        "attribution": e.attribution,
        "source": e.source,
        "worth_milli": e.worth_milli,
        "confidence_milli": e.confidence_milli,
        "valid_from": e.valid_from,
        "valid_from_defaulted": e.valid_from_defaulted,
        "recorded_at": e.recorded_at,
        "origin_node": e.origin_node,
        "corrects": e.corrects,
        "contradicts": None if e.contradicts is None else _key(e.contradicts),
        "anchor_cap": e.anchor_cap,
        "origin_recorded_at": e.origin_recorded_at,
        "retracts": e.retracts,
        "status": status.value,
        "idempotency_key": idem,
    }


def _tombstone_record(t: Tombstone, bounds: dict[str, Instant]) -> dict[str, Any]:
    # Its bounds (`core.erasure_bounds`) only where it has any: an export of a node that
    # bounded none reads as before, and a reader that predates bounds ignores the field.
    extra = {"bounds": dict(sorted(bounds.items()))} if bounds else {}
    return {
        "kind": "tombstone",
        "erasure_id": t.erasure_id,
        "scope": t.scope,
        "scope_hash": t.scope_hash,
        "erased_at": t.erased_at,
        "operator": t.operator,
        "reason": t.reason,
        "evidence_ids": list(t.evidence_ids),
        "origin_node": t.origin_node,
        **extra,
    }


def _pin_record(p: _Pin) -> dict[str, Any]:
    return {
        "kind": "pin",
        "key": _key(p.key),
        "version_id": p.version_id,
        "operator": p.operator,
        "reason": p.reason,
        "pinned_at": p.pinned_at,
    }


def export_lines(ledger: Ledger) -> Iterator[bytes]:
    """The export file, line by line, read in one snapshot of the store. Tombstones and pins
    come before the first evidence recorded after them, so a replay meets each item when the
    node did."""
    digest = hashlib.sha256()
    lines = 0

    def out(record: dict[str, Any]) -> bytes:
        nonlocal lines
        data = _line(record)
        digest.update(data)
        lines += 1
        return data

    with ledger.repo.snapshot() as tx:
        yield out(
            {
                "kind": "header",
                "format": FORMAT,
                "version": FORMAT_VERSION,
                "node_id": ledger.node_id,
                "policy_fingerprint": policy_fingerprint(ledger.policy),
                "exported_at": ledger.clock.now(),
                "factnode": factnode.__version__,
            }
        )
        tombstones = tx.exported_tombstones()
        bounds = tx.erasure_bounds([t.erasure_id for t in tombstones])
        others: list[tuple[Instant, dict[str, Any]]] = sorted(
            [(t.erased_at, _tombstone_record(t, bounds.get(t.erasure_id, {}))) for t in tombstones]
            + [(p[4], _pin_record(_Pin(*p))) for p in tx.exported_pins()],
            key=lambda pair: pair[0],
        )
        others.reverse()  # popped from the end, oldest first
        for e, status, idem in tx.exported_evidence():
            while others and others[-1][0] < e.recorded_at:
                yield out(others.pop()[1])
            yield out(_evidence_record(e, status, idem))
        while others:
            yield out(others.pop()[1])
    yield _line({"kind": "trailer", "lines": lines, "sha256": digest.hexdigest()})


# --- reading a file -------------------------------------------------------------------


def _field(record: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = record.get(name)
    if (isinstance(value, bool) and kind is int) or not isinstance(value, kind):
        raise ValueError(f"{name}: expected {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def _key_of(record: dict[str, Any], name: str) -> Key:
    value = record.get(name)
    if not (isinstance(value, list) and len(value) == 3 and all(isinstance(x, str) for x in value)):
        raise ValueError(f"{name}: expected [namespace, subject, predicate], got {value!r}")
    return Key(*value)


def _optional(record: dict[str, Any], name: str, kind: type) -> Any:
    return None if record.get(name) is None else _field(record, name, kind)


def _evidence_of(r: dict[str, Any], policy: Policy) -> tuple[Evidence, EvidenceStatus, str | None]:
    e = Evidence(
        evidence_id=_field(r, "evidence_id", str),
        key=_key_of(r, "key"),
        object=_field(r, "object", str),
        version_id=_field(r, "version_id", str),
        attribution=_field(r, "attribution", str),
        source=_field(r, "source", str),
        worth_milli=_field(r, "worth_milli", int),
        confidence_milli=_field(r, "confidence_milli", int),
        valid_from=_field(r, "valid_from", int),
        valid_from_defaulted=_field(r, "valid_from_defaulted", bool),
        recorded_at=_field(r, "recorded_at", int),
        origin_node=_field(r, "origin_node", str),
        corrects=_optional(r, "corrects", str),
        contradicts=None if r.get("contradicts") is None else _key_of(r, "contradicts"),
        anchor_cap=_optional(r, "anchor_cap", str),
        origin_recorded_at=_optional(r, "origin_recorded_at", int),
        retracts=_field(r, "retracts", bool),
    )
    # A store may hold evidence without an origin (retractions migrated by revision 0007
    # from a store that had no node id yet): what it holds is exported and restored.
    problems = [
        p
        for p in relayed_violations(e, policy)
        if not (p.field == "origin_node" and e.origin_node == "")
    ]
    if problems:
        raise ValueError("; ".join(f"{p.field}: {p.reason}" for p in problems))
    try:
        status = EvidenceStatus(_field(r, "status", str))
    except ValueError:
        raise ValueError(f"status: not one of ACTIVE, REJECTED, DECAYED: {r['status']!r}") from None
    return e, status, _optional(r, "idempotency_key", str)


def _bounds_of(r: dict[str, Any]) -> dict[str, Instant]:
    """A tombstone record's bounds, by the node that made each (none in older exports)."""
    bounds = r.get("bounds", {})
    if not isinstance(bounds, dict) or not all(
        isinstance(n, str) and isinstance(at, int) and not isinstance(at, bool)
        for n, at in bounds.items()
    ):
        raise ValueError("bounds: expected an object of node ids to times")
    return bounds


def _tombstone_of(r: dict[str, Any]) -> Tombstone:
    _bounds_of(r)
    ids = _field(r, "evidence_ids", list)
    if not all(isinstance(x, str) for x in ids):
        raise ValueError("evidence_ids: expected a list of evidence ids")
    scope = _field(r, "scope", str)
    if scope not in ("evidence", "key", "subject"):
        raise ValueError(f"scope: not one of evidence, key, subject: {scope!r}")
    return Tombstone(
        erasure_id=_field(r, "erasure_id", str),
        scope=scope,
        scope_hash=_field(r, "scope_hash", str),
        erased_at=_field(r, "erased_at", int),
        operator=_field(r, "operator", str),
        reason=_field(r, "reason", str),
        evidence_ids=tuple(ids),
        origin_node=_field(r, "origin_node", str),
    )


def _pin_of(r: dict[str, Any]) -> _Pin:
    return _Pin(
        _key_of(r, "key"),
        _field(r, "version_id", str),
        _field(r, "operator", str),
        _field(r, "reason", str),
        _field(r, "pinned_at", int),
    )


def _records(stream: IO[bytes]) -> Iterator[tuple[int, bytes, dict[str, Any]]]:
    for n, raw in enumerate(stream, 1):
        try:
            record = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BadExport(n, f"not a JSON object ({exc})") from None
        if not isinstance(record, dict) or not isinstance(record.get("kind"), str):
            raise BadExport(n, 'not a JSON object with a "kind"')
        yield n, raw, record


def _item(n: int, record: dict[str, Any], policy: Policy) -> Any:
    kind = record["kind"]
    try:
        if kind == "evidence":
            return _evidence_of(record, policy)
        if kind == "tombstone":
            return _tombstone_of(record)
        if kind == "pin":
            return _pin_of(record)
    except ValueError as exc:
        raise BadExport(n, f"{kind}: {exc}") from None
    raise BadExport(n, f"unknown kind {kind!r}")


def _check_header(record: dict[str, Any]) -> dict[str, Any]:
    if record.get("kind") != "header" or record.get("format") != FORMAT:
        raise BadExport(1, f"not a factnode export (the first line is not a {FORMAT} header)")
    version = record.get("version")
    if version != FORMAT_VERSION:
        raise BadExport(
            1, f"format version {version!r}: this factnode reads version {FORMAT_VERSION}"
        )
    for name in ("node_id", "policy_fingerprint"):
        if not isinstance(record.get(name), str):
            raise BadExport(1, f"header: {name} is missing")
    if not isinstance(record.get("exported_at"), int):
        raise BadExport(1, "header: exported_at is missing")
    return record


def check_export(stream: IO[bytes], policy: Policy) -> _Checked:
    """Reads the whole file and checks it: the header, every item (each field, and each
    evidence id against its content), and the trailer's line count and checksum. Raises
    BadExport naming the first line at fault."""
    digest = hashlib.sha256()
    checked: _Checked | None = None
    for n, raw, record in _records(stream):
        if checked is None:
            checked = _Checked(_check_header(record))
        elif record["kind"] == "trailer":
            if next(stream, None) is not None:
                raise BadExport(n + 1, "lines follow the trailer")
            if record.get("lines") != n - 1:
                raise BadExport(n, f"the trailer counts {record.get('lines')!r} lines, not {n - 1}")
            if record.get("sha256") != digest.hexdigest():
                raise BadExport(n, "checksum mismatch: the file was changed or damaged")
            return checked
        else:
            item = _item(n, record, policy)
            if isinstance(item, tuple):
                checked.evidence += 1
                if item[1] is EvidenceStatus.DECAYED:
                    checked.decayed.add(item[0].evidence_id)
            elif isinstance(item, Tombstone):
                checked.tombstones += 1
            else:
                checked.pins += 1
        digest.update(raw if raw.endswith(b"\n") else raw + b"\n")
    if checked is None:
        raise BadExport(0, "the file is empty")
    raise BadExport(0, "the file ends without its trailer: it is incomplete")


# --- replaying it ---------------------------------------------------------------------


class _ReplayClock:
    """The time each replayed item was first decided at."""

    def __init__(self, at: Instant) -> None:
        self.at = at

    def now(self) -> Instant:
        return self.at


def _refusal(ledger: Ledger, header: dict[str, Any], force_policy: bool) -> str | None:
    if header["node_id"] != ledger.node_id:
        return (
            f"the file was exported from node {header['node_id']!r} and this node is "
            f"{ledger.node_id!r}: restore it into an empty node started with node_id = "
            f"{header['node_id']!r} (FACTNODE_NODE_ID, or node_id in its configuration file)"
        )
    if not force_policy and header["policy_fingerprint"] != policy_fingerprint(ledger.policy):
        return (
            "the file was exported under another policy (its fingerprint differs from this "
            "node's): its evidence would be decided otherwise here; import it with "
            "--force-policy (ImportChunk.force_policy) to decide it by this node's policy"
        )
    with ledger.repo.read() as tx:
        c = tx.counts()
    if c.evidence or c.decayed or c.decisions or c.erasures:
        return (
            f"this node is not empty ({c.evidence} evidence, {c.decisions} decisions, "
            f"{c.erasures} erasures): import restores into an empty node only"
        )
    return None


def restore(ledger: Ledger, stream: IO[bytes], *, force_policy: bool = False) -> Restored:
    """Checks the export in `stream` (seekable), then replays it into this empty node through
    the write path: evidence in the order it was decided (with its recorded time, origin and
    idempotency key), each tombstone and pin when it was made; evidence decayed at export is
    decayed again as of the export. Raises BadExport or ImportRefused, writing nothing."""
    checked = check_export(stream, ledger.policy)
    refused = _refusal(ledger, checked.header, force_policy)
    if refused:
        raise ImportRefused(refused)
    stream.seek(0)
    clock = _ReplayClock(checked.header["exported_at"])
    replay = type(ledger)(ledger.repo, ledger.policy, ledger.node_id, clock)
    # The federation and watchers follow the replay, and its votes are signed as the node's.
    replay.serving._observers = ledger.serving._observers
    replay.signing = ledger.signing
    with closing(replay):  # its served memory stops watching the node's repository
        erased = _replay(replay, clock, stream, checked)
    if erased:
        ledger.repo.after_erase()
    with ledger.repo.read() as tx:
        decisions = tx.counts().decisions
    differed = checked.header["policy_fingerprint"] != policy_fingerprint(ledger.policy)
    return Restored(
        ledger.node_id, checked.evidence, checked.tombstones, checked.pins, decisions, differed
    )


def _replay(replay: Ledger, clock: _ReplayClock, stream: IO[bytes], checked: _Checked) -> bool:
    """Replays the checked export in `stream` through `replay`; True when an erasure erased
    something."""
    batch: list[tuple[Evidence, str | None]] = []
    erased = False

    def flush() -> None:
        if batch:
            clock.at = batch[-1][0].recorded_at
            replay.ingest(batch)
            batch.clear()

    for n, _raw, record in _records(stream):
        if record["kind"] in ("header", "trailer"):
            continue
        item = _item(n, record, replay.policy)
        if isinstance(item, tuple):
            if batch and (
                batch[-1][0].recorded_at != item[0].recorded_at or len(batch) >= _REPLAY_BATCH
            ):
                flush()
            batch.append((item[0], item[2]))
            continue
        flush()
        if isinstance(item, Tombstone):
            erased = _replay_erasure(replay, clock, item, _bounds_of(record)) or erased
        else:
            _replay_pin(replay, clock, item)
    flush()
    if checked.decayed:
        clock.at = checked.header["exported_at"]
        replay.run_decay(clock.at)
    return erased


def _replay_erasure(
    replay: Ledger, clock: _ReplayClock, t: Tombstone, bounds: dict[str, Instant]
) -> bool:
    """Records the tombstone and its bounds, erasing what it covers of the evidence replayed
    so far (none where the export was consistent); True when something was erased."""
    clock.at = t.erased_at
    fx = Committed()
    with replay.repo.write() as tx:
        replay.serving.announce(tx, fx)
        listed = [ErasureBound(t.erasure_id, node, at) for node, at in sorted(bounds.items())]
        replay.serving.put_bounds(tx, listed, fx)
        covered = tx.evidence_covered(t)
        replay.forgetting.apply_erasure(tx, t, covered, fx)
    return bool(covered)


def _replay_pin(replay: Ledger, clock: _ReplayClock, p: _Pin) -> None:
    """Resolves the key as the operator did; a pin the replayed state does not take (the key
    was under review through peers' votes, which a backup does not hold) is kept as it
    was, waiting for the key to split again, without a decision."""
    clock.at = p.pinned_at
    try:
        replay.resolve(
            p.key, version_id=p.version_id, obj=None, reason=p.reason, operator=p.operator
        )
    except (NotUnderReview, NotFound, InvalidInput):
        with replay.repo.write() as tx:
            tx.apply(Writes(pins=[(p.key, p.version_id, p.operator, p.reason, p.pinned_at)]))
