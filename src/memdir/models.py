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
    created: str | None = None
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
