"""Wiring memdir into an agent host (K1): `memdir setup claude-code`, `memdir setup codex`.
The rules of the merge live in hostconfig.py (Claude Code's JSON) and codexconfig.py
(Codex's config.toml and AGENTS.md); this module finds the memdir to run, and renders what
changed."""

from __future__ import annotations

import argparse
import os
import sys

from .common import Builder, Raw, as_json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SETUP_HELP = "register memdir's MCP server and hooks in an agent host's config (claude-code, codex)"
SETUP_EPILOG = """\
project scope (the default; the project is the git work tree holding the current folder,
else the current folder): .mcp.json gets the `memdir` server, .claude/settings.json the
hooks (SessionStart, UserPromptSubmit, SubagentStart, PreToolUse on memdir's tools, Stop,
SubagentStop, PostCompact, SessionEnd), the rule allowing memdir's tools (mcp__memdir) and
the server's approval. user scope: the same in
~/.claude.json and ~/.claude/settings.json ($CLAUDE_CONFIG_DIR when set).

Everything else in those files stays as it was; a second run changes nothing; --remove
takes out only what memdir added (found by its command). A file that is not valid JSON is
named with its line and left untouched. One line per file says what changed.

codex: project scope: .codex/config.toml gets the `memdir` server (its tools approved) and
the hooks (the same but PostCompact), AGENTS.md a section on what goes where; Codex loads a
project's config once the project is trusted, and runs hooks once they are reviewed.
user scope: $CODEX_HOME/config.toml and $CODEX_HOME/AGENTS.md (~/.codex). memdir's lines
sit between two marker lines: the rest of each file is never rewritten."""


def add_setup(b: Builder) -> None:
    setup = b.command(b.commands, "setup", _setup, SETUP_HELP)
    setup.epilog = SETUP_EPILOG
    setup.formatter_class = argparse.RawDescriptionHelpFormatter
    setup.add_argument("host", choices=["claude-code", "codex"], help="the agent host to wire")
    setup.add_argument(
        "--scope",
        choices=["project", "user"],
        default="project",
        help="this project's config (default) or the user's, for every project",
    )
    setup.add_argument(
        "--dry-run", action="store_true", help="write nothing; say what would change"
    )
    setup.add_argument("--remove", action="store_true", help="take out what memdir added")


def _setup(args: argparse.Namespace) -> Any:
    changes: list[Any]
    if args.host == "codex":
        from .. import codexconfig

        wanted = codexconfig.targets(args.scope, launcher(), os.getcwd(), os.environ)
        changes = codexconfig.run(wanted, remove=args.remove, dry_run=args.dry_run)
    else:
        from .. import hostconfig

        targets = hostconfig.targets(args.scope, launcher(), os.getcwd(), os.environ)
        changes = hostconfig.run(targets, remove=args.remove, dry_run=args.dry_run)
    if as_json(args):
        return [change.to_dict() for change in changes]
    lines = []
    for change in changes:
        verb = change.action if not change.dry_run else f"would be {change.action}"
        if change.dry_run and change.action == "unchanged":
            verb = "unchanged"
        lines.append(f"{change.path}: {verb}")
    return Raw("\n".join(lines))


def launcher() -> list[str]:
    """The command that runs this memdir, by absolute path, for the host to start: the
    console script that is running (or the one beside this interpreter), else
    `python -m memdir` with this interpreter."""
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    beside = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "memdir")
    for candidate in (script, beside):
        if (
            os.path.basename(candidate) == "memdir"
            and os.path.isfile(candidate)
            and os.access(candidate, os.X_OK)
        ):
            return [candidate]
    return [os.path.abspath(sys.executable), "-m", "memdir"]


COMMANDS = {"setup": add_setup}
