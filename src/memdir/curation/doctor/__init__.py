"""`memdir doctor` (N2): what is wrong with a store, what to do about it, and with
`fix` the repairs that are safe to make without asking.

Each check reads through the library (entries, index, tasks, duplicates...), never around
it, with a few set-based queries (no query per fact) and one scan of the memory root. At
10k facts the checks take ~45 ms, most of it SQLite's integrity_check; the duplicate
search (curation/duplicates.find_all) costs more, and far more once facts have vectors,
as it then compares every embedded fact with every other (bench/doctor.py has the figures).

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
from .report import SEVERITIES, Finding, Report

__all__ = [
    "SEVERITIES",
    "STALE_DAYS",
    "Finding",
    "Report",
    "diagnose",
    "repair",
    "run",
]
