"""Lexical search on PostgreSQL with SQLite's own ranking: BM25 exactly as FTS5 computes
it (`bm25()`, k1 = 1.2, b = 0.75), over the same tokens.

The tokens are FTS5's: each text is tokenized by an in-memory SQLite FTS5 table with the
tokenizer memory.db uses (`porter unicode61 remove_diacritics 2`), read back through
`fts5vocab`, so a word is split, folded and stemmed on PostgreSQL exactly as on SQLite
(ts_rank has no idf, and PostgreSQL's english stemmer is not FTS5's porter). The tokens go
into plain tables of the scope (schema.py): `lex_terms` (index, term, document, positions:
the postings), `lex_docs` (each document's length in tokens) and `lex_stats` (documents and
tokens of each index), kept by the same transaction as the rows they index.

A search reads the postings of the query's words (a prefix is a range of terms), matches
the query tree (rows.Word, rows.Op: a word is a phrase of its tokens, AND, OR, NOT) and
ranks with the statistics FTS5 uses: the documents of the index, its average length, and
for each phrase of the query the documents holding it. Ties go to the lower id.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Sequence

from ..rows import Node, Word
from .insert import insert_rows

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

    import psycopg

# the indexes of a scope (lex_* tables' `idx`): what FTS5 keeps in four virtual tables
FACTS, PAST, CHUNKS, GROUPS = 0, 1, 2, 3
K1, B = 1.2, 0.75  # FTS5's bm25 constants
IDF_FLOOR = 1e-6  # FTS5: a phrase in more than half the rows still weighs this much
TOKENIZER = "porter unicode61 remove_diacritics 2"  # memory.db's (sqlite/migrations.py)
DOC_COLUMNS = (("idx", "smallint"), ("doc", "bigint"), ("len", "integer"))
TERM_COLUMNS = (("idx", "smallint"), ("term", "text"), ("doc", "bigint"), ("pos", "integer[]"))
TOP = "\U0010ffff"  # above every character: a prefix's terms are [prefix, prefix + TOP)

_lock = threading.Lock()
_tokenizer: sqlite3.Connection | None = None


def tokens(texts: Sequence[str]) -> list[list[tuple[str, int]]]:
    """(term, position) of each text's tokens, as FTS5 indexes it."""
    if not texts:
        return []
    global _tokenizer
    with _lock:
        if _tokenizer is None:
            import sqlite3

            db = sqlite3.connect(":memory:", check_same_thread=False)
            db.execute(f"CREATE VIRTUAL TABLE t USING fts5(content, tokenize='{TOKENIZER}')")
            db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
            _tokenizer = db
        db = _tokenizer
        found: list[list[tuple[str, int]]] = [[] for _ in texts]
        db.execute("BEGIN")
        try:
            db.executemany(
                "INSERT INTO t (rowid, content) VALUES (?, ?)",
                [(i + 1, text) for i, text in enumerate(texts)],
            )
            for term, doc, offset in db.execute("SELECT term, doc, offset FROM v"):
                found[doc - 1].append((term, offset))
        finally:
            db.execute("ROLLBACK")
    for terms in found:
        terms.sort(key=lambda pair: pair[1])
    return found


def put(cur: psycopg.Cursor[tuple[object, ...]], idx: int, docs: list[tuple[int, str]]) -> None:
    """Index these (document id, text) in index `idx`, in place of what it held of them."""
    if not docs:
        return
    drop(cur, idx, [doc for doc, _ in docs])  # a row deleted under the store left its own
    terms = tokens([text for _, text in docs])
    insert_rows(
        cur,
        "lex_docs",
        DOC_COLUMNS,
        [(idx, doc, len(found)) for (doc, _), found in zip(docs, terms, strict=True)],
    )
    postings: list[tuple[int, str, int, str]] = []
    for (doc, _), found in zip(docs, terms, strict=True):
        positions: dict[str, list[str]] = {}
        for term, pos in found:
            positions.setdefault(term, []).append(str(pos))
        postings += [(idx, term, doc, f"{{{','.join(pos)}}}") for term, pos in positions.items()]
    insert_rows(cur, "lex_terms", TERM_COLUMNS, postings)
    cur.execute(
        "INSERT INTO lex_stats (idx, nrow, ntoken) VALUES (%s, %s, %s) ON CONFLICT (idx) "
        "DO UPDATE SET nrow = lex_stats.nrow + excluded.nrow, "
        "ntoken = lex_stats.ntoken + excluded.ntoken",
        (idx, len(docs), sum(len(found) for found in terms)),
    )


