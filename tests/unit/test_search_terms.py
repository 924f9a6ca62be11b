"""Recall's pure parts (`factnode.core.recall`): a query's words, the FTS5 expression they
make, the checked search and the fields it names, search fingerprints and the page tokens
they bind, and rank fusion."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from factnode import tokens
from factnode.core import BeliefState, InvalidInput, Policy, recall
from factnode.core.recall import (
    MAX_LIMIT,
    MAX_QUERY_BYTES,
    MAX_TERM_CHARS,
    MAX_TERMS,
    RRF_K,
    STOP_WORDS,
    Embedding,
    cosine,
    fts5_match,
    fuse,
    search,
    search_terms,
)
from factnode.store._search import SQLITE_FTS_TABLE

ANCHORS = tuple(Policy().anchors)


def fields(exc: pytest.ExceptionInfo[InvalidInput]) -> list[str]:
    return [v.field for v in exc.value.violations]


# -- search_terms ----------------------------------------------------------------------


def test_terms_are_lowercased_words_in_order() -> None:
    """Letters and digits, lower-cased, in the order given; punctuation and underscores split."""
    assert search_terms("Ana MOVED to Porto-2024, near_the Harbour!") == (
        "ana",
        "moved",
        "porto",
        "2024",
        "near",
        "harbour",
    )
    assert search_terms("Ünïcode Straße") == ("ünïcode", "straße")


def test_stop_words_are_dropped_unless_nothing_else_is_left() -> None:
    """A question's function words go; a query of function words only keeps them all."""
    assert search_terms("Which database did we choose?") == ("database", "choose")
    assert search_terms("Where is the harbour") == ("harbour",)
    only = search_terms("What is it about?")
    assert only == ("what", "is", "it", "about")
    assert set(only) <= STOP_WORDS


def test_terms_are_deduplicated_case_insensitively() -> None:
    assert search_terms("Porto porto PORTO lisbon Porto") == ("porto", "lisbon")


def test_terms_are_capped_in_number_and_length() -> None:
    """At most MAX_TERMS terms (the first ones), each cut to MAX_TERM_CHARS characters; words
    that agree on their first MAX_TERM_CHARS characters count once."""
    words = [f"w{i}" for i in range(MAX_TERMS + 10)]
    assert search_terms(" ".join(words)) == tuple(words[:MAX_TERMS])
    long_a = "x" * MAX_TERM_CHARS + "a"
    long_b = "x" * MAX_TERM_CHARS + "b"
    assert search_terms(f"{long_a} {long_b}") == ("x" * MAX_TERM_CHARS,)
    # The cap counts after dropping stop words: they do not use up places.
    assert search_terms("the " * 5 + " ".join(words)) == tuple(words[:MAX_TERMS])


def test_a_query_without_letters_or_digits_has_no_terms() -> None:
    assert search_terms("") == ()
    assert search_terms(' "*" () -- :: ^ ') == ()


# -- fts5_match: never FTS5 syntax -------------------------------------------------------


@pytest.fixture(scope="module")
def fts() -> Iterator[sqlite3.Connection]:
    """An FTS5 table as the store makes it, holding a few documents."""
    db = sqlite3.connect(":memory:")
    db.execute(SQLITE_FTS_TABLE)
    docs = [
        "ana lives near the harbour",
        "not here or there",
        "and or not near",
        "porto",
        "lisbon and porto",
        "star * power",
    ]
    db.executemany(
        "INSERT INTO search_text (rowid, namespace, subject, predicate, object, source) "
        "VALUES (?, 'ns', 's', 'p', ?, '')",
        list(enumerate(docs, start=1)),
    )
    yield db
    db.close()


def matching(db: sqlite3.Connection, terms: tuple[str, ...]) -> set[int]:
    rows = db.execute(
        "SELECT rowid FROM search_text WHERE search_text MATCH ?", (fts5_match(terms),)
    )
    return {r[0] for r in rows}


def test_fts5_match_quotes_every_term() -> None:
    """Each term is a quoted string, quotes doubled, the terms joined by OR."""
    assert fts5_match(["porto"]) == '"porto"'
    assert fts5_match(["a", "b"]) == '"a" OR "b"'
    assert fts5_match(['say "hi"']) == '"say ""hi"""'


