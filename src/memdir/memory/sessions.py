"""The Memory facade's sessions (U1-U4) and the store's statistics (D2)."""

from __future__ import annotations

from .. import advice, sessions
from ..clock import iso
from ..errors import ConflictError, NotFoundError
from ..lazy import lazy
from ..models import Session
from .base import MemoryBase

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .. import hot, search, stats
    from ..types import Surface
else:
    hot = lazy("memdir.hot")
    search = lazy("memdir.search")
    stats = lazy("memdir.stats")


class SessionMemory(MemoryBase):
    """Sessions: start, end, list; and the numbers of every tier."""

    def start_session(self, surface: Surface | str = "cli", parent: str | None = None) -> Session:
        """U1: a new session. With a parent it is a subagent session: read-only (U2)."""
        surface = sessions.check_surface(surface)
        found: Session | None = None
        if parent is not None:
            sessions.check_id(parent)
            if parent == self.session_id and self.session is not None and self._unrecorded:
                self._enabled("start a session")
                self._adopt(self.session)  # U1: a host's session starting its first subagent
            found = self.store.get_session(parent)
            if found is None:
                raise NotFoundError(
                    f"unknown parent session {parent!r}: the sessions are listed by "
                    f"{advice.sessions()}",
                    kind="session",
                    key=parent,
                )
        sessions.check_may_start(self.session, found, self.store.get_session)
        self._enabled("start a session")
        now = self.clock()
        return self.store.start_session(sessions.new_id(now), surface, parent, iso(now))

    def adopt_session(
        self,
        session_id: str,
        surface: Surface | str = "cli",
        parent: str | None = None,
        *,
        reopen: bool = False,
        host: str | None = None,
    ) -> Session:
        """U1, K3: a host's session (Claude Code's id), recorded if memdir has not seen it.
        With a parent, a subagent of that session (read-only, U2; an unseen
        parent is adopted too); `reopen`: an ended top-level session the host resumed is
        open again. U2 holds: a subagent caller adopts no top-level session. `host`: the
        host process that runs it now (host_runs), recorded in the same write as a new
        session."""
        session_id = sessions.check_id(session_id)
        surface = sessions.check_surface(surface)
        self._enabled("record a session")
        found = self.store.get_session(session_id)
        if found is None:
            owner: Session | None = None
            if parent is not None:
                owner = self.adopt_session(parent, surface)
            sessions.check_may_start(self.session, owner, self.store.get_session)
            also = () if host is None else ((sessions.host_key(host), session_id),)
            try:
                found = self.store.start_session(session_id, surface, parent, self._now(), also)
                host = None  # recorded with it
            except ConflictError:  # another host process recorded it a moment ago
                found = self.store.get_session(session_id)
                assert found is not None
        if reopen and found.ended is not None and not found.is_subagent:
            sessions.check_may_end(self.session, found, self.store.get_session)
            found = self.store.reopen_session(session_id)
        if host is not None:
            self.host_runs(host, session_id)
        if session_id == self.session_id:
            self._session = found
            self._unrecorded = False
        return found

    def host_runs(self, process: str, session_id: str) -> None:
        """K3: the host process `process` (sessions.host_process) now runs `session_id`:
        its SessionStart at startup, resume, /clear or compaction. The MCP server that host
        started (one process for the host's whole life) follows it (`follow_host`)."""
        sessions.check_id(session_id)
        self._enabled("record the host's session")
        self.store.set_value(sessions.host_key(process), session_id)

    def follow_host(self, process: str, surface: Surface | str) -> None:
        """K3: act as the session the host process runs now, once its SessionStart has named
        another since the first call (after /clear, the host ends one session and starts
        the next in the same process): the new one is adopted, and later writes carry it.
        The first call takes the current name as the starting point: a name older than this
        Memory's session (a server started after it) is not followed."""
        current = self.store.get_value(sessions.host_key(process))
        seen = self._host_seen.get(process, "")
        self._host_seen[process] = current
        if seen == "" or current is None or current == seen or current == self.session_id:
            return
        self.bind_session(self.adopt_session(current, surface).id)

    def end_session(self, session_id: str) -> Session:
        """U3: record the end of a top-level session with the counts of what it wrote.
        A subagent's end is not recorded: it wrote nothing and keeps no record."""
        sessions.check_id(session_id)
        found = self.store.get_session(session_id)
        if found is None:
            raise NotFoundError(
                f"unknown session {session_id!r}: the sessions are listed by {advice.sessions()}",
                kind="session",
                key=session_id,
            )
        sessions.check_may_end(self.session, found, self.store.get_session)
        if found.is_subagent:
            return found
        if found.ended is not None:
            raise ConflictError(f"session {session_id} already ended at {found.ended}")
        self._enabled("end a session")
        ended = self.store.end_session(session_id, self._now())
        if session_id == self.session_id:
            self._session = ended
        return ended

    def sessions(self, limit: int = 100) -> list[Session]:
        """The most recent top-level sessions, newest first, with what each wrote (U1, U3)."""
        return self.store.list_sessions(search.check_limit(limit))

    def stats(self) -> stats.Stats:
        """D2: number and size of every tier, HOT.md against its cap, distillation ratio."""
        return stats.collect(
            self.layout, self.store, hot.read(self.layout, self.docs), self.settings.hot_cap_chars
        )
