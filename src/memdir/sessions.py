"""Sessions (U1-U4): who is writing. A session with a parent is a subagent: read-only.

A session id memdir has not seen (a host's: Claude Code's UUID) is adopted on first use,
never refused: it is a top-level session of the caller's surface, recorded by the first
write (or by the host's own hook, which records subagents under their parent)."""

from __future__ import annotations

import os
import re
import time

from . import advice, process
from .errors import ConflictError, ReadOnlyError, ValidationError
from .models import Session
from .names import full_match

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

# Hosts that name their session in the environment of the processes they start (the MCP
# server): the variable, and the surface a session adopted from it gets (U1, K3).
HOST_SESSION_ENVS = (("CLAUDE_CODE_SESSION_ID", "claude-code"),)

SESSION_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
SURFACE_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")


def new_id(now: float) -> str:
    """Sortable by start time, unique without coordination: UTC time plus random bits."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now)) + "-" + os.urandom(4).hex()


def check_id(session_id: str) -> str:
    if not full_match(SESSION_ID_RE, session_id):
        raise ValidationError(
            f"bad session id {session_id!r}: use letters, digits, '.', '_', ':' or '-' "
            f"(at most 128); a new session gets one from {advice.session_start()}"
        )
    return session_id


def host_session(env: Mapping[str, str]) -> tuple[str, str] | None:
    """The host's session id and surface from a host's environment (K3), if it names one."""
    for name, surface in HOST_SESSION_ENVS:
        value = env.get(name)
        if value:
            return check_id(value), surface
    return None


HOST_PID_ENV = "CLAUDE_PID"  # Claude Code's own pid, in its hooks' environment


def host_process(env: Mapping[str, str]) -> str:
    """K3: the host process a hook or MCP server runs under (CLAUDE_PID where the host
    sets it, else the parent), named so that a hook and the server find the same one."""
    pid = env.get(HOST_PID_ENV, "")
    return process_name(int(pid) if pid.isdigit() else process.parent_pid())


def process_name(pid: int) -> str:
    """A name for process `pid` that no later process reusing the pid shares: the pid and
    its start time (Linux /proc; elsewhere the pid alone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return str(pid)
    # the fields after the command's ")" (the command may hold spaces and parentheses);
    # starttime is the 22nd field of the whole line, the 20th after it
    fields = stat[stat.rfind(b")") + 2 :].split()
    return f"{pid}-{fields[19].decode()}" if len(fields) > 19 else str(pid)


def host_key(process: str) -> str:
    """The store's key for the session a host process runs now (set at its SessionStart)."""
    return f"host-process:{process}"


def unrecorded(session_id: str, surface: str, parent_id: str | None, now: str) -> Session:
    """U1: the record of a session memdir has not seen yet, as it will be adopted."""
    return Session(session_id, surface, parent_id, now, None, {})


def check_surface(surface: str) -> str:
    if not full_match(SURFACE_RE, surface):
        raise ValidationError(
            f"bad surface {surface!r}: use a lowercase word such as cli, repl, telegram, daemon, "
            "scheduled or mcp"
        )
    return surface


def refuse_if_subagent(session: Session | None) -> None:
    """U2: the one place that decides a write is not allowed from a subagent."""
    if session is not None and session.is_subagent:
        raise ReadOnlyError(
            f"session {session.id} is a subagent session (parent {session.parent_id}) and "
            "memory is read-only there; hand what should be remembered back to the parent session"
        )


def lineage(session: Session, lookup: Callable[[str], Session | None]) -> list[str]:
    """The ids from `session` up to its top-level owner (itself first). A chain that
    loops or runs past 64 levels stops there: a record is never trusted to end."""
    chain = [session.id]
    current: Session | None = session
    while current is not None and current.parent_id and len(chain) < 64:
        if current.parent_id in chain:
            break
        chain.append(current.parent_id)
        current = lookup(current.parent_id)
    return chain


def owns(caller: Session, target: Session, lookup: Callable[[str], Session | None]) -> bool:
    """U2: who may act on `target`. A session owns itself; a top-level session also owns
    every subagent session started under it (at any depth); a subagent owns only itself."""
    if caller.id == target.id:
        return True
    return not caller.is_subagent and caller.id in lineage(target, lookup)


def check_may_end(
    caller: Session | None, target: Session, lookup: Callable[[str], Session | None]
) -> None:
    """U2: only the session itself or its top-level owner ends it. A caller bound to no
    session is the person at the keyboard (U4: a plain top-level cli caller) and may."""
    if caller is None or owns(caller, target, lookup):
        return
    who = "a subagent session" if caller.is_subagent else "a session"
    raise ReadOnlyError(
        f"session {caller.id} cannot end session {target.id}: {who} ends only itself"
        + ("" if caller.is_subagent else " and the subagent sessions started under it")
        + "; nothing was changed"
    )


def check_may_start(
    caller: Session | None, parent: Session | None, lookup: Callable[[str], Session | None]
) -> None:
    """U2: a session starts subagents under itself (or, top-level, under its own
    subagents) and never under an ended or unrelated session; a subagent never starts a
    top-level session, which would let it write."""
    if parent is not None and parent.ended is not None:
        raise ConflictError(
            f"session {parent.id} ended at {parent.ended}: start a subagent under an open session"
        )
    if caller is None:
        return
    if parent is None:
        if caller.is_subagent:
            raise ReadOnlyError(
                f"session {caller.id} is a subagent session and cannot start a top-level "
                f"session; start a subagent under it with --parent {caller.id}"
            )
        return
    if not owns(caller, parent, lookup):
        raise ReadOnlyError(
            f"session {caller.id} cannot start a session under {parent.id}, which is not its "
            f"own; use --parent {caller.id}"
        )


def check_may_act_as(
    ambient: Session, chosen: Session, lookup: Callable[[str], Session | None]
) -> None:
    """U2/U4: a process whose environment names a subagent session (MEMDIR_SESSION_ID,
    inherited from the parent) cannot pick another session with --session to write as it."""
    if ambient.is_subagent and not owns(ambient, chosen, lookup):
        raise ReadOnlyError(
            f"this process runs as subagent session {ambient.id} (MEMDIR_SESSION_ID) and "
            f"cannot act as session {chosen.id}; a subagent acts only as itself"
        )
