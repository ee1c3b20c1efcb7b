"""What every command module shares: the parser classes, the common options, and the
small helpers that turn arguments into a Memory and results into output."""

from __future__ import annotations

import argparse
import os
import sys

from .. import process
from ..errors import UsageError, ValidationError
from ..memory import Memory

# argparse passes each of its own strings through gettext, which searches the disk for a
# catalogue every time (~2 ms a call, with nothing found). memdir speaks English only, so
# argparse's few strings need no translation either.
argparse._ = lambda message: message  # type: ignore[attr-defined]  # private, not in the stubs

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

    Handler = Callable[[argparse.Namespace], Any]


class Formatter(argparse.HelpFormatter):
    """argparse builds a formatter for every add_argument, and its default width comes from
    shutil (~2.5 ms of imports per CLI call); os gives the same answer."""

    def __init__(self, prog: str) -> None:
        columns = os.environ.get("COLUMNS", "")
        if columns.isdigit():
            width = int(columns)
        else:
            try:
                # the ignore below: sys.__stdout__ is None without a stdout: AttributeError below
                width = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
            except (OSError, AttributeError, ValueError):
                width = 80
        super().__init__(prog, width=max(40, width - 2))


class Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """A usage error is a user error: one line and exit 1 like every other, rendered by
        main (as JSON with --json)."""
        message = " ".join(message.splitlines())  # an argument may hold line breaks
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def common_options() -> argparse.ArgumentParser:
    # SUPPRESS: an option given before the command must not be reset by the sub-parser.
    common = Parser(add_help=False)
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print machine-readable JSON"
    )
    common.add_argument(
        "--state-dir",
        default=argparse.SUPPRESS,
        metavar="DIR",
        help="the state folder (default: $MEMDIR_STATE_DIR, the nearest .memdir/, or "
        "~/.memdir/state); one named here or in $MEMDIR_STATE_DIR must exist: "
        "`memdir init --state-dir DIR` makes it",
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


class Builder:
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
        subs = sub.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
        subs.required = True
        return subs


# what `--kind` and `--mode` of a search accept (Q1-Q3), here so the CLI need not import
# the search package to build its parser
SEARCH_KINDS = ("fact", "procedure", "global", "task", "daily")
SEARCH_MODES = ("lexical", "semantic", "hybrid")


def memory_for(args: argparse.Namespace, surface: str = "cli") -> Memory:
    memory = Memory(
        getattr(args, "state_dir", None),
        session=getattr(args, "session", None),
        agent=getattr(args, "agent", None),
        surface=surface,
    )
    memory.use_worker = True  # Q2: a short-lived process asks the store's warm worker
    OPENED.append(memory)
    return memory


OPENED: list[Memory] = []  # what this call opened: closed when it ends (close_opened)


def close_opened() -> None:
    """Close the stores this call opened, once its output is written; but for a forked
    call's child (C1, process.forked), which leaves them to its os._exit: that lets go of
    each connection without SQLite's close, so the call does not fold the WAL into the
    database and delete it for the next call to make again (a checkpoint and three syncs
    a call). Every commit is on disk already; the WAL is folded as it grows (SQLite's
    autocheckpoint) and by the close of a process that runs on its own."""
    leave_open = process.forked()
    while OPENED:
        memory = OPENED.pop()
        if not leave_open:
            memory.close()


class Raw(str):
    """Printed as it is: a newline is added only to text that lacks one, unless `exact`."""

    exact = False

    def __new__(cls, text: str, exact: bool = False) -> Raw:
        raw = super().__new__(cls, text)
        raw.exact = exact
        return raw


def as_json(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "json", False))


def text_arg(value: str) -> str:
    if value != "-":
        return value
    if sys.stdin is None or sys.stdin.isatty():
        raise ValidationError("'-' means the text comes on stdin, but nothing was piped in")
    return sys.stdin.read()


def read_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or "not UTF-8 text"
        raise ValidationError(f"cannot read {path}: {reason}") from exc


STAGES = {"chunks": "indexing", "embeddings": "embedding"}


def progress_bar(stage: str, done: int, total: int) -> None:
    """One line on stderr, redrawn in place when stderr is a terminal, drawn from the
    first item (0 of N) so a long run shows it is under way; nothing on a pipe, where the
    command's summary says what was done."""
    if not sys.stderr.isatty() or total <= 0:
        return
    width = 30
    filled = width * min(done, total) // total
    end = "\n" if done >= total else ""
    print(
        f"\r{STAGES.get(stage, stage):<10} [{'#' * filled}{'.' * (width - filled)}] "
        f"{done:,}/{total:,}",
        end=end,
        file=sys.stderr,
        flush=True,
    )


def suspect(text: str) -> bool:
    """Whether `text` may hold a marker keyword: markers.defang's own quick test, so that a
    plain answer does not import markers (~2 ms on the CLI's cold path)."""
    return not text.isascii() or "\\" in text or "_memorize_" in text.lower()


def warn(message: str) -> None:
    if suspect(message):  # R4: a warning may quote stored text
        from ..markers import defang

        message = defang(message)
    print(f"memdir: warning: {message}", file=sys.stderr)


def when(moment: float | None) -> str:
    if moment is None:
        return "never"
    import time

    return time.strftime("%Y-%m-%d %H:%M", time.localtime(moment))
