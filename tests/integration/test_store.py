"""The Ledger on a real store, the same suite on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager, suppress

import pytest

from factnode.config import DEFAULT_CACHE_KEYS
from factnode.core import (
    MICROS_PER_DAY,
    BeliefState,
    Interval,
    InvalidInput,
    Key,
    Outcome,
    Policy,
    Rule,
    Submission,
    expiry,
    ids,
)
from factnode.ledger import Ledger, NotFound, ensure_node_id
from factnode.store import SqlRepository
from factnode.store import cache as store_cache
from factnode.store.repository import CommitWatcher, Transaction
from factnode.testing import FakeClock

DAY = MICROS_PER_DAY
NS = "user:ana"
LIVES_IN = Key(NS, "ana", "lives_in")
WORKS_AT = Key(NS, "ana", "works_at")
SPEAKS = Key(NS, "ana", "speaks")
BOB_LIVES_IN = Key(NS, "bob", "lives_in")

Opener = Callable[[], Ledger]


def sub(
    obj: str,
    *,
    key: Key = LIVES_IN,
    day: int | None = None,
    anchor: str = "user_stated",
    source: str = "ana",
    worth: float = 0.5,
    confidence: float = 0.9,
    idem: str | None = None,
) -> Submission:
    """A submission of `key` = `obj`, true from `day` days after the fake clock's start."""
    start = FakeClock().now()
    valid_from = None if day is None else start + day * DAY
    return Submission(
        key.namespace,
        key.subject,
        key.predicate,
        obj,
        anchor,
        source,
        worth,
        confidence,
        valid_from,
        idempotency_key=idem,
    )


@pytest.fixture
def reopen(repository_url: str, clock: FakeClock) -> Iterator[Opener]:
    """Opens a new repository and ledger on the same database; all closed at teardown."""
    opened: list[SqlRepository] = []

    def open_ledger() -> Ledger:
        repo = SqlRepository(repository_url)
        opened.append(repo)
        return Ledger(repo, Policy(), "node-test", clock)

    yield open_ledger
    for repo in opened:
        repo.close()


def at(clock: FakeClock, day: int) -> None:
    """Moves the fake clock to `day` days after its start."""
    clock.current = FakeClock().now() + day * DAY


def everything_readable(ledger: Ledger, namespace: str = NS) -> str:
    """The text of every read path for a namespace: beliefs, review, history, explain, log."""
    parts: list[object] = []
    listed = ledger.list_beliefs(namespace, page_size=1000).items
    parts += listed
    parts += ledger.review_queue(namespace, page_size=1000).items
    parts += ledger.decisions(namespace=namespace, page_size=1000).items
    parts += ledger.changes(namespace, limit=1000)
    logged = ledger.decisions(page_size=1000).items
    keys = {b.key for b in listed} | {d.decision.key for d in logged}
    keys |= {LIVES_IN, WORKS_AT, SPEAKS, BOB_LIVES_IN}
    for key in sorted(keys):
        for read in (ledger.belief, ledger.history, ledger.explain):
            with suppress(NotFound):
                parts.append(read(key))
        parts += ledger.decisions(key=key, page_size=1000).items
    return repr(parts)


def outcome(ledger: Ledger, s: Submission) -> tuple[Outcome, Rule]:
    """Submits `s` and returns its (outcome, rule)."""
    d = ledger.submit(s).decision
    return d.outcome, d.rule


# -- persistence ---------------------------------------------------------------


def test_every_outcome_is_recorded_and_survives_reopening(
    ledger: Ledger, repository: SqlRepository, clock: FakeClock, reopen: Opener
) -> None:
    """Each outcome and its rule is stored; a new repository on the same URL reads it all back."""
    at(clock, 1)
    expected = [
        (sub("Lisbon", day=0), (Outcome.ACCEPTED, Rule.FIRST_VERSION)),
        (sub("Lisbon", day=0, source="ana-again"), (Outcome.CORROBORATED, Rule.CORROBORATION)),
        (sub("Porto", day=10), (Outcome.SUPERSEDED, Rule.RECENCY)),
        (sub("Faro", day=5), (Outcome.HISTORICAL, Rule.RECENCY)),
        (
            sub("Braga", day=20, anchor="llm_generated", source="gpt"),
            (Outcome.DISBELIEVED, Rule.TRUST_ANCHOR),
        ),
        (sub("Evora", day=30, confidence=0.1), (Outcome.REJECTED, Rule.MIN_CONFIDENCE)),
        (sub("Evora", day=30, source=""), (Outcome.REJECTED, Rule.NO_PROVENANCE)),
        (sub("Porto", day=10), (Outcome.DUPLICATE, Rule.DUPLICATE)),
        (
            sub("x", key=WORKS_AT, day=1, anchor="agent_observed", source="a"),
            (Outcome.ACCEPTED, Rule.FIRST_VERSION),
        ),
        (
            sub("y", key=WORKS_AT, day=1, anchor="agent_observed", source="b"),
            (Outcome.AMBIGUOUS, Rule.TIEBREAK),
        ),
    ]
    got = [outcome(ledger, s) for s, _ in expected]
    assert got == [want for _, want in expected]

    before = (
        ledger.belief(LIVES_IN),
        ledger.belief(WORKS_AT),
        ledger.history(LIVES_IN),
        ledger.decisions(page_size=1000).items,
        ledger.changes(limit=1000),
        ledger.counts(),
    )
    repository.close()
    again = reopen()
    after = (
        again.belief(LIVES_IN),
        again.belief(WORKS_AT),
        again.history(LIVES_IN),
        again.decisions(page_size=1000).items,
        again.changes(limit=1000),
        again.counts(),
    )
    assert after == before
    assert after[0].object == "Porto"
    assert after[1].state is BeliefState.AMBIGUOUS
    assert [(d.decision.outcome, d.decision.rule) for d in after[3]] == [w for _, w in expected]
    counts = after[5]
    # Stored: 6 candidates (incl. Braga) + 2 WORKS_AT; rejections are logged, not candidates.
    assert (counts.evidence, counts.keys, counts.decisions, counts.rejected, counts.ambiguous) == (
        7,
        2,
        10,
        2,
        1,
    )


