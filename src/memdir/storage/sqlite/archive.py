"""Whole-table reads and writes for `memdir export` / `memdir import` (archive.py).

Only the tables that hold memory travel: facts (every column but `norm`, derived from the
content), fact_usage, tasks, sessions, session_writes and kv. The rest — chunks, files,
vectors, entry_cache, fact_sketch and the FTS5 tables — is derived and rebuilt on import.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..rows import ARCHIVE_FIELDS, FACT_FIELDS
from .connection import Connection

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..rows_cold import FactIdentity

# archive kind -> (table, columns, order); facts take their columns from rows.FACT_FIELDS
TABLES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "fact": ("facts", (), "id"),
    "fact_usage": ("fact_usage", ("fact_id", "hits", "last_hit"), "fact_id"),
    "task": ("tasks", ("id", "parent_id", "state", "started", "ended"), "id"),
    "session": ("sessions", ("id", "surface", "parent_id", "started", "ended"), "id"),
    "session_write": ("session_writes", ("session_id", "kind", "n"), "session_id, kind"),
    "kv": ("kv", ("key", "value"), "key"),
}
# the record each table is keyed by, to tell what a store holds already
KEYS = {"task": "id", "session": "id", "kv": "key"}

Row = dict[str, object]


def columns(kind: str) -> tuple[str, ...]:
    if kind == "fact":
        return FACT_FIELDS
    return TABLES[kind][1]


def fields(kind: str) -> tuple[str, ...]:
    """The names of a row's values in an archive record (its columns, but session_writes'
    `kind`, which travels as `what`)."""
    return ARCHIVE_FIELDS[kind]


class ArchiveRows(Connection):
    """Part of SQLiteStore."""

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction: every count and row read inside it comes from the same
        state of the database, whatever other processes write meanwhile (WAL)."""
        db = self._conn()
        if db is None:
            yield
            return
        with self._translated("read"):
            db.execute("BEGIN")
        try:
            yield
        finally:
            with self._translated("read"):
                db.execute("COMMIT")

    def latest_schema(self) -> int:
        from .migrations import MIGRATIONS

        return MIGRATIONS[-1][0]

    def schema_version(self) -> int:
        db = self._conn()
        if db is None:
            return self.latest_schema()
        with self._translated("read"):
            return int(db.execute("PRAGMA user_version").fetchone()[0])

    def archive_counts(self) -> dict[str, int]:
        """kind -> how many rows the store holds of it."""
        db = self._conn()
        if db is None:
            return dict.fromkeys(TABLES, 0)
        with self._translated("read"):
            return {
                kind: int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
                for kind, (table, _, _) in TABLES.items()
            }

    def archive_rows(self, kind: str) -> Iterator[Row]:
        """Every row of one kind, as a field -> value dict, in a stable order (facts by id).
        Streamed from the cursor: a store of a million facts is never held in memory."""
        db = self._conn()
        if db is None:
            return
        table, _, order = TABLES[kind]
        names = fields(kind)
        with self._translated("read"):
            cursor = db.execute(f"SELECT {', '.join(columns(kind))} FROM {table} ORDER BY {order}")
        while True:
            # fetched in batches outside the yield: an error of the consumer (a broken
            # pipe) must reach it as it is, not as a database error
            with self._translated("read"):
                batch = cursor.fetchmany(500)
            if not batch:
                return
            for row in batch:
                yield dict(zip(names, row, strict=True))

    def existing_keys(self, kind: str, keys: list[str]) -> set[str]:
        """Which of `keys` (task ids, session ids, kv keys) the store holds already."""
        db = self._conn()
        if db is None or not keys:
            return set()
        table, column = TABLES[kind][0], KEYS[kind]
        found: set[str] = set()
        with self._translated("read"):
            for start in range(0, len(keys), 500):
                part = keys[start : start + 500]
                found.update(
                    row[0]
                    for row in db.execute(
                        f"SELECT {column} FROM {table} WHERE {column} IN "
                        f"({', '.join('?' * len(part))})",
                        part,
                    )
                )
        return found

    def fact_identities(self) -> dict[FactIdentity, int]:
        """(category, content, created) -> id of every fact: the same record, imported
        twice, is found by what it says and when it was first said."""
        db = self._conn()
        if db is None:
            return {}
        with self._translated("read"):
            from ..rows_cold import FactIdentity

            rows = db.execute("SELECT category, content, created, id FROM facts ORDER BY id DESC")
            return {FactIdentity(cat, content, created): i for cat, content, created, i in rows}

    def restore_rows(self, rows: dict[str, list[Row]]) -> None:
        """One transaction: the rows of every kind but facts (fact_usage, task, session,
        session_write, kv; field -> value), as given."""
        with self._write() as db:
            for kind, found in rows.items():
                if not found:
                    continue
                table, names = TABLES[kind][0], fields(kind)
                db.executemany(
                    f"INSERT OR REPLACE INTO {table} ({', '.join(columns(kind))}) "
                    f"VALUES ({', '.join('?' * len(names))})",
                    [tuple(row.get(name) for name in names) for row in found],
                )
