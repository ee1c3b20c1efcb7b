"""Backend-neutral access to a store's own tables for tests that look under the Store
protocol (W1): the same SQL on memory.db and on a PostgreSQL scope, `?` placeholders as
SQLite writes them (rewritten to psycopg's `%s` on PostgreSQL)."""

from __future__ import annotations

from typing import Any


def rows(store: Any, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[tuple[Any, ...]]:
    """The rows of one statement (none for a statement that returns none)."""
    cur = store._require()
    if type(store).__name__ == "PostgresStore":
        cur.execute(sql.replace("?", "%s"), tuple(params))
        return [tuple(row) for row in cur.fetchall()] if cur.description else []
    found = cur.execute(sql, tuple(params))
    return [tuple(row) for row in found.fetchall()]