def drop(cur: psycopg.Cursor[tuple[object, ...]], idx: int, ids: Iterable[int]) -> None:
    """Take these documents out of index `idx` (ids not in it are skipped)."""
    ids = list(ids)
    if not ids:
        return
    cur.execute(
        "WITH gone AS (DELETE FROM lex_docs WHERE idx = %s AND doc = ANY(%s) RETURNING len) "
        "UPDATE lex_stats SET nrow = nrow - (SELECT count(*) FROM gone), "
        "ntoken = ntoken - (SELECT coalesce(sum(len), 0) FROM gone) WHERE idx = %s",
        (idx, ids, idx),
    )
    cur.execute("DELETE FROM lex_terms WHERE idx = %s AND doc = ANY(%s)", (idx, ids))


class Phrase:
    """One word of the query: its tokens in order, the last one a prefix or not."""

    def __init__(self, terms: list[str], prefix: bool) -> None:
        self.terms, self.prefix = terms, prefix
        self.hits: dict[int, int] = {}  # document -> how many times the phrase is in it


def _phrases(node: Node, into: list[tuple[Word, Phrase]]) -> None:
    if isinstance(node, Word):
        into.append((node, Phrase([], node.prefix)))
    else:
        _phrases(node.left, into)
        _phrases(node.right, into)


def match(
    cur: psycopg.Cursor[tuple[object, ...]], idx: int, query: Node
) -> tuple[dict[int, float], int]:
    """document -> its bm25 (higher is better, FTS5's negated) of every document of index
    `idx` matching the query, and how many postings were read."""
    pairs: list[tuple[Word, Phrase]] = []
    _phrases(query, pairs)
    for (_, phrase), found in zip(pairs, tokens([w.text for w, _ in pairs]), strict=True):
        phrase.terms = [term for term, _ in found]
    exact = sorted({t for _, p in pairs for t in (p.terms[:-1] if p.prefix else p.terms)})
    prefixes = sorted({p.terms[-1] for _, p in pairs if p.prefix and p.terms})
    clauses: list[str] = ["term = ANY(%s)"]
    params: list[object] = [exact]
    for prefix in prefixes:
        clauses.append("(term >= %s AND term < %s)")
        params += [prefix, prefix + TOP]
    cur.execute(
        f"SELECT term, doc, pos FROM lex_terms WHERE idx = %s AND ({' OR '.join(clauses)})",
        (idx, *params),
    )
    postings: dict[str, dict[int, list[int]]] = {}
    read = 0
    for term, doc, pos in cur:
        postings.setdefault(str(term), {})[int(str(doc))] = list(pos)  # type: ignore[call-overload]  # psycopg rows are tuples of object
        read += 1
    by_word = {id(word): phrase for word, phrase in pairs}
    for _, phrase in pairs:
        phrase.hits = _phrase_hits(phrase, postings)
    docs = _evaluate(query, by_word)
    if not docs:
        return {}, read
    cur.execute("SELECT nrow, ntoken FROM lex_stats WHERE idx = %s", (idx,))
    row = cur.fetchone()
    nrow, ntoken = (int(str(row[0])), int(str(row[1]))) if row else (0, 0)
    cur.execute(
        "SELECT doc, len FROM lex_docs WHERE idx = %s AND doc = ANY(%s)", (idx, sorted(docs))
    )
    lengths = {int(str(doc)): int(str(n)) for doc, n in cur}
    return bm25([p for _, p in pairs], docs, lengths, nrow, ntoken), read


def _plain_terms(node: Node) -> list[str] | None:
    """The words of a single plain word or an OR of them, each one token (None: another
    tree, ranked by match)."""
    if isinstance(node, Word):
        if node.prefix:
            return None
        found = tokens([node.text])[0]
        return [found[0][0]] if len(found) == 1 else ([] if not found else None)
    if node.op != "OR":
        return None
    left, right = _plain_terms(node.left), _plain_terms(node.right)
    return None if left is None or right is None else left + right