def test_batch_is_decided_in_order_in_one_transaction(ledger: Ledger, clock: FakeClock) -> None:
    """A batch sees its own earlier items: later ones corroborate, supersede or duplicate them."""
    at(clock, 1)
    results = ledger.submit_many(
        [
            sub("Lisbon", day=0),
            sub("Lisbon", day=0, source="ana-again"),
            sub("Porto", day=10),
            sub("Porto", day=10),
            sub("en", key=SPEAKS, day=0),
            sub("pt", key=SPEAKS, day=0),
        ]
    )
    assert [(r.decision.outcome, r.decision.rule) for r in results] == [
        (Outcome.ACCEPTED, Rule.FIRST_VERSION),
        (Outcome.CORROBORATED, Rule.CORROBORATION),
        (Outcome.SUPERSEDED, Rule.RECENCY),
        (Outcome.DUPLICATE, Rule.DUPLICATE),
        (Outcome.ACCEPTED, Rule.MULTI_VALUED),
        (Outcome.ACCEPTED, Rule.MULTI_VALUED),
    ]
    assert ledger.belief(LIVES_IN).object == "Porto"
    assert sorted(o for _, o in ledger.belief(SPEAKS).values) == ["en", "pt"]
    assert ledger.counts().evidence == 5


def test_invalid_item_fails_the_whole_batch_and_writes_nothing(ledger: Ledger) -> None:
    """One bad item in a batch raises InvalidInput naming its field, and nothing is stored."""
    with pytest.raises(InvalidInput) as err:
        ledger.submit_many([sub("Lisbon", day=0), sub("Porto", day=1, confidence=1.5)])
    assert [v.field for v in err.value.violations] == ["confidence"]
    counts = ledger.counts()
    assert (counts.evidence, counts.decisions, counts.keys) == (0, 0, 0)


class _FailingRepository:
    """Wraps a repository so that writing decisions fails, after evidence was inserted."""

    def __init__(self, inner: SqlRepository) -> None:
        self.inner = inner

    @contextmanager
    def write(
        self, keys: Collection[Key] = (), evidence_ids: Collection[str] = ()
    ) -> Iterator[Transaction]:
        with self.inner.write(keys, evidence_ids) as tx:

            def boom(*_: object) -> list[int]:
                raise RuntimeError("disk on fire")

            tx.add_decisions = boom  # type: ignore[method-assign,assignment]
            yield tx

    def read(self) -> object:
        return self.inner.read()

    @property
    def cache_keys(self) -> int:
        return self.inner.cache_keys

    @property
    def shared(self) -> bool:
        return self.inner.shared

    def watch(self, watcher: CommitWatcher) -> None:
        self.inner.watch(watcher)

    def after_erase(self) -> None:
        self.inner.after_erase()

    def close(self) -> None:
        self.inner.close()


def test_batch_failing_midway_rolls_back_everything(
    ledger: Ledger, repository: SqlRepository, clock: FakeClock
) -> None:
    """A batch that fails after inserting its evidence leaves no evidence, decision or belief."""
    failing = Ledger(_FailingRepository(repository), Policy(), "node-test", clock)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="disk on fire"):
        failing.submit_many([sub("Lisbon", day=0), sub("en", key=SPEAKS, day=0)])
    counts = ledger.counts()
    assert (counts.evidence, counts.decisions, counts.keys) == (0, 0, 0)
    with pytest.raises(NotFound):
        ledger.belief(LIVES_IN)
    assert ledger.submit(sub("Lisbon", day=0)).decision.outcome is Outcome.ACCEPTED


