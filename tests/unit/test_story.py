"""The whole story after a resolution, a retraction or an erasure, told by the pure core
(`core.story`): what each version loses by on the evidence and then by the pin, whether the
key is under review, which version is believed again and what had outranked it."""

from __future__ import annotations

from _facts import DAY, LIVES_IN, POLICY, fact, retraction

from factnode.core import Interval, KeyState, Rule, VersionHistory
from factnode.core.serving import Answer, Pin, view
from factnode.core.story import (
    ServedBefore,
    believed_again_by_erasure,
    believed_again_by_retraction,
    erasure_story,
    overruled_comparisons,
    review_note,
    served_until_resolution,
)

NODE = "n1"
NOW = 10 * DAY
FARO = fact("Faro", day=1, at=2)
BRAGA = fact("Braga", day=1, at=3, source="bob")
LISBON = fact("Lisbon", day=1, at=3, anchor="llm_generated", source="gpt")
TIED = KeyState([FARO, BRAGA, LISBON])
MILAN = fact("Milan", day=1, at=2, anchor="agent_observed", source="doc")
ROME = fact("Rome", day=1, at=3)


def answer(state: KeyState, pin: Pin | None = None, **at: int) -> Answer:
    return view(LIVES_IN, state, [], pin, POLICY, NODE, NOW, **at)


def test_each_loser_of_a_pinned_key_names_its_evidence_rule_then_the_pin() -> None:
    """Pinned to Braga: Faro ties with it on the evidence (tiebreak) and Lisbon loses by
    trust_anchor; each reason says that first, then the operator's resolution."""
    pin = Pin(BRAGA.version_id, 4 * DAY)
    seen = answer(TIED, pin)
    assert seen.first is not None and seen.first.rule is Rule.OPERATOR_RESOLUTION
    got = {
        c.object: c
        for c in overruled_comparisons(
            BRAGA.version_id, Rule.OPERATOR_RESOLUTION, seen.evidence, POLICY, None, pin
        )
    }
    assert sorted(got) == ["Faro", "Lisbon"]
    assert (got["Faro"].rule, got["Faro"].evidence_rule) == (
        Rule.OPERATOR_RESOLUTION,
        Rule.TIEBREAK,
    )
    assert got["Faro"].reason.startswith("it ties with 'Braga' on the evidence")
    assert got["Lisbon"].evidence_rule is Rule.TRUST_ANCHOR
    assert got["Lisbon"].reason.startswith(
        "it loses on the evidence by trust_anchor: anchor user_stated (90) outranks "
        "llm_generated (30); then an operator's resolution (recorded "
    )
    assert "chose 'Braga'" in got["Lisbon"].reason


def test_a_version_that_leads_on_the_evidence_says_so_before_the_pin() -> None:
    """Where the served version is the pinned one and the other leads on the evidence (a
    contested key), the reason says the other leads, by which rule, and then the pin."""
    pin = Pin(LISBON.version_id, 4 * DAY)
    [got] = overruled_comparisons(
        LISBON.version_id, Rule.OPERATOR_RESOLUTION, [FARO, LISBON], POLICY, None, pin
    )
    assert got.evidence_rule is Rule.TRUST_ANCHOR
    assert got.reason.startswith("it leads on the evidence by trust_anchor: anchor user_stated")


def test_review_note_says_a_pinned_key_is_settled_and_why() -> None:
    """A pinned tie is not under review, while the evidence still ties the two versions."""
    note = review_note(answer(TIED, Pin(BRAGA.version_id, 4 * DAY)), Pin(BRAGA.version_id, 4 * DAY))
    assert note.startswith("not under review: an operator's resolution (recorded ")
    assert "the evidence still ties 'Braga' and 'Faro'" in note


def test_review_note_says_when_a_pin_no_longer_applies() -> None:
    """Later evidence for Faro decides the key by recency: the pin stays in the log, the key
    is not under review; with no pin a tie is under review; a plain key says nothing."""
    pin = Pin(BRAGA.version_id, 4 * DAY)
    decided = KeyState([*TIED.evidence, fact("Faro", day=2, at=5)])
    assert review_note(answer(decided, pin), pin) == (
        "not under review: the rules decide the key (recency); an operator's resolution "
        "(recorded 1970-01-05T00:00:00Z) no longer applies and stays in the decision log"
    )
    assert review_note(answer(TIED), None) == "under review (AMBIGUOUS): an operator can resolve it"
    assert review_note(answer(KeyState([FARO])), None) == ""


def test_a_pin_unknown_in_a_past_view_is_not_told() -> None:
    """As known on day 3, before the pin of day 4, the tie is under review with no pin."""
    pin = Pin(BRAGA.version_id, 4 * DAY)
    assert review_note(answer(TIED, pin, known_at=3 * DAY), pin).startswith("under review")


