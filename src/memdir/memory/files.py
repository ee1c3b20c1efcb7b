"""The Memory facade's files under the memory root: hot memory (H), global entries (G),
procedures (P), the daily log (E1-E3) and reading lines of any memory file (E4)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from .. import facts
from ..errors import MemdirError, NotFoundError, ValidationError
from ..lazy import lazy
from ..models import Entry, HotWrite, Procedure, Similar
from ..paths import is_memory_file
from ..records import Record
from ..storage import files
from .base import MemoryBase, one_view

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .. import daily, duplicates, entries, hot, procedures
else:
    daily = lazy("memdir.daily")
    duplicates = lazy("memdir.duplicates")
    entries = lazy("memdir.entries")
    hot = lazy("memdir.hot")
    procedures = lazy("memdir.procedures")

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


class FileMemory(MemoryBase):
    """The memory files a person can edit, each through its concept module."""

    def hot(self) -> str:
        """HOT.md as it is on disk (`hot show`)."""
        return hot.read(self.layout, self.docs)

    def hot_injected(self) -> str:
        """HOT.md as it is handed to a model (the MCP instructions and resource, recall,
        boot): within its cap whatever a hand edit put on disk, saying so when cut."""
        return hot.shown(hot.read(self.layout, self.docs), self.settings.hot_cap_chars)

    def hot_set(self, text: str, *, expected: str | None = None) -> HotWrite:
        """Replace HOT.md with `text`, within its cap (H2, H3); the old one goes to .bak (H4).
        `expected`: the revision the new text was made from (V4, `revision`); HOT.md
        changed since is a ConflictError and nothing is written."""
        self.require_writable("hot")
        self.refuse_secrets("hot memory text", text=text)
        from .. import revisions
        from ..quoting import hot_text

        def change(current: str) -> str:
            on_disk = current if current or os.path.exists(self.layout.hot) else None
            revisions.check(expected, on_disk, "HOT.md")
            return hot_text(text)

        return self._hot_update(change, replace=True)

    def hot_append(self, text: str) -> HotWrite:
        """Append `text` to HOT.md, within its cap (H2, H3)."""
        self.require_writable("hot")
        self.refuse_secrets("hot memory text", text=text)
        return self._hot_update(lambda current: hot.appended(current, text))

    def hot_remove(self, *, line: str | None = None, section: str | None = None) -> HotWrite:
        if (line is None) == (section is None):
            raise ValidationError("remove either a line or a section of hot memory, not both")
        self.require_writable("hot")
        if line is not None:
            return self._hot_update(lambda current: hot.without_line(current, line))
        assert section is not None
        return self._hot_update(lambda current: hot.without_section(current, section))

    def _hot_update(self, change: Callable[[str], str], replace: bool = False) -> HotWrite:
        result = hot.update(
            self.layout,
            self.settings.hot_cap_chars,
            change,
            replace=replace,
            now=self._now(),
            docs=self.docs,
        )
        self._count("hot")
        return result

    def write_entry(
        self,
        name: str,
        description: str,
        content: str,
        *,
        task: str | None = None,
        workflow: str | None = None,
        expected: str | None = None,
    ) -> Entry:
        """G2: create or update global/<name>.md (keeps `created`); MEMORY.md follows.
        The name is the identity (X5): a write that repeats the entry exactly (same
        description and body) changes nothing and answers it with `duplicate` set; other
        entries with the same or a near body are named in `similar`, never refused.
        `expected`: the revision the change was made from (V4); another is refused."""
        self.layout.entry(name)
        facts.check_content(content, self.settings.max_entry_bytes, "entry")
        self.require_writable("global entries")
        entry, _created = self._write_entry(
            name, description, content, task, workflow, expected=expected
        )
        return entry

    @one_view
    def entry(self, name: str) -> Entry:
        """The global entry `name` (G1); NotFoundError if there is none."""
        self.docs.refresh()
        return entries.read(self.layout, name)

    @one_view
    def entries(self) -> list[Entry]:
        """Every global entry (G5), by name; a broken one carries its error."""
        self.docs.refresh()
        return entries.list_all(self.layout, self.store)

    def remove_entry(self, name: str) -> Entry:
        """Delete the global entry `name`; MEMORY.md follows (G3)."""
        self.layout.entry(name)
        self.require_writable("global entries")
        return entries.remove(self.layout, self.store, name, self.docs)

    def write_procedure(self, name: str, content: str, *, expected: str | None = None) -> Procedure:
        """P1: create or overwrite. The name is the identity (X5): writing exactly what
        the procedure holds changes nothing (the answer has `duplicate` set); other
        procedures with the same or a near body are named in `similar`, never refused."""
        self.layout.procedure(name)  # validates the name before anything else
        facts.check_content(content, self.settings.max_entry_bytes, "procedure")
        self.require_writable("procedures")
        self.refuse_secrets("procedure", text=content, name=name)

        def twins() -> tuple[Similar, ...]:
            body = duplicates.body_of(content)
            prints = procedures.fingerprints(self.layout, self.store)
            others = []
            for other in duplicates.candidates(name, body, prints):
                with contextlib.suppress(MemdirError):
                    others.append((other, duplicates.body_of(self.procedure(other).content)))
            return duplicates.among(
                "procedure", name, body, others, self.settings.duplicate_lexical
            )

        result = procedures.write(
            self.layout, name, content, twins, expected=expected, docs=self.docs
        )
        if result.duplicate:
            return result._replace(hint=duplicates.named_hint("procedure", result.name))
        self._count("procedures")
        self._embed_written(files=[self.layout.procedure(name)])
        similar = duplicates.merged(
            result.similar, self._similar_files("procedure", name, duplicates.body_of(content))
        )
        return result._replace(similar=similar, hint=duplicates.similar_hint(similar, name))

    @one_view
    def procedure(self, name: str) -> Procedure:
        """The procedure `name` (P1); NotFoundError if there is none."""
        self.docs.refresh()
        return procedures.read(self.layout, name)

    @one_view
    def procedures(self) -> list[Procedure]:
        """Every procedure, by name (P2)."""
        self.docs.refresh()
        return procedures.list_all(self.layout)

    def daily_append(self, text: str, *, section: str | None = None) -> daily.DailyWrite:
        """E1: a timestamped entry in today's log (local time), under `## HH:MM` or `section`."""
        return self._log(text, section)

    def daily(self, date: str | None = None) -> str:
        """The log of `date` (YYYY-MM-DD, 'today' or 'yesterday'; default today)."""
        return self.daily_log(date)[1]

    @one_view
    def daily_log(self, date: str | None = None) -> tuple[str, str]:
        """(the local date as YYYY-MM-DD, its log): `date` as for daily()."""
        day = daily.resolve_date(date, self.clock())
        self.docs.refresh()
        return day, daily.read(self.layout, day)

    @one_view
    def get(self, path: str, *, from_line: int = 1, lines: int | None = None) -> Lines:
        """E4: exact lines of a file under the memory root, nothing outside it (X1)."""
        from ..numbers import MAX_LINES, check_int

        for value, what in ((from_line, "from_line"), (lines, "lines")):
            if value is not None:
                check_int(value, what, high=MAX_LINES)
        root, rel = self._memory_file(path)
        self.docs.refresh()
        try:
            found, total = files.read_lines(os.path.join(root, rel), from_line, lines, root=root)
        except FileNotFoundError:
            where = "the state dir" if root != self.path else "the memory root"
            raise NotFoundError(
                f"no file {rel} under {where} {root}",
                kind="file",
                key=rel,
                path=os.path.join(root, rel),
            ) from None
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
