"""Mechanism only: rows, indexes, files and locks. No caps, budgets or categories here.

`open_store` is how everything above gets its Store (base.py): it chooses the backend and
imports it only then, so a command that never opens the store never pays for it.
"""

from __future__ import annotations

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


BACKENDS = ("sqlite",)  # the stores open_store knows; tests/test_store_contract.py runs each


def open_store(
    layout: Layout, settings: Settings, read_only: bool = False, *, backend: str = "sqlite"
) -> Store:
    """The store of this memory. Cheap: nothing is opened until the first read or write.
    `read_only`: a look only (doctor): never creates, migrates or writes, even a cache."""
    if backend != "sqlite":
        from ..errors import ValidationError

        raise ValidationError(f"unknown store backend {backend!r}: use {', '.join(BACKENDS)}")
    from .sqlite import SQLiteStore

    return SQLiteStore(
        layout.db,
        busy_timeout_ms=settings.busy_timeout_ms,
        create=settings.enabled,
        read_only=read_only,
    )


def latest_schema() -> int:
    """The schema version this memdir writes (an export records it), with nothing opened."""
    from .sqlite.migrations import MIGRATIONS

    return MIGRATIONS[-1][0]
