"""The search index's rows (Q1-Q3): chunks of the markdown files, their FTS5 index, and
the vectors of chunks and facts. Part of SQLiteStore.

`to_fts5` is the only place a search becomes FTS5 syntax: the parsed query tree
(rows.Word, rows.Op) with every word re-emitted quoted, so punctuation inside a word
(`foo-bar`, `node.js`, `key:value`) can never become FTS5 syntax.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Sequence

from ...lazy import lazy
from ..rows import FACT_FIELDS, Chunk, FileState, Node, ScoredChunk, Word
from . import bounded
from .connection import Connection

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

    from ..rows_cold import (
        FileChunks,
        NewVector,
        RankedVector,
        StoredVector,
        Unembedded,
        VectorFilter,
        VectorGeneration,
    )
else:
    sqlite3 = lazy("sqlite3")  # imported when the database is first opened

CHUNK_COLUMNS = "id, path, kind, start_line, end_line, date, content"
FACT_COLUMNS = ", ".join(FACT_FIELDS)  # a fact's columns are the fields an export carries


def to_fts5(node: Node) -> str:
    """The query tree as an FTS5 MATCH expression (a doubled quote stands for a quote)."""
    if isinstance(node, Word):
        quoted = '"' + node.text.replace('"', '""') + '"'
        return quoted + "*" if node.prefix else quoted
    return f"({to_fts5(node.left)} {node.op} {to_fts5(node.right)})"


def or_words(node: Node) -> list[Word] | None:
    """The words of an OR of plain words (what query.parse_search makes of a question);
    None for any other tree."""
    if isinstance(node, Word):
        return None if node.prefix or node.phrase else [node]
    if node.op != "OR":
        return None
    left, right = or_words(node.left), or_words(node.right)
    return None if left is None or right is None else left + right


class IndexRows(Connection):
    # -- files and chunks ------------------------------------------------------------------

    def indexed_files(self) -> dict[str, FileState]:
        """path -> (kind, mtime_ns, size, hash) of every file the index holds chunks of."""
        db = self._conn()
        if db is None:
            return {}
        with self._translated("read"):
            rows = db.execute("SELECT path, kind, mtime_ns, size, hash FROM files").fetchall()
        return {path: FileState(*state) for path, *state in rows}

    def replace_chunks(
        self,
        changes: list[FileChunks],
        gone: list[str],
    ) -> None:
        """One transaction: each changed file's new state and chunks replace the old ones
        (chunks None: only the state changed, the text did not); files in `gone` leave."""
        with self._write() as db:
            for path in gone:
                db.execute("DELETE FROM chunks WHERE path = ?", (path,))
                db.execute("DELETE FROM files WHERE path = ?", (path,))
            for path, (kind, mtime, size, digest), chunks in changes:
                db.execute(
                    "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?)",
                    (path, kind, mtime, size, digest),
                )
                if chunks is None:
                    continue
                # the delete trigger drops the old rows' vectors: a chunk whose text did not
                # change gets its vector back instead of being embedded again (Q2)
                kept = db.execute(
                    "SELECT DISTINCT v.model, v.hash, v.vec FROM vectors v JOIN chunks c "
                    "ON v.owner = 'chunk' AND v.owner_id = c.id WHERE c.path = ?",
                    (path,),
                ).fetchall()
                db.execute("DELETE FROM chunks WHERE path = ?", (path,))
                db.executemany(
                    "INSERT INTO chunks (path, kind, start_line, end_line, date, content, hash) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(path, kind, *chunk) for chunk in chunks],
                )
                # REPLACE, not IGNORE: an ignored row would be counted as replaced
                # (vector_counts' triggers), and either of two equal texts' vectors will do
                db.executemany(
                    "INSERT OR REPLACE INTO vectors (model, owner, owner_id, hash, vec) "
                    "SELECT ?, 'chunk', id, hash, ? FROM chunks WHERE path = ? AND hash = ?",
                    [(model, vec, path, digest) for model, digest, vec in kept],
                )

    def search_chunks(
        self,
        query: Node,
        kinds: tuple[str, ...],
        since: str | None,
        limit: int,
        *,
        question: bool = False,
    ) -> list[ScoredChunk]:
        """`question`: the OR of a question's words, ranked bounded (bounded.py)."""
        db = self._conn()
        if db is None:
            return []
        where = [f"c.kind IN ({', '.join('?' * len(kinds))})"]
        params = list(kinds)
        if since is not None:
            where.append("c.date >= ?")
            params.append(since)
        words = or_words(query) if question else None
        with self._translated("search"):
            if words is not None:
                ranked = bounded.top(
                    db,
                    "chunks_fts",
                    [to_fts5(word) for word in words],
                    bounded.ranker(
                        db, "chunks_fts", "chunks c ON c.id = chunks_fts.rowid", where, params
                    ),
                    limit,
                    self.search_budget,
                )
                if ranked is not None:
                    chunks = self._chunks_in(db, [rowid for rowid, _ in ranked])
                    return [ScoredChunk(chunks[rowid], -score) for rowid, score in ranked]
            columns = ", ".join("c." + c for c in CHUNK_COLUMNS.split(", "))
            sql = (
                f"SELECT {columns}, bm25(chunks_fts) FROM chunks_fts "
                f"JOIN chunks c ON c.id = chunks_fts.rowid "
                f"WHERE {' AND '.join(['chunks_fts MATCH ?', *where])} "
                "ORDER BY bm25(chunks_fts) LIMIT ?"
            )
            rows = db.execute(sql, (to_fts5(query), *params, limit)).fetchall()
        return [ScoredChunk(Chunk(*row[:-1]), -float(row[-1])) for row in rows]

    def chunks_by_id(self, ids: list[int]) -> dict[int, Chunk]:
        db = self._conn()
        if db is None or not ids:
            return {}
        with self._translated("read"):
            return self._chunks_in(db, ids)

    def _chunks_in(self, db: sqlite3.Connection, ids: list[int]) -> dict[int, Chunk]:
        found: dict[int, Chunk] = {}
        for start in range(0, len(ids), 500):  # SQLite's bound on parameters
            part = ids[start : start + 500]
            rows = db.execute(
                f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE id IN ({', '.join('?' * len(part))})",
                part,
            )
            found.update((row[0], Chunk(*row)) for row in rows)
        return found

    # -- the context of a hit: its group and its neighbours (Q3) ---------------------------

    def has_groups(self) -> bool:
        """Whether any group document exists (a store of session-less facts has none, and
        its searches skip the context ranking); kept while the database is unchanged."""
        db = self._conn()
        if db is None:
            return False
        with self._translated("read"):
            token = _change_token(db)
            known = self._memo.get(("has_groups", ""))
            if known is not None and known[0] == token and known[1] is not None:
                return bool(known[1][0])
            found = db.execute("SELECT 1 FROM search_groups LIMIT 1").fetchone() is not None
        self._memo[("has_groups", "")] = (token, (int(found), 0))
        return found

    def group_scores(self, query: Node, pages: Collection[int] | None = None) -> dict[int, float]:
        """group document id -> its bm25 (higher is better), for every document that
        matches (groups.py: pages of sessions, files): a few per thousand items. With
        `pages`, those of them that match and the best matching document: what a share of
        the best needs, without scoring the thousands of documents a question's common
        words match (group_best)."""
        db = self._conn()
        if db is None:
            return {}
        match = to_fts5(query)
        words = or_words(query)
        with self._translated("search"):
            if pages is not None and words is not None and len(words) > 1:
                found = group_best(db, match, [to_fts5(w) for w in words], pages)
                if found is not None:
                    return found
            rows = db.execute(
                "SELECT rowid, bm25(groups_fts) FROM groups_fts WHERE groups_fts MATCH ?",
                (match,),
            ).fetchall()
        return {page: -float(score) for page, score in rows}

    def group_pages(self, owners: list[str]) -> dict[str, list[tuple[int, int, int]]]:
        """owner (session:<id>, file:<path>) -> its documents as (first member, last
        member, document id), in order."""
        db = self._conn()
        if db is None or not owners:
            return {}
        found: dict[str, list[tuple[int, int, int]]] = {}
        with self._translated("read"):
            for owner, first, last, page in db.execute(
                "SELECT owner, first, last, id FROM search_groups WHERE owner IN "
                f"({', '.join('?' * len(owners))}) ORDER BY owner, first",
                owners,
            ):
                found.setdefault(owner, []).append((first, last, page))
        return found

    def fact_neighbours(self, ids: list[int]) -> dict[int, tuple[str, int | None, int | None]]:
        """fact id -> (its session, the active fact that session wrote just before it,
        just after); facts of no session have none and are left out."""
        db = self._conn()
        if db is None or not ids:
            return {}
        with self._translated("read"):
            rows = db.execute(
                "SELECT f.id, f.session_id, (SELECT max(p.id) FROM facts p WHERE "
                "p.session_id = f.session_id AND p.id < f.id AND p.status = 'active'), "
                "(SELECT min(n.id) FROM facts n WHERE n.session_id = f.session_id "
                "AND n.id > f.id AND n.status = 'active') "
                f"FROM facts f WHERE f.id IN ({', '.join('?' * len(ids))}) "
                "AND f.session_id IS NOT NULL",
                ids,
            ).fetchall()
        return {row[0]: (row[1], row[2], row[3]) for row in rows}

    def chunk_neighbours(self, ids: list[int]) -> dict[int, tuple[int | None, int | None]]:
        """chunk id -> (the chunk of its file just above it, just below)."""
        db = self._conn()
        if db is None or not ids:
            return {}
        with self._translated("read"):
            rows = db.execute(
                "SELECT c.id, (SELECT p.id FROM chunks p WHERE p.path = c.path AND "
                "p.start_line < c.start_line ORDER BY p.start_line DESC LIMIT 1), "
                "(SELECT n.id FROM chunks n WHERE n.path = c.path AND n.start_line > "
                "c.start_line ORDER BY n.start_line LIMIT 1) "
                f"FROM chunks c WHERE c.id IN ({', '.join('?' * len(ids))})",
                ids,
            ).fetchall()
        return {row[0]: (row[1], row[2]) for row in rows}

    # -- vectors ---------------------------------------------------------------------------

    def unembedded(self, model: str, limit: int) -> list[Unembedded]:
        """(owner, id, text, hash) of active facts and chunks with no vector for `model`;
        a fact's hash is computed here from its text."""
        db = self._conn()
        if db is None:
            return []
        with self._translated("read"):
            token = _change_token(db)
            if limit > 0 and self._memo.get(("unembedded", model)) == (token, None):
                return []  # every item had a vector, and nothing has changed since
            missing = _missing(db, model)
            if limit > 0 and missing == 0:
                self._memo[("unembedded", model)] = (token, None)
                return []
            # newest first, no more than wait: what a write left is found at once
            want = limit if missing is None else min(limit, missing)
            chunks = db.execute(
                "SELECT 'chunk', c.id, c.content, c.hash FROM chunks c WHERE NOT EXISTS "
                "(SELECT 1 FROM vectors v WHERE v.model = ? AND v.owner = 'chunk' "
                "AND v.owner_id = c.id) ORDER BY c.id DESC LIMIT ?",
                (model, want),
            ).fetchall()
            facts = db.execute(
                "SELECT 'fact', f.id, f.content FROM facts f WHERE f.status = 'active' AND "
                "NOT EXISTS (SELECT 1 FROM vectors v WHERE v.model = ? AND v.owner = 'fact' "
                "AND v.owner_id = f.id) ORDER BY f.id DESC LIMIT ?",
                (model, max(0, want - len(chunks))),
            ).fetchall()
        if limit > 0 and not chunks and not facts:
            self._memo[("unembedded", model)] = (token, None)
        from ..hashing import text_hash
        from ..rows_cold import Unembedded

        return [
            *(Unembedded(*row) for row in chunks),
            *(Unembedded(o, i, t, text_hash(t)) for o, i, t in facts),
        ]

    def unembedded_items(
        self, model: str, fact_ids: list[int], paths: list[str]
    ) -> list[Unembedded]:
        """As unembedded, for these facts and the chunks of these files only: what one
        write made, embedded by the writer without touching anything else (Q2)."""
        db = self._conn()
        if db is None or not (fact_ids or paths):
            return []
        with self._translated("read"):
            chunks = db.execute(
                "SELECT 'chunk', c.id, c.content, c.hash FROM chunks c WHERE c.path IN "
                f"({', '.join('?' * len(paths))}) AND NOT EXISTS (SELECT 1 FROM vectors v "
                "WHERE v.model = ? AND v.owner = 'chunk' AND v.owner_id = c.id)",
                (*paths, model),
            ).fetchall()
            facts = db.execute(
                "SELECT 'fact', f.id, f.content FROM facts f WHERE f.id IN "
                f"({', '.join('?' * len(fact_ids))}) AND f.status = 'active' AND NOT EXISTS "
                "(SELECT 1 FROM vectors v WHERE v.model = ? AND v.owner = 'fact' "
                "AND v.owner_id = f.id)",
                (*fact_ids, model),
            ).fetchall()
        from ..hashing import text_hash
        from ..rows_cold import Unembedded

        return [
            *(Unembedded(*row) for row in chunks),
            *(Unembedded(o, i, t, text_hash(t)) for o, i, t in facts),
        ]

    def count_unembedded(self, model: str) -> int:
        """How many active facts and chunks have no vector of `model`. Every semantic or
        hybrid search asks (its answer says how many items it ranked by words alone), so
        a warm process keeps the answer while the database is unchanged. Counted (~6 ms at
        100k, where looking each item up took ~125 ms: _missing)."""
        db = self._conn()
        if db is None:
            return 0
        with self._translated("read"):
            token = _change_token(db)
            known = self._memo.get(("count_unembedded", model))
            if known is not None and known[0] == token and known[1] is not None:
                return known[1][0]
            missing = _missing(db, model)
            if missing is not None:
                self._memo[("count_unembedded", model)] = (token, (missing, 0))
                return missing
            (n,) = db.execute(
                "SELECT (SELECT count(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM vectors "
                "v WHERE v.model = ? AND v.owner = 'chunk' AND v.owner_id = c.id)) + "
                "(SELECT count(*) FROM facts f WHERE f.status = 'active' AND NOT EXISTS "
                "(SELECT 1 FROM vectors v WHERE v.model = ? AND v.owner = 'fact' "
                "AND v.owner_id = f.id))",
                (model, model),
            ).fetchone()
        self._memo[("count_unembedded", model)] = (token, (int(n), 0))
        return int(n)

    def vectors_by_hash(self, model: str, hashes: list[str]) -> dict[str, bytes]:
        db = self._conn()
        if db is None or not hashes:
            return {}
        found: dict[str, bytes] = {}
        with self._translated("read"):
            for start in range(0, len(hashes), 500):
                part = hashes[start : start + 500]
                rows = db.execute(
                    f"SELECT hash, vec FROM vectors WHERE model = ? AND hash IN "
                    f"({', '.join('?' * len(part))})",
                    (model, *part),
                ).fetchall()
                found.update(dict(rows))
        return found

    def put_vectors(self, model: str, rows: list[NewVector]) -> None:
        """(owner, owner id, hash, vector blob) rows; an owner gone meanwhile is skipped."""
        with self._write() as db:
            db.executemany(
                "INSERT OR REPLACE INTO vectors (model, owner, owner_id, hash, vec) "
                "SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM chunks WHERE ? = 'chunk' AND "
                "id = ?) OR EXISTS (SELECT 1 FROM facts WHERE ? = 'fact' AND id = ? AND "
                "status = 'active')",
                [(model, o, i, h, v, o, i, o, i) for o, i, h, v in rows],
            )

    def vector_generation(self, model: str) -> VectorGeneration:
        """The model's row of vector_counts (migration 13): one lookup, where counting the
        vectors took ~8 ms at 100k after every write."""
        db = self._conn()
        from ..rows_cold import VectorGeneration

        if db is None:
            return VectorGeneration(0, 0, 0)
        with self._translated("read"):
            try:
                row = db.execute(
                    "SELECT n, top, removed FROM vector_counts WHERE model = ?", (model,)
                ).fetchone()
            except sqlite3.OperationalError as exc:
                if "no such table" not in str(exc):
                    raise
                # a store of schema 12 seen by a look (which does not migrate): counted, and
                # any commit since counts as a removal, so a matrix is read again after it
                count, top = db.execute(
                    "SELECT count(*), coalesce(max(id), 0) FROM vectors WHERE model = ?",
                    (model,),
                ).fetchone()
                version, changes = _change_token(db)
                return VectorGeneration(int(count), int(top), (version << 32) + changes)
        return VectorGeneration(*(int(v) for v in row)) if row else VectorGeneration(0, 0, 0)

    def iter_vectors(self, model: str, after: int = 0) -> Iterator[StoredVector]:
        """The model's vectors in the order they were stored, or only those stored after
        row id `after`: what a cached matrix lacks when rows were only added (its last
        row read again first, to tell that nothing before it changed)."""
        db = self._conn()
        if db is None:
            return
        with self._translated("read"):
            from ..rows_cold import StoredVector

            # +model: by the rowid range, not the model's index (which reads every row of
            # the model, then sorts them: 30 ms at 100k for the two rows a write added)
            rows = db.execute(
                "SELECT owner, owner_id, vec FROM vectors WHERE +model = ? AND id > ? ORDER BY id",
                (model, after),
            )
            yield from (StoredVector(*row) for row in rows)

    def ranks_vectors(self) -> bool:
        return False

    def rank_vectors(
        self, model: str, question: bytes, want: int, within: VectorFilter | None = None
    ) -> list[RankedVector] | None:
        """None: memory.db's vectors are ranked by the caller's matrix (search.VectorCache)."""
        return None

    def score_vectors(
        self, model: str, question: bytes, keys: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], float]:
        return {}

    def vector_models(self) -> dict[str, int]:
        db = self._conn()
        if db is None:
            return {}
        with self._translated("read"):
            try:
                rows = db.execute("SELECT model, n FROM vector_counts WHERE n > 0").fetchall()
            except sqlite3.OperationalError as exc:
                if "no such table" not in str(exc):
                    raise
                rows = db.execute("SELECT model, count(*) FROM vectors GROUP BY model").fetchall()
        return {str(model): int(n) for model, n in rows}

    def drop_vectors(self, keep: str) -> int:
        with self._write() as db:
            return int(db.execute("DELETE FROM vectors WHERE model != ?", (keep,)).rowcount)


