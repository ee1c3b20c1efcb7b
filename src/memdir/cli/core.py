"""Commands of the foundation: init, path, hot, fact, search, procedure, session(s), serve."""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import ValidationError
from ..memory import Memory, init_project
from ..models import CATEGORIES, Procedure
from ..numbers import parse_whole
from .common import (
    SEARCH_KINDS,
    SEARCH_MODES,
    Builder,
    Raw,
    as_json,
    memory_for,
    read_file,
    text_arg,
    warn,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .. import http_access
    from ..models import Fact, Hit, HotWrite, Session


def add_init(b: Builder) -> None:
    b.command(
        b.commands,
        "init",
        _init,
        "create a store: --state-dir DIR or $MEMDIR_STATE_DIR if given, else .memdir/ here",
    )


def add_path(b: Builder) -> None:
    b.command(b.commands, "path", _path, "print where memory lives")


def add_hot(b: Builder) -> None:
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


def add_fact(b: Builder) -> None:
    fact = b.group("fact", "the fact archive")
    add = b.command(fact, "add", _fact_add, "store a new fact")
    add.add_argument("text", help="the fact, or - for stdin")
    add.add_argument("-c", "--category", required=True, choices=CATEGORIES)
    add.add_argument("--valid-from", metavar="DATE", help="when it began to hold (default: now)")
    sup = b.command(
        fact, "supersede", _fact_supersede, "replace a fact, keeping the old in history"
    )
    sup.add_argument("id")
    sup.add_argument("text", help="the new fact, or - for stdin")
    sup.add_argument("-c", "--category", choices=CATEGORIES, help="default: the old fact's")
    sup.add_argument(
        "--valid-from",
        metavar="DATE",
        help="when the new one began to hold and the old one stopped (default: now)",
    )
    b.command(fact, "rm", _fact_rm, "remove a fact").add_argument("id")
    b.command(fact, "show", _fact_show, "print one fact").add_argument("id")
    b.command(
        fact, "history", _fact_history, "the timeline of a fact: every version, when it held"
    ).add_argument("id")


def add_search(b: Builder) -> None:
    search = b.command(b.commands, "search", _search, "search every tier of memory")
    search.add_argument(
        "query", help='a question in plain words, or FTS5 syntax: AND, OR, NOT, "phrase", prefix*'
    )
    search.add_argument("-c", "--category", choices=CATEGORIES, help="only facts of this category")
    search.add_argument("-n", "--limit", type=parse_whole, default=10)
    search.add_argument("--since", metavar="DATE", help="only what was written from DATE on")
    search.add_argument(
        "--kind",
        choices=SEARCH_KINDS,
        action="append",
        help="only this kind of hit (repeatable)",
    )
    search.add_argument(
        "--mode",
        choices=SEARCH_MODES,
        help="default: hybrid with the embeddings extra installed, else lexical",
    )
    search.add_argument(
        "--min-score",
        type=float,
        metavar="S",
        help="drop semantic hits below this score (0.5; 0: unrelated)",
    )
    search.add_argument(
        "--as-of",
        metavar="DATE",
        help="the facts that held then, superseded ones included (a date means its end)",
    )


def add_procedure(b: Builder) -> None:
    proc = b.group("procedure", "procedures: reusable how-tos")
    write = b.command(proc, "write", _procedure_write, "create or replace a procedure")
    write.add_argument("name", help="kebab-case, e.g. deploy-staging")
    write.add_argument("file", nargs="?", default="-", help="a markdown file, or - for stdin")
    b.command(proc, "show", _procedure_show, "print a procedure").add_argument("name")
    b.command(proc, "list", _procedure_list, "list procedures")


def add_session(b: Builder) -> None:
    session = b.group("session", "sessions: who is writing")
    start = b.command(session, "start", _session_start, "start a session and print its id")
    start.add_argument("--surface", default="cli", help="cli, repl, telegram, daemon, mcp, ...")
    start.add_argument(
        "--parent", metavar="ID", help="the parent session: makes a read-only subagent session"
    )
    b.command(session, "end", _session_end, "end a session and record it").add_argument("id")


def add_sessions(b: Builder) -> None:
    b.command(b.commands, "sessions", _sessions, "list recorded sessions")


def add_serve(b: Builder) -> None:
    serve = b.command(b.commands, "serve", _serve, "run the MCP server (stdio, or --http)")
    serve.add_argument(
        "--http", metavar="HOST:PORT", help="serve streamable HTTP, e.g. 127.0.0.1:8765"
    )
    serve.add_argument(
        "--allow-remote",
        action="store_true",
        help="serve --http to other machines: allows an address other than loopback, and "
        "every request then needs the bearer token ($MEMDIR_TOKEN, --token-file, or one "
        "made and printed at start)",
    )
    serve.add_argument(
        "--host-name",
        action="append",
        metavar="NAME",
        help="a name or address clients use to reach the server (their Host header); the "
        "loopback names and the bind address are always accepted; repeat for more",
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        metavar="ORIGIN",
        help="a web page origin that may call the server from a browser, e.g. "
        "http://localhost:6274 (none by default); repeat for more",
    )
    serve.add_argument(
        "--ui",
        action="store_true",
        help="with --http: also serve the memory browser at /ui/ (its address, with its own "
        "access token, is printed at start)",
    )
    serve.add_argument(
        "--token-file",
        metavar="PATH",
        help="read the bearer token from this file (keep it outside the repository); "
        "$MEMDIR_TOKEN wins; a token given is required on loopback too",
    )


def _init(args: argparse.Namespace) -> Any:
    result = init_project(state_dir=getattr(args, "state_dir", None))
    if as_json(args):
        return result._asdict()
    lines = [
        ("Created" if result.created else "Already initialised:") + f" {result.state_dir}",
        f"memory files in {result.memory_dir}",
    ]
    if result.gitignore:
        ignored = os.path.relpath(result.memory_dir, os.path.dirname(result.gitignore))
        lines.append(f"Added {ignored}/ to {result.gitignore}")
    return "\n".join(lines)


def _path(args: argparse.Namespace) -> Any:
    memory = memory_for(args)
    if as_json(args):
        return {
            "memory_dir": memory.path,
            "state_dir": memory.state.path,
            "source": memory.state.source,
        }
    return memory.path


def _hot_show(args: argparse.Namespace) -> Any:
    text = memory_for(args).hot()
    return {"content": text, "chars": len(text)} if as_json(args) else Raw(text)


def _hot_set(args: argparse.Namespace) -> Any:
    return _hot_result(args, memory_for(args).hot_set(text_arg(args.text)))


def _hot_append(args: argparse.Namespace) -> Any:
    return _hot_result(args, memory_for(args).hot_append(text_arg(args.text)))


def _hot_rm(args: argparse.Namespace) -> Any:
    return _hot_result(args, memory_for(args).hot_remove(line=args.line, section=args.section))


def _hot_result(args: argparse.Namespace, result: HotWrite) -> Any:
    if result.warning:
        warn(result.warning)
    return result.to_dict() if as_json(args) else f"HOT.md: {result.chars:,}/{result.cap:,} chars"


def _fact_add(args: argparse.Namespace) -> Any:
    fact = memory_for(args).add_fact(text_arg(args.text), args.category, valid_from=args.valid_from)
    return _written(args, fact, "not stored", f"fact {fact.id} stored ({fact.category})")


def _fact_supersede(args: argparse.Namespace) -> Any:
    fact = memory_for(args).supersede_fact(
        args.id, text_arg(args.text), args.category, valid_from=args.valid_from
    )
    return _written(args, fact, "unchanged", f"fact {fact.id} supersedes fact {args.id}")


def _written(args: argparse.Namespace, item: Fact | Procedure, refused: str, done: str) -> Any:
    """What a guarded write prints: JSON; why nothing was written (a duplicate); or what
    was written, with a near duplicate named on stderr."""
    if as_json(args):
        return _procedure_dict(item) if isinstance(item, Procedure) else item.to_dict()
    if item.duplicate:
        return f"{refused}: {item.hint}"
    if item.hint:
        warn(item.hint)
    return done


def _fact_rm(args: argparse.Namespace) -> Any:
    fact = memory_for(args).remove_fact(args.id)
    return fact.to_dict() if as_json(args) else f"fact {fact.id} removed"


def _fact_show(args: argparse.Namespace) -> Any:
    fact = memory_for(args).get_fact(args.id)
    return fact.to_dict() if as_json(args) else _render_fact(fact)


def _fact_history(args: argparse.Namespace) -> Any:
    chain = memory_for(args).fact_history(args.id)
    if as_json(args):
        return [fact.to_dict() for fact in chain]
    return _render_history(chain)


def _search(args: argparse.Namespace) -> Any:
    memory = memory_for(args)
    hits = memory.search(
        args.query,
        category=args.category,
        limit=args.limit,
        since=args.since,
        kinds=args.kind,
        mode=args.mode,
        min_score=args.min_score,
        as_of=args.as_of,
    )
    notice = memory.search_notice()
    if notice:
        warn(notice)
    if as_json(args):
        return [hit.to_dict() for hit in hits]
    return "\n".join(_render_hit(hit) for hit in hits) if hits else "no matches"


def _procedure_write(args: argparse.Namespace) -> Any:
    content = text_arg(args.file) if args.file == "-" else read_file(args.file)
    proc = memory_for(args).write_procedure(args.name, content)
    return _written(args, proc, "unchanged", f"procedure {proc.name} written ({proc.path})")


def _procedure_show(args: argparse.Namespace) -> Any:
    proc = memory_for(args).procedure(args.name)
    return _procedure_dict(proc) if as_json(args) else Raw(proc.content)


def _procedure_list(args: argparse.Namespace) -> Any:
    procs = memory_for(args).procedures()
    if as_json(args):
        return [_procedure_dict(p, content=False) for p in procs]
    rows = [f"{p.name}  {p.updated}  {p.error or p.description or ''}" for p in procs]
    return "\n".join(rows) if rows else "no procedures"


def _session_start(args: argparse.Namespace) -> Any:
    session = memory_for(args).start_session(args.surface, args.parent)
    return session.to_dict() if as_json(args) else session.id


def _session_end(args: argparse.Namespace) -> Any:
    session = memory_for(args).end_session(args.id)
    if as_json(args):
        return session.to_dict()
    if session.is_subagent:
        return f"session {session.id} is a subagent session: nothing to record"
    return f"session {session.id} ended: {_counts(session)}"


def _sessions(args: argparse.Namespace) -> Any:
    found = memory_for(args).sessions()
    if as_json(args):
        return [s.to_dict() for s in found]
    rows = [
        f"{s.id}  {s.surface:<9} {s.started} -> {s.ended or 'open'}  {_counts(s)}" for s in found
    ]
    return "\n".join(rows) if rows else "no sessions"


def _serve(args: argparse.Namespace) -> Any:
    from .. import stopping

    stop = stopping.install()  # before the SDK's second of imports: a signal then is clean
    from .. import http_access, mcp_server

    access = None
    if args.http:
        access = http_access.plan(
            args.http,
            allow_remote=args.allow_remote,
            host_names=args.host_name,
            origins=args.allow_origin,
            token_file=args.token_file,
        )
        os.environ.pop(http_access.TOKEN_ENV, None)  # not handed to processes started here
    elif args.ui:
        raise ValidationError(
            "--ui goes with --http HOST:PORT: the memory browser is a web page (or run `memdir ui`)"
        )
    elif args.allow_remote or args.host_name or args.allow_origin or args.token_file:
        raise ValidationError(
            "--allow-remote, --host-name, --allow-origin and --token-file go with --http "
            "HOST:PORT; over stdio the client that starts memdir is the only one"
        )
    memory = memory_for(args, surface="mcp")
    memory.use_worker = False  # a server lives long: it holds its own model (Q2)
    if access is not None:
        _banner(memory, access)
    code = mcp_server.serve(memory, access, stop, ui=args.ui)
    if code:
        raise SystemExit(code)
    return None


# -- rendering ---------------------------------------------------------------------------


def _render_fact(fact: Fact) -> str:
    state = {"superseded": f" (superseded by {fact.superseded_by})", "removed": " (removed)"}.get(
        fact.status, ""
    )
    return f"#{fact.id} [{fact.category}] {fact.created}{state}\n  {fact.content}"


def _render_history(chain: list[Fact]) -> str:
    """A fact's timeline (F3). A version superseded twice (a fork) names its successors;
    each branch but the first is indented under it and says where it began."""
    from .. import facts

    later = facts.successors(chain)
    branch: dict[int, int] = {}
    out = []
    for fact in chain:
        parent = fact.supersedes if fact.supersedes in branch else None
        first = parent is None or later[parent][:1] == [fact.id]
        branch[fact.id] = 0 if parent is None else branch[parent] + (0 if first else 1)
        side = "" if first else f" (another version of #{parent})"
        out.append(_render_version(fact, later[fact.id], "  " * branch[fact.id], side))
    return "\n".join(out)


def _render_version(
    fact: Fact, successors: list[int] | None = None, indent: str = "", side: str = ""
) -> str:
    """One version in a fact's timeline: when it held, and how it ended."""
    after = [fact.superseded_by, *[i for i in successors or [] if i != fact.superseded_by]]
    named = " and ".join(f"#{i}" for i in after)
    forked = f" (forked: {len(after)} successors)" if len(after) > 1 else ""
    ended = {
        "superseded": f"{fact.valid_to}, superseded by {named}{forked}",
        "removed": f"{fact.valid_to}, removed",
    }.get(fact.status, "now")
    head = f"{indent}#{fact.id}{side} [{fact.category}] {fact.valid_from} -> {ended}"
    return f"{head}\n{indent}  {fact.content}"


def _render_hit(hit: Hit) -> str:
    if hit.kind == "fact":
        until = f" (held until {hit.valid_to})" if hit.valid_to else ""
        head = f"fact #{hit.id} [{hit.category}] {hit.date}{until}"
    else:
        start, end = hit.lines or (1, 1)
        head = f"{hit.kind} {hit.name} ({hit.path}:{start}-{end})"
    body = "\n".join("  " + line for line in hit.content.split("\n"))
    how = "  (by its words: not embedded yet)" if hit.lexical_only else ""
    return f"{head}  score {hit.score:g}{how}\n{body}"


def _procedure_dict(proc: Procedure, content: bool = True) -> dict[str, Any]:
    data = proc.to_dict()
    if not content:
        data.pop("content")
    return data


def _counts(session: Session) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in sorted(session.counts.items())) or "no writes"


