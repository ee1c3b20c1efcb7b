"""Mechanism only: rows, indexes, files and locks. No caps, budgets or categories here.

`open_store` is how everything above gets its Store (base.py): it chooses the backend and
imports it only then, so a command that never opens the store never pays for it.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    from .base import Store

    # What open_store reads of the caller's Layout and Settings (paths.py, settings.py sit
    # above storage, which never imports them): where the database is, and how to open it.
    class Layout(Protocol):
        @property
        def db(self) -> str: ...

    class Settings(Protocol):
        @property
        def busy_timeout_ms(self) -> int: ...
        @property
        def enabled(self) -> bool: ...
        @property
        def storage_url(self) -> str: ...
        @property
        def storage_scope(self) -> str: ...


# the stores open_store knows; tests/test_store_contract.py runs each
BACKENDS = ("sqlite", "postgres")


def backend_of(settings: Settings) -> str:
    """postgres when a database URL is configured ([storage] url, MEMDIR_DATABASE_URL)."""
    return "postgres" if settings.storage_url else "sqlite"


def open_store(
    layout: Layout,
    settings: Settings,
    read_only: bool = False,
    *,
    backend: str | None = None,
    leave_wal: bool = False,
) -> Store:
    """The store of this memory. Cheap: nothing is opened until the first read or write.
    `read_only`: a look only (doctor): never creates, migrates or writes, even a cache;
    `leave_wal` too: its close folds no WAL (SQLite: sqlite/connection.py).
    `backend`: the settings' (backend_of) unless named."""
    backend = backend_of(settings) if backend is None else backend
    if backend == "postgres":
        return _postgres(layout, settings, read_only)
    if backend != "sqlite":
        from ..errors import ValidationError

        raise ValidationError(f"unknown store backend {backend!r}: use {', '.join(BACKENDS)}")
    from .sqlite import SQLiteStore

    return SQLiteStore(
        layout.db,
        busy_timeout_ms=settings.busy_timeout_ms,
        create=settings.enabled,
        read_only=read_only,
        leave_wal=leave_wal,
    )


def _postgres(layout: Layout, settings: Settings, read_only: bool) -> Store:
    from ..errors import StorageError

    if not settings.storage_url:
        raise StorageError(
            "the postgres backend needs a database URL: set [storage] url in config.toml "
            "or MEMDIR_DATABASE_URL"
        )
    try:
        import psycopg  # noqa: F401  (the driver: its absence is told here, once)
    except ImportError as exc:
        from ..extras import install_command

        raise StorageError(
            "a database URL is configured but the PostgreSQL driver is not installed: "
            f"{install_command('postgres')}"
        ) from exc
    from .postgres.store import PostgresStore

    return PostgresStore(
        settings.storage_url,
        settings.storage_scope,
        busy_timeout_ms=settings.busy_timeout_ms,
        create=settings.enabled,
        read_only=read_only,
        memory_dir=os.path.dirname(layout.db),
    )


def latest_schema() -> int:
    """The schema version this memdir writes (an export records it), with nothing opened."""
    from .sqlite.migrations import MIGRATIONS

    return MIGRATIONS[-1][0]
