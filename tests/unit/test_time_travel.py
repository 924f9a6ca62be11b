"""Time travel: beliefs as of an event time and as known at an ingestion time, and history."""

from __future__ import annotations

import pytest
from _facts import DAY, NS, POLICY, fact, replay, retraction

from factnode.core import (
    Evidence,
    Interval,
    Key,
    Rule,
    VersionHistory,
    belief_at,
    history,
)

# Porto from day 1 (learned day 2); Lisbon from day 10 but learned late, on day 30;
# an LLM's Faro from day 20 (learned day 20) that never beats the user's word.
PORTO = fact("Porto", day=1, at=2)
LISBON = fact("Lisbon", day=10, at=30)
FARO = fact("Faro", day=20, anchor="llm_generated", source="gpt")
TIMELINE = [PORTO, LISBON, FARO]
NAMES = {e.version_id: e.object for e in TIMELINE}


def _days(value: int | None) -> int | None:
    return None if value is None else value * DAY


def _by_object(entries: list[VersionHistory]) -> dict[str, VersionHistory]:
    return {h.object: h for h in entries}


@pytest.mark.parametrize(
    ("as_of", "known_at", "expected"),
    [
        (None, None, "Lisbon"),
        (0, None, None),
        (1, None, "Porto"),  # as_of is inclusive
        (5, None, "Porto"),
        (10, None, "Lisbon"),
        (25, None, "Lisbon"),
        (None, 1, None),
        (None, 2, "Porto"),  # known_at is inclusive
        (None, 25, "Porto"),  # Lisbon not yet learned; Faro loses on trust_anchor
        (15, 29, "Porto"),
        (15, 30, "Lisbon"),
        (5, 30, "Porto"),
        (0, 30, None),
    ],
)
def test_belief_as_of_and_known_at(
    as_of: int | None, known_at: int | None, expected: str | None
) -> None:
    """as_of filters on event time and known_at on ingestion time, both inclusive; same rules."""
    verdict = belief_at(TIMELINE, (), POLICY, as_of=_days(as_of), known_at=_days(known_at))
    assert (None if verdict is None else NAMES[verdict.version_id]) == expected


def test_belief_at_depends_only_on_the_visible_set() -> None:
    """Time travel is the same arbitration over the filtered evidence, no special case."""
    only_porto_and_faro = belief_at([PORTO, FARO], (), POLICY)
    assert only_porto_and_faro == belief_at(TIMELINE, (), POLICY, known_at=25 * DAY)
    assert only_porto_and_faro is not None
    assert only_porto_and_faro.rule is Rule.TRUST_ANCHOR


def test_history_closes_recency_loser_at_winners_event_time() -> None:
    """On recency the old version's interval ends exactly at the winner's event time."""
    by_obj = _by_object(history(TIMELINE, (), POLICY))
    assert by_obj["Porto"].intervals == (Interval(1 * DAY, 10 * DAY),)
    assert by_obj["Lisbon"].intervals == (Interval(10 * DAY, None),)
    assert by_obj["Faro"].intervals == ()
    assert {o: h.status for o, h in by_obj.items()} == {
        "Porto": "HISTORICAL",
        "Lisbon": "BELIEVED",
        "Faro": "DISBELIEVED",
    }


def test_history_as_known_at_an_earlier_time() -> None:
    """History with known_at shows what the node believed then about every period."""
    by_obj = _by_object(history(TIMELINE, (), POLICY, known_at=25 * DAY))
    assert set(by_obj) == {"Porto", "Faro"}
    assert by_obj["Porto"].intervals == (Interval(1 * DAY, None),)
    assert by_obj["Porto"].status == "BELIEVED"
    assert by_obj["Faro"].status == "DISBELIEVED"


def test_history_intervals_agree_with_belief_at() -> None:
    """Each interval starts where belief_at first believes the version and ends where it stops."""
    for h in history(TIMELINE, (), POLICY):
        for iv in h.intervals:
            at_start = belief_at(TIMELINE, (), POLICY, as_of=iv.start)
            assert at_start is not None and at_start.version_id == h.version_id
            if iv.end is not None:
                at_end = belief_at(TIMELINE, (), POLICY, as_of=iv.end)
                assert at_end is None or at_end.version_id != h.version_id
                just_before = belief_at(TIMELINE, (), POLICY, as_of=iv.end - 1)
                assert just_before is not None and just_before.version_id == h.version_id


def test_history_evidence_ids_per_version() -> None:
    """Every version lists all its evidence ids, sorted."""
    porto_again = fact("Porto", day=3, source="bob")
    entries = _by_object(history([*TIMELINE, porto_again], (), POLICY))
    assert entries["Porto"].evidence_ids == tuple(
        sorted([PORTO.evidence_id, porto_again.evidence_id])
    )
    assert entries["Lisbon"].evidence_ids == (LISBON.evidence_id,)


