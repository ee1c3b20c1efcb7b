"""Commands that look after a store as a whole: doctor (N2), eval (Q5)."""

from __future__ import annotations

import argparse
import sys

from ..numbers import parse_whole
from .common import (
    SEARCH_KINDS,
    SEARCH_MODES,
    Builder,
    as_json,
    memory_for,
    read_file,
    text_arg,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..curation.doctor import Report
    from ..curation.evaluate import Evaluation

LABELS = {"error": "ERROR", "warning": "WARNING", "info": "INFO"}

DOCTOR_HELP = "check the store for problems, say what to do; --fix repairs the safe ones"
DOCTOR_EPILOG = """\
checks: HOT.md against its cap; MEMORY.md, the entry cache and the search index against
the files; broken frontmatter; empty procedures; task notes of unknown or long-ended
tasks; exact and near duplicates; facts no search has found in --stale-days; facts
superseded twice whose two versions both hold (a fork); memory.db's integrity and size;
files that are not part of the layout, temp files left by killed writes, files that are
not UTF-8 text, a corrupt heartbeat-state.json.

Without --fix nothing is written (a read-only subagent session may run it). --fix rebuilds
MEMORY.md, the entry cache and the search index from the files, runs the task-notes
retention sweep (as `memdir prune`) and removes stale temp files; it never cuts HOT.md,
edits a broken file, deletes a file it does not know or picks which duplicate (or which
version of a forked fact) to keep.

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
    model = db.get("embeddings")
    if isinstance(model, dict):  # Q2: which model search uses, and what waits for it
        state = (
            f"{model['vectors']:,} vectors, {model['waiting']:,} item(s) waiting"
            if model["in_use"]
            else "not in use: search is lexical"
        )
        lines.append(f"search model: {model['model']} ({model['provider']}); {state}")
    if isinstance(db.get("vector_ranking"), str):  # team mode (Q2): pgvector or Python
        lines.append(f"semantic ranking: {db['vector_ranking']}")
    if isinstance(db.get("row_security"), str):  # team mode (L4): on, or off and why
        lines.append(f"row-level security: {db['row_security']}")
    size = ""
    if db.get("bytes") is not None:
        size = (
            f"; {db['path']} {_mb(db['bytes'])}"
            if db.get("backend") == "postgres"
            else f"; memory.db {_mb(db['bytes'])}, WAL {_mb(db['wal_bytes'])}"
        )
        active = db.get("facts", {}).get("active")
        if active is not None:
            size += f", {active:,} active facts"
    lines.append(f"{found}{size}; checked in {report.elapsed_ms:,.0f} ms")
    return "\n".join(lines)


def _n(count: int, what: str) -> str:
    return f"{count} {what}{'' if count == 1 else 's'}"


def _mb(size: int) -> str:
    return f"{size / 1048576:,.1f} MB" if size >= 104858 else f"{size / 1024:,.0f} KB"


EVAL_HELP = "score search on your own labelled questions: R@5, R@10, MRR, latency per mode"
EVAL_EPILOG = """\
FILE holds one JSON object a line: {"question": "...", "answers": [...]}, each answer a fact
id (12), a path under the memory root ("global/deploy.md"), or some lines of one
("daily/2026-11-30.md:10-14", found by a hit whose lines overlap). R@k is the share of a
question's answers in its top k, averaged; MRR the mean of 1/rank of the first answer found
(0 when none is in the top --limit). Latency is of the search call, in this process.

Every mode this install can run is asked unless --mode says which. The searches record
nothing: facts found here do not count as recalled for doctor."""


def add_eval(b: Builder) -> None:
    evaluate = b.command(b.commands, "eval", _eval, EVAL_HELP)
    evaluate.epilog = EVAL_EPILOG
    evaluate.formatter_class = argparse.RawDescriptionHelpFormatter
    evaluate.add_argument("file", help="labelled questions, JSON lines, or - for stdin")
    evaluate.add_argument(
        "--mode",
        choices=SEARCH_MODES,
        action="append",
        help="only this mode (repeatable; default: every mode installed)",
    )
    evaluate.add_argument(
        "--kind",
        choices=SEARCH_KINDS,
        action="append",
        help="search only this kind (repeatable)",
    )
    evaluate.add_argument(
        "-n", "--limit", type=parse_whole, default=10, help="hits asked for (at least 10)"
    )


def _eval(args: argparse.Namespace) -> Any:
    from ..curation import evaluate

    source = "stdin" if args.file == "-" else args.file
    text = text_arg("-") if args.file == "-" else read_file(args.file)
    questions = evaluate.parse(text, source)
    with memory_for(args) as memory:
        result = evaluate.run(
            memory, questions, source=source, modes=args.mode, limit=args.limit, kinds=args.kind
        )
    return result.to_dict() if as_json(args) else render_eval(result)


def render_eval(result: Evaluation) -> str:
    lines = [
        f"memdir eval: {_n(result.questions, 'question')} from {result.source}, top {result.limit}"
    ]
    lines.append(
        f"{'mode':<8}  {'R@5':>6}  {'R@10':>6}  {'MRR':>6}  {'p50 ms':>8}  {'p95 ms':>8}  missed"
    )
    for s in result.scores:
        lines.append(
            f"{s.mode:<8}  {s.r5:>6.3f}  {s.r10:>6.3f}  {s.mrr:>6.3f}  "
            f"{s.p50_ms:>8.1f}  {s.p95_ms:>8.1f}  {len(s.missed)}"
        )
    for skipped in result.skipped:
        lines.append(f"not run: {skipped}")
    if result.unknown:
        shown = ", ".join(result.unknown[:10]) + (" …" if len(result.unknown) > 10 else "")
        lines.append(
            f"{_n(len(result.unknown), 'answer')} name nothing in this memory "
            f"(those questions can only miss): {shown}"
        )
    return "\n".join(lines)


COMMANDS = {"doctor": add_doctor, "eval": add_eval}
