"""The `memdir` command: parse -> Memory -> render. No memory logic lives here.

argparse rather than click or typer: the CLI runs many times per agent turn, and click adds
~30 ms to every start (typer more), against a ~20 ms floor for the whole search call.
Errors become one line on stderr and exit 1 (a bug: exit 2); never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from .errors import MemdirError, ValidationError
from .memory import Memory, ingest_output, init_project
from .models import CATEGORIES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from .models import Fact, Hit, HotWrite, Procedure, Session

    Handler = Callable[[argparse.Namespace], Any]


class _Formatter(argparse.HelpFormatter):
    """argparse builds a formatter for every add_argument, and its default width comes from
    shutil (~2.5 ms of imports per CLI call); os gives the same answer."""

    def __init__(self, prog: str) -> None:
        columns = os.environ.get("COLUMNS", "")
        if columns.isdigit():
            width = int(columns)
        else:
            try:
                width = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
            except (OSError, AttributeError, ValueError):
                width = 80
        super().__init__(prog, width=max(40, width - 2))


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """A usage error is a user error: one line and exit 1, like every other."""
        self.exit(1, f"memdir: error: {message} (see `{self.prog} --help`)\n")


def _common() -> argparse.ArgumentParser:
    # SUPPRESS: an option given before the command must not be reset by the sub-parser.
    common = _Parser(add_help=False)
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print machine-readable JSON"
    )
    common.add_argument(
        "--state-dir",
        default=argparse.SUPPRESS,
        metavar="DIR",
        help="the state folder (default: $MEMDIR_STATE_DIR, the nearest "
        ".memdir/, or ~/.memdir/state)",
    )
    common.add_argument(
        "--session",
        default=argparse.SUPPRESS,
        metavar="ID",
        help="act as this session (default: $MEMDIR_SESSION_ID)",
    )
    common.add_argument(
        "--agent",
        default=argparse.SUPPRESS,
        metavar="NAME",
        help="the agent writing, recorded as provenance",
    )
    return common


class _Builder:
    """Adds commands to the parser. Building all ~25 sub-parsers costs ~8 ms of argparse
    and gettext work, so a call builds only the command it runs (see build_parser)."""

    def __init__(self, common: argparse.ArgumentParser, commands: Any) -> None:
        self.common, self.commands = common, commands

    def command(self, parent: Any, name: str, handler: Handler, help: str) -> Any:
        sub = parent.add_parser(name, parents=[self.common], help=help, description=help)
        sub.set_defaults(handler=handler)
        return sub

    def group(self, name: str, help: str) -> Any:
        sub = self.commands.add_parser(name, help=help, description=help)
        subs = sub.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser)
        subs.required = True
        return subs


def _add_init(b: _Builder) -> None:
    b.command(b.commands, "init", _init, "create .memdir/ here (project-scoped memory)")


def _add_path(b: _Builder) -> None:
    b.command(b.commands, "path", _path, "print where memory lives")


def _add_hot(b: _Builder) -> None:
    hot = b.group("hot", "hot memory (HOT.md): what every turn needs")
    b.command(hot, "show", _hot_show, "print HOT.md")
    b.command(hot, "set", _hot_set, "replace HOT.md").add_argument(
        "text", nargs="?", default="-", help="the new text, or - for stdin"
    )
    b.command(hot, "append", _hot_append, "add a line to HOT.md").add_argument(
        "text", help="the text to add, or - for stdin"
    )
    rm = b.command(hot, "rm", _hot_rm, "remove a line or a section of HOT.md")
    rm.add_argument("line", nargs="?", help="the line to remove (or a unique part of it)")
    rm.add_argument("--section", metavar="HEADING", help="remove this markdown section")


def _add_fact(b: _Builder) -> None:
    fact = b.group("fact", "the fact archive")
    add = b.command(fact, "add", _fact_add, "store a new fact")
    add.add_argument("text", help="the fact, or - for stdin")
    add.add_argument("-c", "--category", required=True, choices=CATEGORIES)
    sup = b.command(
        fact, "supersede", _fact_supersede, "replace a fact, keeping the old in history"
    )
    sup.add_argument("id")
    sup.add_argument("text", help="the new fact, or - for stdin")
    sup.add_argument("-c", "--category", choices=CATEGORIES, help="default: the old fact's")
    b.command(fact, "rm", _fact_rm, "remove a fact").add_argument("id")
    b.command(fact, "show", _fact_show, "print one fact").add_argument("id")
    b.command(fact, "history", _fact_history, "the supersede chain of a fact").add_argument("id")


def _add_search(b: _Builder) -> None:
    search = b.command(b.commands, "search", _search, "search facts and procedures")
    search.add_argument("query", help='words; FTS5 syntax works: OR, NOT, "phrase", prefix*')
    search.add_argument("-c", "--category", choices=CATEGORIES)
    search.add_argument("-n", "--limit", type=int, default=10)
    search.add_argument("--since", metavar="DATE", help="only what was written from DATE on")
    search.add_argument(
        "--kind",
        choices=("fact", "procedure"),
        action="append",
        help="only this kind of hit (repeatable)",
    )


def _add_procedure(b: _Builder) -> None:
    proc = b.group("procedure", "procedures: reusable how-tos")
    write = b.command(proc, "write", _procedure_write, "create or replace a procedure")
    write.add_argument("name", help="kebab-case, e.g. deploy-staging")
    write.add_argument("file", nargs="?", default="-", help="a markdown file, or - for stdin")
    b.command(proc, "show", _procedure_show, "print a procedure").add_argument("name")
    b.command(proc, "list", _procedure_list, "list procedures")


def _add_session(b: _Builder) -> None:
    session = b.group("session", "sessions: who is writing")
    start = b.command(session, "start", _session_start, "start a session and print its id")
    start.add_argument("--surface", default="cli", help="cli, repl, telegram, daemon, mcp, ...")
    start.add_argument(
        "--parent", metavar="ID", help="the parent session: makes a read-only subagent session"
    )
    b.command(session, "end", _session_end, "end a session and record it").add_argument("id")


def _add_sessions(b: _Builder) -> None:
    b.command(b.commands, "sessions", _sessions, "list recorded sessions")


def _add_serve(b: _Builder) -> None:
    serve = b.command(b.commands, "serve", _serve, "run the MCP server (stdio, or --http)")
    serve.add_argument(
        "--http", metavar="HOST:PORT", help="serve streamable HTTP, e.g. 127.0.0.1:8765"
    )
    serve.add_argument(
        "--allow-remote", action="store_true", help="allow --http on an address other than loopback"
    )


def _add_entries(b: _Builder) -> None:
    b.command(b.commands, "list", _list, "list the global entries")
    b.command(b.commands, "show", _show, "print a global entry").add_argument("name")
    b.command(b.commands, "rm", _rm, "delete a global entry").add_argument("name")
    b.command(b.commands, "reindex", _reindex, "rebuild MEMORY.md from the entry files")


def _add_task(b: _Builder) -> None:
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


def _add_prune(b: _Builder) -> None:
    prune = b.command(b.commands, "prune", _prune, "remove expired task notes (retention)")
    prune.add_argument("--dry-run", action="store_true", help="list what would go; delete nothing")


def _add_memorize(b: _Builder) -> None:
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


def _add_recall(b: _Builder) -> None:
    recall = b.command(b.commands, "recall", _recall, "print the context a step starts with")
    recall.add_argument("--task", metavar="ID", help="include this task's notes and lineage")
    recall.add_argument("--tiers", default="task,global", help="task, global or both")
    recall.add_argument(
        "--max-chars",
        type=int,
        metavar="N",
        help="budget of the two sections (default memory.max_inject_chars)",
    )
    recall.add_argument("--no-read", action="store_true", help="recall nothing")


def _add_daily(b: _Builder) -> None:
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


def _add_boot(b: _Builder) -> None:
    boot = b.command(b.commands, "boot", _boot, "print the context a new session starts with")
    boot.add_argument(
        "--subagent", action="store_true", help="the subagent/group variant: without MEMORY.md"
    )


def _add_get(b: _Builder) -> None:
    get = b.command(b.commands, "get", _get, "print exact lines of a memory file")
    get.add_argument("path", help="relative to the memory root, e.g. global/ci.md")
    get.add_argument(
        "--from", dest="from_line", type=int, default=1, metavar="N", help="first line (from 1)"
    )
    get.add_argument("--lines", type=int, metavar="K", help="how many lines (default: to the end)")


def _add_heartbeat(b: _Builder) -> None:
    group = b.group("heartbeat", "periodic checks and when they are due")
    b.command(group, "due", _heartbeat_due, "list the checks, due ones first")
    b.command(group, "mark", _heartbeat_mark, "record that a check was done now").add_argument(
        "check"
    )


def _add_distill(b: _Builder) -> None:
    distill = b.command(
        b.commands, "distill", _distill, "gather what was logged since the last distillation"
    )
    distill.add_argument("--max-chars", type=int, metavar="N", help="budget (default 8000)")
    distill.add_argument(
        "--done", action="store_true", help="move the watermark past what was last gathered"
    )


def _add_stats(b: _Builder) -> None:
    b.command(b.commands, "stats", _stats, "how much memory there is, tier by tier")


COMMANDS: dict[str, Callable[[_Builder], None]] = {
    "init": _add_init,
    "path": _add_path,
    "hot": _add_hot,
    "fact": _add_fact,
    "search": _add_search,
    "procedure": _add_procedure,
    "session": _add_session,
    "sessions": _add_sessions,
    "serve": _add_serve,
    "list": _add_entries,
    "show": _add_entries,
    "rm": _add_entries,
    "reindex": _add_entries,
    "task": _add_task,
    "prune": _add_prune,
    "memorize": _add_memorize,
    "recall": _add_recall,
    "daily": _add_daily,
    "boot": _add_boot,
    "get": _add_get,
    "heartbeat": _add_heartbeat,
    "distill": _add_distill,
    "stats": _add_stats,
}
VALUE_OPTIONS = ("--state-dir", "--session", "--agent")  # global options that take a value


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for `argv`: only its command when that is known, else all of them (for
    `memdir --help` and for a helpful error)."""
    common = _common()
    parser = _Parser(
        prog="memdir",
        parents=[common],
        description="Memory that outlasts the session, for AI agents.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    builder = _Builder(common, commands)
    name = _command_name(argv) if argv is not None else None
    for add in [COMMANDS[name]] if name in COMMANDS else dict.fromkeys(COMMANDS.values()):
        add(builder)
    return parser


def _command_name(argv: Sequence[str]) -> str | None:
    args = iter(argv)
    for arg in args:
        if arg in VALUE_OPTIONS:
            next(args, None)
        elif not arg.startswith("-"):
            return arg
    return None


# -- handlers: each calls the library once and returns what to print --------------------


def _memory(args: argparse.Namespace, surface: str = "cli") -> Memory:
    return Memory(
        getattr(args, "state_dir", None),
        session=getattr(args, "session", None),
        agent=getattr(args, "agent", None),
        surface=surface,
    )


def _init(args: argparse.Namespace) -> Any:
    result = init_project()
    if _json(args):
        return result._asdict()
    lines = [("Created" if result.created else "Already initialised:") + f" {result.state_dir}"]
    if result.gitignore:
        lines.append(f"Added .memdir/memory/ to {result.gitignore}")
    return "\n".join(lines)


def _path(args: argparse.Namespace) -> Any:
    memory = _memory(args)
    if _json(args):
        return {
            "memory_dir": memory.path,
            "state_dir": memory.state.path,
            "source": memory.state.source,
        }
    return memory.path


def _hot_show(args: argparse.Namespace) -> Any:
    text = _memory(args).hot()
    return {"content": text, "chars": len(text)} if _json(args) else Raw(text)


def _hot_set(args: argparse.Namespace) -> Any:
    return _hot_result(args, _memory(args).hot_set(_text(args.text)))


def _hot_append(args: argparse.Namespace) -> Any:
    return _hot_result(args, _memory(args).hot_append(_text(args.text)))


def _hot_rm(args: argparse.Namespace) -> Any:
    return _hot_result(args, _memory(args).hot_remove(line=args.line, section=args.section))


def _hot_result(args: argparse.Namespace, result: HotWrite) -> Any:
    if result.warning:
        _warn(result.warning)
    return result.to_dict() if _json(args) else f"HOT.md: {result.chars:,}/{result.cap:,} chars"


def _fact_add(args: argparse.Namespace) -> Any:
    fact = _memory(args).add_fact(_text(args.text), args.category)
    return fact.to_dict() if _json(args) else f"fact {fact.id} stored ({fact.category})"


def _fact_supersede(args: argparse.Namespace) -> Any:
    fact = _memory(args).supersede_fact(args.id, _text(args.text), args.category)
    return fact.to_dict() if _json(args) else f"fact {fact.id} supersedes fact {fact.supersedes}"


def _fact_rm(args: argparse.Namespace) -> Any:
    fact = _memory(args).remove_fact(args.id)
    return fact.to_dict() if _json(args) else f"fact {fact.id} removed"


def _fact_show(args: argparse.Namespace) -> Any:
    fact = _memory(args).get_fact(args.id)
    return fact.to_dict() if _json(args) else _render_fact(fact)


def _fact_history(args: argparse.Namespace) -> Any:
    chain = _memory(args).fact_history(args.id)
    if _json(args):
        return [fact.to_dict() for fact in chain]
    return "\n".join(_render_fact(fact) for fact in chain)


def _search(args: argparse.Namespace) -> Any:
    kinds = tuple(args.kind) if args.kind else ("fact", "procedure")
    hits = _memory(args).search(
        args.query, category=args.category, limit=args.limit, since=args.since, kinds=kinds
    )
    if _json(args):
        return [hit.to_dict() for hit in hits]
    return "\n".join(_render_hit(hit) for hit in hits) if hits else "no matches"


def _procedure_write(args: argparse.Namespace) -> Any:
    content = _text(args.file) if args.file == "-" else _read_file(args.file)
    proc = _memory(args).write_procedure(args.name, content)
    return _procedure_dict(proc) if _json(args) else f"procedure {proc.name} written ({proc.path})"


def _procedure_show(args: argparse.Namespace) -> Any:
    proc = _memory(args).procedure(args.name)
    return _procedure_dict(proc) if _json(args) else Raw(proc.content)


def _procedure_list(args: argparse.Namespace) -> Any:
    procs = _memory(args).procedures()
    if _json(args):
        return [_procedure_dict(p, content=False) for p in procs]
    rows = [f"{p.name}  {p.updated}  {p.error or p.description or ''}" for p in procs]
    return "\n".join(rows) if rows else "no procedures"


def _session_start(args: argparse.Namespace) -> Any:
    session = _memory(args).start_session(args.surface, args.parent)
    return session.to_dict() if _json(args) else session.id


def _session_end(args: argparse.Namespace) -> Any:
    session = _memory(args).end_session(args.id)
    if _json(args):
        return session.to_dict()
    if session.is_subagent:
        return f"session {session.id} is a subagent session: nothing to record"
    return f"session {session.id} ended: {_counts(session)}"


def _sessions(args: argparse.Namespace) -> Any:
    found = _memory(args).sessions()
    if _json(args):
        return [s.to_dict() for s in found]
    rows = [
        f"{s.id}  {s.surface:<9} {s.started} -> {s.ended or 'open'}  {_counts(s)}" for s in found
    ]
    return "\n".join(rows) if rows else "no sessions"


def _list(args: argparse.Namespace) -> Any:
    found = _memory(args).entries()
    if _json(args):
        return [e.to_dict() for e in found]
    rows = [
        f"{e.name}  BROKEN: {e.error}"
        if e.error
        else f"{e.name} — {e.description}  ({e.updated or '?'}{', ' + e.agent if e.agent else ''})"
        for e in found
    ]
    return "\n".join(rows) if rows else "no global entries"


def _show(args: argparse.Namespace) -> Any:
    entry = _memory(args).entry(args.name)
    return entry.to_dict() if _json(args) else Raw(entry.content or "")


def _rm(args: argparse.Namespace) -> Any:
    entry = _memory(args).remove_entry(args.name)
    return entry.to_dict() if _json(args) else f"global entry {entry.name} removed"


def _reindex(args: argparse.Namespace) -> Any:
    found = _memory(args).reindex()
    broken = [e for e in found if e.error]
    if _json(args):
        return {"entries": len(found) - len(broken), "broken": [e.to_dict() for e in broken]}
    lines = [f"MEMORY.md rebuilt: {len(found) - len(broken)} entries"]
    lines += [f"left out {e.path}: {e.error}" for e in broken]
    return "\n".join(lines)


def _task_start(args: argparse.Namespace) -> Any:
    task = _memory(args).start_task(args.id, args.parent)
    return task.to_dict() if _json(args) else f"task {task.id} running"


def _task_end(args: argparse.Namespace) -> Any:
    task = _memory(args).end_task(args.id, args.state)
    return task.to_dict() if _json(args) else f"task {task.id} {task.state}"


def _task_show(args: argparse.Namespace) -> Any:
    notes = _memory(args).notes(args.id, lineage=args.lineage)
    if _json(args):
        return [n.to_dict() for n in notes]
    return "\n".join(f"[{n.task}] {n.time} {n.content}" for n in notes) or "no notes"


def _prune(args: argparse.Namespace) -> Any:
    pruned = _memory(args).prune(dry_run=args.dry_run)
    if _json(args):
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
        _warn(warning)
    return result.to_dict() if _json(args) else Raw(result.output, exact=True)


def _recall(args: argparse.Namespace) -> Any:
    policy = {"recall": args.tiers, "read": not args.no_read}
    recalled = _memory(args).recall(task=args.task, policy=policy, max_chars=args.max_chars)
    return recalled.to_dict() if _json(args) else Raw(recalled.text, exact=True)


def _daily_append(args: argparse.Namespace) -> Any:
    result = _memory(args).daily_append(_text(args.text), section=args.section)
    return result.to_dict() if _json(args) else f"{result.path}: under ## {result.section}"


def _daily_show(args: argparse.Namespace) -> Any:
    date, text = _memory(args).daily_log(args.date)
    return {"date": date, "content": text} if _json(args) else Raw(text)


def _boot(args: argparse.Namespace) -> Any:
    boot = _memory(args).boot(subagent=True if args.subagent else None)
    if _json(args):
        return boot.to_dict()
    parts = [
        f"## {p.name} ({p.chars:,} chars, ~{p.tokens:,} tokens)\n{p.text.rstrip()}\n"
        for p in boot.parts
    ]
    total = f"Total: {boot.chars:,} chars, ~{boot.tokens:,} tokens in {len(boot.parts)} parts\n"
    return Raw("\n".join([*parts, total]), exact=True)


def _get(args: argparse.Namespace) -> Any:
    found = _memory(args).get(args.path, from_line=args.from_line, lines=args.lines)
    return found.to_dict() if _json(args) else Raw(found.text, exact=True)


def _heartbeat_due(args: argparse.Namespace) -> Any:
    checks = _memory(args).heartbeat_due()
    if _json(args):
        return [c.to_dict() for c in checks]
    return (
        "\n".join(
            f"{c.name:<12} {'DUE' if c.due else 'ok ':<4} every {c.hours:g}h, last {_when(c.last)}"
            for c in checks
        )
        or "no checks configured"
    )


def _heartbeat_mark(args: argparse.Namespace) -> Any:
    check = _memory(args).heartbeat_mark(args.check)
    return (
        check.to_dict() if _json(args) else f"{check.name} done; next due {_when(check.next_due)}"
    )


def _distill(args: argparse.Namespace) -> Any:
    memory = _memory(args)
    if args.done:
        mark = memory.distill_done()
        return {"watermark": mark} if _json(args) else f"distilled up to {mark}"
    gathered = memory.distill(max_chars=args.max_chars)
    if _json(args):
        return gathered.to_dict()
    if not gathered.items:
        return "nothing new to distill since " + (gathered.since or "the start")
    tail = f"\n\n({gathered.left} more item(s) after --done)" if gathered.left else ""
    return Raw(gathered.text + tail)


def _stats(args: argparse.Namespace) -> Any:
    found = _memory(args).stats()
    if _json(args):
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


def _when(moment: float | None) -> str:
    if moment is None:
        return "never"
    import time

    return time.strftime("%Y-%m-%d %H:%M", time.localtime(moment))


def _serve(args: argparse.Namespace) -> Any:
    from . import mcp_server

    http = _host_port(args.http, args.allow_remote) if args.http else None
    memory = _memory(args, surface="mcp")
    if http is not None:
        _banner(memory, *http)
    mcp_server.serve(memory, http)
    return None


# -- rendering ---------------------------------------------------------------------------


class Raw(str):
    """Printed as it is: a newline is added only to text that lacks one, unless `exact`."""

    exact = False

    def __new__(cls, text: str, exact: bool = False) -> Raw:
        raw = super().__new__(cls, text)
        raw.exact = exact
        return raw


def _render_fact(fact: Fact) -> str:
    state = {"superseded": f" (superseded by {fact.superseded_by})", "removed": " (removed)"}.get(
        fact.status, ""
    )
    return f"#{fact.id} [{fact.category}] {fact.created}{state}\n  {fact.content}"


def _render_hit(hit: Hit) -> str:
    if hit.kind == "fact":
        head = f"fact #{hit.id} [{hit.category}] {hit.created}"
    else:
        start, end = hit.lines or (1, 1)
        head = f"{hit.kind} {hit.name} ({hit.path}:{start}-{end})"
    body = "\n".join("  " + line for line in hit.content.split("\n"))
    return f"{head}  score {hit.score:g}\n{body}"


def _procedure_dict(proc: Procedure, content: bool = True) -> dict[str, Any]:
    data = proc.to_dict()
    if not content:
        data.pop("content")
    return data


def _counts(session: Session) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in sorted(session.counts.items())) or "no writes"


