"""Recall's index: the words of every active assertion (key parts, value, source), kept in
the transaction that stores the evidence and destroyed with it by an erasure or purge, and
the query that ranks the assertions a search's words match (`SearchBeliefs`).

SQLite keeps the words in an FTS5 table ranked by BM25; PostgreSQL in a weighted tsvector
column with a GIN index, ranked by `ts_rank`. Which of the matches a view serves is the
ledger's question, not the store's: it gets ranked (key, version, evidence) candidates."""

from __future__ import annotations

import array
import sys
from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import Connection

from factnode.core import Evidence, EvidenceStatus, Key
from factnode.core.recall import MAX_CANDIDATES, Embedding, fts5_match, unit
from factnode.store._part import TransactionPart
from factnode.store.repository import Match, chunks

_PG_CONFIG = "english"
# Words split as `recall.search_terms` splits a query (letters and digits), so that
# PostgreSQL's parser does not read "person-123" as the word "person" and the number "-123".
_PG_WORDS = "regexp_replace({}, '[^[:alnum:]]+', ' ', 'g')"
_PG_DOCUMENT = " || ".join(
    f"setweight(to_tsvector('{_PG_CONFIG}', {_PG_WORDS.format(f'%({part})s')}), '{weight}')"
    for part, weight in (
        ("object", "A"),
        ("subject", "A"),
        ("predicate", "B"),
        ("namespace", "C"),
        ("source", "D"),
    )
)
# Assertions a word query ranks by the backend's rank before the filters (`search_matches`).
MATCH_WINDOW = 4 * MAX_CANDIDATES
# A word matching more assertions than this is left out of an any-word query when a rarer
# word of the query is there (`_telling`): ranking costs a score per match.
COMMON_MATCHES = 20 * MAX_CANDIDATES
SQLITE_FTS_TABLE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS search_text USING fts5("
    "namespace, subject, predicate, object, source, "
    "tokenize = 'porter unicode61 remove_diacritics 2')"
)


def searchable(evidence: Sequence[tuple[Evidence, EvidenceStatus, str | None]]) -> list[Evidence]:
    """What recall indexes of new evidence: active assertions (a retraction asserts no value,
    a rejected one is never believed)."""
    return [e for e, status, _ in evidence if status is EvidenceStatus.ACTIVE and not e.retracts]


