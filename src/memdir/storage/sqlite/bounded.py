"""Bounded ranking of a plain question (F4, Performance): the top hits of an OR of words
without ranking every row that holds one of them.

A question becomes the OR of its words (query.parse_search), and in a large archive that
OR holds most rows: FTS5 scores every one of them (~1.5 us a row, 0.1-0.6 s at 1M facts)
to keep ten. But bm25 is a sum over the query's words, and a row holding one word alone
almost never ranks near the top of a question of several (on the benchmark's questions
at 1M facts, 1 of 1,500 top-10 rows held a single word). So when the words' rows are
many, only these are ranked:

- the rows holding at least two of the words, one of them among the rarest words (as many
  rarest words as hold at most `Budget.postings` rows together): `(rare) AND (others)`,
  and within the rare words, `rare_i AND (the rare words after it)`;
- the rows holding one of the very rarest words (as many as hold `Budget.full` rows
  together), alone or not: a word in a handful of rows weighs more than two common ones;
- when these are fewer than the limit, the rows holding a rare word alone; and when all
  the rows holding a rare word are still fewer, the rest of the limit from the other
  words, the same way (the rows holding none of the rare words, scored over the others);
- when even the rarest word is in more than `Budget.postings` rows, each of those
  statements looks at the newest `Budget.postings` rows holding it only, but for the rows
  holding two of the words when these are at most `Budget.full`.

Every statement is one FTS5 query whose MATCH names each of its words once, so bm25 gives
a row of it its score over those words; a row is found in full (its exact score) by the
statement of its rarest word, and a statement naming fewer of its words scores it lower,
so the best score a row gets is its exact one, and the top `limit` of the merged
statements is the exact top of the candidates (each statement reads `limit` rows). What
can be missed: a row holding one word alone that is not among the very rarest, or only
common words (none of the rare ones), while the candidates fill the limit. A filter that
keeps fewer of the newest rows than the limit: the caller ranks in full.
"""

from __future__ import annotations

from collections.abc import Callable

from ...records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3


class Budget(Record):
    """`full`: a question whose words hold at most this many rows in all (counting a row
    once per word) is ranked in full, exactly. `postings` (above `full`): how many rows
    the rare words may hold, the most any statement ranks."""

    full: int
    postings: int


# ~15 ms of ranking at most in full, and ~40k rows at most in all; measured by
# bench/search_bounded.py (top-10 overlap with full ranking against p95 at 1M facts)
BUDGET = Budget(full=10_000, postings=40_000)

# (MATCH expression, lowest rowid or None, limit) -> (rowid, bm25) best first, as FTS5
# gives them: bm25 negative, the lower the better
Ranker = Callable[[str, "int | None", int], list[tuple[int, float]]]


def top(
    db: sqlite3.Connection,
    table: str,
    phrases: list[str],
    rank: Ranker,
    limit: int,
    budget: Budget = BUDGET,
) -> list[tuple[int, float]] | None:
    """The best `limit` (rowid, bm25) of the OR of `phrases` (FTS5 strings, each a word of
    the question) by the bounded ranking above; None: rank it in full (few rows in all)."""
    counts = [_count(db, table, phrase, budget.postings + 1) for phrase in phrases]
    return _top(db, table, phrases, counts, rank, limit, budget)


def _top(
    db: sqlite3.Connection,
    table: str,
    phrases: list[str],
    counts: list[int],
    rank: Ranker,
    limit: int,
    budget: Budget,
) -> list[tuple[int, float]] | None:
    if (len(phrases) < 2 and counts[0] <= budget.postings) or sum(counts) <= budget.full:
        return None
    if min(counts) > budget.postings:  # every word is common: which is the rarest?
        counts = [_count(db, table, phrase, 4 * budget.postings + 1) for phrase in phrases]
    order = sorted(range(len(phrases)), key=lambda i: counts[i])
    rare, held = [order[0]], counts[order[0]]
    for i in order[1:]:
        if held + counts[i] > budget.postings:
            break
        rare.append(i)
        held += counts[i]
    words = [phrases[i] for i in rare]
    others = [phrases[i] for i in order[len(rare) :]]
    start = None
    if held > budget.postings:  # the rarest word alone: its newest rows only
        start = _newest(db, table, words[0], budget.postings)
    found: dict[int, float] = {}

    def merge(rows: list[tuple[int, float]]) -> None:
        for rowid, score in rows:
            if score < found.get(rowid, 0.0):
                found[rowid] = score

    if others:
        both = f"({_any(words)}) AND ({_any(others)})"
        # every word common, but few rows hold two of them: those rows in full, not the
        # newest only (counting them walks the lists, ~35 ns a row, ranking none)
        narrow = start is not None and _count(db, table, both, budget.full + 1) <= budget.full
        merge(rank(both, None if narrow else start, limit))
    for i in range(len(words) - 1):
        merge(rank(f"{words[i]} AND ({_any(words[i + 1 :])})", start, limit))
    # the rows holding one of the rarest words alone, which can outrank rows of two words
    # when those are common: as many rarest words as hold `full` rows together
    alone, held_alone = 0, 0
    while alone < len(words) and held_alone + counts[rare[alone]] <= budget.full:
        held_alone += counts[rare[alone]]
        alone += 1
    if alone and (alone < len(words) or len(found) >= limit):
        merge(rank(_any(words[:alone]), start, limit))
    if len(found) < limit:
        merge(rank(_any(words), start, limit))
    if len(found) < limit:
        if start is not None:
            return None  # a filter keeps few of the newest rows: rank in full
        if others:
            # every row holding a rare word is in `found`, exactly scored: the rest of the
            # limit comes from rows holding only the other words, whose bm25 over those
            # words alone is their own, found the same way
            known = [counts[i] for i in order[len(rare) :]]
            rest = _top(db, table, others, known, rank, limit, budget)
            merge(rank(_any(others), None, limit) if rest is None else rest)
    return sorted(found.items(), key=lambda item: (item[1], item[0]))[:limit]


def ranker(
    db: sqlite3.Connection, table: str, join: str, where: list[str], params: list[str]
) -> Ranker:
    """The statement each bounded query runs: on the FTS table alone when nothing filters
    (ranking there, then fetching the few rows kept, is the cheaper way), else joined
    (`join`, e.g. `facts f ON f.id = facts_fts.rowid`) to the rows the filters keep."""
    source = f"{table} JOIN {join}" if where else table

    def rank(match: str, start: int | None, limit: int) -> list[tuple[int, float]]:
        clauses, args = [f"{table} MATCH ?", *where], [match, *params]
        if start is not None:
            clauses.append(f"{table}.rowid >= {int(start)}")
        sql = (
            f"SELECT {table}.rowid, bm25({table}) FROM {source} "
            f"WHERE {' AND '.join(clauses)} ORDER BY bm25({table}) LIMIT ?"
        )
        return db.execute(sql, (*args, limit)).fetchall()

    return rank


def _any(phrases: list[str]) -> str:
    return " OR ".join(phrases)


def _count(db: sqlite3.Connection, table: str, phrase: str, cap: int) -> int:
    """How many rows hold the phrase, counted up to `cap` (~35 ns a row: no ranking)."""
    sql = f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {table} MATCH ? LIMIT ?)"
    return int(db.execute(sql, (phrase, cap)).fetchone()[0])


def _newest(db: sqlite3.Connection, table: str, phrase: str, n: int) -> int:
    """The rowid of the n-th newest row holding the phrase."""
    sql = f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?"
    return int(db.execute(sql, (phrase, n - 1)).fetchone()[0])
