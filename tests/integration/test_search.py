"""SearchBeliefs through the Ledger on a real store, the same suite on SQLite (FTS5) and
PostgreSQL (tsvector): a query finds only what GetBelief serves at the search's (as_of,
known_at) — never a superseded, disbelieved, retracted, decayed, corrected or erased value —
within its filters, pages and the namespaces the caller may read."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from factnode import tokens
from factnode.core import (
    MICROS_PER_DAY,
    BeliefState,
    InvalidInput,
    Key,
    Policy,
    Rule,
    Submission,
    decay,
    recall,
)
from factnode.ledger import Hit, Ledger, NotFound
from factnode.testing import FakeClock

DAY = MICROS_PER_DAY
START = FakeClock().now()
ANCHORS = tuple(Policy().anchors)
NS = "user:ana"
LIVES_IN = Key(NS, "ana", "lives_in")
WORKS_AT = Key(NS, "ana", "works_at")


def everyone(namespace: str) -> bool:
    return True


def sub(
    key: Key,
    obj: str,
    *,
    day: int | None = None,
    anchor: str = "user_stated",
    source: str = "chat",
    worth: float = 0.5,
    confidence: float = 0.9,
    corrects: str | None = None,
) -> Submission:
    """`key` = `obj` by `anchor`, true from `day` days after START (None: from now)."""
    return Submission(
        key.namespace,
        key.subject,
        key.predicate,
        obj,
        anchor,
        source,
        worth,
        confidence,
        None if day is None else START + day * DAY,
        corrects=corrects,
    )


def hits(
    ledger: Ledger,
    query: str,
    may_read: Callable[[str], bool] = everyone,
    page_size: int = 0,
    **filters: object,
) -> list[Hit]:
    """Every hit of a search, page after page (checked as SearchBeliefs checks it)."""
    request = recall.search(query, known_anchors=ANCHORS, limit=page_size, **filters)
    out: list[Hit] = []
    token = ""
    for _ in range(1000):
        page = ledger.reading.search(request, may_read, token)
        out += page.items
        token = page.next_page_token
        if not token:
            return out
    raise AssertionError("the pages never ended")


def found(ledger: Ledger, query: str, **filters: object) -> list[str]:
    """The values a search finds, best first."""
    return [h.object for h in hits(ledger, query, **filters)]


def assert_served(ledger: Ledger, found_hits: Sequence[Hit], **view: object) -> None:
    """Every hit is what GetBelief serves for its key in the same view, at that value."""
    as_of, known_at = view.get("as_of"), view.get("known_at")
    for h in found_hits:
        b = ledger.belief(h.belief.key, as_of, known_at)
        assert (h.belief.object, h.belief.state, h.belief.rule, h.belief.version_id) == (
            b.object,
            b.state,
            b.rule,
            b.version_id,
        )
        served = dict(b.values) if b.values else {b.version_id: b.object}
        assert served.get(h.version_id) == h.object


def at(clock: FakeClock, day: float) -> None:
    clock.current = START + int(day * DAY)


# -- only what is believed -------------------------------------------------------------


def test_a_query_finds_the_believed_value_not_a_superseded_one(ledger: Ledger) -> None:
    """Recency: a later event time supersedes; the old value's words find nothing, and words
    of the key find the new value only."""
    ledger.submit(sub(LIVES_IN, "Lisbon harbour flat", day=0, source="moving-van"))
    assert found(ledger, "Lisbon") == ["Lisbon harbour flat"]  # the control
    assert found(ledger, "where is the harbour?") == ["Lisbon harbour flat"]
    ledger.submit(sub(LIVES_IN, "Porto riverside flat", day=10))
    assert found(ledger, "Lisbon") == []
    assert found(ledger, "harbour") == []
    assert found(ledger, "Porto") == ["Porto riverside flat"]
    # Words shared by both values, or of the key, find the believed one only, once.
    assert found(ledger, "flat") == ["Porto riverside flat"]
    [h] = hits(ledger, "ana lives_in")
    assert h.object == "Porto riverside flat" and h.belief.rule is Rule.RECENCY
    assert h.anchor == "user_stated" and h.score > 0
    assert_served(ledger, [h])
    # The source's words find the evidence only while it is served.
    assert found(ledger, "van") == []


def test_a_query_never_finds_a_disbelieved_value(ledger: Ledger) -> None:
    """Trust anchor: a lower-anchored claim loses whatever its dates, and leaves recall."""
    ledger.submit(sub(LIVES_IN, "Madrid", day=20, anchor="llm_generated"))
    assert found(ledger, "Madrid") == ["Madrid"]  # the control
    ledger.submit(sub(LIVES_IN, "Lisbon", day=0, anchor="user_stated"))
    assert found(ledger, "Madrid") == []
    [h] = hits(ledger, "Lisbon")
    assert h.belief.rule is Rule.TRUST_ANCHOR and h.anchor == "user_stated"
    assert found(ledger, "Madrid", as_of=START + 30 * DAY) == []
    # Not a claim the search cannot see: the history keeps it.
    assert "Madrid" in {v.object for v in ledger.history(LIVES_IN)}


def test_a_query_never_finds_a_retracted_value(ledger: Ledger, clock: FakeClock) -> None:
    at(clock, 1)
    ledger.submit(sub(WORKS_AT, "Acme Robotics", day=0))
    assert found(ledger, "Acme") == ["Acme Robotics"]  # the control
    at(clock, 5)
    ledger.retract(WORKS_AT, "Acme Robotics", START + 3 * DAY, "she left")
    assert found(ledger, "Acme") == []
    # Before the retraction's time the value held, and a search as of then finds it.
    assert found(ledger, "Acme", as_of=START + 2 * DAY) == ["Acme Robotics"]


def test_a_query_never_finds_a_decayed_value(ledger: Ledger, clock: FakeClock) -> None:
    """An llm_generated claim past its expiry (decay.lifetime after it was recorded) leaves
    the present, before and after the decay job, and stays in views before its expiry."""
    at(clock, 0)
    ledger.submit(sub(LIVES_IN, "Valencia", day=0, anchor="llm_generated", confidence=0.8))
    life = decay.lifetime(800, ledger.policy.min_confidence_milli, 30 * DAY)
    clock.advance(life - 1)
    assert found(ledger, "Valencia") == ["Valencia"]  # the control: one microsecond before
    clock.advance(1)
    assert found(ledger, "Valencia") == []
    with pytest.raises(NotFound):
        ledger.belief(LIVES_IN)
    ledger.run_decay()
    assert found(ledger, "Valencia") == []
    assert found(ledger, "Valencia", as_of=START + life - 1) == ["Valencia"]


def test_an_older_claim_that_outlives_a_decayed_one_is_found_before_the_decay_job(
    ledger: Ledger, clock: FakeClock
) -> None:
    """Porto (later event time, low confidence) wins until its expiry; from then on GetBelief
    serves Lisbon again, whether or not the decay job has run, and so must a search."""
    at(clock, 11)
    ledger.submit(sub(LIVES_IN, "Lisbon", day=0, anchor="agent_observed", confidence=1.0))
    ledger.submit(sub(LIVES_IN, "Porto", day=10, anchor="agent_observed", confidence=0.5))
    assert found(ledger, "Porto") == ["Porto"]  # the control
    assert found(ledger, "Lisbon") == []
    at(clock, 100)  # Porto expired about day 69; Lisbon holds to about day 249
    assert ledger.belief(LIVES_IN).object == "Lisbon"
    assert found(ledger, "Porto") == []
    assert found(ledger, "Lisbon") == ["Lisbon"]
    assert found(ledger, "ana lives") == ["Lisbon"]
    assert_served(ledger, hits(ledger, "Lisbon"))
    ledger.run_decay()
    assert found(ledger, "Lisbon") == ["Lisbon"]
    assert found(ledger, "Porto") == []


def test_a_query_never_finds_a_corrected_value(ledger: Ledger) -> None:
    wrong = ledger.submit(sub(WORKS_AT, "Initech", day=0))
    assert found(ledger, "Initech") == ["Initech"]  # the control
    ledger.submit(sub(WORKS_AT, "Globex", day=0, corrects=wrong.evidence_id))
    assert found(ledger, "Initech") == []
    # Corrected means never true: no earlier view finds it either.
    assert found(ledger, "Initech", as_of=START + DAY) == []
    assert found(ledger, "Globex") == ["Globex"]


def test_a_query_never_finds_an_erased_value_and_finds_what_it_retired(
    ledger: Ledger, clock: FakeClock
) -> None:
    at(clock, 1)
    ledger.submit(sub(LIVES_IN, "Lisbon", day=0))
    secret = ledger.submit(sub(LIVES_IN, "Rua Secreta", day=10, source="whisper"))
    assert found(ledger, "Secreta") == ["Rua Secreta"]  # the control
    assert found(ledger, "whisper") == ["Rua Secreta"]
    assert found(ledger, "Lisbon") == []
    clock.advance(1)
    ledger.erase(evidence_id=secret.evidence_id, operator="dpo", reason="request")
    for view in ({}, {"as_of": START + 20 * DAY}, {"known_at": clock.now() - 1}):
        assert found(ledger, "Secreta", **view) == []
        assert found(ledger, "whisper", **view) == []
    # The belief the erased evidence had retired comes back, and recall finds it.
    assert found(ledger, "Lisbon") == ["Lisbon"]
    ledger.erase(key=LIVES_IN, operator="dpo", reason="request")
    assert found(ledger, "Lisbon") == []
    assert found(ledger, "Lisbon", as_of=START + 5 * DAY) == []


# -- time travel ----------------------------------------------------------------------


def test_an_earlier_as_of_finds_what_was_believed_then(ledger: Ledger) -> None:
    ledger.submit(sub(LIVES_IN, "Lisbon", day=0))
    ledger.submit(sub(LIVES_IN, "Porto", day=10))
    ledger.submit(sub(LIVES_IN, "Faro", day=20))
    for day, value in [(5, "Lisbon"), (15, "Porto"), (25, "Faro")]:
        as_of = START + day * DAY
        for word in ("Lisbon", "Porto", "Faro"):
            assert found(ledger, word, as_of=as_of) == ([value] if word == value else [])
        [h] = hits(ledger, "ana", as_of=as_of)
        assert h.object == value
        assert_served(ledger, [h], as_of=as_of)
    # Before anything held, nothing is found.
    assert found(ledger, "Lisbon", as_of=START - DAY) == []


def test_known_at_before_a_later_fact_finds_the_older_value(
    ledger: Ledger, clock: FakeClock
) -> None:
    at(clock, 1)
    ledger.submit(sub(LIVES_IN, "Lisbon", day=0))
    learned_lisbon = clock.now()
    at(clock, 30)
    ledger.submit(sub(LIVES_IN, "Porto", day=10))  # learned late, true since day 10
    assert found(ledger, "Lisbon") == []  # the control: the present no longer has it
    assert found(ledger, "Lisbon", known_at=learned_lisbon + DAY) == ["Lisbon"]
    assert found(ledger, "Porto", known_at=learned_lisbon + DAY) == []
    assert found(ledger, "Porto", known_at=clock.now()) == ["Porto"]
    # as_of day 20 as known on day 2: Porto was not known yet.
    view = {"as_of": START + 20 * DAY, "known_at": learned_lisbon + DAY}
    assert found(ledger, "ana", **view) == ["Lisbon"]
    assert_served(ledger, hits(ledger, "ana", **view), **view)


# -- filters, pages and permissions -----------------------------------------------------


def _neighbourhood(ledger: Ledger) -> None:
    """Beliefs in three namespaces that one word ("garden") finds everywhere."""
    ledger.submit_many(
        [
            sub(Key("user:ana", "ana", "lives_in"), "garden flat", anchor="user_stated"),
            sub(Key("user:ana", "ana", "hobby"), "garden design", anchor="llm_generated"),
            sub(Key("user:anabel", "anabel", "lives_in"), "garden house"),
            sub(Key("user:bob", "bob", "lives_in"), "garden cottage"),
            sub(Key("team:infra", "office", "lives_in"), "garden office"),
        ]
    )


def test_namespace_prefix_subject_and_predicate_filter_hits(ledger: Ledger) -> None:
    _neighbourhood(ledger)
    assert sorted(found(ledger, "garden")) == sorted(
        ["garden flat", "garden design", "garden house", "garden cottage", "garden office"]
    )
    assert sorted(found(ledger, "garden", namespace_prefix="user:ana")) == sorted(
        ["garden flat", "garden design", "garden house"]
    )
    assert found(ledger, "garden", namespace_prefix="user:bob") == ["garden cottage"]
    assert found(ledger, "garden", namespace_prefix="team:") == ["garden office"]
    assert found(ledger, "garden", namespace_prefix="nobody:") == []
    assert sorted(found(ledger, "garden", subject="ana")) == ["garden design", "garden flat"]
    assert found(ledger, "garden", subject="ana", predicate="hobby") == ["garden design"]
    assert sorted(found(ledger, "garden", predicate="lives_in")) == sorted(
        ["garden flat", "garden house", "garden cottage", "garden office"]
    )
    assert found(ledger, "garden", subject="nobody") == []
    # Filters apply in a past view too.
    assert found(ledger, "garden", namespace_prefix="user:bob", as_of=ledger.clock.now() + 1) == [
        "garden cottage"
    ]


def test_anchor_filter_keeps_hits_resting_on_those_anchors(ledger: Ledger) -> None:
    _neighbourhood(ledger)
    assert found(ledger, "garden", anchors=["llm_generated"]) == ["garden design"]
    assert len(found(ledger, "garden", anchors=["user_stated", "llm_generated"])) == 5
    assert found(ledger, "garden", anchors=["api_response"]) == []


def test_state_filter_finds_an_ambiguous_tie(ledger: Ledger) -> None:
    """Two claims no rule tells apart: the key is AMBIGUOUS, serving the provisional one."""
    _neighbourhood(ledger)
    tie = Key("user:cleo", "cleo", "lives_in")
    ledger.submit(sub(tie, "garden villa", day=0, source="one"))
    ledger.submit(sub(tie, "garden loft", day=0, source="two"))
    served = ledger.belief(tie)
    assert served.state is BeliefState.AMBIGUOUS and served.rule is Rule.TIEBREAK
    [h] = hits(ledger, "garden", states=["AMBIGUOUS"])
    assert h.belief.key == tie and h.object == served.object
    assert h.belief.state is BeliefState.AMBIGUOUS
    believed = found(ledger, "garden", states=["BELIEVED"])
    assert len(believed) == 5 and served.object not in believed
    assert len(found(ledger, "garden", states=["BELIEVED", "AMBIGUOUS"])) == 6
    assert found(ledger, "garden", states=["CONTESTED"]) == []
    # The other value of the tie is not served, so no filter finds it.
    other = ({"garden villa", "garden loft"} - {served.object}).pop()
    assert other not in found(ledger, "villa loft garden")


def test_pages_walk_every_hit_once(ledger: Ledger) -> None:
    ledger.submit_many(
        [sub(Key(NS, f"person-{i:02}", "lives_in"), f"meadow lane {i}") for i in range(23)]
        + [sub(Key(NS, f"person-{i:02}", "lives_in"), f"meadow road {i}", day=5) for i in range(7)]
    )
    everything = hits(ledger, "meadow", page_size=100)
    assert len(everything) == 23  # seven keys moved: their old values are not hits
    assert_served(ledger, everything)
    for size in (1, 4, 7, 22, 23, 24):
        paged = hits(ledger, "meadow", page_size=size)
        assert [(h.belief.key, h.version_id) for h in paged] == [
            (h.belief.key, h.version_id) for h in everything
        ]
    first = ledger.reading.search(recall.search("meadow", limit=7), everyone)
    assert len(first.items) == 7 and first.next_page_token
    # The scores of one search's pages go down (best first).
    scores = [h.score for h in everything]
    assert scores == sorted(scores, reverse=True)


def test_a_page_token_from_another_search_is_refused_naming_page_token(ledger: Ledger) -> None:
    ledger.submit_many([sub(Key(NS, f"p{i}", "lives_in"), f"meadow {i}") for i in range(5)])
    request = recall.search("meadow", limit=2)
    token = ledger.reading.search(request, everyone).next_page_token
    assert ledger.reading.search(request, everyone, token).items  # the control
    for other in (
        recall.search("meadows", limit=2),
        recall.search("meadow", limit=3),
        recall.search("meadow", limit=2, namespace_prefix="user:"),
        recall.search("meadow", limit=2, as_of=ledger.clock.now()),
        recall.search("meadow", limit=2, states=["BELIEVED"]),
    ):
        with pytest.raises(InvalidInput) as exc:
            ledger.reading.search(other, everyone, token)
        assert [v.field for v in exc.value.violations] == ["page_token"]
    with pytest.raises(InvalidInput) as exc:
        ledger.reading.search(request, everyone, tokens.key_position("0" * 32, "1" * 32))
    assert [v.field for v in exc.value.violations] == ["page_token"]


def test_may_read_leaves_other_namespaces_out(ledger: Ledger) -> None:
    _neighbourhood(ledger)
    assert "garden office" in found(ledger, "garden")  # the control

    def users_only(namespace: str) -> bool:
        return namespace.startswith("user:")

    seen = hits(ledger, "garden", may_read=users_only)
    assert len(seen) == 4
    assert all(h.belief.key.namespace.startswith("user:") for h in seen)
    assert hits(ledger, "office", may_read=users_only) == []
    assert hits(ledger, "garden", may_read=users_only, namespace_prefix="team:") == []
    # Pages of a reader's search skip what it may not read, and still end.
    paged = hits(ledger, "garden", may_read=users_only, page_size=1)
    assert [h.object for h in paged] == [h.object for h in seen]


# -- the property: hits are GetBelief's answers, and every served value is found --------

VOCAB = ("amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "hazel")
ANCHOR_CHOICES = ("user_stated", "agent_observed", "llm_generated", "llm_generated")


@dataclass(frozen=True)
class Put:
    key: int
    words: tuple[str, ...]
    anchor: str
    day: int | None
    confidence: float
    corrects: int | None  # an index into the evidence submitted so far


@dataclass(frozen=True)
class Retract:
    key: int
    day: int | None


@dataclass(frozen=True)
class Erase:
    key: int | None  # None: the last evidence submitted


@dataclass(frozen=True)
class Step:
    days: int


Op = Put | Retract | Erase | Step

puts = st.builds(
    Put,
    st.sampled_from([0, 0, 1, 2]),
    st.lists(st.sampled_from(VOCAB), min_size=1, max_size=2).map(tuple),
    st.sampled_from(ANCHOR_CHOICES),
    st.one_of(st.none(), st.sampled_from([0, 5, 10, 30])),
    st.sampled_from([0.5, 0.9, 1.0]),
    st.one_of(st.none(), st.none(), st.integers(0, 20)),
)
ops = st.lists(
    st.one_of(
        puts,
        puts,
        puts,
        st.builds(Retract, st.integers(0, 2), st.one_of(st.none(), st.integers(0, 40))),
        st.builds(Erase, st.one_of(st.none(), st.integers(0, 2))),
        # About the lifetimes of llm_generated claims (10 to 47 days) and more.
        st.builds(Step, st.sampled_from([1, 5, 12, 20, 30, 45, 70])),
        st.builds(Step, st.sampled_from([12, 20])),
    ),
    min_size=1,
    max_size=14,
)
queries = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3)


def _run(
    ledger: Ledger,
    clock: FakeClock,
    keys: Sequence[Key],
    history: Sequence[Op],
    check: Callable[[], None],
) -> None:
    """Applies `history` to `keys` (of a fresh namespace), calling `check` after each clock
    step (when claims may have expired) and at the end."""
    base = clock.now()
    submitted: list[str] = []
    for op in history:
        if isinstance(op, Put):
            corrects = (
                submitted[op.corrects]
                if op.corrects is not None and (op.corrects < len(submitted))
                else None
            )
            key = keys[op.key]
            with suppress(InvalidInput):
                done = ledger.submit(
                    Submission(
                        key.namespace,
                        key.subject,
                        key.predicate,
                        " ".join(op.words),
                        op.anchor,
                        "src",
                        0.5,
                        op.confidence,
                        None if op.day is None else base + op.day * DAY,
                        corrects=corrects,
                    )
                )
                submitted.append(done.evidence_id)
        elif isinstance(op, Retract):
            at_ = None if op.day is None else min(base + op.day * DAY, clock.now())
            with suppress(NotFound, InvalidInput):
                ledger.retract(keys[op.key], None, at_, "no longer")
        elif isinstance(op, Erase):
            clock.advance(1)
            if op.key is None:
                if submitted:
                    with suppress(NotFound, InvalidInput):
                        ledger.erase(evidence_id=submitted[-1], operator="dpo", reason="test")
            else:
                with suppress(NotFound, InvalidInput):
                    ledger.erase(key=keys[op.key], operator="dpo", reason="test")
        else:
            clock.advance(op.days * DAY)
            check()
        clock.advance(1)
    check()


def _served(ledger: Ledger, keys: Sequence[Key], as_of: int | None, known_at: int | None) -> dict:
    """(key, version id) -> value of everything GetBelief serves in the view."""
    out = {}
    for key in keys:
        try:
            b = ledger.belief(key, as_of, known_at)
        except NotFound:
            continue
        for version_id, obj in b.values or ((b.version_id, b.object),):
            out[(key, version_id)] = obj
    return out


_WORDS = re.compile(r"[a-z]+")


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# The winner expires before the claim it beat (same anchor, later event time, lower
# confidence): from then on the older claim is served again, before any decay job runs.
@example(
    history=[
        Put(0, ("amber",), "llm_generated", 0, 0.9, None),
        Put(0, ("basalt",), "llm_generated", 5, 0.5, None),
        Step(12),
    ],
    searches=[(["amber"], "now", 0)],
)
# A correction that expires: the value it corrected is served again.
@example(
    history=[
        Put(1, ("ember",), "llm_generated", 0, 1.0, None),
        Put(1, ("fjord",), "llm_generated", 0, 0.5, 0),
        Step(20),
    ],
    searches=[(["ember"], "now", 0)],
)
@given(
    history=ops,
    searches=st.lists(
        st.tuples(
            queries, st.sampled_from(["now", "as_of", "known_at", "both"]), st.integers(0, 80)
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_hits_are_exactly_the_served_values_the_words_match(
    ledger: Ledger, clock: FakeClock, history: list[Op], searches: list[tuple[list[str], str, int]]
) -> None:
    """Over random histories (assertions with random anchors, event times, values and
    corrections among four keys, one multi-valued; retractions; erasures; clock steps that
    let claims expire): every hit of every search equals GetBelief's answer in the same view
    (value, state, rule), and every value served there whose words meet the query is a hit,
    once."""
    namespace = f"prop:{uuid.uuid4().hex}"
    keys = [Key(namespace, "s0", "lives_in"), Key(namespace, "s1", "lives_in")]
    keys.append(Key(namespace, "s0", "speaks"))  # multi-valued
    base = clock.now()

    def check() -> None:
        for words, view, offset in [(list(VOCAB), "now", 0), *searches]:
            as_of = base + offset * DAY if view in ("as_of", "both") else None
            known_at = (
                min(base + offset * DAY // 2, clock.now()) if view in ("known_at", "both") else None
            )
            served = _served(ledger, keys, as_of, known_at)
            found_hits = hits(
                ledger, " ".join(words), namespace_prefix=namespace, as_of=as_of, known_at=known_at
            )
            assert_served(ledger, found_hits, as_of=as_of, known_at=known_at)
            got = [(h.belief.key, h.version_id) for h in found_hits]
            assert len(got) == len(set(got)), "a value was found twice"
            expected = {kv for kv, obj in served.items() if set(_WORDS.findall(obj)) & set(words)}
            assert set(got) == expected, (view, words, served)

    _run(ledger, clock, keys, history, check)


def test_a_numbered_subject_is_found_by_its_number_on_both_backends(ledger: Ledger) -> None:
    """Words are split alike in the index and the query: "person-123" is the words person
    and 123 (PostgreSQL's own parser would read the number as "-123" and never match)."""
    for n in (123, 124, 223):
        ledger.submit(sub(Key("people", f"person-{n}", "city"), f"Town {n}"))
    found = hits(ledger, "city of person-123")
    assert [h.belief.key.subject for h in found][:1] == ["person-123"]
    assert [h.object for h in hits(ledger, "123")] == ["Town 123"]


def test_assertions_matching_every_word_come_first(ledger: Ledger) -> None:
    """A value whose assertion holds every word of the query ranks above values matching
    only some, however common or rare each word is."""
    ledger.submit(sub(Key(NS, "ana", "drink"), "green tea"))
    ledger.submit(sub(Key(NS, "ravi", "drink"), "black tea"))
    ledger.submit(sub(Key(NS, "mia", "drink"), "green juice"))
    ledger.submit(sub(Key(NS, "leo", "drink"), "green smoothie"))
    found = [h.object for h in hits(ledger, "green tea")]
    assert found[0] == "green tea"
    assert sorted(found[1:]) == ["black tea", "green juice", "green smoothie"]


def test_an_any_word_query_leaves_out_words_most_of_the_store_holds(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A word matching more than COMMON_MATCHES assertions is left out of the any-word query
    when the query has a rarer one; with none rarer, every word counts."""
    from factnode.store import _search

    monkeypatch.setattr(_search, "COMMON_MATCHES", 3)
    for n in range(5):
        ledger.submit(sub(Key(NS, f"p{n}", "likes"), f"alpha thing {n}"))
    ledger.submit(sub(Key(NS, "z", "likes"), "zeta"))
    with ledger.repo.read() as tx:
        rare = tx.search_matches(["alpha", "zeta"], every_word=False)
        common = tx.search_matches(["alpha"], every_word=False)
    assert [m.key.subject for m in rare] == ["z"]
    assert sorted(m.key.subject for m in common) == [f"p{n}" for n in range(5)]
    # The control: with the bound above the store's size both words count.
    monkeypatch.setattr(_search, "COMMON_MATCHES", 100)
    with ledger.repo.read() as tx:
        both = tx.search_matches(["alpha", "zeta"], every_word=False)
    assert len(both) == 6


def test_a_common_word_still_scores_the_assertions_its_rare_words_choose(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Of the assertions a rare word chooses, the one that also holds the common word ranks
    first: "where does service 42 run" prefers service-42 over person-42."""
    from factnode.store import _search

    monkeypatch.setattr(_search, "COMMON_MATCHES", 3)
    for n in range(5):
        ledger.submit(sub(Key(NS, f"service-{n}0", "region"), f"region {n}"))
    ledger.submit(sub(Key(NS, "person-42", "city"), "Rome"))
    ledger.submit(sub(Key(NS, "service-42", "region"), "Montreal"))
    with ledger.repo.read() as tx:
        found = tx.search_matches(["service", "42"], every_word=False)
    assert [m.key.subject for m in found] == ["service-42", "person-42"]
