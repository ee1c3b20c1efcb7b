"""Whole-table reads and writes for `memdir export` / `memdir import` (archive.py)."""

from __future__ import annotations

import contextlib
import sqlite3


class ArchiveRows:
    """Mixed into SQLiteStore."""

    def _conn(self) -> sqlite3.Connection | None:
        raise NotImplementedError

    def _write(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _translated(self, doing: str) -> contextlib.AbstractContextManager[None]:
        raise NotImplementedError