@pytest.mark.parametrize(
    ("terms", "expected"),
    [
        # Operators are words: NOT does not exclude, AND does not require, NEAR is no group.
        (("not",), {2, 3}),
        (("and",), {3, 5}),
        (("or",), {2, 3}),
        (("near",), {1, 3}),
        (("NEAR",), {1, 3}),
        (("lisbon", "NOT", "porto"), {2, 3, 4, 5}),
        (("porto", "AND", "harbour"), {1, 3, 4, 5}),
        # Syntax characters inside a term are not syntax: no prefix query, no column filter,
        # no group, no phrase break-out.
        (("port*",), set()),
        (("*",), set()),
        (("object:porto",), set()),
        (("(porto",), {4, 5}),
        (('porto" OR "ana',), set()),
        (('"',), set()),
        (("^porto",), {4, 5}),
        (("NEAR(porto lisbon)",), set()),
        (("porto)",), {4, 5}),
    ],
)
def test_fts5_match_never_passes_syntax_to_fts5(
    fts: sqlite3.Connection, terms: tuple[str, ...], expected: set[int]
) -> None:
    """Terms holding FTS5 operators or syntax characters run without error and match only
    documents holding them as words (the control: an unquoted `port*` would match Porto)."""
    assert matching(fts, terms) == expected
    # The control: the same text as raw FTS5 would be syntax (a prefix query, a NOT).
    assert {r[0] for r in fts.execute("SELECT rowid FROM search_text('port*')")} == {4, 5}
    assert {r[0] for r in fts.execute("SELECT rowid FROM search_text('lisbon NOT porto')")} == set()


@given(st.text(max_size=200))
def test_any_query_makes_a_valid_fts5_expression(query: str) -> None:
    """Whatever a caller types, its terms make an expression FTS5 accepts."""
    terms = search_terms(query)
    if not terms:
        return
    db = sqlite3.connect(":memory:")
    try:
        db.execute(SQLITE_FTS_TABLE)
        db.execute("SELECT rowid FROM search_text WHERE search_text MATCH ?", (fts5_match(terms),))
    finally:
        db.close()


@given(
    st.lists(
        st.text(
            st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
            min_size=1,
            max_size=20,
        ),
        min_size=1,
        max_size=5,
    )
)
def test_any_terms_make_a_valid_fts5_expression(terms: list[str]) -> None:
    """Even terms that no query produces (quotes, operators, brackets) are quoted safely.
    NUL and lone surrogates are left out: no query may hold them (`text_problem`), and FTS5
    ends a string at NUL."""
    db = sqlite3.connect(":memory:")
    try:
        db.execute(SQLITE_FTS_TABLE)
        db.execute("SELECT rowid FROM search_text WHERE search_text MATCH ?", (fts5_match(terms),))
    finally:
        db.close()


# -- search(): the checked request -------------------------------------------------------


def test_a_good_search_is_checked_into_its_terms_and_filters() -> None:
    s = search(
        "Which database?",
        namespace_prefix="team:",
        subject="infra",
        predicate="database",
        states=["BELIEVED", "AMBIGUOUS"],
        anchors=["user_stated"],
        known_anchors=ANCHORS,
        as_of=5,
        known_at=6,
        limit=7,
    )
    assert s.terms == ("database",)
    assert s.states == {BeliefState.BELIEVED, BeliefState.AMBIGUOUS}
    assert s.anchors == {"user_stated"}
    assert (s.as_of, s.known_at, s.limit) == (5, 6, 7)
    assert search("x").limit == recall.DEFAULT_LIMIT
    assert search("x", limit=MAX_LIMIT).limit == MAX_LIMIT
    assert len(s.fingerprint) == 32