class SqlSearch(TransactionPart):
    """The recall index part of a transaction."""

    def index_evidence(self, evidence: Sequence[Evidence]) -> None:
        """Adds the words of `evidence` (active assertions) to the index."""
        if not evidence:
            return
        if self._c.dialect.name == "postgresql":
            self._c.exec_driver_sql(
                "INSERT INTO search_doc (evidence_id, document) VALUES "
                f"(%(evidence_id)s, {_PG_DOCUMENT})",
                [_words(e) for e in evidence],
            )
            return
        cur = self._c.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            docs = []
            for e in evidence:
                cur.execute("INSERT INTO search_doc (evidence_id) VALUES (?)", (e.evidence_id,))
                w = _words(e)
                docs.append(
                    (
                        cur.lastrowid,
                        w["namespace"],
                        w["subject"],
                        w["predicate"],
                        w["object"],
                        w["source"],
                    )
                )
            cur.executemany(
                "INSERT INTO search_text (rowid, namespace, subject, predicate, object, source) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                docs,
            )
        finally:
            cur.close()

    def unindex(self, evidence_ids: Collection[str]) -> None:
        """Removes the words (and vectors) of erased or purged evidence, down to the bytes: on
        SQLite the FTS5 index is built anew from the rows left (`rebuild`, about half a
        second per 100,000 assertions), so no segment keeps the words, and secure_delete
        zeroes the pages it frees; on PostgreSQL `reclaim_erased` rewrites the tables."""
        if not evidence_ids:
            return
        sqlite = self._c.dialect.name == "sqlite"
        removed = 0
        for part in chunks(sorted(evidence_ids)):
            marks = ", ".join(["?" if sqlite else "%s"] * len(part))
            if sqlite:
                doc_ids = [
                    r[0]
                    for r in self._c.exec_driver_sql(
                        f"SELECT doc_id FROM search_doc WHERE evidence_id IN ({marks})", tuple(part)
                    )
                ]
                if doc_ids:
                    rowids = ", ".join(["?"] * len(doc_ids))
                    self._c.exec_driver_sql(
                        f"DELETE FROM search_text WHERE rowid IN ({rowids})", tuple(doc_ids)
                    )
                    removed += len(doc_ids)
            for table in ("search_doc", "search_vector"):
                self._c.exec_driver_sql(
                    f"DELETE FROM {table} WHERE evidence_id IN ({marks})", tuple(part)
                )
        if sqlite and removed:
            # Built anew from what it still holds, so no segment keeps the words. Not
            # 'optimize' (a merge): on SQLite 3.40 some thousand delete-and-merge cycles
            # leave the FTS5 index malformed (tests/integration/test_erase_bytes.py).
            self._c.exec_driver_sql("INSERT INTO search_text (search_text) VALUES ('rebuild')")

    def put_vectors(self, vectors: Sequence[tuple[str, Embedding]]) -> None:
        """Keeps the callers' vectors of assertions stored in this transaction (several per
        assertion may come), unit-normalised."""
        if not vectors:
            return
        sqlite = self._c.dialect.name == "sqlite"
        mark = "?" if sqlite else "%s"
        self._c.exec_driver_sql(
            f"INSERT INTO search_vector (evidence_id, space, vector) VALUES ({mark}, {mark}, {mark})",
            [
                (evidence_id, e.space, _pack(unit(e.values)) if sqlite else list(unit(e.values)))
                for evidence_id, e in vectors
            ],
        )

    def vector_matches(
        self,
        embedding: Embedding,
        *,
        namespace_prefix: str = "",
        subject: str | None = None,
        predicate: str | None = None,
        scan: int,
        limit: int,
    ) -> list[Match]:
        """The `limit` assertions whose vector is most like `embedding` (cosine, best first,
        ties by evidence id), among the newest `scan` vectors of its space and length within
        the filters."""
        sqlite = self._c.dialect.name == "sqlite"
        mark = "?" if sqlite else "%s"
        where, params = _filters(mark, namespace_prefix, subject, predicate)
        query = unit(embedding.values)
        newest = (
            "SELECT e.namespace, e.subject, e.predicate, e.version_id, e.evidence_id, d.vector "
            "FROM search_vector d JOIN evidence e ON e.evidence_id = d.evidence_id"
            f" WHERE d.space = {mark} AND "
            f"{'length(d.vector)' if sqlite else 'cardinality(d.vector)'} = {mark}{where} "
            f"ORDER BY d.vector_id DESC LIMIT {mark}"
        )
        size = 4 * len(query) if sqlite else len(query)
        args = (embedding.space, size, *params, scan)
        if sqlite:
            # No vector arithmetic in SQLite: the newest `scan` vectors are compared here.
            scored = [
                Match(Key(r[0], r[1], r[2]), r[3], r[4], _dot(query, _unpack(r[5])))
                for r in self._c.exec_driver_sql(newest, args)
            ]
            scored.sort(key=lambda m: (-m.score, m.evidence_id))
            return scored[:limit]
        # PostgreSQL compares them itself: with pgvector's inner product where the extension
        # is installed in the database, otherwise over unnest (the same figures, slower).
        schema = _pgvector_schema(self._c)
        if schema:
            # Qualified: the extension's schema need not be on the search path.
            v = f'"{schema}".vector'
            score = f'-((n.vector::{v}) OPERATOR("{schema}".<#>) (%s::real[])::{v})'
        else:
            score = "(SELECT sum(a::float8 * b) FROM unnest(n.vector, %s::real[]) AS t(a, b))"
        sql = (
            f"SELECT n.namespace, n.subject, n.predicate, n.version_id, n.evidence_id, {score} "
            f"AS score FROM ({newest}) AS n ORDER BY score DESC, n.evidence_id LIMIT %s"
        )
        return [
            Match(Key(r[0], r[1], r[2]), r[3], r[4], float(r[5]))
            for r in self._c.exec_driver_sql(sql, (list(query), *args, limit))
        ]

    def _telling(self, terms: Sequence[str]) -> list[str]:
        """Of `terms`, those that match at most COMMON_MATCHES assertions (each counted up to
        that bound): the assertions an any-word query scores are those these match (a word
        most of the store holds would make it score most of the store), while every word
        still counts in the score. All of them if none is that rare."""
        sqlite = self._c.dialect.name == "sqlite"
        if sqlite:
            sql = (
                "SELECT count(*) FROM (SELECT rowid FROM search_text WHERE search_text MATCH ? "
                "LIMIT ?)"
            )
        else:
            sql = (
                "SELECT count(*) FROM (SELECT 1 FROM search_doc WHERE document @@ "
                f"plainto_tsquery('{_PG_CONFIG}', %s) LIMIT %s) AS m"
            )
        rare = []
        for term in terms:
            word = fts5_match([term]) if sqlite else term
            n = self._c.exec_driver_sql(sql, (word, COMMON_MATCHES + 1)).scalar_one()
            if n <= COMMON_MATCHES:
                rare.append(term)
        return rare or list(terms)

    def search_matches(
        self,
        terms: Sequence[str],
        *,
        every_word: bool,
        namespace_prefix: str = "",
        subject: str | None = None,
        predicate: str | None = None,
        window: int = MATCH_WINDOW,
        limit: int = MAX_CANDIDATES,
    ) -> list[Match]:
        """The assertions that every one (`every_word`) or any of `terms` matches, best
        first (ties by evidence id), within the filters: the best `window` by the backend's
        rank alone, then the best `limit` of those the filters keep. Ranking before joining
        keeps a common word's cost to scoring its matches; an any-word query scores only the
        assertions its rarer words match, where it has some (`_telling`), by every word."""
        if not terms:
            return []
        # Of an any-word query, the rare words choose the assertions; every word scores them.
        chosen = list(terms) if every_word else self._telling(terms)
        sqlite = self._c.dialect.name == "sqlite"
        mark = "?" if sqlite else "%s"
        filters, params = _filters(mark, namespace_prefix, subject, predicate)
        head = "SELECT e.namespace, e.subject, e.predicate, e.version_id, e.evidence_id, t.score"
        if sqlite:
            # `rank` is BM25 with the column weights set by migration r29 (lower is better).
            sql = (
                f"{head} FROM (SELECT rowid, -rank AS score FROM search_text "
                "WHERE search_text MATCH ? ORDER BY rank LIMIT ?) AS t "
                "JOIN search_doc d ON d.doc_id = t.rowid "
                f"JOIN evidence e ON e.evidence_id = d.evidence_id WHERE 1 = 1{filters} "
                "ORDER BY t.score DESC, e.evidence_id LIMIT ?"
            )
            if every_word or len(chosen) == len(terms):
                match = fts5_match(terms, every_word)
            else:
                match = f"({fts5_match(chosen)}) AND ({fts5_match(terms)})"
            args: tuple[Any, ...] = (match, window, *params, limit)
        else:
            word = f"plainto_tsquery('{_PG_CONFIG}', %s)"
            query = (" && " if every_word else " || ").join([word] * len(terms))
            if not every_word and len(chosen) < len(terms):
                query = f"({' || '.join([word] * len(chosen))}) && ({query})"
                terms = [*chosen, *terms]
            sql = (
                f"{head} FROM (SELECT d.evidence_id, ts_rank(d.document, q.q) AS score "
                f"FROM (SELECT {query} AS q) AS q, search_doc d WHERE d.document @@ q.q "
                "ORDER BY score DESC LIMIT %s) AS t "
                f"JOIN evidence e ON e.evidence_id = t.evidence_id WHERE 1 = 1{filters} "
                "ORDER BY t.score DESC, e.evidence_id LIMIT %s"
            )
            args = (*terms, window, *params, limit)
        return [
            Match(Key(r[0], r[1], r[2]), r[3], r[4], float(r[5]))
            for r in self._c.exec_driver_sql(sql, args)
        ]


