"""Backend-neutral access to a store's own tables for tests that look under the Store
protocol (W1): the same SQL on memory.db and on a PostgreSQL scope, `?` placeholders as
SQLite writes them (rewritten to psycopg's `%s` on PostgreSQL)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from storeconfig import set_storage, team_config

# the suite's PostgreSQL lanes (tests/conftest.py): every store is a scope of a database
TEAM = os.environ.get("MEMDIR_TEST_BACKEND", "sqlite") in ("postgres", "pgvector")


def rows(store: Any, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[tuple[Any, ...]]:
    """The rows of one statement (none for a statement that returns none)."""
    cur = store._require()
    if type(store).__name__ == "PostgresStore":
        cur.execute(sql.replace("?", "%s"), tuple(params))
        return [tuple(row) for row in cur.fetchall()] if cur.description else []
    found = cur.execute(sql, tuple(params))
    return [tuple(row) for row in found.fetchall()]


@contextlib.contextmanager
def writer_lock_held(store: Any) -> Iterator[None]:
    """Another writer holding the store's writer lock while the block runs, on a
    connection of its own: memory.db's `BEGIN EXCLUSIVE`, or on PostgreSQL the scope's
    advisory lock that every write takes first (storage/postgres/connection.py)."""
    if type(store).__name__ == "PostgresStore":
        import psycopg

        from memdir.storage.postgres.connection import LOCK_CLASS

        with psycopg.connect(store.url, autocommit=True) as holder:
            key = (LOCK_CLASS, store.schema)
            holder.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", key)
            try:
                yield
            finally:
                holder.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", key)
        return
    holder = sqlite3.connect(store.path, timeout=0)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        yield
    finally:
        holder.rollback()
        holder.close()


def look(url: str, scope: str = "default") -> Any:
    """A connection of its own (autocommit) to a scope of the database at `url`, set as a
    store of that scope sets its own (storage/postgres/connection.py): the search path, and
    the `memdir.scope` that the scope's row-level security admits (L4). Under a role the
    policies hold (the suite's, tests/conftest.py pg_url), a look without it reads no row:
    it reads this scope's rows, and no other's."""
    import psycopg

    from memdir.storage.postgres.schema import SETTING

    schema = f"memdir_{scope}"
    return psycopg.connect(
        url, autocommit=True, options=f"-c search_path={schema} -c {SETTING}={schema}"
    )


def store_made_for(memory_dir: Path) -> bool:
    """Whether a write made the store of the memory root `memory_dir`: memory.db there; in
    the PostgreSQL lanes the store is the database's scope, and the first write made the
    memory root, where the view of the tiers renders (W1)."""
    if TEAM:
        return memory_dir.is_dir()
    return (memory_dir / "memory.db").is_file()


def own_store(state_dir: Path) -> None:
    """Make the state dir `state_dir` (made if missing) a store of its own in the
    PostgreSQL lanes too, where one URL is one store: a scope of its own in its
    config.toml (W1, L4). On memory.db a state dir is a store of its own already."""
    state_dir.mkdir(parents=True, exist_ok=True)
    if TEAM:
        scope = "s" + hashlib.blake2b(str(state_dir).encode(), digest_size=8).hexdigest()
        team_config(state_dir)
        set_storage(state_dir, scope=scope)
