"""What doctor reports: findings, each with what to do, and the report around them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ... import advice
from ...errors import MemdirError
from ...records import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SEVERITIES = ("error", "warning", "info")
SHOWN = 5  # items named in a one-line message; `where` holds them all


class Finding(Record):
    """One thing doctor found: which check, how bad, where, what is wrong, what to do."""

    check: str  # e.g. entries.index, tasks.orphan, db.integrity
    severity: str  # error | warning | info
    where: Sequence[str | int]  # paths relative to the memory root, or fact ids / names
    message: str
    action: str  # what to do, a command where there is one
    fixable: bool = False  # `doctor --fix` repairs it safely

    def to_dict(self) -> dict[str, Any]:
        return {**self._asdict(), "where": list(self.where)}


class Report(Record):
    root: str  # the memory root checked
    findings: list[Finding]  # worst first
    fixed: list[str]  # what --fix did, one line each
    database: dict[str, Any]  # memory.db: exists, bytes, free_bytes, wal_bytes, schema, facts
    elapsed_ms: float

    def count(self, severity: str) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    @property
    def ok(self) -> bool:
        """No error remains (warnings and notes may): what the exit code says."""
        return self.count("error") == 0

    def summary(self) -> dict[str, int]:
        return {
            "errors": self.count("error"),
            "warnings": self.count("warning"),
            "info": self.count("info"),
            "fixable": sum(1 for f in self.findings if f.fixable),
            "fixed": len(self.fixed),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "findings": [f.to_dict() for f in self.findings],
            "fixed": list(self.fixed),
            "summary": self.summary(),
            "database": self.database,
            "elapsed_ms": self.elapsed_ms,
        }


def checked(what: str, found: list[Finding], check: Callable[[], None]) -> None:
    """Run one check; one that fails (a locked or damaged database...) becomes a finding
    instead of stopping the others."""
    try:
        check()
    except MemdirError as exc:
        found.append(
            Finding(
                "doctor.skipped",
                "warning",
                [],
                f"the {what} check could not run: {str(exc)}",
                f"fix what the message names and run doctor again: {advice.doctor()}",
            )
        )


def few(items: Iterable[object]) -> str:
    shown = [str(x) for x in items]
    more = f" (+{len(shown) - SHOWN:,} more)" if len(shown) > SHOWN else ""
    return ", ".join(shown[:SHOWN]) + more


def size_text(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} GB"


def duration(seconds: float) -> str:
    hours = seconds / 3600
    return f"{hours / 24:g} days" if hours >= 48 and hours % 24 == 0 else f"{hours:g}h"
