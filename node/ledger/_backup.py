"""Logical backup: a node's evidence set written as a versioned JSON Lines file, and that
file replayed through the write path into an empty node.

Belief is a function of the set of evidence (specification §5), so evidence (retractions
included), erasure tombstones and pins are a complete backup: an import recomputes
beliefs, history, the review queue and the decision log from them; nothing derived is
copied. The file:

- a header: `{"kind": "header", "format": "factnode-export", "version": 2, "node_id",
  "policy_fingerprint", "exported_at", "factnode"}`;
- (version 2) the federation's state the node holds, which no replay rebuilds: the
  revocation list (`"kind": "revocation_list"`, its DER in base64) and every member record
  (`"kind": "member"`), so a restore forgets no revocation (specification §6);
- one line per item in the order the node decided them (`"kind"`: `evidence`,
  `tombstone` (with its erasure bounds and, where held, its origin's signature) or `pin`);
  instants are integer microseconds since the Unix epoch;
- then the confirmations (`"kind": "confirmation"`) and erasure receipts (`"kind":
  "receipt"`, each member's signed statement that it applied an erasure) the node holds;
- a trailer: `{"kind": "trailer", "lines": N, "sha256": HEX}`, N the number of lines before
  it and HEX the SHA-256 of their bytes (newlines included).

Version 1 files (no revocation list, no member records) import as before. An import checks
the whole file before it writes anything, and claims the store in the same transaction that
finds it empty (`IMPORT_META`), so of two imports into one store (two replicas of one
PostgreSQL database) one runs and the other is refused naming it.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field, replace
from typing import IO, TYPE_CHECKING, Any

import factnode
from factnode.core import (
    Confirmation,
    Evidence,
    EvidenceStatus,
    Instant,
    InvalidInput,
    Key,
    Policy,
    confirmed_at,
)
from factnode.core.erasure_bounds import ErasureBound
from factnode.core.members import MemberRecord, record_problem
from factnode.core.policy import policy_fingerprint
from factnode.core.receipts import Receipt, receipt_problem
from factnode.core.signed import votes_numbered_after
from factnode.core.validation import relayed_violations
from factnode.ledger._model import Committed, NotFound, NotUnderReview
from factnode.ledger._serving import VOTE_SEQ_META
from factnode.store import StoredMember, Tombstone, Writes, replica_name

if TYPE_CHECKING:
    from factnode.ledger import Ledger

log = logging.getLogger("factnode.ledger")

FORMAT = "factnode-export"
FORMAT_VERSION = 2
READS_VERSIONS = (1, 2)
# The node_meta name under which the revocation list a node holds is kept (base64 DER).
REVOCATION_META = "revocation_list"
# Held while an import replays (who runs it): a second import is refused naming it.
IMPORT_META = "import_in_progress"
# What the last import restored (which file, when, by which replica): kept, so a store an
# import filled says where its data came from, and `serve --restore` knows a file it restored.
RESTORED_META = "restored_from"
# Set by an import, cleared by the first completed sync round (`factnode.server`): until
# then a federated node serves no data, which may hold what the fleet has since erased.
AWAITING_ROUND_META = "restored_awaiting_round"
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
    # The federation's state the file carried, for a running roster to take (`Roster.revoke`,
    # `Roster.take`); also written to the store for a roster made after the import.
    revocation_list: bytes | None = None
    members: tuple[MemberRecord, ...] = ()


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
    confirmations: list[Confirmation] = field(default_factory=list)
    receipts: list[Receipt] = field(default_factory=list)
    revocation_list: bytes | None = None
    members: list[StoredMember] = field(default_factory=list)
    sha256: str = ""


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


def _confirmation_record(c: Confirmation) -> dict[str, Any]:
    return {
        "kind": "confirmation",
        "evidence_id": c.evidence_id,
        "signer": c.signer,
        "confirmed_at": c.confirmed_at,
        "received_at": c.received_at,
        "signature": base64.b64encode(c.signature).decode("ascii"),
    }


def _confirmation_of(r: dict[str, Any]) -> Confirmation:
    evidence_id = _field(r, "evidence_id", str)
    if len(evidence_id) != 32 or any(ch not in "0123456789abcdef" for ch in evidence_id):
        raise ValueError("evidence_id: not an evidence id (32 lowercase hex digits)")
    return Confirmation(
        evidence_id,
        _field(r, "signer", str),
        _field(r, "confirmed_at", int),
        _field(r, "received_at", int),
        _base64(r, "signature"),
    )


def _receipt_record(r: Receipt) -> dict[str, Any]:
    return {
        "kind": "receipt",
        "erasure_id": r.erasure_id,
        "node_id": r.node,
        "applied_at": r.applied_at,
        "removed": r.removed,
        "signature": base64.b64encode(r.signature).decode("ascii"),
    }


def _receipt_of(r: dict[str, Any]) -> Receipt:
    receipt = Receipt(
        _field(r, "erasure_id", str),
        _field(r, "node_id", str),
        _field(r, "applied_at", int),
        _field(r, "removed", int),
        _base64(r, "signature"),
    )
    problem = receipt_problem(receipt)
    if problem:
        raise ValueError(problem)
    return receipt


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
        **({"signature": base64.b64encode(t.signature).decode()} if t.signature else {}),
    }


def _member_record(m: StoredMember) -> dict[str, Any]:
    r = m.record
    return {
        "kind": "member",
        "node_id": r.node_id,
        "address": r.address,
        "certificate": r.certificate.decode("ascii"),
        "incarnation": r.incarnation,
        "signature": base64.b64encode(r.signature).decode(),
        "revoked": m.revoked,
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
        revocations = tx.meta(REVOCATION_META)
        if revocations:
            yield out({"kind": "revocation_list", "der": revocations})
        for m in tx.member_records():
            yield out(_member_record(m))
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
        for c in tx.exported_confirmations():
            yield out(_confirmation_record(c))
        for r in sorted(tx.all_receipts_signed(), key=lambda r: (r.erasure_id, r.node)):
            yield out(_receipt_record(r))
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
    if status is EvidenceStatus.DECAYED:
        # Marked by the decay of earlier versions, which counted age from the event time:
        # the claim is held again and expires as a pure function of it (specification §6).
        status = EvidenceStatus.ACTIVE
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


def _base64(r: dict[str, Any], name: str) -> bytes:
    try:
        return base64.b64decode(_field(r, name, str), validate=True)
    except binascii.Error:
        raise ValueError(f"{name}: not base64") from None


def _tombstone_of(r: dict[str, Any]) -> Tombstone:
    _bounds_of(r)
    signature = _base64(r, "signature") if r.get("signature") is not None else b""
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
        signature=signature,
    )


def _member_of(r: dict[str, Any]) -> StoredMember:
    record = MemberRecord(
        node_id=_field(r, "node_id", str),
        address=_field(r, "address", str),
        certificate=_field(r, "certificate", str).encode("ascii", "replace"),
        incarnation=_field(r, "incarnation", int),
        signature=_base64(r, "signature"),
    )
    problem = record_problem(record)
    if problem:
        raise ValueError(problem)
    return StoredMember(record, _field(r, "revoked", bool))


def _revocation_list_of(r: dict[str, Any]) -> bytes:
    der = _base64(r, "der")
    if not der:
        raise ValueError("der: empty")
    return der


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
        if kind == "member":
            return _member_of(record)
        if kind == "revocation_list":
            return _revocation_list_of(record)
        if kind == "confirmation":
            return _confirmation_of(record)
        if kind == "receipt":
            return _receipt_of(record)
    except ValueError as exc:
        raise BadExport(n, f"{kind}: {exc}") from None
    raise BadExport(n, f"unknown kind {kind!r}")


def _check_header(record: dict[str, Any]) -> dict[str, Any]:
    if record.get("kind") != "header" or record.get("format") != FORMAT:
        raise BadExport(1, f"not a factnode export (the first line is not a {FORMAT} header)")
    version = record.get("version")
    if version not in READS_VERSIONS or isinstance(version, bool):
        readable = ", ".join(str(v) for v in READS_VERSIONS)
        raise BadExport(1, f"format version {version!r}: this factnode reads versions {readable}")
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
            checked.sha256 = digest.hexdigest()
            return checked
        else:
            item = _item(n, record, policy)
            if isinstance(item, tuple):
                checked.evidence += 1
            elif isinstance(item, Confirmation):
                checked.confirmations.append(item)
            elif isinstance(item, Receipt):
                checked.receipts.append(item)
            elif isinstance(item, Tombstone):
                checked.tombstones += 1
            elif isinstance(item, StoredMember):
                checked.members.append(item)
            elif isinstance(item, bytes):
                if checked.revocation_list is not None:
                    raise BadExport(n, "revocation_list: the file holds a second one")
                checked.revocation_list = item
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
    """Why the file's header does not fit this node, or None."""
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
    return None


