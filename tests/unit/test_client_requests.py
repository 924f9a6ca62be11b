"""The client's requests name the trust anchor `anchor` (the proto's field), and take its
former name `attribution` as an alias."""

from __future__ import annotations

import pytest

from factnode.client import InvalidFact
from factnode.client import _calls as c

KEY = ("user:ana", "ana", "lives_in")


def test_submit_takes_anchor_or_its_alias_attribution() -> None:
    """submit's anchor comes positionally, as `anchor=` or as `attribution=`: the same field."""
    for kwargs in ({"anchor": "user_stated"}, {"attribution": "user_stated"}):
        req = c.submit_request(KEY, "Porto", source="ana", **kwargs)  # type: ignore[arg-type]
        assert req.fact.anchor == "user_stated", kwargs
    assert c.submit_request(KEY, "Porto", "user_stated").fact.anchor == "user_stated"


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({}, "is required"),
        ({"anchor": "user_stated", "attribution": "llm_generated"}, "not both"),
    ],
)
def test_a_missing_or_doubly_given_anchor_is_refused_naming_anchor(
    kwargs: dict[str, str], reason: str
) -> None:
    """No anchor, or an anchor and a different alias, is InvalidFact naming `anchor`."""
    with pytest.raises(InvalidFact) as err:
        c.submit_request(KEY, "Porto", source="ana", **kwargs)  # type: ignore[arg-type]
    [(field, why)] = [(e.field, e.reason) for e in err.value.field_errors]
    assert field == "anchor" and reason in why


def test_retract_takes_anchor_or_its_alias_and_leaves_it_unset_otherwise() -> None:
    """A retraction's anchor is optional (the node defaults it); the alias fills the same field."""
    assert c.retract_request(KEY, "moved", None, None, anchor="user_stated").anchor == "user_stated"
    aliased = c.retract_request(KEY, "moved", None, None, attribution="api_response")
    assert aliased.anchor == "api_response"
    assert not c.retract_request(KEY, "moved", None, None).HasField("anchor")
