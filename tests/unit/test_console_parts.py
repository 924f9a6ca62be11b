"""The console's parts that need no node: the SVG timeline and tally bars, the checks on its
forms, and how its one WatchBeliefs follower wakes the live log."""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest

from factnode.client import Decision, InvalidFact, Unavailable, Version
from factnode.client._types import Interval, Tally
from factnode.console import tally_svg, timeline_svg
from factnode.console._app import LogWatch
from factnode.console._forms import DecisionFilter, check_erase, erase_phrase, when
from factnode.console._pictures import CHAR_WIDTH, LABEL_WIDTH, PLOT_WIDTH
from factnode.console._words import decision_detail, version_values
from factnode.core import Key

SVG = "{http://www.w3.org/2000/svg}"
T0 = datetime(2025, 1, 10, tzinfo=UTC)
KEY = Key("user:ana", "ana", "lives_in")


def _version(
    vid: str, obj: str, status: str, *intervals: tuple[datetime, datetime | None]
) -> Version:
    return Version(vid, obj, status, tuple(Interval(s, e) for s, e in intervals), (), (), ())


def _groups(svg: str, cls: str) -> list[ET.Element]:
    root = ET.fromstring(svg)
    return [g for g in root.iter(f"{SVG}g") if cls in g.get("class", "").split()]


def test_timeline_places_each_interval_on_one_event_time_axis() -> None:
    """Intervals are drawn to scale between the earliest start and now; an open one ends at now."""
    versions = [
        _version("v1", "Porto", "HISTORICAL", (T0, T0 + timedelta(days=10))),
        _version("v2", "Faro", "BELIEVED", (T0 + timedelta(days=10), None)),
        _version("v3", "Lisbon", "DISBELIEVED"),
    ]
    svg = timeline_svg(versions, now=T0 + timedelta(days=20))
    rows = _groups(svg, "version")
    assert [g.get("data-version") for g in rows] == ["v1", "v2", "v3"]
    [porto] = rows[0].iter(f"{SVG}rect")
    [faro] = rows[1].iter(f"{SVG}rect")
    half = PLOT_WIDTH // 2
    assert (porto.get("x"), porto.get("width")) == (str(LABEL_WIDTH), str(half))
    assert (faro.get("x"), faro.get("width")) == (str(LABEL_WIDTH + half), str(half))
    assert "open" in (faro.get("class") or "") and "open" not in (porto.get("class") or "")
    assert not list(rows[2].iter(f"{SVG}rect"))
    assert "never believed (disbelieved)" in svg
    assert "2025-01-20T00:00:00+00:00 .. now" in svg
    assert "2025-01-10T00:00:00+00:00 .. 2025-01-20T00:00:00+00:00" in svg


def test_timeline_is_a_function_of_its_input_and_escapes_values() -> None:
    """The same versions and time draw the same picture; a value cannot inject markup."""
    versions = [_version("v1", "<script>x</script>", "BELIEVED", (T0, None))]
    now = T0 + timedelta(hours=5)
    svg = timeline_svg(versions, now)
    assert svg == timeline_svg(versions, now)
    assert "<script>" not in svg
    ET.fromstring(svg)  # well-formed


