"""The text rule, bounded error quoting and batch isolation, without a server."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest
import sqlalchemy.exc

from factnode.core import FieldViolation, InvalidInput, Key, Policy, Submission, make_evidence
from factnode.core.peer_checks import tombstone_problem
from factnode.core.validation import quoted, relayed_violations, text_problem, violations_of
from factnode.federation.sync import _describe
from factnode.ledger._writing import isolating
from factnode.server._errors import status_for
from factnode.store import RefusedData, Tombstone

NUL = "a\x00b"
HEX_ID = "0123456789abcdef" * 2
POLICY = Policy()


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("", ""),
        ("Porto", ""),
        ("São Paulo 😀", ""),
        ("\t\n\x01\x7f", ""),  # other control characters are text
        (NUL, "must not contain NUL (U+0000)"),
        ("\x00", "must not contain NUL (U+0000)"),
        ("a\ud800b", "must not contain a lone surrogate (U+D800..U+DFFF)"),
    ],
)
def test_text_rule_refuses_nul_and_lone_surrogates_only(value: str, problem: str) -> None:
    """The text rule refuses NUL and lone surrogates and accepts every other string."""
    assert text_problem(value) == problem


def _sub(**fields: object) -> Submission:
    base = Submission("user:ana", "ana", "lives_in", "Porto", "user_stated", "ana")
    return replace(base, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"namespace": NUL}, "namespace"),
        ({"subject": NUL}, "subject"),
        ({"predicate": NUL}, "predicate"),
        ({"object": NUL}, "object"),
        ({"attribution": NUL}, "anchor"),
        ({"source": NUL}, "source"),
        ({"corrects": NUL}, "corrects"),
        ({"corrects": "not-an-evidence-id"}, "corrects"),
        ({"corrects": HEX_ID.upper()}, "corrects"),
        ({"contradicts": Key(NUL, "rui", "lives_in")}, "contradicts.namespace"),
        ({"contradicts": Key("user:ana", NUL, "lives_in")}, "contradicts.subject"),
        ({"contradicts": Key("user:ana", "rui", NUL)}, "contradicts.predicate"),
        ({"idempotency_key": NUL}, "idempotency_key"),
    ],
)
def test_every_stored_field_of_a_submission_follows_the_text_rule(
    fields: dict[str, object], named: str
) -> None:
    """A NUL in any stored field of a submission (or a `corrects` that is not an evidence id)
    is one violation naming that field."""
    assert [v.field for v in violations_of(_sub(**fields), POLICY)] == [named]


def test_corrects_naming_an_evidence_id_is_accepted() -> None:
    """`corrects` in the evidence id format passes the check."""
    assert violations_of(_sub(corrects=HEX_ID), POLICY) == []


def test_relayed_evidence_with_a_nul_is_refused_naming_the_field() -> None:
    """Evidence a peer relays with a NUL in its object or source is refused naming the field."""
    e = make_evidence(_sub(), POLICY, recorded_at=0, origin_node="peer")
    assert [v.field for v in relayed_violations(replace(e, object=NUL), POLICY)] == ["object"]
    assert [v.field for v in relayed_violations(replace(e, source=NUL), POLICY)] == ["source"]


@pytest.mark.parametrize("field", ["operator", "reason"])
def test_a_tombstone_with_a_nul_is_refused(field: str) -> None:
    """A peer's tombstone with a NUL in its operator or reason is refused, naming the field."""
    t = Tombstone(HEX_ID, "evidence", HEX_ID, 0, "ops", "gdpr", (HEX_ID,), "peer")
    assert tombstone_problem(t) == ""
    problem = tombstone_problem(replace(t, **{field: NUL}))
    assert problem == f"{field}: must not contain NUL (U+0000)"


def test_an_error_quotes_a_bounded_prefix_of_the_value() -> None:
    """An unknown anchor of 1,024 emoji is quoted by its first 40 characters only."""
    assert quoted("😀" * 1024) == repr("😀" * 40) + "…"
    [violation] = violations_of(_sub(attribution="😀" * 1024), POLICY)
    assert violation.field == "anchor"
    assert "😀" * 41 not in violation.reason


def test_a_status_fits_in_the_trailers_whatever_the_input() -> None:
    """Twenty violations each quoting long emoji text still make a status whose message and
    details are bounded in bytes, far below the client's 16 KiB trailer limit."""
    bad = InvalidInput([FieldViolation("😀" * 500, "😀" * 5000) for _ in range(30)])
    status = status_for(bad)
    assert status.code.name == "INVALID_ARGUMENT"
    assert len(status.details.encode()) <= 1024
    size = sum(len(k) + len(v) for k, v in status.trailing_metadata)
    assert size < 8192, size


def test_a_failed_rounds_reason_never_shows_sql() -> None:
    """A database error during a round is described by its type, not by its SQL or values."""
    exc = sqlalchemy.exc.DataError(
        "INSERT INTO evidence (object) VALUES (%(object)s)", {"object": "secret"}, Exception("x")
    )
    reason = _describe(exc)
    assert reason == "DataError on this node"


def test_isolating_halves_a_refused_batch_until_the_bad_item_stands_alone() -> None:
    """A batch the database refuses because of one item is split in halves, in order, until
    that item is alone: it gets its refusal and every other item is applied once."""
    applied: list[list[int]] = []

    def apply(part: Sequence[int]) -> list[str]:
        applied.append(list(part))
        if 5 in part:
            raise RefusedData("refused")
        return [f"ok {i}" for i in part]

    out = isolating(apply, list(range(8)), lambda item, exc: f"refused {item}")
    assert out == [*(f"ok {i}" for i in range(5)), "refused 5", "ok 6", "ok 7"]
    assert applied == [
        [0, 1, 2, 3, 4, 5, 6, 7],
        [0, 1, 2, 3],
        [4, 5, 6, 7],
        [4, 5],
        [4],
        [5],
        [6, 7],
    ]


def test_isolating_lets_other_errors_fail_the_batch() -> None:
    """An error that is not a refused value (the database down, say) fails the whole batch."""

    def apply(part: Sequence[int]) -> list[int]:
        raise ConnectionError("down")

    with pytest.raises(ConnectionError):
        isolating(apply, [1, 2, 3], lambda item, exc: item)
