"""Every request checked against the API's documented rules, one checker per message type.

A request that breaks a rule is InvalidInput listing every bad field, before the servicer
reads or writes anything. Rules that need the node's state (a known trust anchor, a key
that exists) stay with the ledger; these are the ones the proto's comments state.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from factnode import _wire as wire
from factnode import tokens
from factnode.api.v1 import factnode_pb2 as pb
from factnode.core import FieldViolation, InvalidInput, recall
from factnode.core.validation import (
    MAX_KEY_PART_BYTES,
    MAX_NODE_ID_BYTES,
    MAX_OBJECT_BYTES,
    MAX_REASON_BYTES,
    check_id,
    check_node_id,
    check_text,
)
from factnode.federation.trust import MAX_REVOCATION_LIST_BYTES

_TIMESTAMP = "google.protobuf.Timestamp"

Out = list[FieldViolation]


def _timestamps(msg: Message, path: str, out: Out) -> None:
    """Every set Timestamp anywhere in `msg` must lie in 0001-01-01..9999-12-31.

    Only the fields that can lead to a Timestamp are visited (`_timestamp_fields`): walking
    every set field of every request cost SubmitFact about 8 us of its event loop's time."""
    for fd, timestamp in _timestamp_fields(msg.DESCRIPTOR):
        name = f"{path}{fd.name}"
        if fd.is_repeated:
            items = [(f"{name}[{i}]", item) for i, item in enumerate(getattr(msg, fd.name))]
        elif msg.HasField(fd.name):
            items = [(name, getattr(msg, fd.name))]
        else:
            continue
        for where, item in items:
            if timestamp:
                wire.instant(item, where, out)
            else:
                _timestamps(item, f"{where}.", out)


@functools.cache
def _timestamp_fields(message: Descriptor) -> tuple[tuple[FieldDescriptor, bool], ...]:
    """The message fields of `message` that are, or lead to, a Timestamp (True: is one), in
    field-number order; map entries are not entered."""
    return tuple(
        (fd, fd.message_type.full_name == _TIMESTAMP)
        for fd in sorted(message.fields, key=lambda f: f.number)
        if fd.message_type is not None and _leads_to_timestamp(fd.message_type, frozenset())
    )


def _leads_to_timestamp(message: Descriptor, seen: frozenset[str]) -> bool:
    if message.full_name == _TIMESTAMP:
        return True
    if message.GetOptions().map_entry or message.full_name in seen:
        return False
    inner = seen | {message.full_name}
    return any(
        fd.message_type is not None and _leads_to_timestamp(fd.message_type, inner)
        for fd in message.fields
    )


def _key(out: Out, key: pb.Key, prefix: str = "key.") -> None:
    for part in ("namespace", "subject", "predicate"):
        check_text(out, f"{prefix}{part}", getattr(key, part), MAX_KEY_PART_BYTES, required=True)


def _page(out: Out, msg: Any, kind: str) -> None:
    if msg.page_size < 0:
        out.append(FieldViolation("page_size", "must not be negative"))
    try:
        tokens.check(msg.page_token, kind, "page_token")
    except InvalidInput as exc:
        out.extend(exc.violations)


def _keyed(out: Out, msg: Any) -> None:
    _key(out, msg.key)


def _list_beliefs(out: Out, msg: pb.ListBeliefsRequest) -> None:
    check_text(out, "namespace", msg.namespace, MAX_KEY_PART_BYTES, required=True)
    if msg.HasField("subject"):
        check_text(out, "subject", msg.subject, MAX_KEY_PART_BYTES, required=True)
        if msg.subject_prefix:
            out.append(FieldViolation("subject_prefix", "give either subject or subject_prefix"))
    check_text(out, "subject_prefix", msg.subject_prefix, MAX_KEY_PART_BYTES, required=False)
    _page(out, msg, tokens.KEYS)


def _list_subjects(out: Out, msg: pb.ListSubjectsRequest) -> None:
    check_text(out, "namespace", msg.namespace, MAX_KEY_PART_BYTES, required=True)
    check_text(out, "subject_prefix", msg.subject_prefix, MAX_KEY_PART_BYTES, required=False)
    _page(out, msg, tokens.SUBJECTS)


def _submit_fact(out: Out, msg: pb.SubmitFactRequest) -> None:
    # The fact is checked with the policy (`validation.violations_of`); its vectors here.
    if len(msg.embeddings) > recall.MAX_EMBEDDINGS:
        out.append(FieldViolation("embeddings", f"at most {recall.MAX_EMBEDDINGS} vectors"))
    for i, e in enumerate(msg.embeddings):
        out.extend(recall.embedding_violations(wire.embedding(e), f"embeddings[{i}]"))


def _search_beliefs(out: Out, msg: pb.SearchBeliefsRequest) -> None:
    # The words, filters and view are checked with the policy (`recall.search`); the
    # token's search fingerprint by the ledger.
    if msg.HasField("embedding"):
        out.extend(recall.embedding_violations(wire.embedding(msg.embedding), "embedding"))
    try:
        tokens.check(msg.page_token, tokens.SEARCH, "page_token")
    except InvalidInput as exc:
        out.extend(exc.violations)


def _list_erasures(out: Out, msg: pb.ListErasuresRequest) -> None:
    _page(out, msg, tokens.ERASURES)


def _get_erasure(out: Out, msg: pb.GetErasureRequest) -> None:
    check_id(out, "erasure_id", msg.erasure_id)


