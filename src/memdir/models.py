"""Typed values that cross module boundaries.

Records (NamedTuples) rather than frozen dataclasses: just as immutable and typed, but
`dataclasses` imports `inspect` (~14 ms), and the CLI is started many times a turn.
"""

from __future__ import annotations

from .records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CATEGORIES = ("preference", "convention", "decision", "learning")
SURFACES = ("cli", "repl", "telegram", "daemon", "scheduled", "mcp")


class Provenance(Record):
    """F5: who wrote a record."""

    session_id: str | None
    surface: str
    agent: str | None


class Fact(Record):
    id: int
    category: str
    content: str
    status: str  # active | superseded | removed
    created: str
    updated: str
    supersedes: int | None
    superseded_by: int | None
    session_id: str | None
    surface: str | None
    agent: str | None

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


class Procedure(Record):
    name: str
    path: str
    content: str
    description: str | None
    updated: str
    error: str | None = None  # set when the frontmatter is broken; the file is left as it is

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


class Hit(Record):
    """One search result (Q1): what it is, where it lives, and how well it matched."""

    kind: str  # fact | procedure
    content: str
    score: float
    id: int | None = None
    path: str | None = None
    name: str | None = None
    category: str | None = None
    date: str | None = None  # a fact's creation; a chunk's note, day or file date
    lines: tuple[int, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = self._asdict()
        return {
            k: (list(v) if isinstance(v, tuple) else v) for k, v in data.items() if v is not None
        }


class Session(Record):
    id: str
    surface: str
    parent_id: str | None
    started: str
    ended: str | None
    counts: dict[str, int]

    @property
    def is_subagent(self) -> bool:
        return self.parent_id is not None

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


class HotWrite(Record):
    """What a write to HOT.md did (H3): its size against the cap, and what was cut."""

    chars: int
    cap: int
    cut_chars: int
    warning: str | None

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


TASK_STATES = ("running", "done", "failed", "cancelled")


class Entry(Record):
    """A global entry (G1): memory/global/<name>.md. `content` is the body, when loaded."""

    name: str
    description: str
    path: str
    agent: str | None = None
    task: str | None = None
    workflow: str | None = None
    created: str | None = None
    updated: str | None = None
    content: str | None = None
    error: str | None = None  # broken frontmatter: the file is reported and left as it is

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self._asdict().items() if v is not None}


class Task(Record):
    """T3: one row of the task registry."""

    id: str
    parent_id: str | None
    state: str  # running | done | failed | cancelled
    started: str
    ended: str | None

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


class Note(Record):
    """T1: one line (or block) of memory/tasks/<id>.md."""

    task: str
    time: str
    content: str
    workflow: str | None = None
    step: str | None = None
    agent: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


class Applied(Record):
    """What one memorize request did (M4): created/updated an entry, noted, or skipped a
    duplicate note."""

    scope: str  # global | task
    target: str  # entry name or task id
    action: str  # created | updated | noted | duplicate

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


class Ingested(Record):
    """M4: the output with every marker block removed, what was applied, what was not."""

    output: str
    applied: list[Applied]
    warnings: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "output": self.output,
            "applied": [a.to_dict() for a in self.applied],
            "warnings": list(self.warnings),
        }


class Recalled(Record):
    """R1/R2: the injected context and what the budget kept of each section."""

    text: str
    entries_shown: int
    entries_total: int
    notes_shown: int
    notes_total: int

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


class Pruned(Record):
    """T4: a task-notes file the retention sweep removed (or would remove, dry run)."""

    task: str
    path: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()
