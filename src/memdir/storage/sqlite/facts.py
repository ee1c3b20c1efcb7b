"""Facts (F1-F5): add, supersede, remove, read and search them, in the transactions that
keep the duplicate guard's rows (curation.py) in step; sessions (U1-U4), the task
registry (T3), the global entry cache (G4) and small named values (the distillation
watermark)."""

from __future__ import annotations

from ... import advice
from ...errors import ConflictError, NotFoundError
from ...lazy import lazy
from ...models import Fact, Provenance, Session, Task
from .. import ahead, bulk, fact_rules
from ..rows import FORK_POINTS, CachedEntry, ScoredFact, history, successor_ids
from . import bounded
from .curation import F_COLUMNS, SKETCH_LATER, SKETCH_ONE_BY_ONE, CurationRows
from .index import FACT_COLUMNS, or_words, to_fts5

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Sequence

    from ... import similarity
    from ..rows import Node
    from ..rows_cold import FactSize, NewFact, Superseded
else:
    similarity = lazy("memdir.similarity")  # writes and the duplicate guard only
    sqlite3 = lazy("sqlite3")  # imported when the database is first opened (~2 ms)


class FactRows(CurationRows):
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

    def add_facts(
        self,
        rows: list[NewFact],
        now: str,
        by: Provenance,
        check: Callable[[Sequence[NewFact]], None] | None = None,
    ) -> list[int]:
        """Bulk import: the id of each row, an exact duplicate's being the fact it repeats.
        `check(part)` raises to refuse the import (a secret): run on each part before it
        is written, in order, and nothing is written if it raises. The Python work of a
        part (check, normal forms, sketches) runs one part ahead of its insert (ahead.py).
        The band keys of more than SKETCH_LATER rows are left for later (curation.py)."""
        later = len(rows) > SKETCH_LATER
        sketch = _no_sketches if later else similarity.sketcher(len(rows))

        def prepare(
            part: Sequence[NewFact],
        ) -> tuple[Sequence[NewFact], list[str], list[int], list[list[int]]]:
            if check is not None:
                check(part)
            normals = [similarity.normalize(text) for _, text in part]
            return part, normals, list(map(similarity.key_of_normal, normals)), sketch(normals)

        ids: list[int] = []
        unsketched = [None] * similarity.BANDS  # a text without words
        with self._write() as db:
            if not later:
                self._settle(db)
            next_id = start = self._next_id(db)
            for part, normals, keys, sketches in ahead.ahead(list(ahead.parts(rows)), prepare):
                known = self._active_keys(db, keys)
                first = next_id
                numbered, new, next_id = bulk.number_new(
                    part, normals, keys, sketches, known, next_id
                )
                ids += numbered
                self._insert_facts(db, [row[:4] for row in new], now, by)
                if not later:
                    flat: list[int | None] = []  # the new facts' band keys, BANDS a fact
                    for *_, keys_of in new:
                        flat += keys_of or unsketched
                    self._sketch_run(db, first, flat)
            if later:
                self._wait_for_keys(db, start, next_id - 1)
        return ids

    def _insert_facts(
        self, db: sqlite3.Connection, rows: list[tuple[object, ...]], now: str, by: Provenance
    ) -> None:
        """New active facts, (id, category, content, norm) each, as one statement over one
        JSON array: the whole insert runs in SQLite without the GIL (so ahead.py's thread
        works beside it) and at ~2.5x the rate of executemany, which binds row by row."""
        shared = (now, now, by.session_id, by.surface, by.agent, now)
        if len(rows) > SKETCH_ONE_BY_ONE:
            import json  # a bulk write only: not on the CLI's cold path

            try:
                db.execute(
                    "INSERT INTO facts (id, category, content, norm, created, updated, "
                    "session_id, surface, agent, valid_from) SELECT json_extract(value, '$[0]'), "
                    "json_extract(value, '$[1]'), json_extract(value, '$[2]'), "
                    "json_extract(value, '$[3]'), ?, ?, ?, ?, ?, ? FROM json_each(?)",
                    (*shared, json.dumps(rows, ensure_ascii=False)),
                )
                return
            except sqlite3.OperationalError as exc:
                if "json_each" not in str(exc) and "json_extract" not in str(exc):
                    raise  # else an SQLite built without JSON: the rows one by one
        db.executemany(
            "INSERT INTO facts (id, category, content, norm, created, updated, session_id, "
            "surface, agent, valid_from) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(*row, *shared) for row in rows],
        )

    def supersede_fact(
        self,
        old_id: int,
        category: str | None,
        content: str,
        now: str,
        by: Provenance,
        valid_from: str | None = None,
    ) -> Superseded:
        key = similarity.text_key(content)
        with self._write() as db:
            old = self._supersedable(db, old_id)
            start = valid_from or now

            def end(fact: Fact, by_id: int) -> None:
                db.execute(
                    "UPDATE facts SET status = 'superseded', superseded_by = ?, updated = ?, "
                    "valid_to = ? WHERE id = ?",
                    (by_id, now, start, fact.id),
                )
                self._unsketch(db, fact)

            return fact_rules.supersede(
                old,
                category,
                content,
                start,
                valid_from=valid_from,
                same=self._active_by_key(db, key, content),
                root=lambda fact: self._root(db, fact),
                get=lambda i: self._fact(db, i),
                end=end,
                insert=lambda: self._insert_fact(
                    db, category or old.category, content, now, by, old_id, start, key
                ),
            )

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

    def recent_facts(self, limit: int) -> list[Fact]:
        db = self._conn()
        if db is None:
            return []
        with self._translated("read"):
            rows = db.execute(
                f"SELECT {FACT_COLUMNS} FROM facts ORDER BY updated DESC, id DESC LIMIT ?",
                (limit,),
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
            root = self._fact(db, self._root(db, first)) or first
            return history(root, lambda gen: self._successors(db, gen))

    def forked_facts(self) -> list[int]:
        db = self._conn()
        if db is None:
            return []
        with self._translated("read"):
            return [row[0] for row in db.execute(FORK_POINTS).fetchall()]

    def search_facts(
        self,
        query: Node,
        category: str | None,
        since: str | None,
        limit: int,
        as_of: str | None = None,
        *,
        question: bool = False,
    ) -> list[ScoredFact]:
        """Active facts matching, best first; with `as_of`, the facts that held then: the
        active ones that had begun, and the superseded ones whose window covers it.
        `question`: the OR of a question's words, ranked bounded (bounded.py)."""
        db = self._conn()
        if db is None:
            return []
        args = (query, question, category, since, limit, as_of)
        found = self._match(db, "facts_fts", *args)
        if as_of is not None:
            found += self._match(db, "facts_past_fts", *args)
            found.sort(key=lambda pair: -pair[1])
        return found[:limit]

    def _match(
        self,
        db: sqlite3.Connection,
        table: str,
        query: Node,
        question: bool,
        category: str | None,
        since: str | None,
        limit: int,
        as_of: str | None,
    ) -> list[ScoredFact]:
        where: list[str] = []
        params: list[str] = []
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
        words = or_words(query) if question else None
        with self._translated("search"):
            if words is not None:
                ranked = bounded.top(
                    db,
                    table,
                    [to_fts5(word) for word in words],
                    bounded.ranker(db, table, f"facts f ON f.id = {table}.rowid", where, params),
                    limit,
                    self.search_budget,
                )
                if ranked is not None:
                    facts = self._facts_in(db, [rowid for rowid, _ in ranked])
                    return [ScoredFact(facts[rowid], -score) for rowid, score in ranked]
            sql = (
                f"SELECT {F_COLUMNS}, bm25({table}) "
                f"FROM {table} JOIN facts f ON f.id = {table}.rowid "
                f"WHERE {' AND '.join([f'{table} MATCH ?', *where])} "
                f"ORDER BY bm25({table}) LIMIT ?"
            )
            rows = db.execute(sql, (to_fts5(query), *params, limit)).fetchall()
        return [ScoredFact(Fact(*row[:-1]), -float(row[-1])) for row in rows]

    def facts_by_id(self, ids: list[int]) -> dict[int, Fact]:
        db = self._conn()
        if db is None or not ids:
            return {}
        with self._translated("read"):
            return self._facts_in(db, ids)

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
        keys = similarity.band_keys(similarity.words(content))
        self._settle(db)  # the guard's report of this write sees every fact's keys
        self._sketch_many(db, {cursor.lastrowid: keys})
        return cursor.lastrowid

    def _fact(self, db: sqlite3.Connection, fact_id: int) -> Fact | None:
        row = db.execute(f"SELECT {FACT_COLUMNS} FROM facts WHERE id = ?", (fact_id,)).fetchone()
        return None if row is None else Fact(*row)

    def _root(self, db: sqlite3.Connection, fact: Fact) -> int:
        """The first version of the history `fact` belongs to (its `supersedes` links lead
        there: a settled fork's link to a sibling adds none)."""
        seen = {fact.id}
        while fact.supersedes is not None and fact.supersedes not in seen:
            earlier = self._fact(db, fact.supersedes)
            if earlier is None:
                break
            seen.add(earlier.id)
            fact = earlier
        return fact.id

    def _successors(self, db: sqlite3.Connection, generation: list[Fact]) -> list[Fact]:
        """rows.history's lookup: the rows the generation is superseded by, and those that
        name one of it (index facts_supersedes)."""
        ids, targets = successor_ids(generation)
        found = list(self._facts_in(db, targets).values())
        if ids:
            rows = db.execute(
                f"SELECT {FACT_COLUMNS} FROM facts WHERE supersedes IN "
                f"({', '.join('?' * len(ids))})",
                ids,
            ).fetchall()
            found += [Fact(*row) for row in rows]
        return found

    def _supersedable(self, db: sqlite3.Connection, fact_id: int) -> Fact:
        return fact_rules.supersedable(lambda i: self._fact(db, i), fact_id)

    def _active_fact(self, db: sqlite3.Connection, fact_id: int, action: str) -> Fact:
        return fact_rules.active(lambda i: self._fact(db, i), fact_id, action)

    def size_of_facts(self) -> dict[str, FactSize]:
        """status -> (count, characters of content)."""
        from ..rows_cold import FactSize

        db = self._conn()
        if db is None:
            return {}
        with self._translated("read"):
            rows = db.execute(
                "SELECT status, count(*), coalesce(sum(length(content)), 0) FROM facts "
                "GROUP BY status"
            ).fetchall()
        return {status: FactSize(n, chars) for status, n, chars in rows}

    # -- sessions ----------------------------------------------------------------------

    def start_session(
        self,
        session_id: str,
        surface: str,
        parent_id: str | None,
        now: str,
        values: tuple[tuple[str, str], ...] = (),
    ) -> Session:
        with self._write() as db:
            try:
                db.execute(
                    "INSERT INTO sessions (id, surface, parent_id, started) VALUES (?, ?, ?, ?)",
                    (session_id, surface, parent_id, now),
                )
            except sqlite3.IntegrityError as exc:
                raise ConflictError(f"a session with id {session_id!r} exists already") from exc
            db.executemany("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", values)
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

    def reopen_session(self, session_id: str) -> Session:
        with self._write() as db:
            db.execute("UPDATE sessions SET ended = NULL WHERE id = ?", (session_id,))
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
                    f"unknown parent task {parent_id!r}: start it first: "
                    f"{advice.task_start(parent_id)}"
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
                raise NotFoundError(
                    f"unknown task {task_id!r}: tasks are registered with "
                    f"{advice.task_start(task_id)}"
                )
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

    def entry_cache(
        self, with_meta: bool = True, with_prints: bool = True
    ) -> dict[str, CachedEntry]:
        """name -> (mtime_ns, size, description, updated, error, metadata JSON, body key,
        band keys) of each global entry file when last read; without `with_meta` the JSON
        is left out (""), without `with_prints` the keys (None, ""): a listing needs
        neither."""
        db = self._conn()
        if db is None:
            return {}
        meta = "meta" if with_meta else "''"
        prints = "body_key, sketch" if with_prints else "NULL, ''"
        with self._translated("read"):
            rows = db.execute(
                f"SELECT name, mtime_ns, size, description, updated, error, {meta}, {prints} "
                "FROM entry_cache"
            ).fetchall()
        make = tuple.__new__  # CachedEntry(*row) runs a Python __new__: 1,000 rows a recall
        return {row[0]: make(CachedEntry, row[1:]) for row in rows}

    def update_entry_cache(
        self, changed: dict[str, CachedEntry], gone: list[str], listing: str | None = None
    ) -> None:
        if self._conn() is None:
            return
        with self._write() as db:
            if listing is not None:
                db.execute(
                    "INSERT OR REPLACE INTO entry_listing (id, listing) VALUES (1, ?)", (listing,)
                )
            db.executemany("DELETE FROM entry_cache WHERE name = ?", [(n,) for n in gone])
            db.executemany(
                "INSERT OR REPLACE INTO entry_cache "
                "(name, mtime_ns, size, description, updated, error, meta, body_key, sketch) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(name, *row) for name, row in changed.items()],
            )

    def entry_listing(self) -> str | None:
        db = self._conn()
        if db is None:
            return None
        with self._translated("read"):
            row = db.execute("SELECT listing FROM entry_listing").fetchone()
        return None if row is None else str(row[0])

    def set_entry_listing(self, text: str) -> None:
        if self._conn() is None:
            return
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO entry_listing (id, listing) VALUES (1, ?)", (text,))

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


def _no_sketches(normals: list[str]) -> list[list[int]]:
    """An import's band keys are computed later (SKETCH_LATER): none now."""
    return [[] for _ in normals]