def _retract(out: Out, msg: pb.RetractRequest) -> None:
    _key(out, msg.key)
    if msg.HasField("object"):
        check_text(out, "object", msg.object, MAX_OBJECT_BYTES, required=True)
    check_text(out, "reason", msg.reason, MAX_REASON_BYTES, required=False)
    # Anchor, source, worth and confidence are checked with the policy (make_retraction).


def _list_decisions(out: Out, msg: pb.ListDecisionsRequest) -> None:
    if msg.HasField("key"):
        _key(out, msg.key)
    check_text(out, "namespace", msg.namespace, MAX_KEY_PART_BYTES, required=False)
    _page(out, msg, tokens.DECISIONS)


def _watch_beliefs(out: Out, msg: pb.WatchBeliefsRequest) -> None:
    if msg.HasField("namespace"):
        check_text(out, "namespace", msg.namespace, MAX_KEY_PART_BYTES, required=True)
    try:
        tokens.check(msg.resume_token, tokens.CHANGES, "resume_token")
    except InvalidInput as exc:
        out.extend(exc.violations)


def _list_contested(out: Out, msg: pb.ListContestedRequest) -> None:
    check_text(out, "namespace", msg.namespace, MAX_KEY_PART_BYTES, required=False)
    _page(out, msg, tokens.QUEUE)


def _operator(out: Out, msg: Any) -> None:
    check_text(out, "reason", msg.reason, MAX_REASON_BYTES, required=True)
    # Empty means the caller's identity, filled in by the servicer.
    check_text(out, "operator", msg.operator, MAX_NODE_ID_BYTES, required=False)


def _resolve_contested(out: Out, msg: pb.ResolveContestedRequest) -> None:
    _key(out, msg.key)
    choice = msg.WhichOneof("choice")
    if choice is None:
        out.append(FieldViolation("choice", "give one of version_id or object"))
    elif choice == "version_id":
        check_id(out, "version_id", msg.version_id)
    else:
        check_text(out, "object", msg.object, MAX_OBJECT_BYTES, required=True)
    _operator(out, msg)


def _erase(out: Out, msg: pb.EraseRequest) -> None:
    scope = msg.WhichOneof("scope")
    if scope is None:
        out.append(FieldViolation("scope", "give one of evidence_id, key or subject"))
    elif scope == "evidence_id":
        check_id(out, "evidence_id", msg.evidence_id)
    elif scope == "key":
        _key(out, msg.key)
    else:
        for part in ("namespace", "subject"):
            value = getattr(msg.subject, part)
            check_text(out, f"subject.{part}", value, MAX_KEY_PART_BYTES, required=True)
    _operator(out, msg)


def _sync_now(out: Out, msg: pb.SyncNowRequest) -> None:
    if msg.peer_node_id:
        check_node_id(out, "peer_node_id", msg.peer_node_id)


def _revoke(out: Out, msg: pb.RevokeRequest) -> None:
    if not msg.revocation_list:
        out.append(
            FieldViolation("revocation_list", "required: the file `factnode certs revoke` wrote")
        )
    elif len(msg.revocation_list) > MAX_REVOCATION_LIST_BYTES:
        out.append(
            FieldViolation(
                "revocation_list",
                f"{len(msg.revocation_list)} bytes; at most {MAX_REVOCATION_LIST_BYTES}",
            )
        )


_BACKUP_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


def _backup(out: Out, msg: pb.BackupRequest) -> None:
    if not _BACKUP_NAME.fullmatch(msg.name):
        out.append(
            FieldViolation(
                "name",
                "a file name of letters, digits, '.', '-' and '_' (at most 128, not "
                "starting with '.'), without a directory",
            )
        )


def _nothing(out: Out, msg: Any) -> None:
    """Only the times every request must keep in range; the federation endpoint checks
    each relayed item against its content and refuses it on its own."""


_CHECKS: dict[type[Message], Callable[[Out, Any], None]] = {
    # A fact's content is checked with the node's policy when its evidence is built.
    pb.SubmitFactRequest: _submit_fact,
    pb.GetBeliefRequest: _keyed,
    pb.ListBeliefsRequest: _list_beliefs,
    pb.ListSubjectsRequest: _list_subjects,
    pb.SearchBeliefsRequest: _search_beliefs,
    pb.ListErasuresRequest: _list_erasures,
    pb.GetErasureRequest: _get_erasure,
    pb.GetHistoryRequest: _keyed,
    pb.ExplainRequest: _keyed,
    pb.RetractRequest: _retract,
    pb.ListDecisionsRequest: _list_decisions,
    pb.WatchBeliefsRequest: _watch_beliefs,
    pb.ListContestedRequest: _list_contested,
    pb.GetContestedRequest: _keyed,
    pb.ResolveContestedRequest: _resolve_contested,
    pb.EraseRequest: _erase,
    pb.RunDecayRequest: _nothing,
    pb.GetStatusRequest: _nothing,
    pb.SyncNowRequest: _sync_now,
    pb.ListMembersRequest: _nothing,
    pb.RevokeRequest: _revoke,
    pb.ExportRequest: _nothing,
    # An import's file is checked whole (every line, and its checksum) before it is replayed.
    pb.ImportChunk: _nothing,
    pb.BackupRequest: _backup,
    pb.DigestRequest: _nothing,
    pb.DeltaRequest: _nothing,
    pb.Delta: _nothing,
}


def violations(msg: Message) -> list[FieldViolation]:
    """Every documented rule `msg` breaks; empty when it may be served."""
    out: Out = []
    _CHECKS[type(msg)](out, msg)
    _timestamps(msg, "", out)
    return out


def check(msg: Message) -> None:
    """Raises InvalidInput listing every documented rule `msg` breaks."""
    out = violations(msg)
    if out:
        raise InvalidInput(out)
