"""What an export archive is made of (its format number, the kinds of its records, the two
roots its files come from): the one place that both the archive's writer (archive.py) and
its checker (archive_check.py) read, so neither imports the other back."""

from __future__ import annotations

from ..storage.documents import VIEW_STATE
from ..storage.rows import ARCHIVE_KINDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..paths import Layout

FORMAT = 1  # the archive format this module writes and reads
ROW_KINDS = ARCHIVE_KINDS  # fact, fact_usage, task, session, session_write, kv
KINDS = ("file", *ROW_KINDS)
ROOTS = ("memory", "state")
# the database and what sits beside it (memory.db-hits: the hits searches left to record),
# and in team mode the view's record of what it last rendered on this machine (W1): another
# store's, imported, would make the view take its rows' files for hand edits
DB_FILES = (
    "memory.db",
    "memory.db-wal",
    "memory.db-shm",
    "memory.db-journal",
    "memory.db-hits",
    VIEW_STATE,
)
DERIVED = "MEMORY.md"


def latest_schema() -> int:
    from ..storage import latest_schema as latest

    return latest()


def root_dir(layout: Layout, root: str) -> str:
    return layout.memory_dir if root == "memory" else layout.state_dir
