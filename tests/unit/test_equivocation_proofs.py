"""The proof of equivocation a node keeps (specification §7) is the same on every node that
exchanged proofs, whatever votes each saw and in whatever order they arrived."""

from __future__ import annotations

import dataclasses
import random

from hypothesis import given
from hypothesis import strategies as st

from factnode.core import Key
from factnode.core.consensus import Vote
from factnode.core.signed import Equivocation, canonical_proof, proofs_among, vote_payload

KEY = Key("team:infra", "build", "python_version")
VOTE = Vote("a", KEY, "1" * 32, "2" * 32, 60, 500, 1_000, 5_000, seq=7)


def _variant(seq: int, anchor: int) -> Vote:
    return dataclasses.replace(VOTE, seq=seq, anchor=anchor)


def _fold(state: Equivocation | None, votes: list[Vote]) -> Equivocation | None:
    """One node receiving `votes` with `state` held, as `PeerInput._equivocations` does."""
    kept = {("a", KEY): state} if state is not None else {}
    found = proofs_among(votes, {}, kept)
    return found[0] if found else state


def test_three_votes_under_one_number_give_the_pair_with_the_smallest_bytes() -> None:
    """With three different votes under one number, the proof is the two whose signed bytes
    sort first, whichever pair a node found first; a lower number's pair beats it."""
    a, b, c = (_variant(7, n) for n in (1, 2, 3))
    first, second = sorted((a, b, c), key=vote_payload)[:2]
    for pair, third in (((a, b), c), ((b, c), a), ((a, c), b)):
        proof = _fold(_fold(None, list(pair)), [third])
        assert proof is not None and (proof.first, proof.second) == (first, second)
    low = [_variant(3, 1), _variant(3, 2)]
    proof = _fold(_fold(None, [a, b, c]), low)
    assert proof is not None and proof.seq == 3
    assert _fold(proof, [a, b]) is proof  # a higher number's pair never replaces it


def test_a_proof_already_held_is_not_reported_again() -> None:
    """The same proof offered again is nothing new: no write, no digest change."""
    a, b = _variant(7, 1), _variant(7, 2)
    proof = canonical_proof([a, b])
    assert proof is not None
    assert proofs_among([b, a], {}, {("a", KEY): proof}) == []


_votes = st.lists(
    st.tuples(st.integers(1, 3), st.integers(0, 4)), min_size=2, max_size=12, unique=True
)


@given(_votes, st.randoms(use_true_random=False), st.integers(1, 4))
def test_proofs_merge_to_the_same_proof_in_any_order(
    chosen: list[tuple[int, int]], rnd: random.Random, nodes: int
) -> None:
    """Votes split among nodes in any way; each node keeps only its proof (the votes it
    does not keep are lost to it). Once the nodes have passed their proofs to each other,
    in any order and any number of times, every node holds the same proof: the canonical
    one over the votes of the proofs found."""
    votes = [_variant(seq, anchor) for seq, anchor in chosen]
    held: list[Equivocation | None] = []
    for _ in range(nodes):  # each node sees some of the votes, in batches, in any order
        mine = [v for v in votes if rnd.random() < 0.7]
        rnd.shuffle(mine)
        state: Equivocation | None = None
        while mine:
            size = rnd.randint(1, 3)
            state, mine = _fold(state, mine[:size]), mine[size:]
        held.append(state)
    found = [p for p in held if p is not None]
    if not found:
        return
    expected = canonical_proof([v for p in found for v in (p.first, p.second)])
    for n in range(nodes):
        order = list(found)
        rnd.shuffle(order)
        state = held[n]
        for p in order + order[: rnd.randrange(len(order) + 1)]:
            state = _fold(state, [p.second, p.first] if rnd.random() < 0.5 else [p.first, p.second])
        assert state == expected
