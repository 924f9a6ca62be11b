"""What a logical backup reads: every piece of evidence in the order it was decided, every
resolution, in one snapshot (`Repository.snapshot`, `Ledger.export`)."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import func, select

from factnode.core import Confirmation, Evidence, EvidenceStatus, Instant, Key, Outcome
from factnode.store._part import TransactionPart
from factnode.store._rows import _EVIDENCE_COLUMNS, _SELECT_EVIDENCE, C, D, E, P, _evidence
from factnode.store.repository import Tombstone

_STATUS = _EVIDENCE_COLUMNS.index("status")
_IDEMPOTENCY_KEY = _EVIDENCE_COLUMNS.index("idempotency_key")
# Each piece of evidence is first decided in the decision log's order: its least position.
_FIRST = (
    select(D.c.evidence_id, func.min(D.c.seq).label("first_seq"))
    .where(D.c.evidence_id.is_not(None))
    .group_by(D.c.evidence_id)
    .subquery()
)
_IN_DECIDED_ORDER = (
    _SELECT_EVIDENCE.select_from(E.outerjoin(_FIRST, _FIRST.c.evidence_id == E.c.evidence_id))
    # By when it was recorded first, and within one time (one batch) in the order it was
    # decided. The decision log alone cannot order it: an erasure forgets the decisions of
    # the keys its evidence bore on, so evidence decided before it would replay last.
    .order_by(
        E.c.recorded_at,
        _FIRST.c.first_seq.is_(None),
        _FIRST.c.first_seq,
        E.c.evidence_id,
    )
)
_PINS = select(P.c.key_id, P.c.version_id, P.c.operator, P.c.reason, P.c.pinned_at)
# Every resolution, not just each key's current pin: earlier ones link versions in history.
_RESOLUTIONS = (
    select(
        D.c.namespace, D.c.subject, D.c.predicate, D.c.key_id, D.c.version_id, D.c.detail,
        D.c.decided_at,
    )
    .where(D.c.outcome == Outcome.RESOLVED.value)
    .order_by(D.c.seq)
)  # fmt: skip
_KEY_OF = select(E.c.namespace, E.c.subject, E.c.predicate).limit(1)
# How `Review.resolve` words a resolution's decision: "pinned by OPERATOR: REASON".
_PINNED_BY = "pinned by "


class SqlExport(TransactionPart):
    """The backup part of a read transaction: everything held, in replay order."""

    def exported_evidence(self) -> Iterator[tuple[Evidence, EvidenceStatus, str | None]]:
        """Every piece of evidence (assertions and retractions, of any status) with its status
        and idempotency key, in the order the node recorded and first decided each."""
        rows = self._c.execution_options(stream_results=True, yield_per=1000).execute(
            _IN_DECIDED_ORDER
        )
        for row in rows:
            yield _evidence(row), EvidenceStatus(row[_STATUS]), row[_IDEMPOTENCY_KEY]

    def exported_confirmations(self) -> list[Confirmation]:
        """Every confirmation held, in the order they were received."""
        q = select(
            C.c.evidence_id, C.c.signer, C.c.confirmed_at, C.c.received_at, C.c.signature
        ).order_by(C.c.received_at, C.c.evidence_id, C.c.signer, C.c.confirmed_at)
        return [Confirmation(r[0], r[1], r[2], r[3], r[4] or b"") for r in self._c.execute(q)]

    def exported_tombstones(self) -> list[Tombstone]:
        """Every erasure tombstone, oldest first."""
        held = self.tombstones_under([""])  # type: ignore[attr-defined]  # SqlDigests' read
        return sorted(held, key=lambda t: (t.erased_at, t.erasure_id))

    def exported_pins(self) -> list[tuple[Key, str, str, str, Instant]]:
        """Every resolution in the order it was made: (key, version id, operator, reason,
        time). A key's current pin gives its own operator and reason; an earlier one's are
        read back from its decision. A pin without a decision (one an import kept waiting)
        follows, named by the key of its evidence."""
        current = {row[0]: row[1:] for row in self._c.execute(_PINS)}
        out: list[tuple[Key, str, str, str, Instant]] = []
        for namespace, subject, predicate, key_id, version_id, detail, at in self._c.execute(
            _RESOLUTIONS
        ):
            pin = current.get(key_id)
            if pin is not None and (pin[0], pin[3]) == (version_id, at):
                operator, reason = pin[1], pin[2]
                del current[key_id]
            else:
                operator, _, reason = detail.removeprefix(_PINNED_BY).partition(": ")
            out.append((Key(namespace, subject, predicate), version_id, operator, reason, at))
        for key_id, (version_id, operator, reason, at) in current.items():
            named = self._c.execute(_KEY_OF.where(E.c.key_id == key_id)).first()
            if named is not None:  # a key with no evidence left has no text to name it by
                out.append((Key(*named), version_id, operator, reason, at))
        return out
