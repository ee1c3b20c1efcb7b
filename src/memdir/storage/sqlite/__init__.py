"""The SQLite backend of the Store protocol (storage/base.py): one file, WAL, FTS5.

The only package that speaks SQL (with importers/afk.py, which reads another tool's
database). `open_store` (storage/__init__.py) is the one place that names SQLiteStore.
"""

from __future__ import annotations

from ..rows import FACT_FIELDS
from .archive import ArchiveRows
from .facts import FactRows
from .index import FACT_COLUMNS, IndexRows

__all__ = ["FACT_COLUMNS", "FACT_FIELDS", "SQLiteStore"]


class SQLiteStore(FactRows, IndexRows, ArchiveRows):
    """Every part of the store over one connection (connection.py)."""
