"""Distillation (D1): gather what was logged since the last distillation — daily logs and
the notes of tasks that ended — within a budget, for an agent to condense into global
entries or facts. `done` moves the watermark to the end of what was last handed out, so
nothing gathered-but-cut is skipped and nothing is handed out twice.
"""

from __future__ import annotations

import os
import time

from . import advice, daily
from .clock import epoch
from .paths import Layout
from .records import Record
from .storage import files

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .storage.base import Store

WATERMARK = "distill.watermark"
PENDING = "distill.pending"


def instruction() -> str:
    """What the agent is asked to do with the material, in the calls of its surface."""
    return (
        "Distill the material below into long-term memory. Keep only what will matter later: "
        "decisions and why, conventions, preferences, lessons learned. Write each as a global "
        "entry (a memorize block with scope global, a kebab-case name and a one-line "
        f"description) or as a fact ({advice.fact_add()}); skip what memory already holds "
        f"(search first: {advice.search()}). Then mark it distilled: {advice.distill_done()}."
    )


class Item(Record):
    kind: str  # daily | task
    path: str
    time: float
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": self.path,
            "time": _iso(self.time),
            "chars": len(self.text),
        }


class Distillation(Record):
    since: str | None
    until: str | None
    items: list[Item]
    left: int  # items that did not fit the budget: run distill again after --done
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "since": self.since,
            "until": self.until,
            "left": self.left,
            "items": [i.to_dict() for i in self.items],
            "text": self.text,
        }


def gather(layout: Layout, store: Store, max_chars: int) -> Distillation:
    watermark = _mark(store.get_value(WATERMARK))
    items = sorted(
        _daily_items(layout, watermark) + _task_items(layout, store, watermark),
        key=_key,
    )
    chosen: list[Item] = []
    intro = instruction()
    used = len(intro)
    for item in items:
        block = _block(item)
        if used + len(block) > max_chars:
            if not chosen:  # one item larger than the whole budget: hand out its head
                longest = _pointer(item, 0)  # the pointer is never longer than this
                room = max(0, max_chars - used - len(_block(item._replace(text=""))) - len(longest))
                cut = item._replace(text=item.text[:room] + _pointer(item, room))
                chosen.append(cut)
            break
        chosen.append(item)
        used += len(block)
    until = chosen[-1].time if chosen else None
    text = intro + "".join(_block(i) for i in chosen) if chosen else ""
    since = None if watermark is None else watermark[0]
    return Distillation(_iso(since), _iso(until), chosen, len(items) - len(chosen), text)


def mark_of(item: Item) -> str:
    """The watermark just past `item`: its time and its path, so that an item of the same
    time that did not fit the budget is still new next time."""
    return f"{item.time!r} {item.path}"


def mark_time(mark: str) -> float:
    return float(mark.split(" ", 1)[0])


def _mark(value: str | None) -> tuple[float, str] | None:
    if value is None:
        return None
    moment, _, path = value.partition(" ")
    return float(moment), path or "\U0010ffff"  # a bare time: everything at it was handed out


def _key(item: Item) -> tuple[float, str]:
    return item.time, item.path


def _pointer(item: Item, room: int) -> str:
    return f"\n(… {len(item.text) - room:,} chars more: read them with {advice.get(item.path)})"


def _block(item: Item) -> str:
    return f"\n\n### {item.path}\n{item.text.strip()}"


def _daily_items(layout: Layout, watermark: tuple[float, str] | None) -> list[Item]:
    found = []
    for date in daily.dates(layout):
        path = daily.path_of(layout, date)
        try:
            mtime = os.path.getmtime(path)
        except OSError:
            continue
        rel = _rel(path, layout)
        if watermark is None or (mtime, rel) > watermark:
            found.append(
                Item("daily", rel, mtime, files.read_text(path, root=layout.memory_dir) or "")
            )
    return found


def _task_items(layout: Layout, store: Store, watermark: tuple[float, str] | None) -> list[Item]:
    found = []
    for task in store.all_tasks():
        if task.ended is None:
            continue
        ended = epoch(task.ended)
        path = layout.task_notes(task.id)
        if watermark is not None and (ended, _rel(path, layout)) <= watermark:
            continue
        text = files.read_text(path, root=layout.memory_dir)
        if text:
            found.append(Item("task", _rel(path, layout), ended, text))
    return found


def _rel(path: str, layout: Layout) -> str:
    return os.path.relpath(path, layout.memory_dir)


def _iso(moment: float | None) -> str | None:
    return None if moment is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))
