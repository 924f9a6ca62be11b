"""Review: an operator settles a contested or ambiguous key."""

from __future__ import annotations

from factnode.core import BeliefState, FieldViolation, InvalidInput, Key, Submission, ids
from factnode.ledger._model import NotFound, Resolution
from factnode.ledger._reading import Reading
from factnode.ledger._serving import check_key_input
from factnode.ledger._writing import Writing


class Review(Writing, Reading):
    """Operators' resolutions."""

    def resolve(
        self, key: Key, *, version_id: str | None, obj: str | None, reason: str, operator: str
    ) -> Resolution:
        """Records an operator's choice as user_confirmed evidence, arbitrated like any other."""
        check_key_input(key)
        out: list[FieldViolation] = []
        if (version_id is None) == (obj is None):
            out.append(FieldViolation("choice", "give exactly one of version_id or object"))
        if not operator.strip():
            out.append(FieldViolation("operator", "is required"))
        if out:
            raise InvalidInput(out)
        if version_id is not None:
            evidence = self.evidence_of_version(key, version_id)
            if not evidence:
                raise NotFound(f"no version {version_id} for {key}")
            obj = evidence[0].object
        assert obj is not None
        submitted = self.submit(
            Submission(
                key.namespace,
                key.subject,
                key.predicate,
                obj,
                "user_confirmed",
                f"operator:{operator.strip()}",
                worth=1.0,
                confidence=1.0,
            )
        )
        chosen = ids.version_id(key, obj)
        belief = submitted.belief
        if belief is not None and chosen in {v for v, _ in belief.values}:
            return Resolution(submitted, True, f"{key} now believes {obj!r} (rule {belief.rule})")
        if belief is not None and belief.version_id == chosen:
            if belief.state is BeliefState.BELIEVED:
                return Resolution(
                    submitted, True, f"{key} now believes {obj!r} (rule {belief.rule})"
                )
            return Resolution(
                submitted,
                False,
                f"{key} serves {obj!r} but is still {belief.state.value} (rule {belief.rule}): "
                "the operator's user_confirmed evidence does not outrank what keeps the key "
                "under review; retract or correct the competing evidence",
            )
        keeper = belief.version_id if belief else "none"
        return Resolution(
            submitted,
            False,
            f"stronger local evidence still keeps version {keeper} by rule "
            f"{submitted.decision.rule}; retract or correct that evidence instead",
        )