def _missing(db: sqlite3.Connection, model: str) -> int | None:
    """How many active facts and chunks have no vector of `model`, by counting: a vector
    belongs to one active fact or one chunk (put_vectors stores no other, and the triggers
    of facts and chunks delete those that stop being one), so the items less the vectors
    wait. None in a store of schema 12 (a look), which has no counts."""
    try:
        row = db.execute("SELECT n FROM vector_counts WHERE model = ?", (model,)).fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise
        return None
    (items,) = db.execute(
        "SELECT (SELECT count(*) FROM facts WHERE status = 'active') + "
        "(SELECT count(*) FROM chunks)"
    ).fetchone()
    return max(0, int(items) - (int(row[0]) if row else 0))


def _change_token(db: sqlite3.Connection) -> tuple[int, int]:
    """Differs whenever the database may have changed since it was last taken: another
    connection committed (data_version) or this one changed rows (total_changes). Answers
    kept under it spare a warm process the scans of 100k rows that every search would
    otherwise run to learn that nothing changed."""
    return int(db.execute("PRAGMA data_version").fetchone()[0]), db.total_changes


# FTS5's bm25: a phrase adds idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / mean
# length)), less than idf * (k1 + 1) whatever its tf and the document's length; idf is
# log((N - n + 0.5) / (n + 0.5)) over the N documents, n of which hold the phrase, and
# 1e-6 where that is not above 0 (fts5_aux.c).
BM25_K1 = 1.2
IDF_FLOOR = 1e-6
BOUND_SLACK = 1e-6  # relative: rounding in FTS5's sum never reaches this


