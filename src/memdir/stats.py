"""`memdir stats` (D2): how much memory there is, tier by tier, and how much of what was
logged has been distilled."""

from __future__ import annotations

import os

from .paths import Layout
from .records import Record
from .storage import files

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .storage.base import Store


class Stats(Record):
    daily_files: int
    daily_bytes: int
    entries: int
    entry_bytes: int
    facts_active: int
    facts_superseded: int
    facts_removed: int
    fact_chars: int
    procedures: int
    procedure_bytes: int
    task_note_files: int
    task_note_bytes: int
    hot_chars: int
    hot_cap: int
    # (global entries + active facts) / (daily logs + task notes): how much of the raw log
    # has been condensed into durable memory; None before anything was logged
    distill_ratio: float | None

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


def collect(layout: Layout, store: Store, hot_text: str, hot_cap: int) -> Stats:
    daily_n, daily_b = _folder(layout, os.path.join(layout.memory_dir, "daily"))
    entries_n, entries_b = _folder(layout, layout.global_dir)
    procs_n, procs_b = _folder(layout, layout.procedures_dir)
    notes_n, notes_b = _folder(layout, layout.tasks_dir)
    facts = store.size_of_facts()
    active_n, active_chars = facts.get("active", (0, 0))
    raw = daily_b + notes_b
    ratio = round((entries_b + active_chars) / raw, 3) if raw else None
    return Stats(
        daily_n,
        daily_b,
        entries_n,
        entries_b,
        active_n,
        facts.get("superseded", (0, 0))[0],
        facts.get("removed", (0, 0))[0],
        active_chars,
        procs_n,
        procs_b,
        notes_n,
        notes_b,
        len(hot_text),
        hot_cap,
        ratio,
    )


def _folder(layout: Layout, folder: str) -> tuple[int, int]:
    """(number, total bytes) of the .md files in a folder of the memory root (X1)."""
    count = size = 0
    for entry in files.scandir(folder, root=layout.memory_dir):
        if entry.name.endswith(".md") and entry.is_file():
            count += 1
            size += entry.stat().st_size
    return count, size
