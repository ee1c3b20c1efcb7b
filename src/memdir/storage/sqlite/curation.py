"""The duplicate guard's rows (N1): each active fact's key of its normalised text
(`facts.norm`) and LSH band keys (`fact_sketch`), the procedures' fingerprints, the facts
searches found (`fact_usage`), and facts brought in whole from an archive or another tool.
Part of SQLiteStore."""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator

from ...errors import MemdirError
from ...lazy import lazy
from ...models import Fact
from ..rows import FACT_FIELDS, ScoredFact
from .connection import Connection
from .index import FACT_COLUMNS

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

    from ... import similarity
    from ..rows_cold import DatabaseHealth, FactPair, ProcedurePrint
else:
    similarity = lazy("memdir.similarity")  # writes and the duplicate guard only
    sqlite3 = lazy("sqlite3")  # imported when the database is first opened

# Beside memory.db: the hits searches found and left for a writer to record (defer_hits).
HITS_SUFFIX = "-hits"
# A journal past this size is folded by the search that grew it, if the database is free at
# that instant: a store that is only ever searched would otherwise grow it without end.
HITS_JOURNAL_MAX = 1 << 20
F_COLUMNS = ", ".join("f." + c for c in FACT_FIELDS)  # a fact's columns, table aliased f
SKETCH_ONE_BY_ONE = 8  # facts whose band keys go in row by row (a write of one, a few)
# An import of more new facts than this leaves their band keys for later (fact_sketch_pending):
# computing them (~70 us a fact without numpy) and sorting ~16 rows a fact into fact_sketch
# cost more than the import's own insert. Every write that reads or changes fact_sketch
# indexes what waits first (settle_sketches), and the guard's worker does it in the
# background (guard_worker.py); until then a read computes the waiting keys itself.
SKETCH_LATER = 512
SETTLE_PART = 4096  # waiting facts whose keys are computed and inserted at a time
CANDIDATES = 64  # facts a write compares itself with at most (the most alike by LSH)
BUCKET = 32  # a band key shared by more facts than this pairs each with WINDOW others
WINDOW = 8
_TAKES = itertools.count()
_SIGNED = 1 << 63  # a band key (signed 64-bit) + this: unsigned, to pack with a fact id
_ID = (1 << 64) - 1  # the fact id's bits of a packed (key, fact id)


