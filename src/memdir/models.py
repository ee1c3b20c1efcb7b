"""Typed values that cross module boundaries.

NamedTuple rather than frozen dataclasses: just as immutable and typed, but `dataclasses`
imports `inspect` (~14 ms), and the CLI is started many times a turn.
"""

from __future__ import annotations

from typing import Any, NamedTuple

CATEGORIES = ("preference", "convention", "decision", "learning")
SURFACES = ("cli", "repl", "telegram", "daemon", "scheduled", "mcp")


class Provenance(NamedTuple):
    """F5: who wrote a record."""

    session_id: str | None
    surface: str
    agent: str | None


class Fact(NamedTuple):
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


class Procedure(NamedTuple):
    name: str
    path: str
    content: str
    description: str | None
    updated: str
    error: str | None = None  # set when the frontmatter is broken; the file is left as it is

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


class Hit(NamedTuple):
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


class Session(NamedTuple):
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


class HotWrite(NamedTuple):
    """What a write to HOT.md did (H3): its size against the cap, and what was cut."""

    chars: int
    cap: int
    cut_chars: int
    warning: str | None

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()
