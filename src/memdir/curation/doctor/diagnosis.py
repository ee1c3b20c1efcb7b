"""Running doctor: every check read-only (`diagnose`), the safe repairs (`repair`), and
both in turn (`run`)."""

from __future__ import annotations

import time

from ... import entries
from ...search import index
from ...storage import open_store
from .checks import (
    check_duplicates,
    check_embeddings,
    check_entries,
    check_forks,
    check_heartbeat,
    check_hot,
    check_index,
    check_procedures,
    check_stale,
    check_tasks,
)
from .disk import (
    check_database,
    check_layout,
    check_team_database,
    check_text,
    remove_temps,
    scan_root,
)
from .report import SEVERITIES, Finding, Report, checked

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ...memory import Memory
    from ...storage.base import Store

STALE_DAYS = 90
# checks that rebuilding MEMORY.md (with the entry cache) repairs, those that need the
# search index synced too (only reported when memory.db can be read), and the T4 sweep's
REBUILT = {"entries.index", "entries.cache"}
REINDEXED = {"entries.cache", "index.search", "db.schema"}
SWEPT = {"tasks.orphan", "tasks.expired"}


def run(memory: Memory, *, fix: bool = False, stale_days: int = STALE_DAYS) -> Report:
    """Diagnose; with `fix`, repair what is safe, then diagnose again: the report holds
    what remains and what was done."""
    from ...numbers import MAX_DAYS, check_int

    stale_days = check_int(stale_days, "stale days (--stale-days)", high=MAX_DAYS)
    started = time.perf_counter()
    if fix:
        memory.require_writable("memory (doctor --fix)")  # before anything: a subagent cannot fix
    report = diagnose(memory, stale_days=stale_days)
    done: list[str] = []
    if fix and any(f.fixable for f in report.findings):
        done = repair(memory, report)
        report = diagnose(memory, stale_days=stale_days)
    elapsed = round((time.perf_counter() - started) * 1000, 1)
    return report._replace(fixed=done, elapsed_ms=elapsed)


def diagnose(memory: Memory, *, stale_days: int = STALE_DAYS) -> Report:
    """Every check, read-only (see the module docstring)."""
    started = time.perf_counter()
    layout = memory.layout
    found: list[Finding] = []
    store = open_store(layout, memory.settings, read_only=True)
    view = _view(memory, store)
    try:
        settings = memory.settings
        database = (
            check_team_database(settings.storage_url, settings.storage_scope, store, found)
            if settings.storage_url
            else check_database(layout, store, found)
        )
        usable = database.get("usable", False)
        scan = scan_root(layout)
        check_layout(layout, scan, found)
        skip = check_text(layout, scan, found) | {rel.rstrip("/") for rel in scan.outside}
        checked("hot memory", found, lambda: check_hot(memory, found))
        checked("heartbeat state", found, lambda: check_heartbeat(memory, found))
        checked("global entries", found, lambda: check_entries(view, usable, skip, found))
        if usable:
            checked("search index", found, lambda: check_index(layout, store, skip, found))
        checked("procedures", found, lambda: check_procedures(view, found))
        if usable:
            checked("task notes", found, lambda: check_tasks(view, scan, stale_days, found))
            checked("duplicates", found, lambda: check_duplicates(view, found))
            checked("stale facts", found, lambda: check_stale(view, stale_days, found))
            checked("forked facts", found, lambda: check_forks(view, found))
            checked(
                "embeddings",
                found,
                lambda: database.update(embeddings=check_embeddings(view, found)),
            )
    finally:
        store.close()
    found.sort(key=lambda f: SEVERITIES.index(f.severity))
    database.pop("usable", None)
    elapsed = round((time.perf_counter() - started) * 1000, 1)
    return Report(layout.memory_dir, found, [], database, elapsed)


def repair(memory: Memory, report: Report) -> list[str]:
    """The safe repairs for the report's fixable findings; returns what was done."""
    memory.require_writable("memory (doctor --fix)")
    layout, checks = memory.layout, {f.check for f in report.findings if f.fixable}
    done = []
    for finding in report.findings:
        if finding.check == "layout.temp":
            done += remove_temps(layout, [str(rel) for rel in finding.where])
    pruned = memory.prune() if checks & SWEPT else []
    done += [f"removed {p.path} ({p.reason}): the retention sweep (T4)" for p in pruned]
    if checks & (REBUILT | REINDEXED) or pruned:
        rebuilt = entries.reindex(layout, memory.store)
        done.append(f"rebuilt MEMORY.md and the entry cache from {len(rebuilt):,} entry file(s)")
    if checks & REINDEXED or pruned:
        # index.sync rather than Memory.reindex: that one also embeds every missing vector,
        # which takes minutes on a big store and repairs nothing
        chunked = index.sync(layout, memory.store, full=True)
        done.append(f"re-indexed {chunked:,} file(s) for search")
    return done


def _view(memory: Memory, store: Store) -> Memory:
    """The same Memory (layout, settings, clock, session) reading through `store`."""
    import copy

    view = copy.copy(memory)
    view.store = store
    from ...storage.documents import open_documents

    view.docs = open_documents(memory.layout.memory_dir, store)
    return view