def _banner(memory: Memory, host: str, port: int) -> None:
    import json

    url = f"http://{host}:{port}/mcp"
    config = {"mcpServers": {"memdir": {"type": "http", "url": url}}}
    command = os.path.abspath(sys.argv[0]) if sys.argv[0].endswith("memdir") else "memdir"
    stdio = {
        "mcpServers": {
            "memdir": {
                "command": command,
                "args": ["serve"],
                "env": {"MEMDIR_STATE_DIR": memory.state.path},
            }
        }
    }
    print(
        f"memdir {_version()} serving MCP over streamable HTTP at {url}\n"
        f"store: {memory.state.path} (memory files in {memory.path})\n\n"
        f"Connect an MCP client over HTTP (e.g. Claude Code: claude mcp add --transport http "
        f"memdir {url}), or paste:\n{json.dumps(config, indent=2)}\n\n"
        f"Or let the client start memdir itself over stdio:\n{json.dumps(stdio, indent=2)}\n\n"
        "Press Ctrl+C to stop.",
        flush=True,
    )


def _version() -> str:
    from . import __version__

    return __version__


# -- input helpers -----------------------------------------------------------------------


def _json(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "json", False))


def _text(value: str) -> str:
    if value != "-":
        return value
    if sys.stdin is None or sys.stdin.isatty():
        raise ValidationError("'-' means the text comes on stdin, but nothing was piped in")
    return sys.stdin.read()