def _description(checked: _Checked) -> str:
    """Which import this is, as `IMPORT_META` and `RESTORED_META` name it."""
    exported = dt.datetime.fromtimestamp(checked.header["exported_at"] / 1e6, dt.UTC)
    now = dt.datetime.now(dt.UTC)
    return (
        f"the export of node {checked.header['node_id']!r} made {exported:%Y-%m-%dT%H:%M:%SZ} "
        f"(sha256 {checked.sha256[:16]}), imported by replica {replica_name()} "
        f"from {now:%Y-%m-%dT%H:%M:%SZ}"
    )


def _claim(ledger: Ledger, description: str) -> None:
    """Claims the store for this import: in one write transaction (writers are serialized,
    on PostgreSQL across replicas), finds it empty and no other import running, and marks it
    as this one's. ImportRefused naming the import that came first, and nothing written."""
    with ledger.repo.write() as tx:
        running = tx.meta(IMPORT_META)
        if running:
            raise ImportRefused(
                f"another import into this store came first and is running or did not "
                f"finish: {running}; nothing of this file was written"
            )
        c = tx.counts()
        if c.evidence or c.decayed or c.decisions or c.erasures:
            restored = tx.meta(RESTORED_META)
            raise ImportRefused(
                f"this node is not empty ({c.evidence} evidence, {c.decisions} decisions, "
                f"{c.erasures} erasures): import restores into an empty node only"
                + (f"; it holds {restored}" if restored else "")
            )
        # The replay casts this node's votes at the export's times, by a clock running in the
        # past: numbered after the present instead, they outnumber every vote it signed before
        # the restore, and none repeats one of its numbers (`core.signed.votes_numbered_after`).
        counter = votes_numbered_after(int(tx.meta(VOTE_SEQ_META) or 0), 0, ledger.clock.now())
        tx.apply(Writes(meta={IMPORT_META: description, VOTE_SEQ_META: str(counter)}))


