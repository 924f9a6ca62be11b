"""Listing by subject prefix, on both backends: ListBeliefs' `subject_prefix` and
ListSubjects (each subject with a served belief once, from the index), exact on every
collation, paged with checked tokens."""

from __future__ import annotations

import pytest

from factnode import tokens
from factnode.core import InvalidInput, Key, Submission
from factnode.ledger import Ledger

NS = "lg"
SUBJECTS = ["a", "a.b", "a.b.c", "a.bx", "a_b", "b", "b.a", "Ä.b", "a.b\u00e9"]


def _fill(ledger: Ledger) -> None:
    for i, subject in enumerate(SUBJECTS):
        ledger.submit(Submission(NS, subject, "k", f"v{i}", "user_stated", "s"))
        ledger.submit(Submission(NS, subject, "j", f"w{i}", "user_stated", "s"))
    ledger.submit(Submission("other", "a.b", "k", "elsewhere", "user_stated", "s"))


def test_subjects_are_listed_once_under_a_prefix_and_paged(ledger: Ledger) -> None:
    _fill(ledger)
    every = ledger.reading.subjects(NS).items
    assert sorted(every) == sorted(SUBJECTS) and len(every) == len(set(every))
    under = ledger.reading.subjects(NS, "a.b").items
    assert sorted(under) == ["a.b", "a.b.c", "a.bx", "a.b\u00e9"]
    # Paged: every subject once, in the same order as one page.
    seen: list[str] = []
    token = ""
    while True:
        page = ledger.reading.subjects(NS, "", 2, token)
        seen += page.items
        token = page.next_page_token
        if not token:
            break
    assert seen == every


def test_list_beliefs_by_subject_prefix(ledger: Ledger) -> None:
    _fill(ledger)
    found = ledger.list_beliefs(NS, subject_prefix="a.b", page_size=3)
    subjects: list[str] = [b.key.subject for b in found.items]
    token = found.next_page_token
    while token:
        page = ledger.list_beliefs(NS, subject_prefix="a.b", page_size=3, page_token=token)
        subjects += [b.key.subject for b in page.items]
        token = page.next_page_token
    assert sorted(subjects) == sorted(2 * ["a.b", "a.b.c", "a.bx", "a.b\u00e9"])
    # The control: without the prefix every subject of the namespace is there.
    assert len(ledger.list_beliefs(NS, page_size=1000).items) == 2 * len(SUBJECTS)


def test_a_bad_subject_token_or_prefix_is_refused_naming_the_field(ledger: Ledger) -> None:
    _fill(ledger)
    with pytest.raises(InvalidInput) as err:
        ledger.reading.subjects(NS, "", 0, tokens.key_position("0" * 32, "1" * 32))
    assert err.value.violations[0].field == "page_token"
    with pytest.raises(InvalidInput) as err:
        ledger.reading.subjects(NS, "a\x00")
    assert err.value.violations[0].field == "subject_prefix"
    assert ledger.reading.subjects(NS, "zzz").items == []
    assert Key(NS, "a", "k") in {b.key for b in ledger.list_beliefs(NS, "a").items}
