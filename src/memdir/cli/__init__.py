"""The `memdir` command's entry point (C): where a call runs.

Agents and hooks run memdir many times a turn, and a call that starts a fresh Python
spends most of its time importing memdir (~30 ms, against ~15 ms for the interpreter).
So a command run from a shell or a hook is handed to the user's warm fork server
(cli/forkserver.py), which forks a process that has everything imported and runs the call
there, with this caller's argv, environment, working folder and stdin/stdout/stderr. When
no server answers, the call runs in this process as it always did (cli/run.py) and a
server is started for the next one. MEMDIR_FORKSERVER=0 turns the server off.

This module is imported by every call, so it holds only what deciding needs: the
commands' names, without argparse or the library.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

# command -> the module that defines it, in the order `memdir --help` lists them
MODULES = {
    "init": "core",
    "path": "core",
    "hot": "core",
    "fact": "core",
    "search": "core",
    "procedure": "core",
    "session": "core",
    "sessions": "core",
    "serve": "core",
    "hook": "hook",
    "list": "workflow",
    "show": "workflow",
    "rm": "workflow",
    "reindex": "workflow",
    "task": "workflow",
    "prune": "workflow",
    "memorize": "workflow",
    "recall": "workflow",
    "daily": "workspace",
    "boot": "workspace",
    "get": "workspace",
    "heartbeat": "workspace",
    "distill": "workspace",
    "stats": "workspace",
    "doctor": "curation",
    "eval": "curation",
    "export": "portable",
    "import": "portable",
    "migrate": "portable",
    "setup": "hosts",
    "ui": "browser",
}
# what a forked process does not run: a server lives on, with its own signal handling
# (stopping.py), so it is started as a process of its own
LONG_RUNNING = frozenset({"serve", "ui"})

VALUE_OPTIONS = ("--state-dir", "--session", "--agent")  # global options that take a value


def command_name(argv: Sequence[str]) -> str | None:
    args = iter(argv)
    for arg in args:
        if arg in VALUE_OPTIONS:
            next(args, None)
        elif not arg.startswith("-"):
            return arg
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run `memdir ARGV`. Called with argv (a test, a library caller), it runs here; as
    the command (argv from sys.argv), in a warm process when one answers."""
    if argv is not None:
        from .run import main as run

        return run(argv)
    argv = sys.argv[1:]
    from . import forkserver

    name = command_name(argv)
    handed = name in MODULES and name not in LONG_RUNNING and forkserver.enabled()
    if handed:
        code = forkserver.call(argv)
        if code is not None:
            return code
    from .run import main as run

    code = run(argv)
    if handed:
        forkserver.start()
    return code


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for `argv` (cli/run.py)."""
    from .run import build_parser as build

    return build(argv)


__all__ = ["LONG_RUNNING", "MODULES", "build_parser", "main"]