def test_a_retraction_of_the_winner_tells_what_is_believed_again() -> None:
    """Rome (user_stated) beat Milan (agent_observed); retracting Rome makes Milan believed
    again, and the story names Rome, the rule and the retraction."""
    ended = retraction("Rome", day=2, at=4)
    state = KeyState([MILAN, ROME], [ended])
    again = believed_again_by_retraction(LIVES_IN, answer(state), state, POLICY)
    assert again is not None
    assert again.text == (
        f"'Milan' is believed again: 'Rome', which outranked it by trust_anchor, was ended by "
        f"retraction {ended.evidence_id} (user_stated from ana)"
    )
    assert (again.cause, again.ended_by) == ("retracted", (ended.evidence_id,))
    # Before the retraction was known, nothing is told.
    before = answer(state, known_at=3 * DAY)
    assert believed_again_by_retraction(LIVES_IN, before, state, POLICY, known_at=3 * DAY) is None


def test_no_story_without_a_retraction_or_when_the_belief_was_always_the_winner() -> None:
    """A plain key, and a retraction of the loser, tell nothing."""
    plain = KeyState([MILAN, ROME])
    assert believed_again_by_retraction(LIVES_IN, answer(plain), plain, POLICY) is None
    loser_gone = KeyState([MILAN, ROME], [retraction("Milan", day=2, at=4)])
    assert believed_again_by_retraction(LIVES_IN, answer(loser_gone), loser_gone, POLICY) is None


def test_an_erased_winner_is_named_only_by_the_rule_it_won_by() -> None:
    """Erasing Rome, which outranked Milan by trust_anchor: the reply and the log tell it
    without the value 'Rome', and the log's text carries no value at all."""
    before = KeyState([MILAN, ROME])
    after = KeyState([MILAN])
    again = believed_again_by_erasure(
        LIVES_IN,
        before,
        [ServedBefore(ROME.version_id, Rule.TRUST_ANCHOR)],
        after,
        [(MILAN.version_id, MILAN)],
        POLICY,
        "e1",
    )
    assert again is not None
    assert again.text == (
        "'Milan' is believed again: the version that outranked it by trust_anchor was erased "
        "(erasure e1)"
    )
    assert "Rome" not in again.text and "Rome" not in again.logged and "Milan" not in again.logged
    assert erasure_story("Milan", again.logged) == again.text


def test_an_erasure_of_some_of_the_winners_evidence_names_the_winner_in_the_reply_only() -> None:
    """Rome keeps weaker evidence (llm_generated) after its user_stated evidence is erased,
    so Milan wins again: the reply names 'Rome', which is still held; the log does not."""
    weak_rome = fact("Rome", day=1, at=3, anchor="llm_generated", source="gpt")
    again = believed_again_by_erasure(
        LIVES_IN,
        KeyState([MILAN, ROME, weak_rome]),
        [ServedBefore(ROME.version_id, Rule.TRUST_ANCHOR)],
        KeyState([MILAN, weak_rome]),
        [(MILAN.version_id, MILAN)],
        POLICY,
        "e2",
    )
    assert again is not None
    assert "the evidence by which 'Rome' outranked it by trust_anchor was erased" in again.text
    assert "Rome" not in again.logged and "another version" in again.logged


def test_an_erased_retraction_tells_that_what_ended_the_version_was_erased() -> None:
    """Milan was retracted and nothing was served; erasing the retraction serves Milan again."""
    ended = retraction("Milan", day=2, at=4)
    again = believed_again_by_erasure(
        LIVES_IN, KeyState([MILAN], [ended]), [], KeyState([MILAN]), [(MILAN.version_id, MILAN)],
        POLICY, "e3",
    )  # fmt: skip
    assert again is not None
    assert again.text == (
        "'Milan' is believed again: the evidence that had ended it was erased (erasure e3)"
    )


def test_an_erasure_that_changes_nothing_served_tells_nothing() -> None:
    """Erasing the loser leaves Rome served: no story."""
    assert (
        believed_again_by_erasure(
            LIVES_IN,
            KeyState([MILAN, ROME]),
            [ServedBefore(ROME.version_id, Rule.TRUST_ANCHOR)],
            KeyState([ROME]),
            [(ROME.version_id, ROME)],
            POLICY,
            "e4",
        )
        is None
    )


def test_served_until_resolution_marks_only_versions_served_before_the_pin() -> None:
    """Faro was served before the pin and at no event time now: it gets the pin's time;
    Lisbon was never served and Braga is served now: neither does."""

    def version(obj: str, served: bool) -> VersionHistory:
        spans = (Interval(DAY, None),) if served else ()
        return VersionHistory(obj, obj, spans, (), "DISBELIEVED")

    now = [version("Faro", False), version("Braga", True), version("Lisbon", False)]
    then = [version("Faro", True), version("Braga", False), version("Lisbon", False)]
    pin = Pin("Braga", 4 * DAY)
    got = {h.object: h.served_until for h in served_until_resolution(now, lambda: then, pin)}
    assert got == {"Faro": 4 * DAY, "Braga": None, "Lisbon": None}
    assert served_until_resolution(now, lambda: then, None) == now
