"""SQLite behind the Store protocol: WAL, a busy timeout, FTS5 external content + triggers.

Every write is one `BEGIN IMMEDIATE` transaction: taking the write lock up front means a
writer waits (up to the busy timeout) instead of failing with "database is locked" when a
read transaction would have to be upgraded.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator

from ..errors import ConflictError, NotFoundError, QueryError, StorageError
from ..lazy import lazy
from ..models import Fact, Provenance, Session, Task
from .migrations import migrate
from .sqlite_archive import ArchiveRows
from .sqlite_index import IndexRows

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .. import similarity
    from .base import CachedEntry
else:
    similarity = lazy("memdir.similarity")  # writes and the duplicate guard only

FACT_COLUMNS = (
    "id, category, content, status, created, updated, supersedes, superseded_by, "
    "session_id, surface, agent, valid_from, valid_to"
)
# every column of a fact that an export carries (norm is derived from the content)
FACT_FIELDS = tuple(FACT_COLUMNS.split(", "))


CANDIDATES = 64  # facts a write compares itself with at most (the most alike by LSH)
BUCKET = 32  # a band key shared by more facts than this pairs each with WINDOW others
WINDOW = 8


def _first(row: tuple[int, int]) -> int:
    return row[0]


def _pair_up(bucket: list[int], pairs: set[tuple[int, int]]) -> None:
    """The candidate pairs of one band key's facts (ids ascending): all of them in a small
    bucket, each with its WINDOW next in a big one."""
    width = len(bucket) if len(bucket) <= BUCKET else WINDOW + 1
    for i, a in enumerate(bucket):
        for b in bucket[i + 1 : i + width]:
            pairs.add((a, b))


class SQLiteStore(IndexRows, ArchiveRows):
    def __init__(
        self,
        path: str,
        *,
        busy_timeout_ms: int = 10_000,
        create: bool = True,
        read_only: bool = False,
    ) -> None:
        """`read_only`: for looking only (doctor): never creates, migrates or writes the
        file; `PRAGMA query_only` makes even a cache refresh deep in the library fail inside
        SQLite, and the library treats a cache it cannot write as a cache."""
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self.create = create and not read_only
        self.read_only = read_only
        self._db: sqlite3.Connection | None = None
        # answers that hold until the database changes: (what, model) -> (change token, answer)
        self._memo: dict[tuple[str, str], tuple[tuple[int, int], tuple[int, int] | None]] = {}

    # -- connection --------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection | None:
        """The open connection; None when the database does not exist and may not be made."""
        if self._db is not None:
            return self._db
        exists = os.path.exists(self.path)
        if not exists and not self.create:
            return None
        with self._translated("open"):
            if not exists:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
            db = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            try:
                db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
                if self.read_only:
                    db.execute("PRAGMA query_only = ON")
                    self._db = db
                    return db
                self._enable_wal(db)
                # FULL: an acknowledged write survives power loss, not only a crash.
                db.execute("PRAGMA synchronous = FULL")
                db.execute("PRAGMA foreign_keys = ON")
                migrate(db)
            except BaseException:
                db.close()
                raise
        self._db = db
        return db

    def _enable_wal(self, db: sqlite3.Connection) -> None:
        """Changing the journal mode commits any open transaction (sqlite-utils enable_wal):
        do it first thing, outside any transaction. WAL is persistent, so only the first
        opener of a new file pays for it. When several processes open a new file at once,
        the switch (it needs an exclusive lock) fails with SQLITE_BUSY at once, without the
        busy handler, for all but one of them: wait for the winner, up to the busy timeout."""
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        while True:
            try:
                if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    db.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                busy = "locked" in str(exc) or "busy" in str(exc)
                if not busy or time.monotonic() >= deadline:
                    raise
                time.sleep(0.002)

    def _require(self) -> sqlite3.Connection:
        db = self._conn()
        assert db is not None, "writes are refused before reaching a store that may not create"
        return db

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        if self.read_only:
            raise StorageError(f"{self.path} is open read-only: nothing was written")
        db = self._require()
        with self._translated("write to"):
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    @contextlib.contextmanager
    def _translated(self, doing: str) -> Iterator[None]:
        """sqlite3 errors -> one-line StorageError / QueryError naming the file and a way out."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            raise self._operational(exc, doing) from exc
        except sqlite3.DatabaseError as exc:
            raise StorageError(
                f"cannot {doing} {self.path}: {exc} (the file is left in place; if it is "
                "corrupt, move it aside and run the command again to start a fresh archive)"
            ) from exc
        except OSError as exc:
            raise StorageError(f"cannot {doing} {self.path}: {exc.strerror}") from exc

    def _operational(self, exc: sqlite3.OperationalError, doing: str) -> Exception:
        text = str(exc)
        if "locked" in text or "busy" in text:
            return StorageError(
                f"{self.path} is locked by another process (waited {self.busy_timeout_ms} ms); "
                "nothing was changed, try again (or raise memory.busy_timeout_ms)"
            )
        if "fts5" in text:
            return QueryError(
                f"the search query cannot run: {text}",
                hint='quote words that contain punctuation, e.g. "foo-bar"',
            )
        if "full" in text:
            return StorageError(
                f"cannot {doing} {self.path}: the disk is full; nothing was changed"
            )
        return StorageError(f"cannot {doing} {self.path}: {text}")

    def close(self) -> None:
        self._memo.clear()  # a token belongs to one connection
        if self._db is not None:
            self._db.close()
            self._db = None

    # -- facts -------------------------------------------------------------------------

    def add_fact(
        self,
        category: str,
        content: str,
        now: str,
        by: Provenance,
        valid_from: str | None = None,
    ) -> Fact:
        """A new active fact; if an active fact says the same (normalised), that one,
        marked `duplicate`, and nothing is stored. Checked and written in one transaction,
        so two processes adding the same text at once store it once."""
        key = similarity.text_key(content)
        with self._write() as db:
            existing = self._active_by_key(db, key, content)
            if existing is not None:
                return existing._replace(duplicate=True)
            fact_id = self._insert_fact(
                db, category, content, now, by, None, valid_from or now, key
            )
            fact = self._fact(db, fact_id)
        assert fact is not None
        return fact

    def add_facts(self, rows: list[tuple[str, str]], now: str, by: Provenance) -> list[int]:
        """Bulk import: the id of each row, an exact duplicate's being the fact it repeats."""
        normals = [similarity.normalize(text) for _, text in rows]
        keys = [similarity.key_of_normal(normal) for normal in normals]
        sketches = similarity.sketches(normals, normal=True)
        ids: list[int] = []
        new_rows: list[tuple[object, ...]] = []
        sketch_rows: list[tuple[int, int]] = []
        with self._write() as db:
            known = self._active_keys(db, keys)
            # under the write lock, the next ids are known: one executemany, not 10k executes
            (next_id,) = db.execute("SELECT coalesce(max(id), 0) + 1 FROM facts").fetchone()
            for (category, text), wanted, key, sketch in zip(
                rows, normals, keys, sketches, strict=True
            ):
                fact_id = known.get((key, wanted)) if wanted else None
                if fact_id is None:
                    fact_id = next_id
                    if wanted:
                        known[(key, wanted)] = fact_id
                    next_id += 1
                    new_rows.append((fact_id, category, text, now, now, by.session_id,
                                     by.surface, by.agent, now, key))
                    sketch_rows += [(k, fact_id) for k in sketch]
                ids.append(fact_id)
            db.executemany(
                "INSERT INTO facts (id, category, content, created, updated, session_id, "
                "surface, agent, valid_from, norm) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                new_rows,
            )
            sketch_rows.sort(key=_first)  # in key order: the b-tree fills page by page
            db.executemany(
                "INSERT OR IGNORE INTO fact_sketch (key, fact_id) VALUES (?, ?)", sketch_rows
            )
        return ids

    def _active_keys(self, db: sqlite3.Connection, keys: list[int]) -> dict[tuple[int, str], int]:
        """(key, normalised text) -> id of the active facts holding any of these keys."""
        found: dict[tuple[int, str], int] = {}
        unique = sorted(set(keys))
        for start in range(0, len(unique), 500):
            part = unique[start : start + 500]
            for fact_id, key, content in db.execute(
                "SELECT id, norm, content FROM facts WHERE status = 'active' AND norm IN "
                f"({', '.join('?' * len(part))}) ORDER BY id DESC",
                part,
            ):
                found[(key, similarity.normalize(content))] = fact_id  # the oldest wins
        return found

    def supersede_fact(
        self,
        old_id: int,
        category: str | None,
        content: str,
        now: str,
        by: Provenance,
        valid_from: str | None = None,
    ) -> tuple[Fact, Fact]:
        key = similarity.text_key(content)
        with self._write() as db:
            old = self._active_fact(db, old_id, "supersede")
            if valid_from is not None and old.valid_from and valid_from < old.valid_from:
                raise ConflictError(
                    f"fact {old_id} holds from {old.valid_from}: the version replacing it "
                    f"cannot begin before that (valid_from {valid_from})"
                )
            same = self._active_by_key(db, key, content)
            if content == old.content and category in (None, old.category):
                return old, old._replace(duplicate=True)  # nothing to change
            if same is not None and same.id != old_id:
                raise ConflictError(
                    f"fact {same.id} already says this; fact {old_id} was left as it is: "
                    f"to retire {old_id}, remove it (`memdir fact rm {old_id}`)"
                )
            start = valid_from or now
            new_id = self._insert_fact(
                db, category or old.category, content, now, by, old_id, start, key
            )
            db.execute(
                "UPDATE facts SET status = 'superseded', superseded_by = ?, updated = ?, "
                "valid_to = ? WHERE id = ?",
                (new_id, now, start, old_id),
            )
            self._unsketch(db, old)
            before, after = self._fact(db, old_id), self._fact(db, new_id)
        assert before is not None and after is not None
        return before, after

    def remove_fact(self, fact_id: int, now: str) -> Fact:
        with self._write() as db:
            gone = self._active_fact(db, fact_id, "remove")
            db.execute(
                "UPDATE facts SET status = 'removed', updated = ?, valid_to = ? WHERE id = ?",
                (now, now, fact_id),
            )
            self._unsketch(db, gone)
            fact = self._fact(db, fact_id)
        assert fact is not None
        return fact

    def similar_facts(
        self, content: str, exclude: int | None, threshold: float, limit: int
    ) -> list[tuple[Fact, float]]:
        """Active facts whose content words overlap `content`'s by Jaccard >= threshold,
        most alike first. Candidates come from the LSH band keys (similarity.py), those
        sharing the most bands first and CANDIDATES at most: a template that thousands of
        facts follow must not make one write read thousands."""
        db = self._conn()
        bag = similarity.words(content)
        keys = similarity.band_keys(bag)
        if db is None or not keys:
            return []
        cols = ", ".join("f." + c for c in FACT_FIELDS)
        with self._translated("read"):
            rows = db.execute(
                f"SELECT {cols} FROM (SELECT fact_id, count(*) AS shared FROM fact_sketch "
                f"WHERE key IN ({', '.join('?' * len(keys))}) GROUP BY fact_id "
                "ORDER BY shared DESC, fact_id LIMIT ?) c JOIN facts f ON f.id = c.fact_id "
                "WHERE f.status = 'active'",
                (*keys, CANDIDATES),
            ).fetchall()
        found = []
        for row in rows:
            if row[0] == exclude:
                continue
            score = similarity.jaccard(bag, similarity.words(row[2]))
            if score >= threshold:
                found.append((Fact(*row), score))
        found.sort(key=lambda pair: (-pair[1], pair[0].id))
        return found[:limit]

    def insert_fact_rows(
        self,
        rows: list[dict[str, object]],
        keep_ids: bool,
        seen: str | None = None,
        held: dict[int, int] | None = None,
    ) -> dict[int, int]:
        """Facts as an export or another tool holds them (every FACT_FIELDS key; `id`,
        `supersedes` and `superseded_by` in the rows' own numbering), in one transaction.
        Returns their old id -> the id stored. With `keep_ids` the ids are kept (an empty
        archive: a restore), else new ones are given and the links follow them; `held` maps
        ids of the rows' numbering that the store holds already (a merge) to the store's,
        for the links that lead to them. `seen`: a time their staleness counts from (no
        search has found them yet: hits 0). Facts and links are one transaction."""
        links = ("supersedes", "superseded_by")
        fields = [f for f in FACT_FIELDS if f != "id" and f not in links]
        normals = [similarity.normalize(str(row["content"])) for row in rows]
        active = [i for i, row in enumerate(rows) if row.get("status", "active") == "active"]
        sketches = similarity.sketches([normals[i] for i in active], normal=True)
        with self._write() as db:
            # a link may point forward (to a row not inserted yet): checked at commit
            db.execute("PRAGMA defer_foreign_keys = ON")
            if keep_ids:
                new_ids = [int(str(row["id"])) for row in rows]
            else:  # under the write lock the next ids are known
                (first,) = db.execute("SELECT coalesce(max(id), 0) + 1 FROM facts").fetchone()
                new_ids = list(range(first, first + len(rows)))
            mapping = {int(str(row["id"])): new for row, new in zip(rows, new_ids, strict=True)}
            targets = {**(held or {}), **mapping}

            def linked(row: dict[str, object], field: str) -> int | None:
                value = row.get(field)
                return None if value is None else targets.get(int(str(value)))

            db.executemany(
                f"INSERT INTO facts (id, {', '.join(fields)}, {', '.join(links)}, norm) "
                f"VALUES ({', '.join('?' * (len(fields) + 4))})",
                [
                    (new, *(row.get(f) for f in fields), *(linked(row, f) for f in links),
                     similarity.key_of_normal(normal))
                    for row, new, normal in zip(rows, new_ids, normals, strict=True)
                ],
            )
            sketch_rows = [
                (key, new_ids[i]) for i, keys in zip(active, sketches, strict=True) for key in keys
            ]
            sketch_rows.sort(key=_first)  # in key order: the b-tree fills page by page
            db.executemany(
                "INSERT OR IGNORE INTO fact_sketch (key, fact_id) VALUES (?, ?)", sketch_rows
            )
            if seen is not None:
                db.executemany(
                    "INSERT OR IGNORE INTO fact_usage (fact_id, hits, last_hit) VALUES (?, 0, ?)",
                    [(fact_id, seen) for fact_id in new_ids],
                )
        return mapping

    def fact_saying(self, content: str) -> Fact | None:
        """The active fact whose normalised text is content's, if any."""
        db = self._conn()
        if db is None:
            return None
        with self._translated("read"):
            return self._active_by_key(db, similarity.text_key(content), content)

    def exact_duplicate_facts(self) -> list[list[Fact]]:
        """Groups of active facts with the same normalised text, oldest first."""
        db = self._conn()
        if db is None:
            return []
        with self._translated("read"):
            rows = db.execute(
                f"SELECT {FACT_COLUMNS} FROM facts WHERE status = 'active' AND norm IN "
                "(SELECT norm FROM facts WHERE status = 'active' GROUP BY norm "
                "HAVING count(*) > 1) ORDER BY norm, id"
            ).fetchall()
        groups: dict[str, list[Fact]] = {}
        for row in rows:
            groups.setdefault(similarity.normalize(row[2]), []).append(Fact(*row))
        return [group for text, group in groups.items() if text and len(group) > 1]

    def sketch_pairs(self) -> list[tuple[Fact, Fact]]:
        """Pairs of active facts that share an LSH band key: near-duplicate candidates.
        A key shared by more than BUCKET facts (a template many facts follow) pairs each
        with its WINDOW next ones only, so the pairs grow with n, not n squared; the groups
        they join into (duplicates._join) still hold them all."""
        db = self._conn()
        if db is None:
            return []
        pairs: set[tuple[int, int]] = set()
        with self._translated("read"):
            # small buckets: every pair, joined in SQL (the usual case, and the fast one)
            pairs.update(
                db.execute(
                    "SELECT DISTINCT a.fact_id, b.fact_id FROM fact_sketch a "
                    "JOIN fact_sketch b ON b.key = a.key AND b.fact_id > a.fact_id "
                    "WHERE a.key IN (SELECT key FROM fact_sketch GROUP BY key "
                    "HAVING count(*) BETWEEN 2 AND ?)",
                    (BUCKET,),
                )
            )
            big = db.execute(
                "SELECT key FROM fact_sketch GROUP BY key HAVING count(*) > ?", (BUCKET,)
            ).fetchall()
            for (key,) in big:
                bucket = [i for (i,) in db.execute(
                    "SELECT fact_id FROM fact_sketch WHERE key = ? ORDER BY fact_id", (key,)
                )]
                _pair_up(bucket, pairs)
            ids = sorted({i for pair in pairs for i in pair})
            found: dict[int, Fact] = {}
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                for row in db.execute(
                    f"SELECT {FACT_COLUMNS} FROM facts WHERE status = 'active' AND id IN "
                    f"({', '.join('?' * len(part))})",
                    part,
                ):
                    found[row[0]] = Fact(*row)
        return [(found[a], found[b]) for a, b in sorted(pairs) if a in found and b in found]

    def record_hits(self, hits: dict[int, str]) -> None:
        """Facts a search returned, and when (doctor: facts never recalled). Bookkeeping,
        not memory: written without waiting for the disk (synchronous = NORMAL)."""
        if not hits:
            return
        db = self._require()
        with self._translated("write to"):
            db.execute("PRAGMA synchronous = NORMAL")
            try:
                with self._write() as tx:
                    tx.executemany(
                        "INSERT INTO fact_usage (fact_id, hits, last_hit) VALUES (?, 1, ?) "
                        "ON CONFLICT (fact_id) DO UPDATE SET hits = hits + 1, "
                        "last_hit = max(last_hit, excluded.last_hit)",
                        sorted(hits.items()),
                    )
            finally:
                db.execute("PRAGMA synchronous = FULL")

    def stale_facts(self, before: str) -> list[Fact]:
        """Active facts no search has returned since `before` (nor created since)."""
        db = self._conn()
        if db is None:
            return []
        cols = ", ".join("f." + c for c in FACT_FIELDS)
        with self._translated("read"):
            rows = db.execute(
                f"SELECT {cols} FROM facts f LEFT JOIN fact_usage u ON u.fact_id = f.id "
                "WHERE f.status = 'active' AND coalesce(u.last_hit, f.created) < ? ORDER BY f.id",
                (before,),
            ).fetchall()
        return [Fact(*row) for row in rows]

    def get_fact(self, fact_id: int) -> Fact | None:
        db = self._conn()
        if db is None:
            return None
        with self._translated("read"):
            return self._fact(db, fact_id)

    def fact_chain(self, fact_id: int) -> list[Fact]:
        db = self._conn()
        if db is None:
            return []
        with self._translated("read"):
            first = self._fact(db, fact_id)
            if first is None:
                return []
            while first.supersedes is not None:
                earlier = self._fact(db, first.supersedes)
                if earlier is None:
                    break
                first = earlier
            chain = [first]
            while chain[-1].superseded_by is not None:
                later = self._fact(db, chain[-1].superseded_by)
                if later is None:
                    break
                chain.append(later)
            return chain

    def search_facts(
        self,
        match: str,
        category: str | None,
        since: str | None,
        limit: int,
        as_of: str | None = None,
    ) -> list[tuple[Fact, float]]:
        """Active facts matching, best first; with `as_of`, the facts that held then: the
        active ones that had begun, and the superseded ones whose window covers it."""
        db = self._conn()
        if db is None:
            return []
        found = self._match(db, "facts_fts", match, category, since, limit, as_of)
        if as_of is not None:
            found += self._match(db, "facts_past_fts", match, category, since, limit, as_of)
            found.sort(key=lambda pair: -pair[1])
        return found[:limit]

    def _match(
        self,
        db: sqlite3.Connection,
        table: str,
        match: str,
        category: str | None,
        since: str | None,
        limit: int,
        as_of: str | None,
    ) -> list[tuple[Fact, float]]:
        where, params = [f"{table} MATCH ?"], [match]
        if category is not None:
            where.append("f.category = ?")
            params.append(category)
        if since is not None:
            where.append("f.created >= ?")
            params.append(since)
        if as_of is not None:
            where.append("coalesce(f.valid_from, f.created) <= ?")
            where.append("(f.valid_to IS NULL OR f.valid_to > ?)")
            params += [as_of, as_of]
        sql = (
            f"SELECT {', '.join('f.' + c for c in FACT_FIELDS)}, bm25({table}) "
            f"FROM {table} JOIN facts f ON f.id = {table}.rowid "
            f"WHERE {' AND '.join(where)} ORDER BY bm25({table}) LIMIT ?"
        )
        with self._translated("search"):
            rows = db.execute(sql, (*params, limit)).fetchall()
        return [(Fact(*row[:-1]), -float(row[-1])) for row in rows]

    def facts_by_id(self, ids: list[int]) -> dict[int, Fact]:
        db = self._conn()
        if db is None or not ids:
            return {}
        with self._translated("read"):
            rows = db.execute(
                f"SELECT {FACT_COLUMNS} FROM facts WHERE id IN ({', '.join('?' * len(ids))})", ids
            ).fetchall()
        return {row[0]: Fact(*row) for row in rows}

    def count_facts(self) -> dict[str, int]:
        db = self._conn()
        if db is None:
            return {}
        with self._translated("read"):
            rows = db.execute("SELECT status, count(*) FROM facts GROUP BY status").fetchall()
        return {status: n for status, n in rows}

    def _insert_fact(
        self,
        db: sqlite3.Connection,
        category: str,
        content: str,
        now: str,
        by: Provenance,
        supersedes: int | None,
        valid_from: str,
        key: int,
        sketch: list[int] | None = None,
    ) -> int:
        cursor = db.execute(
            "INSERT INTO facts (category, content, created, updated, supersedes, session_id, "
            "surface, agent, valid_from, norm) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                category,
                content,
                now,
                now,
                supersedes,
                by.session_id,
                by.surface,
                by.agent,
                valid_from,
                key,
            ),
        )
        assert cursor.lastrowid is not None
        if sketch is None:
            sketch = similarity.band_keys(similarity.words(content))
        self._sketch(db, cursor.lastrowid, sketch)
        return cursor.lastrowid

    def _sketch(self, db: sqlite3.Connection, fact_id: int, keys: list[int]) -> None:
        if keys:
            db.executemany(
                "INSERT OR IGNORE INTO fact_sketch (key, fact_id) VALUES (?, ?)",
                [(key, fact_id) for key in keys],
            )

    def _unsketch(self, db: sqlite3.Connection, fact: Fact) -> None:
        """A fact that left the active set leaves the near-duplicate candidates too."""
        keys = similarity.band_keys(similarity.words(fact.content))
        db.executemany(
            "DELETE FROM fact_sketch WHERE key = ? AND fact_id = ?", [(k, fact.id) for k in keys]
        )

    def _active_by_key(self, db: sqlite3.Connection, key: int, content: str) -> Fact | None:
        """The active fact whose normalised text is content's (the key narrows, the text
        decides: a 64-bit collision is not a duplicate)."""
        wanted = similarity.normalize(content)
        if not wanted:
            return None  # nothing but punctuation: no text to be a duplicate of
        for row in db.execute(
            f"SELECT {FACT_COLUMNS} FROM facts WHERE norm = ? AND status = 'active' ORDER BY id",
            (key,),
        ):
            if similarity.normalize(row[2]) == wanted:
                return Fact(*row)
        return None

    def _fact(self, db: sqlite3.Connection, fact_id: int) -> Fact | None:
        row = db.execute(f"SELECT {FACT_COLUMNS} FROM facts WHERE id = ?", (fact_id,)).fetchone()
        return None if row is None else Fact(*row)

    def _active_fact(self, db: sqlite3.Connection, fact_id: int, action: str) -> Fact:
        fact = self._fact(db, fact_id)
        if fact is None:
            raise NotFoundError(f"no fact with id {fact_id}: search for it with `memdir search`")
        if fact.status == "superseded":
            raise ConflictError(
                f"fact {fact_id} was already superseded by fact {fact.superseded_by}; "
                f"{action} {fact.superseded_by} instead"
            )
        if fact.status == "removed":
            raise ConflictError(
                f"fact {fact_id} was removed on {fact.updated}; nothing to {action}"
            )
        return fact

    # -- sessions ----------------------------------------------------------------------

    def start_session(
        self, session_id: str, surface: str, parent_id: str | None, now: str
    ) -> Session:
        with self._write() as db:
            try:
                db.execute(
                    "INSERT INTO sessions (id, surface, parent_id, started) VALUES (?, ?, ?, ?)",
                    (session_id, surface, parent_id, now),
                )
            except sqlite3.IntegrityError as exc:
                raise ConflictError(f"a session with id {session_id!r} exists already") from exc
        return Session(session_id, surface, parent_id, now, None, {})

    def get_session(self, session_id: str) -> Session | None:
        db = self._conn()
        if db is None:
            return None
        with self._translated("read"):
            return self._session(db, session_id)

    def end_session(self, session_id: str, now: str) -> Session:
        with self._write() as db:
            db.execute("UPDATE sessions SET ended = ? WHERE id = ?", (now, session_id))
            session = self._session(db, session_id)
        assert session is not None
        return session

    def list_sessions(self, limit: int) -> list[Session]:
        db = self._conn()
        if db is None:
            return []
        with self._translated("read"):
            ids = db.execute(
                "SELECT id FROM sessions WHERE parent_id IS NULL ORDER BY started DESC, id LIMIT ?",
                (limit,),
            ).fetchall()
            return [s for (sid,) in ids if (s := self._session(db, sid)) is not None]

    def count_write(self, session_id: str, kind: str) -> None:
        with self._write() as db:
            db.execute(
                "INSERT INTO session_writes (session_id, kind, n) VALUES (?, ?, 1) "
                "ON CONFLICT (session_id, kind) DO UPDATE SET n = n + 1",
                (session_id, kind),
            )

    def _session(self, db: sqlite3.Connection, session_id: str) -> Session | None:
        row = db.execute(
            "SELECT id, surface, parent_id, started, ended FROM sessions WHERE id = ?",
            (session_id,),
        ).fetchone()
        if row is None:
            return None
        # Facts carry their session (F5), so their count is derived; file writes are tallied.
        counts = dict(
            db.execute("SELECT kind, n FROM session_writes WHERE session_id = ?", (session_id,))
        )
        (facts,) = db.execute(
            "SELECT count(*) FROM facts WHERE session_id = ?", (session_id,)
        ).fetchone()
        if facts:
            counts["facts"] = facts
        sid, surface, parent_id, started, ended = row
        return Session(sid, surface, parent_id, started, ended, counts)

    # -- tasks (T3) ----------------------------------------------------------------------

    def start_task(self, task_id: str, parent_id: str | None, now: str) -> Task:
        """Register a running task; starting it again while it runs is a no-op (retries)."""
        with self._write() as db:
            existing = self._task(db, task_id)
            if existing is not None:
                if existing.state != "running":
                    raise ConflictError(
                        f"task {task_id} already ended ({existing.state} at {existing.ended}); "
                        "give the new task a new id"
                    )
                if existing.parent_id != parent_id:
                    raise ConflictError(
                        f"task {task_id} is running already with parent {existing.parent_id}"
                    )
                return existing
            if parent_id is not None and self._task(db, parent_id) is None:
                raise NotFoundError(
                    f"unknown parent task {parent_id!r}: start it first with `memdir task start`"
                )
            db.execute(
                "INSERT INTO tasks (id, parent_id, state, started) VALUES (?, ?, 'running', ?)",
                (task_id, parent_id, now),
            )
        return Task(task_id, parent_id, "running", now, None)

    def end_task(self, task_id: str, state: str, now: str) -> Task:
        with self._write() as db:
            task = self._task(db, task_id)
            if task is None:
                raise NotFoundError(f"unknown task {task_id!r}: see `memdir task start`")
            if task.state != "running":
                raise ConflictError(f"task {task_id} already ended ({task.state} at {task.ended})")
            db.execute("UPDATE tasks SET state = ?, ended = ? WHERE id = ?", (state, now, task_id))
        return task._replace(state=state, ended=now)

    def get_task(self, task_id: str) -> Task | None:
        db = self._conn()
        if db is None:
            return None
        with self._translated("read"):
            return self._task(db, task_id)

    def all_tasks(self) -> list[Task]:
        db = self._conn()
        if db is None:
            return []
        with self._translated("read"):
            rows = db.execute("SELECT id, parent_id, state, started, ended FROM tasks").fetchall()
        return [Task(*row) for row in rows]

    def _task(self, db: sqlite3.Connection, task_id: str) -> Task | None:
        row = db.execute(
            "SELECT id, parent_id, state, started, ended FROM tasks WHERE id = ?", (task_id,)
        ).fetchone()
        return None if row is None else Task(*row)

    # -- the global entry cache (G4) -----------------------------------------------------

    def entry_cache(self, with_meta: bool = True) -> dict[str, CachedEntry]:
        """name -> (mtime_ns, size, description, updated, error, metadata JSON, body key,
        band keys) of each global entry file when last read; without `with_meta` the JSON
        is left out ("")."""
        db = self._conn()
        if db is None:
            return {}
        meta = "meta" if with_meta else "''"
        with self._translated("read"):
            rows = db.execute(
                f"SELECT name, mtime_ns, size, description, updated, error, {meta}, body_key, "
                "sketch FROM entry_cache"
            ).fetchall()
        return {row[0]: row[1:] for row in rows}

    def update_entry_cache(self, changed: dict[str, CachedEntry], gone: list[str]) -> None:
        if self._conn() is None:
            return
        with self._write() as db:
            db.executemany("DELETE FROM entry_cache WHERE name = ?", [(n,) for n in gone])
            db.executemany(
                "INSERT OR REPLACE INTO entry_cache "
                "(name, mtime_ns, size, description, updated, error, meta, body_key, sketch) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(name, *row) for name, row in changed.items()],
            )

    # -- procedures' fingerprints (the duplicate guard) ---------------------------------------

    def procedure_prints(self) -> dict[str, tuple[int, int, int | None, str]]:
        """name -> (mtime_ns, size, body key, band keys) of each procedure when last read."""
        db = self._conn()
        if db is None:
            return {}
        with self._translated("read"):
            rows = db.execute(
                "SELECT name, mtime_ns, size, body_key, sketch FROM procedure_prints"
            ).fetchall()
        return {row[0]: row[1:] for row in rows}

    def update_procedure_prints(
        self, changed: dict[str, tuple[int, int, int | None, str]], gone: list[str]
    ) -> None:
        if self._conn() is None:
            return
        with self._write() as db:
            db.executemany("DELETE FROM procedure_prints WHERE name = ?", [(n,) for n in gone])
            db.executemany(
                "INSERT OR REPLACE INTO procedure_prints VALUES (?, ?, ?, ?, ?)",
                [(name, *row) for name, row in changed.items()],
            )

    # -- small named values (the distillation watermark) ---------------------------------

    def get_value(self, key: str) -> str | None:
        db = self._conn()
        if db is None:
            return None
        with self._translated("read"):
            row = db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_value(self, key: str, value: str) -> None:
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", (key, value))

    def size_of_facts(self) -> dict[str, tuple[int, int]]:
        """status -> (count, characters of content)."""
        db = self._conn()
        if db is None:
            return {}
        with self._translated("read"):
            rows = db.execute(
                "SELECT status, count(*), coalesce(sum(length(content)), 0) FROM facts "
                "GROUP BY status"
            ).fetchall()
        return {status: (n, chars) for status, n, chars in rows}