def _tally(weights: dict[str, int]) -> list[Tally]:
    total = sum(weights.values())
    return [
        Tally(v, v.upper(), w, w * 1000 // total, (f"n-{v}",), False) for v, w in weights.items()
    ]


def _bar(svg: str, version: str) -> ET.Element:
    [bar] = [g for g in _groups(svg, "bar") if g.get("data-version") == version]
    return bar


def _threshold_x(svg: str) -> str:
    [line] = [ln for ln in ET.fromstring(svg).iter(f"{SVG}line") if ln.get("class") == "threshold"]
    assert line.get("x1") == line.get("x2")
    return line.get("x1") or ""


def test_tally_line_sits_at_exactly_66_of_100() -> None:
    """The threshold line is at 66/100 of the bar axis, and bars are drawn to the same scale."""
    svg = tally_svg(_tally({"a": 66, "b": 34}))
    assert _threshold_x(svg) == str(LABEL_WIDTH + PLOT_WIDTH * 66 // 100)
    [rect] = _bar(svg, "a").iter(f"{SVG}rect")
    assert rect.get("width") == str(PLOT_WIDTH * 66 // 100)


@pytest.mark.parametrize(
    ("weights", "over"),
    [
        ({"a": 66, "b": 34}, set()),  # exactly at the line: not a supermajority
        ({"a": 67, "b": 33}, {"a"}),
        ({"a": 660_001, "b": 339_999}, {"a"}),  # 66.0001%: over, by integers
        ({"a": 1, "b": 1, "c": 1}, set()),
        ({"a": 5}, {"a"}),
    ],
)
def test_tally_marks_a_version_over_the_threshold_by_the_nodes_integer_rule(
    weights: dict[str, int], over: set[str]
) -> None:
    """Only a bar with 100*W > 66*total is marked over; one at exactly 66% is not."""
    svg = tally_svg(_tally(weights))
    marked = {v for v in weights if "over" in (_bar(svg, v).get("class") or "").split()}
    assert marked == over


def test_tally_threshold_follows_the_fraction_given() -> None:
    """Another consensus_threshold moves the line to that fraction."""
    svg = tally_svg(_tally({"a": 3, "b": 1}), Fraction(3, 4))
    assert _threshold_x(svg) == str(LABEL_WIDTH + PLOT_WIDTH * 3 // 4)
    assert "over" not in (_bar(svg, "a").get("class") or "").split()


@pytest.mark.parametrize(
    "weights",
    [{"a": 625, "b": 375}, {"a": 600, "b": 400}, {"a": 655, "b": 345}, {"a": 1, "b": 1}],
)
def test_tally_share_labels_never_cross_the_threshold_line(weights: dict[str, int]) -> None:
    """Each share label ("62.5% (beta, gamma)") lies wholly before the 66% line or starts
    after it, at a generous width per character, so the two never overlap."""
    svg = tally_svg(_tally(weights))
    line_x = float(_threshold_x(svg))
    for version in weights:
        [label] = [t for t in _bar(svg, version).iter(f"{SVG}text") if t.get("class") == "share"]
        start = float(label.get("x") or 0)
        end = start + float(CHAR_WIDTH) * len(label.text or "")
        assert end < line_x or start > line_x, (version, start, end, line_x)
    if weights["b"] * 2 == sum(weights.values()):
        return  # half and half: both labels would reach the line
    # A label that fits before the line stays beside its bar.
    [short] = [t for t in _bar(svg, "b").iter(f"{SVG}text") if t.get("class") == "share"]
    [rect] = _bar(svg, "b").iter(f"{SVG}rect")
    assert float(short.get("x") or 0) == LABEL_WIDTH + float(rect.get("width") or 0) + 4


def test_tally_without_weight_says_so() -> None:
    """No counted weight: a sentence, not bars of zero width."""
    svg = tally_svg([Tally("v", "x", 0, 0, (), True)])
    assert "no votes counted" in svg
    assert not _groups(svg, "bar")


def _decision(outcome: str, rule: str, at: datetime) -> Decision:
    return Decision(KEY, outcome, rule, at, "", "", "", "", 1)


def test_decision_filter_keeps_what_every_given_filter_allows() -> None:
    """Outcome, rule and time bounds (inclusive) each narrow the log; empty filters keep all."""
    ds = [
        _decision("ACCEPTED", "first_version", T0),
        _decision("SUPERSEDED", "recency", T0 + timedelta(days=1)),
        _decision("DISBELIEVED", "trust_anchor", T0 + timedelta(days=2)),
    ]
    assert DecisionFilter.of({}).select(ds) == ds
    assert DecisionFilter.of({"outcome": "superseded"}).select(ds) == [ds[1]]
    assert DecisionFilter.of({"rule": "trust_anchor"}).select(ds) == [ds[2]]
    window = {"since": "2025-01-11", "until": "2025-01-12T00:00Z"}
    assert DecisionFilter.of(window).select(ds) == [ds[1], ds[2]]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"since": "yesterday"}, "since"),
        ({"since": "2025-02-01", "until": "2025-01-01"}, "until"),
        ({"subject": "ana"}, "namespace"),
    ],
)
def test_bad_filters_name_the_field(params: dict[str, str], field: str) -> None:
    """A filter the console cannot read is refused naming the field, before any call."""
    with pytest.raises(InvalidFact) as refused:
        DecisionFilter.of(params)
    assert field in [e.field for e in refused.value.field_errors]
    with pytest.raises(InvalidFact):
        when({"at": "2025-13-01"}, "at")