def _federation_state(ledger: Ledger, checked: _Checked, description: str) -> None:
    """Keeps the revocation list and member records the file carried (unless the store holds
    its own already: a running roster takes the file's then, `Restored`), marks the store as
    restored, awaiting its first sync round, and ends the claim."""
    with ledger.repo.write() as tx:
        meta = {IMPORT_META: "", RESTORED_META: description, AWAITING_ROUND_META: description}
        if checked.revocation_list is not None and not tx.meta(REVOCATION_META):
            meta[REVOCATION_META] = base64.b64encode(checked.revocation_list).decode()
        held = {m.record.node_id for m in tx.member_records()}
        members = [m for m in checked.members if m.record.node_id not in held]
        tx.apply(Writes(meta=meta, members=members))


def _release(ledger: Ledger) -> None:
    """Ends a claim whose import failed: the store may take another (if still empty)."""
    with ledger.repo.write() as tx:
        tx.apply(Writes(meta={IMPORT_META: ""}))


def restored_from(ledger: Ledger) -> str | None:
    """What the last import into this store restored (`RESTORED_META`), or None."""
    with ledger.repo.read() as tx:
        return tx.meta(RESTORED_META) or None


def restore(
    ledger: Ledger,
    stream: IO[bytes],
    *,
    force_policy: bool = False,
    check_revocations: Callable[[bytes], str] | None = None,
) -> Restored:
    """Checks the export in `stream` (seekable), then replays it into this empty node through
    the write path: evidence in the order it was decided (with its recorded time, origin and
    idempotency key), each tombstone and pin when it was made; evidence decayed at export is
    decayed again as of the export. The revocation list and member records it carries are
    kept; `check_revocations` (a federated node's: is it the CA's list?) says why the list is
    not acceptable, or "". Raises BadExport or ImportRefused, writing nothing."""
    checked = check_export(stream, ledger.policy)
    refused = _refusal(ledger, checked.header, force_policy)
    if not refused and checked.revocation_list is not None and check_revocations is not None:
        problem = check_revocations(checked.revocation_list)
        refused = f"the file's revocation list is refused: {problem}" if problem else None
    if refused:
        raise ImportRefused(refused)
    description = _description(checked)
    _claim(ledger, description)
    try:
        stream.seek(0)
        clock = _ReplayClock(checked.header["exported_at"])
        replay = type(ledger)(ledger.repo, ledger.policy, ledger.node_id, clock)
        # The federation and watchers follow the replay, and its votes are signed as the node's.
        replay.serving._observers = ledger.serving._observers
        replay.signing = ledger.signing
        with closing(replay):  # its served memory stops watching the node's repository
            erased = _replay(replay, clock, stream, checked)
        _federation_state(ledger, checked, description)
    except BaseException:
        _release(ledger)
        raise
    if erased:
        ledger.repo.after_erase()
    with ledger.repo.read() as tx:
        decisions = tx.counts().decisions
    differed = checked.header["policy_fingerprint"] != policy_fingerprint(ledger.policy)
    log.info("restored %s", description)
    return Restored(
        ledger.node_id,
        checked.evidence,
        checked.tombstones,
        checked.pins,
        decisions,
        differed,
        checked.revocation_list,
        tuple(m.record for m in checked.members),
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
        if record["kind"] in (
            "header",
            "trailer",
            "member",
            "revocation_list",
            "confirmation",
            "receipt",
        ):
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
    if checked.confirmations:
        clock.at = checked.header["exported_at"]
        _replay_confirmations(replay, clock, checked.confirmations)
    if checked.receipts:
        _replay_receipts(replay, checked.receipts)
    return erased


def _replay_receipts(replay: Ledger, receipts: list[Receipt]) -> None:
    """Keeps the export's erasure receipts of the erasures replayed, as they were signed (an
    import replays every erasure without a receipt of its own: the export's say when each
    member applied it)."""
    fx = Committed()
    with replay.repo.write() as tx:
        replay.serving.announce(tx, fx)
        held = tx.known_erasures({r.erasure_id for r in receipts})
        replay.serving.put_receipts(tx, [r for r in receipts if r.erasure_id in held], fx)


def _replay_confirmations(replay: Ledger, clock: _ReplayClock, held: list[Confirmation]) -> None:
    """Keeps the export's confirmations of the evidence replayed (not of erased evidence),
    moves each one's `confirmed_at` as they count here, and recomputes their keys as of the
    export."""
    fx = Committed()
    with replay.repo.write() as tx:
        replay.serving.announce(tx, fx)
        evidence = tx.evidence({c.evidence_id for c in held})
        kept = [c for c in held if c.evidence_id in evidence]
        moved = []
        for e in evidence.values():
            counted = confirmed_at(e, kept, replay.policy, replay.node_id)
            if counted != e.confirmed:
                moved.append(replace(e, confirmed_at=counted))
        replay.serving.apply(tx, Writes(confirmations=kept, confirmed=moved), fx)
        keys = {e.key for e in moved}
        replay.serving.refresh(tx, tx.key_states(keys), clock.now(), fx)


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
        replay.forgetting.apply_erasure(tx, t, covered, fx, receipt=False)
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
