"""`memdir doctor` (issue 7): what is wrong with a store, what to do about it, and with
`fix` the repairs that are safe to make without asking.

Each check reads through the library (entries, index, tasks, duplicates...), never around
it, and costs a few set-based queries and one scan of the memory root, so a 10k-fact
store is checked in tens of milliseconds (bench/doctor.py).

Without `fix` nothing is written, not even a cache: the database is read through its own
connection with `PRAGMA query_only` (writes fail inside SQLite) that never creates or
migrates it, so doctor works for a read-only subagent session and on a store whose
memory.db is missing or broken. The only trace SQLite leaves is its -wal/-shm pair, made
and removed again by the opening and closing of the connection, as any reader does.

`fix` repairs only what the files can always be trusted to rebuild: MEMORY.md, the entry
cache and the search index (derived from the files, G3/G4), the task notes the T4 sweep
would remove anyway, and temp files a killed writer left behind. It never cuts HOT.md,
edits a broken file, deletes a file it does not know or picks which duplicate to keep.

diagnosis.py runs the checks of disk.py (memory.db, the layout) and checks.py (what memory
holds) and the repairs; report.py holds what they find.
"""

from .diagnosis import STALE_DAYS, diagnose, repair, run
from .disk import ReadOnlyStore
from .report import SEVERITIES, Finding, Report

__all__ = [
    "SEVERITIES",
    "STALE_DAYS",
    "Finding",
    "ReadOnlyStore",
    "Report",
    "diagnose",
    "repair",
    "run",
]