@pytest.mark.parametrize("query", ["", "   ", "?!", '"*"'])
def test_a_query_without_words_is_refused_naming_query(query: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        search(query)
    assert fields(exc) == ["query"]


def test_a_query_longer_than_the_limit_is_refused_naming_query() -> None:
    search("a" * MAX_QUERY_BYTES)  # the control: at the limit it is accepted
    with pytest.raises(InvalidInput) as exc:
        search("a" * (MAX_QUERY_BYTES + 1))
    assert "query" in fields(exc)
    with pytest.raises(InvalidInput) as exc:
        search("é" * (MAX_QUERY_BYTES // 2 + 1))  # the limit is in bytes, not characters
    assert "query" in fields(exc)


def test_a_query_with_nul_is_refused_naming_query() -> None:
    with pytest.raises(InvalidInput) as exc:
        search("porto\x00")
    assert "query" in fields(exc)


@pytest.mark.parametrize("state", ["believed", "UNSPECIFIED", "DECAYED", "", "0"])
def test_a_bad_state_is_refused_naming_states(state: str) -> None:
    search("x", states=["BELIEVED"])  # the control
    with pytest.raises(InvalidInput) as exc:
        search("x", states=["BELIEVED", state])
    assert fields(exc) == ["states"]


def test_an_unknown_anchor_is_refused_naming_anchors() -> None:
    search("x", anchors=["llm_generated"], known_anchors=ANCHORS)  # the control
    with pytest.raises(InvalidInput) as exc:
        search("x", anchors=["llm_generated", "gossip"], known_anchors=ANCHORS)
    assert fields(exc) == ["anchors"]
    assert "gossip" in exc.value.violations[0].reason


@pytest.mark.parametrize("limit", [-1, MAX_LIMIT + 1, 10**9])
def test_a_bad_page_size_is_refused_naming_page_size(limit: int) -> None:
    with pytest.raises(InvalidInput) as exc:
        search("x", limit=limit)
    assert fields(exc) == ["page_size"]


@pytest.mark.parametrize("name", ["subject", "predicate"])
@pytest.mark.parametrize("value", ["", "  ", "a\x00b", "s" * 257])
def test_an_empty_or_bad_subject_or_predicate_is_refused_naming_it(name: str, value: str) -> None:
    search("x", **{name: "ana"})  # the control
    with pytest.raises(InvalidInput) as exc:
        search("x", **{name: value})
    assert fields(exc) == [name]


def test_a_bad_namespace_prefix_is_refused_naming_it() -> None:
    search("x", namespace_prefix="")  # no prefix: every namespace the caller may read
    with pytest.raises(InvalidInput) as exc:
        search("x", namespace_prefix="n\x00")
    assert fields(exc) == ["namespace_prefix"]


def test_every_bad_field_is_named_at_once() -> None:
    with pytest.raises(InvalidInput) as exc:
        search(
            "",
            subject="",
            predicate="",
            states=["nope"],
            anchors=["gossip"],
            known_anchors=ANCHORS,
            limit=-1,
        )
    assert sorted(fields(exc)) == sorted(
        ["query", "subject", "predicate", "states", "anchors", "page_size"]
    )


def test_an_embedding_alone_is_a_query_and_a_bad_one_is_refused() -> None:
    s = search("", embedding=Embedding("toy", (1.0, 0.0)))
    assert s.terms == () and s.embedding is not None
    for values, name in [((), "embedding.values"), ((math.nan,), "embedding.values")]:
        with pytest.raises(InvalidInput) as exc:
            search("x", embedding=Embedding("toy", values))
        assert fields(exc) == [name]
    with pytest.raises(InvalidInput) as exc:
        search("x", embedding=Embedding("toy", (0.0, 0.0)))
    assert fields(exc) == ["embedding.values"]
    with pytest.raises(InvalidInput) as exc:
        search("x", embedding=Embedding("", (1.0,)))
    assert fields(exc) == ["embedding.space"]


# -- fingerprints and page tokens --------------------------------------------------------


def _variants() -> list[recall.Search]:
    base: dict[str, object] = {"known_anchors": ANCHORS}
    changes: list[dict[str, object]] = [
        {},
        {"namespace_prefix": "user:"},
        {"namespace_prefix": "user:a"},
        {"subject": "ana"},
        {"subject": "bob"},
        {"predicate": "ana"},
        {"states": ["BELIEVED"]},
        {"states": ["AMBIGUOUS"]},
        {"states": ["BELIEVED", "AMBIGUOUS"]},
        {"anchors": ["user_stated"]},
        {"anchors": ["llm_generated"]},
        {"as_of": 1},
        {"as_of": 2},
        {"known_at": 1},
        {"as_of": 1, "known_at": 1},
        {"limit": 5},
        {"limit": 6},
        {"embedding": Embedding("toy", (1.0, 0.0))},
        {"embedding": Embedding("toy", (0.0, 1.0))},
        {"embedding": Embedding("other", (1.0, 0.0))},
    ]
    out = [search("ana porto", **{**base, **c}) for c in changes]
    out += [search("ana lisbon", **base), search("Ana Porto", **base)]
    return out


def test_different_searches_have_different_fingerprints() -> None:
    """Any change of words, filters, view, page size or embedding changes the fingerprint;
    the same search checked twice has the same one."""
    prints = [s.fingerprint for s in _variants()]
    assert len(set(prints)) == len(prints)
    assert (
        search("ana porto", states=["AMBIGUOUS", "BELIEVED"]).fingerprint
        == search("ana porto", states=["BELIEVED", "AMBIGUOUS"]).fingerprint
    )
    assert search("x", limit=0).fingerprint == search("x", limit=recall.DEFAULT_LIMIT).fingerprint


def test_a_page_token_is_valid_only_for_the_search_that_made_it() -> None:
    searches = _variants()
    for made in searches:
        token = tokens.search_position(made.fingerprint, 10)
        assert tokens.decode_search_position(token, made.fingerprint) == 10
        for other in searches:
            if other is made:
                continue
            with pytest.raises(InvalidInput) as exc:
                tokens.decode_search_position(token, other.fingerprint)
            assert fields(exc) == ["page_token"]
            assert "another search" in exc.value.violations[0].reason


def test_altered_or_foreign_tokens_are_refused_naming_the_field() -> None:
    s = search("porto")
    good = tokens.search_position(s.fingerprint, 20)
    tokens.check(good, tokens.SEARCH, "page_token")  # the control
    tokens.check("", tokens.SEARCH, "page_token")  # no token: the first page
    bad = [
        "not-a-token",
        good + "A",
        good[:-1],
        tokens.key_position("0" * 32, "1" * 32),
        tokens.search_position(s.fingerprint, tokens.MAX_SEARCH_OFFSET + 1),
        tokens.search_position("xyz", 1),
    ]
    for token in bad:
        with pytest.raises(InvalidInput) as exc:
            tokens.decode_search_position(token, s.fingerprint, field="page_token")
        assert fields(exc) == ["page_token"], token
        with pytest.raises(InvalidInput) as exc:
            tokens.check(token, tokens.SEARCH, "page_token")
        assert fields(exc) == ["page_token"], token


# -- fusion and cosine -------------------------------------------------------------------


def test_cosine_basics() -> None:
    assert cosine([1.0, 0.0], [1.0, 0.0]) == pytest.approx(1.0)
    assert cosine([1.0, 0.0], [0.0, 1.0]) == pytest.approx(0.0)
    assert cosine([1.0, 2.0], [-1.0, -2.0]) == pytest.approx(-1.0)
    assert cosine([3.0, 4.0], [6.0, 8.0]) == pytest.approx(1.0)  # scale does not count
    assert cosine([0.0, 0.0], [1.0, 1.0]) == 0.0
    assert cosine([1.0, 1.0], [1.0, 0.0]) == pytest.approx(1 / math.sqrt(2))
    with pytest.raises(ValueError):
        cosine([1.0], [1.0, 2.0])


def test_fuse_one_ranking_keeps_its_order() -> None:
    fused = fuse(["c", "a", "b"])
    assert [k for k, _ in fused] == ["c", "a", "b"]
    assert fused[0][1] == pytest.approx(1 / (RRF_K + 1))


def test_fuse_rewards_agreement_and_breaks_ties_by_item() -> None:
    fused = dict(fuse(["a", "b", "c"], ["b", "a", "d"]))
    assert fused["a"] == pytest.approx(fused["b"])
    assert fused["a"] > fused["c"] > 0 and fused["a"] > fused["d"]
    order = [k for k, _ in fuse(["a", "b", "c"], ["b", "a", "d"])]
    assert order[:2] == ["a", "b"]  # equal scores: by the item
    assert order == [k for k, _ in fuse(["b", "a", "d"], ["a", "b", "c"])]
    assert fuse() == []


def test_best_first_orders_by_score_then_item() -> None:
    assert recall.best_first({"b": 1.0, "a": 1.0, "c": 2.0}) == ["c", "a", "b"]
