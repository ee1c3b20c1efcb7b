"""Commands of task and global memory: list, show, rm, reindex, task, prune, memorize,
recall."""

from __future__ import annotations

import argparse
import sys

from ..memory import ingest_output
from ..numbers import parse_whole
from .common import Builder, Raw, as_json, memory_for, progress_bar, warn

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..models import Entry


def add_entries(b: Builder) -> None:
    b.command(b.commands, "list", _list, "list the global entries")
    b.command(b.commands, "show", _show, "print a global entry").add_argument("name")
    b.command(b.commands, "rm", _rm, "delete a global entry").add_argument("name")
    b.command(
        b.commands,
        "reindex",
        _reindex,
        "rebuild MEMORY.md and the search index from the files (with a progress bar)",
    )


def add_task(b: Builder) -> None:
    task = b.group("task", "tasks: the registry behind task notes and their lineage")
    start = b.command(task, "start", _task_start, "register a running task")
    start.add_argument("id")
    start.add_argument("--parent", metavar="ID", help="the task that spawned this one")
    end = b.command(task, "end", _task_end, "mark a task ended")
    end.add_argument("id")
    end.add_argument("--state", default="done", choices=("done", "failed", "cancelled"))
    show = b.command(task, "show", _task_show, "print a task's notes")
    show.add_argument("id")
    show.add_argument("--lineage", action="store_true", help="then its ancestors' notes")


def add_prune(b: Builder) -> None:
    prune = b.command(b.commands, "prune", _prune, "remove expired task notes (retention)")
    prune.add_argument("--dry-run", action="store_true", help="list what would go; delete nothing")


def add_memorize(b: Builder) -> None:
    memorize = b.command(
        b.commands,
        "memorize",
        _memorize,
        "apply memorize blocks in agent output (stdin); print the output without them",
    )
    memorize.add_argument("--task", metavar="ID", help="the current task (for task notes)")
    memorize.add_argument("--workflow", metavar="W")
    memorize.add_argument("--step", metavar="S")
    memorize.add_argument("--off", action="store_true", help="strip and drop every block")


def add_recall(b: Builder) -> None:
    recall = b.command(b.commands, "recall", _recall, "print the context a step starts with")
    recall.add_argument("--task", metavar="ID", help="include this task's notes and lineage")
    recall.add_argument("--tiers", default="task,global", help="task, global or both")
    recall.add_argument(
        "--max-chars",
        type=parse_whole,
        metavar="N",
        help="budget of the two sections (default memory.max_inject_chars)",
    )
    recall.add_argument("--no-read", action="store_true", help="recall nothing")


def _list(args: argparse.Namespace) -> Any:
    found = memory_for(args).entries()
    if as_json(args):
        return [e.to_dict() for e in found]
    rows = [f"{e.name}  BROKEN: {e.error}" if e.error else _entry_line(e) for e in found]
    return "\n".join(rows) if rows else "no global entries"


def _entry_line(entry: Entry) -> str:
    """name — description (updated, creator, updated by whom)."""
    who = [entry.updated or "?"]
    if entry.agent:
        who.append(f"by {entry.agent}")
    if entry.updated_by and entry.updated_by != entry.agent:
        who.append(f"updated by {entry.updated_by}")
    return f"{entry.name} — {entry.description}  ({', '.join(who)})"


def _show(args: argparse.Namespace) -> Any:
    entry = memory_for(args).entry(args.name)
    return entry.to_dict() if as_json(args) else Raw(entry.content or "")


def _rm(args: argparse.Namespace) -> Any:
    entry = memory_for(args).remove_entry(args.name)
    return entry.to_dict() if as_json(args) else f"global entry {entry.name} removed"


def _reindex(args: argparse.Namespace) -> Any:
    done = memory_for(args).reindex(progress=None if as_json(args) else progress_bar)
    broken = [e for e in done.entries if e.error]
    if as_json(args):
        return {
            "entries": len(done.entries) - len(broken),
            "files": done.files,
            "embedded": done.embedded,
            "dropped": done.dropped,
            "broken": [e.to_dict() for e in broken],
        }
    lines = [
        f"MEMORY.md rebuilt: {len(done.entries) - len(broken)} entries; search index: "
        f"{done.files:,} files, {done.embedded:,} items embedded"
        + (f", {done.dropped:,} vectors of the previous model dropped" if done.dropped else "")
    ]
    lines += [f"left out {e.path}: {e.error}" for e in broken]
    return "\n".join(lines)


def _task_start(args: argparse.Namespace) -> Any:
    task = memory_for(args).start_task(args.id, args.parent)
    return task.to_dict() if as_json(args) else f"task {task.id} running"


def _task_end(args: argparse.Namespace) -> Any:
    task = memory_for(args).end_task(args.id, args.state)
    return task.to_dict() if as_json(args) else f"task {task.id} {task.state}"


def _task_show(args: argparse.Namespace) -> Any:
    notes = memory_for(args).notes(args.id, lineage=args.lineage)
    if as_json(args):
        return [n.to_dict() for n in notes]
    return "\n".join(f"[{n.task}] {n.time} {n.content}" for n in notes) or "no notes"


def _prune(args: argparse.Namespace) -> Any:
    pruned = memory_for(args).prune(dry_run=args.dry_run)
    if as_json(args):
        return [p.to_dict() for p in pruned]
    verb = "would remove" if args.dry_run else "removed"
    return "\n".join(f"{verb} {p.path} ({p.reason})" for p in pruned) or "nothing to prune"


def _memorize(args: argparse.Namespace) -> Any:
    output = sys.stdin.buffer.read().decode("utf-8", errors="replace") if sys.stdin else ""
    result = ingest_output(
        output,
        state_dir=getattr(args, "state_dir", None),
        session=getattr(args, "session", None),
        agent=getattr(args, "agent", None),
        task=args.task,
        workflow=args.workflow,
        step=args.step,
        policy={"memorize": not args.off},
    )
    for warning in result.warnings:
        warn(warning)
    for applied in result.applied:
        if applied.hint:
            warn(applied.hint)
    return result.to_dict() if as_json(args) else Raw(result.output, exact=True)


def _recall(args: argparse.Namespace) -> Any:
    policy = {"recall": args.tiers, "read": not args.no_read}
    recalled = memory_for(args).recall(task=args.task, policy=policy, max_chars=args.max_chars)
    return recalled.to_dict() if as_json(args) else Raw(recalled.text, exact=True)


COMMANDS = {
    "list": add_entries,
    "show": add_entries,
    "rm": add_entries,
    "reindex": add_entries,
    "task": add_task,
    "prune": add_prune,
    "memorize": add_memorize,
    "recall": add_recall,
}