def test_erase_needs_the_typed_key_or_subject_and_a_reason() -> None:
    """An erase goes ahead only when the confirmation is the key (or subject) exactly."""
    assert erase_phrase(KEY, "key") == "user:ana/ana/lives_in"
    assert erase_phrase(KEY, "subject") == "user:ana/ana"
    ok = {"scope": "key", "confirm": "user:ana/ana/lives_in", "reason": "request #42"}
    assert check_erase(KEY, ok) == "key"
    assert check_erase(KEY, {**ok, "scope": "subject", "confirm": "user:ana/ana"}) == "subject"
    for bad, field in (
        ({**ok, "confirm": "user:ana/ana"}, "confirm"),
        ({**ok, "confirm": ""}, "confirm"),
        ({**ok, "reason": " "}, "reason"),
        ({**ok, "scope": "everything"}, "scope"),
    ):
        with pytest.raises(InvalidFact) as refused:
            check_erase(KEY, bad)
        assert [e.field for e in refused.value.field_errors] == [field]


class _Change:
    def __init__(self, token: str) -> None:
        self.resume_token = token


class _Node:
    """A stand-in for AsyncClient.watch: a first stream that breaks after two changes, then
    one that delivers a third change and stays open."""

    def __init__(self) -> None:
        self.resumed_from: list[str] = []
        self.more = asyncio.Event()

    async def watch(self, *, resume_token: str = "") -> AsyncIterator[_Change]:
        self.resumed_from.append(resume_token)
        if len(self.resumed_from) == 1:
            yield _Change("t1")
            yield _Change("t2")
            raise Unavailable("the node went away", "UNAVAILABLE")
        await self.more.wait()
        yield _Change("t3")
        await asyncio.Event().wait()  # open until cancelled


async def test_log_watch_wakes_waiters_and_resumes_after_the_last_change() -> None:
    """Each change wakes the event streams; a broken stream is resumed from the last token."""
    node = _Node()
    watch = LogWatch()
    follower = asyncio.create_task(watch.follow(node))  # type: ignore[arg-type]
    try:
        assert await watch.wait_past(0, 5) >= 1
        assert await watch.wait_past(1, 5) == 2
        node.more.set()
        assert await watch.wait_past(2, 5) == 3
        assert node.resumed_from == ["", "t2"]
        with pytest.raises(TimeoutError):
            await watch.wait_past(3, 0.05)
    finally:
        follower.cancel()


def _logged(version_id: str, supersedes: str, detail: str) -> Decision:
    return Decision(KEY, "SUPERSEDED", "recency", T0, "e" * 32, version_id, supersedes, detail, 7)


def test_the_log_detail_names_values_not_version_ids() -> None:
    """A logged decision's detail leads with the value decided (and the one it replaced) and
    says every version id it names as that version's value; an id without a known value
    (an erased version) stays an id, and an evidence id is left alone."""
    faro, porto, gone = "a" * 32, "b" * 32, "c" * 32
    values = version_values([[_version(faro, "Faro", "BELIEVED")],
                             [_version(porto, "Porto", "SUPERSEDED")]])  # fmt: skip
    tally = f"tally: {faro}: 70.0% by a, b; {gone}: 30.0% by c"
    assert decision_detail(_logged(faro, porto, tally), values) == (
        f"'Faro' (replacing 'Porto'): tally: 'Faro': 70.0% by a, b; {gone}: 30.0% by c"
    )
    assert decision_detail(_logged(faro, "", ""), values) == "'Faro'"
    assert decision_detail(_logged(faro, faro, "moved"), values) == "'Faro': moved"
    evidence = f"contradicted by evidence {'e' * 32} on user:ana"
    assert decision_detail(_logged(gone, "", evidence), values) == evidence
