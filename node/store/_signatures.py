"""Signatures kept beside what they sign (specification §7): relayed evidence's, by its origin, and
the proofs of equivocation (two signed votes of one voter, one number, one key)."""

from __future__ import annotations

import base64
import json
from collections.abc import Collection, Mapping

from sqlalchemy import delete, select

from factnode.core import Key, ids
from factnode.core.consensus import Vote
from factnode.core.signed import Equivocation
from factnode.store._part import TransactionPart
from factnode.store._sqltext import insert_rows, select_under
from factnode.store._tables import EquivocationRow, EvidenceSignatureRow
from factnode.store.repository import chunks

ES = EvidenceSignatureRow.__table__  # type: ignore[attr-defined]
EQ = EquivocationRow.__table__  # type: ignore[attr-defined]
_SELECT_EQUIVOCATIONS = select(EQ.c.first, EQ.c.second)


def _vote_json(v: Vote) -> str:
    return json.dumps(
        [
            v.voter,
            list(v.key),
            v.version_id,
            v.evidence_id,
            v.anchor,
            v.worth_milli,
            v.fresh_since,
            v.cast_at,
            v.seq,
            base64.b64encode(v.signature).decode(),
        ]
    )


def _vote_of(text: str) -> Vote:
    voter, key, version_id, evidence_id, anchor, worth, fresh, cast, seq, sig = json.loads(text)
    return Vote(
        voter, Key(*key), version_id, evidence_id, anchor, worth, fresh, cast, seq,
        base64.b64decode(sig),
    )  # fmt: skip


class SqlSignatures(TransactionPart):
    """The signature part of a transaction."""

    def evidence_signatures(self, evidence_ids: Collection[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for part in chunks(sorted(evidence_ids)):
            q = select(ES.c.evidence_id, ES.c.signature).where(ES.c.evidence_id.in_(part))
            out.update((eid, bytes(sig)) for eid, sig in self._c.execute(q))
        return out

    def put_evidence_signatures(self, signatures: Mapping[str, bytes]) -> None:
        if signatures:
            rows = sorted(signatures.items())
            insert_rows(self._c, ES, ("evidence_id", "signature"), rows, ("evidence_id",))

    def delete_evidence_signatures(self, evidence_ids: Collection[str]) -> None:
        for part in chunks(sorted(evidence_ids)):
            self._c.execute(delete(ES).where(ES.c.evidence_id.in_(part)))

    def put_equivocation(self, proof: Equivocation) -> None:
        k = proof.key
        row = (proof.voter, ids.key_id(k), *k, proof.seq)
        insert_rows(
            self._c,
            EQ,
            ("voter", "key_id", "namespace", "subject", "predicate", "seq", "first", "second"),
            [(*row, _vote_json(proof.first), _vote_json(proof.second))],
            ("voter", "key_id"),
        )

    def equivocations_under(self, prefixes: Collection[str]) -> list[tuple[Vote, Vote]]:
        """The proofs held on keys whose id starts with one of `prefixes`."""
        rows = select_under(self._c, _SELECT_EQUIVOCATIONS, "equivocation.key_id", prefixes)
        return [(_vote_of(a), _vote_of(b)) for a, b in rows]

    def all_equivocations(self) -> list[tuple[Vote, Vote]]:
        return self.equivocations_under([""])
