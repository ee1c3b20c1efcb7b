"""The Memory facade's workspace and episodic memory (E, B, D): daily logs, boot, line
reads, heartbeat, distillation and stats. Mixed into Memory."""

from __future__ import annotations

import os

from .. import facts
from ..clock import iso
from ..errors import NotFoundError, ValidationError
from ..lazy import lazy
from ..paths import is_memory_file
from ..records import Record
from ..storage import files
from .base import MemoryBase

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .. import daily, distill, entries, heartbeat, hot, identity, stats
else:
    daily = lazy("memdir.daily")
    distill = lazy("memdir.distill")
    entries = lazy("memdir.entries")
    heartbeat = lazy("memdir.heartbeat")
    hot = lazy("memdir.hot")
    identity = lazy("memdir.identity")
    stats = lazy("memdir.stats")


_READABLE = (
    "get reads memory files only: HOT.md, MEMORY.md, global/<name>.md, procedures/<name>.md, "
    "tasks/<task-id>.md, daily/YYYY-MM-DD.md (under the memory root) and the identity files "
    "SOUL.md, USER.md, IDENTITY.md, AGENTS.md, TOOLS.md (in the state dir)"
)


class Lines(Record):
    """E4: lines of one memory file, numbered from 1."""

    path: str
    from_line: int
    lines: list[tuple[int, str]]
    total: int

    @property
    def text(self) -> str:
        return "".join(line + "\n" for _, line in self.lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "from_line": self.from_line,
            "total_lines": self.total,
            "lines": [{"n": n, "text": text} for n, text in self.lines],
        }