def test_concurrent_writers_on_separate_repositories_all_land(
    ledger: Ledger, reopen: Opener
) -> None:
    """Writers on separate connections to one database serialise; none fails and none is lost."""
    writers = [reopen() for _ in range(4)]
    errors: list[BaseException] = []

    def write(n: int, w: Ledger) -> None:
        try:
            for i in range(20):
                w.submit(sub(f"v{i}", key=Key(NS, f"w{n}", "lives_in"), day=i, source=f"s{n}"))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n, w)) for n, w in enumerate(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    counts = ledger.counts()
    assert (counts.evidence, counts.decisions, counts.keys) == (80, 80, 4)
    assert {b.object for b in ledger.list_beliefs(NS).items} == {"v19"}


def test_idempotency_key_gives_duplicate_with_the_original_evidence_id(
    ledger: Ledger, repository: SqlRepository, clock: FakeClock, reopen: Opener
) -> None:
    """A retry with the same idempotency key is DUPLICATE and answers the first evidence id."""
    first = ledger.submit(sub("Lisbon", idem="req-1"))
    clock.advance(DAY)  # a retry later: its defaulted event time, hence its content id, differs
    retry = ledger.submit(sub("Lisbon", idem="req-1"))
    assert first.decision.outcome is Outcome.ACCEPTED
    assert (retry.decision.outcome, retry.decision.rule) == (Outcome.DUPLICATE, Rule.DUPLICATE)
    assert retry.evidence_id == first.evidence_id
    assert retry.decision.evidence_id == first.evidence_id
    assert {d.decision.evidence_id for d in ledger.decisions().items} == {first.evidence_id}
    repository.close()
    again = reopen()
    clock.advance(DAY)
    late = again.submit(sub("Porto", idem="req-1"))
    assert late.decision.outcome is Outcome.DUPLICATE
    assert late.evidence_id == first.evidence_id
    assert again.belief(LIVES_IN).object == "Lisbon"
    assert again.counts().evidence == 1


# -- reads ---------------------------------------------------------------------


def _lisbon_then_porto(ledger: Ledger, clock: FakeClock) -> None:
    """Lisbon from day 10 (learned day 20), Porto from day 30 (learned day 40)."""
    at(clock, 20)
    ledger.submit(sub("Lisbon", day=10))
    at(clock, 40)
    ledger.submit(sub("Porto", day=30))


def test_as_of_and_known_at_read_the_past(ledger: Ledger, clock: FakeClock) -> None:
    """as_of filters by event time, known_at by ingestion time, and both combine."""
    _lisbon_then_porto(ledger, clock)
    t0 = FakeClock().now()
    assert ledger.belief(LIVES_IN).object == "Porto"
    assert ledger.belief(LIVES_IN, as_of=t0 + 15 * DAY).object == "Lisbon"
    assert ledger.belief(LIVES_IN, as_of=t0 + 30 * DAY).object == "Porto"
    assert ledger.belief(LIVES_IN, known_at=t0 + 25 * DAY).object == "Lisbon"
    assert ledger.belief(LIVES_IN, as_of=t0 + 35 * DAY, known_at=t0 + 25 * DAY).object == "Lisbon"
    with pytest.raises(NotFound):
        ledger.belief(LIVES_IN, as_of=t0 + 5 * DAY)
    with pytest.raises(NotFound):
        ledger.belief(LIVES_IN, known_at=t0 + 19 * DAY)
    with pytest.raises(InvalidInput) as err:
        ledger.belief(LIVES_IN, as_of=10**20)
    assert [v.field for v in err.value.violations] == ["as_of"]


def test_history_lists_intervals_and_lineage(ledger: Ledger, clock: FakeClock) -> None:
    """History closes the superseded version at the cutover and links both versions."""
    _lisbon_then_porto(ledger, clock)
    t0 = FakeClock().now()
    lisbon, porto = ids.version_id(LIVES_IN, "Lisbon"), ids.version_id(LIVES_IN, "Porto")
    by_object = {v.object: v for v in ledger.history(LIVES_IN)}
    assert set(by_object) == {"Lisbon", "Porto"}
    old, new = by_object["Lisbon"], by_object["Porto"]
    assert (old.version_id, new.version_id) == (lisbon, porto)
    assert [(i.start, i.end) for i in old.intervals] == [(t0 + 10 * DAY, t0 + 30 * DAY)]
    assert [(i.start, i.end) for i in new.intervals] == [(t0 + 30 * DAY, None)]
    assert (old.status, new.status) == ("HISTORICAL", "BELIEVED")
    assert (old.superseded_by, new.supersedes) == ((porto,), (lisbon,))
    # Known as of day 25, Porto did not exist yet.
    assert [v.object for v in ledger.history(LIVES_IN, known_at=t0 + 25 * DAY)] == ["Lisbon"]
    with pytest.raises(NotFound):
        ledger.history(BOB_LIVES_IN)


def test_explain_names_the_rule_against_each_other_version(
    ledger: Ledger, clock: FakeClock
) -> None:
    """Explain gives the belief and, per losing version, the first rule that beats it."""
    _lisbon_then_porto(ledger, clock)
    ledger.submit(sub("Braga", day=35, anchor="llm_generated", source="gpt"))
    explanation = ledger.explain(LIVES_IN)
    assert explanation.belief is not None and explanation.belief.object == "Porto"
    rules = {c.object: c.rule for c in explanation.comparisons}
    assert rules == {"Lisbon": Rule.RECENCY, "Braga": Rule.TRUST_ANCHOR}
    assert all(c.winner.object == "Porto" for c in explanation.comparisons)
    past = ledger.explain(LIVES_IN, as_of=FakeClock().now() + 15 * DAY)
    assert past.belief is not None and past.belief.object == "Lisbon"
    assert past.comparisons == ()


# -- paging --------------------------------------------------------------------


def test_list_beliefs_pages_round_trip(ledger: Ledger) -> None:
    """Pages of list_beliefs cover every key of the namespace once, and end with an empty token."""
    for i in range(7):
        ledger.submit(sub(f"city-{i}", key=Key(NS, f"person-{i}", "lives_in")))
    ledger.submit(sub("Oslo", key=Key("team:infra", "ci", "lives_in")))
    everything = ledger.list_beliefs(NS, page_size=1000)
    assert everything.next_page_token == ""
    assert len(everything.items) == 7

    seen, token, pages = [], "", 0
    while True:
        page = ledger.list_beliefs(NS, page_size=3, page_token=token)
        pages += 1
        assert len(page.items) <= 3
        seen += page.items
        token = page.next_page_token
        if not token:
            break
    assert pages == 3
    assert seen == everything.items
    assert [b.object for b in ledger.list_beliefs(NS, subject="person-4").items] == ["city-4"]


def test_list_beliefs_keeps_a_multi_valued_key_on_one_page(ledger: Ledger) -> None:
    """Paging never splits one key's values into two beliefs."""
    for lang in ("en", "pt", "es"):
        ledger.submit(sub(lang, key=SPEAKS))
    ledger.submit(sub("Lisbon"))
    seen, token = [], ""
    while True:
        page = ledger.list_beliefs(NS, page_size=1, page_token=token)
        seen += page.items
        token = page.next_page_token
        if not token:
            break
    assert sorted(str(b.key) for b in seen) == sorted([str(SPEAKS), str(LIVES_IN)])
    speaks = next(b for b in seen if b.key == SPEAKS)
    assert sorted(o for _, o in speaks.values) == ["en", "es", "pt"]


def test_decisions_pages_round_trip(ledger: Ledger) -> None:
    """Pages of the decision log are oldest first, complete, and end with an empty token."""
    for i in range(5):
        ledger.submit(sub(f"city-{i}", day=i))
    ledger.submit(sub("Oslo", key=Key("team:infra", "ci", "lives_in")))
    everything = ledger.decisions(page_size=1000).items
    assert len(everything) == 6
    assert [d.seq for d in everything] == sorted(d.seq for d in everything)

    seen, token = [], ""
    while True:
        page = ledger.decisions(page_size=2, page_token=token)
        seen += page.items
        token = page.next_page_token
        if not token:
            break
    assert seen == everything
    assert len(ledger.decisions(namespace=NS, page_size=1000).items) == 5
    assert len(ledger.decisions(key=LIVES_IN, page_size=1000).items) == 5


@pytest.mark.parametrize(
    "token",
    [
        "not a token!",
        base64.urlsafe_b64encode(b"abc").decode(),
        base64.urlsafe_b64encode(b"a\x1fb\x1fc").decode(),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    ],
)
def test_bad_page_token_is_invalid_input_naming_page_token(ledger: Ledger, token: str) -> None:
    """A page token the node did not issue is InvalidInput on the page_token field."""
    ledger.submit(sub("Lisbon"))
    for call in (
        lambda: ledger.list_beliefs(NS, page_token=token),
        lambda: ledger.review_queue(NS, page_token=token),
        lambda: ledger.decisions(page_token=token),
    ):
        with pytest.raises(InvalidInput) as err:
            call()
        assert [v.field for v in err.value.violations] == ["page_token"]


# -- review, retract, resolve --------------------------------------------------


def _ambiguous(ledger: Ledger, key: Key = WORKS_AT, anchor: str = "agent_observed") -> None:
    """Two versions of `key` that no rule tells apart."""
    ledger.submit(sub("Acme", key=key, day=1, anchor=anchor, source="a"))
    ledger.submit(sub("Initech", key=key, day=1, anchor=anchor, source="b"))


def test_review_queue_lists_the_longest_waiting_key_first_page_by_page(
    ledger: Ledger, clock: FakeClock
) -> None:
    """The queue is oldest first (by when the key's served belief last changed), not in key
    order; pages follow that order, and a key-order token is refused for it."""
    later_keys = [Key(NS, subject, "works_at") for subject in ("zed", "bob", "mia")]
    for key in later_keys:
        _ambiguous(ledger, key)
        clock.advance(MICROS_PER_DAY)
    queue = [b.key for b in ledger.review_queue(NS).items]
    assert queue == later_keys  # zed entered first, although it sorts last by key
    seen, token = [], ""
    for _ in range(len(later_keys) + 1):
        page = ledger.review_queue(NS, page_size=1, page_token=token)
        seen += [b.key for b in page.items]
        token = page.next_page_token
        if not token:
            break
    assert seen == later_keys
    # A third claim moves bob's served row: bob now waits the shortest.
    ledger.submit(sub("Hooli", key=later_keys[1], day=1, anchor="agent_observed", source="c"))
    assert [b.key for b in ledger.review_queue(NS).items] == [
        later_keys[0],
        later_keys[2],
        later_keys[1],
    ]
    key_token = ledger.list_beliefs(NS, page_size=1).next_page_token
    assert key_token
    with pytest.raises(InvalidInput) as err:
        ledger.review_queue(NS, page_token=key_token)
    assert [v.field for v in err.value.violations] == ["page_token"]


def test_review_queue_holds_exactly_the_ambiguous_keys(ledger: Ledger) -> None:
    """The review queue lists every AMBIGUOUS key and nothing else."""
    ledger.submit(sub("Lisbon"))
    ledger.submit(sub("en", key=SPEAKS))
    _ambiguous(ledger, WORKS_AT)
    _ambiguous(ledger, BOB_LIVES_IN)
    queue = ledger.review_queue(NS).items
    assert sorted(str(b.key) for b in queue) == sorted([str(WORKS_AT), str(BOB_LIVES_IN)])
    assert all(b.state is BeliefState.AMBIGUOUS and b.rule is Rule.TIEBREAK for b in queue)
    assert (ledger.counts().ambiguous, ledger.counts().contested) == (2, 0)
    # A third, stronger claim settles one of them.
    ledger.submit(sub("Globex", key=BOB_LIVES_IN, day=1, anchor="user_stated"))
    assert [b.key for b in ledger.review_queue(NS).items] == [WORKS_AT]
    assert ledger.review_queue("team:infra").items == []


def test_retract_ends_the_belief_from_its_time(ledger: Ledger, clock: FakeClock) -> None:
    """A retraction ends the belief now, keeps it in as-of answers before, and is logged."""
    at(clock, 10)
    ledger.submit(sub("Acme", key=WORKS_AT, day=1))
    at(clock, 20)
    decision = ledger.retract(WORKS_AT, reason="left Acme").decision
    assert (decision.outcome, decision.rule) == (Outcome.RETRACTED, Rule.RETRACT)
    with pytest.raises(NotFound):
        ledger.belief(WORKS_AT)
    assert ledger.belief(WORKS_AT, as_of=FakeClock().now() + 15 * DAY).object == "Acme"
    assert ledger.list_beliefs(NS).items == []
    [version] = ledger.history(WORKS_AT)
    assert version.status == "RETRACTED"
    assert [(i.start, i.end) for i in version.intervals] == [
        (FakeClock().now() + DAY, FakeClock().now() + 20 * DAY)
    ]
    assert ledger.decisions(key=WORKS_AT).items[-1].decision.outcome is Outcome.RETRACTED
    with pytest.raises(NotFound):
        ledger.retract(WORKS_AT)


def test_retract_one_value_of_a_multi_valued_key(ledger: Ledger, clock: FakeClock) -> None:
    """Retracting one value of a multi-valued key leaves its other values believed."""
    ledger.submit(sub("en", key=SPEAKS, day=0))
    ledger.submit(sub("pt", key=SPEAKS, day=0))
    at(clock, 1)  # a retraction at the facts' own instant would tie on recency (below)
    ledger.retract(SPEAKS, "en")
    assert [o for _, o in ledger.belief(SPEAKS).values] == ["pt"]


def test_an_outranked_retraction_is_stored_and_disbelieved(
    ledger: Ledger, clock: FakeClock
) -> None:
    """A retraction that the belief outranks ends nothing, is DISBELIEVED by the rule that
    outranked it (the detail names the stronger evidence), and acts once that is erased."""
    strong = ledger.submit(sub("Acme", key=WORKS_AT, day=1, anchor="user_stated"))
    weak = ledger.submit(sub("Acme", key=WORKS_AT, day=1, anchor="agent_observed", source="crm"))
    at(clock, 5)
    decision = ledger.retract(
        WORKS_AT, attribution="api_response", source="hr", confidence=0.9
    ).decision
    assert (decision.outcome, decision.rule) == (Outcome.DISBELIEVED, Rule.TRUST_ANCHOR)
    assert strong.evidence_id in decision.detail
    assert ledger.belief(WORKS_AT).object == "Acme"
    # The same instant, the same anchor, a lower confidence: a tie on recency, lost on
    # confidence; a tie on every rule would not end it either.
    tied = ledger.retract(WORKS_AT, at=FakeClock().now() + DAY, confidence=0.5).decision
    assert (tied.outcome, tied.rule) == (Outcome.DISBELIEVED, Rule.CONFIDENCE)
    # Once the user_stated evidence is erased, the stored api_response retraction ends the
    # agent_observed evidence that is left.
    ledger.erase(evidence_id=strong.evidence_id, operator="op", reason="test")
    with pytest.raises(NotFound):
        ledger.belief(WORKS_AT)
    assert weak.evidence_id  # kept, not believed
    [version] = ledger.history(WORKS_AT)
    assert version.status == "RETRACTED"


def test_resolve_settles_an_ambiguous_key(ledger: Ledger) -> None:
    """Resolving with a version pins it: served BELIEVED by operator_resolution, queue empty."""
    _ambiguous(ledger)
    provisional = ledger.belief(WORKS_AT)
    other = next(
        v
        for v in (ids.version_id(WORKS_AT, "Acme"), ids.version_id(WORKS_AT, "Initech"))
        if v != provisional.version_id
    )
    resolution = ledger.resolve(
        WORKS_AT, version_id=other, obj=None, reason="HR says so", operator="rui"
    )
    assert resolution.resolved
    belief = ledger.belief(WORKS_AT)
    assert (belief.version_id, belief.state, belief.rule) == (
        other,
        BeliefState.BELIEVED,
        Rule.OPERATOR_RESOLUTION,
    )
    assert ledger.review_queue(NS).items == []
    with pytest.raises(NotFound):
        ledger.resolve(WORKS_AT, version_id="0" * 32, obj=None, reason="r", operator="rui")
    with pytest.raises(InvalidInput):
        ledger.resolve(WORKS_AT, version_id=other, obj="Acme", reason="", operator="rui")


def test_resolving_to_a_value_no_evidence_supports_is_not_found(ledger: Ledger) -> None:
    """A pin chooses among held versions: an unsupported value is NOT_FOUND, nothing moves."""
    _ambiguous(ledger, anchor="codebase_verified")
    before = ledger.belief(WORKS_AT)
    with pytest.raises(NotFound, match="held versions"):
        ledger.resolve(WORKS_AT, version_id=None, obj="Hooli", reason="guess", operator="rui")
    assert ledger.belief(WORKS_AT) == before
    assert [b.key for b in ledger.review_queue(NS).items] == [WORKS_AT]


# -- erase -----------------------------------------------------------------------


def test_erase_by_evidence_id_brings_back_the_belief_it_retired(
    ledger: Ledger, clock: FakeClock, reopen: Opener
) -> None:
    """Erasing the evidence that superseded a belief erases its value, restores the old belief."""
    _lisbon_then_porto(ledger, clock)
    porto = ledger.belief(LIVES_IN).evidence
    at(clock, 50)
    report = ledger.erase(evidence_id=porto.evidence_id, operator="dpo", reason="request 17")
    assert (report.evidence_erased, report.keys_affected) == (1, 1)
    belief = ledger.belief(LIVES_IN)
    assert (belief.object, belief.rule) == ("Lisbon", Rule.SOLE_VERSION)
    assert [v.object for v in ledger.history(LIVES_IN)] == ["Lisbon"]
    assert ledger.history(LIVES_IN)[0].status == "BELIEVED"
    readable = everything_readable(ledger)
    assert "Porto" not in readable and porto.evidence_id not in readable
    assert "Lisbon" in readable  # the control: the read paths do carry values
    assert "Porto" not in everything_readable(reopen())

    # The same evidence, recorded before the erasure, never returns.
    [again] = ledger.ingest([(porto, None)])
    assert (again.decision.outcome, again.decision.rule) == (Outcome.REJECTED, Rule.ERASED)
    # The rejection is logged under the key's hash, not its text.
    assert again.decision.key.namespace == "erased"
    assert LIVES_IN.subject not in str(again.decision.key)
    assert ledger.belief(LIVES_IN).object == "Lisbon"
    # New evidence after the erasure is accepted normally.
    at(clock, 60)
    fresh = ledger.submit(sub("Porto", day=55))
    assert fresh.decision.outcome is Outcome.SUPERSEDED
    assert ledger.belief(LIVES_IN).object == "Porto"
    assert ledger.counts().erasures == 1


def test_erasing_the_only_evidence_ends_the_belief_and_announces_it(
    ledger: Ledger, clock: FakeClock
) -> None:
    """Erasing a key's only evidence leaves no belief row behind and tells watchers it ended."""
    only = ledger.submit(sub("Acme", key=WORKS_AT, day=1))
    ledger.submit(sub("Lisbon", day=1))
    last_change = ledger.changes(limit=1000)[-1].seq
    clock.advance(DAY)
    ledger.erase(evidence_id=only.evidence_id, operator="dpo", reason="request 20")
    with pytest.raises(NotFound):
        ledger.belief(WORKS_AT)
    assert ledger.counts().keys == 1  # counts belief rows without joining evidence
    changes = ledger.changes(after_seq=last_change)
    assert [(c.key, c.version_id) for c in changes] == [(WORKS_AT, None)]


def test_erase_by_key_removes_every_trace_of_the_key(
    ledger: Ledger, clock: FakeClock, reopen: Opener
) -> None:
    """Erasing a key removes its values from every read; others stay; new evidence is accepted."""
    _lisbon_then_porto(ledger, clock)
    ledger.submit(sub("Acme", key=WORKS_AT, day=1))
    old = ledger.belief(LIVES_IN).evidence
    at(clock, 50)
    report = ledger.erase(key=LIVES_IN, operator="dpo", reason="request 18")
    assert (report.evidence_erased, report.keys_affected) == (2, 1)
    with pytest.raises(NotFound):
        ledger.belief(LIVES_IN)
    with pytest.raises(NotFound):
        ledger.history(LIVES_IN)
    with pytest.raises(NotFound):
        ledger.belief(LIVES_IN, as_of=FakeClock().now() + 35 * DAY)
    assert ledger.decisions(key=LIVES_IN).items == []
    assert ledger.belief(WORKS_AT).object == "Acme"
    for ledger_view in (ledger, reopen()):
        readable = everything_readable(ledger_view)
        assert "Porto" not in readable and "Lisbon" not in readable
        assert "Acme" in readable

    [again] = ledger.ingest([(old, None)])
    assert (again.decision.outcome, again.decision.rule) == (Outcome.REJECTED, Rule.ERASED)
    with pytest.raises(NotFound):
        ledger.belief(LIVES_IN)
    at(clock, 60)
    assert ledger.submit(sub("Faro", day=55)).decision.outcome is Outcome.ACCEPTED
    assert ledger.belief(LIVES_IN).object == "Faro"


def test_a_repeated_erase_in_the_same_instant_is_one_erasure(
    ledger: Ledger, clock: FakeClock
) -> None:
    """The same request twice in one clock tick (a retry) names the same erasure: the second
    finds nothing left to erase and records nothing twice, rather than failing."""
    _lisbon_then_porto(ledger, clock)
    at(clock, 50)
    first = ledger.erase(key=LIVES_IN, operator="dpo", reason="request 18")
    second = ledger.erase(key=LIVES_IN, operator="dpo", reason="request 18")
    assert second.erasure_id == first.erasure_id
    assert (first.evidence_erased, second.evidence_erased) == (2, 0)
    assert ledger.counts().erasures == 1
    with pytest.raises(NotFound):
        ledger.belief(LIVES_IN)


def test_erase_by_subject_removes_every_key_of_the_subject(
    ledger: Ledger, clock: FakeClock, reopen: Opener
) -> None:
    """Erasing a subject removes all its keys' values; other subjects and namespaces stay."""
    at(clock, 10)
    ledger.submit(sub("Lisbon", day=1, source="ana-diary"))
    ledger.submit(sub("Acme", key=WORKS_AT, day=1, source="ana-cv"))
    ledger.submit(sub("pt", key=SPEAKS, day=1, source="ana-cv"))
    _ambiguous(ledger, WORKS_AT)
    ledger.submit(sub("Berlin", key=BOB_LIVES_IN, day=1, source="bob"))
    ledger.submit(sub("Madrid", key=Key("user:other", "ana", "lives_in"), day=1, source="other"))
    erased_ids = {
        e
        for key in (LIVES_IN, WORKS_AT, SPEAKS)
        for v in ledger.history(key)
        for e in v.evidence_ids
    }
    at(clock, 20)
    report = ledger.erase(subject=(NS, "ana"), operator="dpo", reason="request 19")
    assert (report.evidence_erased, report.keys_affected) == (5, 3)
    assert [b.key for b in ledger.list_beliefs(NS).items] == [BOB_LIVES_IN]
    assert ledger.list_beliefs(NS, subject="ana").items == []
    assert ledger.review_queue(NS).items == []
    assert ledger.belief(Key("user:other", "ana", "lives_in")).object == "Madrid"
    for ledger_view in (ledger, reopen()):
        readable = everything_readable(ledger_view)
        for gone in ("Lisbon", "Acme", "Initech", "pt", "ana-diary", "ana-cv", *erased_ids):
            assert gone not in readable
        assert "Berlin" in readable
    counts = ledger.counts()
    assert (counts.evidence, counts.keys, counts.ambiguous, counts.erasures) == (2, 2, 0, 1)

    at(clock, 30)
    assert ledger.submit(sub("Faro", day=25)).decision.outcome is Outcome.ACCEPTED


def test_erase_needs_exactly_one_scope_and_an_operator(ledger: Ledger) -> None:
    """An erase without exactly one scope or an operator is InvalidInput and erases nothing."""
    ledger.submit(sub("Lisbon"))
    with pytest.raises(InvalidInput) as err:
        ledger.erase(key=LIVES_IN, subject=(NS, "ana"), operator=" ", reason="")
    assert {v.field for v in err.value.violations} == {"scope", "operator"}
    assert ledger.belief(LIVES_IN).object == "Lisbon"
    assert ledger.counts().erasures == 0


# -- decay and node identity ------------------------------------------------------


def test_an_expired_claim_leaves_the_present_not_the_past_and_a_restatement_revives_it(
    ledger: Ledger, clock: FakeClock, reopen: Opener
) -> None:
    """Both recorded on day 11 (agent_observed, half-life 180 days): Porto at 0.5 expires
    about 58 days later, Lisbon at 1.0 about 238. On day 100, before any decay job runs,
    every view already agrees: the present is Lisbon again, an earlier event time still sees
    Porto, and history shows Porto DECAYED with its interval closed at its expiry. The job
    then only logs one DECAYED decision (rule decay) and changes no answer. Restating Porto
    confirms it (a DUPLICATE that moves confirmed_at) and it holds again. Nothing is
    deleted."""
    at(clock, 11)
    lisbon = ledger.submit(
        sub("Lisbon", day=0, anchor="agent_observed", source="gps", confidence=1.0)
    )
    porto = ledger.submit(
        sub("Porto", day=10, anchor="agent_observed", source="gps", confidence=0.5)
    )
    assert ledger.belief(LIVES_IN).object == "Porto"
    assert ledger.run_decay().decayed == 0
    start = FakeClock().now()
    held = ledger.evidence_by_ids([porto.evidence_id])[porto.evidence_id]
    porto_ends = expiry(held, ledger.policy)
    assert porto_ends is not None and start + 68 * DAY < porto_ends < start + 70 * DAY

    at(clock, 100)

    def views() -> tuple[object, ...]:
        belief = ledger.belief(LIVES_IN)
        before = ledger.belief(LIVES_IN, as_of=porto_ends - 1)
        history = {v.object: v for v in ledger.history(LIVES_IN)}
        return (
            (belief.object, belief.rule, belief.state),
            ledger.served(LIVES_IN)[0].object,
            ledger.explain(LIVES_IN).belief.object,
            [b.object for b in ledger.list_beliefs(NS).items],
            before.object,
            history["Porto"].status,
            history["Porto"].rule,
            history["Porto"].intervals,
            history["Porto"].decayed_at,
            history["Lisbon"].intervals,
        )

    seen = views()
    assert seen[:5] == (
        ("Lisbon", Rule.SOLE_VERSION, BeliefState.BELIEVED),
        "Lisbon",
        "Lisbon",
        ["Lisbon"],
        "Porto",
    )
    assert seen[5:9] == (
        "DECAYED",
        Rule.DECAY,
        (Interval(start + 10 * DAY, porto_ends),),
        porto_ends,
    )
    # Lisbon's claim is closed at its own expiry too, unless restated before then.
    lisbon_ends = expiry(
        ledger.evidence_by_ids([lisbon.evidence_id])[lisbon.evidence_id], ledger.policy
    )
    assert seen[9] == (Interval(start, start + 10 * DAY), Interval(porto_ends, lisbon_ends))

    assert ledger.run_decay().decayed == 1
    assert views() == seen
    [logged] = [
        d for d in ledger.decisions(LIVES_IN).items if d.decision.outcome is Outcome.DECAYED
    ]
    assert logged.decision.rule is Rule.DECAY
    assert logged.decision.evidence_id == porto.evidence_id
    assert (logged.decision.version_id, logged.decision.supersedes) == (
        lisbon.version_id,
        porto.version_id,
    )
    assert "Porto" not in logged.decision.detail  # the log holds ids, never values
    assert ledger.run_decay().decayed == 0

    again = ledger.submit(
        sub("Porto", day=10, anchor="agent_observed", source="gps", confidence=0.5)
    )
    assert again.decision.outcome is Outcome.DUPLICATE
    assert "restated" in again.decision.detail
    assert ledger.belief(LIVES_IN).object == "Porto"
    assert ledger.belief(LIVES_IN, known_at=start + 99 * DAY).object == "Lisbon"
    assert reopen().counts().evidence == 2


def test_ensure_node_id_persists_and_refuses_a_mismatch(
    repository: SqlRepository, reopen: Opener
) -> None:
    """The first node id is persisted; a later configured id must match it."""
    assert ensure_node_id(repository, None, "node-a") == "node-a"
    repository.close()
    repo = reopen().repo
    assert ensure_node_id(repo, None, "node-b") == "node-a"
    assert ensure_node_id(repo, "node-a", "node-b") == "node-a"
    with pytest.raises(ValueError, match="node-a"):
        ensure_node_id(repo, "node-z", "node-b")
    assert ensure_node_id(repo, None, "node-c") == "node-a"


def test_ensure_node_id_stores_a_configured_id_on_first_start(repository: SqlRepository) -> None:
    """On an empty store a configured node id wins over the freshly generated one."""
    assert ensure_node_id(repository, "node-cfg", "node-fresh") == "node-cfg"
    assert ensure_node_id(repository, None, "node-other") == "node-cfg"


def test_rejected_evidence_is_stored_with_rejected_status(ledger: Ledger) -> None:
    """A rejected submission is stored as REJECTED evidence, not as a candidate, and counted."""
    ledger.submit(sub("Evora", confidence=0.1))
    with ledger.repo.read() as tx:
        evidence_id = ledger.evidence_of(sub("Evora", confidence=0.1)).evidence_id
        [stored] = tx.evidence([evidence_id]).values()
    assert stored.object == "Evora"
    counts = ledger.counts()
    assert (counts.evidence, counts.rejected) == (0, 1)
    with pytest.raises(NotFound):
        ledger.belief(LIVES_IN)


# -- settings ------------------------------------------------------------------


def test_the_stores_default_cache_is_the_settings_default() -> None:
    """A repository opened without settings keeps as many hot keys as the setting's default."""
    assert store_cache.DEFAULT_CACHE_KEYS == DEFAULT_CACHE_KEYS
