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
FACT_STATUSES = ("active", "superseded", "removed")
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
    valid_from: str | None  # when it began to hold
    valid_to: str | None  # when it was superseded or removed; None: it still holds
    # what the duplicate guard found when this fact was written (not stored)
    duplicate: bool = False  # an active fact said this already: this is that fact
    similar: tuple[Similar, ...] = ()
    hint: str | None = None
    # this supersede forked the history (F3): the other versions that hold beside this one
    forked: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = self._asdict()
        data["similar"] = [s.to_dict() for s in self.similar]
        data["forked"] = list(self.forked)
        if self.hint is None:
            del data["hint"]
        return data


SIMILAR_HOWS = ("exact", "lexical", "semantic")
APPLIED_ACTIONS = ("created", "updated", "unchanged", "noted", "duplicate")


class Similar(Record):
    """What a write resembles (X5: reported, never refused): what it is, which one, and
    how alike (0-1)."""

    kind: str  # fact | entry | procedure
    ref: int | str  # a fact's id, an entry's or procedure's name
    score: float
    # exact (an entry or procedure with the same body, case, Unicode form and spacing
    # aside) | lexical (Jaccard of content words) | semantic (cosine)
    how: str
    content: str = ""

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


class Procedure(Record):
    name: str
    path: str
    content: str
    description: str | None
    updated: str
    error: str | None = None  # set when the frontmatter is broken; the file is left as it is
    duplicate: bool = False  # the write changed nothing: the procedure held exactly this
    similar: tuple[Similar, ...] = ()
    hint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = self._asdict()
        data["similar"] = [s.to_dict() for s in self.similar]
        return data


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
    valid_to: str | None = None  # a search --as-of: when this (since superseded) fact ended
    # semantic or hybrid: it has no vector yet, so it was ranked by its words alone
    lexical_only: bool | None = None

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
    created: str | None = None  # `agent`, `task`, `workflow`: who created it (G2 keeps them)
    updated: str | None = None
    content: str | None = None
    error: str | None = None  # broken frontmatter: the file is reported and left as it is
    duplicate: bool = False  # the write changed nothing: the entry held exactly this
    similar: tuple[Similar, ...] = ()
    hint: str | None = None
    updated_by: str | None = None  # the agent of the latest update, when it named one

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self._asdict().items() if v is not None}
        if self.error is None:  # who created and who last updated: always both keys
            data.update(agent=self.agent, updated_by=self.updated_by)
        data["similar"] = [s.to_dict() for s in self.similar]
        if not self.duplicate:
            del data["duplicate"]
        if not self.similar:
            del data["similar"]
        return data


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
    """What one memorize request did (M4): created/updated an entry, left one unchanged
    (it held exactly this), noted, or skipped a duplicate note (a retry)."""

    scope: str  # global | task
    target: str  # entry name, task id, or the daily log (logged)
    action: str  # created | updated | unchanged | noted | duplicate | logged (daily log)
    hint: str | None = None  # what the duplicate guard found, and what to do
    similar: tuple[Similar, ...] = ()  # the other entries this one resembles (X5)

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self._asdict().items() if v is not None}
        data["similar"] = [s.to_dict() for s in self.similar]
        if not self.similar:
            del data["similar"]
        return data


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


class ImportItem(Record):
    """One thing an import brought in, or would (dry run), or left out and why."""

    kind: str  # fact | entry | procedure | hot | daily | identity | task | note | session ...
    target: str  # where it went: a fact id, an entry name, a path under the state dir
    source: str  # where it came from: a file, a line, a record id of the source
    reason: str | None = None  # why it was skipped (None: imported)
    note: str | None = None  # what else to know of an imported one, e.g. what it replaced

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self._asdict().items() if v is not None}


class ImportReport(Record):
    """What `memdir import` did (or, with dry_run, would do): imported and skipped items."""

    format: str  # memdir (an export) | claude-code | openclaw | mcp-memory | mem0 | afk
    source: str
    dry_run: bool
    imported: list[ImportItem]
    skipped: list[ImportItem]

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "source": self.source,
            "dry_run": self.dry_run,
            "imported": [i.to_dict() for i in self.imported],
            "skipped": [i.to_dict() for i in self.skipped],
        }
