"""Member records (specification §7): every member this node has heard of, kept across restarts."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select

from factnode.core.members import MemberRecord
from factnode.store._part import TransactionPart
from factnode.store._sqltext import insert_rows
from factnode.store._tables import MemberRecordRow
from factnode.store.repository import StoredMember

MR = MemberRecordRow.__table__  # type: ignore[attr-defined]
_COLUMNS = ("node_id", "address", "certificate", "incarnation", "signature", "revoked")
_SELECT = select(*(MR.c[c] for c in _COLUMNS)).order_by(MR.c.node_id)


class SqlMembers(TransactionPart):
    """The member-record part of a transaction."""

    def member_records(self) -> list[StoredMember]:
        """Every member record held, by node id."""
        return [
            StoredMember(
                MemberRecord(node_id, address, cert.encode(), int(inc), bytes.fromhex(sig)),
                bool(revoked),
            )
            for node_id, address, cert, inc, sig, revoked in self._c.execute(_SELECT)
        ]

    def put_member_records(self, members: Sequence[StoredMember]) -> None:
        """Stores each record, replacing the one held for its node id."""
        insert_rows(
            self._c,
            MR,
            _COLUMNS,
            [
                (
                    m.record.node_id,
                    m.record.address,
                    m.record.certificate.decode(),
                    m.record.incarnation,
                    m.record.signature.hex(),
                    m.revoked,
                )
                for m in members
            ],
            ("node_id",),
        )