def _pgvector_schema(conn: Connection) -> str:
    """The schema pgvector is installed in, in the connection's database; empty: it is not
    (asked once per connection)."""
    found = conn.info.get(_PGVECTOR)
    if found is None:
        row = conn.exec_driver_sql(
            "SELECT n.nspname FROM pg_extension x JOIN pg_namespace n ON n.oid = x.extnamespace "
            "WHERE x.extname = 'vector'"
        ).first()
        found = conn.info[_PGVECTOR] = row[0].replace('"', '""') if row else ""
    return str(found)


_PGVECTOR = "factnode_pgvector"


def _filters(
    mark: str, namespace_prefix: str, subject: str | None, predicate: str | None
) -> tuple[str, list[Any]]:
    """The filters' SQL (each after AND, on the evidence `e`) and their parameters."""
    where: list[str] = []
    params: list[Any] = []
    if namespace_prefix:
        where.append(f"substr(e.namespace, 1, {mark}) = {mark}")
        params += [len(namespace_prefix), namespace_prefix]
    if subject is not None:
        where.append(f"e.subject = {mark}")
        params.append(subject)
    if predicate is not None:
        where.append(f"e.predicate = {mark}")
        params.append(predicate)
    return "".join(f" AND {w}" for w in where), params


def _pack(values: Sequence[float]) -> bytes:
    """float32s, little-endian."""
    packed = array.array("f", values)
    if sys.byteorder != "little":  # pragma: no cover - every platform factnode runs on
        packed.byteswap()
    return packed.tobytes()


def _unpack(raw: bytes) -> array.array[float]:
    values = array.array("f")
    values.frombytes(raw)
    if sys.byteorder != "little":  # pragma: no cover
        values.byteswap()
    return values


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    """The dot product of two unit vectors: their cosine similarity."""
    return float(sum(map(float.__mul__, a, b)))


def _words(e: Evidence) -> dict[str, str]:
    key = e.key
    return {
        "evidence_id": e.evidence_id,
        "namespace": key.namespace,
        "subject": key.subject,
        "predicate": key.predicate,
        "object": e.object,
        "source": e.source,
    }
