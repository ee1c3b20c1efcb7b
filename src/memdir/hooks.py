"""`memdir hook EVENT` (K2): memdir inside an agent host's loop. The host (Claude Code)
runs the command at a lifecycle event with the event's JSON on stdin and reads what it
prints; this module turns one event into one reply.

A hook never breaks the host: bad input, a missing field, an unknown event, a broken
store or a bug is one line on stderr and exit 0 with nothing printed, and a hook that
would run past `[hooks] timeout_ms` gives up the same way (a watchdog ends the process:
SQLite's transactions and memdir's file writes are atomic, so what was under way is
either done or not). It starts as fast as any CLI call: json, the facade, nothing more
(tools.py only when a subagent calls a memdir tool).

One handler per event in EVENTS: a new event (Stop, PreCompact...) is one more function.
"""

from __future__ import annotations

import os
import sys

from .errors import MemdirError, ValidationError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from collections.abc import Callable, Mapping
    from typing import Any

    from .identity import BootPart
    from .memory import Memory

SURFACE = "claude-code"
SESSION_END_MS = 1200  # Claude Code gives SessionEnd hooks 1.5 s unless told otherwise
PROJECT_ENV = "CLAUDE_PROJECT_DIR"  # the project Claude Code runs in: its .memdir/ is found
READ_ONLY_LINE = (
    "memdir: memory is read-only in this subagent: search it and read files "
    "(memory_search, memory_get, memory_recall); hand what should be remembered back to the "
    "main session, which writes it."
)


class Reply:
    """What the hook prints (stdout, for the host) and the one line it says on stderr."""

    def __init__(self, out: str = "", warning: str | None = None) -> None:
        self.out, self.warning = out, warning


class Hook:
    """One event's input and the store it reaches, opened on first use."""

    def __init__(
        self,
        event: str,
        data: dict[str, Any],
        env: Mapping[str, str],
        state_dir: str | None,
        surface: str = SURFACE,
    ) -> None:
        self.event, self.data, self.env, self.state_dir = event, data, env, state_dir
        self.surface = surface  # the host: claude-code, or codex (`memdir hook --host`)
        self._memory: Memory | None = None
        self._timer: threading.Timer | None = None
        self.warnings: list[str] = []

    def field(self, name: str) -> str:
        value = self.data.get(name)
        if not isinstance(value, str) or not value:
            raise ValidationError(f"the {self.event} input has no {name!r}")
        return value

    @property
    def memory(self) -> Memory:
        if self._memory is None:
            from .memory import Memory

            given = self.env.get(PROJECT_ENV) or _str(self.data.get("cwd"))
            cwd = given if given and os.path.isdir(given) else os.getcwd()
            self._memory = Memory(self.state_dir, surface=self.surface, env=self.env, cwd=cwd)
            budget = self._memory.settings.hooks_timeout_ms
            if self.event == "SessionEnd":
                budget = min(budget, SESSION_END_MS)
            self._timer = _watchdog(self.event, budget)
        return self._memory

    def close(self) -> None:
        """Done in time: the watchdog is called off before anything is printed."""
        if self._timer is not None:
            self._timer.cancel()
        if self._memory is not None:
            self._memory.close()


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def context(event: str, text: str) -> str:
    """Claude Code's answer that puts `text` in front of the model."""
    import json

    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}},
        ensure_ascii=False,
    )


# -- the events --------------------------------------------------------------------------


def session_start(hook: Hook) -> str:
    """E3 at the host's SessionStart (startup, resume, clear, compact): the host's session
    is adopted (U1; a resumed one opened again), and the boot context goes in front of
    the model within `[hooks] start_budget_chars`."""
    memory = hook.memory
    if not memory.settings.enabled:
        return ""
    try:
        memory.adopt_session(hook.field("session_id"), hook.surface, reopen=True)
    except MemdirError as exc:  # the context still reaches the model
        hook.warnings.append(f"the session was not recorded: {exc}")
    boot = memory.boot(subagent=False)
    text = fit(boot.parts, memory.settings.hooks_start_budget_chars, memory.path)
    return context("SessionStart", text) if text else ""


def subagent_start(hook: Hook) -> str:
    """U2 at SubagentStart: the read-only slice (HOT.md and the line that says memory is
    read-only here), not the whole boot; the subagent is recorded under its parent."""
    memory = hook.memory
    if not memory.settings.enabled:
        return ""
    agent, parent = hook.field("agent_id"), hook.field("session_id")
    try:
        memory.adopt_session(agent, hook.surface, parent=parent)
    except MemdirError as exc:
        hook.warnings.append(f"the subagent session was not recorded: {exc}")
    hot = [p for p in memory.boot(subagent=True).parts if p.name == "HOT.md"]
    budget = memory.settings.hooks_start_budget_chars - len(READ_ONLY_LINE) - 1
    text = fit(hot, budget, memory.path, header=False)
    return context("SubagentStart", f"{text}{READ_ONLY_LINE}")


def pre_tool_use(hook: Hook) -> str:
    """U2 at PreToolUse: a memdir write tool called inside a subagent (the input carries
    agent_id, which only a subagent's calls have) is denied with the one-line reason the
    model sees; anything else is let through with no answer."""
    if not _str(hook.data.get("agent_id")):
        return ""
    tool = _memdir_tool(hook.field("tool_name"))
    if tool is None:
        return ""
    from .tools import TOOLS  # only here: a subagent calling one of memdir's tools

    found = TOOLS.get(tool)
    if found is None or found.read_only:
        return ""
    import json

    reason = (
        f"memdir: {tool} was not run: memory is read-only in a subagent; search and read it "
        "(memory_search, memory_get), and hand what should be remembered back to the main "
        "session in your answer."
    )
    return json.dumps(
        {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }
    )