def _banner(memory: Memory, access: http_access.Access) -> None:
    import json

    url = access.url
    server: dict[str, Any] = {"type": "http", "url": url}
    header = ""
    if access.token is not None:
        server["headers"] = {"Authorization": "Bearer <token>"}
        header = ' --header "Authorization: Bearer <token>"'
    config = {"mcpServers": {"memdir": server}}
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
        f"store: {memory.state.path} (memory files in {memory.path})\n"
        f"answers to Host: {', '.join(access.allowed_hosts())}\n\n"
        f"Connect an MCP client over HTTP (e.g. Claude Code: claude mcp add --transport http "
        f"memdir {url}{header}), or paste:\n{json.dumps(config, indent=2)}\n\n"
        f"Or let the client start memdir itself over stdio:\n{json.dumps(stdio, indent=2)}\n\n"
        "Press Ctrl+C to stop.",
        flush=True,
    )
    if access.token is not None:
        _announce_token(access)


def _announce_token(access: http_access.Access) -> None:
    """On stderr, never stdout (the banner may be pasted or logged); a token the user gave
    is named by where it came from, never shown."""
    from .. import http_access

    if access.token_source == "generated":
        where = (
            f"a new one, made for this run (set ${http_access.TOKEN_ENV} or --token-file "
            "to keep one across restarts):\n"
            f"  {access.token}"
        )
    else:
        where = f"the one in {access.token_source}"
    print(
        f"memdir: every request needs the bearer token, {where}\n"
        "memdir: clients send it as the header  Authorization: Bearer <token>",
        file=sys.stderr,
        flush=True,
    )


def _version() -> str:
    from .. import __version__

    return __version__


# -- input helpers -----------------------------------------------------------------------


COMMANDS = {
    "init": add_init,
    "path": add_path,
    "hot": add_hot,
    "fact": add_fact,
    "search": add_search,
    "procedure": add_procedure,
    "session": add_session,
    "sessions": add_sessions,
    "serve": add_serve,
}