def top(
    cur: psycopg.Cursor[tuple[object, ...]],
    idx: int,
    query: Node,
    table: str,
    where: list[str],
    params: list[object],
    limit: int,
) -> list[tuple[int, float]] | None:
    """The best `limit` (id, bm25) of `table`'s rows the filters keep, for a plain word or
    an OR of them (a question), ranked in SQL; None for another query (use `match`). The
    same sum as bm25() below, each term weighted by its idf (counted once per time the
    query names it, as FTS5 counts each phrase)."""
    terms = _plain_terms(query)
    if terms is None:
        return None
    if not terms:
        return []
    cur.execute(
        "SELECT term, count(*) FROM lex_terms WHERE idx = %s AND term = ANY(%s) GROUP BY term",
        (idx, sorted(set(terms))),
    )
    held = {str(term): int(str(n)) for term, n in cur.fetchall()}
    if not held:
        return []
    cur.execute("SELECT nrow, ntoken FROM lex_stats WHERE idx = %s", (idx,))
    row = cur.fetchone()
    nrow, ntoken = (int(str(row[0])), int(str(row[1]))) if row else (0, 0)
    if not nrow:
        return []
    weights: dict[str, float] = {}
    for term in terms:
        n = held.get(term, 0)
        idf = math.log((nrow - n + 0.5) / (n + 0.5))
        weights[term] = weights.get(term, 0.0) + (IDF_FLOOR if idf <= 0.0 else idf) * (K1 + 1)
    avgdl = ntoken / nrow
    filters = "".join(f" AND {clause}" for clause in where)
    join = f" JOIN {table} r ON r.id = t.doc" if where else ""
    cur.execute(
        "SELECT t.doc, sum(q.w * cardinality(t.pos) / (cardinality(t.pos) + "
        "%s * (1 - %s + %s * d.len / %s))) AS s "
        "FROM lex_terms t JOIN unnest(%s::text[], %s::float8[]) AS q(term, w) "
        "ON q.term = t.term JOIN lex_docs d ON d.idx = t.idx AND d.doc = t.doc"
        f"{join} WHERE t.idx = %s{filters} GROUP BY t.doc ORDER BY s DESC, t.doc LIMIT %s",
        (K1, B, B, avgdl, list(weights), list(weights.values()), idx, *params, limit),
    )
    return [(int(str(doc)), float(str(score))) for doc, score in cur.fetchall()]


def bm25(
    phrases: list[Phrase], docs: set[int], lengths: dict[int, int], nrow: int, ntoken: int
) -> dict[int, float]:
    """fts5_aux.c's fts5Bm25Function, negated (higher is better)."""
    avgdl = ntoken / nrow if nrow else 0.0
    idfs = []
    for phrase in phrases:
        held = len(phrase.hits)
        idf = math.log((nrow - held + 0.5) / (held + 0.5)) if nrow else 0.0
        idfs.append(IDF_FLOOR if idf <= 0.0 else idf)
    scores: dict[int, float] = {}
    for doc in docs:
        dl = lengths.get(doc, 0)
        norm = K1 * (1 - B + B * dl / avgdl) if avgdl else K1 * (1 - B)
        score = 0.0
        for phrase, idf in zip(phrases, idfs, strict=True):
            tf = phrase.hits.get(doc, 0)
            score += idf * (tf * (K1 + 1)) / (tf + norm)
        scores[doc] = score
    return scores


def _phrase_hits(phrase: Phrase, postings: dict[str, dict[int, list[int]]]) -> dict[int, int]:
    """document -> how many times the phrase occurs in it (consecutive tokens)."""
    if not phrase.terms:
        return {}  # a word with no tokens ("!!!") matches nothing, as in FTS5
    lists: list[dict[int, set[int]]] = []
    for at, term in enumerate(phrase.terms):
        if phrase.prefix and at == len(phrase.terms) - 1:
            merged: dict[int, set[int]] = {}
            for found, docs in postings.items():
                if found.startswith(term):
                    for doc, pos in docs.items():
                        merged.setdefault(doc, set()).update(pos)
            lists.append(merged)
        else:
            lists.append({doc: set(pos) for doc, pos in postings.get(term, {}).items()})
    first, rest = lists[0], lists[1:]
    hits: dict[int, int] = {}
    for doc, starts in first.items():
        if not all(doc in later for later in rest):
            continue
        n = sum(1 for s in starts if all(s + k + 1 in later[doc] for k, later in enumerate(rest)))
        if n:
            hits[doc] = n
    return hits


def _evaluate(node: Node, phrases: dict[int, Phrase]) -> set[int]:
    if isinstance(node, Word):
        return set(phrases[id(node)].hits)
    left = _evaluate(node.left, phrases)
    right = _evaluate(node.right, phrases)
    if node.op == "AND":
        return left & right
    if node.op == "OR":
        return left | right
    return left - right  # NOT
