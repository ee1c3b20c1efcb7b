"""PostgresStore: the Store protocol (storage/base.py) on one scope of a PostgreSQL
database. The same rows as memory.db (schema.py), the same rules as SQLiteStore: where
SQLite's triggers keep the search index, the groups and the vectors in step, the write
that changes a row does it here, in its transaction (connection.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterator, Sequence

from ... import advice
from ...errors import ConflictError, NotFoundError
from ...lazy import lazy
from ...models import Fact, Provenance, Session, Task
from .. import bulk, fact_rules
from ..rows import (
    ARCHIVE_FIELDS,
    FACT_FIELDS,
    FORK_POINTS,
    CachedEntry,
    Chunk,
    FileState,
    Node,
    ScoredChunk,
    ScoredFact,
    history,
    successor_ids,
)
from ..sqlite import groups
from ..sqlite.index import or_words
from . import lexical, pgvector
from .documents import DocumentRows
from .insert import insert_rows
from .schema import LATEST

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ... import similarity
    from ..rows_cold import (
        DatabaseHealth,
        FactIdentity,
        FactPair,
        FactSize,
        FileChunks,
        NewFact,
        NewVector,
        ProcedurePrint,
        RankedVector,
        StoredVector,
        Superseded,
        Unembedded,
        VectorFilter,
        VectorGeneration,
    )
    from .connection import Cursor
else:
    similarity = lazy("memdir.similarity")

FACT_COLUMNS = ", ".join(FACT_FIELDS)
F_COLUMNS = ", ".join("f." + c for c in FACT_FIELDS)
CHUNK_COLUMNS = "id, path, kind, start_line, end_line, date, content"
FACT_TYPES = {"id": "bigint", "supersedes": "bigint", "superseded_by": "bigint", "norm": "bigint"}
ADDED_COLUMNS = (  # a fact add_facts stores: the others take their defaults
    "id", "category", "content", "created", "updated", "session_id", "surface", "agent",
    "valid_from", "norm",
)  # fmt: skip
ANALYZE_AFTER = 1_000  # rows a write adds past which the planner's statistics are renewed
CANDIDATES = 64  # as sqlite/curation.py: the near duplicates a write compares itself with
BUCKET, WINDOW = 32, 8
Row = dict[str, object]
TABLES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "fact": ("facts", FACT_FIELDS, "id"),
    "fact_usage": ("fact_usage", ("fact_id", "hits", "last_hit"), "fact_id"),
    "task": ("tasks", ("id", "parent_id", "state", "started", "ended"), "id"),
    "session": ("sessions", ("id", "surface", "parent_id", "started", "ended"), "id"),
    "session_write": ("session_writes", ("session_id", "kind", "n"), "session_id, kind"),
    "kv": ("kv", ("key", "value"), "key"),
}
KEYS = {"task": "id", "session": "id", "kv": "key"}


def _fact(row: tuple[object, ...]) -> Fact:
    return Fact(*row)  # type: ignore[arg-type]  # psycopg rows are tuples of object


def _int(value: object) -> int:
    return int(str(value))


class PostgresStore(DocumentRows):
    """Every part of the Store protocol over one connection to one scope."""

    # -- facts (F1-F5) -------------------------------------------------------------------

    def add_fact(
        self, category: str, content: str, now: str, by: Provenance, valid_from: str | None = None
    ) -> Fact:
        key = similarity.text_key(content)
        with self._write() as cur:
            existing = self._active_by_key(cur, key, content)
            if existing is not None:
                return existing._replace(duplicate=True)
            fact_id = self._insert_fact(
                cur, category, content, now, by, None, valid_from or now, key
            )
            fact = self._get(cur, fact_id)
        assert fact is not None
        return fact

    def add_facts(
        self,
        rows: list[NewFact],
        now: str,
        by: Provenance,
        check: Callable[[Sequence[NewFact]], None] | None = None,
    ) -> list[int]:
        if check is not None:
            check(rows)
        normals = [similarity.normalize(text) for _, text in rows]
        keys = [similarity.key_of_normal(normal) for normal in normals]
        sketches = similarity.sketches(normals, normal=True)
        with self._write() as cur:
            known = self._active_keys(cur, keys)
            next_id = self._next_id(cur, "facts")
            ids, new, _ = bulk.number_new(rows, normals, keys, sketches, known, next_id)
            new_rows = [
                (fact_id, category, text, now, now, by.session_id, by.surface, by.agent, now, key)
                for fact_id, category, text, key, _ in new
            ]
            sketch_rows = [(k, fact_id) for fact_id, *_, sketch in new for k in sketch]
            insert_rows(
                cur,
                "facts",
                [(name, FACT_TYPES.get(name, "text")) for name in ADDED_COLUMNS],
                new_rows,
            )
            self._sketch(cur, sketch_rows)
            lexical.put(cur, lexical.FACTS, [(_int(r[0]), str(r[2])) for r in new_rows])
            if len(new_rows) >= ANALYZE_AFTER:
                self._analyze = True
            if new_rows and by.session_id is not None:
                self._dirty.add("session:" + by.session_id)
        return ids

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
        with self._write() as cur:
            old = self._supersedable(cur, old_id)
            start = valid_from or now
            return fact_rules.supersede(
                old,
                category,
                content,
                start,
                valid_from=valid_from,
                same=self._active_by_key(cur, key, content),
                root=lambda fact: self._root(cur, fact),
                get=lambda i: self._get(cur, i),
                end=lambda fact, by_id: self._end(cur, fact, by_id, now, start),
                insert=lambda: self._insert_fact(
                    cur, category or old.category, content, now, by, old_id, start, key
                ),
            )

    def _end(self, cur: Cursor, old: Fact, by_id: int, now: str, start: str) -> None:
        """`old` superseded by fact `by_id` from `start` on."""
        cur.execute(
            "UPDATE facts SET status = 'superseded', superseded_by = %s, updated = %s, "
            "valid_to = %s WHERE id = %s",
            (by_id, now, start, old.id),
        )
        self._leave_active(cur, old)
        lexical.put(cur, lexical.PAST, [(old.id, old.content)])

    def remove_fact(self, fact_id: int, now: str) -> Fact:
        with self._write() as cur:
            gone = self._active_fact(cur, fact_id, "remove")
            cur.execute(
                "UPDATE facts SET status = 'removed', updated = %s, valid_to = %s WHERE id = %s",
                (now, now, fact_id),
            )
            self._leave_active(cur, gone)
            fact = self._get(cur, fact_id)
        assert fact is not None
        return fact

    def recent_facts(self, limit: int) -> list[Fact]:
        with self._read() as cur:
            if cur is None:
                return []
            cur.execute(
                f"SELECT {FACT_COLUMNS} FROM facts ORDER BY updated DESC, id DESC LIMIT %s",
                (limit,),
            )
            return [_fact(row) for row in cur.fetchall()]

    def get_fact(self, fact_id: int) -> Fact | None:
        with self._read() as cur:
            return None if cur is None else self._get(cur, fact_id)

    def facts_by_id(self, ids: list[int]) -> dict[int, Fact]:
        if not ids:
            return {}
        with self._read() as cur:
            return {} if cur is None else self._facts_in(cur, ids)

    def fact_chain(self, fact_id: int) -> list[Fact]:
        with self._read() as cur:
            if cur is None:
                return []
            first = self._get(cur, fact_id)
            if first is None:
                return []
            root = self._get(cur, self._root(cur, first)) or first
            return history(root, lambda gen: self._successors(cur, gen))

    def forked_facts(self) -> list[int]:
        with self._read() as cur:
            if cur is None:
                return []
            cur.execute(FORK_POINTS)
            return [_int(row[0]) for row in cur.fetchall()]

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
        """As SQLiteStore's, ranked in full: `question` changes nothing here (the bounded
        ranking of sqlite/bounded.py keeps the top of this ranking)."""
        where: list[str] = []
        params: list[object] = []
        if category is not None:
            where.append("category = %s")
            params.append(category)
        if since is not None:
            where.append("created >= %s")
            params.append(since)
        if as_of is not None:
            where.append("coalesce(valid_from, created) <= %s")
            where.append("(valid_to IS NULL OR valid_to > %s)")
            params += [as_of, as_of]
        with self._read("search") as cur:
            if cur is None:
                return []
            kept = lexical.top(cur, lexical.FACTS, query, "facts", where, params, limit)
            if kept is not None and as_of is not None:
                past = lexical.top(cur, lexical.PAST, query, "facts", where, params, limit)
                kept = sorted([*kept, *(past or [])], key=lambda item: (-item[1], item[0]))
                kept = kept[:limit]
            if kept is None:
                scores, _ = lexical.match(cur, lexical.FACTS, query)
                if as_of is not None:
                    past_scores, _ = lexical.match(cur, lexical.PAST, query)
                    scores.update(past_scores)
                kept = self._top(cur, "facts", scores, where, params, limit)
            facts = self._facts_in(cur, [doc for doc, _ in kept])
        return [ScoredFact(facts[doc], score) for doc, score in kept]

    def _top(
        self,
        cur: Cursor,
        table: str,
        scores: dict[int, float],
        where: list[str],
        params: list[object],
        limit: int,
    ) -> list[tuple[int, float]]:
        """The best `limit` (id, score) of the scored rows the filters keep."""
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
        if not where:
            return ranked[:limit]
        cur.execute(
            f"SELECT id FROM {table} WHERE id = ANY(%s) AND {' AND '.join(where)}",
            (list(scores), *params),
        )
        keep = {_int(doc) for (doc,) in cur}
        return [item for item in ranked if item[0] in keep][:limit]

    def count_facts(self) -> dict[str, int]:
        with self._read() as cur:
            if cur is None:
                return {}
            cur.execute("SELECT status, count(*) FROM facts GROUP BY status")
            return {str(status): _int(n) for status, n in cur}

    def size_of_facts(self) -> dict[str, FactSize]:
        from ..rows_cold import FactSize

        with self._read() as cur:
            if cur is None:
                return {}
            cur.execute(
                "SELECT status, count(*), coalesce(sum(length(content)), 0) FROM facts "
                "GROUP BY status"
            )
            return {str(s): FactSize(_int(n), _int(c)) for s, n, c in cur}

    def _insert_fact(
        self,
        cur: Cursor,
        category: str,
        content: str,
        now: str,
        by: Provenance,
        supersedes: int | None,
        valid_from: str,
        key: int,
    ) -> int:
        fact_id = self._next_id(cur, "facts")
        cur.execute(
            "INSERT INTO facts (id, category, content, created, updated, supersedes, "
            "session_id, surface, agent, valid_from, norm) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (fact_id, category, content, now, now, supersedes, by.session_id, by.surface,
             by.agent, valid_from, key),
        )  # fmt: skip
        keys = similarity.band_keys(similarity.words(content))
        self._sketch(cur, [(k, fact_id) for k in keys])
        lexical.put(cur, lexical.FACTS, [(fact_id, content)])
        if by.session_id is not None:
            self._dirty.add("session:" + by.session_id)
        return fact_id

    def _leave_active(self, cur: Cursor, fact: Fact) -> None:
        """A fact that stops being active leaves the index of active facts, the
        near-duplicate candidates, the vectors and its session's groups."""
        keys = similarity.band_keys(similarity.words(fact.content))
        cur.execute("DELETE FROM fact_sketch WHERE fact_id = %s AND key = ANY(%s)", (fact.id, keys))
        lexical.drop(cur, lexical.FACTS, [fact.id])
        cur.execute("DELETE FROM vectors WHERE owner = 'fact' AND owner_id = %s", (fact.id,))
        if fact.session_id is not None:
            self._dirty.add("session:" + fact.session_id)

    def _next_id(self, cur: Cursor, table: str) -> int:
        """max + 1, as SQLite gives a rowid: under the scope's write lock."""
        cur.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {table}")
        row = cur.fetchone()
        assert row is not None
        return _int(row[0])

    def _get(self, cur: Cursor, fact_id: int) -> Fact | None:
        cur.execute(f"SELECT {FACT_COLUMNS} FROM facts WHERE id = %s", (fact_id,))
        row = cur.fetchone()
        return None if row is None else _fact(row)

    def _facts_in(self, cur: Cursor, ids: list[int]) -> dict[int, Fact]:
        if not ids:
            return {}
        cur.execute(f"SELECT {FACT_COLUMNS} FROM facts WHERE id = ANY(%s)", (list(ids),))
        return {_int(row[0]): _fact(row) for row in cur.fetchall()}

    def _root(self, cur: Cursor, fact: Fact) -> int:
        """The first version of the history `fact` belongs to (as on SQLite)."""
        seen = {fact.id}
        while fact.supersedes is not None and fact.supersedes not in seen:
            earlier = self._get(cur, fact.supersedes)
            if earlier is None:
                break
            seen.add(earlier.id)
            fact = earlier
        return fact.id

    def _successors(self, cur: Cursor, generation: list[Fact]) -> list[Fact]:
        """rows.history's lookup, as on SQLite: the rows naming the generation (index
        facts_supersedes), and the rows it is superseded by."""
        ids, targets = successor_ids(generation)
        found = list(self._facts_in(cur, targets).values())
        if ids:
            cur.execute(f"SELECT {FACT_COLUMNS} FROM facts WHERE supersedes = ANY(%s)", (ids,))
            found += [_fact(row) for row in cur.fetchall()]
        return found

    def _supersedable(self, cur: Cursor, fact_id: int) -> Fact:
        return fact_rules.supersedable(lambda i: self._get(cur, i), fact_id)

    def _active_fact(self, cur: Cursor, fact_id: int, action: str) -> Fact:
        return fact_rules.active(lambda i: self._get(cur, i), fact_id, action)

    def _active_by_key(self, cur: Cursor, key: int, content: str) -> Fact | None:
        wanted = similarity.normalize(content)
        if not wanted:
            return None
        cur.execute(
            f"SELECT {FACT_COLUMNS} FROM facts WHERE norm = %s AND status = 'active' ORDER BY id",
            (key,),
        )
        for row in cur.fetchall():
            if similarity.normalize(str(row[2])) == wanted:
                return _fact(row)
        return None

    def _active_keys(self, cur: Cursor, keys: list[int]) -> dict[tuple[int, str], int]:
        found: dict[tuple[int, str], int] = {}
        cur.execute(
            "SELECT id, norm, content FROM facts WHERE status = 'active' AND norm = ANY(%s) "
            "ORDER BY id DESC",
            (sorted(set(keys)),),
        )
        for fact_id, key, content in cur.fetchall():
            found[(_int(key), similarity.normalize(str(content)))] = _int(fact_id)
        return found

    def _sketch(self, cur: Cursor, rows: list[tuple[int, int]]) -> None:
        if rows:
            cur.execute(
                "INSERT INTO fact_sketch (key, fact_id) SELECT * FROM unnest(%s::bigint[], "
                "%s::bigint[]) ON CONFLICT DO NOTHING",
                ([k for k, _ in rows], [f for _, f in rows]),
            )

    # -- curation (X5, doctor) -----------------------------------------------------------

    def similar_facts(
        self, content: str, exclude: int | None, threshold: float, limit: int
    ) -> list[ScoredFact]:
        bag = similarity.words(content)
        keys = similarity.band_keys(bag)
        if not keys:
            return []
        with self._read() as cur:
            if cur is None:
                return []
            cur.execute(
                f"SELECT {F_COLUMNS} FROM (SELECT fact_id, count(*) AS shared FROM fact_sketch "
                "WHERE key = ANY(%s) GROUP BY fact_id ORDER BY shared DESC, fact_id LIMIT %s) c "
                "JOIN facts f ON f.id = c.fact_id WHERE f.status = 'active'",
                (keys, CANDIDATES),
            )
            rows = cur.fetchall()
        found = []
        for row in rows:
            if row[0] == exclude:
                continue
            score = similarity.jaccard(bag, similarity.words(str(row[2])))
            if score >= threshold:
                found.append(ScoredFact(_fact(row), score))
        found.sort(key=lambda pair: (-pair.score, pair.fact.id))
        return found[:limit]

    def fact_saying(self, content: str) -> Fact | None:
        with self._read() as cur:
            if cur is None:
                return None
            return self._active_by_key(cur, similarity.text_key(content), content)

    def exact_duplicate_facts(self) -> list[list[Fact]]:
        with self._read() as cur:
            if cur is None:
                return []
            cur.execute(
                f"SELECT {FACT_COLUMNS} FROM facts WHERE status = 'active' AND norm IN "
                "(SELECT norm FROM facts WHERE status = 'active' GROUP BY norm "
                "HAVING count(*) > 1) ORDER BY norm, id"
            )
            rows = cur.fetchall()
        groups: dict[str, list[Fact]] = {}
        for row in rows:
            groups.setdefault(similarity.normalize(str(row[2])), []).append(_fact(row))
        return [group for text, group in groups.items() if text and len(group) > 1]

    def settle_sketches(self, limit: int) -> int:
        return 0  # an import's band keys go in with it (a server's insert is not the cost)

    def sketch_pairs(self) -> list[FactPair]:
        from ..rows_cold import FactPair

        pairs: set[tuple[int, int]] = set()
        with self._read() as cur:
            if cur is None:
                return []
            cur.execute(
                "SELECT DISTINCT a.fact_id, b.fact_id FROM fact_sketch a "
                "JOIN fact_sketch b ON b.key = a.key AND b.fact_id > a.fact_id "
                "WHERE a.key IN (SELECT key FROM fact_sketch GROUP BY key "
                "HAVING count(*) BETWEEN 2 AND %s)",
                (BUCKET,),
            )
            pairs.update((_int(a), _int(b)) for a, b in cur.fetchall())
            cur.execute(
                "SELECT array_agg(fact_id ORDER BY fact_id) FROM fact_sketch GROUP BY key "
                "HAVING count(*) > %s",
                (BUCKET,),
            )
            for (bucket,) in cur.fetchall():
                ids = [_int(i) for i in bucket]  # type: ignore[attr-defined]  # psycopg rows are tuples of object
                for i, a in enumerate(ids):
                    for b in ids[i + 1 : i + WINDOW + 1]:
                        pairs.add((a, b))
            found = self._facts_in(cur, sorted({i for pair in pairs for i in pair}))
        found = {i: f for i, f in found.items() if f.status == "active"}
        return [FactPair(found[a], found[b]) for a, b in sorted(pairs) if a in found and b in found]

    def insert_fact_rows(
        self,
        rows: list[Row],
        keep_ids: bool,
        seen: str | None = None,
        held: dict[int, int] | None = None,
    ) -> dict[int, int]:
        links = ("supersedes", "superseded_by")
        fields = [f for f in FACT_FIELDS if f != "id" and f not in links]
        normals = [similarity.normalize(str(row["content"])) for row in rows]
        active = [i for i, row in enumerate(rows) if row.get("status", "active") == "active"]
        sketches = similarity.sketches([normals[i] for i in active], normal=True)
        with self._write() as cur:
            if keep_ids:
                new_ids = [_int(row["id"]) for row in rows]
            else:
                first = self._next_id(cur, "facts")
                new_ids = list(range(first, first + len(rows)))
            mapping = {_int(row["id"]): new for row, new in zip(rows, new_ids, strict=True)}
            targets = {**(held or {}), **mapping}

            def linked(row: Row, field: str) -> int | None:
                value = row.get(field)
                return None if value is None else targets.get(_int(value))

            insert_rows(
                cur,
                "facts",
                [(name, FACT_TYPES.get(name, "text")) for name in ("id", *fields, *links, "norm")],
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
            self._sketch(
                cur,
                [(k, new_ids[i]) for i, keys in zip(active, sketches, strict=True) for k in keys],
            )
            by_status: dict[str, list[tuple[int, str]]] = {}
            for row, new in zip(rows, new_ids, strict=True):
                status = str(row.get("status", "active"))
                by_status.setdefault(status, []).append((new, str(row["content"])))
                if status == "active" and row.get("session_id") is not None:
                    self._dirty.add(f"session:{row['session_id']}")
            lexical.put(cur, lexical.FACTS, by_status.get("active", []))
            if len(rows) >= ANALYZE_AFTER:
                self._analyze = True
            lexical.put(cur, lexical.PAST, by_status.get("superseded", []))
            if seen is not None:
                cur.execute(
                    "INSERT INTO fact_usage (fact_id, hits, last_hit) SELECT id, 0, %s "
                    "FROM unnest(%s::bigint[]) AS id ON CONFLICT DO NOTHING",
                    (seen, new_ids),
                )
        return mapping

    def defer_hits(self, hits: dict[int, str]) -> None:
        """Recorded at once: PostgreSQL takes concurrent upserts of a row without a lock of
        the scope, so a search's bookkeeping never waits for a writer."""
        if hits and not self.read_only:
            with contextlib.suppress(Exception):
                self._upsert_hits({i: (1, when) for i, when in hits.items()})

    def record_hits(self, hits: dict[int, str]) -> None:
        if hits:
            self._upsert_hits({i: (1, when) for i, when in hits.items()})

    def _upsert_hits(self, counts: dict[int, tuple[int, str]]) -> None:
        with self._read("write to") as cur:
            if cur is None:
                return
            ordered = sorted(counts.items())
            cur.execute(
                "INSERT INTO fact_usage (fact_id, hits, last_hit) SELECT u.id, u.n, u.at FROM "
                "unnest(%s::bigint[], %s::bigint[], %s::text[]) AS u(id, n, at) "
                "WHERE EXISTS (SELECT 1 FROM facts WHERE facts.id = u.id) "
                "ON CONFLICT (fact_id) DO UPDATE SET hits = fact_usage.hits + excluded.hits, "
                "last_hit = greatest(fact_usage.last_hit, excluded.last_hit)",
                ([i for i, _ in ordered], [n for _, (n, _) in ordered],
                 [w for _, (_, w) in ordered]),
            )  # fmt: skip

    def stale_facts(self, before: str) -> list[Fact]:
        with self._read() as cur:
            if cur is None:
                return []
            cur.execute(
                f"SELECT {F_COLUMNS} FROM facts f LEFT JOIN fact_usage u ON u.fact_id = f.id "
                "WHERE f.status = 'active' AND coalesce(u.last_hit, f.created) < %s ORDER BY f.id",
                (before,),
            )
            return [_fact(row) for row in cur.fetchall()]

    # -- sessions and tasks (U1-U4, T3) --------------------------------------------------

    def start_session(
        self,
        session_id: str,
        surface: str,
        parent_id: str | None,
        now: str,
        values: tuple[tuple[str, str], ...] = (),
    ) -> Session:
        with self._write() as cur:
            cur.execute(
                "INSERT INTO sessions (id, surface, parent_id, started) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (id) DO NOTHING",
                (session_id, surface, parent_id, now),
            )
            if cur.rowcount == 0:
                raise ConflictError(f"a session with id {session_id!r} exists already")
            for key, value in values:
                cur.execute(
                    "INSERT INTO kv (key, value) VALUES (%s, %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (key, value),
                )
        return Session(session_id, surface, parent_id, now, None, {})

    def get_session(self, session_id: str) -> Session | None:
        with self._read() as cur:
            return None if cur is None else self._session(cur, session_id)

    def end_session(self, session_id: str, now: str) -> Session:
        with self._write() as cur:
            cur.execute("UPDATE sessions SET ended = %s WHERE id = %s", (now, session_id))
            session = self._session(cur, session_id)
        assert session is not None
        return session

    def reopen_session(self, session_id: str) -> Session:
        with self._write() as cur:
            cur.execute("UPDATE sessions SET ended = NULL WHERE id = %s", (session_id,))
            session = self._session(cur, session_id)
        assert session is not None
        return session

    def list_sessions(self, limit: int) -> list[Session]:
        with self._read() as cur:
            if cur is None:
                return []
            cur.execute(
                "SELECT id FROM sessions WHERE parent_id IS NULL ORDER BY started DESC, id "
                "LIMIT %s",
                (limit,),
            )
            ids = [str(sid) for (sid,) in cur.fetchall()]
            return [s for sid in ids if (s := self._session(cur, sid)) is not None]

    def count_write(self, session_id: str, kind: str) -> None:
        with self._write() as cur:
            cur.execute(
                "INSERT INTO session_writes (session_id, kind, n) VALUES (%s, %s, 1) "
                "ON CONFLICT (session_id, kind) DO UPDATE SET n = session_writes.n + 1",
                (session_id, kind),
            )

    def _session(self, cur: Cursor, session_id: str) -> Session | None:
        cur.execute(
            "SELECT id, surface, parent_id, started, ended FROM sessions WHERE id = %s",
            (session_id,),
        )
        row = cur.fetchone()
        if row is None:
            return None
        cur.execute("SELECT kind, n FROM session_writes WHERE session_id = %s", (session_id,))
        counts = {str(kind): _int(n) for kind, n in cur.fetchall()}
        cur.execute("SELECT count(*) FROM facts WHERE session_id = %s", (session_id,))
        facts = cur.fetchone()
        if facts and _int(facts[0]):
            counts["facts"] = _int(facts[0])
        sid, surface, parent_id, started, ended = row
        return Session(sid, surface, parent_id, started, ended, counts)  # type: ignore[arg-type]  # psycopg rows are tuples of object

    def start_task(self, task_id: str, parent_id: str | None, now: str) -> Task:
        with self._write() as cur:
            existing = self._task(cur, task_id)
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
            if parent_id is not None and self._task(cur, parent_id) is None:
                raise NotFoundError(
                    f"unknown parent task {parent_id!r}: start it first: "
                    f"{advice.task_start(parent_id)}"
                )
            cur.execute(
                "INSERT INTO tasks (id, parent_id, state, started) VALUES (%s, %s, 'running', %s)",
                (task_id, parent_id, now),
            )
        return Task(task_id, parent_id, "running", now, None)

    def end_task(self, task_id: str, state: str, now: str) -> Task:
        with self._write() as cur:
            task = self._task(cur, task_id)
            if task is None:
                raise NotFoundError(
                    f"unknown task {task_id!r}: tasks are registered with "
                    f"{advice.task_start(task_id)}"
                )
            if task.state != "running":
                raise ConflictError(f"task {task_id} already ended ({task.state} at {task.ended})")
            cur.execute(
                "UPDATE tasks SET state = %s, ended = %s WHERE id = %s", (state, now, task_id)
            )
        return task._replace(state=state, ended=now)

    def get_task(self, task_id: str) -> Task | None:
        with self._read() as cur:
            return None if cur is None else self._task(cur, task_id)

    def all_tasks(self) -> list[Task]:
        with self._read() as cur:
            if cur is None:
                return []
            cur.execute("SELECT id, parent_id, state, started, ended FROM tasks ORDER BY id")
            return [Task(*row) for row in cur.fetchall()]  # type: ignore[arg-type]  # psycopg rows are tuples of object

    def _task(self, cur: Cursor, task_id: str) -> Task | None:
        cur.execute(
            "SELECT id, parent_id, state, started, ended FROM tasks WHERE id = %s", (task_id,)
        )
        row = cur.fetchone()
        return None if row is None else Task(*row)  # type: ignore[arg-type]  # psycopg rows are tuples of object

    # -- caches and values (G4) ----------------------------------------------------------

    def entry_cache(
        self, with_meta: bool = True, with_prints: bool = True
    ) -> dict[str, CachedEntry]:
        meta = "meta" if with_meta else "''"
        prints = "body_key, sketch" if with_prints else "NULL, ''"
        with self._read() as cur:
            if cur is None:
                return {}
            cur.execute(
                f"SELECT name, mtime_ns, size, description, updated, error, {meta}, {prints} "
                "FROM entry_cache"
            )
            rows = cur.fetchall()
        return {str(row[0]): CachedEntry(*row[1:]) for row in rows}  # type: ignore[arg-type]  # psycopg rows are tuples of object

    def update_entry_cache(
        self, changed: dict[str, CachedEntry], gone: list[str], listing: str | None = None
    ) -> None:
        if self._conn() is None:
            return
        with self._write() as cur:
            if listing is not None:
                cur.execute(
                    "INSERT INTO entry_listing (id, listing) VALUES (1, %s) "
                    "ON CONFLICT (id) DO UPDATE SET listing = excluded.listing",
                    (listing,),
                )
            cur.execute("DELETE FROM entry_cache WHERE name = ANY(%s)", (gone,))
            cur.executemany(
                "INSERT INTO entry_cache (name, mtime_ns, size, description, updated, error, "
                "meta, body_key, sketch) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (name) DO UPDATE SET mtime_ns = excluded.mtime_ns, "
                "size = excluded.size, description = excluded.description, "
                "updated = excluded.updated, error = excluded.error, meta = excluded.meta, "
                "body_key = excluded.body_key, sketch = excluded.sketch",
                [(name, *row) for name, row in changed.items()],
            )

    def entry_listing(self) -> str | None:
        with self._read() as cur:
            if cur is None:
                return None
            cur.execute("SELECT listing FROM entry_listing")
            row = cur.fetchone()
        return None if row is None else str(row[0])

    def set_entry_listing(self, text: str) -> None:
        if self._conn() is None:
            return
        with self._write() as cur:
            cur.execute(
                "INSERT INTO entry_listing (id, listing) VALUES (1, %s) "
                "ON CONFLICT (id) DO UPDATE SET listing = excluded.listing",
                (text,),
            )

    def procedure_prints(self) -> dict[str, ProcedurePrint]:
        from ..rows_cold import ProcedurePrint

        with self._read() as cur:
            if cur is None:
                return {}
            cur.execute("SELECT name, mtime_ns, size, body_key, sketch FROM procedure_prints")
            rows = cur.fetchall()
        return {str(row[0]): ProcedurePrint(*row[1:]) for row in rows}  # type: ignore[arg-type]  # psycopg rows are tuples of object

    def update_procedure_prints(self, changed: dict[str, ProcedurePrint], gone: list[str]) -> None:
        if self._conn() is None:
            return
        with self._write() as cur:
            cur.execute("DELETE FROM procedure_prints WHERE name = ANY(%s)", (gone,))
            cur.executemany(
                "INSERT INTO procedure_prints VALUES (%s, %s, %s, %s, %s) ON CONFLICT (name) DO "
                "UPDATE SET mtime_ns = excluded.mtime_ns, size = excluded.size, "
                "body_key = excluded.body_key, sketch = excluded.sketch",
                [(name, *row) for name, row in changed.items()],
            )

    def get_value(self, key: str) -> str | None:
        with self._read() as cur:
            if cur is None:
                return None
            cur.execute("SELECT value FROM kv WHERE key = %s", (key,))
            row = cur.fetchone()
        return None if row is None else str(row[0])

    def set_value(self, key: str, value: str) -> None:
        with self._write() as cur:
            cur.execute(
                "INSERT INTO kv (key, value) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    # -- the search index: files and chunks (Q1) -----------------------------------------

    def indexed_files(self) -> dict[str, FileState]:
        with self._read() as cur:
            if cur is None:
                return {}
            cur.execute("SELECT path, kind, mtime_ns, size, hash FROM files")
            return {str(p): FileState(*state) for p, *state in cur.fetchall()}  # type: ignore[arg-type]  # psycopg rows are tuples of object

    def replace_chunks(self, changes: list[FileChunks], gone: list[str]) -> None:
        with self._write() as cur:
            for path in gone:
                self._drop_chunks(cur, path)
                cur.execute("DELETE FROM files WHERE path = %s", (path,))
            for path, (kind, mtime, size, digest), chunks in changes:
                cur.execute(
                    "INSERT INTO files VALUES (%s, %s, %s, %s, %s) ON CONFLICT (path) DO UPDATE "
                    "SET kind = excluded.kind, mtime_ns = excluded.mtime_ns, "
                    "size = excluded.size, hash = excluded.hash",
                    (path, kind, mtime, size, digest),
                )
                if chunks is None:
                    continue
                # a chunk whose text did not change keeps its vector (Q2)
                cur.execute(
                    "SELECT DISTINCT v.model, v.hash, v.vec FROM vectors v JOIN chunks c "
                    "ON v.owner = 'chunk' AND v.owner_id = c.id WHERE c.path = %s",
                    (path,),
                )
                kept = cur.fetchall()
                self._drop_chunks(cur, path)
                first = self._next_id(cur, "chunks")
                rows = [(first + i, path, kind, *chunk) for i, chunk in enumerate(chunks)]
                cur.executemany(
                    "INSERT INTO chunks (id, path, kind, start_line, end_line, date, content, "
                    "hash) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    rows,
                )
                lexical.put(cur, lexical.CHUNKS, [(_int(r[0]), str(r[6])) for r in rows])
                if self._pgvector:
                    cur.executemany(
                        "INSERT INTO vectors (model, owner, owner_id, hash, vec, embedding) "
                        "SELECT %s, 'chunk', id, hash, %s, %b FROM chunks WHERE path = %s "
                        "AND hash = %s ON CONFLICT DO NOTHING",
                        [
                            (model, vec, pgvector.blob_form(bytes(vec)), path, digest)  # type: ignore[call-overload]  # psycopg rows are tuples of object
                            for model, digest, vec in kept
                        ],
                    )
                else:
                    cur.executemany(
                        "INSERT INTO vectors (model, owner, owner_id, hash, vec) SELECT %s, "
                        "'chunk', id, hash, %s FROM chunks WHERE path = %s AND hash = %s "
                        "ON CONFLICT DO NOTHING",
                        [(model, vec, path, digest) for model, digest, vec in kept],
                    )
                self._dirty.add("file:" + path)

    def _drop_chunks(self, cur: Cursor, path: str) -> None:
        cur.execute("DELETE FROM chunks WHERE path = %s RETURNING id", (path,))
        ids = [_int(i) for (i,) in cur.fetchall()]
        if ids:
            lexical.drop(cur, lexical.CHUNKS, ids)
            cur.execute("DELETE FROM vectors WHERE owner = 'chunk' AND owner_id = ANY(%s)", (ids,))
            self._dirty.add("file:" + path)

    def search_chunks(
        self,
        query: Node,
        kinds: tuple[str, ...],
        since: str | None,
        limit: int,
        *,
        question: bool = False,
    ) -> list[ScoredChunk]:
        where, params = ["kind = ANY(%s)"], [list(kinds)]
        if since is not None:
            where.append("date >= %s")
            params.append(since)  # type: ignore[arg-type]  # psycopg rows are tuples of object
        with self._read("search") as cur:
            if cur is None:
                return []
            kept = lexical.top(cur, lexical.CHUNKS, query, "chunks", where, list(params), limit)
            if kept is None:
                scores, _ = lexical.match(cur, lexical.CHUNKS, query)
                if not scores:
                    return []
                kept = self._top(cur, "chunks", scores, where, list(params), limit)
            chunks = self._chunks_in(cur, [doc for doc, _ in kept])
        return [ScoredChunk(chunks[doc], score) for doc, score in kept]

    def chunks_by_id(self, ids: list[int]) -> dict[int, Chunk]:
        if not ids:
            return {}
        with self._read() as cur:
            return {} if cur is None else self._chunks_in(cur, ids)

    def _chunks_in(self, cur: Cursor, ids: list[int]) -> dict[int, Chunk]:
        if not ids:
            return {}
        cur.execute(f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE id = ANY(%s)", (list(ids),))
        return {_int(row[0]): Chunk(*row) for row in cur.fetchall()}  # type: ignore[arg-type]  # psycopg rows are tuples of object

    # -- the context of a hit: groups and neighbours (Q3) ----------------------------------

    def has_groups(self) -> bool:
        with self._read() as cur:
            if cur is None:
                return False
            cur.execute("SELECT 1 FROM search_groups LIMIT 1")
            return cur.fetchone() is not None

    def group_scores(self, query: Node, pages: Collection[int] | None = None) -> dict[int, float]:
        """Every matching document scored; with `pages` and a question of several words,
        those of them that match and the best (what a share of the best needs: the same
        answer as SQLite's group_best)."""
        with self._read("search") as cur:
            if cur is None:
                return {}
            scores, _ = lexical.match(cur, lexical.GROUPS, query)
        words = or_words(query)
        if pages is None or words is None or len(words) < 2 or not scores:
            return scores
        best = max(scores, key=lambda page: (scores[page], -page))
        return {page: scores[page] for page in {*pages, best} if page in scores}

    def group_pages(self, owners: list[str]) -> dict[str, list[tuple[int, int, int]]]:
        if not owners:
            return {}
        found: dict[str, list[tuple[int, int, int]]] = {}
        with self._read() as cur:
            if cur is None:
                return {}
            cur.execute(
                "SELECT owner, first, last, id FROM search_groups WHERE owner = ANY(%s) "
                "ORDER BY owner, first",
                (owners,),
            )
            for owner, first, last, page in cur.fetchall():
                found.setdefault(str(owner), []).append((_int(first), _int(last), _int(page)))
        return found

    def fact_neighbours(self, ids: list[int]) -> dict[int, tuple[str, int | None, int | None]]:
        if not ids:
            return {}
        with self._read() as cur:
            if cur is None:
                return {}
            cur.execute(
                "SELECT f.id, f.session_id, (SELECT max(p.id) FROM facts p WHERE "
                "p.session_id = f.session_id AND p.id < f.id AND p.status = 'active'), "
                "(SELECT min(n.id) FROM facts n WHERE n.session_id = f.session_id "
                "AND n.id > f.id AND n.status = 'active') "
                "FROM facts f WHERE f.id = ANY(%s) AND f.session_id IS NOT NULL",
                (ids,),
            )
            return {_int(r[0]): (str(r[1]), r[2], r[3]) for r in cur.fetchall()}  # type: ignore[misc]  # psycopg rows are tuples of object

    def chunk_neighbours(self, ids: list[int]) -> dict[int, tuple[int | None, int | None]]:
        if not ids:
            return {}
        with self._read() as cur:
            if cur is None:
                return {}
            cur.execute(
                "SELECT c.id, (SELECT p.id FROM chunks p WHERE p.path = c.path AND "
                "p.start_line < c.start_line ORDER BY p.start_line DESC LIMIT 1), "
                "(SELECT n.id FROM chunks n WHERE n.path = c.path AND n.start_line > "
                "c.start_line ORDER BY n.start_line LIMIT 1) "
                "FROM chunks c WHERE c.id = ANY(%s)",
                (ids,),
            )
            return {_int(r[0]): (r[1], r[2]) for r in cur.fetchall()}  # type: ignore[misc]  # psycopg rows are tuples of object

    def _refresh_groups(self, cur: Cursor) -> None:
        """The documents of the sessions and files this write touched (sqlite/groups.py:
        the same pages, the same text), before the write commits."""
        for owner in sorted(self._dirty):
            kind, _, name = owner.partition(":")
            if kind == "session":
                cur.execute(
                    "SELECT id, length(content) FROM facts WHERE session_id = %s "
                    "AND status = 'active' ORDER BY id",
                    (name,),
                )
                sizes = [(_int(i), _int(n)) for i, n in cur.fetchall()]
                pages = groups._pages(sizes, groups.PAGE_CHARS)
            else:
                cur.execute(
                    "SELECT id, length(content) FROM chunks WHERE path = %s ORDER BY start_line",
                    (name,),
                )
                sizes = [(_int(i), _int(n)) for i, n in cur.fetchall()]
                pages = groups._pages(sizes, groups.FILE_CHARS)[:1]
            self._store_pages(cur, owner, kind, name, pages)
        self._dirty = set()

    def _store_pages(
        self, cur: Cursor, owner: str, kind: str, name: str, pages: list[tuple[int, int, int]]
    ) -> None:
        cur.execute("SELECT id, first, last, members FROM search_groups WHERE owner = %s", (owner,))
        stored = {(_int(f), _int(la), _int(m)): _int(i) for i, f, la, m in cur.fetchall()}
        wanted = set(pages)
        old = [page for sig, page in stored.items() if sig not in wanted]
        if old:
            lexical.drop(cur, lexical.GROUPS, old)
            cur.execute("DELETE FROM search_groups WHERE id = ANY(%s)", (old,))
        docs: list[tuple[int, str]] = []
        for first, last, members in pages:
            if (first, last, members) in stored:
                continue
            if kind == "session":
                cur.execute(
                    "SELECT content, created FROM facts WHERE session_id = %s AND "
                    "status = 'active' AND id BETWEEN %s AND %s ORDER BY id",
                    (name, first, last),
                )
            else:
                cur.execute(
                    "SELECT content, date FROM chunks WHERE path = %s ORDER BY start_line LIMIT %s",
                    (name, members),
                )
            rows = cur.fetchall()
            text = "\n".join(str(c) for c, _ in rows) + groups._days(
                None if w is None else str(w) for _, w in rows
            )
            page_id = self._next_id(cur, "search_groups")
            cur.execute(
                "INSERT INTO search_groups (id, owner, first, last, members) "
                "VALUES (%s, %s, %s, %s, %s)",
                (page_id, owner, first, last, members),
            )
            docs.append((page_id, text))
        lexical.put(cur, lexical.GROUPS, docs)

    # -- vectors (Q2) --------------------------------------------------------------------

    def unembedded(self, model: str, limit: int) -> list[Unembedded]:
        from ..hashing import text_hash
        from ..rows_cold import Unembedded

        with self._read() as cur:
            if cur is None:
                return []
            cur.execute(
                "SELECT 'chunk', c.id, c.content, c.hash FROM chunks c WHERE NOT EXISTS "
                "(SELECT 1 FROM vectors v WHERE v.model = %s AND v.owner = 'chunk' "
                "AND v.owner_id = c.id) ORDER BY c.id LIMIT %s",
                (model, limit),
            )
            chunks = cur.fetchall()
            cur.execute(
                "SELECT f.id, f.content FROM facts f WHERE f.status = 'active' AND "
                "NOT EXISTS (SELECT 1 FROM vectors v WHERE v.model = %s AND v.owner = 'fact' "
                "AND v.owner_id = f.id) ORDER BY f.id LIMIT %s",
                (model, max(0, limit - len(chunks))),
            )
            facts = cur.fetchall()
        return [
            *(Unembedded(str(o), _int(i), str(t), str(h)) for o, i, t, h in chunks),
            *(Unembedded("fact", _int(i), str(t), text_hash(str(t))) for i, t in facts),
        ]

    def unembedded_items(
        self, model: str, fact_ids: list[int], paths: list[str]
    ) -> list[Unembedded]:
        from ..hashing import text_hash
        from ..rows_cold import Unembedded

        if not (fact_ids or paths):
            return []
        with self._read() as cur:
            if cur is None:
                return []
            cur.execute(
                "SELECT c.id, c.content, c.hash FROM chunks c WHERE c.path = ANY(%s) AND NOT "
                "EXISTS (SELECT 1 FROM vectors v WHERE v.model = %s AND v.owner = 'chunk' "
                "AND v.owner_id = c.id) ORDER BY c.id",
                (paths, model),
            )
            chunks = cur.fetchall()
            cur.execute(
                "SELECT f.id, f.content FROM facts f WHERE f.id = ANY(%s) AND "
                "f.status = 'active' AND NOT EXISTS (SELECT 1 FROM vectors v WHERE "
                "v.model = %s AND v.owner = 'fact' AND v.owner_id = f.id) ORDER BY f.id",
                (fact_ids, model),
            )
            facts = cur.fetchall()
        return [
            *(Unembedded("chunk", _int(i), str(t), str(h)) for i, t, h in chunks),
            *(Unembedded("fact", _int(i), str(t), text_hash(str(t))) for i, t in facts),
        ]

    def count_unembedded(self, model: str) -> int:
        with self._read() as cur:
            if cur is None:
                return 0
            cur.execute(
                "SELECT (SELECT count(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM vectors "
                "v WHERE v.model = %s AND v.owner = 'chunk' AND v.owner_id = c.id)) + "
                "(SELECT count(*) FROM facts f WHERE f.status = 'active' AND NOT EXISTS "
                "(SELECT 1 FROM vectors v WHERE v.model = %s AND v.owner = 'fact' "
                "AND v.owner_id = f.id))",
                (model, model),
            )
            row = cur.fetchone()
        return 0 if row is None else _int(row[0])

    def vectors_by_hash(self, model: str, hashes: list[str]) -> dict[str, bytes]:
        if not hashes:
            return {}
        with self._read() as cur:
            if cur is None:
                return {}
            cur.execute(
                "SELECT hash, vec FROM vectors WHERE model = %s AND hash = ANY(%s)",
                (model, hashes),
            )
            return {str(h): bytes(v) for h, v in cur.fetchall()}  # type: ignore[call-overload]  # psycopg rows are tuples of object

    def put_vectors(self, model: str, rows: list[NewVector]) -> None:
        """A vector replaced gets a new id, as INSERT OR REPLACE gives it a new rowid: a
        cached matrix sees the generation change (vector_generation)."""
        last = {(row[0], row[1]): row for row in rows}  # the last of an owner's wins
        owners = [o for o, _ in last]
        ids = [i for _, i in last]
        with self._write() as cur:
            cur.execute(
                "DELETE FROM vectors v USING unnest(%s::text[], %s::bigint[]) AS u(owner, id) "
                "WHERE v.model = %s AND v.owner = u.owner AND v.owner_id = u.id",
                (owners, ids, model),
            )
            blobs = [r[3] for r in last.values()]
            # with pgvector, each vector in its form too (None: one it would refuse)
            forms = [pgvector.blob_form(b) for b in blobs] if self._pgvector else None
            cur.execute(
                "INSERT INTO vectors (model, owner, owner_id, hash, vec"
                + (", embedding" if forms is not None else "")
                + ") SELECT %s, u.owner, u.id, u.hash, u.vec"
                + (", u.e" if forms is not None else "")
                + " FROM unnest(%s::text[], %s::bigint[], %s::text[], %s::bytea[]"
                + (", %b::vector[]" if forms is not None else "")
                + ") WITH ORDINALITY AS u(owner, id, hash, vec"
                + (", e" if forms is not None else "")
                + ", n) WHERE (u.owner = 'chunk' AND EXISTS (SELECT 1 FROM chunks c WHERE "
                "c.id = u.id)) OR (u.owner = 'fact' AND EXISTS (SELECT 1 FROM facts f WHERE "
                "f.id = u.id AND f.status = 'active')) ORDER BY u.n",
                (model, owners, ids, [r[2] for r in last.values()], blobs)
                + ((forms,) if forms is not None else ()),
            )
            if len(last) >= ANALYZE_AFTER:
                self._analyze = True

    def vector_generation(self, model: str) -> VectorGeneration:
        from ..rows_cold import VectorGeneration

        with self._read() as cur:
            if cur is None:
                return VectorGeneration(0, 0, 0)
            cur.execute(
                "SELECT count(*), coalesce(max(id), 0) FROM vectors WHERE model = %s", (model,)
            )
            row = cur.fetchone()
        assert row is not None
        # ids come from a sequence, never reused: the count and the top id tell every change
        return VectorGeneration(_int(row[0]), _int(row[1]), 0)

    def iter_vectors(self, model: str, after: int = 0) -> Iterator[StoredVector]:
        from ..rows_cold import StoredVector

        with self._read() as cur:
            if cur is None:
                return
            cur.execute(
                "SELECT owner, owner_id, vec FROM vectors WHERE model = %s AND id > %s ORDER BY id",
                (model, after),
            )
            rows = cur.fetchall()
        for owner, owner_id, vec in rows:
            yield StoredVector(str(owner), _int(owner_id), bytes(vec))  # type: ignore[call-overload]  # psycopg rows are tuples of object

    def ranks_vectors(self) -> bool:
        with self._read() as cur:
            return cur is not None and self._pgvector

    def rank_vectors(
        self,
        model: str,
        question: bytes,
        want: int,
        within: VectorFilter | None = None,
    ) -> list[RankedVector] | None:
        """With pgvector, the server ranks (pgvector.py: an exact scan by inner product, as
        the Python ranking's matrix product); without it, None."""
        with self._read() as cur:
            if cur is None:
                return []
            form = pgvector.blob_form(question) if self._pgvector else None
            if form is None:
                return None
            where: str = ""
            extra: tuple[object, ...] = ()
            if within is not None:
                kinds, category, since = within
                # IN, not a correlated EXISTS: the planner hashes the kept ids once. It
                # turns an EXISTS into that itself, but not over a table under row-level
                # security (schema.secure): there it looked a fact up once a vector
                where = (
                    " AND ((v.owner = 'fact' AND 'fact' = ANY(%s) AND v.owner_id IN (SELECT "
                    "f.id FROM facts f WHERE f.status = 'active' AND (%s::text IS NULL OR "
                    "f.category = %s) AND (%s::text IS NULL OR f.created >= %s))) OR "
                    "(v.owner = 'chunk' AND %s::text IS NULL AND v.owner_id IN (SELECT c.id "
                    "FROM chunks c WHERE c.kind = ANY(%s) AND (%s::text IS NULL OR "
                    "coalesce(c.date, '') >= %s))))"
                )
                chunk_kinds = [k for k in kinds if k != "fact"]
                extra = (list(kinds), category, category, since, since, category, chunk_kinds,
                         since, since)  # fmt: skip
            cur.execute(
                "SELECT v.owner, v.owner_id, v.embedding <#> %b AS d FROM vectors v "
                "WHERE v.model = %s AND v.embedding IS NOT NULL AND "
                f"vector_dims(v.embedding) = %s{where} ORDER BY d, v.owner, v.owner_id LIMIT %s",
                (form, model, len(question) // 4, *extra, want),
            )
            from ..rows_cold import RankedVector

            return [RankedVector(str(o), _int(i), -float(str(d))) for o, i, d in cur.fetchall()]

    def score_vectors(
        self, model: str, question: bytes, keys: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], float]:
        """The inner product of the question with these owners' vectors (with pgvector;
        without it, or an owner with no vector of this size: absent)."""
        if not keys:
            return {}
        with self._read() as cur:
            form = pgvector.blob_form(question) if self._pgvector else None
            if cur is None or form is None:
                return {}
            cur.execute(
                "SELECT v.owner, v.owner_id, v.embedding <#> %b FROM vectors v JOIN "
                "unnest(%s::text[], %s::bigint[]) AS u(owner, id) ON v.owner = u.owner AND "
                "v.owner_id = u.id WHERE v.model = %s AND v.embedding IS NOT NULL AND "
                "vector_dims(v.embedding) = %s",
                (form, [k[0] for k in keys], [k[1] for k in keys], model, len(question) // 4),
            )
            return {(str(o), _int(i)): -float(str(d)) for o, i, d in cur.fetchall()}

    def vector_models(self) -> dict[str, int]:
        with self._read() as cur:
            if cur is None:
                return {}
            cur.execute("SELECT model, count(*) FROM vectors GROUP BY model")
            return {str(m): _int(n) for m, n in cur.fetchall()}

    def drop_vectors(self, keep: str) -> int:
        with self._write() as cur:
            cur.execute("DELETE FROM vectors WHERE model != %s", (keep,))
            return int(cur.rowcount)

    # -- the archive (export / import) ---------------------------------------------------

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """One repeatable-read transaction: every read inside sees one state of the scope."""
        with self._lock:
            cur = self._conn()
            if cur is None or self._db is None:
                yield
                return
            with self._translated("read"), self._db.transaction():
                cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                yield

    def schema_version(self) -> int:
        with self._read() as cur:
            if cur is None or self._db is None:
                return LATEST
            return self._version(self._db)

    def latest_schema(self) -> int:
        return LATEST

    def archive_counts(self) -> dict[str, int]:
        with self._read() as cur:
            if cur is None:
                return dict.fromkeys(TABLES, 0)
            found = {}
            for kind, (table, _, _) in TABLES.items():
                cur.execute(f"SELECT count(*) FROM {table}")
                row = cur.fetchone()
                found[kind] = 0 if row is None else _int(row[0])
            return found

    def archive_rows(self, kind: str) -> Iterator[Row]:
        table, columns, order = TABLES[kind]
        names = ARCHIVE_FIELDS[kind]
        with self._read() as cur:
            if cur is None:
                return
            cur.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY {order}")
            rows = cur.fetchall()
        for row in rows:
            yield dict(zip(names, row, strict=True))

    def existing_keys(self, kind: str, keys: list[str]) -> set[str]:
        if not keys:
            return set()
        table, column = TABLES[kind][0], KEYS[kind]
        with self._read() as cur:
            if cur is None:
                return set()
            cur.execute(f"SELECT {column} FROM {table} WHERE {column} = ANY(%s)", (keys,))
            return {str(k) for (k,) in cur.fetchall()}

    def fact_identities(self) -> dict[FactIdentity, int]:
        from ..rows_cold import FactIdentity

        with self._read() as cur:
            if cur is None:
                return {}
            cur.execute("SELECT category, content, created, id FROM facts ORDER BY id DESC")
            return {FactIdentity(str(c), str(t), str(w)): _int(i) for c, t, w, i in cur.fetchall()}

    def restore_rows(self, rows: dict[str, list[Row]]) -> None:
        from .schema import PAST_KEY

        with self._write() as cur:
            past = [r for r in rows.get("kv", []) if str(r.get("key")).startswith(PAST_KEY)]
            if past:  # an export of schema 11 holds the view's past hashes as values
                rows = {**rows, "kv": [r for r in rows["kv"] if r not in past]}
                cur.executemany(
                    "INSERT INTO document_past (path, hashes) VALUES (%s, %s) "
                    "ON CONFLICT (path) DO NOTHING",  # the scope's own are newer
                    [(str(r["key"])[len(PAST_KEY) :], r.get("value")) for r in past],
                )
            for kind, found in rows.items():
                if not found:
                    continue
                table, columns, order = TABLES[kind]
                names = ARCHIVE_FIELDS[kind]
                keys = order
                others = [c for c in columns if c not in [k.strip() for k in keys.split(",")]]
                update = ", ".join(f"{c} = excluded.{c}" for c in others)
                cur.executemany(
                    f"INSERT INTO {table} ({', '.join(columns)}) "
                    f"VALUES ({', '.join(['%s'] * len(names))}) ON CONFLICT ({keys}) "
                    + (f"DO UPDATE SET {update}" if update else "DO NOTHING"),
                    [tuple(row.get(name) for name in names) for row in found],
                )

    # -- the read-only look (doctor) -----------------------------------------------------

    def inspect(self) -> DatabaseHealth:
        """The scope's schema version, its size on disk, and the lexical index checked
        against the rows it indexes (its documents, one per active fact, superseded fact
        and chunk; its statistics, the sum of its documents)."""
        from ..rows_cold import DatabaseHealth

        with self._read("check") as cur:
            if cur is None or self._db is None:
                raise NotFoundError(f"scope {self.scope} does not exist in {self.path}")
            schema = self._version(self._db)
            problems: list[str] = []
            for idx, what, source in (
                (lexical.FACTS, "active facts", "SELECT id FROM facts WHERE status = 'active'"),
                (lexical.PAST, "superseded facts",
                 "SELECT id FROM facts WHERE status = 'superseded'"),
                (lexical.CHUNKS, "chunks", "SELECT id FROM chunks"),
                (lexical.GROUPS, "search groups", "SELECT id FROM search_groups"),
            ):  # fmt: skip
                cur.execute(
                    f"SELECT (SELECT count(*) FROM (({source}) EXCEPT "
                    "(SELECT doc FROM lex_docs WHERE idx = %s)) a), "
                    "(SELECT count(*) FROM ((SELECT doc FROM lex_docs WHERE idx = %s) EXCEPT "
                    f"({source})) b), "
                    "(SELECT count(*) FROM lex_docs WHERE idx = %s), "
                    "(SELECT coalesce(sum(len), 0) FROM lex_docs WHERE idx = %s), "
                    "(SELECT nrow FROM lex_stats WHERE idx = %s), "
                    "(SELECT ntoken FROM lex_stats WHERE idx = %s)",
                    (idx,) * 6,
                )
                row = cur.fetchone()
                assert row is not None
                missing, extra, docs, tokens = (_int(v) for v in row[:4])
                stats = (_int(row[4] or 0), _int(row[5] or 0))
                if missing or extra:
                    problems.append(
                        f"the lexical index of {what} is out of step with its rows "
                        f"({missing} missing, {extra} extra)"
                    )
                elif stats != (docs, tokens):
                    problems.append(f"the lexical statistics of {what} are out of step")
            cur.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
                "AND c.relkind = 'r'",
                (self.schema,),
            )
            size = cur.fetchone()
        return DatabaseHealth(
            problems[:20] or ["ok"], schema, LATEST, 0 if size is None else _int(size[0]), 0
        )