TIED = sorted([fact("Porto"), fact("Lisbon")], key=lambda e: e.version_id)


def _retracted() -> tuple[list[Evidence], list[Evidence]]:
    return [fact("Porto", day=1)], [retraction("Porto", day=7)]


def _corrected() -> list[Evidence]:
    wrong = fact("Porto", day=1)
    return [wrong, fact("Lisbon", day=1, at=3, corrects=wrong.evidence_id)]


SPEAKS = Key(NS, "ana", "speaks")


@pytest.mark.parametrize(
    ("evidence", "retractions", "expected"),
    [
        pytest.param(
            TIED,
            [],
            # Provisionally believed: the lowest version id.
            {TIED[0].object: ("AMBIGUOUS", ((1, None),)), TIED[1].object: ("AMBIGUOUS", ())},
            id="ambiguous",
        ),
        pytest.param(*_retracted(), {"Porto": ("RETRACTED", ((1, 7),))}, id="retracted"),
        pytest.param(
            _corrected(),
            [],
            {"Porto": ("CORRECTED", ()), "Lisbon": ("BELIEVED", ((1, None),))},
            id="corrected",
        ),
        pytest.param(
            [fact("Faro", day=0, anchor="llm_generated", source="gpt"), fact("Porto", day=1)],
            [],
            {"Faro": ("DISBELIEVED", ((0, 1),)), "Porto": ("BELIEVED", ((1, None),))},
            id="anchor-loser-believed-until-outranked",
        ),
        pytest.param(
            [fact("English", key=SPEAKS, day=1), fact("Portuguese", key=SPEAKS, day=4)],
            [],
            {"English": ("BELIEVED", ((1, None),)), "Portuguese": ("BELIEVED", ((4, None),))},
            id="multi-valued",
        ),
    ],
)
def test_history_statuses(
    evidence: list[Evidence],
    retractions: list[Evidence],
    expected: dict[str, tuple[str, tuple[tuple[int, int | None], ...]]],
) -> None:
    """History names each version's status and the event-time intervals it was believed in."""
    got = {
        h.object: (h.status, tuple((iv.start // DAY, _div(iv.end)) for iv in h.intervals))
        for h in history(evidence, retractions, POLICY)
    }
    assert got == expected


def _div(end: int | None) -> int | None:
    return None if end is None else end // DAY


def test_retraction_known_later_does_not_change_earlier_history() -> None:
    """History as known before a retraction was recorded keeps the version open."""
    evidence, retractions = _retracted()
    before = history(evidence, retractions, POLICY, known_at=6 * DAY)
    assert [(h.status, h.intervals) for h in before] == [("BELIEVED", (Interval(DAY, None),))]


def test_history_reopens_after_a_retraction() -> None:
    """A version ended by a retraction gets a new interval when later evidence restates it."""
    evidence, retractions = _retracted()
    evidence.append(fact("Porto", day=12, source="bob"))
    (h,) = history(evidence, retractions, POLICY)
    assert h.intervals == (Interval(DAY, 7 * DAY), Interval(12 * DAY, None))
    assert h.status == "BELIEVED"


def test_history_links_lineage_both_ways() -> None:
    """Lineage pairs from the decision log link each version to what it replaced and back."""
    porto = fact("Porto", day=1)
    lisbon = fact("Lisbon", day=10)
    faro = fact("Faro", day=5, at=11, anchor="codebase_verified", source="repo")
    run = replay([porto, lisbon, faro])
    assert run.lineage == [
        (lisbon.version_id, porto.version_id),
        (faro.version_id, lisbon.version_id),
    ]
    by_obj = _by_object(history(run.state().evidence, (), POLICY, lineage=run.lineage))
    assert (by_obj["Porto"].supersedes, by_obj["Porto"].superseded_by) == ((), (lisbon.version_id,))
    assert (by_obj["Lisbon"].supersedes, by_obj["Lisbon"].superseded_by) == (
        (porto.version_id,),
        (faro.version_id,),
    )
    assert (by_obj["Faro"].supersedes, by_obj["Faro"].superseded_by) == ((lisbon.version_id,), ())
    # Faro outranks both from its event time on; Porto was believed before it.
    assert by_obj["Porto"].intervals == (Interval(DAY, 5 * DAY),)
    assert by_obj["Lisbon"].intervals == ()
    assert by_obj["Faro"].intervals == (Interval(5 * DAY, None),)
    assert {o: h.status for o, h in by_obj.items()} == {
        "Porto": "DISBELIEVED",
        "Lisbon": "DISBELIEVED",
        "Faro": "BELIEVED",
    }