class WorkspaceMemory(MemoryBase):
    def daily_append(self, text: str, *, section: str | None = None) -> daily.DailyWrite:
        """E1: a timestamped entry in today's log (local time), under `## HH:MM` or `section`."""
        facts.check_content(text, self.settings.max_entry_bytes, "log entry")
        self.require_writable("the daily log")
        self.refuse_secrets("log entry", text=text, section=section)
        result = daily.append(self.layout, text, self.clock(), section)
        self._count("daily")
        self._embed_written(files=[os.path.join(self.layout.memory_dir, result.path)])
        return result

    def daily(self, date: str | None = None) -> str:
        """The log of `date` (YYYY-MM-DD, 'today' or 'yesterday'; default today)."""
        return self.daily_log(date)[1]

    def daily_log(self, date: str | None = None) -> tuple[str, str]:
        """(the local date as YYYY-MM-DD, its log): `date` as for daily()."""
        day = daily.resolve_date(date, self.clock())
        return day, daily.read(self.layout, day)

    def boot(self, *, subagent: bool | None = None) -> identity.Boot:
        """E3: the context a new session starts with. A subagent session (or subagent=True)
        gets the variant without the main-session-only parts (MEMORY.md)."""
        if subagent is None:
            subagent = self.read_only
        if not self.settings.enabled:
            return identity.Boot([], subagent)
        files, main_only = self.settings.boot_files, self.settings.boot_main_only
        shows_index = "MEMORY.md" in files and not (subagent and "MEMORY.md" in main_only)
        index = (
            "".join(
                entries.index_line(name, description) + "\n"
                for name, description, _ in entries.index(self.layout, self.store)
            )
            if shows_index
            else ""
        )
        return identity.boot(
            self.layout,
            files,
            main_only,
            self.clock(),
            subagent,
            index,
            self.settings.hot_cap_chars,
        )

    def get(self, path: str, *, from_line: int = 1, lines: int | None = None) -> Lines:
        """E4: exact lines of a file under the memory root, nothing outside it (X1)."""
        from ..numbers import MAX_LINES, check_int

        for value, what in ((from_line, "from_line"), (lines, "lines")):
            if value is not None:
                check_int(value, what, high=MAX_LINES)
        root, rel = self._memory_file(path)
        try:
            found, total = files.read_lines(os.path.join(root, rel), from_line, lines, root=root)
        except FileNotFoundError:
            where = "the state dir" if root != self.path else "the memory root"
            raise NotFoundError(f"no file {rel} under {where} {root}") from None
        except IsADirectoryError:
            raise ValidationError(f"{rel} is a folder: give a file") from None
        except ValueError:
            raise ValidationError(f"{rel} is not a text file") from None
        return Lines(rel, from_line, [(from_line + i, t) for i, t in enumerate(found)], total)

    def _memory_file(self, path: object) -> tuple[str, str]:
        """X1: (the root, the path relative to it) of a memory file `get` may read: a tier's
        file by the layout (L2) under the memory root, or an identity file of the state dir.
        Anything else, a project's .env or .git/config say, is refused: get is no file
        reader, whatever folder the memory root is."""
        from ..identity import IDENTITY_FILES

        if not isinstance(path, str) or not path.strip() or "\0" in path:
            raise ValidationError(f"bad path {path!r}: {_READABLE}")
        rel = self._relative(path, self.path)
        if rel is not None and is_memory_file(rel):
            return self.path, rel
        state_rel = self._relative(path, self.state.path) if os.path.isabs(path) else rel
        if state_rel in IDENTITY_FILES:
            return self.state.path, state_rel
        if rel is None or rel.split("/")[0] == "..":
            raise ValidationError(
                f"path {path!r} points outside the memory root {self.path}: {_READABLE}"
            )
        raise ValidationError(f"{path!r} is not a memory file: {_READABLE}")

    @staticmethod
    def _relative(path: str, root: str) -> str | None:
        """`path` relative to `root`, '/'-separated and normalised; None when an absolute
        path lies outside it (by its own spelling or the root's real path)."""
        if not os.path.isabs(path):
            return os.path.normpath(path).replace(os.sep, "/")
        for base in (os.path.abspath(root), os.path.realpath(root)):
            rel = os.path.relpath(os.path.normpath(path), base)
            if rel.split(os.sep)[0] != os.pardir:
                return rel.replace(os.sep, "/")
        return None

    def heartbeat_due(self) -> list[heartbeat.Check]:
        """B2: the checks that are due now (never done, or their threshold has passed)."""
        return [check for check in self.heartbeat_status() if check.due]

    def heartbeat_status(self) -> list[heartbeat.Check]:
        """B2: every known check (configured or in the state file), with its last run and
        when it is next due; due ones first."""
        return heartbeat.checks(self.layout, dict(self.settings.heartbeat_hours), self.clock())

    def heartbeat_mark(self, check: str) -> heartbeat.Check:
        self.require_writable("the heartbeat state")
        self.refuse_secrets("heartbeat check", name=check)
        hours = dict(self.settings.heartbeat_hours)
        return heartbeat.mark(self.layout, check, hours, self.clock())

    def distill(self, *, max_chars: int | None = None) -> distill.Distillation:
        """D1: what was logged since the last distillation, within the budget."""
        budget = self.settings.distill_max_chars if max_chars is None else max_chars
        from ..numbers import MAX_CHARS, check_int

        check_int(budget, "distill budget (characters)", low=500, high=MAX_CHARS)
        gathered = distill.gather(self.layout, self.store, budget)
        if gathered.until is not None and self.settings.enabled and not self.read_only:
            self.store.set_value(distill.PENDING, distill.mark_of(gathered.items[-1]))
        return gathered

    def distill_done(self) -> str:
        """D1: move the watermark past what `distill` last handed out; returns it (UTC)."""
        self.require_writable("the distillation watermark")
        pending = self.store.get_value(distill.PENDING)
        mark = pending if pending is not None else str(self.clock())
        self.store.set_value(distill.WATERMARK, mark)
        return iso(distill.mark_time(mark))

    def stats(self) -> stats.Stats:
        """D2: number and size of every tier, HOT.md against its cap, distillation ratio."""
        return stats.collect(
            self.layout, self.store, hot.read(self.layout), self.settings.hot_cap_chars
        )