def session_end(hook: Hook) -> str:
    """U3 at SessionEnd: the host's session is recorded ended, with the counts of what it
    wrote (adopted first if memdir never saw it)."""
    memory = hook.memory
    if not memory.settings.enabled:
        return ""
    session_id = hook.field("session_id")
    found = memory.adopt_session(session_id, hook.surface)
    if found.ended is None:
        memory.end_session(session_id)
    return ""


def _memdir_tool(name: str) -> str | None:
    """The memdir tool an MCP tool name calls: mcp__<server>__<tool> with memdir in the
    server's name (`memdir`, or a plugin's `plugin_memdir_memdir`)."""
    if not name.startswith("mcp__"):
        return None
    server, _, tool = name[5:].rpartition("__")
    return tool if "memdir" in server and tool else None


EVENTS: dict[str, Callable[[Hook], str]] = {
    "SessionStart": session_start,
    "SubagentStart": subagent_start,
    "PreToolUse": pre_tool_use,
    "SessionEnd": session_end,
}


# -- the budget ----------------------------------------------------------------------------

TRAILER_ROOM = 400  # chars kept for the last line, which names what was left out
MIN_CUT = 200  # a part cut shorter than this is left out whole instead


def fit(parts: list[BootPart], budget: int, root: str, header: bool = True) -> str:
    """The parts in order, each whole while it fits in `budget`; the first that does not
    is cut at a line break (if enough room is left), later ones only if they fit whole.
    A last line names what was left out and how to read it."""
    chunks: list[str] = []
    left_out: list[str] = []
    room = budget - TRAILER_ROOM
    if header:
        chunks.append("# memdir: memory from earlier sessions\n")
        room -= len(chunks[0])
    for part in parts:
        title = f"## {part.name}\n"
        body = part.text.rstrip("\n") + "\n"
        name = _readable(part.path, root)
        if len(title) + len(body) + 1 <= room:
            chunks.append(f"{title}{body}\n")
            room -= len(chunks[-1])
            continue
        keep = room - len(title) - 1
        if keep >= MIN_CUT:
            end = body.rfind("\n", 0, keep)
            head = body[: end if end > 0 else keep].rstrip("\n") + "\n"
            chunks.append(f"{title}{head}\n")
            room -= len(chunks[-1])
            left_out.append(f"{name} (cut after {len(head):,} of {len(body):,} chars)")
        else:
            left_out.append(f"{name} ({len(body):,} chars)")
    if not parts:
        return ""
    text = "".join(chunks).rstrip("\n") + "\n"
    if left_out:
        text += "\n" + _trailer(left_out, budget - len(text) - 1)
    return text


def _trailer(left_out: list[str], room: int) -> str:
    how = (
        "; read them with the memory_get tool (its path as named here) or "
        "`memdir get PATH`, or find what you need with memory_search.\n"
    )
    named: list[str] = []
    for i, item in enumerate(left_out):
        rest = len(left_out) - i - 1
        more = f" and {rest} more" if rest else ""
        line = "memdir: left out to stay within the budget: " + ", ".join([*named, item]) + more
        if len(line) + len(how) > room and named:
            break
        named.append(item)
    rest = len(left_out) - len(named)
    more = f" and {rest} more" if rest else ""
    return "memdir: left out to stay within the budget: " + ", ".join(named) + more + how


def _readable(path: str, root: str) -> str:
    """The name `memdir get` and memory_get take: relative to the memory root, or the
    identity file's own name."""
    rel = os.path.relpath(path, root).replace(os.sep, "/")
    return os.path.basename(path) if rel.startswith("../") else rel


# -- the dispatcher ------------------------------------------------------------------------


def run(
    event: str | None,
    stdin: str,
    env: Mapping[str, str] | None = None,
    state_dir: str | None = None,
    surface: str = SURFACE,
) -> Reply:
    """One event's reply; never raises. `surface` names the host whose sessions these
    are (claude-code, codex: Codex's hook input and replies have Claude Code's shape)."""
    import json

    env = os.environ if env is None else env
    handler = EVENTS.get(event or "")
    if handler is None:
        known = ", ".join(EVENTS)
        return Reply(warning=f"unknown hook event {event!r}: memdir answers {known}")
    if not stdin.strip():
        return Reply(warning="no input on stdin, where the host sends the event's JSON")
    try:
        data = json.loads(stdin)
    except ValueError as exc:
        return Reply(warning=f"the input is not JSON ({exc}); nothing was done")
    if not isinstance(data, dict):
        return Reply(warning="the input is not a JSON object; nothing was done")
    hook = Hook(event or "", data, env, state_dir, surface)
    try:
        out = handler(hook)
    except MemdirError as exc:
        return Reply(warning=f"{exc}; nothing was done")
    except Exception as exc:  # a bug: still never the host's problem
        return Reply(warning=f"internal error: {type(exc).__name__}: {exc} (please report it)")
    finally:
        hook.close()
    return Reply(out, "; ".join(hook.warnings) or None)


def _watchdog(event: str, budget_ms: int) -> threading.Timer:
    """Give up once the hook has run `budget_ms`: one line on stderr, exit 0, nothing
    printed; the host goes on as if the hook had said nothing."""
    import threading

    def give_up() -> None:
        sys.stderr.write(
            f"memdir: hook {event} gave up after {budget_ms:,} ms ([hooks] timeout_ms); "
            "nothing was injected\n"
        )
        sys.stderr.flush()
        os._exit(0)

    timer = threading.Timer(budget_ms / 1000, give_up)
    timer.daemon = True
    timer.start()
    return timer
