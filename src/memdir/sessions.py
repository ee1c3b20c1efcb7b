"""Sessions (U1-U4): who is writing. A session with a parent is a subagent: read-only."""

from __future__ import annotations

import os
import re
import time

from . import advice
from .errors import ReadOnlyError, ValidationError
from .models import Session
from .paths import full_match

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