def _read_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or "not UTF-8 text"
        raise ValidationError(f"cannot read {path}: {reason}") from exc


def _host_port(value: str, allow_remote: bool) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValidationError(f"bad --http {value!r}: give HOST:PORT, e.g. 127.0.0.1:8765")
    if host not in ("127.0.0.1", "localhost", "::1") and not allow_remote:
        raise ValidationError(
            f"--http {value} is not a loopback address: memory would be open to the network; "
            "add --allow-remote if that is what you want"
        )
    return host, int(port)


def _warn(message: str) -> None:
    print(f"memdir: warning: {message}", file=sys.stderr)


def _emit(result: Any, as_json: bool) -> None:
    if result is None:
        return
    if as_json:
        import json

        print(json.dumps(result, ensure_ascii=False, indent=2))
    elif isinstance(result, Raw):
        add_newline = not result.exact and result and not result.endswith("\n")
        sys.stdout.write(result + "\n" if add_newline else result)
    else:
        print(result)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    try:
        _emit(args.handler(args), _json(args))
    except MemdirError as exc:
        print(f"memdir: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:  # a bug: still one line, and a way to see more
        if os.environ.get("MEMDIR_DEBUG"):
            raise
        print(
            f"memdir: internal error: {type(exc).__name__}: {exc} "
            "(run with MEMDIR_DEBUG=1 for the traceback, and please report it)",
            file=sys.stderr,
        )
        return 2
    return 0
