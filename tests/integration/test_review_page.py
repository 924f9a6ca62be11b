"""A review page is read in one go: the same explanations and tallies as key by key."""

from __future__ import annotations

from factnode.core import Key, Submission
from factnode.testing import memory_ledger

NS = "user:ana"


def _sub(subject: str, obj: str) -> Submission:
    return Submission(NS, subject, "lives_in", obj, "user_stated", source="ana", valid_from=0)


def test_explain_many_matches_explain_and_tally_of_per_key() -> None:
    """Many keys at once give what `explain` and `tally_of` give for each key; keys without a
    belief are left out."""
    ledger = memory_ledger()
    for subject in ("ana", "rui"):
        ledger.submit(_sub(subject, "Porto"))
        ledger.submit(_sub(subject, "Faro"))  # a tie on every rule: AMBIGUOUS
    keys = [Key(NS, s, "lives_in") for s in ("ana", "rui")]
    unknown = Key(NS, "nobody", "lives_in")
    page = ledger.review_queue(NS)
    assert {b.key for b in page.items} == set(keys)
    together = ledger.explain_many([*keys, unknown])
    assert list(together) == keys
    for key in keys:
        assert together[key] == ledger.explain(key)
        assert together[key].tally == ledger.tally_of(key)
