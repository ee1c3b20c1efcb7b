"""Task notes (T1-T4): memory/tasks/<id>.md, append-only, one timestamped line per note,
and the retention sweep. The registry (state, parent, times) lives in memory.db.

A note is `- <UTC time> [workflow/step] (agent) content`; the lines of a multi-line note
after the first are indented two spaces, so a line at column 0 always starts a note.
"""

from __future__ import annotations

import os
import re
import stat

from .clock import epoch
from .errors import ValidationError
from .models import TASK_STATES, Note, Pruned, Task
from .paths import Layout, is_task_id
from .storage import files, watched
from .storage.documents import Documents

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .storage.base import Store

NOTE_RE = re.compile(
    r"^- (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) (?:\[([^\]\n]*)\] )?(?:\(([^)\n]*)\) )?(.*)$"
)
MAX_LINEAGE = 64  # a parent chain deeper than this is a cycle or a mistake
END_STATES = TASK_STATES[1:]


def check_end_state(state: str) -> str:
    if state not in END_STATES:
        raise ValidationError(f"bad task state {state!r}: a task ends {', '.join(END_STATES)}")
    return state


def format_note(
    now: str, content: str, workflow: str | None, step: str | None, agent: str | None
) -> str:
    from .quoting import one_line  # a tag cannot end its line or its brackets early

    where = "/".join(one_line(part) for part in (workflow, step) if part)
    tag = f"[{where}] " if where else ""
    who = f"({one_line(agent)}) " if agent else ""
    first, *rest = content.strip().split("\n")
    return f"- {now} {tag}{who}{first}" + "".join(f"\n  {line}" for line in rest) + "\n"


def parse_notes(task: str, text: str) -> list[Note]:
    """The notes of one file, in file order. A hand-written line becomes an untimed note."""
    notes: list[Note] = []
    for line in text.split("\n"):
        match = NOTE_RE.match(line)
        if match:
            when, where, agent, content = match.groups()
            workflow, _, step = (where or "").partition("/")
            notes.append(Note(task, when, content, workflow or None, step or None, agent))
        elif line.startswith("  ") and notes:
            notes[-1] = notes[-1]._replace(content=notes[-1].content + "\n" + line[2:])
        elif line.strip():
            notes.append(Note(task, "", line.strip()))
    return notes


def add_note(
    layout: Layout,
    task: str,
    content: str,
    now: str,
    workflow: str | None,
    step: str | None,
    agent: str | None,
    docs: Documents | None = None,
) -> bool:
    """T1/T2: append a note; False when the same content is noted already (a retry). A
    read-modify-write of the document (in team mode the stored row, W1)."""
    path = layout.task_notes(task)
    wanted = _same(content)
    added = []

    def change(held: str | None) -> str | None:
        current = held or ""
        if any(_same(note.content) == wanted for note in parse_notes(task, current)):
            return held
        if current and not current.endswith("\n"):
            current += "\n"
        added.append(True)
        return current + format_note(now, content, workflow, step, agent)

    (docs or Documents(layout.memory_dir)).change(path, f"task-{task}", change)
    return bool(added)


def notes(layout: Layout, task: str) -> list[Note]:
    """The task's notes; a process that lives on keeps them while inotify says tasks/ is
    unchanged (storage/watched.py), unless the file is a link (its changes raise no event
    there)."""
    path = layout.task_notes(task)

    def read() -> tuple[tuple[Note, ...], bool]:
        text = files.read_inside(layout.memory_dir, path, f"tasks/{task}.md")
        try:
            info = os.lstat(path)
        except OSError:
            plain = text is None  # no file: kept until one is made
        else:
            plain = stat.S_ISREG(info.st_mode) and info.st_nlink == 1
        return tuple(parse_notes(task, text or "")), plain

    found = watched.kept(layout.tasks_dir, f"notes:{task}", read)
    return list(found) if isinstance(found, tuple) else []


def all_notes(layout: Layout) -> list[Note]:
    """Every task's notes (V2), task by task."""
    out: list[Note] = []
    for task, path in _note_files(layout):
        text = files.read_inside(layout.memory_dir, path, f"tasks/{task}.md")
        out += parse_notes(task, text or "")
    return out


def lineage(tasks: dict[str, Task], task: str) -> list[str]:
    """T3: the task, its parent, its grandparent... (ids; the first may be unregistered)."""
    chain = [task]
    while len(chain) < MAX_LINEAGE:
        parent = tasks[chain[-1]].parent_id if chain[-1] in tasks else None
        if parent is None or parent in chain:
            break
        chain.append(parent)
    return chain


def prune(
    layout: Layout,
    store: Store,
    now: float,
    retention: float,
    dry_run: bool,
    docs: Documents | None = None,
) -> list[Pruned]:
    """T4: remove the notes of tasks that ended more than `retention` seconds ago and have
    no running descendant; notes of ids the registry does not know go by file age. Each
    removal goes through the documents (in team mode the stored row, W1)."""
    tasks = {t.id: t for t in store.all_tasks()}
    children: dict[str, list[str]] = {}
    for t in tasks.values():
        if t.parent_id is not None:
            children.setdefault(t.parent_id, []).append(t.id)
    pruned = []
    for task_id, path in _note_files(layout):
        reason = _expired(tasks.get(task_id), path, tasks, children, now, retention)
        if reason is None:
            continue
        pruned.append(Pruned(task_id, os.path.relpath(path, layout.memory_dir), reason))
        if not dry_run:
            (docs or Documents(layout.memory_dir)).remove(path, f"task-{task_id}")
    return pruned


def _expired(
    task: Task | None,
    path: str,
    tasks: dict[str, Task],
    children: dict[str, list[str]],
    now: float,
    retention: float,
) -> str | None:
    if task is None:
        try:
            age = now - os.path.getmtime(path)
        except OSError:
            return None
        return f"unknown task, untouched for {age / 3600:.0f}h" if age > retention else None
    if task.state == "running" or task.ended is None:
        return None
    if now - _epoch(task.ended) <= retention:
        return None
    if _running_descendant(task.id, tasks, children):
        return None
    return f"{task.state} at {task.ended}"


def _running_descendant(
    task_id: str, tasks: dict[str, Task], children: dict[str, list[str]]
) -> bool:
    stack, seen = list(children.get(task_id, [])), {task_id}
    while stack:
        child = stack.pop()
        if child in seen:
            continue
        seen.add(child)
        if tasks[child].state == "running":
            return True
        stack.extend(children.get(child, []))
    return False


def _note_files(layout: Layout) -> list[tuple[str, str]]:
    names = files.listdir(layout.tasks_dir, root=layout.memory_dir)  # X1
    return [
        (n[:-3], os.path.join(layout.tasks_dir, n))
        for n in sorted(names)
        if n.endswith(".md") and is_task_id(n[:-3])
    ]


def _epoch(iso: str) -> float:
    return epoch(iso)


def _same(content: str) -> str:
    return " ".join(content.split())