def group_best(
    db: sqlite3.Connection, match: str, phrases: list[str], pages: Collection[int]
) -> dict[int, float] | None:
    """The bm25 of `pages` (those that match) and of the best document matching `match`,
    the OR of `phrases`, each score exactly what ranking every match gives; None when
    bounding would score most matches anyway (the caller ranks in full).

    The best score is at least the best of those scored (theta). A document holding only
    some phrases scores less than the sum of their bounds (idf * (k1 + 1)), so the phrases
    whose bounds, smallest first, add up to less than theta cannot make a best document
    alone: only documents holding one of the others need a score. The documents holding
    the phrase of the highest bound (the rarest word) are scored with `pages` at once: they
    are the likeliest best, and often the only ones needed. Every score comes from the one
    MATCH expression, with the rows to score filtered after FTS5 (`+rowid`: a rowid
    constraint FTS5 were given would run the whole query again for each row); each such
    pass walks the matches once, as ranking them all does, but scores only a few."""
    (total,) = db.execute("SELECT count(*) FROM search_groups").fetchone()
    bounds = []
    for phrase in phrases:
        (held,) = db.execute(
            "SELECT count(*) FROM groups_fts WHERE groups_fts MATCH ?", (phrase,)
        ).fetchone()
        idf = math.log((total - held + 0.5) / (held + 0.5))
        bounds.append((max(idf, IDF_FLOOR) * (BM25_K1 + 1), held, phrase))
    bounds.sort()
    first = set(pages)
    rarest = bounds[-1][2] if 2 * bounds[-1][1] <= total else None
    if rarest is not None:
        first |= _holding(db, [rarest])
    scored = _scored(db, match, first)
    theta = max(scored.values(), default=0.0)
    if theta <= 0:
        return None
    below, rest = 0.0, len(bounds)
    for at, (bound, _, _) in enumerate(bounds):
        if (below + bound) * (1 + BOUND_SLACK) >= theta:
            rest = at
            break
        below += bound
    # the rarest phrase's documents are scored already
    needed = [phrase for _, _, phrase in bounds[rest:] if phrase != rarest]
    if not needed:
        return scored
    holding = _holding(db, needed) - scored.keys()
    if 2 * len(holding) > total:
        return None
    scored.update(_scored(db, match, holding))
    return scored


def _holding(db: sqlite3.Connection, phrases: list[str]) -> set[int]:
    """The rowids of the group documents holding any of `phrases`."""
    sql = "SELECT rowid FROM groups_fts WHERE groups_fts MATCH ?"
    return {row for (row,) in db.execute(sql, (" OR ".join(phrases),))}


def _scored(db: sqlite3.Connection, match: str, rows: Collection[int]) -> dict[int, float]:
    """rowid -> bm25 (higher is better) of those `rows` that match (rowids written into the
    statement: they are integers, and a lexical search loads no json to pass them)."""
    if not rows:
        return {}
    listed = ", ".join(str(int(row)) for row in sorted(rows))
    found = db.execute(
        "SELECT rowid, bm25(groups_fts) FROM groups_fts WHERE groups_fts MATCH ? "
        f"AND +rowid IN ({listed})",
        (match,),
    ).fetchall()
    return {row: -float(score) for row, score in found}
