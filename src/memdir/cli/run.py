"""The `memdir` command (C): parse -> Memory -> render. No memory logic lives here.

argparse rather than click or typer: the CLI runs many times per agent turn, and click adds
~30 ms to every start (typer more), against a ~20 ms floor for the whole search call. For
the same reason a call builds, and imports, only the command it runs: the commands live in
modules (core, workflow, workspace, curation, portable) named in MODULES. This module runs
a call in this process; cli/__init__.py decides whether it runs here or in a warm process
forked for it (cli/forkserver.py), which then runs it here.
Errors become one line on stderr and exit 1 (a bug: exit 2); never a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys

from .. import __version__, advice
from ..errors import MemdirError
from ..storage import watched
from . import LONG_RUNNING, MODULES, command_name
from .common import Builder, Parser, Raw, as_json, close_opened, common_options
from .common import suspect as _suspect

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any


BUILT: dict[str, argparse.ArgumentParser] = {}  # command -> its parser, built ahead (prebuild)


def prebuild() -> None:
    """Build each command's parser now, for a process that forks calls (the fork server):
    building one is most of a small command's time, and parsing leaves a parser as it was.
    Each is also made to parse its bare name once: argparse compiles the patterns it
    matches a command's positionals with on the first parse (~1 ms in each child)."""
    import contextlib
    import io

    for name in MODULES:
        BUILT[name] = parser = build_parser([name])
        with contextlib.suppress(Exception, SystemExit), contextlib.redirect_stderr(io.StringIO()):
            parser.parse_known_args([name])


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for `argv`: only its command when that is known, else all of them (for
    `memdir --help` and for a helpful error)."""
    name = command_name(argv) if argv is not None else None
    if name in BUILT:
        return BUILT[name]
    common = common_options()
    parser = Parser(
        prog="memdir",
        parents=[common],
        description="Memory that outlasts the session, for AI agents.",
    )
    parser.add_argument(
        "--version", action="version", version=f"memdir {__version__}", help="print the version"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True
    builder = Builder(common, commands)
    names = [name] if name in MODULES else list(MODULES)
    added = set()
    for command in names:
        add = importlib.import_module(f".{MODULES[command]}", __package__).COMMANDS[command]
        if add not in added:  # list, show, rm and reindex share one builder
            added.add(add)
            add(builder)
    return parser


# -- handlers: each calls the library once and returns what to print --------------------


def _emit(result: Any, json_output: bool) -> None:
    """Every result a command prints passes here, made inert (R4): no stored text shown by
    any command can hold a live memorize marker (markers.py says why and how)."""
    if result is None:
        return
    if json_output:
        import json

        text = json.dumps(result, ensure_ascii=False, indent=2)
        if _suspect(text):
            text = json.dumps(_inert(result), ensure_ascii=False, indent=2)
        print(text)
    elif isinstance(result, Raw):
        text = _inert(result) if _suspect(result) else result
        add_newline = not result.exact and text and not text.endswith("\n")
        sys.stdout.write(text + "\n" if add_newline else text)
    else:
        text = str(result)
        print(_inert(text) if _suspect(text) else text)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if command_name(argv) not in LONG_RUNNING:
        watched.one_call()  # a spare of the fork server has turned watching on already
    json_output = _wants_json(argv)  # before parsing: a usage error is rendered as asked
    token = None
    try:
        if command_name(argv) is None and "--version" in argv:
            _emit({"version": __version__} if json_output else f"memdir {__version__}", json_output)
            return 0
        args = build_parser(argv).parse_args(argv)
        json_output = as_json(args)
        # hints name commands (advice.py), with the store the user named: they run as written
        state_dir = getattr(args, "state_dir", None)
        token = advice.use("cli", ["memdir", *(["--state-dir", state_dir] if state_dir else [])])
        _emit(args.handler(args), json_output)
    except MemdirError as exc:
        _error(f"error: {exc}", type(exc).__name__, json_output, exc)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:  # a bug: still one line, and a way to see more
        if os.environ.get("MEMDIR_DEBUG"):
            raise
        _error(
            f"internal error: {type(exc).__name__}: {exc} "
            "(run with MEMDIR_DEBUG=1 for the traceback, and please report it)",
            "InternalError",
            json_output,
        )
        return 2
    finally:
        if token is not None:
            advice.reset(token)
        try:
            close_opened()
        except MemdirError:
            pass  # closing a store that could not be written to: nothing left to lose
    return 0


def _inert(result: Any) -> Any:
    from ..markers import inert

    return inert(result)


def _wants_json(argv: Sequence[str]) -> bool:
    """--json anywhere among the options (after `--` it is an argument, not the flag)."""
    options = argv[: list(argv).index("--")] if "--" in argv else argv
    return "--json" in options


def _error(line: str, kind: str, json_output: bool, exc: object = None) -> None:
    """C, Z: one line. With --json, a JSON object on stdout where the answer would have been
    (`error`, `kind`, and the error's context such as `path`, `line`, `key`, `hint`);
    else `memdir: <line>` on stderr."""
    if not json_output:
        print(f"memdir: {_inert(line) if _suspect(line) else line}", file=sys.stderr)
        return
    import json

    message = line.removeprefix("error: ")
    data: dict[str, Any] = {"error": message, "kind": kind}
    for field in ("path", "line", "key", "hint"):
        value = getattr(exc, field, None)
        if value is not None:
            data[field] = value
    text = json.dumps(data, ensure_ascii=False)
    print(json.dumps(_inert(data), ensure_ascii=False) if _suspect(text) else text)


__all__ = ["build_parser", "main", "prebuild"]