def _append(path: str, text: str) -> int:
    """One write at the end of `path` (O_APPEND: appends of other processes interleave
    between lines, never inside one); never through a symlink. Returns the size after it."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    try:
        os.write(fd, text.encode("utf-8"))
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def _claim(journal: str, taken: str) -> list[str]:
    """The journal, renamed to `taken` (appends made meanwhile start a new one), and the
    journals a process took and died before folding in (`journal.<pid>`, renamed to
    `taken.N`: only one claimant wins each rename). A claimant that dies leaves its claims
    under its own pid, for the next one."""
    claimed = []
    with contextlib.suppress(OSError):
        os.rename(journal, taken)
        claimed.append(taken)
    folder, prefix = os.path.split(journal)
    try:
        names = os.listdir(folder or ".")
    except OSError:
        return claimed
    for name in names:
        owner = name[len(prefix) + 1 :].partition(".")[0]
        if not (name.startswith(prefix + ".") and owner.isdigit()) or _alive(int(owner)):
            continue
        mine = f"{taken}.{len(claimed)}"
        with contextlib.suppress(OSError):
            os.rename(os.path.join(folder, name), mine)
            claimed.append(mine)
    return claimed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process: alive
    return True


def _journal_lines(text: str) -> Iterator[tuple[int, str]]:
    """(fact id, when) of each whole line of a hits journal; a torn or foreign line is
    skipped."""
    for line in text.split("\n")[:-1]:  # the last piece lacks its newline: torn, or empty
        fact_id, _, when = line.partition(" ")
        if fact_id.isdigit() and when and " " not in when:
            yield int(fact_id), when


def _pair_up(bucket: list[int], pairs: set[tuple[int, int]]) -> None:
    """The candidate pairs of one band key's facts (ids ascending): all of them in a small
    bucket, each with its WINDOW next in a big one."""
    width = len(bucket) if len(bucket) <= BUCKET else WINDOW + 1
    for i, a in enumerate(bucket):
        for b in bucket[i + 1 : i + width]:
            pairs.add((a, b))


def _runs(ids: list[int]) -> Iterator[tuple[int, int]]:
    """(first, last) of each run of consecutive ids in `ids` (ascending)."""
    start = previous = None
    for fact_id in ids:
        if previous is None or fact_id != previous + 1:
            if start is not None and previous is not None:
                yield start, previous
            start = fact_id
        previous = fact_id
    if start is not None and previous is not None:
        yield start, previous


class CurationRows(Connection):
    def similar_facts(
        self, content: str, exclude: int | None, threshold: float, limit: int
    ) -> list[ScoredFact]:
        """Active facts whose content words overlap `content`'s by Jaccard >= threshold,
        most alike first. Candidates come from the LSH band keys (similarity.py), those
        sharing the most bands first and CANDIDATES at most: a template that thousands of
        facts follow must not make one write read thousands."""
        db = self._conn()
        bag = similarity.words(content)
        keys = similarity.band_keys(bag)
        if db is None or not keys:
            return []
        with self._translated("read"):
            rows = db.execute(
                f"SELECT {F_COLUMNS} FROM (SELECT fact_id, count(*) AS shared FROM fact_sketch "
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
                found.append(ScoredFact(Fact(*row), score))
        found.sort(key=lambda pair: (-pair.score, pair.fact.id))
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
        later = len(active) > SKETCH_LATER  # their band keys: indexed after (SKETCH_LATER)
        sketches = [] if later else similarity.sketches([normals[i] for i in active], normal=True)
        with self._write() as db:
            # a link may point forward (to a row not inserted yet): checked at commit
            db.execute("PRAGMA defer_foreign_keys = ON")
            if keep_ids:
                new_ids = [int(str(row["id"])) for row in rows]
            else:
                first = self._next_id(db)
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
                    (
                        new,
                        *(row.get(f) for f in fields),
                        *(linked(row, f) for f in links),
                        similarity.key_of_normal(normal),
                    )
                    for row, new, normal in zip(rows, new_ids, normals, strict=True)
                ],
            )
            self._settle(db)
            if later:  # one range a run of consecutive ids (a restore keeps any ids)
                for first, last in _runs(sorted(new_ids[i] for i in active)):
                    self._wait_for_keys(db, first, last)
            else:
                self._sketch_many(
                    db, {new_ids[i]: keys for i, keys in zip(active, sketches, strict=True) if keys}
                )
            if seen is not None:
                db.executemany(
                    "INSERT OR IGNORE INTO fact_usage (fact_id, hits, last_hit) VALUES (?, 0, ?)",
                    [(fact_id, seen) for fact_id in new_ids],
                )
        return mapping

    def fact_saying(self, content: str) -> Fact | None:
        """The active fact whose normalised text (similarity.normalize) is content's."""
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

    def sketch_pairs(self) -> list[FactPair]:
        """Pairs of active facts that share an LSH band key: near-duplicate candidates.
        A key shared by more than BUCKET facts (a template many facts follow) pairs each
        with its WINDOW next ones only, so the pairs grow with n, not n squared; the groups
        they join into (duplicates._join) still hold them all."""
        db = self._conn()
        if db is None:
            return []
        pairs: set[tuple[int, int]] = set()
        with self._translated("read"):
            # one read transaction: the guard's worker committing a part between the reads
            # of fact_sketch and of what waits would hide that part from both
            opened = not db.in_transaction  # (or the caller's snapshot holds one)
            if opened:
                db.execute("BEGIN")
            try:
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
                    bucket = [
                        i
                        for (i,) in db.execute(
                            "SELECT fact_id FROM fact_sketch WHERE key = ? ORDER BY fact_id", (key,)
                        )
                    ]
                    _pair_up(bucket, pairs)
                self._pair_waiting(db, pairs)
                found = self._facts_in(db, sorted({i for pair in pairs for i in pair}))
            finally:
                if opened:
                    db.execute("COMMIT")
        found = {i: f for i, f in found.items() if f.status == "active"}
        from ..rows_cold import FactPair

        return [FactPair(found[a], found[b]) for a, b in sorted(pairs) if a in found and b in found]

    def inspect(self) -> DatabaseHealth:
        """integrity_check rather than quick_check: it also checks that every index matches
        its table, and at 10k facts it costs the same (~15 ms). At most 20 problems."""
        from ..rows_cold import DatabaseHealth

        db = self._conn()
        assert db is not None, "inspect() only a database that exists"
        with self._translated("check"):
            problems = [str(row[0]) for row in db.execute("PRAGMA integrity_check(20)")]
            schema, page_size, pages, free = (
                int(db.execute(f"PRAGMA {pragma}").fetchone()[0])
                for pragma in ("user_version", "page_size", "page_count", "freelist_count")
            )
        from .migrations import MIGRATIONS

        latest = MIGRATIONS[-1][0]
        return DatabaseHealth(problems, schema, latest, pages * page_size, free * page_size)

    def defer_hits(self, hits: dict[int, str]) -> None:
        """Facts a search returned, and when, noted for later: one append to a journal
        beside the database (HITS_SUFFIX), with no transaction, lock, wait or sync, so a
        read path never writes the database. record_hits folds the journal in;
        stale_facts reads it meanwhile. Bookkeeping: a journal that cannot be written is
        skipped."""
        if not hits or self.read_only:
            return
        lines = "".join(f"{fact_id} {when}\n" for fact_id, when in sorted(hits.items()))
        try:
            size = _append(self.path + HITS_SUFFIX, lines)
        except OSError:
            return
        if size > HITS_JOURNAL_MAX:
            self._fold_without_waiting()

    def _fold_without_waiting(self) -> None:
        """record_hits({}) if the database takes a write at once; else the next writer
        folds the journal (a read path never waits behind another process)."""
        db = self._conn()
        if db is None:
            return
        db.execute("PRAGMA busy_timeout = 0")
        try:
            with contextlib.suppress(MemdirError):
                self.record_hits({})
        finally:
            db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")

    def record_hits(self, hits: dict[int, str]) -> None:
        """Facts a search returned, and when (doctor: facts never recalled), with what the
        journal of deferred hits holds. Bookkeeping, not memory: written without waiting
        for the disk (synchronous = NORMAL). The journal is taken by a rename, so appends
        made meanwhile start a new one; when the write fails its lines go back."""
        journal = self.path + HITS_SUFFIX
        # pid and a count: two threads of one server fold at once without meeting
        claimed = _claim(journal, f"{journal}.{os.getpid()}.{next(_TAKES)}")
        text = ""
        for path in claimed:
            with contextlib.suppress(OSError, UnicodeDecodeError):
                with open(path, encoding="utf-8") as handle:
                    text += handle.read()
        counts = {fact_id: (1, when) for fact_id, when in hits.items()}
        for fact_id, when in _journal_lines(text):
            count, last = counts.get(fact_id, (0, when))
            counts[fact_id] = (count + 1, max(last, when))
        try:
            if counts:
                self._write_hits(counts)
        except BaseException:
            if text:
                with contextlib.suppress(OSError):
                    _append(journal, text)
            raise
        finally:
            for path in claimed:
                with contextlib.suppress(OSError):
                    os.unlink(path)

    def _write_hits(self, counts: dict[int, tuple[int, str]]) -> None:
        db = self._conn()
        if db is None:
            return
        with self._translated("write to"):
            db.execute("PRAGMA synchronous = NORMAL")
            try:
                with self._write() as tx:
                    tx.executemany(
                        "INSERT INTO fact_usage (fact_id, hits, last_hit) "
                        "SELECT ?1, ?2, ?3 WHERE EXISTS (SELECT 1 FROM facts WHERE id = ?1) "
                        "ON CONFLICT (fact_id) DO UPDATE SET hits = hits + excluded.hits, "
                        "last_hit = max(last_hit, excluded.last_hit)",
                        [(i, n, when) for i, (n, when) in sorted(counts.items())],
                    )
            finally:
                db.execute("PRAGMA synchronous = FULL")

    def stale_facts(self, before: str) -> list[Fact]:
        """Active facts no search has returned since `before` (nor created since), the
        journal of deferred hits included."""
        db = self._conn()
        if db is None:
            return []
        with self._translated("read"):
            rows = db.execute(
                f"SELECT {F_COLUMNS} FROM facts f LEFT JOIN fact_usage u ON u.fact_id = f.id "
                "WHERE f.status = 'active' AND coalesce(u.last_hit, f.created) < ? ORDER BY f.id",
                (before,),
            ).fetchall()
        recent = set()
        with contextlib.suppress(OSError, UnicodeDecodeError):
            with open(self.path + HITS_SUFFIX, encoding="utf-8") as handle:
                recent = {i for i, when in _journal_lines(handle.read()) if when >= before}
        return [Fact(*row) for row in rows if row[0] not in recent]

    def procedure_prints(self) -> dict[str, ProcedurePrint]:
        """name -> (mtime_ns, size, body key, band keys) of each procedure when last read."""
        from ..rows_cold import ProcedurePrint

        db = self._conn()
        if db is None:
            return {}
        with self._translated("read"):
            rows = db.execute(
                "SELECT name, mtime_ns, size, body_key, sketch FROM procedure_prints"
            ).fetchall()
        return {row[0]: ProcedurePrint(*row[1:]) for row in rows}

    def update_procedure_prints(self, changed: dict[str, ProcedurePrint], gone: list[str]) -> None:
        if self._conn() is None:
            return
        with self._write() as db:
            db.executemany("DELETE FROM procedure_prints WHERE name = ?", [(n,) for n in gone])
            db.executemany(
                "INSERT OR REPLACE INTO procedure_prints VALUES (?, ?, ?, ?, ?)",
                [(name, *row) for name, row in changed.items()],
            )

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

    def _sketch_many(self, db: sqlite3.Connection, sketched: dict[int, list[int]]) -> None:
        """The band keys of each fact (fact id -> its keys) into the near-duplicate
        candidates, in key order: the b-tree then fills page by page (~2x faster than in
        fact order). Many facts (an import) go in as one statement over one JSON document,
        so SQLite sorts and inserts the ~16 rows a fact in C: a row at a time from Python
        cost more than the fact's own insert."""
        if len(sketched) > SKETCH_ONE_BY_ONE:
            import json  # a bulk write only: not on the CLI's cold path

            try:
                db.execute(
                    "INSERT OR IGNORE INTO fact_sketch (key, fact_id) "
                    "SELECT k.value, CAST(f.key AS INTEGER) "
                    "FROM json_each(?) f, json_each(f.value) k ORDER BY 1, 2",
                    (json.dumps(sketched),),
                )
                return
            except sqlite3.OperationalError as exc:
                if "json_each" not in str(exc):
                    raise  # else an SQLite built without JSON: the rows one by one
        rows = sorted((key, fact_id) for fact_id, keys in sketched.items() for key in keys)
        db.executemany("INSERT OR IGNORE INTO fact_sketch (key, fact_id) VALUES (?, ?)", rows)

    def _sketch_run(self, db: sqlite3.Connection, first: int, flat: list[int | None]) -> None:
        """The band keys of the facts `first`, `first` + 1, ... (an import's new facts):
        BANDS a fact, one flat list, None for a fact without words. One flat JSON array
        (the fact is its position) costs less to write and to read than a document of
        lists keyed by fact id."""
        bands = similarity.BANDS
        if len(flat) <= bands * SKETCH_ONE_BY_ONE:
            keyed: dict[int, list[int]] = {}
            for start in range(0, len(flat), bands):
                keys = [key for key in flat[start : start + bands] if key is not None]
                if keys:
                    keyed[first + start // bands] = keys
            self._sketch_many(db, keyed)
            return
        import json  # a bulk write only: not on the CLI's cold path

        try:
            db.execute(
                "INSERT OR IGNORE INTO fact_sketch (key, fact_id) "
                "SELECT value, ? + key / ? FROM json_each(?) WHERE value IS NOT NULL "
                "ORDER BY 1, 2",
                (first, bands, json.dumps(flat)),
            )
        except sqlite3.OperationalError as exc:
            if "json_each" not in str(exc):
                raise  # else an SQLite built without JSON: the rows one by one
            rows = sorted(
                (key, first + i // bands) for i, key in enumerate(flat) if key is not None
            )
            db.executemany("INSERT OR IGNORE INTO fact_sketch (key, fact_id) VALUES (?, ?)", rows)

    def _pair_waiting(self, db: sqlite3.Connection, pairs: set[tuple[int, int]]) -> None:
        """The candidate pairs of the facts whose band keys wait (a read, so nothing is
        written: doctor looks without writing): their keys computed here, each key's
        bucket of waiting and indexed facts paired as sketch_pairs pairs the indexed. The
        (key, fact) pairs are packed one int each and sorted, ~60 bytes a key: a dict of
        buckets cost three times that."""
        packed: list[int] = []
        for first, last in self._waiting(db):
            for start in range(first, last + 1, SETTLE_PART):
                for fact_id, keys in self._keys_of_range(
                    db, start, min(last, start + SETTLE_PART - 1)
                ):
                    packed += [((key + _SIGNED) << 64) | fact_id for key in keys]
        if not packed:
            return
        keys = list(dict.fromkeys(p >> 64 for p in packed))
        for start in range(0, len(keys), 500):
            part = [key - _SIGNED for key in keys[start : start + 500]]
            packed += [
                ((key + _SIGNED) << 64) | fact_id
                for key, fact_id in db.execute(
                    "SELECT key, fact_id FROM fact_sketch "
                    f"WHERE key IN ({', '.join('?' * len(part))})",
                    part,
                )
            ]
        packed.sort()
        bucket: list[int] = []
        current = None
        for value in packed:
            if value >> 64 != current:
                if len(bucket) > 1:
                    _pair_up(bucket, pairs)
                bucket, current = [], value >> 64
            if not bucket or bucket[-1] != value & _ID:  # a key twice in one fact
                bucket.append(value & _ID)
        if len(bucket) > 1:
            _pair_up(bucket, pairs)

    def _waiting(self, db: sqlite3.Connection) -> list[tuple[int, int]]:
        """The id ranges (first, last) of imported facts whose band keys wait; none in a
        store of an older schema (a look does not migrate)."""
        try:
            return db.execute(
                "SELECT first, last FROM fact_sketch_pending ORDER BY first"
            ).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            raise

    def _keys_of_range(
        self, db: sqlite3.Connection, first: int, last: int
    ) -> list[tuple[int, list[int]]]:
        """(id, band keys) of the active facts first..last that have words."""
        rows = db.execute(
            "SELECT id, content FROM facts WHERE id BETWEEN ? AND ? AND status = 'active' "
            "ORDER BY id",
            (first, last),
        ).fetchall()
        sketches = similarity.sketches([content for _, content in rows])
        return [(row[0], keys) for row, keys in zip(rows, sketches, strict=True) if keys]

    def _wait_for_keys(self, db: sqlite3.Connection, first: int, last: int) -> None:
        """Facts first..last (an import's new ones) get their band keys later."""
        if first <= last:
            db.execute("INSERT INTO fact_sketch_pending (first, last) VALUES (?, ?)", (first, last))

    def _settle(self, db: sqlite3.Connection, limit: int | None = None) -> int:
        """The band keys of up to `limit` waiting facts (all: None) into fact_sketch, in
        parts of SETTLE_PART, inside the caller's write; the facts still waiting after."""
        done = 0
        for first, last in self._waiting(db):
            while first <= last and (limit is None or done < limit):
                take = SETTLE_PART if limit is None else min(SETTLE_PART, limit - done)
                upto = min(last, first + take - 1)
                self._sketch_many(db, dict(self._keys_of_range(db, first, upto)))
                done += upto - first + 1
                first = upto + 1
            if first > last:
                db.execute("DELETE FROM fact_sketch_pending WHERE last = ?", (last,))
            else:
                db.execute("UPDATE fact_sketch_pending SET first = ? WHERE last = ?", (first, last))
                break
        return sum(last - first + 1 for first, last in self._waiting(db))

    def settle_sketches(self, limit: int) -> int:
        """Index the band keys of up to `limit` facts of bulk imports that wait (one
        write); the count still waiting after. 0 at once on a store with none."""
        db = self._conn()
        if db is None:
            return 0
        with self._translated("read"):
            waiting = self._waiting(db)
        if not waiting or limit <= 0:
            return sum(last - first + 1 for first, last in waiting)
        with self._write() as db:
            return self._settle(db, limit)

    def _next_id(self, db: sqlite3.Connection) -> int:
        """The id the next fact gets: under the write lock, ids of a batch are known in
        advance, so it goes in with one executemany."""
        (next_id,) = db.execute("SELECT coalesce(max(id), 0) + 1 FROM facts").fetchone()
        return int(next_id)

    def _facts_in(self, db: sqlite3.Connection, ids: list[int]) -> dict[int, Fact]:
        """id -> fact of these ids, 500 a query (SQLite's bound on parameters)."""
        found: dict[int, Fact] = {}
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            for row in db.execute(
                f"SELECT {FACT_COLUMNS} FROM facts WHERE id IN ({', '.join('?' * len(part))})",
                part,
            ):
                found[row[0]] = Fact(*row)
        return found

    def _unsketch(self, db: sqlite3.Connection, fact: Fact) -> None:
        """A fact that left the active set leaves the near-duplicate candidates too (what
        waits is indexed first, so nothing of it is indexed after it left)."""
        self._settle(db)
        keys = similarity.band_keys(similarity.words(fact.content))
        db.executemany(
            "DELETE FROM fact_sketch WHERE key = ? AND fact_id = ?", [(k, fact.id) for k in keys]
        )

    def _active_by_key(self, db: sqlite3.Connection, key: int, content: str) -> Fact | None:
        """The active fact whose normalised text is content's (the key narrows, the text
        decides: a 64-bit collision is not a duplicate)."""
        wanted = similarity.normalize(content)
        if not wanted:
            return None  # nothing but spacing: no text to be a duplicate of
        for row in db.execute(
            f"SELECT {FACT_COLUMNS} FROM facts WHERE norm = ? AND status = 'active' ORDER BY id",
            (key,),
        ):
            if similarity.normalize(row[2]) == wanted:
                return Fact(*row)
        return None
