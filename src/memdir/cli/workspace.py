"""Commands of the workspace and episodic memory: daily, boot, get, heartbeat, distill,
stats."""

from __future__ import annotations

import argparse

from ..numbers import parse_whole
from .common import Builder, Raw, as_json, memory_for, text_arg, when

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def add_daily(b: Builder) -> None:
    group = b.group("daily", "daily logs: what happened, one file per local day")
    append = b.command(group, "append", _daily_append, "add a timestamped entry to today's log")
    append.add_argument("text", help="the entry, or - for stdin")
    append.add_argument(
        "--section",
        metavar="NAME",
        help="under this section (e.g. 'Evolution Log') instead of ## HH:MM",
    )
    show = b.command(group, "show", _daily_show, "print a day's log")
    show.add_argument("date", nargs="?", default="today", help="YYYY-MM-DD, today, yesterday")


def add_boot(b: Builder) -> None:
    boot = b.command(b.commands, "boot", _boot, "print the context a new session starts with")
    boot.add_argument(
        "--subagent", action="store_true", help="the subagent/group variant: without MEMORY.md"
    )


def add_get(b: Builder) -> None:
    get = b.command(b.commands, "get", _get, "print exact lines of a memory file")
    get.add_argument("path", help="relative to the memory root, e.g. global/ci.md")
    get.add_argument(
        "--from",
        dest="from_line",
        type=parse_whole,
        default=1,
        metavar="N",
        help="first line (from 1)",
    )
    get.add_argument(
        "--lines", type=parse_whole, metavar="K", help="how many lines (default: to the end)"
    )


def add_heartbeat(b: Builder) -> None:
    group = b.group("heartbeat", "periodic checks and when they are due")
    b.command(group, "due", _heartbeat_due, "list the checks that are due now")
    b.command(
        group, "status", _heartbeat_status, "every check: its last run and when it is next due"
    )
    b.command(group, "mark", _heartbeat_mark, "record that a check was done now").add_argument(
        "check"
    )


def add_distill(b: Builder) -> None:
    distill = b.command(
        b.commands, "distill", _distill, "gather what was logged since the last distillation"
    )
    distill.add_argument("--max-chars", type=parse_whole, metavar="N", help="budget (default 8000)")
    distill.add_argument(
        "--done", action="store_true", help="move the watermark past what was last gathered"
    )


def add_stats(b: Builder) -> None:
    b.command(b.commands, "stats", _stats, "how much memory there is, tier by tier")


def _daily_append(args: argparse.Namespace) -> Any:
    result = memory_for(args).daily_append(text_arg(args.text), section=args.section)
    return result.to_dict() if as_json(args) else f"{result.path}: under ## {result.section}"


def _daily_show(args: argparse.Namespace) -> Any:
    date, text = memory_for(args).daily_log(args.date)
    return {"date": date, "content": text} if as_json(args) else Raw(text)


def _boot(args: argparse.Namespace) -> Any:
    boot = memory_for(args).boot(subagent=True if args.subagent else None)
    if as_json(args):
        return boot.to_dict()
    parts = [
        f"## {p.name} ({p.chars:,} chars, ~{p.tokens:,} tokens)\n{p.text.rstrip()}\n"
        for p in boot.parts
    ]
    total = f"Total: {boot.chars:,} chars, ~{boot.tokens:,} tokens in {len(boot.parts)} parts\n"
    return Raw("\n".join([*parts, total]), exact=True)


def _get(args: argparse.Namespace) -> Any:
    found = memory_for(args).get(args.path, from_line=args.from_line, lines=args.lines)
    return found.to_dict() if as_json(args) else Raw(found.text, exact=True)


def _heartbeat_due(args: argparse.Namespace) -> Any:
    checks = memory_for(args).heartbeat_due()
    if as_json(args):
        return [c.to_dict() for c in checks]
    rows = [f"{c.name:<12} every {c.hours:g}h, last {when(c.last)}" for c in checks]
    return "\n".join(rows) or "nothing is due (`memdir heartbeat status` shows every check)"


def _heartbeat_status(args: argparse.Namespace) -> Any:
    checks = memory_for(args).heartbeat_status()
    if as_json(args):
        return [c.to_dict() for c in checks]
    return (
        "\n".join(
            f"{c.name:<12} {'DUE' if c.due else 'ok ':<4} every {c.hours:g}h, "
            f"last {when(c.last)}, next {'now' if c.due else when(c.next_due)}"
            for c in checks
        )
        or "no checks configured"
    )


def _heartbeat_mark(args: argparse.Namespace) -> Any:
    check = memory_for(args).heartbeat_mark(args.check)
    return (
        check.to_dict() if as_json(args) else f"{check.name} done; next due {when(check.next_due)}"
    )


def _distill(args: argparse.Namespace) -> Any:
    memory = memory_for(args)
    if args.done:
        mark = memory.distill_done()
        return {"watermark": mark} if as_json(args) else f"distilled up to {mark}"
    gathered = memory.distill(max_chars=args.max_chars)
    if as_json(args):
        return gathered.to_dict()
    if not gathered.items:
        return "nothing new to distill since " + (gathered.since or "the start")
    tail = f"\n\n({gathered.left} more item(s) after --done)" if gathered.left else ""
    return Raw(gathered.text + tail)


def _stats(args: argparse.Namespace) -> Any:
    found = memory_for(args).stats()
    if as_json(args):
        return found.to_dict()
    ratio = "n/a" if found.distill_ratio is None else f"{found.distill_ratio:.2f}"
    return "\n".join(
        [
            f"hot memory    {found.hot_chars:,}/{found.hot_cap:,} chars "
            f"({100 * found.hot_chars // found.hot_cap}%)",
            f"facts         {found.facts_active:,} active, {found.facts_superseded:,} superseded, "
            f"{found.facts_removed:,} removed ({found.fact_chars:,} chars active)",
            f"global        {found.entries:,} entries, {found.entry_bytes:,} bytes",
            f"procedures    {found.procedures:,}, {found.procedure_bytes:,} bytes",
            f"task notes    {found.task_note_files:,} files, {found.task_note_bytes:,} bytes",
            f"daily logs    {found.daily_files:,} files, {found.daily_bytes:,} bytes",
            f"distilled     {ratio} (global + facts over daily + task notes)",
        ]
    )


COMMANDS = {
    "daily": add_daily,
    "boot": add_boot,
    "get": add_get,
    "heartbeat": add_heartbeat,
    "distill": add_distill,
    "stats": add_stats,
}
