"""Commands that look after a store as a whole: doctor (N2)."""

from __future__ import annotations

import argparse
import sys

from ..numbers import parse_whole
from .common import Builder, as_json, memory_for

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..curation.doctor import Report

LABELS = {"error": "ERROR", "warning": "WARNING", "info": "INFO"}

DOCTOR_HELP = "check the store for problems, say what to do; --fix repairs the safe ones"
DOCTOR_EPILOG = """\
checks: HOT.md against its cap; MEMORY.md, the entry cache and the search index against
the files; broken frontmatter; empty procedures; task notes of unknown or long-ended
tasks; exact and near duplicates; facts no search has found in --stale-days; memory.db's
integrity and size; files that are not part of the layout, temp files left by killed
writes, files that are not UTF-8 text, a corrupt heartbeat-state.json.

Without --fix nothing is written (a read-only subagent session may run it). --fix rebuilds
MEMORY.md, the entry cache and the search index from the files, runs the task-notes
retention sweep (as `memdir prune`) and removes stale temp files; it never cuts HOT.md,
edits a broken file, deletes a file it does not know or picks which duplicate to keep.

exit status: 0 when no error-level finding remains (warnings and notes do not count),
1 when one does (after --fix), so a script can gate on it; the report is printed either
way. 1 with a `memdir: error:` line means doctor itself could not run (e.g. --fix in a
read-only session)."""


def add_doctor(b: Builder) -> None:
    doctor = b.command(b.commands, "doctor", _doctor, DOCTOR_HELP)
    doctor.epilog = DOCTOR_EPILOG
    doctor.formatter_class = argparse.RawDescriptionHelpFormatter
    doctor.add_argument(
        "--fix", action="store_true", help="repair what is safe to repair, and say what was done"
    )
    doctor.add_argument(
        "--stale-days",
        type=parse_whole,
        default=90,
        metavar="N",
        help="report facts no search has found in N days (default 90)",
    )


def _doctor(args: argparse.Namespace) -> Any:
    from ..curation import doctor

    with memory_for(args) as memory:
        report = doctor.run(memory, fix=args.fix, stale_days=args.stale_days)
    result = report.to_dict() if as_json(args) else render(report, fix=args.fix)
    if report.ok:
        return result
    # Errors found: the report is the output, and the exit code says so (no "memdir:
    # error:" line: doctor did its job). main() has no other way to take an exit code.
    if as_json(args):
        import json

        print(json.dumps(result, ensure_ascii=False, indent=2))
    else:
        print(result)
    sys.stdout.flush()
    raise SystemExit(1)


def render(report: Report, fix: bool = False) -> str:
    lines = [f"memdir doctor: {report.root}"]
    for finding in report.findings:
        lines.append(
            f"{LABELS[finding.severity]:<8} {finding.check}: {finding.message} — {finding.action}"
        )
    if fix:
        lines += [f"fixed: {line}" for line in report.fixed] or ["fixed: nothing needed fixing"]
    counts = report.summary()
    fixable = f"; {counts['fixable']} fixable with --fix" if counts["fixable"] else ""
    found = (
        f"{_n(counts['errors'], 'error')}, {_n(counts['warnings'], 'warning')}, "
        f"{_n(counts['info'], 'note')}{fixable}"
        if report.findings
        else "no problems found"
    )
    db = report.database
    size = ""
    if db.get("bytes") is not None:
        size = f"; memory.db {_mb(db['bytes'])}, WAL {_mb(db['wal_bytes'])}"
        active = db.get("facts", {}).get("active")
        if active is not None:
            size += f", {active:,} active facts"
    lines.append(f"{found}{size}; checked in {report.elapsed_ms:,.0f} ms")
    return "\n".join(lines)


def _n(count: int, what: str) -> str:
    return f"{count} {what}{'' if count == 1 else 's'}"


def _mb(size: int) -> str:
    return f"{size / 1048576:,.1f} MB" if size >= 104858 else f"{size / 1024:,.0f} KB"


COMMANDS = {"doctor": add_doctor}
