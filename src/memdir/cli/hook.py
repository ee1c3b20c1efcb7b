"""`memdir hook EVENT` (K2): what an agent host runs at a lifecycle event. The event's
JSON comes on stdin; the reply the host expects goes to stdout; every problem is one line
on stderr and exit 0, so the host is never broken by memdir (hooks.py)."""

from __future__ import annotations

import sys

from .common import Builder, Raw

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

HOOK_HELP = "answer an agent host's hook: EVENT's JSON on stdin (SessionStart, SubagentStart, ...)"


def add_hook(b: Builder) -> None:
    hook = b.command(b.commands, "hook", _hook, HOOK_HELP)
    hook.add_argument(
        "event",
        nargs="?",
        metavar="EVENT",
        help=(
            "SessionStart, UserPromptSubmit, SubagentStart, PreToolUse, Stop, SubagentStop, "
            "PreCompact, PostCompact or SessionEnd (Claude Code's names)"
        ),
    )
    hook.add_argument(
        "--host",
        choices=["claude-code", "codex"],
        default="claude-code",
        help="the agent host running the hook: its sessions are recorded with this surface",
    )


def _hook(args: argparse.Namespace) -> Any:
    from .. import hooks

    try:
        tty = sys.stdin is None or sys.stdin.isatty()
        stdin = "" if tty else sys.stdin.buffer.read().decode("utf-8", errors="replace")
    except (OSError, ValueError) as exc:
        stdin = ""
        print(f"memdir: hook {args.event}: cannot read stdin: {exc}", file=sys.stderr)
    state_dir = getattr(args, "state_dir", None)
    reply = hooks.run(args.event, stdin, state_dir=state_dir, surface=args.host)
    if reply.warning:
        print(f"memdir: hook {args.event}: {' '.join(reply.warning.splitlines())}", file=sys.stderr)
    return Raw(reply.out) if reply.out else None


COMMANDS = {"hook": add_hook}
