"""Recall: what a text query asks for, and how its matches are ranked (specification §8,
`SearchBeliefs`). Pure: the store finds the matching evidence, the ledger keeps only what
the view at (as_of, known_at) serves; this module turns words into terms, checks a query
and fuses the lexical and vector rankings.

A query's words are looked up as alternatives (any of them may match; more matches rank
higher), so a question in plain words ("which database did we choose?") finds "database:
PostgreSQL" without the caller knowing the key. Common English function words are dropped
unless nothing else is left.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from factnode.core._model import BeliefState, Evidence, Instant
from factnode.core.decide import Ruling
from factnode.core.validation import MAX_KEY_PART_BYTES, FieldViolation, InvalidInput, check_text

MAX_QUERY_BYTES = 1024
MAX_TERMS = 32
MAX_TERM_CHARS = 64
# Matching evidence the store ranks for one call: pages walk these, so a call's work is
# bounded however many beliefs match (documented in docs/api.md, SearchBeliefs).
MAX_CANDIDATES = 1000
# Vectors one call compares with the query's (the newest of its space within the filters):
# without a vector index the comparison is a scan, so it is bounded too.
MAX_VECTOR_SCAN = 20_000
DEFAULT_LIMIT = 10
MAX_LIMIT = 100
MAX_EMBEDDING_DIMS = 4096
MAX_EMBEDDINGS = 16  # vectors of one fact
MAX_SPACE_BYTES = 128
# Reciprocal rank fusion's constant (Cormack et al. 2009): 60 is the usual choice.
RRF_K = 60

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "so",
        "that",
        "the",
        "their",
        "them",
        "there",
        "these",
        "they",
        "this",
        "to",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)


def search_terms(query: str) -> tuple[str, ...]:
    """The words of `query` to look up: lower-cased letters and digits, in order, each once,
    common function words left out (unless that leaves none), at most MAX_TERMS of at most
    MAX_TERM_CHARS characters each."""
    words: list[str] = []
    for w in _WORD.findall(query.lower()):
        w = w[:MAX_TERM_CHARS]
        if w not in words:
            words.append(w)
    kept = [w for w in words if w not in STOP_WORDS] or words
    return tuple(kept[:MAX_TERMS])


def fts5_match(terms: Sequence[str], every: bool = False) -> str:
    """An SQLite FTS5 MATCH expression for any (or, `every`, all) of `terms`: each quoted,
    so no word is read as FTS5 syntax."""
    return (" AND " if every else " OR ").join('"' + t.replace('"', '""') + '"' for t in terms)


@dataclass(frozen=True, slots=True)
class Embedding:
    """A vector from the caller's embedder; `space` names the embedder (vectors of different
    spaces are never compared)."""

    space: str
    values: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Search:
    """One SearchBeliefs call, checked (`search`)."""

    query: str
    terms: tuple[str, ...]
    namespace_prefix: str = ""
    subject: str | None = None
    predicate: str | None = None
    states: frozenset[BeliefState] = frozenset()
    anchors: frozenset[str] = frozenset()
    as_of: Instant | None = None
    known_at: Instant | None = None
    limit: int = DEFAULT_LIMIT
    embedding: Embedding | None = None
    fingerprint: str = field(default="", compare=False)

    def admits(self, state: BeliefState, anchor: str) -> bool:
        """Whether a hit in this state, resting on this anchor, passes the filters."""
        return (not self.states or state in self.states) and (
            not self.anchors or anchor in self.anchors
        )


def search(
    query: str,
    *,
    namespace_prefix: str = "",
    subject: str | None = None,
    predicate: str | None = None,
    states: Iterable[str] = (),
    anchors: Iterable[str] = (),
    known_anchors: Iterable[str] = (),
    as_of: Instant | None = None,
    known_at: Instant | None = None,
    limit: int = 0,
    embedding: Embedding | None = None,
) -> Search:
    """A checked search, or InvalidInput naming every bad field. A query needs words or an
    embedding (or both)."""
    out: list[FieldViolation] = []
    check_text(out, "query", query, MAX_QUERY_BYTES, required=False)
    terms = search_terms(query)
    if not terms and embedding is None:
        out.append(FieldViolation("query", "has no words to search for"))
    check_text(out, "namespace_prefix", namespace_prefix, MAX_KEY_PART_BYTES, required=False)
    if subject is not None:
        check_text(out, "subject", subject, MAX_KEY_PART_BYTES, required=True)
    if predicate is not None:
        check_text(out, "predicate", predicate, MAX_KEY_PART_BYTES, required=True)
    wanted_states: set[BeliefState] = set()
    for s in states:
        try:
            wanted_states.add(BeliefState(s))
        except ValueError:
            names = ", ".join(b.value for b in BeliefState)
            out.append(FieldViolation("states", f"{s!r} is not a belief state ({names})"))
    anchor_set = frozenset(anchors)
    for a in sorted(anchor_set - set(known_anchors)):
        out.append(FieldViolation("anchors", f"{a!r} is not a trust anchor of this node"))
    if limit < 0:
        out.append(FieldViolation("page_size", "must not be negative"))
    elif limit > MAX_LIMIT:
        out.append(FieldViolation("page_size", f"must be at most {MAX_LIMIT}"))
    if embedding is not None:
        out.extend(embedding_violations(embedding))
    if out:
        raise InvalidInput(out)
    checked = Search(
        query,
        terms,
        namespace_prefix,
        subject,
        predicate,
        frozenset(wanted_states),
        anchor_set,
        as_of,
        known_at,
        limit or DEFAULT_LIMIT,
        embedding,
    )
    return _with_fingerprint(checked)


def embedding_violations(embedding: Embedding, name: str = "embedding") -> list[FieldViolation]:
    """Why `embedding` is not a usable vector (fields named under `name`); empty: it is."""
    out: list[FieldViolation] = []
    check_text(out, f"{name}.space", embedding.space, MAX_SPACE_BYTES, required=True)
    n = len(embedding.values)
    if not 0 < n <= MAX_EMBEDDING_DIMS:
        out.append(FieldViolation(f"{name}.values", f"must hold 1 to {MAX_EMBEDDING_DIMS} numbers"))
    elif not all(math.isfinite(v) for v in embedding.values):
        out.append(FieldViolation(f"{name}.values", "must be finite numbers"))
    elif not any(embedding.values):
        out.append(FieldViolation(f"{name}.values", "must not be all zeros"))
    return out


def _with_fingerprint(s: Search) -> Search:
    """The search with its fingerprint: a page token is valid only for the search that made it."""
    parts = [
        s.query,
        s.namespace_prefix,
        s.subject or "\0",
        s.predicate or "\0",
        ",".join(sorted(s.states)),
        ",".join(sorted(s.anchors)),
        str(s.as_of),
        str(s.known_at),
        str(s.limit),
        s.embedding.space if s.embedding else "\0",
        ",".join(repr(v) for v in s.embedding.values) if s.embedding else "\0",
    ]
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]
    return Search(
        s.query,
        s.terms,
        s.namespace_prefix,
        s.subject,
        s.predicate,
        s.states,
        s.anchors,
        s.as_of,
        s.known_at,
        s.limit,
        s.embedding,
        digest,
    )


def unit(values: Sequence[float]) -> tuple[float, ...]:
    """`values` scaled to length 1 (a checked embedding is never all zeros), so that the dot
    product of two is their cosine similarity."""
    norm = math.sqrt(math.fsum(v * v for v in values))
    return tuple(v / norm for v in values)


def stored_vectors(
    rulings: Sequence[tuple[Evidence, Ruling]], vectors: Mapping[str, Sequence[Embedding]]
) -> list[tuple[str, Embedding]]:
    """The callers' vectors to keep: those of evidence a batch stored as an active assertion
    (a candidate), each evidence's once."""
    out: dict[str, Sequence[Embedding]] = {}
    for e, ruling in rulings:
        embeddings = vectors.get(e.evidence_id)
        if embeddings and ruling.candidate and not e.retracts:
            out.setdefault(e.evidence_id, embeddings)
    return [(evidence_id, v) for evidence_id, vs in out.items() for v in vs]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine similarity of two vectors of one length (0 where either is all zeros)."""
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(math.fsum(x * x for x in a))
    nb = math.sqrt(math.fsum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def fuse(*rankings: Sequence[str]) -> list[tuple[str, float]]:
    """Reciprocal rank fusion of rankings (best first) of the same kind of item: each item
    scores the sum over rankings of 1 / (RRF_K + its rank), rank counted from 1; best first,
    ties by the item itself so the order is stable. One ranking keeps its order."""
    score: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            score[item] = score.get(item, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))


def best_first(scores: Mapping[str, float]) -> list[str]:
    """Items by score, highest first, ties by the item."""
    return [k for k, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]
